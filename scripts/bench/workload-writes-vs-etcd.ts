/**
 * Issue 22's write comparison, run by `--compare etcd` with the writes workload: token creates on warden ×3 (as it
 * ships: default settings, sealed peer links) against puts on etcd ×3 (etcd's defaults, its JSON gateway) of a value
 * of the same size as warden's token record, at the same connections: 64 to the leader, 64 to a follower, 1 to the
 * leader.
 *
 * Both clusters are started once and run through every round (restarting them per round would measure young
 * clusters only, and a restart per round is minutes of elections and readiness checks); round r loads warden's three
 * cases, then etcd's, so that drift of the machine and the growth of both stores over the run reach both systems
 * alike. The cluster not being loaded only heartbeats (and etcd compacts nothing by default); the CPU it takes during
 * each load is measured and reported. Each figure is the median over the rounds, each round's kept beside it.
 *
 * Per load: acknowledged (2xx) writes over its seconds; p50 and p99 of the acknowledged writes to the microsecond
 * (autocannon's own percentiles are whole milliseconds: cannon.ts latencyUs); and the CPU time of the loaded
 * cluster's three nodes from the first request to the last answer, read by the load generator, per acknowledged
 * write. The load generator's CPU is not counted (it is the same client for both systems).
 */
import { randomUUID } from 'node:crypto'
import { runCannon, type CannonRequest, type CannonResult } from './cannon.js'
import { warmUp, type BenchContext } from './context.js'
import { base64, type EtcdCluster } from './etcd.js'
import type { ProcessUsage, Watched } from './procfs.js'
import type { Row, WriteComparison, WriteComparisonCase, WriteComparisonSide, WriteFigures } from './results.js'
import type { WardenCluster } from './warden.js'
import { median } from './workload-links.js'
import { benchPolicy, tokenCreate } from './workload-writes.js'

type Target = 'leader' | 'follower'

/** The cases, in the order each round runs them on each system. */
const CASES: ReadonlyArray<{ key: WriteComparisonCase['key']; target: Target; connections: number }> = [
  { key: 'leader64', target: 'leader', connections: 64 },
  { key: 'follower64', target: 'follower', connections: 64 },
  { key: 'leader1', target: 'leader', connections: 1 },
]

/** One of the two systems, as the rounds need it. */
interface System {
  system: 'warden' | 'etcd'
  /** "token create", "put". */
  operation: string
  cluster: string
  /** Asks the cluster who leads now (an election may have happened between rounds). */
  refresh(): Promise<void>
  origin(target: Target): string
  /** The request of one load. */
  request(): CannonRequest
  /** The nodes for the rows' RSS and CPU columns. */
  watched(): Watched[]
  /** The three nodes' pids, whose CPU is counted. */
  pids(): number[]
  warmUp(): Promise<void>
}

interface Measured {
  figures: WriteFigures
  processes: ProcessUsage[]
  idleCpuPercent: number
}

function wardenSystem(ctx: BenchContext, warden: WardenCluster, policyId: string): System {
  const request = tokenCreate(warden.token, policyId)
  return {
    system: 'warden',
    operation: 'token create',
    cluster: warden.label,
    refresh: () => warden.refreshRoles(),
    origin: (target) => warden.origin(target === 'leader' ? warden.leader : (warden.followers[0] ?? warden.leader)),
    request: () => request,
    watched: () => warden.watched(),
    pids: () => warden.nodes().map((node) => warden.pid(node)),
    // As the writes workload warms its cluster up.
    warmUp: () => warmUp(ctx, { origin: warden.origin(warden.leader), connections: 16, requests: [request], watched: [] }),
  }
}

function etcdSystem(ctx: BenchContext, etcd: EtcdCluster): System {
  let leader = ''
  // One key per load, overwritten: etcd keeps every revision until compaction, as warden keeps every token.
  const put = (key: string): CannonRequest => ({
    method: 'POST',
    path: '/v3/kv/put',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ key: base64(key), value: base64('v'.repeat(ctx.valueBytes)) }),
  })
  return {
    system: 'etcd',
    operation: 'put',
    cluster: etcd.label,
    refresh: async () => {
      leader = await etcd.leader()
    },
    origin: (target) => etcd.origin(target === 'leader' ? leader : (etcd.nodes().find((name) => name !== leader) ?? leader)),
    request: () => put(`bench/${randomUUID()}`),
    watched: () => etcd.watched(leader),
    pids: () => etcd.nodes().map((name) => etcd.pid(name)),
    warmUp: () => warmUp(ctx, { origin: etcd.origin(leader), connections: 16, requests: [put('bench/warmup')], watched: [] }),
  }
}

