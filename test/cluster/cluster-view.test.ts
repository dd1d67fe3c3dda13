/**
 * `GET /v1/operator/cluster` (issue 21) on three real processes: asked of a follower, it answers the leader's view
 * (every server alive with its own term and indexes, as each reported it to the leader); a blocking query on a
 * follower is woken by a write made through another follower; and when the leader is killed, a blocking query on a
 * follower answers once a new leader is elected, and the view soon names the old leader failed.
 */
import { expect } from 'chai'
import { TestCluster } from '../support/cluster.js'
import { eventually } from './eventually.js'

interface Server {
  Name: string
  Role: string
  Status: string
  Term: number | null
  AppliedIndex: number | null
  MatchIndex: number | null
  LastContactMs: number | null
}

describe('the cluster view on a three-node cluster', function () {
  this.timeout(60_000)
  let cluster: TestCluster

  before(async () => {
    cluster = await TestCluster.start()
  })
  after(async () => {
    await cluster.stop()
  })

  it("asked of a follower, answers the leader's view with every server's own state", async () => {
    const leader = await cluster.leader()
    const follower = cluster.followers(leader)[0]!
    await eventually(async () => {
      const response = await cluster.node(follower).request('GET', '/v1/operator/cluster')
      const servers = response.body.Servers as Server[]
      return response.status === 200 && servers.every((server) => server.Status === 'alive' && server.Term === response.body.Term)
    }, 'every server reports its state to the leader')
    const response = await cluster.node(follower).request('GET', '/v1/operator/cluster')
    expect(response.body).to.include({ AnsweredBy: leader, Leader: leader })
    const servers = response.body.Servers as Server[]
    expect(servers.map((server) => [server.Name, server.Role])).to.deep.equal(
      ['n1', 'n2', 'n3'].map((name) => [name, name === leader ? 'leader' : 'follower']),
    )
    for (const server of servers) {
      expect(server.AppliedIndex, server.Name).to.be.greaterThan(0)
      expect(server.MatchIndex, server.Name).to.be.greaterThan(0)
      // Heartbeats every few hundred milliseconds at most: a live follower answered the leader within seconds.
      expect(server.LastContactMs, server.Name).to.be.a('number').below(5_000)
    }
  })

  it('a blocking query on a follower is woken by a write through another follower', async () => {
    const leader = await cluster.leader()
    const [asked, writer] = cluster.followers(leader) as [string, string]
    // Let the index settle (it moves for progress at most once a second).
    await cluster.node(asked).request('GET', '/v1/operator/cluster')
    await new Promise((resolve) => setTimeout(resolve, 1_100))
    const first = await cluster.node(asked).request('GET', '/v1/operator/cluster')
    const index = Number(first.headers.get('X-Service-Index'))
    const waiting = cluster.node(asked).request('GET', `/v1/operator/cluster?index=${index}&wait=30s`)
    await new Promise((resolve) => setTimeout(resolve, 300))
    const written = await cluster.node(writer).request('PUT', '/v1/acl/policy', { body: { Name: 'wakes-the-view' } })
    expect(written.status, written.text).to.equal(200)
    const started = Date.now()
    const woken = await waiting
    expect(woken.status, woken.text).to.equal(200)
    expect(Date.now() - started).to.be.below(10_000)
    expect(Number(woken.headers.get('X-Service-Index'))).to.be.greaterThan(index)
  })

  it('after the leader is killed, a waiting query on a follower answers with the new leader, and the old one turns failed', async () => {
    const leader = await cluster.leader()
    const follower = cluster.followers(leader)[0]!
    const first = await cluster.node(follower).request('GET', '/v1/operator/cluster')
    const waiting = cluster.node(follower).request('GET', `/v1/operator/cluster?index=${first.headers.get('X-Service-Index')}&wait=30s`)
    await new Promise((resolve) => setTimeout(resolve, 200))
    await cluster.kill(leader)
    const woken = await waiting
    expect(woken.status, woken.text).to.equal(200)
    const newLeader = await cluster.leader(20_000)
    await eventually(async () => {
      const response = await cluster.node(follower).request('GET', '/v1/operator/cluster')
      const old = (response.body.Servers as Server[]).find((server) => server.Name === leader)
      return response.body.Leader === newLeader && old?.Status === 'failed' && old.Role === 'follower'
    }, `the view names ${newLeader} leading and ${leader} failed`, 20_000)
  })
})
