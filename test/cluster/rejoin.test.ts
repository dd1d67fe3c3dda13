/**
 * Two ways a server that lost (or never had) its place in the configuration can break safety, each reproduced with
 * real `warden agent` processes (SIGKILL, SIGSTOP/SIGCONT, a wiped data dir) and checked by the client's rule: a write
 * acknowledged with 200 is never lost, and no server acknowledges a write the cluster does not hold.
 *
 * 1. A server started with `--join` that is killed after it received its first log entries but before the entry
 *    adding it to the configuration reached it must not, when restarted with the same flags, take its voters from its
 *    flags (only itself) and lead alone: a write sent to it while the founders are paused must fail, not be
 *    acknowledged. The window is reached by giving the founders a log of several AppendEntries' worth of large entries
 *    (512 entries or 1 MiB per message), killing the joiner as soon as its log is not empty, and asserting on the
 *    restarted joiner that its log really is non-empty and ends before the configuration entry that added it.
 * 2. A voter whose data dir was wiped comes back with no log and no memory of its vote: it must not vote (nor count
 *    toward a quorum) until it has been re-added, or it lets a server that lacks an acknowledged write win an
 *    election. W is written while C is paused (so only A and B hold it); A is killed, B killed and its data dir
 *    deleted, C resumed, B restarted with the same flags: C and B must not elect a leader that answers 404 for W.
 *    Once A is back, W must be readable everywhere and B a voter again, holding W.
 */
import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CLUSTER_KEY, freePort, MANAGEMENT_TOKEN, TestCluster } from '../support/cluster.js'
import { startAgent, type AgentProcess } from '../support/agent.js'

/** Longer than the agent's own waits (7 s for a leader, 10 s for a commit), so its answer arrives before ours. */
const CLIENT_TIMEOUT_MS = 15_000

interface Answer {
  status: number | 'timeout'
  body: any
  text: string
}

interface RaftStateBody {
  Node: string
  Role: string
  Term: number
  Leader: string
  CommitIndex: number
  AppliedIndex: number
  LastIndex: number
}

interface Server {
  ID: string
  Voter: boolean
  Leader: boolean
}

async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms))
}

/** A request with the management token that gives up after `timeoutMs` (a paused or dead node answers nothing). */
async function call(agent: AgentProcess, method: string, path: string, options: { body?: unknown; timeoutMs?: number } = {}): Promise<Answer> {
  try {
    const { status, body, text } = await agent.request(method, path, {
      token: MANAGEMENT_TOKEN,
      ...(options.body === undefined ? {} : { body: options.body }),
      timeoutMs: options.timeoutMs ?? CLIENT_TIMEOUT_MS,
    })
    return { status, body, text }
  } catch (error) {
    return { status: 'timeout', body: undefined, text: String(error) }
  }
}

async function raftState(agent: AgentProcess, timeoutMs = 2_000): Promise<RaftStateBody | undefined> {
  const answer = await call(agent, 'GET', '/v1/operator/raft/state', { timeoutMs })
  return answer.status === 200 ? (answer.body as RaftStateBody) : undefined
}

async function servers(agent: AgentProcess, timeoutMs = 2_000): Promise<{ servers: Server[]; index: number } | undefined> {
  const answer = await call(agent, 'GET', '/v1/operator/raft/configuration', { timeoutMs })
  return answer.status === 200 ? { servers: answer.body.Servers as Server[], index: answer.body.Index as number } : undefined
}

/** Waits until `check` is true; `what` (a function to describe the last attempt) names it in the error otherwise. */
async function eventually(check: () => Promise<boolean>, what: string | (() => string), timeoutMs: number, intervalMs = 50): Promise<void> {
  if (!(await within(check, timeoutMs, intervalMs))) {
    throw new Error(`timed out after ${timeoutMs} ms waiting until ${typeof what === 'string' ? what : what()}`)
  }
}

/** Whether `check` came true within `timeoutMs`. */
async function within(check: () => Promise<boolean>, timeoutMs: number, intervalMs = 50): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) return false
    await sleep(intervalMs)
  }
  return true
}

/** The process state letter from /proc (R, S, D: running; T: stopped by a signal). */
function processState(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
  } catch {
    return 'gone'
  }
}

/** SIGSTOP and SIGCONT on the agents a test started, remembering which are paused so that cleanup resumes them. */
class Pauser {
  private readonly paused = new Set<AgentProcess>()

  async pause(agent: AgentProcess): Promise<void> {
    agent.child.kill('SIGSTOP')
    this.paused.add(agent)
    await eventually(async () => processState(agent.child.pid!) === 'T', `process ${agent.child.pid} stopped on SIGSTOP`, 2_000)
  }

