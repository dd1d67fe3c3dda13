/**
 * Upgrading from the previous release (PREVIOUS_RELEASE in scripts/upgrade/old-release.ts, the last commit before the
 * one-Raft-path refactor) to this tree, with real processes: opt-in, `npm run test:upgrade` (not part of `npm test`).
 *
 * The previous release is built once per machine into a temporary directory keyed by its commit (git archive, npm ci,
 * npm run build; reused by later runs); this tree's build is dist/cli/main.js (`npm run test:upgrade` builds it first).
 *
 * 1. Rolling restart of a mixed-version cluster. Three founders (--peer for all three) and a fourth server that joined
 *    with --join, all on the previous release, then restarted one at a time onto the new build on the same data dirs
 *    and ports (SIGTERM, wait for the exit, start the new build), while a load writes policies and tokens to every
 *    running node and reads back what was acknowledged (default consistency). Each node stays down until the leader
 *    has written 48 more entries, so that with `raft.snapshot_threshold` 16 the leader has compacted past it and it
 *    catches up from a snapshot sent by the other build. The order is chosen from who leads, so that both mixes are
 *    reached: a new-build follower under an old-build leader, and (after the last old node, leading, hands leadership
 *    to a new one with its graceful stop, and starts again on the old build) an old-build follower under a new-build
 *    leader. After every step, once the nodes agree on a leader, a write sent to each running node must succeed and be
 *    readable with ?consistent on every running node. At the end every acknowledged write must be listed by every node
 *    with ?consistent; then the whole cluster is stopped and started again on the new build and checked again.
 *    Load failures are allowed only while some node is down (its own connection refused, or a 503/504 for a request
 *    its leader was stopping under); a 404 for an acknowledged write is never allowed.
 * 2. A new server on the new build joins with --join while the leader runs the previous release, through a member
 *    already on the new build (which forwards the join to the old leader), and through a member of the previous
 *    release (whose HTTP endpoint must accept the new build's join request); it becomes a voter, takes writes through
 *    it, and restarts from its own storage.
 * 3. A single-node data dir of the previous release (started with --data-dir and no --peer: `log/` beside `state/`)
 *    opens in the new build with its data (indexes kept), takes new writes after them, and restarts.
 *
 * Not tested, because it is not safe (see the README): rebuilding a node from an empty data dir while the leader still
 * runs the previous release. That release's leader neither removes and re-adds as a non-voter a voter that asks to
 * join again, nor answers the index before which it may vote, so the rebuilt node could vote at once with an empty
 * log. Nor is a downgrade (a data dir the new build ran on, started on the previous release) tested.
 */
import { expect } from 'chai'
import { access } from 'node:fs/promises'
import { join } from 'node:path'
import { buildRelease, PREVIOUS_RELEASE } from '../../scripts/upgrade/old-release.js'
import { CLI as NEW_CLI } from '../support/agent.js'
import { sleep, UpgradeCluster, type Answer, type Builds, type Release, type UpgradeNode } from './harness.js'

/** Entries the leader writes while a node is down: three times the snapshot threshold (and its trailing entries). */
const SNAPSHOT_THRESHOLD = 16
const WRITES_WHILE_DOWN = 48

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  )
}

interface Written {
  kind: 'policy' | 'token'
  id: string
  secret?: string
  /** The node the write was sent to, and what ran where when it was acknowledged. */
  via: string
}

/** A request outcome: an answer, or the error fetch threw (connection refused, reset, timeout). */
type Outcome = { answer: Answer } | { error: string }

async function attempt(node: UpgradeNode, method: string, path: string, body?: unknown): Promise<Outcome> {
  try {
    return { answer: await node.request(method, path, body === undefined ? {} : { body }) }
  } catch (error) {
    return { error: error instanceof Error ? `${error.message}${error.cause instanceof Error ? `: ${error.cause.message}` : ''}` : String(error) }
  }
}

function describeOutcome(outcome: Outcome): string {
  return 'error' in outcome ? outcome.error : `${outcome.answer.status} ${outcome.answer.text.slice(0, 200)}`
}

