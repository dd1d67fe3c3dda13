/**
 * One chaos run, start to finish: a fresh cluster in its own directory, the config entries the workload increments,
 * the clients and the nemesis for the run's duration (the last stretch without new faults, everything mended before
 * it ends), the final state read with ?consistent from the leader, convergence of every node, the checks, and the
 * cluster stopped whatever happened. `scripts/chaos.ts` (npm run chaos) and test/cluster/chaos.test.ts both call it.
 *
 * Determinism: every choice (operations, keys, nodes, values, faults, targets, intervals) comes from one SeededRng
 * seeded with `seed`: each client and the nemesis draw from their own fork of it, so a client's choices do not
 * depend on how its requests interleave with the others'. Timing still varies from run to run (processes, disks),
 * so a seed replays the same schedule of intentions, not the same history.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LocalCluster } from '../../cluster/lib.js'
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
  type LinearizabilityReport,
} from './checks.js'
import type { RecordedOperation } from './history.js'
import { Nemesis, type NemesisEvent } from './nemesis.js'
import { CONFIG_KIND, configCas, runClient, Workload } from './workload.js'

export interface ChaosOptions {
  seed: number
  durationMs: number
  nodes?: number
  clients?: number
  /** Config entries the clients increment. */
  configKeys?: number
  requestTimeoutMs?: number
  /** The seeded wait between two nemesis actions is drawn from [min, max]. */
  faultIntervalMsMin?: number
  faultIntervalMsMax?: number
  /** The last stretch of the run has no new faults: failover after the last one can be measured, and the end is calm. */
  quietMs?: number
  linearizabilityTimeMsPerKey?: number
  /** Keep the cluster's directory (data, logs) even when every check passes. It is always kept on failure. */
  keep?: boolean
  signal?: AbortSignal
  log?: (line: string) => void
  /** Told the cluster's directory as soon as it exists, so a caller can stop the cluster in an emergency. */
  onRoot?: (root: string) => void
}

export interface ChaosChecks {
  acknowledgedWrites: CheckReport & { keys: number }
  linearizable: LinearizabilityReport
  staleReads: CheckReport & { checked: number }
  versions: CheckReport & { versions: number }
  convergence: CheckReport & { elapsedMs: number }
  faults: CheckReport & { faults: number }
}

export interface ChaosResult {
  passed: boolean
  interrupted: boolean
  /** Set when the run itself broke (the cluster would not start, the final state could not be read). */
  error?: string
  seed: number
  durationMs: number
  nodes: number
  clients: number
  startedAt: string
  elapsedMs: number
  replay: string
  /** The cluster's directory (data and node logs), when it was kept. */
  root?: string
  operations: ReturnType<typeof countOperations>
  faults: NemesisEvent[]
  failover: FailoverReport
  checks?: ChaosChecks
  history: RecordedOperation[]
}

const FINAL_READ_MS = 30_000
const CONVERGENCE_MS = 20_000

export function replayCommand(options: Pick<ChaosOptions, 'seed' | 'durationMs' | 'nodes' | 'clients'>): string {
  const clients = options.clients === undefined ? '' : ` --clients ${options.clients}`
  return `npm run chaos -- --duration ${Math.round(options.durationMs / 1000)}s --seed ${options.seed} --nodes ${options.nodes ?? 3}${clients}`
}

export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const started = performance.now()
  const nodes = options.nodes ?? 3
  const clients = options.clients ?? 8
  const log = options.log ?? ((): void => {})
  const result: ChaosResult = {
    passed: false,
    interrupted: false,
    seed: options.seed,
    durationMs: options.durationMs,
    nodes,
    clients,
    startedAt: new Date().toISOString(),
    elapsedMs: 0,
    replay: replayCommand({ ...options, nodes, clients }),
    operations: { byKind: {}, byMode: {}, total: 0 },
    faults: [],
    failover: { faults: 0, samplesMs: [], withoutWrite: 0 },
    history: [],
  }
  await onFreshCluster(
    result,
    options,
    'warden-chaos-',
    (root) => {
      log(`starting ${nodes} nodes in ${root}`)
      return LocalCluster.up({ nodes, root })
    },
    (cluster) => exercise(cluster, options, { nodes, clients, log }, result),
    () => result.checks !== undefined && Object.values(result.checks).every((check) => check.passed),
  )
  result.elapsedMs = Math.round(performance.now() - started)
  return result
}

/** What a chaos run on a fresh cluster records of how it went, whichever runner made it. */
export interface ClusterRunRecord {
  passed: boolean
  interrupted: boolean
  error?: string
  /** The run's directory, kept when the run did not pass (or when asked to keep it). */
  root?: string
}

/**
 * Starts a cluster (`up`) in a fresh temporary directory, runs `exercise` on it and stops it whatever happens,
 * recording an error or an interruption in `result`; then `passed` holds when nothing went wrong and `checksPassed`
 * says so, and the directory is removed only then (unless `keep`). The single- and two-datacenter runners share it.
 */
