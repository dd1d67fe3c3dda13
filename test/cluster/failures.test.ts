/**
 * Failures an old leader must survive without lying (issue 6): a leader paused with SIGSTOP that wakes up still
 * believing it leads, a leader cut off from its peers, and a node restarted after the others moved on. Three real
 * processes through cluster/lib.ts, with partitions made at the link proxies.
 *
 * Method: requests are sent to the old leader while it cannot act (paused, or partitioned), and every answer is
 * recorded. The rule checked is the client's: a 200 for a write means the write is in the final state, read with
 * `?consistent` from the current leader; a `?consistent` read answered after a newer write was acknowledged
 * elsewhere includes that write. Errors (503 no_leader, 504 outcome_unknown, a timeout) are always allowed.
 * `afterEach` undoes whatever a test left broken (resumes, heals, restarts), so each test starts from a healthy
 * cluster, and `after` stops every process even when a test failed.
 */
import { expect } from 'chai'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LocalCluster } from '../../cluster/lib.js'

/** The agent's default raft.election_timeout; this file starts the nodes with the defaults. */
const ELECTION_TIMEOUT_MS = 500
/** Longer than the agent's own waits (7 s for a leader, 10 s for a commit), so its answer arrives before ours. */
const CLIENT_TIMEOUT_MS = 15_000

interface Outcome {
  name: string
  status: number | 'timeout'
  text: string
}

async function sleep(ms: number): Promise<void> {
  await new Promise((resolvePromise) => setTimeout(resolvePromise, ms))
}