/**
 * Writes (a policy, then a token naming it) to every running node in turn and reads back acknowledged writes on
 * another, until stopped. Keeps every acknowledged write; a failure is excused only while some node is down.
 */
class Load {
  readonly acknowledged: Written[] = []
  readonly problems: string[] = []
  readonly excused: string[] = []
  writes = 0
  reads = 0
  private stopped = false
  private workers: Array<Promise<void>> = []
  private sequence = 0

  constructor(
    private readonly cluster: UpgradeCluster,
    private readonly prefix: string,
  ) {}

  start(workers = 2): void {
    for (let i = 0; i < workers; i += 1) this.workers.push(this.worker(i))
  }

  async stop(): Promise<void> {
    this.stopped = true
    await Promise.all(this.workers)
  }

  /** Resolves once `count` more writes have been acknowledged. */
  async grow(count: number, timeoutMs = 30_000): Promise<void> {
    const target = this.acknowledged.length + count
    const deadline = Date.now() + timeoutMs
    while (this.acknowledged.length < target) {
      if (Date.now() > deadline) throw new Error(`the load wrote ${this.acknowledged.length}/${target} in ${timeoutMs} ms; problems: ${this.problems.slice(0, 5).join('; ')}`)
      await sleep(20)
    }
  }

  private pick(nodes: UpgradeNode[]): UpgradeNode | undefined {
    return nodes[Math.floor(Math.random() * nodes.length)]
  }

  /** Records a failed request: excused if some node was down during it and the failure is one a stop explains. */
  private failed(what: string, node: UpgradeNode, from: number, outcome: Outcome): void {
    const to = Date.now()
    const line = `${what} via ${node.name} (${node.release ?? 'stopped'}): ${describeOutcome(outcome)}`
    const anyDown = [...this.cluster.nodes.values()].some((other) => other.wasDown(from, to))
    const explained = 'error' in outcome ? node.wasDown(from, to) : outcome.answer.status === 504 || outcome.answer.status === 503
    if (anyDown && explained) this.excused.push(line)
    else this.problems.push(line)
  }

  private async worker(index: number): Promise<void> {
    while (!this.stopped) {
      const node = this.pick(this.cluster.running().filter((candidate) => candidate.downSince === undefined))
      if (node === undefined) {
        await sleep(20)
        continue
      }
      this.sequence += 1
      const name = `${this.prefix}-${index}-${this.sequence}`
      const written = await this.write(node, name)
      if (written !== undefined) this.acknowledged.push(written)
      const known = this.acknowledged[Math.floor(Math.random() * this.acknowledged.length)]
      const reader = this.pick(this.cluster.running().filter((candidate) => candidate.downSince === undefined))
      if (known !== undefined && reader !== undefined) {
        const readFrom = Date.now()
        const path = known.kind === 'policy' ? `/v1/acl/policy/${known.id}` : `/v1/acl/token/${known.id}`
        const outcome = await attempt(reader, 'GET', path)
        this.reads += 1
        if ('answer' in outcome && outcome.answer.status === 404) {
          this.problems.push(`an acknowledged ${known.kind} ${known.id} (written via ${known.via}) is 404 on ${reader.name} (${reader.release ?? 'stopped'})`)
        } else if (!('answer' in outcome) || outcome.answer.status !== 200) {
          this.failed(`read of ${known.kind} ${known.id}`, reader, readFrom, outcome)
        }
      }
      await sleep(5)
    }
  }

  private async write(node: UpgradeNode, name: string): Promise<Written | undefined> {
    this.writes += 1
    const from = Date.now()
    if (this.sequence % 2 === 0) {
      const outcome = await attempt(node, 'PUT', '/v1/acl/policy', { Name: name, Rules: 'operator = "read"' })
      if ('answer' in outcome && outcome.answer.status === 200) return { kind: 'policy', id: outcome.answer.body.ID, via: `${node.name}/${node.release}` }
      this.failed(`policy write ${name}`, node, from, outcome)
      return undefined
    }
    const policy = this.acknowledged.findLast((written) => written.kind === 'policy')
    const outcome = await attempt(node, 'PUT', '/v1/acl/token', { Description: name, Policies: policy === undefined ? [] : [{ ID: policy.id }] })
    if ('answer' in outcome && outcome.answer.status === 200) {
      return { kind: 'token', id: outcome.answer.body.AccessorID, secret: outcome.answer.body.SecretID, via: `${node.name}/${node.release}` }
    }
    this.failed(`token write ${name}`, node, from, outcome)
    return undefined
  }
}

