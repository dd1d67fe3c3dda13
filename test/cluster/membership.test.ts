/**
 * Membership changes with real processes, one server at a time: a new server started with `--join` enters as a
 * non-voter, catches up and is promoted; it takes writes like any member; a server is removed through
 * DELETE /v1/operator/raft/peer, and removing the leader makes it step down once the change commits, leaving a
 * working cluster. A join without the cluster key is refused, and so is a recorded join proof sent again (issue 18),
 * to any node, before or after a leader change.
 */
import { expect } from 'chai'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { makeJoinRequest } from '../../src/lib/join-proof.js'
import { CLUSTER_KEY, freePort, TestCluster } from '../support/cluster.js'
import { startAgent, type AgentProcess } from '../support/agent.js'

interface Server {
  ID: string
  Voter: boolean
  Leader: boolean
  Address: string
}

async function servers(agent: AgentProcess): Promise<Server[]> {
  const response = await agent.request('GET', '/v1/operator/raft/configuration')
  expect(response.status, response.text).to.equal(200)
  return response.body.Servers
}

async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

describe('membership changes in a running cluster', function () {
  this.timeout(90_000)
  let cluster: TestCluster
  let joiner: AgentProcess | undefined
  let joinerDir: string

  before(async () => {
    cluster = await TestCluster.start()
    joinerDir = await mkdtemp(join(tmpdir(), 'warden-joiner-'))
  })
  after(async () => {
    await joiner?.stop()
    await cluster.stop()
    await rm(joinerDir, { recursive: true, force: true })
  })

  it('refuses a join that does not prove the cluster key', async () => {
    const response = await cluster.node('n1').request('POST', '/v1/operator/raft/join', {
      token: null,
      body: { Node: 'intruder', Address: '127.0.0.1:1', Time: Date.now(), Nonce: 'abcd', Proof: '00'.repeat(32) },
    })
    expect(response.status).to.equal(403)
    expect((await servers(cluster.node('n1'))).map((server) => server.ID)).to.not.include('intruder')
  })

  it('refuses a recorded join proof sent again, to the node that took it, another follower or the leader, even after the server it added was removed', async () => {
    // "ghost" never runs: its proof adds it as a non-voter that never answers, which the test then removes.
    const proof = makeJoinRequest(CLUSTER_KEY, 'ghost', `127.0.0.1:${await freePort()}`, Date.now())
    const leaderName = await cluster.leader()
    const [first, second] = cluster.followers(leaderName) as [string, string]
    const joined = await cluster.node(first).request('POST', '/v1/operator/raft/join', { token: null, body: proof })
    expect(joined.status, joined.text).to.equal(200)
    const removed = await cluster.node(leaderName).request('DELETE', '/v1/operator/raft/peer?id=ghost')
    expect(removed.status, removed.text).to.equal(200)
    await eventually(async () => !(await servers(cluster.node(leaderName))).some((server) => server.ID === 'ghost'), 'ghost is removed')
    for (const name of [first, second, leaderName]) {
      const replayed = await cluster.node(name).request('POST', '/v1/operator/raft/join', { token: null, body: proof })
      expect(replayed.status, `${name}: ${replayed.text}`).to.equal(403)
      expect(replayed.body.Error).to.include('used before')
    }
    expect((await servers(cluster.node(leaderName))).map((server) => server.ID)).to.not.include('ghost')
  })

  it('refuses, on a new leader, a join proof made before it took office: it cannot know whether its predecessor took it', async () => {
    const proof = makeJoinRequest(CLUSTER_KEY, 'ghost-2', `127.0.0.1:${await freePort()}`, Date.now())
    const leaderName = await cluster.leader()
    const joined = await cluster.node(leaderName).request('POST', '/v1/operator/raft/join', { token: null, body: proof })
    expect(joined.status, joined.text).to.equal(200)
    const removed = await cluster.node(leaderName).request('DELETE', '/v1/operator/raft/peer?id=ghost-2')
    expect(removed.status, removed.text).to.equal(200)
    const target = cluster.followers(leaderName)[0]!
    const transferred = await cluster.node(leaderName).request('POST', `/v1/operator/raft/transfer-leader?id=${target}`)
    expect(transferred.status, transferred.text).to.equal(200)
    await eventually(async () => (await cluster.leader()) === target, `${target} leads`)
    const replayed = await cluster.node(target).request('POST', '/v1/operator/raft/join', { token: null, body: proof })
    expect(replayed.status, replayed.text).to.equal(503)
    expect(replayed.body.Error).to.include('before this server became the leader')
    expect((await servers(cluster.node(target))).map((server) => server.ID)).to.not.include('ghost-2')
    // A fresh proof is taken by the new leader (and the server it adds removed again).
    const fresh = await cluster.node(target).request('POST', '/v1/operator/raft/join', { token: null, body: makeJoinRequest(CLUSTER_KEY, 'ghost-2', proof.Address, Date.now()) })
    expect(fresh.status, fresh.text).to.equal(200)
    expect((await cluster.node(target).request('DELETE', '/v1/operator/raft/peer?id=ghost-2')).status).to.equal(200)
  })

  it('adds a server started with --join as a non-voter, then promotes it once it caught up', async () => {
    const leader = cluster.node(await cluster.leader())
    for (let n = 0; n < 30; n += 1) await leader.request('PUT', '/v1/acl/policy', { body: { Name: `before-join-${n}` } })
    const clusterPort = await freePort()
    joiner = await startAgent({
      dev: false,
      dataDir: joinerDir,
      keepDataDir: true,
      args: [
        '--node-name', 'n4',
        '--cluster-addr', `127.0.0.1:${clusterPort}`,
        '--cluster-key', CLUSTER_KEY,
        '--join', cluster.node('n2').httpAddress,
      ],
    })
    joiner.managementToken = leader.managementToken
    await eventually(async () => (await servers(leader)).some((server) => server.ID === 'n4' && server.Voter), 'n4 is a voter')
    expect((await servers(leader)).filter((server) => server.Voter)).to.have.length(4)
    const n4 = joiner
    await eventually(async () => {
      const policies = await n4.request('GET', '/v1/acl/policies?stale')
      return policies.status === 200 && (policies.body as Array<{ Name: string }>).some((policy) => policy.Name === 'before-join-29')
    }, 'n4 has the data written before it joined')
  })

  it('accepts writes on the joined server and replicates them to the others', async () => {
    const response = await joiner!.request('PUT', '/v1/acl/policy', { body: { Name: 'written-on-n4' } })
    expect(response.status, response.text).to.equal(200)
    const n1 = cluster.node('n1')
    await eventually(async () => {
      const policies = await n1.request('GET', '/v1/acl/policies?stale')
      return (policies.body as Array<{ Name: string }>).some((policy) => policy.Name === 'written-on-n4')
    }, 'n1 has the write made on n4')
  })

  it('removes a server through DELETE /v1/operator/raft/peer, sent to a follower', async () => {
    const leaderName = await cluster.leader()
    const follower = cluster.node(cluster.followers(leaderName)[0]!)
    const response = await follower.request('DELETE', '/v1/operator/raft/peer?id=n4')
    expect(response.status, response.text).to.equal(200)
    await eventually(async () => !(await servers(cluster.node(leaderName))).some((server) => server.ID === 'n4'), 'n4 is removed')
    await joiner!.stop()
    joiner = undefined
    const write = await cluster.node(leaderName).request('PUT', '/v1/acl/policy', { body: { Name: 'after-removing-n4' } })
    expect(write.status).to.equal(200)
  })

  it('removes the leader itself, which steps down; the other two elect a leader and keep writing', async () => {
    const oldLeader = await cluster.leader()
    const response = await cluster.node(oldLeader).request('DELETE', `/v1/operator/raft/peer?id=${oldLeader}`)
    expect(response.status, response.text).to.equal(200)
    const rest = cluster.followers(oldLeader)
    await eventually(async () => {
      const states = await Promise.all(rest.map((name) => cluster.node(name).request('GET', '/v1/operator/raft/state')))
      const leaders = states.map((state) => state.body.Leader as string)
      return leaders.every((leader) => leader !== '' && leader !== oldLeader && leader === leaders[0])
    }, 'the remaining servers agree on a new leader')
    const remaining = cluster.node(rest[0]!)
    expect((await servers(remaining)).map((server) => server.ID).sort()).to.deep.equal(rest.slice().sort())
    const write = await remaining.request('PUT', '/v1/acl/policy', { body: { Name: 'after-removing-the-leader' } })
    expect(write.status, write.text).to.equal(200)
  })
})
