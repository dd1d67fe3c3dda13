/**
 * What a token may do (issue 21), on one real agent: `GET /v1/acl/token/:AccessorID/permissions` (acl:read) lists
 * every resource's rules with the sources that decided them, and `POST /v1/internal/acl/authorize` (Consul's; the
 * caller's own token, no permission needed) answers a list of checks. The two are compared on a token linking a
 * policy, a role, identities and a templated policy: for each sample check, the answer read off the permissions view
 * (exact rule, else longest prefix rule, else what decides otherwise) must equal the authorizer's, as the authorize
 * endpoint gives it for the same token.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError, GLOBAL_MANAGEMENT_ID, MISSING_ID, ok, secretWithRules, unique } from '../support/api.js'

interface Rule {
  Segment?: string
  Match?: string
  Keyword: string
  Access: string
  Grants: string[]
  DecidedBy: Array<Record<string, unknown>>
  Overridden?: Array<Record<string, unknown>>
}
interface View {
  Management: boolean
  DefaultPolicy: string
  Sources: Array<Record<string, unknown>>
  Resources: Record<string, { Rules: Rule[]; Otherwise?: { Access: string; Grants: string[]; DecidedBy: Array<Record<string, unknown>> } }>
}

/** The view's answer for one check, read as the README documents it. */
function answerOf(view: View, resource: string, access: string, segment: string): boolean {
  const { Rules: rules, Otherwise: otherwise } = view.Resources[resource] ?? { Rules: [] }
  const plain = rules.find((rule) => rule.Segment === undefined)
  const exact = rules.find((rule) => rule.Match === 'exact' && rule.Segment === segment)
  const prefix = rules
    .filter((rule) => rule.Match === 'prefix' && segment.startsWith(rule.Segment ?? ''))
    .sort((a, b) => (b.Segment ?? '').length - (a.Segment ?? '').length)[0]
  return ((plain ?? exact ?? prefix)?.Grants ?? otherwise?.Grants ?? []).includes(access)
}

