/**
 * `warden recover` with real processes (issue 16): a three-node cluster loses two servers for good (SIGKILL all three,
 * two data dirs wiped), and the survivor's data dir is rewritten offline into a cluster of one. The goal is the
 * operator's whole way back: the survivor, started again with its original flags, leads alone with every acknowledged
 * write it held and takes new ones; the two wiped servers, started with their original flags and empty data dirs, find
 * the cluster, rejoin and end up voters holding all the data. Also: the command refuses (exit 1, one line) a data dir
 * whose agent runs and an empty one, and without --yes (no terminal to ask on) it exits 2 and changes nothing.
 *
 * Spawns dist/cli/main.js: run `npm run build` first. Every agent is stopped by `after` (and by the root hook if the
 * suite fails early); every recover process is killed at its timeout.
 */
import { expect } from 'chai'
import { spawn } from 'node:child_process'
import { access, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LevelRaftStorage } from '../../src/raft/storage/level-storage.js'
import { CLI, type AgentProcess } from '../support/agent.js'
import { TestCluster } from '../support/cluster.js'
import { eventually } from './eventually.js'

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `warden recover ARGS` with no terminal on stdin; kills it if it has not exited in `timeoutMs`. */
async function recover(args: string[], timeoutMs = 15_000): Promise<Run> {
  const child = spawn(process.execPath, [CLI, 'recover', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
  const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)))
  clearTimeout(timer)
  return { code, stdout, stderr }
}

/** What the Raft storage of a stopped node shows: enough to tell whether recover changed it. */
async function raftSummary(dataDir: string): Promise<unknown> {
  const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
  try {
    return { hardState: storage.hardState(), snapshot: storage.snapshot(), firstIndex: storage.firstIndex(), lastIndex: storage.lastIndex(), membership: storage.membershipRecord() }
  } finally {
    await storage.close()
  }
}

async function policyNames(agent: AgentProcess, mode: 'stale' | 'default'): Promise<string[]> {
  const response = await agent.request('GET', `/v1/acl/policies${mode === 'stale' ? '?stale' : ''}`)
  if (response.status !== 200) throw new Error(`policies: ${response.status} ${response.text}`)
  return (response.body as Array<{ Name: string }>).map((policy) => policy.Name)
}

async function tokenAccessors(agent: AgentProcess, mode: 'stale' | 'default'): Promise<string[]> {
  const response = await agent.request('GET', `/v1/acl/tokens${mode === 'stale' ? '?stale' : ''}`)
  if (response.status !== 200) throw new Error(`tokens: ${response.status} ${response.text}`)
  return (response.body as Array<{ AccessorID: string }>).map((token) => token.AccessorID)
}

interface Servers {
  ID: string
  Voter: boolean
}

async function servers(agent: AgentProcess): Promise<Servers[]> {
  const response = await agent.request('GET', '/v1/operator/raft/configuration')
  if (response.status !== 200) throw new Error(`configuration: ${response.status} ${response.text}`)
  return response.body.Servers as Servers[]
}