export async function onFreshCluster(
  result: ClusterRunRecord,
  options: { signal?: AbortSignal | undefined; keep?: boolean | undefined; onRoot?: ((root: string) => void) | undefined },
  prefix: string,
  up: (root: string) => Promise<LocalCluster>,
  exercise: (cluster: LocalCluster) => Promise<void>,
  checksPassed: () => boolean,
): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), prefix))
  options.onRoot?.(root)
  let cluster: LocalCluster | undefined
  try {
    cluster = await up(root)
    await exercise(cluster)
  } catch (error) {
    result.error = error instanceof Error ? (error.stack ?? error.message) : String(error)
  } finally {
    result.interrupted = options.signal?.aborted ?? false
    // `up` stops what it started when it fails, so there is something to stop only when it returned.
    if (cluster !== undefined) {
      await cluster.down().catch((error: unknown) => {
        result.error = `${result.error ?? ''}\ncould not stop the cluster: ${error instanceof Error ? error.message : String(error)}`.trim()
      })
    }
  }
  result.passed = result.error === undefined && !result.interrupted && checksPassed()
  if (result.passed && options.keep !== true) await rm(root, { recursive: true, force: true })
  else result.root = root
}

async function exercise(cluster: LocalCluster, options: ChaosOptions, settings: { nodes: number; clients: number; log: (line: string) => void }, result: ChaosResult): Promise<void> {
  const state = cluster.state()
  const addresses = Object.fromEntries(Object.entries(state.nodes).map(([name, node]) => [name, node.httpAddress]))
  const configNames = Array.from({ length: options.configKeys ?? 6 }, (_, index) => `chaos-${index}`)
  const workload = new Workload({ addresses, token: state.managementToken, configNames, requestTimeoutMs: options.requestTimeoutMs ?? 6_000 })
  result.history = workload.history
  try {
    await exerciseWith(cluster, workload, options, settings, result)
  } finally {
    workload.close()
  }
}

async function exerciseWith(
  cluster: LocalCluster,
  workload: Workload,
  options: ChaosOptions,
  settings: { nodes: number; clients: number; log: (line: string) => void },
  result: ChaosResult,
): Promise<void> {
  const { log } = settings
  const { addresses, configNames } = workload.options
  const rng = new SeededRng(options.seed)
  const nemesisRng = rng.fork()
  const clientRngs = Array.from({ length: settings.clients }, () => rng.fork())

  await createConfigEntries(cluster, workload, configNames)
  const stop = new AbortController()
  const onAbort = (): void => stop.abort()
  options.signal?.addEventListener('abort', onAbort, { once: true })
  try {
    const deadline = workload.now() + options.durationMs
    const quietMs = options.quietMs ?? Math.min(8_000, Math.round(options.durationMs * 0.2))
    const nemesis = new Nemesis(cluster, nemesisRng, {
      nodes: Object.keys(addresses),
      now: () => workload.now(),
      faultsUntil: deadline - quietMs,
      // Up to 6 s between actions, so a fault often lasts long enough for peers to drop a paused node's links: a
      // leader woken after that must reconnect before it hears of a new term (the case an outside audit caught).
      intervalMsMin: options.faultIntervalMsMin ?? 1_000,
      intervalMsMax: options.faultIntervalMsMax ?? 6_000,
      isolationCheckMs: 2_500,
      signal: stop.signal,
    })
    result.faults = nemesis.events
    log(`workload: ${settings.clients} clients for ${options.durationMs} ms, faults until ${deadline - quietMs} ms (seed ${options.seed})`)
    await Promise.all([nemesis.run(), ...clientRngs.map((clientRng, client) => runClient(workload, client, clientRng, deadline, stop.signal))])
    for (const event of nemesis.events) {
      log(`  fault at ${event.at.toFixed(0)} ms: ${event.action} ${event.node}${event.wasLeader === true ? ' (leader)' : ''}${event.error === undefined ? '' : ` FAILED: ${event.error}`}`)
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort)
  }
  result.operations = countOperations(workload.history)
  result.failover = failoverTimes(workload.history, result.faults)
  if (options.signal?.aborted === true) return
  log(`workload done: ${result.operations.total} operations; reading the final state`)
  const leader = await cluster.leader(FINAL_READ_MS)
  await readFinalState(workload, leader)
  result.operations = countOperations(workload.history)
  result.failover = failoverTimes(workload.history, result.faults)
  const convergence = await checkConvergence(workload)
  log('checking the history')
  result.checks = {
    acknowledgedWrites: checkAcknowledgedWrites(workload.history),
    linearizable: checkLinearizability(workload.history, { timeMsPerPartition: options.linearizabilityTimeMsPerKey ?? 20_000 }),
    staleReads: checkStaleReads(workload.history),
    versions: checkVersions(workload.history),
    convergence,
    faults: checkFaults(result.faults),
  }
}

