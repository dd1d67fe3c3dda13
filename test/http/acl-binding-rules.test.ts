/**
 * ACL binding rules over HTTP, against the contract (api.md, "Binding rules") and the issue: a rule belongs to an
 * existing auth method, BindType is one of service, node, role, templated-policy, BindName is required, and Selector is
 * the filter language over the method's identity fields (an invalid one is a 400 saying where). Also read, list (with
 * the authmethod filter; Selector omitted when empty), update (ID must match, AuthMethod immutable and filled in when
 * absent, PUT replaces, indexes) and delete (true, also for what never existed).
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess, type ApiResponse } from '../support/agent.js'
import { expectError, listed, MISSING_ID, ok, secretWithRules, unique, UUID } from '../support/api.js'

describe('ACL binding rules', () => {
  let agent: AgentProcess
  let readToken: string
  /** A jwt method whose claim mappings give the selector fields value.team and list.groups. */
  let jwtMethod: string
  let otherMethod: string

  const createRule = (body: Record<string, unknown>): Promise<any> => ok(agent, 'PUT', '/v1/acl/binding-rule', body)
  const ruleIds = (query = ''): Promise<string[]> => listed(agent, `/v1/acl/binding-rules${query}`, 'ID')

  async function expectRejected(body: Record<string, unknown>, field: string | RegExp): Promise<ApiResponse> {
    const before = await ruleIds('?ns=*')
    const response = await agent.request('PUT', '/v1/acl/binding-rule', { body })
    expectError(response, 400, 'invalid_input', field)
    expect(await ruleIds('?ns=*')).to.deep.equal(before)
    return response
  }

  before(async () => {
    agent = await startAgent()
    readToken = await secretWithRules(agent, 'acl = "read"', 'acl-reader')
    jwtMethod = unique('jwt')
    const created = await agent.request('PUT', '/v1/acl/auth-method', {
      body: {
        Name: jwtMethod,
        Type: 'jwt',
        Config: { JWKSURL: 'https://issuer.example.com/jwks', ClaimMappings: { team: 'team', sub: 'subject' }, ListClaimMappings: { groups: 'groups' } },
      },
    })
    expect(created.status, created.text).to.equal(200)
    otherMethod = unique('other')
    const other = await agent.request('PUT', '/v1/acl/auth-method', { body: { Name: otherMethod, Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } } })
    expect(other.status, other.text).to.equal(200)
  })
  after(async () => {
    await agent.stop()
  })

  describe('create and read', () => {
    it('a BindName may use the {{ ... }} placeholder form of the sample bodies', async () => {
      const rule = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'svc-{{ value.subject }}' })
      expect(rule.BindName).to.equal('svc-{{ value.subject }}')
    })

    it('create returns the rule with a UUID ID, defaults and equal indexes', async () => {
      const rule = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web' })
      expect(rule.ID).to.match(UUID)
      expect(rule).to.include({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web' })
      expect(rule.Description ?? '').to.equal('')
      expect(rule.Selector ?? '').to.equal('')
      expect(rule.CreateIndex).to.be.a('number').above(0)
      expect(rule.ModifyIndex).to.equal(rule.CreateIndex)
    })

    it('each BindType service, node, role and templated-policy is accepted', async () => {
      for (const bindType of ['service', 'node', 'role']) {
        const rule = await createRule({ AuthMethod: jwtMethod, BindType: bindType, BindName: 'name-1' })
        expect(rule.BindType).to.equal(bindType)
      }
      const templated = await createRule({ AuthMethod: jwtMethod, BindType: 'templated-policy', BindName: 'builtin/service', BindVars: { name: 'web' } })
      expect(templated).to.deep.include({ BindType: 'templated-policy', BindName: 'builtin/service', BindVars: { name: 'web' } })
    })

    it('a valid Selector over the method\'s identity fields is stored', async () => {
      const selector = 'value.team == "platform" and engineering in list.groups'
      const rule = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web', Selector: selector })
      expect(rule.Selector).to.equal(selector)
    })

    it('BindName may interpolate identity values with ${...}', async () => {
      const rule = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'svc-${value.team}' })
      expect(rule.BindName).to.equal('svc-${value.team}')
    })

    it('read by ID returns the rule', async () => {
      const created = await createRule({ AuthMethod: jwtMethod, BindType: 'node', BindName: 'node-a', Description: 'nodes', Selector: 'value.team == "ops"' })
      const read = await agent.request('GET', `/v1/acl/binding-rule/${created.ID}`)
      expect(read.status, read.text).to.equal(200)
      expect(read.body).to.deep.equal(created)
    })

    it('read of a missing ID is a 404 not_found', async () => {
      expectError(await agent.request('GET', `/v1/acl/binding-rule/${MISSING_ID}`), 404, 'not_found')
    })

    it('a malformed UUID in the path is a 400', async () => {
      expectError(await agent.request('GET', '/v1/acl/binding-rule/nope'), 400, 'invalid_input')
      expectError(await agent.request('PUT', '/v1/acl/binding-rule/nope', { body: { AuthMethod: jwtMethod, BindType: 'service', BindName: 'x' } }), 400, 'invalid_input')
      expectError(await agent.request('DELETE', '/v1/acl/binding-rule/nope'), 400, 'invalid_input')
    })

    it('?authmethod= lists only the rules of that method', async () => {
      const mine = await createRule({ AuthMethod: otherMethod, BindType: 'service', BindName: 'mine' })
      const theirs = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'theirs' })
      const list = (await agent.request('GET', `/v1/acl/binding-rules?authmethod=${otherMethod}`)).body as Array<{ ID: string; AuthMethod: string }>
      expect(list.map((rule) => rule.ID)).to.include(mine.ID).and.not.include(theirs.ID)
      for (const rule of list) expect(rule.AuthMethod).to.equal(otherMethod)
      expect(await ruleIds()).to.include.members([mine.ID, theirs.ID])
    })

    it('the list omits Selector when it is empty', async () => {
      const empty = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'no-selector' })
      const set = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'with-selector', Selector: 'value.team == "a"' })
      const list = (await agent.request('GET', '/v1/acl/binding-rules')).body as Array<Record<string, unknown>>
      expect(list.find((rule) => rule.ID === empty.ID)).to.not.have.property('Selector')
      expect(list.find((rule) => rule.ID === set.ID)).to.include({ Selector: 'value.team == "a"' })
    })
  })

  describe('validation (400, nothing written)', () => {
    it('AuthMethod is required', async () => {
      await expectRejected({ BindType: 'service', BindName: 'web' }, 'AuthMethod')
    })

    it('an AuthMethod that does not exist is a 400', async () => {
      await expectRejected({ AuthMethod: unique('nosuch'), BindType: 'service', BindName: 'web' }, 'AuthMethod')
    })

    it('BindType is required and must be service, node, role or templated-policy', async () => {
      await expectRejected({ AuthMethod: jwtMethod, BindName: 'web' }, 'BindType')
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'policy', BindName: 'web' }, 'BindType')
    })

    it('BindName is required', async () => {
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'service' }, 'BindName')
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'service', BindName: '' }, 'BindName')
    })

    it('a BindName interpolating a field the method does not have is a 400', async () => {
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'service', BindName: '${value.nosuch}' }, 'BindName')
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'service', BindName: '{{ value.nosuch }}' }, 'BindName')
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'svc-{{ value.name' }, 'BindName')
    })

    it('templated-policy: an unknown template in BindName or a missing variable is a 400', async () => {
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'templated-policy', BindName: 'builtin/nope' }, /BindName/)
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'templated-policy', BindName: 'builtin/service' }, /BindVars|name/)
    })

    it('a syntactically invalid Selector is a 400 naming Selector and saying where', async () => {
      const response = await expectRejected({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web', Selector: 'value.team == "a" and (' }, 'Selector')
      expect(response.body.Error).to.match(/\d/)
      const unmatched = await expectRejected({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web', Selector: 'value.team ==' }, 'Selector')
      expect(unmatched.body.Error).to.match(/column|position|offset|char|at \d/i)
    })

    it('a Selector naming a field the method does not provide is a 400', async () => {
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web', Selector: 'serviceaccount.name == "x"' }, 'Selector')
    })

    it('an unknown field, a wrong type or malformed JSON is a 400', async () => {
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web', Rules: '' }, 'Rules')
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'service', BindName: ['web'] }, 'BindName')
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'templated-policy', BindName: 'builtin/service', BindVars: ['web'] }, 'BindVars')
      const before = await ruleIds('?ns=*')
      expectError(await agent.request('PUT', '/v1/acl/binding-rule', { raw: '{"AuthMethod"', headers: { 'Content-Type': 'application/json' } }), 400, 'invalid_input')
      expect(await ruleIds('?ns=*')).to.deep.equal(before)
    })

    it('a body over 1 MiB is a 413 payload_too_large', async () => {
      const before = await ruleIds('?ns=*')
      const response = await agent.request('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: jwtMethod, BindType: 'service', BindName: 'web', Description: 'q'.repeat(1100 * 1024) } })
      expectError(response, 413, 'payload_too_large')
      expect(await ruleIds('?ns=*')).to.deep.equal(before)
    })
  })

  describe('update', () => {
    it('update replaces the rule: omitted fields take their defaults; AuthMethod absent is filled in', async () => {
      const created = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web', Description: 'old', Selector: 'value.team == "a"' })
      const updated = await agent.request('PUT', `/v1/acl/binding-rule/${created.ID}`, { body: { BindType: 'node', BindName: 'node-b' } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body).to.include({ ID: created.ID, AuthMethod: jwtMethod, BindType: 'node', BindName: 'node-b' })
      expect(updated.body.Description ?? '').to.equal('')
      expect(updated.body.Selector ?? '').to.equal('')
    })

    it('a read rule sent back as the update body (read-modify-write) is accepted; indexes in it are ignored', async () => {
      const created = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web', Selector: 'value.team == "a"' })
      const read = await agent.request('GET', `/v1/acl/binding-rule/${created.ID}`)
      const updated = await agent.request('PUT', `/v1/acl/binding-rule/${created.ID}`, { body: { ...read.body, Description: 'rmw', CreateIndex: 1, ModifyIndex: 1 } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body).to.include({ Description: 'rmw', Selector: 'value.team == "a"', CreateIndex: created.CreateIndex })
    })

    it('update raises ModifyIndex and keeps CreateIndex', async () => {
      const created = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web' })
      const updated = await agent.request('PUT', `/v1/acl/binding-rule/${created.ID}`, { body: { AuthMethod: jwtMethod, BindType: 'service', BindName: 'api' } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.ModifyIndex).to.be.above(created.ModifyIndex)
      expect(updated.body.CreateIndex).to.equal(created.CreateIndex)
    })

    it('a body ID that differs from the path is a 400 naming ID', async () => {
      const created = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web' })
      const response = await agent.request('PUT', `/v1/acl/binding-rule/${created.ID}`, { body: { ID: MISSING_ID, BindType: 'service', BindName: 'changed' } })
      expectError(response, 400, 'invalid_input', 'ID')
      expect((await agent.request('GET', `/v1/acl/binding-rule/${created.ID}`)).body.BindName).to.equal('web')
    })

    it('AuthMethod is immutable: a different one is a 400 naming AuthMethod', async () => {
      const created = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web' })
      const response = await agent.request('PUT', `/v1/acl/binding-rule/${created.ID}`, { body: { AuthMethod: otherMethod, BindType: 'service', BindName: 'web' } })
      expectError(response, 400, 'invalid_input', 'AuthMethod')
      expect((await agent.request('GET', `/v1/acl/binding-rule/${created.ID}`)).body.AuthMethod).to.equal(jwtMethod)
    })

    it('BindType and BindName are required on update and validated as on create', async () => {
      const created = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web' })
      expectError(await agent.request('PUT', `/v1/acl/binding-rule/${created.ID}`, { body: { BindName: 'web' } }), 400, 'invalid_input', 'BindType')
      expectError(await agent.request('PUT', `/v1/acl/binding-rule/${created.ID}`, { body: { BindType: 'service' } }), 400, 'invalid_input', 'BindName')
      expectError(await agent.request('PUT', `/v1/acl/binding-rule/${created.ID}`, { body: { BindType: 'service', BindName: 'web', Selector: 'value.team == ' } }), 400, 'invalid_input', 'Selector')
      expect((await agent.request('GET', `/v1/acl/binding-rule/${created.ID}`)).body.ModifyIndex).to.equal(created.ModifyIndex)
    })

    it('update of a rule that does not exist is a 4xx and creates nothing', async () => {
      const response = await agent.request('PUT', `/v1/acl/binding-rule/${MISSING_ID}`, { body: { AuthMethod: jwtMethod, BindType: 'service', BindName: 'ghost' } })
      expect(response.status, response.text).to.be.within(400, 499)
      expect(response.body.Code).to.be.a('string')
      expect((await agent.request('GET', `/v1/acl/binding-rule/${MISSING_ID}`)).status).to.equal(404)
    })
  })

  describe('delete', () => {
    it('delete answers JSON true and the rule is gone', async () => {
      const created = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web' })
      const response = await agent.request('DELETE', `/v1/acl/binding-rule/${created.ID}`)
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.equal(true)
      expectError(await agent.request('GET', `/v1/acl/binding-rule/${created.ID}`), 404, 'not_found')
      expect(await ruleIds()).to.not.include(created.ID)
    })

    it('delete of a rule that never existed answers true', async () => {
      const response = await agent.request('DELETE', `/v1/acl/binding-rule/${MISSING_ID}`)
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.equal(true)
    })
  })

  describe('authorization', () => {
    it('without a token, reads and writes are 403 permission_denied', async () => {
      const before = await ruleIds('?ns=*')
      expectError(await agent.request('GET', '/v1/acl/binding-rules', { token: null }), 403, 'permission_denied')
      expectError(await agent.request('PUT', '/v1/acl/binding-rule', { token: null, body: { AuthMethod: jwtMethod, BindType: 'service', BindName: 'web' } }), 403, 'permission_denied')
      expect(await ruleIds('?ns=*')).to.deep.equal(before)
    })

    it('an acl:read token may list and read rules but not write them', async () => {
      const created = await createRule({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web' })
      expect((await agent.request('GET', '/v1/acl/binding-rules', { token: readToken })).status).to.equal(200)
      expect((await agent.request('GET', `/v1/acl/binding-rule/${created.ID}`, { token: readToken })).status).to.equal(200)
      const before = await ruleIds('?ns=*')
      expectError(await agent.request('PUT', '/v1/acl/binding-rule', { token: readToken, body: { AuthMethod: jwtMethod, BindType: 'service', BindName: 'web' } }), 403, 'permission_denied')
      expectError(await agent.request('PUT', `/v1/acl/binding-rule/${created.ID}`, { token: readToken, body: { BindType: 'service', BindName: 'x' } }), 403, 'permission_denied')
      expectError(await agent.request('DELETE', `/v1/acl/binding-rule/${created.ID}`, { token: readToken }), 403, 'permission_denied')
      expect(await ruleIds('?ns=*')).to.deep.equal(before)
    })
  })

  describe('namespaces', () => {
    it('a rule lives in its auth method\'s namespace; lists are scoped by ns, ns=* lists all', async () => {
      const method = unique('nsmethod')
      const created = await agent.request('PUT', '/v1/acl/auth-method', { body: { Name: method, Type: 'jwt', Namespace: 'rules-ns', Config: { JWKSURL: 'https://issuer.example.com/jwks' } } })
      expect(created.status, created.text).to.equal(200)
      const rule = await createRule({ AuthMethod: method, BindType: 'service', BindName: 'web', Namespace: 'rules-ns' })
      expect(rule.Namespace).to.equal('rules-ns')
      expect(await ruleIds('?ns=rules-ns')).to.deep.equal([rule.ID])
      expect(await ruleIds()).to.not.include(rule.ID)
      expect(await ruleIds('?ns=*')).to.include(rule.ID)
    })

    it('an AuthMethod that exists only in another namespace is a 400', async () => {
      await expectRejected({ AuthMethod: jwtMethod, BindType: 'service', BindName: 'web', Namespace: 'rules-elsewhere' }, 'AuthMethod')
    })
  })
})
