/**
 * Snapshots and log compaction with real processes: with a small `raft.snapshot_threshold`, every node compacts its
 * log, so a node whose data dir was wiped can only catch up from a snapshot streamed by the leader; it must end with
 * the same records (and the same indexes) as the others, and keep applying new writes after it.
 */
import { expect } from 'chai'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { TestCluster } from '../support/cluster.js'
import type { AgentProcess } from '../support/agent.js'

async function policies(agent: AgentProcess): Promise<Array<{ Name: string; ModifyIndex: number }>> {
  const response = await agent.request('GET', '/v1/acl/policies?stale')
  expect(response.status, response.text).to.equal(200)
  return response.body
}

describe('snapshots and log compaction in a three-node cluster', function () {
  this.timeout(90_000)
  let cluster: TestCluster
  let configDir: string

  before(async () => {
    configDir = await mkdtemp(join(tmpdir(), 'warden-snapshot-config-'))
    const configFile = join(configDir, 'config.json')
    await writeFile(configFile, JSON.stringify({ raft: { snapshot_threshold: 25 } }))
    cluster = await TestCluster.start({ args: ['--config-file', configFile] })
  })
  after(async () => {
    await cluster.stop()
    await rm(configDir, { recursive: true, force: true })
  })

  it('compacts the log past the snapshot threshold on every node', async () => {
    const leader = cluster.node(await cluster.leader())
    for (let n = 0; n < 80; n += 1) {
      const response = await leader.request('PUT', '/v1/acl/policy', { body: { Name: `compact-${n}` } })
      expect(response.status, response.text).to.equal(200)
    }
    for (const agent of cluster.running()) {
      const state = await agent.request('GET', '/v1/operator/raft/state')
      expect(state.body.AppliedIndex).to.be.above(80)
    }
  })

  it('catches up a node whose data dir was wiped through a snapshot from the leader', async () => {
    const leaderName = await cluster.leader()
    const victim = cluster.followers(leaderName)[0]!
    await cluster.kill(victim)
    const spec = cluster.specs.find((candidate) => candidate.name === victim)!
    await rm(spec.dataDir, { recursive: true, force: true })
    const leader = cluster.node(leaderName)
    for (let n = 0; n < 60; n += 1) {
      const response = await leader.request('PUT', '/v1/acl/policy', { body: { Name: `while-wiped-${n}` } })
      expect(response.status, response.text).to.equal(200)
    }
    const expected = await policies(leader)
    const restarted = await cluster.restart(victim)
    const deadline = Date.now() + 20_000
    for (;;) {
      const self = await restarted.request('GET', '/v1/acl/policies?stale').catch(() => undefined)
      if (self?.status === 200 && (self.body as unknown[]).length === expected.length) break
      if (Date.now() > deadline) throw new Error(`the wiped node did not catch up: ${self?.status} ${self?.text.slice(0, 200)}\n${restarted.logs.slice(-15).join("\n")}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(await policies(restarted)).to.deep.equal(expected)
    expect(restarted.logs.join('\n')).to.include('installed a snapshot from the leader')
    const after = await restarted.request('PUT', '/v1/acl/policy', { body: { Name: 'after-snapshot' } })
    expect(after.status, after.text).to.equal(200)
    expect((await policies(restarted)).some((policy) => policy.Name === 'after-snapshot')).to.equal(true)
  })

  it('catches up a wiped node of an idle cluster, whose leader last saw it fully replicated', async () => {
    const leaderName = await cluster.leader()
    const leader = cluster.node(leaderName)
    for (let n = 0; n < 60; n += 1) expect((await leader.request('PUT', '/v1/acl/policy', { body: { Name: `before-idle-wipe-${n}` } })).status).to.equal(200)
    const victim = cluster.followers(leaderName)[0]!
    // Let the follower acknowledge everything, so the leader's matchIndex for it is the last index.
    await new Promise((resolve) => setTimeout(resolve, 300))
    await cluster.kill(victim)
    await rm(cluster.specs.find((candidate) => candidate.name === victim)!.dataDir, { recursive: true, force: true })
    const expected = await policies(leader)
    const restarted = await cluster.restart(victim)
    const deadline = Date.now() + 20_000
    for (;;) {
      const list = await restarted.request('GET', '/v1/acl/policies?stale').catch(() => undefined)
      if (list?.status === 200 && (list.body as unknown[]).length === expected.length) break
      if (Date.now() > deadline) throw new Error(`the wiped node of an idle cluster did not catch up: ${list?.status}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(await policies(restarted)).to.deep.equal(expected)
  })
})