describe('failures an old leader must survive without lying', function () {
  this.timeout(60_000)
  let root: string
  let cluster: LocalCluster | undefined

  async function createPolicy(node: string, name: string): Promise<Outcome> {
    try {
      const response = await cluster!.request(node, 'PUT', '/v1/acl/policy', { body: { Name: name }, timeoutMs: CLIENT_TIMEOUT_MS })
      return { name, status: response.status, text: response.text }
    } catch (error) {
      // No answer in time (or the connection dropped): the outcome is unknown, which is allowed.
      return { name, status: 'timeout', text: String(error) }
    }
  }

  async function policyNames(node: string, mode: 'stale' | 'consistent'): Promise<{ status: number | 'timeout'; names: Set<string> }> {
    try {
      const response = await cluster!.request(node, 'GET', `/v1/acl/policies?${mode}`, { timeoutMs: CLIENT_TIMEOUT_MS })
      const names = response.status === 200 ? (response.body as Array<{ Name: string }>).map((policy) => policy.Name) : []
      return { status: response.status, names: new Set(names) }
    } catch {
      return { status: 'timeout', names: new Set() }
    }
  }

  /** What the cluster holds now: a consistent read on the current leader (retried while leadership settles). */
  async function finalNames(): Promise<Set<string>> {
    for (let attempt = 0; ; attempt += 1) {
      const read = await policyNames(await cluster!.leader(), 'consistent')
      if (read.status === 200) return read.names
      if (attempt === 20) throw new Error(`no consistent read succeeded: ${read.status}`)
      await sleep(100)
    }
  }

  function expectAcknowledgedPresent(outcomes: Outcome[], present: Set<string>): void {
    for (const outcome of outcomes) {
      if (outcome.status === 200) expect(present.has(outcome.name), `${outcome.name} was acknowledged (200) and then lost`).to.equal(true)
      else expect([503, 504, 'timeout'], `${outcome.name}: ${outcome.status} ${outcome.text}`).to.include(outcome.status)
    }
  }

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'warden-failures-'))
    cluster = await LocalCluster.up({ root })
  })

  afterEach(async () => {
    if (cluster === undefined) return
    for (const node of await cluster.status()) {
      if (node.paused) await cluster.resume(node.node)
    }
    await cluster.heal()
    for (const node of await cluster.status()) {
      if (!node.up) await cluster.restart(node.node)
    }
    await cluster.leader(15_000)
  })

  after(async () => {
    try {
      await cluster?.down()
    } finally {
      await rm(root, { recursive: true, force: true })
    }
  })

  it('a paused leader that resumes acknowledges no lost write and serves no stale consistent read', async () => {
    const old = await cluster!.leader()
    expect((await createPolicy(old, 'before-pause')).status).to.equal(200)
    await cluster!.pause(old)
    // Sent while it cannot run: the kernel queues them, and the node sees them only when it wakes up, still
    // believing it leads in a term the others have left.
    const early = ['paused-1', 'paused-2'].map((name) => createPolicy(old, name))
    const next = await cluster!.leader(10_000)
    expect(next).to.not.equal(old)
    const newer = await createPolicy(next, 'after-pause')
    expect(newer.status, newer.text).to.equal(200)
    // Sent after the new leader acknowledged `after-pause`: a consistent read must include it or fail.
    const consistentRead = policyNames(old, 'consistent')
    const late = ['paused-3', 'paused-4'].map((name) => createPolicy(old, name))
    await sleep(50) // Let the requests reach the paused node's socket before it runs again.
    await cluster!.resume(old)
    const read = await consistentRead
    if (read.status === 200) expect(read.names.has('after-pause'), 'the resumed old leader served a stale consistent read').to.equal(true)
    else expect([503, 504, 'timeout']).to.include(read.status)
    const outcomes = await Promise.all([...early, ...late])
    expectAcknowledgedPresent(outcomes, await finalNames())
    // Once it has caught up, the old leader serves consistent reads again, with the new leader's write.
    const again = await policyNames(old, 'consistent')
    expect(again.status).to.equal(200)
    expect(again.names.has('after-pause')).to.equal(true)
  })

  it('a leader paused for seconds wakes without its lease: no stale default read, no write from a token deleted meanwhile', async () => {
    const old = await cluster!.leader()
    const writer = await cluster!.request(old, 'PUT', '/v1/acl/policy', { body: { Name: 'lease-writer', Rules: 'acl = "write"' } })
    expect(writer.status, writer.text).to.equal(200)
    const token = await cluster!.request(old, 'PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'lease-writer' }] } })
    expect(token.status, token.text).to.equal(200)
    const secret = (token.body as { SecretID: string }).SecretID
    // The old leader knows the token and has it cached: it works there before the pause.
    expect((await cluster!.request(old, 'GET', '/v1/acl/token/self', { token: secret })).status).to.equal(200)
    const pausedAt = Date.now()
    await cluster!.pause(old)
    const next = await cluster!.leader(10_000)
    expect(next).to.not.equal(old)
    const deleted = await cluster!.request(next, 'DELETE', `/v1/acl/token/${(token.body as { AccessorID: string }).AccessorID}`)
    expect(deleted.status, deleted.text).to.equal(200)
    expect((await createPolicy(next, 'while-old-leader-paused')).status).to.equal(200)
    // Long enough for the peers to give up on the paused node's links: when it wakes it must reconnect before it can
    // hear of the new term, and what it answers in that gap must not come from its old state.
    await sleep(Math.max(0, 5_000 - (Date.now() - pausedAt)))
    const defaultRead = cluster!
      .request(old, 'GET', '/v1/acl/policies', { timeoutMs: CLIENT_TIMEOUT_MS })
      .then((response) => ({ status: response.status, names: response.status === 200 ? (response.body as Array<{ Name: string }>).map((policy) => policy.Name) : [] }))
      .catch(() => ({ status: 'timeout' as const, names: [] as string[] }))
    const self = cluster!.request(old, 'GET', '/v1/acl/token/self', { token: secret, timeoutMs: CLIENT_TIMEOUT_MS }).then((response) => response.status, () => 'timeout' as const)
    const write = cluster!
      .request(old, 'PUT', '/v1/acl/policy', { token: secret, body: { Name: 'by-deleted-token' }, timeoutMs: CLIENT_TIMEOUT_MS })
      .then((response) => ({ status: response.status, text: response.text }), () => ({ status: 'timeout' as const, text: '' }))
    await sleep(50) // Let the requests reach the paused node's socket before it runs again.
    await cluster!.resume(old)
    const [readResult, selfStatus, writeResult] = await Promise.all([defaultRead, self, write])
    if (readResult.status === 200) expect(readResult.names, 'the resumed old leader served a stale default read').to.include('while-old-leader-paused')
    else expect([503, 504, 'timeout']).to.include(readResult.status)
    expect(selfStatus, 'a token deleted while the leader was paused still resolved there').to.not.equal(200)
    expect(writeResult.status, `a write with a deleted token was accepted: ${writeResult.text}`).to.not.equal(200)
    expect((await finalNames()).has('by-deleted-token'), 'a deleted token wrote').to.equal(false)
  })

  it('a partitioned leader steps down within two election timeouts and then refuses writes with 503/504', async () => {
    const old = await cluster!.leader()
    const oldAddress = cluster!.state().nodes[old]!.clusterAddress
    const partitionedAt = Date.now()
    await cluster!.partition(old)
    // Sent while it still believes it leads: it cannot commit without a majority.
    const early = createPolicy(old, 'partitioned-early')
    let steppedDownMs: number | undefined
    while (Date.now() - partitionedAt < 4 * ELECTION_TIMEOUT_MS) {
      const leader = await cluster!.request(old, 'GET', '/v1/status/leader', { token: null })
      if (leader.body !== oldAddress) {
        steppedDownMs = Date.now() - partitionedAt
        break
      }
      await sleep(20)
    }
    expect(steppedDownMs, 'the partitioned leader still names itself').to.not.equal(undefined)
    // Check quorum runs once per election timeout, so stepping down takes between one and two; a little slack for
    // the poll and a busy machine.
    expect(steppedDownMs!).to.be.below(2 * ELECTION_TIMEOUT_MS + 300)
    const next = await cluster!.leader(10_000)
    expect(next).to.not.equal(old)
    const majority = await createPolicy(next, 'majority-side')
    expect(majority.status, majority.text).to.equal(200)
    const late = await createPolicy(old, 'partitioned-late')
    const outcomes = [await early, late]
    for (const outcome of outcomes) {
      expect(outcome.status, `${outcome.name} on the partitioned old leader: ${outcome.text}`).to.be.oneOf([503, 504])
    }
    const stale = await policyNames(old, 'stale')
    expect(stale.names.has('majority-side'), 'the partitioned node saw a write it cannot have received').to.equal(false)
    await cluster!.heal()
    expectAcknowledgedPresent(outcomes, await finalNames())
  })

  it('a restarted node catches up on what was committed while it was down', async () => {
    const old = await cluster!.leader()
    await cluster!.kill(old)
    const next = await cluster!.leader(10_000)
    const names = Array.from({ length: 20 }, (_, position) => `while-down-${position}`)
    for (const name of names) {
      const outcome = await createPolicy(next, name)
      expect(outcome.status, outcome.text).to.equal(200)
    }
    const leaderCommit = (await cluster!.status()).find((node) => node.node === next)!.commitIndex
    await cluster!.restart(old)
    const deadline = Date.now() + 10_000
    for (;;) {
      const read = await policyNames(old, 'stale')
      const applied = (await cluster!.status()).find((node) => node.node === old)!.appliedIndex
      if (names.every((name) => read.names.has(name)) && applied >= leaderCommit) break
      if (Date.now() > deadline) throw new Error(`${old} did not catch up: applied ${applied}, leader commit ${leaderCommit}`)
      await sleep(50)
    }
    // And it serves them from its own state in every mode, as a follower.
    const consistent = await policyNames(old, 'consistent')
    expect(consistent.status).to.equal(200)
    expect(names.every((name) => consistent.names.has(name))).to.equal(true)
  })
})
