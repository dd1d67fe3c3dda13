/**
 * The operator endpoints issue 17 adds, on one real agent: `GET /v1/operator/servers` (this datacenter's servers as
 * `members` lists them) and `POST /v1/operator/raft/transfer-leader` (Consul 1.15+), with their ACLs and their 400s.
 * A transfer that actually moves leadership needs several servers: test/cluster/transfer-leader.test.ts.
 *
 * To have a non-voter without a second process, the test joins a server that does not exist ("ghost"): it proves the
 * cluster key, so the leader adds it as a non-voter, and since it never answers it is never promoted and shows as
 * failed.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { makeJoinRequest } from '../../src/lib/join-proof.js'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError, unique } from '../support/api.js'
import { freePort } from '../support/cluster.js'

/** A key as `warden keygen` makes one: 32 random bytes in base64. */
const CLUSTER_KEY = randomBytes(32).toString('base64')

describe('operator: servers and leadership transfer', function () {
  this.timeout(30_000)
  let agent: AgentProcess

  before(async () => {
    agent = await startAgent({ args: ['--cluster-key', CLUSTER_KEY, '--datacenter', 'east'] })
  })
  after(async () => {
    await agent.stop()
  })

  /** A token holding only `rules`. */
  async function secretWithRules(rules: string): Promise<string> {
    const policy = await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('operator'), Rules: rules } })
    expect(policy.status, policy.text).to.equal(200)
    const token = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.body.ID }] } })
    expect(token.status, token.text).to.equal(200)
    return token.body.SecretID
  }

  describe('GET /v1/operator/servers', () => {
    it('lists this server as the alive leader of its datacenter, at its cluster address', async () => {
      const response = await agent.request('GET', '/v1/operator/servers')
      expect(response.status, response.text).to.equal(200)
      expect(response.headers.get('content-type')).to.match(/^application\/json/)
      expect(response.body).to.deep.equal([{ Name: 'test-node', Datacenter: 'east', Address: agent.clusterAddress, Role: 'leader', Voter: true, Status: 'alive' }])
    })

    it('needs operator:read', async () => {
      const denied = await agent.request('GET', '/v1/operator/servers', { token: null })
      expectError(denied, 403, 'permission_denied')
      expect(denied.body.Error).to.include('operator:read')
      const aclOnly = await secretWithRules('acl = "write"')
      expectError(await agent.request('GET', '/v1/operator/servers', { token: aclOnly }), 403, 'permission_denied')
      const reader = await secretWithRules('operator = "read"')
      expect((await agent.request('GET', '/v1/operator/servers', { token: reader })).status).to.equal(200)
    })
  })

  describe('POST /v1/operator/raft/transfer-leader', () => {
    it('needs operator:write', async () => {
      const denied = await agent.request('POST', '/v1/operator/raft/transfer-leader?id=test-node', { token: null })
      expectError(denied, 403, 'permission_denied')
      expect(denied.body.Error).to.include('operator:write')
      const reader = await secretWithRules('operator = "read"')
      expectError(await agent.request('POST', '/v1/operator/raft/transfer-leader?id=test-node', { token: reader }), 403, 'permission_denied')
    })

    it('naming the leader itself answers {"Success": true} and leaves the leader as it was', async () => {
      const response = await agent.request('POST', '/v1/operator/raft/transfer-leader?id=test-node')
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.deep.equal({ Success: true })
      expect((await agent.request('GET', '/v1/status/leader', { token: null })).body).to.equal(agent.clusterAddress)
    })

    it('an id that names no server is a 400 naming id', async () => {
      const response = await agent.request('POST', '/v1/operator/raft/transfer-leader?id=nobody')
      expectError(response, 400, 'invalid_input', 'id')
      expect(response.body.Error).to.include('nobody')
    })

    it('answers GET with a 405 that allows POST', async () => {
      const response = await agent.request('GET', '/v1/operator/raft/transfer-leader')
      expectError(response, 405, 'method_not_allowed')
      expect(response.headers.get('allow')).to.include('POST')
    })
  })

  describe('with a non-voter that never answers', () => {
    before(async () => {
      const address = `127.0.0.1:${await freePort()}`
      const joined = await agent.request('POST', '/v1/operator/raft/join', { token: null, body: makeJoinRequest(CLUSTER_KEY, 'ghost', address, Date.now()) })
      expect(joined.status, joined.text).to.equal(200)
    })

    it('lists it as a failed non-voter, sorted by name after the leader', async () => {
      const response = await agent.request('GET', '/v1/operator/servers')
      expect(response.status, response.text).to.equal(200)
      expect(response.body.map((server: { Name: string }) => server.Name)).to.deep.equal(['ghost', 'test-node'])
      expect(response.body[0]).to.include({ Name: 'ghost', Datacenter: 'east', Role: 'non-voter', Voter: false, Status: 'failed' })
      expect(response.body[0].Address).to.match(/^127\.0\.0\.1:\d+$/)
      expect(response.body[1]).to.include({ Name: 'test-node', Role: 'leader', Voter: true, Status: 'alive' })
    })

    it('refuses to hand leadership to a non-voter: a 400 naming id', async () => {
      const response = await agent.request('POST', '/v1/operator/raft/transfer-leader?id=ghost')
      expectError(response, 400, 'invalid_input', 'id')
      expect(response.body.Error).to.include('non-voter')
    })

    it('without id, with no other voter to pick, is a 400 naming id; the leader stays', async () => {
      const response = await agent.request('POST', '/v1/operator/raft/transfer-leader')
      expectError(response, 400, 'invalid_input', 'id')
      expect(response.body.Error).to.include('no other voter')
      expect((await agent.request('GET', '/v1/status/leader', { token: null })).body).to.equal(agent.clusterAddress)
    })
  })
})
