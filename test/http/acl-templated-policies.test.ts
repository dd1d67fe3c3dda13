/**
 * ACL templated policies over HTTP, against the contract (api.md, "Templated policies") and the issue: the five
 * builtins (builtin/service, builtin/node, builtin/dns, builtin/scheduler-server, builtin/workload-identity) are
 * listed and readable by their slash-containing names; preview validates the `name` variable against the template's
 * schema (a 400 naming it) and renders a synthetic policy whose ID starts with the hex of its rules and whose Name is
 * `synthetic-policy-` followed by that ID, with indexes 0. Reading needs acl:read.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError, secretWithRules } from '../support/api.js'

const BUILTINS = ['builtin/dns', 'builtin/node', 'builtin/scheduler-server', 'builtin/service', 'builtin/workload-identity']
const WITH_NAME = ['builtin/node', 'builtin/service', 'builtin/workload-identity']
const WITHOUT_VARIABLES = ['builtin/dns', 'builtin/scheduler-server']

describe('ACL templated policies', () => {
  let agent: AgentProcess
  let readToken: string

  before(async () => {
    agent = await startAgent()
    readToken = await secretWithRules(agent, 'acl = "read"', 'acl-reader')
  })
  after(async () => {
    await agent.stop()
  })

  describe('list and read', () => {
    it('list answers one object mapping each of the five builtin names to its record', async () => {
      const response = await agent.request('GET', '/v1/acl/templated-policies')
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.be.an('object').and.not.be.an('array')
      expect(Object.keys(response.body).sort()).to.deep.equal(BUILTINS)
      for (const [name, record] of Object.entries(response.body as Record<string, Record<string, unknown>>)) {
        expect(record.TemplateName).to.equal(name)
        expect(record.Schema).to.be.a('string')
        expect(record.Template).to.be.a('string').that.is.not.empty
      }
    })

    it('read by a name containing a slash returns the same record as the list', async () => {
      const list = (await agent.request('GET', '/v1/acl/templated-policies')).body as Record<string, unknown>
      for (const name of BUILTINS) {
        const read = await agent.request('GET', `/v1/acl/templated-policy/name/${name}`)
        expect(read.status, `${name}: ${read.text}`).to.equal(200)
        expect(read.body).to.deep.equal(list[name])
      }
    })

    it('templates taking `name` have a JSON-schema requiring a string `name` of at least 1 character', async () => {
      for (const name of WITH_NAME) {
        const read = await agent.request('GET', `/v1/acl/templated-policy/name/${name}`)
        const schema = JSON.parse(read.body.Schema as string) as { required?: string[]; properties?: Record<string, unknown> }
        expect(schema.required, name).to.include('name')
        expect(schema.properties, name).to.have.property('name')
        expect(read.body.Template, name).to.include('{{.Name}}')
      }
    })

    it('builtin/dns and builtin/scheduler-server take no variables: Schema is ""', async () => {
      for (const name of WITHOUT_VARIABLES) {
        const read = await agent.request('GET', `/v1/acl/templated-policy/name/${name}`)
        expect(read.body.Schema, name).to.equal('')
      }
    })

    it('read of an unknown template is a 404 not_found', async () => {
      expectError(await agent.request('GET', '/v1/acl/templated-policy/name/builtin/nope'), 404, 'not_found')
      expectError(await agent.request('GET', '/v1/acl/templated-policy/name/nope'), 404, 'not_found')
    })
  })

  describe('preview', () => {
    it('preview renders the template with Name into a synthetic policy with indexes 0', async () => {
      const response = await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/service', { body: { Name: 'api' } })
      expect(response.status, response.text).to.equal(200)
      const policy = response.body
      expect(policy.Rules).to.be.a('string').and.include('service "api"')
      expect(policy.Rules).to.include('service "api-sidecar-proxy"')
      expect(policy.Rules).to.not.include('{{')
      expect(policy.Description).to.be.a('string').and.include('builtin/service')
      expect(policy.Hash).to.be.a('string').that.is.not.empty
      expect(policy.CreateIndex).to.equal(0)
      expect(policy.ModifyIndex).to.equal(0)
    })

    it("the synthetic policy's ID starts with the hex of its rules and its Name is synthetic-policy-<ID>", async () => {
      for (const [template, body] of [
        ['builtin/service', { Name: 'api' }],
        ['builtin/node', { Name: 'node-1' }],
        ['builtin/workload-identity', { Name: 'worker' }],
        ['builtin/dns', {}],
        ['builtin/scheduler-server', {}],
      ] as const) {
        const response = await agent.request('POST', `/v1/acl/templated-policy/preview/${template}`, { body })
        expect(response.status, `${template}: ${response.text}`).to.equal(200)
        const { ID, Name, Rules } = response.body as { ID: string; Name: string; Rules: string }
        expect(ID.startsWith(Buffer.from(Rules, 'utf8').toString('hex')), `${template}: ID ${ID} vs rules ${JSON.stringify(Rules)}`).to.equal(true)
        expect(ID.length).to.be.above(Buffer.from(Rules, 'utf8').toString('hex').length)
        expect(Name).to.equal(`synthetic-policy-${ID}`)
      }
    })

    it('different variables give different rules and IDs', async () => {
      const a = await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/node', { body: { Name: 'node-a' } })
      const b = await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/node', { body: { Name: 'node-b' } })
      expect(a.body.Rules).to.include('node-a')
      expect(b.body.Rules).to.include('node-b')
      expect(a.body.ID).to.not.equal(b.body.ID)
    })

    it('preview without the required `name` is a 400 naming it', async () => {
      for (const template of WITH_NAME) {
        const response = await agent.request('POST', `/v1/acl/templated-policy/preview/${template}`, { body: {} })
        expectError(response, 400, 'invalid_input', /^[Nn]ame$/)
      }
    })

    it('preview with an empty `name` (below minLength 1) is a 400 naming it', async () => {
      const response = await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/service', { body: { Name: '' } })
      expectError(response, 400, 'invalid_input', /^[Nn]ame$/)
    })

    it('preview with a `name` of the wrong type is a 400 naming it', async () => {
      const response = await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/service', { body: { Name: 42 } })
      expectError(response, 400, 'invalid_input', /^[Nn]ame$/)
    })

    it('builtin/service refuses a `name` that is not a valid service name', async () => {
      const response = await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/service', { body: { Name: 'Not A Service' } })
      expectError(response, 400, 'invalid_input', /^[Nn]ame$/)
    })

    it('preview of a template without variables needs no body', async () => {
      const response = await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/dns')
      expect(response.status, response.text).to.equal(200)
      const template = await agent.request('GET', '/v1/acl/templated-policy/name/builtin/dns')
      expect(response.body.Rules).to.equal(template.body.Template)
    })

    it('an unknown field in the preview body, or malformed JSON, is a 400', async () => {
      expectError(await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/service', { body: { Name: 'api', Colour: 'x' } }), 400, 'invalid_input', 'Colour')
      expectError(await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/service', { raw: '{"Name":', headers: { 'Content-Type': 'application/json' } }), 400, 'invalid_input')
    })

    it('preview of an unknown template is a 404 not_found', async () => {
      expectError(await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/nope', { body: { Name: 'x' } }), 404, 'not_found')
    })
  })

  describe('authorization', () => {
    it('without a token, list, read and preview are 403 permission_denied', async () => {
      expectError(await agent.request('GET', '/v1/acl/templated-policies', { token: null }), 403, 'permission_denied')
      expectError(await agent.request('GET', '/v1/acl/templated-policy/name/builtin/dns', { token: null }), 403, 'permission_denied')
      expectError(await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/service', { token: null, body: { Name: 'api' } }), 403, 'permission_denied')
    })

    it('an acl:read token may list, read and preview', async () => {
      expect((await agent.request('GET', '/v1/acl/templated-policies', { token: readToken })).status).to.equal(200)
      expect((await agent.request('GET', '/v1/acl/templated-policy/name/builtin/dns', { token: readToken })).status).to.equal(200)
      const preview = await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/service', { token: readToken, body: { Name: 'api' } })
      expect(preview.status, preview.text).to.equal(200)
    })

    it('an unknown secret is a 403 acl_not_found', async () => {
      expectError(await agent.request('GET', '/v1/acl/templated-policies', { token: 'deadbeef-0000-4000-8000-000000000000' }), 403, 'acl_not_found')
    })
  })
})
