/**
 * `GET /v1/catalog/datacenters`, from outside: the datacenters as a JSON array, the local one first, with no token
 * needed (as Consul). Datacenters are not federated yet, so the local one is the only one.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError } from '../support/api.js'

describe('catalog: datacenters', function () {
  this.timeout(30_000)
  let agent: AgentProcess

  before(async () => {
    agent = await startAgent({ args: ['--datacenter', 'west-2'] })
  })
  after(async () => {
    await agent.stop()
  })

  it('answers the local datacenter as a JSON array, without a token', async () => {
    const response = await agent.request('GET', '/v1/catalog/datacenters', { token: null })
    expect(response.status, response.text).to.equal(200)
    expect(response.headers.get('content-type')).to.match(/^application\/json/)
    expect(response.body).to.deep.equal(['west-2'])
  })

  it('answers the same with a token, under either header name', async () => {
    expect((await agent.request('GET', '/v1/catalog/datacenters')).body).to.deep.equal(['west-2'])
    expect((await agent.request('GET', '/v1/catalog/datacenters', { token: null, headers: { 'X-Consul-Token': agent.managementToken } })).body).to.deep.equal(['west-2'])
  })

  it('names the default datacenter dc1 when none is configured', async () => {
    const other = await startAgent()
    try {
      expect((await other.request('GET', '/v1/catalog/datacenters', { token: null })).body).to.deep.equal(['dc1'])
    } finally {
      await other.stop()
    }
  })

  it('answers a write with a 405 that allows GET', async () => {
    const response = await agent.request('PUT', '/v1/catalog/datacenters')
    expectError(response, 405, 'method_not_allowed')
    expect(response.headers.get('allow')).to.include('GET')
  })
})
