/**
 * `npm run chaos -- --datacenters 2`: one chaos run against a two-datacenter federation (dc1 primary, dc2
 * secondary, `nodes` servers each), started with LocalCluster.up({ datacenters }).
 *
 * Workload: per datacenter, `clients` clients sending to that datacenter's nodes only. Each datacenter has registers
 * of its own (config entries `chaos-<dc>-<i>`, policies `chaos-<dc>-policy-…`, global and local tokens it created),
 * so that each datacenter's history holds every write of its keys and today's checks (acknowledged writes,
 * linearizability per key, stale reads, versions, convergence) apply to it as they are. Writes sent to dc2 (policies,
 * global tokens, config entries) go to the primary and are answered once dc2 has replicated them; an answer with
 * `X-Service-Replication-Lagging: true` is recorded as outcome unknown in dc2's history (it is applied at the
 * primary but not yet visible in dc2, which the header says), and still counts as acknowledged for the
 * lost-write check. A secondary's config entries have indexes of their own, so a dc2 client's config increment reads
 * the Counter in dc2 (recorded) and then the primary's version with `?dc=dc1&consistent` (not recorded: it is a read
 * of another datacenter), and CASes on the primary's ModifyIndex. Local tokens (`Local: true`) are written in each
 * datacenter; clients also look up the other datacenter's local tokens, which must never be found.
 *
 * Faults: one nemesis per datacenter (kill/restart, pause/resume, node partitions; at most a minority of that
 * datacenter broken) and a WAN nemesis (partitionDatacenter('dc2'), later heal). Heal at the proxies reopens every
 * link, so the three share a book of the cuts: healing one re-applies the others' (PartitionBook).
 *
 * Checks at the end, once the faults stopped and replication settled (at most SETTLE_MS): per datacenter today's
 * checks; no acknowledged write lost (in the primary and the secondary; local tokens in their own datacenter); dc2's
 * policies, global tokens and service-defaults entries equal dc1's (minus Create/ModifyIndex); no local token ever
 * seen outside its datacenter; and, once during a WAN partition, a replicated global token works in dc2
 * (GET /v1/acl/token/self with its secret) while dc2 cannot reach the primary.
 */
import { setMaxListeners } from 'node:events'
import { LocalCluster } from '../../cluster/lib.js'
import { Client } from '../../src/api/index.js'
import { SeededRng } from '../../src/lib/rng.js'
import {
  checkAcknowledgedWrites,
  checkFaults,
  checkLinearizability,
  checkStaleReads,
  checkVersions,
  countOperations,
  failoverTimes,
  type CheckReport,
  type FailoverReport,
} from './checks.js'
import { READ_MODES, writeOutcome, type Outcome, type RecordedOperation } from './history.js'
import type { Answer } from './http.js'
import { Nemesis, type FaultTarget, type NemesisEvent, type NodeView } from './nemesis.js'
import { checkConvergence, onFreshCluster, readFinalState, type ChaosChecks } from './run.js'
import { CONFIG_KIND, configCas, configRead, modeQuery, Workload } from './workload.js'
import { sleep } from './nemesis.js'

export interface FederationOptions {
  seed: number
  durationMs: number
  /** Servers per datacenter (default 3). */
  nodes?: number
  /** Clients per datacenter (default 4). */
  clients?: number
  configKeys?: number
  requestTimeoutMs?: number
  quietMs?: number
  linearizabilityTimeMsPerKey?: number
  keep?: boolean
  signal?: AbortSignal
  log?: (line: string) => void
  onRoot?: (root: string) => void
}

export interface WanEvent {
  at: number
  done?: number
  action: 'partition-dc' | 'heal-dc'
  datacenter: string
  error?: string
}

export interface DatacenterReport {
  datacenter: string
  nodes: string[]
  operations: ReturnType<typeof countOperations>
  faults: NemesisEvent[]
  failover: FailoverReport
  checks?: ChaosChecks
  /** Lookups of the other datacenter's local tokens. */
  foreignLocalReads: number
  history: RecordedOperation[]
}

export interface FederationChecks {
  settled: CheckReport & { elapsedMs: number }
  noLostWrites: CheckReport & { checked: number }
  secondaryEqualsPrimary: CheckReport & { policies: number; tokens: number; configEntries: number }
  localTokensStayHome: CheckReport & { checked: number }
  globalTokenDuringWanPartition: CheckReport & { attempts: string[] }
  wanFaults: CheckReport & { faults: number }
}

export interface FederationResult {
  passed: boolean
  interrupted: boolean
  error?: string
  datacenters: string[]
  seed: number
  durationMs: number
  nodes: number
  clients: number
  startedAt: string
  elapsedMs: number
  replay: string
  root?: string
  operations: { total: number }
  wan: WanEvent[]
  checks?: FederationChecks
  perDatacenter: Record<string, DatacenterReport>
}