describe('ACL permissions and authorize', function () {
  this.timeout(30_000)
  let agent: AgentProcess
  let token: { AccessorID: string; SecretID: string }
  let view: View

  before(async () => {
    agent = await startAgent()
    const web = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('web'), Rules: 'service "web" { policy = "read" }\nkey_prefix "app/" { policy = "write" }\nkey "app/locked" { policy = "read" }\nmesh = "read"' })
    const ops = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('ops'), Rules: 'operator = "write"\nservice "web" { policy = "write" }\nnode_prefix "" { policy = "read" }' })
    const elsewhere = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('elsewhere'), Rules: 'acl = "write"', Datacenters: ['dc9'] })
    const role = await ok(agent, 'PUT', '/v1/acl/role', { Name: unique('ops-role'), Policies: [{ ID: ops.ID }], ServiceIdentities: [{ ServiceName: 'api' }] })
    token = await ok(agent, 'PUT', '/v1/acl/token', {
      Policies: [{ ID: web.ID }, { ID: elsewhere.ID }],
      Roles: [{ ID: role.ID }],
      NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc1' }],
      TemplatedPolicies: [{ TemplateName: 'builtin/dns' }],
    })
    view = await ok(agent, 'GET', `/v1/acl/token/${token.AccessorID}/permissions`)
  })
  after(async () => {
    await agent.stop()
  })

  describe('GET /v1/acl/token/:AccessorID/permissions', () => {
    it('lists every source the token links, with whether it applies in this datacenter', () => {
      const sources = view.Sources.map((source) => [source.Type, source.AppliesHere])
      expect(sources).to.deep.equal([
        ['policy', true],
        ['policy', false],
        ['policy', true],
        ['node-identity', true],
        ['templated-policy', true],
        ['service-identity', true],
      ])
      expect(view.Management).to.equal(false)
      expect(view.DefaultPolicy).to.equal('deny')
    })

    it('names the source that decided a rule and the one it overrode', () => {
      const web = view.Resources.service?.Rules.find((rule) => rule.Match === 'exact' && rule.Segment === 'web')
      expect(web?.Access).to.equal('write')
      expect(web?.DecidedBy.map((source) => [source.Type, (source.Via as Array<{ Type: string }>)[0]?.Type])).to.deep.equal([['policy', 'role']])
      expect(web?.Overridden?.map((source) => source.Access)).to.deep.equal(['read'])
      const api = view.Resources.service?.Rules.find((rule) => rule.Segment === 'api')
      expect(api?.DecidedBy[0]).to.include({ Type: 'service-identity', Name: 'api' })
    })

    it('an explicit mesh rule decides mesh; the default policy decides what no rule covers', () => {
      expect(view.Resources.mesh?.Rules.map((rule) => [rule.Keyword, rule.Access])).to.deep.equal([['mesh', 'read']])
      expect(view.Resources.acl).to.deep.equal({ Rules: [], Otherwise: { Access: 'deny', Grants: [], DecidedBy: [{ Type: 'default-policy', Name: 'deny' }] } })
    })

    it('agrees with the authorize endpoint for the same token on sample resources', async () => {
      const samples: Array<[string, string, string]> = []
      const segments = ['', 'web', 'web-sidecar-proxy', 'api', 'db', 'n1', 'n2', 'app/', 'app/x', 'app/locked', 'other', 'dns']
      for (const resource of Object.keys(view.Resources)) {
        for (const access of resource === 'key' ? ['read', 'list', 'write'] : ['read', 'write']) {
          for (const segment of segments) samples.push([resource, access, segment])
        }
      }
      // At most 64 checks a call, as Consul.
      for (let start = 0; start < samples.length; start += 64) {
        const batch = samples.slice(start, start + 64)
        const response = await agent.request('POST', '/v1/internal/acl/authorize', { token: token.SecretID, body: batch.map(([Resource, Access, Segment]) => ({ Resource, Segment, Access })) })
        expect(response.status, response.text).to.equal(200)
        batch.forEach(([resource, access, segment], index) => {
          expect(answerOf(view, resource, access, segment), `${resource}:${access} on ${JSON.stringify(segment)}`).to.equal(response.body[index].Allow)
        })
      }
      expect(samples.length).to.be.greaterThan(300)
    })

    it('a management token may do everything', async () => {
      const self = await ok(agent, 'GET', '/v1/acl/token/self')
      const management: View = await ok(agent, 'GET', `/v1/acl/token/${self.AccessorID}/permissions`)
      expect(management.Management).to.equal(true)
      expect(management.Resources.key?.Otherwise).to.deep.include({ Access: 'write', Grants: ['read', 'list', 'write'] })
      expect(management.Resources.key?.Otherwise?.DecidedBy[0]).to.include({ Type: 'policy', ID: GLOBAL_MANAGEMENT_ID })
    })

    it('needs acl:read; a missing token is a 404; a bad AccessorID a 400 naming it', async () => {
      expectError(await agent.request('GET', `/v1/acl/token/${token.AccessorID}/permissions`, { token: token.SecretID }), 403, 'permission_denied')
      const reader = await secretWithRules(agent, 'acl = "read"')
      expect((await agent.request('GET', `/v1/acl/token/${token.AccessorID}/permissions`, { token: reader })).status).to.equal(200)
      expectError(await agent.request('GET', `/v1/acl/token/${MISSING_ID}/permissions`), 404, 'not_found')
      expectError(await agent.request('GET', '/v1/acl/token/not-a-uuid/permissions'), 400, 'invalid_input', 'AccessorID')
    })
  })

  describe('POST /v1/internal/acl/authorize', () => {
    it("answers the list as sent, with Allow, for the caller's own token (Segment left out when empty)", async () => {
      const response = await agent.request('POST', '/v1/internal/acl/authorize', {
        token: token.SecretID,
        body: [
          { Resource: 'service', Segment: 'web', Access: 'WRITE' },
          { Resource: 'acl', Access: 'read' },
          { Resource: 'key', Segment: 'app/', Access: 'write-prefix' },
          { Resource: 'key', Segment: 'app/x/', Access: 'write-prefix' },
        ],
      })
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.deep.equal([
        { Resource: 'service', Segment: 'web', Access: 'WRITE', Allow: true },
        { Resource: 'acl', Access: 'read', Allow: false },
        // key "app/locked" (read) lies under app/, so not every key there may be written.
        { Resource: 'key', Segment: 'app/', Access: 'write-prefix', Allow: false },
        { Resource: 'key', Segment: 'app/x/', Access: 'write-prefix', Allow: true },
      ])
    })

    it('needs no permission, but a token that exists', async () => {
      const anonymous = await agent.request('POST', '/v1/internal/acl/authorize', { token: null, body: [{ Resource: 'operator', Access: 'read' }] })
      expect(anonymous.status, anonymous.text).to.equal(200)
      expect(anonymous.body).to.deep.equal([{ Resource: 'operator', Access: 'read', Allow: false }])
      expectError(await agent.request('POST', '/v1/internal/acl/authorize', { token: MISSING_ID, body: [] }), 403, 'acl_not_found')
      expect((await agent.request('POST', '/v1/internal/acl/authorize', { body: [] })).body).to.deep.equal([])
    })

    it('refuses more than 64 checks, and names the field of a bad one', async () => {
      const many = Array.from({ length: 65 }, () => ({ Resource: 'acl', Access: 'read' }))
      expectError(await agent.request('POST', '/v1/internal/acl/authorize', { body: many }), 400, 'invalid_input', 'body')
      expectError(await agent.request('POST', '/v1/internal/acl/authorize', { body: [{ Resource: 'acl', Access: 'read' }, { Resource: 'bogus', Access: 'read' }] }), 400, 'invalid_input', '[1].Resource')
      expectError(await agent.request('POST', '/v1/internal/acl/authorize', { body: [{ Resource: 'service', Segment: 'web', Access: 'list' }] }), 400, 'invalid_input', '[0].Access')
      expectError(await agent.request('POST', '/v1/internal/acl/authorize', { body: [{ Resource: 'acl' }] }), 400, 'invalid_input', '[0].Access')
      expectError(await agent.request('POST', '/v1/internal/acl/authorize', { body: [{ Resource: 'acl', Access: 'read', Extra: 1 }] }), 400, 'invalid_input', '[0].Extra')
      expectError(await agent.request('POST', '/v1/internal/acl/authorize', { body: { Resource: 'acl', Access: 'read' } }), 400, 'invalid_input', 'body')
    })
  })
})
