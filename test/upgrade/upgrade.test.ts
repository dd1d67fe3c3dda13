/**
 * Upgrading from the previous release (PREVIOUS_RELEASE in scripts/upgrade/old-release.ts) to this tree, with real
 * processes: opt-in, `npm run test:upgrade` (not part of `npm test`).
 *
 * The previous release is built once per machine into a temporary directory keyed by its commit (git archive, npm ci,
 * npm run build; reused by later runs); this tree's build is dist/cli/main.js (`npm run test:upgrade` builds it first),
 * or WARDEN_UPGRADE_NEW_CLI.
 *
 * Since peer links are sealed (protocol version 3) there is no mixed mode: a node of this tree and one of the previous
 * release (version 2) refuse each other's handshake. So a cluster is upgraded by a full stop and start, not a rolling
 * restart (README, "Upgrading from the previous release"). What is tested:
 *
 * 1. The supported procedure: three founders and a server that joined with --join on the previous release, under a load that writes policies and tokens to
 *    every node (snapshots taken, threshold 16); every node stopped with SIGTERM (followers, then the leader; each
 *    exits 0) while the load still writes; every node started on the new build with the same flags, data dirs and
 *    key. They link with no version refused, elect a leader, list every write acknowledged before the stop with
 *    ?consistent (token secrets work), take writes through every node, and restart again on their own storage.
 * 2. Mixed releases refuse each other clearly: an old and a new founder with the same key do not link (neither has a
 *    leader); the new node logs `unsupported protocol version 2: this node speaks 3 (sealed links) and there is no
 *    mixed mode`, the old one `unsupported protocol version 3`. With a second old founder the old pair leads and takes
 *    writes, and the new node stays outside (no leader, a write is a 503, none of the old leader's entries).
 * 3. A cluster key the previous release took (16 characters or more) but the new build does not (base64 of 16 bytes
 *    or more, or 32+ hex digits): each node on the new build exits 2 with one line naming --cluster-key and
 *    `warden keygen` (the key not quoted); with a key from `warden keygen`, given to every node during the full stop,
 *    the cluster starts on the new build with its data.
 * 4. A single-node data dir of the previous release (started with --data-dir and no --peer: `log/` beside `state/`)
 *    opens in the new build with its data (indexes kept), takes new writes after them, and restarts.
 *
 * Not tested, because not supported: a rolling restart (the releases cannot form a cluster together), a new server
 * joining a cluster of the other release (the join proof format changed as well), and a downgrade.
 */
import { expect } from 'chai'
import { execFileSync } from 'node:child_process'
import { access } from 'node:fs/promises'
import { join } from 'node:path'
import { buildRelease, PREVIOUS_RELEASE } from '../../scripts/upgrade/old-release.js'
import { CLI } from '../support/agent.js'
import { sleep, UpgradeCluster, type Answer, type Builds, type Release, type UpgradeNode } from './harness.js'

/** Writes the previous release acknowledges before its full stop: several times the snapshot threshold. */
const SNAPSHOT_THRESHOLD = 16
const WRITES_BEFORE_STOP = 80
/** A password, not a key: accepted by the previous release (16 characters or more), refused by the new build. */
const WEAK_KEY = 'correct-horse-battery-staple'

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