/** What ran where during one check round, for the coverage assertion and the report. */
interface Mix {
  step: string
  leader: string
  leaderRelease: Release
  releases: Record<string, Release>
}

/**
 * Once the running nodes agree on a leader: one policy written through each running node must succeed, and each must
 * then be readable with ?consistent on every running node. Returns the mix it ran under.
 */
async function checkRound(cluster: UpgradeCluster, step: string, written: Written[]): Promise<Mix> {
  const leader = await cluster.ready()
  const running = cluster.running()
  const mine: Written[] = []
  for (const node of running) {
    const name = `round-${step.replace(/[^A-Za-z0-9-]/g, '-')}-${node.name}-${Date.now()}`
    const answer = await node.request('PUT', '/v1/acl/policy', { body: { Name: name, Rules: 'acl = "read"' } })
    expect(answer.status, `${step}: a write through ${node.name} (${node.release}) with leader ${leader}: ${answer.text}`).to.equal(200)
    mine.push({ kind: 'policy', id: answer.body.ID, via: `${node.name}/${node.release}` })
  }
  for (const node of running) {
    for (const item of mine) {
      const read = await node.request('GET', `/v1/acl/policy/${item.id}?consistent`)
      expect(read.status, `${step}: policy ${item.id} written via ${item.via}, read on ${node.name} (${node.release}): ${read.text}`).to.equal(200)
    }
  }
  written.push(...mine)
  const releases = Object.fromEntries(running.map((node) => [node.name, node.release!]))
  return { step, leader, leaderRelease: cluster.node(leader).release!, releases }
}

/** Every write in `written` is listed with ?consistent by every running node; a sample of token secrets works. */
async function checkEverything(cluster: UpgradeCluster, written: Written[], label: string): Promise<void> {
  const policies = written.filter((item) => item.kind === 'policy').map((item) => item.id)
  const tokens = written.filter((item) => item.kind === 'token')
  for (const node of cluster.running()) {
    const listedPolicies = await node.request('GET', '/v1/acl/policies?consistent')
    expect(listedPolicies.status, listedPolicies.text).to.equal(200)
    const policyIds = new Set((listedPolicies.body as Array<{ ID: string }>).map((policy) => policy.ID))
    const missingPolicies = policies.filter((id) => !policyIds.has(id))
    expect(missingPolicies, `${label}: acknowledged policies missing on ${node.name} (${node.release})`).to.deep.equal([])
    const listedTokens = await node.request('GET', '/v1/acl/tokens?consistent')
    expect(listedTokens.status, listedTokens.text).to.equal(200)
    const tokenIds = new Set((listedTokens.body as Array<{ AccessorID: string }>).map((token) => token.AccessorID))
    const missingTokens = tokens.filter((token) => !tokenIds.has(token.id)).map((token) => token.id)
    expect(missingTokens, `${label}: acknowledged tokens missing on ${node.name} (${node.release})`).to.deep.equal([])
    const sample = [...tokens.slice(0, 5), ...tokens.slice(-5)]
    for (const token of sample) {
      const self = await node.request('GET', '/v1/acl/token/self?consistent', { token: token.secret! })
      expect(self.status, `${label}: the secret of ${token.id} on ${node.name}: ${self.text}`).to.equal(200)
      expect(self.body.AccessorID).to.equal(token.id)
    }
  }
}