const DATACENTERS = ['dc1', 'dc2'] as const
const PRIMARY = 'dc1'
const SECONDARY = 'dc2'
const SETTLE_MS = 30_000
const LEADER_MS = 30_000

export function federationReplay(options: { seed: number; durationMs: number; nodes: number; clients: number }): string {
  return `npm run chaos -- --datacenters 2 --duration ${Math.round(options.durationMs / 1000)}s --seed ${options.seed} --nodes ${options.nodes} --clients ${options.clients}`
}

/** What the clients of both datacenters share: acknowledged objects, secrets, and what a lookup must not find. */
class Shared {
  /** Acknowledged (or lagging) creates, by datacenter: policies by name → ID; tokens by accessor. */
  readonly policies = new Map<string, Map<string, string>>()
  readonly globalTokens = new Map<string, string[]>()
  readonly localTokens = new Map<string, string[]>()
  /** Global tokens' secrets (created by the workload with a seeded SecretID). */
  readonly secrets = new Map<string, string>()
  /** Keys of acknowledged creates, including lagging ones: { dc written in, key }. */
  readonly acknowledged: Array<{ datacenter: string; key: string; local: boolean }> = []
  readonly leaks: string[] = []
  readonly foreignReads = new Map<string, number>()
  constructor() {
    for (const dc of DATACENTERS) {
      this.policies.set(dc, new Map())
      this.globalTokens.set(dc, [])
      this.localTokens.set(dc, [])
      this.foreignReads.set(dc, 0)
    }
  }
}

/** Heal at the proxies reopens every link: a book of who cut what, so healing one cut re-applies the others. */
class PartitionBook {
  private readonly nodes = new Set<string>()
  private readonly datacenters = new Set<string>()
  private chain: Promise<unknown> = Promise.resolve()

  constructor(private readonly cluster: LocalCluster) {}

  private serial<T>(action: () => Promise<T>): Promise<T> {
    const next = this.chain.then(action, action)
    this.chain = next.catch(() => undefined)
    return next
  }

  cutNode(node: string): Promise<void> {
    return this.serial(async () => {
      this.nodes.add(node)
      await this.cluster.partition(node)
    })
  }

  cutDatacenter(dc: string): Promise<void> {
    return this.serial(async () => {
      this.datacenters.add(dc)
      await this.cluster.partitionDatacenter(dc)
    })
  }

  /** Heals the given nodes' and datacenters' cuts and keeps every other one. */
  heal(nodes: readonly string[], datacenters: readonly string[]): Promise<void> {
    return this.serial(async () => {
      for (const node of nodes) this.nodes.delete(node)
      for (const dc of datacenters) this.datacenters.delete(dc)
      await this.cluster.heal()
      for (const node of this.nodes) await this.cluster.partition(node)
      for (const dc of this.datacenters) await this.cluster.partitionDatacenter(dc)
    })
  }

  healAll(): Promise<void> {
    return this.heal([...this.nodes], [...this.datacenters])
  }
}

/** One datacenter as the nemesis sees it: its leader, its nodes' status, and heals that leave the rest cut. */
function datacenterTarget(cluster: LocalCluster, book: PartitionBook, dc: string): FaultTarget {
  const nodes = cluster.nodesOf(dc)
  return {
    leader: (timeoutMs) => cluster.leader(timeoutMs, dc),
    kill: (node) => cluster.kill(node),
    restart: (node) => cluster.restart(node),
    pause: (node) => cluster.pause(node),
    resume: (node) => cluster.resume(node),
    partition: (node) => book.cutNode(node),
    heal: () => book.heal(nodes, []),
    status: async (): Promise<NodeView[]> => (await cluster.status()).filter((status) => nodes.includes(status.node)),
  }
}

export async function runFederationChaos(options: FederationOptions): Promise<FederationResult> {
  const started = performance.now()
  const nodes = options.nodes ?? 3
  const clients = options.clients ?? 4
  const log = options.log ?? ((): void => {})
  const result: FederationResult = {
    passed: false,
    interrupted: false,
    datacenters: [...DATACENTERS],
    seed: options.seed,
    durationMs: options.durationMs,
    nodes,
    clients,
    startedAt: new Date().toISOString(),
    elapsedMs: 0,
    replay: federationReplay({ seed: options.seed, durationMs: options.durationMs, nodes, clients }),
    operations: { total: 0 },
    wan: [],
    perDatacenter: {},
  }
  await onFreshCluster(
    result,
    options,
    'warden-chaos-dc-',
    (root) => {
      log(`starting ${DATACENTERS.join(', ')} with ${nodes} nodes each in ${root}`)
      return LocalCluster.up({ datacenters: [...DATACENTERS], nodes, root })
    },
    (cluster) => exercise(cluster, options, { nodes, clients, log }, result),
    () =>
      result.checks !== undefined &&
      Object.values(result.checks).every((check) => check.passed) &&
      Object.values(result.perDatacenter).every((report) => report.checks !== undefined && Object.values(report.checks).every((check) => check.passed)),
  )
  result.elapsedMs = Math.round(performance.now() - started)
  return result
}

