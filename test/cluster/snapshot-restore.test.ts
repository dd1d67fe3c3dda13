/**
 * Snapshot restore on a three-node cluster of real processes (issue 20). A small snapshot threshold makes every node
 * compact its log while a restore's chunks go through it, so the staged records must travel in Raft snapshots too.
 * Checked on every node with `?stale` reads: the restored state equals the saved one (every record's ID, Hash and
 * CreateIndex), also on a follower killed with SIGKILL in the middle of a restore; with the leader killed in the middle,
 * the answer says whether the restore took place and every node agrees; and under a stream of writes: each
 * write is refused while the restore is open or lands before or after it, and exactly the acknowledged writes after
 * it are there.
 */
import { expect } from 'chai'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client } from '../../src/api/index.js'
import type { AgentProcess } from '../support/agent.js'
import { TestCluster } from '../support/cluster.js'

type Contents = { tokens: Array<[string, string, number]>; policies: Array<[string, string, number]> }

async function contents(agent: AgentProcess): Promise<Contents> {
  const list = async (path: string, id: string): Promise<Array<[string, string, number]>> => {
    const answer = await agent.request('GET', `${path}?stale`)
    expect(answer.status, `${path}: ${answer.text}`).to.equal(200)
    return (answer.body as Array<Record<string, unknown>>)
      .map((record) => [String(record[id]), String(record['Hash'] ?? ''), Number(record['CreateIndex'])] as [string, string, number])
      .sort((a, b) => a[0].localeCompare(b[0]))
  }
  return { tokens: await list('/v1/acl/tokens', 'AccessorID'), policies: await list('/v1/acl/policies', 'ID') }
}

async function appliedIndex(agent: AgentProcess): Promise<number> {
  const state = await agent.request('GET', '/v1/operator/raft/state')
  return Number(state.body?.AppliedIndex ?? 0)
}