describe('upgrade from the previous release (real processes, both builds)', function () {
  this.timeout(240_000)
  let builds: Builds
  let cluster: UpgradeCluster | undefined
  let load: Load | undefined

  before(async function () {
    this.timeout(600_000)
    if (!(await exists(NEW_CLI))) throw new Error(`${NEW_CLI} is missing: run npm run build first (npm run test:upgrade does)`)
    const started = Date.now()
    const old = await buildRelease(PREVIOUS_RELEASE, { progress: (line) => process.stderr.write(`      [old release] ${line}\n`) })
    process.stderr.write(`      [old release] ${old.built ? `built in ${Math.round((Date.now() - started) / 1000)} s` : 'reused'}: ${old.cli}\n`)
    builds = { old: old.cli, new: NEW_CLI }
  })

  afterEach(async function () {
    await load?.stop()
    load = undefined
    if (this.currentTest?.state === 'failed' && cluster !== undefined) process.stderr.write(`\n${cluster.logTail()}\n`)
    await cluster?.destroy()
    cluster = undefined
  })

  it('a rolling restart onto the new build keeps every acknowledged write, under an old leader and under a new one', async function () {
    cluster = await UpgradeCluster.create(builds, { raft: { snapshot_threshold: SNAPSHOT_THRESHOLD } })
    const c = cluster
    for (const name of ['n1', 'n2', 'n3']) await c.add(name, { kind: 'founder' })
    const joiner = await c.add('n4', { kind: 'joiner', through: [c.node('n1').httpAddress, c.node('n2').httpAddress] })
    const written: Written[] = []
    const mixes: Mix[] = []
    const snapshots: string[] = []

    // The previous release: three founders, then a fourth server that joins with --join.
    await Promise.all(['n1', 'n2', 'n3'].map((name) => c.start(name, 'old')))
    await c.ready()
    await c.start('n4', 'old')
    await c.waitForVoters(['n1', 'n2', 'n3', 'n4'])
    mixes.push(await checkRound(c, 'all old', written))

    load = new Load(c, 'load')
    load.start()
    await load.grow(20)

    /** Restarts `node` on `release` after the leader wrote WRITES_WHILE_DOWN entries without it; checks a round. */
    const upgrade = async (node: UpgradeNode, release: Release, step: string): Promise<void> => {
      const leaderRelease = c.node(await c.leader()).release
      await c.stop(node.name)
      await load!.grow(WRITES_WHILE_DOWN)
      await c.start(node.name, release)
      const mix = await checkRound(c, step, written)
      mixes.push(mix)
      // The leader compacted past it: it caught up from a snapshot streamed by the leader's build into its own.
      const installed = node.currentRun().filter((line) => line.includes('installed a snapshot from the leader')).length
      expect(installed, `${step}: ${node.name} (${release}) installs a snapshot from the leader`).to.be.greaterThan(0)
      snapshots.push(`${leaderRelease === mix.leaderRelease ? leaderRelease : `${leaderRelease}->${mix.leaderRelease}`} leader to ${release} ${node.name}`)
    }
    const newLeaderWithOldFollower = (): boolean =>
      mixes.some((mix) => mix.leaderRelease === 'new' && Object.values(mix.releases).includes('old'))

    for (let steps = 0; steps < 10; steps += 1) {
      const old = c.running().filter((node) => node.release === 'old')
      if (old.length === 0) break
      const leader = c.node(await c.leader())
      const oldFollowers = old.filter((node) => node !== leader)
      if (leader.release === 'new') {
        await upgrade(old[0]!, 'new', `${old[0]!.name} onto new under new leader ${leader.name}`)
      } else if (oldFollowers.length > 0) {
        await upgrade(oldFollowers[0]!, 'new', `${oldFollowers[0]!.name} onto new under old leader ${leader.name}`)
      } else if (!newLeaderWithOldFollower()) {
        // The last old node leads: its graceful stop hands leadership to a new-build node; it comes back on the old
        // build as a follower of that new leader (what a restart of a not yet upgraded node does mid-upgrade).
        await upgrade(leader, 'old', `${leader.name} restarted on old, leadership handed to a new node`)
      } else {
        await upgrade(leader, 'new', `${leader.name} (old leader) onto new`)
      }
    }
    expect(c.running().map((node) => node.release)).to.deep.equal(['new', 'new', 'new', 'new'])
    await load.stop()

    // Coverage: both mixes were reached and checked.
    expect(mixes.some((mix) => mix.leaderRelease === 'old' && Object.values(mix.releases).includes('new')), 'an old leader with a new follower').to.equal(true)
    expect(newLeaderWithOldFollower(), 'a new leader with an old follower').to.equal(true)
    expect(load.problems, `load failures outside any restart (${load.writes} writes, ${load.reads} reads)`).to.deep.equal([])
    written.push(...load.acknowledged)
    await c.waitForVoters(['n1', 'n2', 'n3', 'n4'])
    await checkEverything(c, written, 'after the rolling restart')

    // The upgraded cluster restarts whole on the new build (each node reads the membership record it wrote).
    await Promise.all(['n1', 'n2', 'n3', 'n4'].map((name) => c.stop(name)))
    await Promise.all(['n1', 'n2', 'n3', 'n4'].map((name) => c.start(name, 'new')))
    mixes.push(await checkRound(c, 'all new after a full restart', written))
    await c.waitForVoters(['n1', 'n2', 'n3', 'n4'])
    await checkEverything(c, written, 'after a full restart on the new build')
    expect(joiner.logged('"agent ready"', 'new').length).to.be.greaterThan(0)

    process.stderr.write(
      [
        `      steps: ${mixes.map((mix) => `${mix.step} [leader ${mix.leader}/${mix.leaderRelease}; ${Object.entries(mix.releases).map(([name, release]) => `${name}=${release}`).join(' ')}]`).join('\n             ')}`,
        `      load: ${load.writes} writes (${load.acknowledged.length} acknowledged), ${load.reads} reads; ${load.excused.length} failures while a node was down: ${[...new Set(load.excused.map((line) => line.replace(/^.*?: /, '')))].slice(0, 4).join(' | ')}`,
        `      snapshots installed (the leader's build to the follower's): ${snapshots.join(', ')}`,
      ].join('\n') + '\n',
    )
  })

  /**
   * Three founders on the previous release, one of them (a follower) restarted onto the new build when `through` is
   * 'new'; then a fourth server on the new build joins with --join through `through`'s HTTP address while the
   * old leader still leads, becomes a voter, takes writes and restarts from its own storage.
   */
  async function newServerJoins(through: Release): Promise<void> {
    cluster = await UpgradeCluster.create(builds)
    const c = cluster
    for (const name of ['n1', 'n2', 'n3']) await c.add(name, { kind: 'founder' })
    const written: Written[] = []
    await Promise.all(['n1', 'n2', 'n3'].map((name) => c.start(name, 'old')))
    const leader = await c.ready()
    const member = c.node(['n1', 'n2', 'n3'].find((name) => name !== leader)!)
    if (through === 'new') {
      await c.stop(member.name)
      await c.start(member.name, 'new')
    }
    expect((await checkRound(c, `founders, ${member.name} on ${through}`, written)).leaderRelease).to.equal('old')
    const joiner = await c.add('n4', { kind: 'joiner', through: [member.httpAddress] })
    // The old leader answers the join without VoteFromIndex: the new server takes it as a new non-voter, as before.
    await c.start('n4', 'new')
    try {
      await c.waitForVoters(['n1', 'n2', 'n3', 'n4'])
    } catch (error) {
      const refused = joiner.logged('join attempt failed').at(-1)
      throw new Error(`n4 (new) did not join through ${member.name} (${through}) under the old leader ${leader}; its last join failure: ${refused ?? 'none'}`, { cause: error })
    }
    expect((await checkRound(c, 'new joiner', written)).leaderRelease).to.equal('old')
    // It restarts from its own storage (the record of its join), still under the old leader.
    await c.stop('n4')
    await c.start('n4', 'new')
    expect((await checkRound(c, 'new joiner restarted', written)).leaderRelease).to.equal('old')
    await c.waitForVoters(['n1', 'n2', 'n3', 'n4'])
    await checkEverything(c, written, 'after a new server joined under an old leader')
  }

  it('a new-build server joins with --join through a new-build member while the leader runs the previous release', async function () {
    await newServerJoins('new')
  })

  it('a new-build server joins with --join through a member of the previous release', async function () {
    await newServerJoins('old')
  })

  it('a single-node data dir of the previous release opens in the new build with its data', async function () {
    cluster = await UpgradeCluster.create(builds)
    const c = cluster
    const solo = await c.add('solo', { kind: 'alone' })
    await c.start('solo', 'old')
    await c.ready()
    const policies: Array<{ ID: string; CreateIndex: number; ModifyIndex: number }> = []
    const tokens: Array<{ AccessorID: string; SecretID: string }> = []
    for (let i = 0; i < 10; i += 1) {
      const policy = await solo.request('PUT', '/v1/acl/policy', { body: { Name: `solo-${i}`, Rules: 'operator = "read"' } })
      expect(policy.status, policy.text).to.equal(200)
      const token = await solo.request('PUT', '/v1/acl/token', { body: { Description: `solo-${i}`, Policies: [{ ID: policy.body.ID }] } })
      expect(token.status, token.text).to.equal(200)
      tokens.push(token.body)
    }
    // An update and a delete: the new build must show their result, not the first writes.
    const first = await solo.request('GET', '/v1/acl/policy/name/solo-0')
    const updated = await solo.request('PUT', `/v1/acl/policy/${first.body.ID}`, { body: { Name: 'solo-0', Rules: 'acl = "read"', Description: 'updated' } })
    expect(updated.status, updated.text).to.equal(200)
    const deleted = tokens.pop()!
    expect((await solo.request('DELETE', `/v1/acl/token/${deleted.AccessorID}`)).status).to.equal(200)
    for (let i = 0; i < 10; i += 1) policies.push((await solo.request('GET', `/v1/acl/policy/name/solo-${i}`)).body)
    await c.stop('solo')
    expect(await exists(join(solo.dataDir, 'log')), 'the previous release keeps a single node log in log/').to.equal(true)
    expect(await exists(join(solo.dataDir, 'raft')), 'the previous release has no raft/ for a single node').to.equal(false)

    const check = async (label: string): Promise<void> => {
      for (const policy of policies) {
        const read = await solo.request('GET', `/v1/acl/policy/${policy.ID}?consistent`)
        expect(read.status, `${label}: ${read.text}`).to.equal(200)
        expect({ CreateIndex: read.body.CreateIndex, ModifyIndex: read.body.ModifyIndex }, `${label}: indexes of ${policy.ID}`).to.deep.equal({
          CreateIndex: policy.CreateIndex,
          ModifyIndex: policy.ModifyIndex,
        })
      }
      expect((await solo.request('GET', `/v1/acl/policy/name/solo-0?consistent`)).body.Description).to.equal('updated')
      for (const token of tokens) {
        const self = await solo.request('GET', '/v1/acl/token/self?consistent', { token: token.SecretID })
        expect(self.status, `${label}: ${self.text}`).to.equal(200)
      }
      expect((await solo.request('GET', `/v1/acl/token/${deleted.AccessorID}?consistent`)).status, `${label}: the deleted token`).to.equal(404)
    }

    await c.start('solo', 'new')
    await c.ready()
    await check('first start on the new build')
    expect(await exists(join(solo.dataDir, 'raft')), 'raft/ after the upgrade').to.equal(true)
    expect(await exists(join(solo.dataDir, 'log')), 'log/ after the upgrade').to.equal(false)
    const lastOld = Math.max(...policies.map((policy) => policy.ModifyIndex))
    const later = await solo.request('PUT', '/v1/acl/policy', { body: { Name: 'solo-new', Rules: 'operator = "read"' } })
    expect(later.status, later.text).to.equal(200)
    expect(later.body.CreateIndex, 'a new write comes after the old log').to.be.greaterThan(lastOld)
    await c.stop('solo')
    await c.start('solo', 'new')
    await c.ready()
    await check('a restart on the new build')
    expect((await solo.request('GET', '/v1/acl/policy/name/solo-new?consistent')).status).to.equal(200)
  })
})