  async resume(agent: AgentProcess): Promise<void> {
    this.paused.delete(agent)
    if (agent.child.exitCode !== null || agent.child.signalCode !== null) return
    agent.child.kill('SIGCONT')
    await eventually(async () => processState(agent.child.pid!) !== 'T', `process ${agent.child.pid} continued on SIGCONT`, 2_000)
  }

  /** Resumes every paused agent still alive (a stopped process cannot act on the SIGTERM that stops it). */
  async resumeAll(): Promise<void> {
    for (const agent of [...this.paused]) {
      this.paused.delete(agent)
      if (agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill('SIGCONT')
    }
  }
}

function is2xx(status: number | 'timeout'): boolean {
  return typeof status === 'number' && status >= 200 && status < 300
}

describe('a server that lost its place in the configuration does not break safety', function () {
  this.timeout(90_000)
  let cluster: TestCluster | undefined
  let joiner: AgentProcess | undefined
  const pauser = new Pauser()
  const directories: string[] = []

  afterEach(async () => {
    await pauser.resumeAll()
    await joiner?.stop()
    joiner = undefined
    await cluster?.stop()
    cluster = undefined
    for (const directory of directories.splice(0)) await rm(directory, { recursive: true, force: true })
  })

  it('a server restarted after joining, before the entry adding it reached it, does not lead alone: its write fails while the founders are paused', async function () {
    const configDir = await mkdtemp(join(tmpdir(), 'warden-rejoin-config-'))
    directories.push(configDir)
    const configFile = join(configDir, 'config.json')
    // No compaction: the joiner must catch up from the log, entry by entry, not from a snapshot.
    await writeFile(configFile, JSON.stringify({ raft: { snapshot_threshold: 1_000_000 } }))
    cluster = await TestCluster.start({ args: ['--config-file', configFile] })
    const leaderName = await cluster.leader()
    const leader = cluster.node(leaderName)
    // A long log of large entries: at most 512 entries or 1 MiB go in one AppendEntries, so the joiner receives it in
    // many messages, and the configuration entry adding it comes after all of them.
    const WRITES = 1_600
    const DESCRIPTION = 'x'.repeat(16_384)
    const acknowledged: string[] = []
    let next = 0
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < WRITES) {
          const name = `fill-${next}`
          next += 1
          const answer = await call(leader, 'PUT', '/v1/acl/policy', { body: { Name: name, Description: DESCRIPTION } })
          expect(answer.status, `${name}: ${answer.text.slice(0, 200)}`).to.equal(200)
          acknowledged.push(name)
        }
      }),
    )
    const founded = await raftState(leader)
    expect(founded, 'the leader answers /v1/operator/raft/state').to.not.equal(undefined)
    // Every entry the joiner's configuration entry comes after: nothing else is written until the joiner is killed.
    const before = founded!

    const joinerDir = await mkdtemp(join(tmpdir(), 'warden-joiner-'))
    directories.push(joinerDir)
    const joinerArgs = [
      '--node-name', 'n4',
      '--http-addr', `127.0.0.1:${await freePort()}`,
      '--cluster-addr', `127.0.0.1:${await freePort()}`,
      '--cluster-key', CLUSTER_KEY,
      '--config-file', configFile,
      '--join', cluster.node(cluster.followers(leaderName)[0]!).httpAddress,
    ]
    joiner = await startAgent({ dev: false, dataDir: joinerDir, keepDataDir: true, args: joinerArgs })
    joiner.managementToken = MANAGEMENT_TOKEN
    const first = joiner
    // As soon as the joiner has some of the log (and has applied the management token with it, or this endpoint would
    // refuse the token), kill it; then pause the founders, so that the restarted joiner hears from nobody.
    let seen: RaftStateBody | undefined
    await eventually(async () => {
      seen = await raftState(first, 1_000)
      return seen !== undefined && seen.LastIndex > 0
    }, 'the joiner has received log entries', 20_000, 5)
    await first.kill()
    joiner = undefined
    for (const founder of cluster.running()) await pauser.pause(founder)