async function waitApplied(agents: AgentProcess[], index: number, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (const agent of agents) {
    while ((await appliedIndex(agent).catch(() => 0)) < index) {
      if (Date.now() > deadline) throw new Error(`a node did not apply index ${index} within ${timeoutMs} ms`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
}

async function* chunks(bytes: Buffer): AsyncGenerator<Buffer> {
  for (let at = 0; at < bytes.length; at += 64 * 1024) yield bytes.subarray(at, at + 64 * 1024)
}

describe('snapshot restore in a three-node cluster', function () {
  this.timeout(180_000)
  let cluster: TestCluster
  let configDir: string
  const clients: Client[] = []
  const clientOf = (agent: AgentProcess): Client => {
    const client = new Client({ address: agent.httpAddress, token: agent.managementToken, timeoutMs: 120_000 })
    clients.push(client)
    return client
  }

  before(async () => {
    configDir = await mkdtemp(join(tmpdir(), 'warden-restore-config-'))
    const configFile = join(configDir, 'config.json')
    await writeFile(configFile, JSON.stringify({ raft: { snapshot_threshold: 25 } }))
    cluster = await TestCluster.start({ args: ['--config-file', configFile] })
  })
  after(async () => {
    for (const client of clients) client.close()
    await cluster?.stop()
    if (configDir !== undefined) await rm(configDir, { recursive: true, force: true })
  })

  const save = async (agent: AgentProcess): Promise<{ archive: Buffer; index: number }> => {
    const parts: Buffer[] = []
    const meta = await clientOf(agent).download('/v1/snapshot', (chunk) => void parts.push(chunk))
    return { archive: Buffer.concat(parts), index: meta.index }
  }

  it('restores through a follower onto every node, a follower killed half way included', async () => {
    const leader = cluster.node(await cluster.leader())
    // Large descriptions: the archive spans several chunks, and the log compacts between them.
    const description = 'x'.repeat(8 * 1024)
    for (let n = 0; n < 20; n += 1) expect((await leader.request('PUT', '/v1/acl/policy', { body: { Name: `saved-${n}` } })).status).to.equal(200)
    let removed = ''
    for (let n = 0; n < 240; n += 1) {
      const created = await leader.request('PUT', '/v1/acl/token', { body: { Description: `${n} ${description}` } })
      expect(created.status).to.equal(200)
      removed = created.body.AccessorID
    }
    const saved = await save(leader)
    expect(saved.archive.length).to.be.greaterThan(0)
    const expected = await contents(leader)
    expect(expected.tokens.length).to.be.greaterThan(240)

    for (let n = 0; n < 30; n += 1) expect((await leader.request('PUT', '/v1/acl/token', { body: { Description: `after ${n}` } })).status).to.equal(200)
    expect((await leader.request('DELETE', `/v1/acl/token/${removed}`)).status).to.equal(200)

    const leaderName = await cluster.leader()
    const [through, victim] = cluster.followers(leaderName)
    const restoring = clientOf(cluster.node(through!)).upload('/v1/snapshot', chunks(saved.archive), { bytes: saved.archive.length })
    // SIGKILL the other follower while the restore goes on; the leader and the follower driving it are a majority.
    await new Promise((resolve) => setTimeout(resolve, 150))
    await cluster.kill(victim!)
    const restored = await restoring
    await cluster.restart(victim!)
    await waitApplied(cluster.running(), restored.index)
    for (const agent of cluster.running()) expect(await contents(agent), agent.httpAddress).to.deep.equal(expected)
  })

  it('a leader SIGKILLed during a restore driven by a follower: the answer says which, and every node agrees', async () => {
    const leaderName = await cluster.leader()
    const leader = cluster.node(leaderName)
    const description = 'y'.repeat(8 * 1024)
    for (let n = 0; n < 120; n += 1) expect((await leader.request('PUT', '/v1/acl/token', { body: { Description: `kill ${n} ${description}` } })).status).to.equal(200)
    const saved = await save(leader)
    const expected = await contents(leader)
    for (let n = 0; n < 10; n += 1) expect((await leader.request('PUT', '/v1/acl/policy', { body: { Name: `after-save-${n}` } })).status).to.equal(200)
    const before = await contents(leader)
    const through = cluster.node(cluster.followers(leaderName)[0]!)
    const outcome = clientOf(through)
      .upload('/v1/snapshot', chunks(saved.archive), { bytes: saved.archive.length })
      .then((meta) => ({ ok: true as const, index: meta.index }), (error: unknown) => ({ ok: false as const, error }))
    await new Promise((resolve) => setTimeout(resolve, 100))
    await cluster.kill(leaderName)
    const answered = await outcome
    await cluster.restart(leaderName)
    // Writes are accepted again: at once after a completed or abandoned restore, within the janitor's 60 s otherwise.
    const deadline = Date.now() + 90_000
    let probe: { status: number } = { status: 0 }
    while (Date.now() < deadline) {
      const current = cluster.node(await cluster.leader())
      probe = await current.request('PUT', '/v1/acl/policy', { body: { Name: `probe-${Date.now()}` } }).catch(() => ({ status: 0 }))
      if (probe.status === 200) break
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
    expect(probe.status, 'a write after the restore').to.equal(200)
    const last = Math.max(...(await Promise.all(cluster.running().map((agent) => appliedIndex(agent)))))
    await waitApplied(cluster.running(), last)
    const seen = await Promise.all(cluster.running().map((agent) => contents(agent)))
    // Tokens only: the probes above are policies.
    const states = seen.map((found) => JSON.stringify(found.tokens))
    expect(new Set(states).size, 'every node holds the same tokens').to.equal(1)
    const tokens = seen[0]!.tokens
    if (answered.ok) expect(tokens, 'a restore answered 200 is in place').to.deep.equal(expected.tokens)
    else if ((answered.error as { status?: number }).status === 500) expect(tokens, 'a restore answered "nothing was restored" is not').to.deep.equal(before.tokens)
    else expect([JSON.stringify(expected.tokens), JSON.stringify(before.tokens)], 'an unknown outcome is one or the other').to.include(JSON.stringify(tokens))
    console.log(`      (the restore ${answered.ok ? 'completed' : `failed: ${(answered.error as Error).message.slice(0, 160)}`})`)
  })

  it('keeps exactly the acknowledged writes made after a restore that runs during writes', async () => {
    const leader = cluster.node(await cluster.leader())
    const saved = await save(leader)
    const expected = await contents(leader)
    let writing = true
    const acknowledged: Array<{ id: string; index: number }> = []
    let refused = 0
    const writer = (async () => {
      for (let n = 0; writing; n += 1) {
        const answer = await leader.request('PUT', '/v1/acl/token', { body: { Description: `during ${n}` } })
        if (answer.status === 200) acknowledged.push({ id: answer.body.AccessorID, index: answer.body.CreateIndex })
        else if (answer.status === 503 && /restore/.test(answer.text)) refused += 1
        else throw new Error(`unexpected answer during the restore: ${answer.status} ${answer.text}`)
      }
    })()
    try {
      await new Promise((resolve) => setTimeout(resolve, 300))
      const restored = await clientOf(leader).upload('/v1/snapshot', chunks(saved.archive), { bytes: saved.archive.length })
      await new Promise((resolve) => setTimeout(resolve, 300))
      writing = false
      await writer
      const after = acknowledged.filter(({ index }) => index > restored.index)
      expect(acknowledged.filter(({ index }) => index <= restored.index).length, 'writes acknowledged before the restore').to.be.greaterThan(0)
      expect(after.length, 'writes acknowledged after the restore').to.be.greaterThan(0)
      const last = Math.max(...acknowledged.map(({ index }) => index))
      await waitApplied(cluster.running(), last)
      const afterIds = new Set(after.map(({ id }) => id))
      for (const agent of cluster.running()) {
        const now = await contents(agent)
        expect(now.policies, agent.httpAddress).to.deep.equal(expected.policies)
        // The saved tokens, plus exactly the ones acknowledged after the restore.
        expect(now.tokens.filter(([id]) => !afterIds.has(id)), agent.httpAddress).to.deep.equal(expected.tokens)
        expect(now.tokens.filter(([id]) => afterIds.has(id)).length, agent.httpAddress).to.equal(after.length)
      }
      // `refused` counts writes that met the open restore; how many depends on timing, so it is only reported.
      console.log(`      (${acknowledged.length} writes acknowledged, ${refused} refused while the restore was open)`)
    } finally {
      writing = false
      await writer.catch(() => undefined)
    }
  })
})
