/**
 * `GET /v1/acl/replication`, from outside. A warden cluster is a primary datacenter (nothing is federated yet), and
 * Consul's primary never starts replication, so it answers the zero status: every field of Consul's
 * structs.ACLReplicationStatus, in Consul's names, at its zero value (Go's zero time for the times). No token is
 * needed, as in Consul.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError } from '../support/api.js'

const PRIMARY_STATUS = {
  Enabled: false,
  Running: false,
  SourceDatacenter: '',
  ReplicationType: '',
  ReplicatedIndex: 0,
  ReplicatedRoleIndex: 0,
  ReplicatedTokenIndex: 0,
  LastSuccess: '0001-01-01T00:00:00Z',
  LastError: '0001-01-01T00:00:00Z',
  LastErrorMessage: '',
}

describe('ACL replication status', function () {
  this.timeout(30_000)
  let agent: AgentProcess

  before(async () => {
    agent = await startAgent()
  })
  after(async () => {
    await agent.stop()
  })

  it('answers a primary datacenter\'s status, every field of Consul\'s struct in its order, without a token', async () => {
    const response = await agent.request('GET', '/v1/acl/replication', { token: null })
    expect(response.status, response.text).to.equal(200)
    expect(response.headers.get('content-type')).to.match(/^application\/json/)
    expect(response.body).to.deep.equal(PRIMARY_STATUS)
    expect(Object.keys(response.body)).to.deep.equal(Object.keys(PRIMARY_STATUS))
  })

  it('answers the same to a token under either header name, and to an unknown token (none is needed)', async () => {
    expect((await agent.request('GET', '/v1/acl/replication')).body).to.deep.equal(PRIMARY_STATUS)
    expect((await agent.request('GET', '/v1/acl/replication', { token: null, headers: { 'X-Consul-Token': agent.managementToken } })).body).to.deep.equal(PRIMARY_STATUS)
    expect((await agent.request('GET', '/v1/acl/replication', { token: '5d7c1f4e-9b2a-4c3d-8e6f-0a1b2c3d4e5f' })).body).to.deep.equal(PRIMARY_STATUS)
  })

  it('takes ?dc naming its own datacenter, and refuses one it does not know with a 404 naming dc', async () => {
    expect((await agent.request('GET', '/v1/acl/replication?dc=dc1', { token: null })).body).to.deep.equal(PRIMARY_STATUS)
    expectError(await agent.request('GET', '/v1/acl/replication?dc=elsewhere', { token: null }), 404, 'unknown_datacenter', 'dc')
  })

  it('?stale does not change the answer (Consul reads it consistently in any case)', async () => {
    expect((await agent.request('GET', '/v1/acl/replication?stale', { token: null })).body).to.deep.equal(PRIMARY_STATUS)
  })

  it('answers a write with a 405 that allows GET', async () => {
    const response = await agent.request('PUT', '/v1/acl/replication')
    expectError(response, 405, 'method_not_allowed')
    expect(response.headers.get('allow')).to.include('GET')
  })
})