    joiner = await startAgent({ dev: false, dataDir: joinerDir, keepDataDir: true, args: joinerArgs })
    joiner.managementToken = MANAGEMENT_TOKEN
    const restarted = joiner
    // The precondition, on the restarted joiner itself: it holds part of the founders' log (so it is not joining
    // from scratch) and none of what came after it, so not the configuration entry that added it.
    const recovered = await raftState(restarted, 5_000)
    expect(recovered, 'the restarted joiner answers /v1/operator/raft/state with the management token').to.not.equal(undefined)
    expect(recovered!.LastIndex, 'the restarted joiner has log entries').to.be.above(0)
    expect(
      recovered!.LastIndex,
      `the joiner had received the whole log (last index ${recovered!.LastIndex}; ${seen!.LastIndex} when seen) when it was killed: the window before the configuration entry (after index ${before.LastIndex}) was missed`,
    ).to.be.at.most(before.LastIndex)

    // With every founder paused, a write on the restarted joiner has no cluster to commit it.
    const lone = await call(restarted, 'PUT', '/v1/acl/policy', { body: { Name: 'written-on-the-lone-joiner' } })
    const alone = await raftState(restarted, 5_000)
    expect(
      is2xx(lone.status),
      `the restarted joiner (last index ${recovered!.LastIndex} of the founders' ${before.LastIndex}) acknowledged a write with ${lone.status} while every founder was paused: it led alone (role ${alone?.Role}, term ${alone?.Term}, leader ${alone?.Leader})`,
    ).to.equal(false)