async function exercise(cluster: LocalCluster, options: FederationOptions, settings: { nodes: number; clients: number; log: (line: string) => void }, result: FederationResult): Promise<void> {
  const state = cluster.state()
  const origin = performance.now()
  const workloads = new Map<string, Workload>()
  for (const dc of DATACENTERS) {
    const addresses = Object.fromEntries(cluster.nodesOf(dc).map((node) => [node, state.nodes[node]!.httpAddress]))
    const configNames = Array.from({ length: options.configKeys ?? 3 }, (_, index) => `chaos-${dc}-${index}`)
    // One clock for both datacenters' histories and the WAN events.
    const workload = new Workload({ addresses, token: state.managementToken, configNames, requestTimeoutMs: options.requestTimeoutMs ?? 8_000, origin })
    workloads.set(dc, workload)
    result.perDatacenter[dc] = { datacenter: dc, nodes: cluster.nodesOf(dc), operations: countOperations([]), faults: [], failover: { faults: 0, samplesMs: [], withoutWrite: 0 }, foreignLocalReads: 0, history: workload.history }
  }
  try {
    await exerciseWith(cluster, workloads, options, settings, result)
  } finally {
    for (const workload of workloads.values()) workload.close()
  }
}

async function exerciseWith(
  cluster: LocalCluster,
  workloads: Map<string, Workload>,
  options: FederationOptions,
  settings: { nodes: number; clients: number; log: (line: string) => void },
  result: FederationResult,
): Promise<void> {
  const { log } = settings
  const rng = new SeededRng(options.seed)
  const nemesisRngs = new Map(DATACENTERS.map((dc) => [dc, rng.fork()]))
  const wanRng = rng.fork()
  const clientRngs = new Map(DATACENTERS.map((dc) => [dc, Array.from({ length: settings.clients }, () => rng.fork())]))
  const shared = new Shared()
  const book = new PartitionBook(cluster)
  const primaryWorkload = workloads.get(PRIMARY)!

  // Every datacenter's config entries are created (cas=0) through its own leader, before any fault (dc2's go to
  // the primary), so each history starts with its keys' creates; then replicated.
  for (const [dc, workload] of workloads) await createConfigEntries(cluster, dc, workload)
  await waitForReplication(cluster, primaryWorkload, workloads.get(SECONDARY)!, SETTLE_MS)

  const stop = new AbortController()
  // Every client's request and every sleep listens to it: 2 × clients + 3 nemeses, more than the default 10.
  setMaxListeners(256, stop.signal)
  const onAbort = (): void => stop.abort()
  options.signal?.addEventListener('abort', onAbort, { once: true })
  const tokenCheck: FederationChecks['globalTokenDuringWanPartition'] = { passed: false, problems: ['no WAN partition happened during the run'], count: 1, attempts: [] }
  try {
    const deadline = primaryWorkload.now() + options.durationMs
    const quietMs = options.quietMs ?? Math.min(10_000, Math.round(options.durationMs * 0.2))
    const nemeses = DATACENTERS.map(
      (dc) =>
        new Nemesis(datacenterTarget(cluster, book, dc), nemesisRngs.get(dc)!, {
          nodes: cluster.nodesOf(dc),
          now: () => primaryWorkload.now(),
          faultsUntil: deadline - quietMs,
          intervalMsMin: 1_000,
          intervalMsMax: 6_000,
          isolationCheckMs: 2_500,
          signal: stop.signal,
        }),
    )
    DATACENTERS.forEach((dc, position) => (result.perDatacenter[dc]!.faults = nemeses[position]!.events))
    log(`workload: ${settings.clients} clients per datacenter for ${options.durationMs} ms, faults until ${deadline - quietMs} ms (seed ${options.seed})`)
    const clientRuns = DATACENTERS.flatMap((dc) =>
      clientRngs.get(dc)!.map((clientRng, client) => runFederationClient(workloads.get(dc)!, dc, shared, client, clientRng, deadline, stop.signal)),
    )
    const wan = wanNemesis(cluster, book, wanRng, primaryWorkload, shared, result.wan, tokenCheck, deadline - quietMs, stop.signal)
    await Promise.all([...nemeses.map((nemesis) => nemesis.run()), wan, ...clientRuns])
    await book.healAll()
    for (const dc of DATACENTERS) {
      for (const event of result.perDatacenter[dc]!.faults) {
        log(`  fault at ${event.at.toFixed(0)} ms: ${event.action} ${event.node}${event.wasLeader === true ? ' (leader)' : ''}${event.error === undefined ? '' : ` FAILED: ${event.error}`}`)
      }
    }
    for (const event of result.wan) log(`  WAN at ${event.at.toFixed(0)} ms: ${event.action} ${event.datacenter}${event.error === undefined ? '' : ` FAILED: ${event.error}`}`)
  } finally {
    options.signal?.removeEventListener('abort', onAbort)
  }
  const count = (): void => {
    let total = 0
    for (const dc of DATACENTERS) {
      const report = result.perDatacenter[dc]!
      const workload = workloads.get(dc)!
      report.operations = countOperations(workload.history)
      report.failover = failoverTimes(workload.history, report.faults)
      report.foreignLocalReads = shared.foreignReads.get(dc) ?? 0
      total += report.operations.total
    }
    result.operations = { total }
  }
  count()
  if (options.signal?.aborted === true) return

  log(`workload done: ${result.operations.total} operations; waiting for dc2 to settle`)
  const settled = await waitForReplication(cluster, primaryWorkload, workloads.get(SECONDARY)!, SETTLE_MS)
  log(`settled: ${settled.passed ? 'yes' : 'NO'} in ${settled.elapsedMs} ms; reading the final state`)
  const leaders = new Map<string, string>()
  for (const dc of DATACENTERS) {
    const leader = await cluster.leader(LEADER_MS, dc)
    leaders.set(dc, leader)
    await readFinalState(workloads.get(dc)!, leader)
  }
  count()
  const finals = new Map<string, Lists>()
  for (const dc of DATACENTERS) finals.set(dc, await readAll(workloads.get(dc)!, leaders.get(dc)!, 'consistent'))
  log('checking the histories')
  for (const dc of DATACENTERS) {
    const workload = workloads.get(dc)!
    const report = result.perDatacenter[dc]!
    const convergence = await checkConvergence(workload)
    report.checks = {
      acknowledgedWrites: checkAcknowledgedWrites(workload.history),
      linearizable: checkLinearizability(workload.history, { timeMsPerPartition: options.linearizabilityTimeMsPerKey ?? 20_000 }),
      staleReads: checkStaleReads(workload.history),
      versions: checkVersions(workload.history),
      convergence,
      faults: checkFaults(report.faults),
    }
  }
  const otherNodesViews = new Map<string, Lists[]>()
  for (const dc of DATACENTERS) {
    const views: Lists[] = []
    for (const node of workloads.get(dc)!.nodes()) views.push(await readAll(workloads.get(dc)!, node, 'stale').catch(() => emptyLists()))
    otherNodesViews.set(dc, views)
  }
  result.checks = {
    settled,
    noLostWrites: checkNoLostWrites(shared, finals, [...workloads.values()].flatMap((workload) => workload.options.configNames)),
    secondaryEqualsPrimary: compareDatacenters(finals.get(PRIMARY)!, finals.get(SECONDARY)!),
    localTokensStayHome: checkLocalTokens(shared, finals, otherNodesViews),
    globalTokenDuringWanPartition: tokenCheck,
    wanFaults: (() => {
      const problems = result.wan.filter((event) => event.error !== undefined).map((event) => `${event.action} ${event.datacenter} at ${event.at.toFixed(0)} ms failed: ${event.error}`)
      return { passed: problems.length === 0, problems, count: problems.length, faults: result.wan.filter((event) => event.action === 'partition-dc').length }
    })(),
  }
}