/** This tree's build; WARDEN_UPGRADE_NEW_CLI points at another (a build of a clean checkout, say). */
const NEW_CLI = process.env.WARDEN_UPGRADE_NEW_CLI ?? CLI

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

  it('a cluster of the previous release stopped whole and started on the new build keeps every acknowledged write', async function () {
    cluster = await UpgradeCluster.create(builds, { raft: { snapshot_threshold: SNAPSHOT_THRESHOLD } })
    const c = cluster
    const founders = ['n1', 'n2', 'n3']
    for (const name of founders) await c.add(name, { kind: 'founder' })
    const names = [...founders, 'n4']
    const written: Written[] = []

    // The previous release: three founders and a fourth server that joined with --join, under load long enough that
    // every node has taken snapshots (threshold 16).
    await Promise.all(founders.map((name) => c.start(name, 'old')))
    await c.ready()
    await c.add('n4', { kind: 'joiner', through: [c.node('n1').httpAddress, c.node('n2').httpAddress] })
    await c.start('n4', 'old')
    await c.waitForVoters(names)
    await checkRound(c, 'all old', written)
    load = new Load(c, 'load')
    load.start()
    await load.grow(WRITES_BEFORE_STOP)

    // Step 1: stop every node (SIGTERM, each exits 0), the load still writing: what was acknowledged until the
    // cluster lost its majority must survive. Followers first, the leader last.
    const leader = await c.leader()
    for (const name of [...names.filter((name) => name !== leader), leader]) await c.stop(name)
    await load.stop()
    expect(load.problems, `load failures outside the stop (${load.writes} writes, ${load.reads} reads)`).to.deep.equal([])
    written.push(...load.acknowledged)
    const stoppedAt = load.acknowledged.length
    load = undefined

    // Step 2: start every node on the new build, same flags, data dirs and key. They link, elect a leader, and hold
    // every write acknowledged before the stop; each takes writes.
    await Promise.all(names.map((name) => c.start(name, 'new')))
    const mix = await checkRound(c, 'all new after the full stop', written)
    expect(Object.values(mix.releases)).to.deep.equal(['new', 'new', 'new', 'new'])
    await c.waitForVoters(names)
    await checkEverything(c, written, 'after the full stop and start on the new build')
    for (const name of names) {
      const run = c.node(name).currentRun()
      expect(run.filter((line) => line.includes('unsupported protocol version')), `${name}: no version refused`).to.deep.equal([])
      // (Other refusals may come in the moments all start at once: a node's peer set is read from its storage at start.)
    }

    // And the upgraded cluster restarts on its own storage.
    await Promise.all(names.map((name) => c.stop(name)))
    await Promise.all(names.map((name) => c.start(name, 'new')))
    await checkRound(c, 'all new, restarted', written)
    await checkEverything(c, written, 'after a restart on the new build')
    process.stderr.write(`      ${stoppedAt} writes acknowledged by the previous release (the last while its nodes were stopping), ${written.length} checked in all\n`)
  })

  it('nodes of the two releases refuse each other, each naming the protocol versions, and do not form a cluster', async function () {
    cluster = await UpgradeCluster.create(builds, { raft: { leader_wait: '1s' } })
    const c = cluster
    for (const name of ['n1', 'n2', 'n3']) await c.add(name, { kind: 'founder' })
    // Two founders of three, same key: n1 on the previous release, n2 on the new build. Each dials the other.
    const [oldNode, newNode] = await Promise.all([c.start('n1', 'old'), c.start('n2', 'new')])
    const deadline = Date.now() + 15_000
    const newRefusal = (): string[] => newNode.logged('unsupported protocol version 2: this node speaks 3 (sealed links) and there is no mixed mode', 'new')
    const oldRefusal = (): string[] => oldNode.logged('unsupported protocol version 3', 'old')
    while ((newRefusal().length === 0 || oldRefusal().length === 0) && Date.now() < deadline) await sleep(100)
    expect(newRefusal(), 'the new build refuses the old hello with one line naming both versions').to.have.length.greaterThan(0)
    // (The hello is refused on its version, before the node it names is read: the line has the remote address only.)
    expect(newRefusal()[0]).to.include('peer handshake refused').and.include('"role":"acceptor"')
    expect(oldRefusal(), 'the previous release refuses the new hello naming version 3').to.have.length.greaterThan(0)
    expect(oldRefusal()[0]).to.include('peer handshake refused').and.include('"peer":"n2"')

    // Not linked: two founders of three running, and neither has a leader after many election timeouts.
    await sleep(3_000)
    for (const node of [oldNode, newNode]) {
      const leader = await node.request('GET', '/v1/status/leader')
      expect(leader.body, `${node.name} (${node.release}) has no leader`).to.equal('')
    }

    // The third founder on the previous release: the two old nodes form a majority and work; the new one stays out.
    await c.start('n3', 'old')
    const n3 = c.node('n3')
    let leaderAddress = ''
    while (leaderAddress === '' && Date.now() < deadline + 15_000) {
      leaderAddress = String((await oldNode.request('GET', '/v1/status/leader')).body ?? '')
      if (leaderAddress === '') await sleep(100)
    }
    expect([oldNode.clusterAddress, n3.clusterAddress], 'the old nodes elect one of them').to.include(leaderAddress)
    const write = await oldNode.request('PUT', '/v1/acl/policy', { body: { Name: 'old-majority', Rules: 'acl = "read"' } })
    expect(write.status, write.text).to.equal(200)
    expect((await n3.request('GET', `/v1/acl/policy/${write.body.ID}?consistent`)).status).to.equal(200)
    expect((await newNode.request('GET', '/v1/status/leader')).body, 'the new node is still outside').to.equal('')
    const refused = await newNode.request('PUT', '/v1/acl/policy', { body: { Name: 'new-alone', Rules: 'acl = "read"' } })
    expect(refused.status, `a write through the new node, which has no leader: ${refused.text}`).to.equal(503)
    // Nothing the old majority committed reached it: not even the management token its leader wrote.
    expect((await oldNode.request('GET', '/v1/acl/token/self?stale')).status, 'the token on the old node').to.equal(200)
    const self = await newNode.request('GET', '/v1/acl/token/self?stale')
    expect(self.status, `the management token on the new node, which never got the old leader's entries: ${self.text}`).to.equal(403)
  })

  it('a cluster key the new build no longer accepts: it exits 2 naming the setting, and a full stop changes the key', async function () {
    cluster = await UpgradeCluster.create(builds, { clusterKey: WEAK_KEY })
    const c = cluster
    const names = ['n1', 'n2', 'n3']
    for (const name of names) await c.add(name, { kind: 'founder' })
    const written: Written[] = []
    await Promise.all(names.map((name) => c.start(name, 'old')))
    await checkRound(c, 'all old on a password key', written)
    await checkRound(c, 'all old on a password key, again', written)
    for (const name of names) await c.stop(name)

    // The same flags on the new build: exit 2, one line naming --cluster-key and warden keygen, the key not quoted.
    for (const name of names) {
      const { code, lines } = await c.startToExit(name, 'new')
      expect(code, `${name}: exit code; output:\n${lines.join('\n')}`).to.equal(2)
      const named = lines.filter((line) => line.includes('--cluster-key') && line.includes('warden keygen'))
      expect(named, `${name}: the refusal line`).to.have.length(1)
      expect(named[0]).to.include('is neither base64 nor hex')
      expect(lines.join('\n'), 'the key is never printed').not.to.include(WEAK_KEY)
    }
    // A hex key too short for the new rule (valid for the previous release: 24 characters) is refused the same way.
    c.clusterKey = 'a1b2c3d4e5f60718293a4b5c'
    const short = await c.startToExit('n1', 'new')
    expect(short.code).to.equal(2)
    expect(short.lines.join('\n')).to.include('--cluster-key: is 12 bytes (read as hex)').and.include('warden keygen')

    // The move: every node is stopped already (the previous release has no --cluster-key-accept, so there is no
    // rolling key change); make a key with `warden keygen` and start every node on the new build with it.
    c.clusterKey = execFileSync(process.execPath, [builds.new, 'keygen'], { encoding: 'utf8' }).trim()
    expect(Buffer.from(c.clusterKey, 'base64')).to.have.length(32)
    await Promise.all(names.map((name) => c.start(name, 'new')))
    await checkRound(c, 'all new on a keygen key', written)
    await c.waitForVoters(names)
    await checkEverything(c, written, 'after the key change and the upgrade')
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