    // The founders come back: one leader for all four, the joiner a voter that has caught up, nothing acknowledged lost.
    for (const founder of cluster.running()) await pauser.resume(founder)
    const founders = cluster
    let leaderNow = ''
    await eventually(async () => {
      leaderNow = await founders.leader(1_000)
      const state = await raftState(restarted, 1_000)
      return state !== undefined && state.Leader === leaderNow
    }, 'the founders and the joiner agree on one leader', 20_000)
    const newLeader = cluster.node(leaderNow)
    await eventually(async () => {
      const configuration = await servers(newLeader, 1_000)
      return configuration !== undefined && configuration.servers.some((server) => server.ID === 'n4' && server.Voter)
    }, 'n4 is a voter in the leader’s configuration', 30_000)
    await eventually(async () => {
      const [ours, theirs] = await Promise.all([raftState(restarted, 1_000), raftState(newLeader, 1_000)])
      return ours !== undefined && theirs !== undefined && ours.AppliedIndex >= theirs.CommitIndex
    }, 'n4 has applied everything the leader committed', 20_000)
    const written = [...acknowledged, ...(lone.status === 200 ? ['written-on-the-lone-joiner'] : [])]
    for (const agent of [newLeader, restarted]) {
      const list = await call(agent, 'GET', '/v1/acl/policies?consistent', { timeoutMs: 30_000 })
      expect(list.status, list.text.slice(0, 200)).to.equal(200)
      const names = new Set((list.body as Array<{ Name: string }>).map((policy) => policy.Name))
      const missing = written.filter((name) => !names.has(name))
      expect(missing, `acknowledged writes missing on ${agent.httpAddress}`).to.deep.equal([])
    }
  })

  it('a restart whose --peer flags name other members is refused with one line and exit code 2, and the data dir stays usable', async function () {
    cluster = await TestCluster.start()
    const spec = cluster.specs[2]!
    await cluster.kill(spec.name)
    // n1 and a stranger instead of n1 and n2: a member's name cannot change across restarts.
    const others = cluster.specs.filter((other) => other !== spec)
    const edited = [`${others[0]!.name}=127.0.0.1:${others[0]!.clusterPort}`, `stranger=127.0.0.1:${others[1]!.clusterPort}`, `${spec.name}=127.0.0.1:${spec.clusterPort}`]
    const { spawnSync } = await import('node:child_process')
    const { CLI } = await import('../support/agent.js')
    const args = ['agent', '--data-dir', spec.dataDir, '--node-name', spec.name, '--http-addr', `127.0.0.1:${spec.httpPort}`, '--cluster-addr', `127.0.0.1:${spec.clusterPort}`, '--cluster-key', CLUSTER_KEY]
    const result = spawnSync(process.execPath, [CLI, ...args, ...edited.flatMap((peer) => ['--peer', peer])], { encoding: 'utf8', timeout: 15_000 })
    expect(result.status, result.stderr).to.equal(2)
    const lines = result.stderr.trim().split('\n')
    expect(lines).to.have.length(1)
    expect(lines[0]).to.include('--peer').and.to.include('stranger')
    // With its usual flags it starts again and the cluster agrees on a leader with all three.
    await cluster.restart(spec.name)
    await cluster.ready()
    const configuration = await call(cluster.node(await cluster.leader()), 'GET', '/v1/operator/raft/configuration')
    expect((configuration.body as { Servers: Array<{ Node: string }> }).Servers.map((server) => server.Node).sort()).to.deep.equal(cluster.specs.map((other) => other.name).sort())
  })

  it('a voter that comes back with a wiped data dir does not vote until re-added: no leader lacks an acknowledged write', async function () {
    cluster = await TestCluster.start()
    const founders = cluster
    const aName = await cluster.leader()
    const [bName, cName] = cluster.followers(aName) as [string, string]
    const a = cluster.node(aName)
    const b = cluster.node(bName)
    const c = cluster.node(cName)
    const W = 'acknowledged-while-c-was-paused'

    // W is acknowledged while C is paused: it is on A and B only. Before writing it, A must have closed its link to C
    // (keepalive: three silent seconds), or the AppendEntries carrying W would wait in C's socket buffer and reach C
    // when it wakes.
    const logsBefore = a.logs.length
    await pauser.pause(c)
    // The log line is the quick way to know; past 6 s the keepalive has closed the link anyway. Either way the
    // precondition is checked below, on C itself.
    await within(async () => a.logs.slice(logsBefore).some((line) => line.includes('"peer disconnected"') && line.includes(`"peer":"${cName}"`)), 6_000)
    const beforeW = (await raftState(a))!.LastIndex
    const write = await call(a, 'PUT', '/v1/acl/policy', { body: { Name: W } })
    expect(write.status, write.text).to.equal(200)
    await eventually(async () => (await call(b, 'GET', `/v1/acl/policy/name/${W}?stale`, { timeoutMs: 1_000 })).status === 200, `${bName} has applied W`, 5_000)

    // A dies, B loses its data dir; then C wakes and B comes back empty, with the same flags. (A is dead before B
    // restarts: a live A would send B its log at once, W included.)
    await cluster.kill(aName)
    await cluster.kill(bName)
    await rm(cluster.specs.find((spec) => spec.name === bName)!.dataDir, { recursive: true, force: true })
    await pauser.resume(c)
    // The precondition: C, awake, does not hold W (its log ends before W's index).
    await sleep(300)
    const cState = await raftState(c)
    expect(cState?.LastIndex, `${cName} received W after all: the precondition (W on ${aName} and ${bName} only) does not hold`).to.be.at.most(beforeW)
    const wiped = await cluster.restart(bName)

    // Give C every chance to win an election with the wiped B's vote (today it does within an election timeout or two).
    let states: Array<RaftStateBody | undefined> = []
    const deadline = Date.now() + 6_000
    while (Date.now() < deadline) {
      states = await Promise.all([raftState(c, 1_000), raftState(wiped, 1_000)])
      if (states.some((state) => state?.Role === 'leader')) break
      await sleep(50)
    }
    const described = states.map((state) => (state === undefined ? 'no answer' : `${state.Node} ${state.Role} term ${state.Term} last ${state.LastIndex}`)).join('; ')
    const reads = await Promise.all([c, wiped].map((agent) => call(agent, 'GET', `/v1/acl/policy/name/${W}?consistent`)))
    for (const [position, read] of reads.entries()) {
      const node = position === 0 ? cName : bName
      expect(read.status, `W was acknowledged, yet a ?consistent read on ${node} answered 404 with ${aName} dead and ${bName} wiped: a leader without W was elected (${described})`).to.not.equal(404)
      if (read.status === 200) expect(read.body.Name).to.equal(W)
    }

    // A comes back: a leader is elected, W is everywhere, and B is a voter again once it has caught up.
    await cluster.restart(aName)
    await cluster.leader(20_000)
    for (const name of [aName, bName, cName]) {
      let last: Answer | undefined
      await eventually(async () => {
        last = await call(founders.node(name), 'GET', `/v1/acl/policy/name/${W}?consistent`, { timeoutMs: 10_000 })
        return last.status === 200
      }, () => `a ?consistent read of W on ${name} answers 200 (last: ${last?.status} ${last?.text.slice(0, 200)})`, 20_000)
      expect(last!.body.Name).to.equal(W)
    }
    let voters: string[] = []
    await eventually(async () => {
      const configuration = await servers(founders.node(await founders.leader(1_000)), 1_000)
      if (configuration === undefined) return false
      voters = configuration.servers.filter((server) => server.Voter).map((server) => server.ID).sort()
      return voters.join(',') === [aName, bName, cName].sort().join(',')
    }, () => `${bName} is a voter again in the leader's configuration (voters: ${voters.join(', ')})`, 30_000)
    await eventually(async () => (await call(wiped, 'GET', `/v1/acl/policy/name/${W}?stale`, { timeoutMs: 1_000 })).status === 200, `${bName} holds W`, 10_000)
  })
})