async function createConfigEntries(cluster: LocalCluster, dc: string, workload: Workload): Promise<void> {
  const deadline = Date.now() + 30_000
  for (const name of workload.options.configNames) {
    for (;;) {
      const leader = await cluster.leader(10_000, dc)
      const created = await configCas(workload, -1, leader, name, null, 0, 0)
      if (created.outcome === 'ok') break
      if (Date.now() > deadline) throw new Error(`could not create config entry ${name}: ${created.error ?? created.status}`)
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The clients.

function pick<T>(rng: SeededRng, items: readonly T[]): T {
  const item = items[rng.nextInt(items.length)]
  if (item === undefined) throw new Error('pick from an empty list')
  return item
}

function seededUuid(rng: SeededRng): string {
  const hex = Array.from({ length: 4 }, () => rng.nextUint32().toString(16).padStart(8, '0')).join('')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`
}

/** A write's outcome; an acknowledgement with the lagging header is unknown for this datacenter's history. */
function writeResult(answer: Answer): { outcome: Outcome; status?: number; error?: string; acknowledged: boolean } {
  if (answer.kind === 'error') return { outcome: answer.reached === 'no' ? 'failed' : 'unknown', error: answer.error, acknowledged: false }
  const outcome = writeOutcome(answer.status)
  if (outcome === 'ok' && answer.lagging === true) return { outcome: 'unknown', status: answer.status, error: 'replication lagging', acknowledged: true }
  return { outcome, status: answer.status, ...(outcome === 'ok' ? {} : { error: answer.text.slice(0, 200) }), acknowledged: outcome === 'ok' }
}

function readResult(answer: Answer, value: (body: unknown) => string | null): { outcome: Outcome; result?: string | null; status?: number; error?: string } {
  if (answer.kind === 'error') return { outcome: 'failed', error: answer.error }
  if (answer.status === 200) return { outcome: 'ok', result: value(answer.body), status: 200 }
  if (answer.status === 404) return { outcome: 'ok', result: null, status: 404 }
  return { outcome: 'failed', status: answer.status, error: answer.text.slice(0, 200) }
}

async function runFederationClient(workload: Workload, dc: string, shared: Shared, client: number, rng: SeededRng, deadline: number, signal: AbortSignal): Promise<void> {
  let sequence = 0
  const unique = (prefix: string): string => `${prefix}${dc}.${client}.${(sequence += 1)}`
  const node = (): string => pick(rng, workload.nodes())
  while (workload.now() < deadline && !signal.aborted) {
    const roll = rng.nextInt(100)
    const mode = pick(rng, READ_MODES)
    if (roll < 30) {
      const name = pick(rng, workload.options.configNames)
      const read = await configRead(workload, client, node(), name, mode, signal)
      if (read.outcome !== 'ok' || typeof read.result !== 'number' || read.modifyIndex === undefined || signal.aborted) continue
      let expected = read.result
      let cas = read.modifyIndex
      if (dc !== PRIMARY) {
        // The secondary's indexes are its own: CAS on the primary's version of the entry.
        const { answer } = await workload.send(node(), 'GET', `/v1/config/${CONFIG_KIND}/${name}?dc=${PRIMARY}&consistent`, undefined, signal)
        if (answer.kind !== 'response' || answer.status !== 200) continue
        const body = answer.body as { Counter?: unknown; ModifyIndex?: unknown }
        if (typeof body.Counter !== 'number' || typeof body.ModifyIndex !== 'number') continue
        expected = body.Counter
        cas = body.ModifyIndex
      }
      await configCasFederated(workload, client, node(), name, expected, cas, expected + 1, signal)
    } else if (roll < 42) {
      await configRead(workload, client, node(), pick(rng, workload.options.configNames), mode, signal)
    } else if (roll < 62) {
      await policyOperation(workload, dc, shared, client, rng, node(), mode, unique, signal)
    } else if (roll < 80) {
      await tokenOperation(workload, dc, shared, false, client, rng, node(), mode, unique, signal)
    } else if (roll < 95) {
      await tokenOperation(workload, dc, shared, true, client, rng, node(), mode, unique, signal)
    } else {
      // The other datacenter's local tokens are never found here.
      const other = DATACENTERS.find((candidate) => candidate !== dc)!
      const foreign = shared.localTokens.get(other)!
      if (foreign.length === 0) continue
      const accessor = pick(rng, foreign)
      const where = node()
      const { answer } = await workload.send(where, 'GET', `/v1/acl/token/${accessor}${modeQuery(mode)}`, undefined, signal)
      shared.foreignReads.set(dc, (shared.foreignReads.get(dc) ?? 0) + 1)
      if (answer.kind === 'response' && answer.status === 200) shared.leaks.push(`${other}'s local token ${accessor} read on ${where} (${dc}, ${mode}): ${answer.text.slice(0, 200)}`)
    }
  }
}

/** configCas, with the lagging header taken into account (the recorded outcome unknown when dc2 lagged). */
async function configCasFederated(workload: Workload, client: number, node: string, name: string, expected: number, cas: number, value: number, signal: AbortSignal): Promise<void> {
  const body = { Kind: CONFIG_KIND, Name: name, Counter: value }
  const { answer, start, end } = await workload.send(node, 'PUT', `/v1/config?cas=${cas}`, body, signal)
  const { acknowledged: _acknowledged, ...written } = writeResult(answer)
  const result = written.outcome === 'ok' && answer.kind === 'response' ? answer.body === true : undefined
  workload.record({ client, node, kind: 'config.cas', key: `config:${name}`, value, expected, start, end, ...written, ...(result === undefined ? {} : { result }) })
}

async function policyOperation(
  workload: Workload,
  dc: string,
  shared: Shared,
  client: number,
  rng: SeededRng,
  node: string,
  mode: (typeof READ_MODES)[number],
  unique: (prefix: string) => string,
  signal: AbortSignal,
): Promise<void> {
  const mine = shared.policies.get(dc)!
  const known = [...mine.entries()]
  const roll = rng.nextInt(100)
  if (known.length < 3 || roll < 3) {
    const name = `chaos-${dc}-policy-${unique('').replace(/\./g, '-')}`
    const description = unique('p')
    workload.attemptedPolicies.add(name)
    const { answer, start, end } = await workload.send(node, 'PUT', '/v1/acl/policy', { Name: name, Description: description }, signal)
    const { acknowledged, ...written } = writeResult(answer)
    workload.record({ client, node, kind: 'policy.create', key: `policy:${name}`, value: description, start, end, ...written })
    const id = answer.kind === 'response' && acknowledged ? (answer.body as { ID?: string }).ID : undefined
    if (id !== undefined) {
      mine.set(name, id)
      shared.acknowledged.push({ datacenter: dc, key: `policy:${name}`, local: false })
    }
    return
  }
  const [name, id] = pick(rng, known)
  if (roll < 55) {
    const description = unique('p')
    const { answer, start, end } = await workload.send(node, 'PUT', `/v1/acl/policy/${id}`, { Name: name, Description: description }, signal)
    const { acknowledged: _acknowledged, ...written } = writeResult(answer)
    workload.record({ client, node, kind: 'policy.update', key: `policy:${name}`, value: description, start, end, ...written })
    return
  }
  const { answer, start, end } = await workload.send(node, 'GET', `/v1/acl/policy/${id}${modeQuery(mode)}`, undefined, signal)
  workload.record({ client, node, kind: 'policy.read', key: `policy:${name}`, mode, start, end, ...readResult(answer, (body) => (body as { Description?: string }).Description ?? null) })
}

async function tokenOperation(
  workload: Workload,
  dc: string,
  shared: Shared,
  local: boolean,
  client: number,
  rng: SeededRng,
  node: string,
  mode: (typeof READ_MODES)[number],
  unique: (prefix: string) => string,
  signal: AbortSignal,
): Promise<void> {
  const mine = (local ? shared.localTokens : shared.globalTokens).get(dc)!
  const roll = rng.nextInt(100)
  if (mine.length < 3 || roll < 3) {
    const accessor = seededUuid(rng)
    const secret = seededUuid(rng)
    const description = unique(local ? 'l' : 't')
    workload.attemptedTokens.add(accessor)
    const body = { AccessorID: accessor, SecretID: secret, Description: description, ...(local ? { Local: true } : {}) }
    const { answer, start, end } = await workload.send(node, 'PUT', '/v1/acl/token', body, signal)
    const { acknowledged, ...written } = writeResult(answer)
    workload.record({ client, node, kind: 'token.create', key: `token:${accessor}`, value: description, start, end, ...written })
    if (acknowledged) {
      mine.push(accessor)
      if (!local) shared.secrets.set(accessor, secret)
      shared.acknowledged.push({ datacenter: dc, key: `token:${accessor}`, local })
    } else if (local && written.outcome === 'unknown') {
      // A local token whose create may have landed: it must never show up elsewhere either.
      shared.localTokens.get(dc)!.push(accessor)
    }
    return
  }
  const accessor = pick(rng, mine)
  if (roll < 55) {
    const description = unique(local ? 'l' : 't')
    const { answer, start, end } = await workload.send(node, 'PUT', `/v1/acl/token/${accessor}`, { Description: description, ...(local ? { Local: true } : {}) }, signal)
    const { acknowledged: _acknowledged, ...written } = writeResult(answer)
    workload.record({ client, node, kind: 'token.update', key: `token:${accessor}`, value: description, start, end, ...written })
    return
  }
  const { answer, start, end } = await workload.send(node, 'GET', `/v1/acl/token/${accessor}${modeQuery(mode)}`, undefined, signal)
  workload.record({ client, node, kind: 'token.read', key: `token:${accessor}`, mode, start, end, ...readResult(answer, (body) => (body as { Description?: string }).Description ?? null) })
}

// ---------------------------------------------------------------------------------------------------------------
// The WAN nemesis, and the check of a replicated global token in dc2 while the primary is cut off.

async function wanNemesis(
  cluster: LocalCluster,
  book: PartitionBook,
  rng: SeededRng,
  clock: Workload,
  shared: Shared,
  events: WanEvent[],
  tokenCheck: FederationChecks['globalTokenDuringWanPartition'],
  faultsUntil: number,
  signal: AbortSignal,
): Promise<void> {
  let checked = false
  const act = async (action: WanEvent['action'], run: () => Promise<void>): Promise<boolean> => {
    const event: WanEvent = { at: clock.now(), action, datacenter: SECONDARY }
    events.push(event)
    try {
      await run()
    } catch (error) {
      event.error = error instanceof Error ? error.message : String(error)
    }
    event.done = clock.now()
    return event.error === undefined
  }
  let first = true
  for (;;) {
    const waitMs = first ? rng.between(4_000, 8_000) : rng.between(6_000, 14_000)
    first = false
    const holdMs = rng.between(3_000, 8_000)
    if (clock.now() + waitMs + holdMs >= faultsUntil) break
    if (!(await sleep(waitMs, signal))) break
    const cut = await act('partition-dc', () => book.cutDatacenter(SECONDARY))
    const holdStarted = Date.now()
    if (cut && !checked) {
      checked = true
      if (await sleep(1_500, signal)) await checkGlobalTokenInSecondary(cluster, shared, tokenCheck)
    }
    const rest = holdMs - (Date.now() - holdStarted)
    await sleep(Math.max(0, rest), signal)
    await act('heal-dc', () => book.heal([], [SECONDARY]))
    if (signal.aborted) break
  }
}

async function checkGlobalTokenInSecondary(cluster: LocalCluster, shared: Shared, report: FederationChecks['globalTokenDuringWanPartition']): Promise<void> {
  report.problems = []
  // A global token created at the primary early in the run: replicated long ago, never used in dc2 with its secret.
  const accessor = shared.globalTokens.get(PRIMARY)!.find((candidate) => shared.secrets.has(candidate))
  if (accessor === undefined) {
    report.problems.push('no acknowledged global token of dc1 to try')
    report.count = 1
    return
  }
  const secret = shared.secrets.get(accessor)!
  let worked = false
  let cutOff = false
  for (const node of cluster.nodesOf(SECONDARY)) {
    const address = cluster.apiAddress(node)
    const client = new Client({ address, token: secret })
    try {
      const self = await client.request('GET', '/v1/acl/token/self', { timeoutMs: 5_000 }).catch((error: unknown) => ({ status: 0, text: String(error), body: undefined }))
      const body = self.body as { AccessorID?: string } | undefined
      report.attempts.push(`${node}: token/self with ${accessor}'s secret: ${self.status} ${self.status === 200 ? `AccessorID ${body?.AccessorID}` : self.text.slice(0, 160)}`)
      if (self.status === 200 && body?.AccessorID === accessor) worked = true
      const primary = await client.request('GET', `/v1/acl/policies?dc=${PRIMARY}`, { timeoutMs: 5_000 }).catch((error: unknown) => ({ status: 0, text: String(error), body: undefined }))
      report.attempts.push(`${node}: GET /v1/acl/policies?dc=${PRIMARY}: ${primary.status} ${primary.text.slice(0, 120)}`)
      if (primary.status === 503) cutOff = true
    } finally {
      client.close()
    }
  }
  if (!cutOff) report.problems.push(`no node of ${SECONDARY} answered 503 for ?dc=${PRIMARY}: the primary was not cut off`)
  if (!worked) report.problems.push(`global token ${accessor} did not work on any node of ${SECONDARY} while the primary was cut off`)
  report.count = report.problems.length
  report.passed = report.problems.length === 0
}

// ---------------------------------------------------------------------------------------------------------------
// Final state across datacenters.

interface Lists {
  policies: Map<string, Record<string, unknown>>
  tokens: Map<string, Record<string, unknown>>
  config: Map<string, Record<string, unknown>>
}

function emptyLists(): Lists {
  return { policies: new Map(), tokens: new Map(), config: new Map() }
}

function withoutIndexes(item: Record<string, unknown>): Record<string, unknown> {
  const { CreateIndex: _create, ModifyIndex: _modify, ...rest } = item
  return rest
}

async function readAll(workload: Workload, node: string, mode: 'stale' | 'consistent'): Promise<Lists> {
  const lists = emptyLists()
  const read = async (path: string): Promise<Array<Record<string, unknown>>> => {
    const { answer } = await workload.send(node, 'GET', `${path}?${mode}`, undefined)
    if (answer.kind !== 'response' || answer.status !== 200) throw new Error(`GET ${path} on ${node}: ${answer.kind === 'response' ? `${answer.status} ${answer.text.slice(0, 200)}` : answer.error}`)
    return answer.body as Array<Record<string, unknown>>
  }
  for (const policy of await read('/v1/acl/policies')) lists.policies.set(String(policy.ID), withoutIndexes(policy))
  for (const token of await read('/v1/acl/tokens')) lists.tokens.set(String(token.AccessorID), withoutIndexes(token))
  for (const entry of await read(`/v1/config/${CONFIG_KIND}`)) lists.config.set(`${String(entry.Kind)}/${String(entry.Name)}`, withoutIndexes(entry))
  return lists
}

function stable(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stable).join(',')}]`
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${stable((value as Record<string, unknown>)[key])}`)
      .join(',')}}`
  }
  return JSON.stringify(value)
}

/** dc2's policies, global tokens and service-defaults equal dc1's (IDs, Hash and every field but the indexes). */
function compareDatacenters(primary: Lists, secondary: Lists): FederationChecks['secondaryEqualsPrimary'] {
  const problems: string[] = []
  const global = (tokens: Map<string, Record<string, unknown>>): Map<string, Record<string, unknown>> => new Map([...tokens].filter(([, token]) => token.Local !== true))
  const compare = (what: string, left: Map<string, Record<string, unknown>>, right: Map<string, Record<string, unknown>>): void => {
    for (const [key, item] of left) {
      const other = right.get(key)
      if (other === undefined) problems.push(`${what} ${key}: in ${PRIMARY}, missing in ${SECONDARY}`)
      else if (stable(item) !== stable(other)) problems.push(`${what} ${key}: ${PRIMARY} has ${stable(item).slice(0, 300)}, ${SECONDARY} has ${stable(other).slice(0, 300)}`)
    }
    for (const key of right.keys()) if (!left.has(key)) problems.push(`${what} ${key}: in ${SECONDARY}, missing in ${PRIMARY}`)
  }
  const primaryTokens = global(primary.tokens)
  compare('policy', primary.policies, secondary.policies)
  compare('global token', primaryTokens, global(secondary.tokens))
  compare('config entry', primary.config, secondary.config)
  return { passed: problems.length === 0, problems: problems.slice(0, 30), count: problems.length, policies: primary.policies.size, tokens: primaryTokens.size, configEntries: primary.config.size }
}

/** Waits (at most `timeoutMs`) until dc2's leader shows what dc1's does. */
async function waitForReplication(cluster: LocalCluster, primary: Workload, secondary: Workload, timeoutMs: number): Promise<FederationChecks['settled']> {
  const started = Date.now()
  let last: string[] = []
  for (;;) {
    try {
      const [left, right] = [
        await readAll(primary, await cluster.leader(5_000, PRIMARY), 'consistent'),
        await readAll(secondary, await cluster.leader(5_000, SECONDARY), 'consistent'),
      ]
      const compared = compareDatacenters(left, right)
      last = compared.problems
      if (compared.passed) return { passed: true, problems: [], count: 0, elapsedMs: Date.now() - started }
    } catch (error) {
      last = [error instanceof Error ? error.message : String(error)]
    }
    if (Date.now() - started > timeoutMs) return { passed: false, problems: last, count: last.length, elapsedMs: Date.now() - started }
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
}

function keyPresent(lists: Lists, key: string): boolean {
  const [kind, ...rest] = key.split(':')
  const name = rest.join(':')
  if (kind === 'policy') return [...lists.policies.values()].some((policy) => policy.Name === name)
  if (kind === 'token') return lists.tokens.has(name)
  return lists.config.has(`${CONFIG_KIND}/${name}`)
}

/** Every acknowledged create is in the primary and the secondary; every acknowledged local token in its own datacenter. */
function checkNoLostWrites(shared: Shared, finals: Map<string, Lists>, configNames: string[]): FederationChecks['noLostWrites'] {
  const problems: string[] = []
  let checked = 0
  for (const { datacenter, key, local } of shared.acknowledged) {
    const where = local ? [datacenter] : [...DATACENTERS]
    for (const dc of where) {
      checked += 1
      if (!keyPresent(finals.get(dc)!, key)) problems.push(`${key} (acknowledged in ${datacenter}${local ? ', local' : ''}) missing in ${dc}`)
    }
  }
  // The config entries (created before the faults) exist in both.
  for (const dc of DATACENTERS) {
    for (const name of configNames) {
      checked += 1
      if (!keyPresent(finals.get(dc)!, `config:${name}`)) problems.push(`config:${name} missing in ${dc}`)
    }
  }
  return { passed: problems.length === 0, problems: problems.slice(0, 30), count: problems.length, checked }
}

/** No local token is ever seen outside its datacenter: by the clients' lookups, in any node's list, in the final lists. */
function checkLocalTokens(shared: Shared, finals: Map<string, Lists>, views: Map<string, Lists[]>): FederationChecks['localTokensStayHome'] {
  const problems = [...shared.leaks]
  let checked = [...shared.foreignReads.values()].reduce((sum, value) => sum + value, 0)
  for (const dc of DATACENTERS) {
    const mine = shared.localTokens.get(dc)!
    for (const other of DATACENTERS.filter((candidate) => candidate !== dc)) {
      for (const lists of [finals.get(other)!, ...(views.get(other) ?? [])]) {
        for (const accessor of mine) {
          checked += 1
          if (lists.tokens.has(accessor)) problems.push(`${dc}'s local token ${accessor} listed in ${other}`)
        }
      }
    }
    for (const accessor of mine) {
      const token = finals.get(dc)!.tokens.get(accessor)
      if (token !== undefined && token.Local !== true) problems.push(`${dc}'s local token ${accessor} is listed there with Local ${String(token.Local)}`)
    }
  }
  return { passed: problems.length === 0, problems: problems.slice(0, 30), count: problems.length, checked }
}
