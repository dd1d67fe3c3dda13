/**
 * Rules errors with their position (issue 21): when a policy's Rules do not parse or break a rule of the language,
 * the 400 carries `Line` and `Column` (1-based) beside the message, so that an editor can put the cursor on the
 * mistake; every other error keeps the one shape without them. Checked on create and update of a policy (HCL and the
 * JSON form), and on the templated-policy preview, whose rendered rules can fail for a workload identity's name.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError, unique } from '../support/api.js'

describe('rules errors carry Line and Column', function () {
  this.timeout(30_000)
  let agent: AgentProcess

  before(async () => {
    agent = await startAgent()
  })
  after(async () => {
    await agent.stop()
  })

  it('a bad level on line 3 of a created policy points at its value', async () => {
    const rules = 'acl = "read"\nservice "web" {\n  policy = "rite"\n}\n'
    const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('bad-level'), Rules: rules } })
    expectError(response, 400, 'invalid_input', 'Rules')
    expect(response.body.Line).to.equal(3)
    expect(response.body.Column).to.equal(12)
    expect(response.body.Error).to.include('line 3, column 12')
  })

  it('a syntax error at the end of the text points past its last character', async () => {
    const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('cut'), Rules: 'key_prefix "" {\n  policy = ' } })
    expectError(response, 400, 'invalid_input', 'Rules')
    expect({ Line: response.body.Line, Column: response.body.Column }).to.deep.equal({ Line: 2, Column: 12 })
  })

  it('the JSON form points at the offending value too', async () => {
    const rules = '{\n  "service": {\n    "web": {"policy": "list"}\n  }\n}'
    const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('json'), Rules: rules } })
    expectError(response, 400, 'invalid_input', 'Rules')
    expect({ Line: response.body.Line, Column: response.body.Column }).to.deep.equal({ Line: 3, Column: 23 })
  })

  it('an update with bad rules is refused with the position, and the policy keeps its rules', async () => {
    const created = await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('update'), Rules: 'acl = "read"' } })
    expect(created.status, created.text).to.equal(200)
    const response = await agent.request('PUT', `/v1/acl/policy/${created.body.ID}`, { body: { Name: created.body.Name, Rules: 'acl = "read"\nunknown = "x"' } })
    expectError(response, 400, 'invalid_input', 'Rules')
    expect({ Line: response.body.Line, Column: response.body.Column }).to.deep.equal({ Line: 2, Column: 1 })
    expect((await agent.request('GET', `/v1/acl/policy/${created.body.ID}`)).body.Rules).to.equal('acl = "read"')
  })

  it('errors that are not about a place in the rules have no Line or Column', async () => {
    const response = await agent.request('PUT', '/v1/acl/policy', { body: { Rules: 'acl = "read"' } })
    expectError(response, 400, 'invalid_input', 'Name')
    expect(response.body).to.not.have.property('Line')
    expect(response.body).to.not.have.property('Column')
  })

  it('the preview of a workload identity whose name breaks the rendered rules is a 400 naming Name, at the place in the rules', async () => {
    const response = await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/workload-identity', { body: { Name: 'a\\q' } })
    expectError(response, 400, 'invalid_input', 'Name')
    // identity "a\q" {: the escape starts at column 12 of line 1.
    expect({ Line: response.body.Line, Column: response.body.Column }).to.deep.equal({ Line: 1, Column: 12 })
    const fine = await agent.request('POST', '/v1/acl/templated-policy/preview/builtin/workload-identity', { body: { Name: 'worker' } })
    expect(fine.status, fine.text).to.equal(200)
  })
})