/** Each config entry the clients increment, created with cas=0 (a CAS from absent) before any fault. */
async function createConfigEntries(cluster: LocalCluster, workload: Workload, names: string[]): Promise<void> {
  const deadline = Date.now() + 30_000
  for (const name of names) {
    for (;;) {
      const leader = await cluster.leader(10_000)
      const created = await configCas(workload, -1, leader, name, null, 0, 0)
      if (created.outcome === 'ok') break
      if (Date.now() > deadline) throw new Error(`could not create config entry ${name}: ${created.error ?? created.status}`)
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }
}

export interface Snapshot {
  values: Map<string, string | number>
  modifyIndexes: Map<string, number>
}

/** The registers' values as one node's lists show them (`mode`: stale or consistent), with the request's times. */
export async function readLists(workload: Workload, node: string, mode: 'stale' | 'consistent'): Promise<Array<{ snapshot: Snapshot; start: number; end: number; prefix: string }>> {
  const lists = [
    { prefix: 'config', path: `/v1/config/${CONFIG_KIND}?${mode}` },
    { prefix: 'policy', path: `/v1/acl/policies?${mode}` },
    { prefix: 'token', path: `/v1/acl/tokens?${mode}` },
  ]
  const results = []
  for (const list of lists) {
    const { answer, start, end } = await workload.send(node, 'GET', list.path, undefined)
    if (answer.kind !== 'response' || answer.status !== 200) {
      throw new Error(`GET ${list.path} on ${node}: ${answer.kind === 'response' ? `${answer.status} ${answer.text.slice(0, 200)}` : answer.error}`)
    }
    const snapshot: Snapshot = { values: new Map(), modifyIndexes: new Map() }
    for (const item of answer.body as Array<Record<string, unknown>>) {
      if (list.prefix === 'config' && typeof item.Counter === 'number') {
        snapshot.values.set(`config:${String(item.Name)}`, item.Counter)
        snapshot.modifyIndexes.set(`config:${String(item.Name)}`, Number(item.ModifyIndex))
      } else if (list.prefix === 'policy') snapshot.values.set(`policy:${String(item.Name)}`, String(item.Description))
      else if (list.prefix === 'token') snapshot.values.set(`token:${String(item.AccessorID)}`, String(item.Description))
    }
    results.push({ snapshot, start, end, prefix: list.prefix })
  }
  return results
}

/** Every key the workload touched: config entries, and every policy and token a create was attempted for. */
export function workloadKeys(workload: Workload): string[] {
  return [
    ...workload.options.configNames.map((name) => `config:${name}`),
    ...[...workload.attemptedPolicies].map((name) => `policy:${name}`),
    ...[...workload.attemptedTokens].map((accessor) => `token:${accessor}`),
  ]
}

/** Reads the final state with ?consistent from the leader and records it as one final read per key. */
export async function readFinalState(workload: Workload, leader: string): Promise<void> {
  const deadline = Date.now() + FINAL_READ_MS
  let lists: Awaited<ReturnType<typeof readLists>>
  for (;;) {
    try {
      lists = await readLists(workload, leader, 'consistent')
      break
    } catch (error) {
      // Just after the last heal the leader may still be confirming its leadership; anything lasting is an error.
      if (Date.now() > deadline) throw error
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }
  for (const key of workloadKeys(workload)) {
    const list = lists.find((candidate) => key.startsWith(`${candidate.prefix}:`))!
    const value = list.snapshot.values.get(key)
    const modifyIndex = list.snapshot.modifyIndexes.get(key)
    workload.record({
      client: -1,
      node: leader,
      kind: 'final.read',
      key,
      mode: 'consistent',
      start: list.start,
      end: list.end,
      outcome: 'ok',
      result: value ?? null,
      ...(modifyIndex === undefined ? {} : { modifyIndex }),
    })
  }
}

/** (e) Once healed and idle, every node's own (stale) state shows the same values for every key, within a bound. */
export async function checkConvergence(workload: Workload): Promise<CheckReport & { elapsedMs: number }> {
  const started = Date.now()
  const keys = workloadKeys(workload)
  let differences: string[] = []
  for (;;) {
    differences = []
    const views = new Map<string, Map<string, string>>()
    for (const node of workload.nodes()) {
      try {
        const lists = await readLists(workload, node, 'stale')
        const view = new Map<string, string>()
        for (const key of keys) {
          const list = lists.find((candidate) => key.startsWith(`${candidate.prefix}:`))!
          const index = list.snapshot.modifyIndexes.get(key)
          view.set(key, `${JSON.stringify(list.snapshot.values.get(key) ?? null)}${index === undefined ? '' : `@${index}`}`)
        }
        views.set(node, view)
      } catch (error) {
        differences.push(`${node}: ${error instanceof Error ? error.message : String(error)}`)
      }
    }
    const [first, ...others] = [...views.entries()]
    for (const [node, view] of others) {
      for (const key of keys) {
        if (first !== undefined && view.get(key) !== first[1].get(key)) differences.push(`${key}: ${first[0]} has ${first[1].get(key)}, ${node} has ${view.get(key)}`)
      }
    }
    if (differences.length === 0 || Date.now() - started > CONVERGENCE_MS) break
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  const problems = differences.slice(0, 30)
  return { passed: differences.length === 0, problems, count: differences.length, elapsedMs: Date.now() - started }
}
