/**
 * Leadership transfer (Consul 1.15+'s `POST /v1/operator/raft/transfer-leader`) and the server list
 * (`GET /v1/operator/servers`) on three real processes: a transfer to a named node, asked of the leader or of a
 * follower (which forwards it), answers once that node leads, and the node asked already reports the new leader at
 * /v1/status/leader when the answer arrives; every other node soon does. Without `id` the leader hands over to another
 * voter. A transfer to a server that cannot take over (SIGSTOP) times out with a 504. Writes keep working across
 * transfers. The server list names the leader, and a killed follower turns failed.
 */
import { expect } from 'chai'
import { TestCluster } from '../support/cluster.js'
import type { AgentProcess } from '../support/agent.js'
import { eventually } from './eventually.js'

describe('leadership transfer and the server list on a three-node cluster', function () {
  this.timeout(60_000)
  let cluster: TestCluster

  before(async () => {
    cluster = await TestCluster.start()
  })
  after(async () => {
    await cluster.stop()
  })

  const addressOf = (name: string): string => `127.0.0.1:${cluster.specs.find((spec) => spec.name === name)!.clusterPort}`

  async function leaderSeenBy(agent: AgentProcess): Promise<string> {
    return (await agent.request('GET', '/v1/status/leader', { token: null })).body as string
  }

  async function transfer(through: AgentProcess, id?: string): Promise<void> {
    const response = await through.request('POST', `/v1/operator/raft/transfer-leader${id === undefined ? '' : `?id=${id}`}`)
    expect(response.status, response.text).to.equal(200)
    expect(response.body).to.deep.equal({ Success: true })
  }

  it('hands leadership to the node named; /v1/status/leader names it, on the node asked at once and soon on all', async () => {
    const leader = await cluster.leader()
    const target = cluster.followers(leader)[0]!
    await transfer(cluster.node(leader), target)
    expect(await leaderSeenBy(cluster.node(leader))).to.equal(addressOf(target))
    await eventually(async () => (await Promise.all(cluster.running().map(leaderSeenBy))).every((seen) => seen === addressOf(target)), `every node sees ${target} lead`)
    expect(await cluster.leader()).to.equal(target)
    const written = await cluster.node(leader).request('PUT', '/v1/acl/policy', { body: { Name: 'after-transfer' } })
    expect(written.status, written.text).to.equal(200)
  })

  it('asked of a follower, forwards the transfer to the leader and answers once the named node leads', async () => {
    const leader = await cluster.leader()
    const [asked, target] = cluster.followers(leader) as [string, string]
    await transfer(cluster.node(asked), target)
    expect(await leaderSeenBy(cluster.node(asked))).to.equal(addressOf(target))
    expect(await cluster.leader()).to.equal(target)
  })

  it('without id, the leader hands over to another voter', async () => {
    const leader = await cluster.leader()
    await transfer(cluster.node(leader))
    const next = await cluster.leader()
    expect(next).to.not.equal(leader)
    expect(cluster.followers(leader)).to.include(next)
    const written = await cluster.node(next).request('PUT', '/v1/acl/policy', { body: { Name: 'after-picked-transfer' } })
    expect(written.status, written.text).to.equal(200)
  })

  it('an id that names no server is a 400 naming id, on a follower as on the leader', async () => {
    const leader = await cluster.leader()
    for (const name of [leader, cluster.followers(leader)[0]!]) {
      const response = await cluster.node(name).request('POST', '/v1/operator/raft/transfer-leader?id=n9')
      expect(response.status, response.text).to.equal(400)
      expect(response.body).to.include({ Code: 'invalid_input', Field: 'id' })
    }
    expect(await cluster.leader()).to.equal(leader)
  })

  it('a transfer to a server that cannot take over (stopped) answers 504 in the error shape, and the leader stays', async function () {
    this.timeout(30_000)
    const leader = await cluster.leader()
    const stuck = cluster.followers(leader)[0]!
    cluster.node(stuck).child.kill('SIGSTOP')
    try {
      // Writes the stopped server misses: its log is behind, so the leader only tries to bring it up to date and never
      // sends it TimeoutNow (a TimeoutNow it found on waking would make it leader after all: the 504 says "may").
      for (let n = 0; n < 3; n += 1) {
        const written = await cluster.node(leader).request('PUT', '/v1/acl/policy', { body: { Name: `while-stuck-${n}` } })
        expect(written.status, written.text).to.equal(200)
      }
      const response = await cluster.node(leader).request('POST', `/v1/operator/raft/transfer-leader?id=${stuck}`)
      expect(response.status, response.text).to.equal(504)
      expect(response.body).to.include({ Code: 'outcome_unknown' })
      expect(response.body.Error).to.include(stuck)
    } finally {
      cluster.node(stuck).child.kill('SIGCONT')
    }
    expect(await cluster.leader(15_000)).to.equal(leader)
  })

  it('lists the three servers by name with the leader marked, and a killed follower as failed', async () => {
    const leader = await cluster.leader()
    const expected = ['n1', 'n2', 'n3'].map((name) => ({
      Name: name,
      Datacenter: 'dc1',
      Address: addressOf(name),
      Role: name === leader ? 'leader' : 'follower',
      Voter: true,
      Status: 'alive',
    }))
    // A server resumed by the test before may still be reconnecting: every node sees all three alive soon.
    for (const agent of cluster.running()) {
      await eventually(async () => {
        const response = await agent.request('GET', '/v1/operator/servers')
        expect(response.status, response.text).to.equal(200)
        return JSON.stringify(response.body) === JSON.stringify(expected)
      }, `${agent.httpAddress} lists all three alive`)
    }
    const victim = cluster.followers(leader)[0]!
    await cluster.kill(victim)
    // The leader stops hearing from it within an election timeout; its peer link closes within three keepalives.
    for (const name of [leader, cluster.followers(leader)[0]!]) {
      await eventually(async () => {
        const servers = (await cluster.node(name).request('GET', '/v1/operator/servers')).body as Array<{ Name: string; Status: string }>
        return servers.find((server) => server.Name === victim)?.Status === 'failed'
      }, `${name} lists ${victim} as failed`)
    }
    const listed = (await cluster.node(leader).request('GET', '/v1/operator/servers')).body as Array<{ Name: string; Status: string; Role: string }>
    expect(listed.filter((server) => server.Status === 'alive').map((server) => server.Name)).to.have.length(2)
    expect(listed.find((server) => server.Name === leader)?.Role).to.equal('leader')
  })
})