export async function writesVsEtcd(ctx: BenchContext, warden: WardenCluster, etcd: EtcdCluster): Promise<void> {
  const systems = [wardenSystem(ctx, warden, await benchPolicy(warden)), etcdSystem(ctx, etcd)]
  for (const system of systems) {
    await system.refresh()
    ctx.progress.step(`writes vs etcd: ${system.system} warm-up`)
    await system.warmUp()
  }
  const measured = new Map<string, Measured[]>()
  for (let round = 1; round <= ctx.plan.compareRounds; round++) {
    for (const system of systems) {
      await system.refresh()
      const idle = systems.filter((other) => other !== system).flatMap((other) => other.pids())
      for (const writeCase of CASES) {
        ctx.progress.step(`writes vs etcd: round ${round}/${ctx.plan.compareRounds}, ${system.system} ${system.operation} → ${writeCase.target}, ${writeCase.connections} conn`)
        const key = `${system.system}/${writeCase.key}`
        measured.set(key, [...(measured.get(key) ?? []), await measure(ctx, system, writeCase, idle)])
      }
    }
  }
  const [wardenSide, etcdSide] = systems as [System, System]
  const cases = CASES.map((writeCase): WriteComparisonCase => {
    const sides = [wardenSide, etcdSide].map((system) => summarize(ctx, system, writeCase, measured.get(`${system.system}/${writeCase.key}`) ?? []))
    const [wardenFigures, etcdFigures] = sides as [WriteComparisonSide, WriteComparisonSide]
    return { key: writeCase.key, target: writeCase.target, connections: writeCase.connections, warden: wardenFigures, etcd: etcdFigures, ratio: ratios(wardenFigures, etcdFigures) }
  })
  const comparison: WriteComparison = {
    rounds: ctx.plan.compareRounds,
    loadS: ctx.plan.compareLoadS,
    valueBytes: ctx.valueBytes,
    cases,
    idleClusterCpuPercentMax: Math.max(0, ...[...measured.values()].flat().map((item) => item.idleCpuPercent)),
  }
  ctx.results.writeComparison = comparison
}

/** One load of one case on one system; the other system's nodes are `idle`. */
async function measure(ctx: BenchContext, system: System, writeCase: (typeof CASES)[number], idle: number[]): Promise<Measured> {
  const loaded = system.pids()
  const { result, usage } = await runCannon(
    {
      origin: system.origin(writeCase.target),
      connections: writeCase.connections,
      durationS: ctx.plan.compareLoadS,
      requests: [system.request()],
      workDir: ctx.workDir,
      latencyUs: true,
      cpuPids: [...loaded, ...idle],
    },
    system.watched(),
  )
  if (result.latencyUs === undefined || result.cpuS === undefined) throw new Error('the load generator reported no µs latencies or CPU times')
  if (result.errors > 0) {
    const codes = Object.entries(result.statusCodes).map(([code, count]) => `${code}×${count}`).join(' ')
    ctx.progress.note(`  ${system.system} ${system.operation} → ${writeCase.target} c=${writeCase.connections}: ${result.errors} errors (status codes: ${codes})`)
  }
  const seconds = Math.max(0.01, result.durationS)
  return {
    figures: {
      writesPerS: Math.round(result.ok / seconds),
      p50Us: result.latencyUs.p50,
      p99Us: result.latencyUs.p99,
      // Math.max: a load with no acknowledged write shows all its CPU as the cost of one (and its errors say why).
      cpuUsPerWrite: Math.round((cpuOf(result, loaded) / Math.max(1, result.ok)) * 1e6),
      acknowledged: result.ok,
      errors: result.errors,
    },
    processes: usage,
    idleCpuPercent: Math.round((cpuOf(result, idle) / seconds) * 1000) / 10,
  }
}

function cpuOf(result: CannonResult, pids: number[]): number {
  return pids.reduce((sum, pid) => sum + (result.cpuS?.[String(pid)] ?? 0), 0)
}

/**
 * A case's rounds and medians on one system, and its row in the main table: the medians, with the processes of the
 * round whose rate was the median (as the links workload's rows).
 */
function summarize(ctx: BenchContext, system: System, writeCase: (typeof CASES)[number], rounds: Measured[]): WriteComparisonSide {
  const figures = rounds.map((item) => item.figures)
  const side: WriteComparisonSide = {
    name: `${system.operation} → ${writeCase.target}`,
    cluster: system.cluster,
    rounds: figures,
    median: {
      writesPerS: median(figures.map((item) => item.writesPerS)),
      p50Us: median(figures.map((item) => item.p50Us)),
      p99Us: median(figures.map((item) => item.p99Us)),
      cpuUsPerWrite: median(figures.map((item) => item.cpuUsPerWrite)),
    },
  }
  const byRate = [...rounds].sort((a, b) => a.figures.writesPerS - b.figures.writesPerS)
  const row: Row = {
    workload: 'writes',
    system: system.system,
    name: side.name,
    cluster: system.cluster,
    connections: writeCase.connections,
    rps: side.median.writesPerS,
    p50Ms: side.median.p50Us / 1000,
    p99Ms: side.median.p99Us / 1000,
    errors: figures.reduce((sum, item) => sum + item.errors, 0),
    processes: byRate[Math.floor((byRate.length - 1) / 2)]?.processes ?? [],
    note: `median of ${rounds.length} rounds alternated with ${system.system === 'warden' ? 'etcd' : 'warden'} (writes/s ${figures.map((item) => item.writesPerS).join(', ')}); ${side.median.cpuUsPerWrite} µs CPU per write`,
  }
  ctx.results.rows.push(row)
  return side
}

function ratios(warden: WriteComparisonSide, etcd: WriteComparisonSide): WriteComparisonCase['ratio'] {
  const ratio = (a: number, b: number): number => (b > 0 ? Math.round((a / b) * 100) / 100 : Number.NaN)
  return {
    writesPerS: ratio(warden.median.writesPerS, etcd.median.writesPerS),
    p50Us: ratio(warden.median.p50Us, etcd.median.p50Us),
    p99Us: ratio(warden.median.p99Us, etcd.median.p99Us),
    cpuUsPerWrite: ratio(warden.median.cpuUsPerWrite, etcd.median.cpuUsPerWrite),
  }
}