describe('recover: a three-node cluster that lost two servers for good comes back from the survivor', function () {
  this.timeout(120_000)
  let cluster: TestCluster | undefined
  let emptyDir: string | undefined

  before(async function () {
    if (!(await access(CLI).then(() => true, () => false))) throw new Error(`${CLI} is missing: run \`npm run build\` before this test`)
    cluster = await TestCluster.start()
    emptyDir = await mkdtemp(join(tmpdir(), 'warden-recover-empty-'))
  })
  after(async function () {
    await cluster?.stop()
    if (emptyDir !== undefined) await rm(emptyDir, { recursive: true, force: true })
  })

  it('refuses with exit 1 and one line a data dir whose agent runs, and an empty data dir', async function () {
    const running = await recover(['--data-dir', cluster!.specs[0]!.dataDir, '--node-name', 'n1', '--yes'])
    expect(running.code, running.stderr).to.equal(1)
    expect(running.stderr.trimEnd().split('\n')).to.have.length(1)
    expect(running.stderr).to.match(/in use.*stop the agent/)
    await cluster!.ready()

    const empty = await recover(['--data-dir', emptyDir!, '--node-name', 'n1', '--yes'])
    expect(empty.code, empty.stderr).to.equal(1)
    expect(empty.stderr.trimEnd().split('\n')).to.have.length(1)
    expect(empty.stderr).to.include('holds no Raft state')
  })

  it('recovers: the survivor leads alone with its data, takes writes; the wiped servers rejoin as voters with the data', async function () {
    const c = cluster!
    const leaderName = await c.leader()
    const leader = c.node(leaderName)
    // The survivor is a follower: the interesting case, whose log and state may trail what the leader acknowledged.
    const survivorName = c.followers(leaderName)[0]!
    const wiped = c.specs.map((spec) => spec.name).filter((name) => name !== survivorName)
    const survivorSpec = c.specs.find((spec) => spec.name === survivorName)!

    const policies: string[] = []
    for (let n = 0; n < 20; n += 1) {
      const response = await leader.request('PUT', '/v1/acl/policy', { body: { Name: `before-loss-${n}`, Rules: 'acl = "read"' } })
      expect(response.status, response.text).to.equal(200)
      policies.push(`before-loss-${n}`)
    }
    const tokens: string[] = []
    for (let n = 0; n < 5; n += 1) {
      const response = await leader.request('PUT', '/v1/acl/token', { body: { Description: `before-loss-${n}`, Policies: [{ Name: `before-loss-${n}` }] } })
      expect(response.status, response.text).to.equal(200)
      tokens.push(response.body.AccessorID as string)
    }
    // Acknowledged writes count only if the survivor held them: wait until its own state shows every one.
    const survivor = c.node(survivorName)
    await eventually(async () => {
      const names = await policyNames(survivor, 'stale')
      const accessors = await tokenAccessors(survivor, 'stale')
      return policies.every((name) => names.includes(name)) && tokens.every((id) => accessors.includes(id))
    }, 'the survivor holds every acknowledged write', 20_000)

    for (const name of c.specs.map((spec) => spec.name)) await c.kill(name)
    for (const name of wiped) await rm(c.specs.find((spec) => spec.name === name)!.dataDir, { recursive: true, force: true })

    // Without --yes, and no terminal to ask on: the warning, exit 2, nothing changed.
    const before = await raftSummary(survivorSpec.dataDir)
    const unconfirmed = await recover(['--data-dir', survivorSpec.dataDir, '--node-name', survivorName])
    expect(unconfirmed.code, unconfirmed.stderr).to.equal(2)
    expect(unconfirmed.stderr).to.include('WARNING').and.include('LOST').and.include('pass --yes')
    expect(unconfirmed.stdout).to.equal('')
    expect(await raftSummary(survivorSpec.dataDir)).to.deep.equal(before)

    const confirmed = await recover(['--data-dir', survivorSpec.dataDir, '--node-name', survivorName, '--yes'])
    expect(confirmed.code, confirmed.stderr).to.equal(0)
    expect(confirmed.stdout.trimEnd().split('\n')).to.have.length(1)
    expect(confirmed.stdout).to.include(`${survivorName} now forms a cluster of one`)
    expect(confirmed.stderr).to.include('WARNING')

    // The survivor, with its original flags (the same --peer set), leads alone.
    const alone = await c.restart(survivorName)
    expect(await c.leader(15_000)).to.equal(survivorName)
    expect((await servers(alone)).map((server) => [server.ID, server.Voter])).to.deep.equal([[survivorName, true]])
    const names = await policyNames(alone, 'default')
    expect(names).to.include.members(policies)
    expect(await tokenAccessors(alone, 'default')).to.include.members(tokens)
    const written = await alone.request('PUT', '/v1/acl/policy', { body: { Name: 'after-recovery' } })
    expect(written.status, written.text).to.equal(200)

    // The wiped servers, with their original flags and empty data dirs: they find the cluster and rejoin.
    for (const name of wiped) await c.restart(name)
    await eventually(async () => {
      const configuration = await servers(alone)
      return configuration.length === 3 && configuration.every((server) => server.Voter)
    }, 'all three servers are voters again', 60_000)
    expect((await servers(alone)).map((server) => server.ID).sort()).to.deep.equal(['n1', 'n2', 'n3'])
    for (const name of wiped) {
      const rejoined = c.node(name)
      await eventually(async () => {
        const held = await policyNames(rejoined, 'stale')
        return [...policies, 'after-recovery'].every((policy) => held.includes(policy))
      }, `${name} holds the data`, 20_000)
      expect(await tokenAccessors(rejoined, 'stale')).to.include.members(tokens)
    }
    // A write through a rejoined server (forwarded to the leader) reaches every server.
    const through = await c.node(wiped[0]!).request('PUT', '/v1/acl/policy', { body: { Name: 'after-rejoin' } })
    expect(through.status, through.text).to.equal(200)
    for (const agent of c.running()) {
      await eventually(async () => (await policyNames(agent, 'stale')).includes('after-rejoin'), `${agent.httpAddress} has the write made after the rejoin`, 20_000)
    }
  })
})
