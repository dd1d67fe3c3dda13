/**
 * ACL enforcement from outside: every ACL endpoint asks for the permission the contract's ACL column names. For each
 * endpoint a token with just enough (acl:read for reads, acl:write for writes) succeeds and one with just too little
 * (nothing, or acl:read for writes) is refused with 403 permission_denied naming the permission. Also: SecretID
 * redaction, token self, the authorizer cache dropped by a policy edit, synthetic policies at work, the default
 * policy, and bootstrap on an agent started without a management token.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { ANONYMOUS_ID, GLOBAL_MANAGEMENT_ID, tokenWithRules } from '../support/api.js'

describe('ACL enforcement on the ACL endpoints', () => {
  let agent: AgentProcess
  let reader: { secret: string; accessor: string }
  let writer: { secret: string; accessor: string }
  let nobody: { secret: string; accessor: string }
  let fixture: { policyId: string; roleId: string; tokenId: string; ruleId: string }

  before(async () => {
    agent = await startAgent()
    reader = await tokenWithRules(agent, 'acl = "read"', 'reader')
    writer = await tokenWithRules(agent, 'acl = "write"', 'writer')
    nobody = await tokenWithRules(agent, 'service "web" { policy = "read" }', 'nobody')
    const role = await agent.request('PUT', '/v1/acl/role', { body: { Name: 'fixture-role' } })
    const token = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'fixture' } })
    await agent.request('PUT', '/v1/acl/auth-method', {
      body: { Name: 'fixture-method', Type: 'jwt', Config: { JWKSURL: 'https://example.com/jwks' } },
    })
    const rule = await agent.request('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: 'fixture-method', BindType: 'service', BindName: 'web' } })
    const policies = await agent.request('GET', '/v1/acl/policy/name/reader')
    fixture = { policyId: policies.body.ID, roleId: role.body.ID, tokenId: token.body.AccessorID, ruleId: rule.body.ID }
  })
  after(async () => {
    await agent.stop()
  })

  const reads = (): Array<[string, string]> => [
    ['GET', '/v1/acl/policies'],
    ['GET', `/v1/acl/policy/${fixture.policyId}`],
    ['GET', '/v1/acl/policy/name/reader'],
    ['GET', '/v1/acl/roles'],
    ['GET', `/v1/acl/role/${fixture.roleId}`],
    ['GET', '/v1/acl/role/name/fixture-role'],
    ['GET', '/v1/acl/tokens'],
    ['GET', `/v1/acl/token/${fixture.tokenId}`],
    ['GET', '/v1/acl/auth-methods'],
    ['GET', '/v1/acl/auth-method/fixture-method'],
    ['GET', '/v1/acl/binding-rules'],
    ['GET', `/v1/acl/binding-rule/${fixture.ruleId}`],
    ['GET', '/v1/acl/templated-policies'],
    ['GET', '/v1/acl/templated-policy/name/builtin/dns'],
    ['POST', '/v1/acl/templated-policy/preview/builtin/dns'],
  ]

  it('serves every ACL read to a token with acl:read', async () => {
    for (const [method, path] of reads()) {
      const response = await agent.request(method, path, { token: reader.secret, ...(method === 'POST' ? { body: {} } : {}) })
      expect(response.status, `${method} ${path}: ${response.text}`).to.equal(200)
    }
  })

  it('refuses every ACL read to a token without acl:read, naming acl:read', async () => {
    for (const [method, path] of reads()) {
      const response = await agent.request(method, path, { token: nobody.secret, ...(method === 'POST' ? { body: {} } : {}) })
      expect(response.status, `${method} ${path}`).to.equal(403)
      expect(response.body.Code).to.equal('permission_denied')
      expect(response.body.Error).to.include(`token with AccessorID '${nobody.accessor}' lacks permission acl:read`)
    }
  })

  it('refuses a request without a token as the anonymous token', async () => {
    const response = await agent.request('GET', '/v1/acl/policies', { token: null })
    expect(response.status).to.equal(403)
    expect(response.body.Error).to.include("AccessorID 'anonymous' lacks permission acl:read")
  })

  it('refuses an unknown secret with 403 acl_not_found, distinct from permission_denied', async () => {
    const response = await agent.request('GET', '/v1/acl/policies', { token: 'b8a5e1c2-0000-4000-8000-000000000000' })
    expect(response.status).to.equal(403)
    expect(response.body).to.include({ Code: 'acl_not_found', Error: 'ACL not found' })
  })

  const writes = (): Array<[string, string, unknown]> => [
    ['PUT', '/v1/acl/policy', { Name: 'w-policy' }],
    ['PUT', `/v1/acl/policy/${fixture.policyId}`, { Name: 'reader', Rules: 'acl = "read"' }],
    ['DELETE', '/v1/acl/policy/6b0b4b6e-1111-4111-8111-111111111111', undefined],
    ['PUT', '/v1/acl/role', { Name: 'w-role' }],
    ['PUT', `/v1/acl/role/${fixture.roleId}`, { Name: 'fixture-role' }],
    ['DELETE', '/v1/acl/role/6b0b4b6e-1111-4111-8111-111111111111', undefined],
    ['PUT', '/v1/acl/token', {}],
    ['PUT', `/v1/acl/token/${fixture.tokenId}`, { Description: 'changed' }],
    ['PUT', `/v1/acl/token/${fixture.tokenId}/clone`, {}],
    ['DELETE', '/v1/acl/token/6b0b4b6e-1111-4111-8111-111111111111', undefined],
    ['PUT', '/v1/acl/auth-method', { Name: 'w-method', Type: 'jwt', Config: { JWKSURL: 'https://example.com/jwks' } }],
    ['PUT', '/v1/acl/auth-method/fixture-method', { Type: 'jwt', Config: { JWKSURL: 'https://example.com/jwks' } }],
    ['DELETE', '/v1/acl/auth-method/no-such-method', undefined],
    ['PUT', '/v1/acl/binding-rule', { AuthMethod: 'fixture-method', BindType: 'node', BindName: 'n1' }],
    ['PUT', `/v1/acl/binding-rule/${fixture.ruleId}`, { AuthMethod: 'fixture-method', BindType: 'service', BindName: 'web' }],
    ['DELETE', '/v1/acl/binding-rule/6b0b4b6e-1111-4111-8111-111111111111', undefined],
  ]

  it('refuses every ACL write to a token with only acl:read, naming acl:write', async () => {
    for (const [method, path, body] of writes()) {
      const response = await agent.request(method, path, { token: reader.secret, body })
      expect(response.status, `${method} ${path}`).to.equal(403)
      expect(response.body.Error).to.include('lacks permission acl:write')
    }
  })

  it('serves every ACL write to a token with acl:write', async () => {
    for (const [method, path, body] of writes()) {
      const response = await agent.request(method, path, { token: writer.secret, body })
      expect(response.status, `${method} ${path}: ${response.text}`).to.equal(200)
    }
  })

  it('shows SecretID as <hidden> to an acl:read caller and the real one to an acl:write caller', async () => {
    const hidden = await agent.request('GET', `/v1/acl/token/${fixture.tokenId}`, { token: reader.secret })
    expect(hidden.body.SecretID).to.equal('<hidden>')
    const list = await agent.request('GET', '/v1/acl/tokens', { token: reader.secret })
    expect(list.body.every((token: { SecretID: string }) => token.SecretID === '<hidden>')).to.equal(true)
    const shown = await agent.request('GET', `/v1/acl/token/${fixture.tokenId}`, { token: writer.secret })
    expect(shown.body.SecretID).to.match(/^[0-9a-f-]{36}$/)
  })

  it('shows a token its own real secret on token self, with no permission needed', async () => {
    const self = await agent.request('GET', '/v1/acl/token/self', { token: nobody.secret })
    expect(self.status).to.equal(200)
    expect(self.body.SecretID).to.equal(nobody.secret)
    expect(self.body.AccessorID).to.equal(nobody.accessor)
  })

  it('refuses a request right after the policy that allowed it was edited (the authorizer cache is dropped)', async () => {
    const changing = await tokenWithRules(agent, 'acl = "write"', 'changing')
    const before = await agent.request('PUT', '/v1/acl/policy', { token: changing.secret, body: { Name: 'made-before-edit' } })
    expect(before.status).to.equal(200)
    const edit = await agent.request('PUT', `/v1/acl/policy/${changing.policy.ID}`, { body: { Name: 'changing', Rules: 'acl = "read"' } })
    expect(edit.status).to.equal(200)
    const after = await agent.request('PUT', '/v1/acl/policy', { token: changing.secret, body: { Name: 'made-after-edit' } })
    expect(after.status).to.equal(403)
    expect(after.body.Error).to.include('acl:write')
  })

  it('refuses a deleted token at once and a token whose role lost its policy', async () => {
    const policy = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'via-role', Rules: 'acl = "read"' } })
    const role = await agent.request('PUT', '/v1/acl/role', { body: { Name: 'reading-role', Policies: [{ ID: policy.body.ID }] } })
    const token = await agent.request('PUT', '/v1/acl/token', { body: { Roles: [{ Name: 'reading-role' }] } })
    expect((await agent.request('GET', '/v1/acl/policies', { token: token.body.SecretID })).status).to.equal(200)
    await agent.request('PUT', `/v1/acl/role/${role.body.ID}`, { body: { Name: 'reading-role', Policies: [] } })
    expect((await agent.request('GET', '/v1/acl/policies', { token: token.body.SecretID })).status).to.equal(403)
    await agent.request('DELETE', `/v1/acl/token/${token.body.AccessorID}`)
    const gone = await agent.request('GET', '/v1/acl/policies', { token: token.body.SecretID })
    expect(gone.body.Code).to.equal('acl_not_found')
  })

  it('ignores a policy whose Datacenters leave this datacenter out', async () => {
    const policy = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'elsewhere', Rules: 'acl = "read"', Datacenters: ['dc9'] } })
    const token = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.body.ID }] } })
    expect((await agent.request('GET', '/v1/acl/policies', { token: token.body.SecretID })).status).to.equal(403)
  })

  it('grants what the global-management policy grants to a token linked to it', async () => {
    const token = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } })
    const response = await agent.request('PUT', '/v1/acl/policy', { token: token.body.SecretID, body: { Name: 'made-by-management' } })
    expect(response.status).to.equal(200)
  })

  it('gives the anonymous token what its policies grant', async () => {
    const policy = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'anonymous-read', Rules: 'acl = "read"' } })
    const anonymous = await agent.request('GET', `/v1/acl/token/${ANONYMOUS_ID}`)
    await agent.request('PUT', `/v1/acl/token/${ANONYMOUS_ID}`, {
      body: { ...anonymous.body, Policies: [{ ID: policy.body.ID }] },
    })
    const response = await agent.request('GET', '/v1/acl/policies', { token: null })
    expect(response.status).to.equal(200)
    await agent.request('PUT', `/v1/acl/token/${ANONYMOUS_ID}`, { body: { ...anonymous.body, Policies: [] } })
    expect((await agent.request('GET', '/v1/acl/policies', { token: null })).status).to.equal(403)
  })

  it('refuses an invalid rule set with a 400 that names the line and column', async () => {
    const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'broken', Rules: 'acl = "read"\nservice "web" {\n  policy = "writ"\n}' } })
    expect(response.status).to.equal(400)
    expect(response.body.Field).to.equal('Rules')
    expect(response.body.Error).to.match(/line 3, column \d+/)
  })

  it('refuses namespace blocks with a clear message', async () => {
    const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'ns-rules', Rules: 'namespace "team" { acl = "read" }' } })
    expect(response.status).to.equal(400)
    expect(response.body.Error).to.include('namespace')
  })

  it('accepts the JSON form of the rules', async () => {
    const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'json-rules', Rules: '{"acl": "read", "service": {"web": {"policy": "write"}}}' } })
    expect(response.status, response.text).to.equal(200)
  })

  it('reports the agent default and down policies in an expanded read', async () => {
    const response = await agent.request('GET', `/v1/acl/token/${fixture.tokenId}?expanded=true`)
    expect(response.body.AgentACLDefaultPolicy).to.equal('deny')
    expect(response.body.AgentACLDownPolicy).to.equal('extend-cache')
    expect(response.body.ResolvedByAgent).to.equal('test-node')
  })

  it('hides auth method credentials (ServiceAccountJWT) from a caller with only acl:read', async () => {
    const created = await agent.request('PUT', '/v1/acl/auth-method', {
      body: { Name: 'oidc-secret', Type: 'oidc', MaxTokenTTL: '10m', Config: { OIDCDiscoveryURL: 'https://idp.example.com', OIDCClientID: 'warden', OIDCClientSecret: 'very-secret', AllowedRedirectURIs: ['https://app.example.com/cb'] } },
    })
    expect(created.status, created.text).to.equal(200)
    const hidden = await agent.request('GET', '/v1/acl/auth-method/oidc-secret', { token: reader.secret })
    expect(hidden.body.Config.OIDCClientSecret).to.equal('<hidden>')
    expect(hidden.text).to.not.include('very-secret')
    const shown = await agent.request('GET', '/v1/acl/auth-method/oidc-secret', { token: writer.secret })
    expect(shown.body.Config.OIDCClientSecret).to.equal('very-secret')
  })

  it('refuses a request for a datacenter it does not know on the ACL endpoints (404 unknown_datacenter), writing nothing', async () => {
    const response = await agent.request('PUT', '/v1/acl/policy?dc=dc9', { body: { Name: 'elsewhere-dc' } })
    expect(response.status).to.equal(404)
    expect(response.body.Code).to.equal('unknown_datacenter')
    expect(response.body.Field).to.equal('dc')
    expect((await agent.request('GET', '/v1/acl/policy/name/elsewhere-dc')).status).to.equal(404)
    expect((await agent.request('GET', '/v1/acl/policies?dc=dc1')).status).to.equal(200)
  })

  it('refuses a caller deleting its own token', async () => {
    const response = await agent.request('DELETE', `/v1/acl/token/${writer.accessor}`, { token: writer.secret })
    expect(response.status).to.equal(400)
    expect(response.body.Error).to.include('own token')
  })
})

describe('ACL enforcement with default policy allow', () => {
  let agent: AgentProcess
  before(async () => {
    agent = await startAgent({ args: ['--default-policy', 'allow'] })
  })
  after(async () => {
    await agent.stop()
  })

  it('lets a token with no rule for acl write the ACL API', async () => {
    const token = await agent.request('PUT', '/v1/acl/token', { body: {} })
    const response = await agent.request('PUT', '/v1/acl/policy', { token: token.body.SecretID, body: { Name: 'by-default' } })
    expect(response.status).to.equal(200)
    expect(response.headers.get('x-service-default-acl-policy')).to.equal('allow')
  })

  it('treats an explicit acl = "read" as a denial of acl:write, not a fall-through to allow', async () => {
    const policy = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'read-only', Rules: 'acl = "read"' } })
    const token = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.body.ID }] } })
    const response = await agent.request('PUT', '/v1/acl/policy', { token: token.body.SecretID, body: { Name: 'refused' } })
    expect(response.status).to.equal(403)
  })
})

describe('ACL bootstrap on an agent started without a management token', () => {
  let agent: AgentProcess
  before(async () => {
    agent = await startAgent({ dev: false })
  })
  after(async () => {
    await agent.stop()
  })

  it('creates a global-management token once and returns its secret', async () => {
    expect(agent.managementToken).to.equal('')
    const first = await agent.request('PUT', '/v1/acl/bootstrap', { token: null })
    expect(first.status, first.text).to.equal(200)
    expect(first.body.SecretID).to.match(/^[0-9a-f-]{36}$/)
    expect(first.body.Policies).to.deep.equal([{ ID: GLOBAL_MANAGEMENT_ID, Name: 'global-management' }])
    const usable = await agent.request('PUT', '/v1/acl/policy', { token: first.body.SecretID, body: { Name: 'after-bootstrap' } })
    expect(usable.status).to.equal(200)
    const second = await agent.request('PUT', '/v1/acl/bootstrap', { token: null })
    expect(second.status).to.equal(403)
    expect(second.body.Code).to.equal('bootstrap_done')
  })
})
