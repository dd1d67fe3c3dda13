/**
 * `GET /v1/operator/cluster` (issue 21) on one real agent: the one server as leader with its own Raft state and the
 * leader's measures, the datacenters, no replication (a primary) and no cloud link; operator:read; and the blocking
 * query: a wait with nothing new runs its course with the same index (no wake on a heartbeat), a write wakes it with a
 * higher index, and a server joining (here one that never answers, so it shows failed, without its own state) moves
 * the index at once; the cloud link's status. Three processes, forwarding from followers and a leader kill:
 * test/cluster/cluster-view.test.ts; a secondary datacenter's replication: operator-cluster-federation.test.ts.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { WardenClient } from '../../src/api/index.js'
import { makeJoinRequest } from '../../src/lib/join-proof.js'
import { eventually } from '../cluster/eventually.js'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError, secretWithRules, unique } from '../support/api.js'
import { freePort } from '../support/cluster.js'

const CLUSTER_KEY = randomBytes(32).toString('base64')

describe('GET /v1/operator/cluster', function () {
  this.timeout(30_000)
  let agent: AgentProcess

  before(async () => {
    agent = await startAgent({ args: ['--cluster-key', CLUSTER_KEY, '--datacenter', 'east'] })
  })
  after(async () => {
    await agent.stop()
  })

  it('names every server with its role, its own state and the leader\'s measures of it', async () => {
    const response = await agent.request('GET', '/v1/operator/cluster')
    expect(response.status, response.text).to.equal(200)
    const body = response.body
    expect(body).to.include({ Datacenter: 'east', PrimaryDatacenter: 'east', AnsweredBy: 'test-node', Leader: 'test-node', LeaderAddress: agent.clusterAddress, Replication: null, CloudLink: null })
    expect(body.Datacenters).to.deep.equal(['east'])
    expect(body.Term).to.be.greaterThan(0)
    expect(body.Servers).to.have.length(1)
    const server = body.Servers[0]
    expect(server).to.include({ Name: 'test-node', Address: agent.clusterAddress, Role: 'leader', Voter: true, Leader: true, Status: 'alive', Term: body.Term, LastContactMs: 0 })
    expect(server.AppliedIndex).to.be.greaterThan(0)
    expect(server.CommitIndex).to.be.at.least(server.AppliedIndex)
    expect(server.MatchIndex).to.equal(server.LastIndex)
    expect(Number(response.headers.get('X-Service-Index'))).to.be.at.least(server.AppliedIndex)
    expect(response.headers.get('X-Service-KnownLeader')).to.equal('true')
  })

  it('needs operator:read', async () => {
    const denied = await agent.request('GET', '/v1/operator/cluster', { token: null })
    expectError(denied, 403, 'permission_denied')
    expect(denied.body.Error).to.include('operator:read')
    const reader = await secretWithRules(agent, 'operator = "read"')
    expect((await agent.request('GET', '/v1/operator/cluster', { token: reader })).status).to.equal(200)
  })

  it('a blocking query with nothing new waits its wait out and answers the same index', async () => {
    // The writes of the tests before may still be due to move the index (at most once a second): let that pass.
    await agent.request('GET', '/v1/operator/cluster')
    await new Promise((resolve) => setTimeout(resolve, 1_100))
    const first = await agent.request('GET', '/v1/operator/cluster')
    const index = first.headers.get('X-Service-Index')
    const started = Date.now()
    const again = await agent.request('GET', `/v1/operator/cluster?index=${index}&wait=2s`)
    expect(again.status, again.text).to.equal(200)
    expect(Date.now() - started).to.be.at.least(1_900)
    expect(again.headers.get('X-Service-Index')).to.equal(index)
  })

  it('a write wakes a blocking query with a higher index and the applied index that moved', async () => {
    const first = await agent.request('GET', '/v1/operator/cluster')
    const index = Number(first.headers.get('X-Service-Index'))
    const started = Date.now()
    const waiting = agent.request('GET', `/v1/operator/cluster?index=${index}&wait=20s`)
    await new Promise((resolve) => setTimeout(resolve, 200))
    const written = await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('wake') } })
    expect(written.status, written.text).to.equal(200)
    const woken = await waiting
    expect(woken.status, woken.text).to.equal(200)
    expect(Date.now() - started).to.be.below(10_000)
    expect(Number(woken.headers.get('X-Service-Index'))).to.be.greaterThan(index)
    expect(woken.body.Servers[0].AppliedIndex).to.be.greaterThan(first.body.Servers[0].AppliedIndex)
  })

  it('a server joining moves the index; one that never answers shows failed, without its own state', async () => {
    const first = await agent.request('GET', '/v1/operator/cluster')
    const index = first.headers.get('X-Service-Index')
    const waiting = agent.request('GET', `/v1/operator/cluster?index=${index}&wait=20s`)
    const ghost = makeJoinRequest(CLUSTER_KEY, 'ghost', `127.0.0.1:${await freePort()}`, Date.now())
    const joined = await agent.request('POST', '/v1/operator/raft/join', { token: null, body: ghost })
    expect(joined.status, joined.text).to.equal(200)
    const woken = await waiting
    expect(woken.headers.get('X-Service-Index')).to.not.equal(index)
    const server = (woken.body.Servers as Array<Record<string, unknown>>).find((candidate) => candidate.Name === 'ghost')
    expect(server).to.include({ Role: 'non-voter', Voter: false, Status: 'failed', Term: null, AppliedIndex: null })
    expect(server?.Error).to.be.a('string').that.is.not.empty
  })

  it('shows the cloud link\'s resource and whether the link controller linked it, never its secret', async () => {
    const resourceId = 'organization/org-1/project/proj-1/service.global-network-manager.cluster/c1'
    const linked = await agent.request('PUT', '/api/cloud/v2/link/global', { body: { data: { resourceId, clientId: 'id', clientSecret: 'a-secret' } } })
    expect(linked.status, linked.text).to.equal(200)
    await eventually(async () => (await agent.request('GET', '/v1/operator/cluster')).body.CloudLink?.Linked === true, 'the view shows the link linked')
    const response = await agent.request('GET', '/v1/operator/cluster')
    expect(response.body.CloudLink.ResourceID).to.equal(resourceId)
    expect(response.body.CloudLink.Status['service.io/cloud/link'].conditions[0]).to.include({ type: 'linked', state: 'STATE_TRUE' })
    expect(response.text).to.not.include('a-secret')
  })

  it('the client reads it as operator.cluster()', async () => {
    const client = new WardenClient({ address: agent.httpAddress, token: agent.managementToken })
    try {
      const status = await client.operator.cluster()
      expect(status.Leader).to.equal('test-node')
      expect(status.Servers.map((server) => server.Name)).to.include('test-node')
    } finally {
      client.close()
    }
  })

  it('?stale answers this server\'s own view', async () => {
    const response = await agent.request('GET', '/v1/operator/cluster?stale')
    expect(response.status, response.text).to.equal(200)
    expect(response.headers.get('X-Service-Effective-Consistency')).to.equal('stale')
    expect(response.body.AnsweredBy).to.equal('test-node')
  })
})
