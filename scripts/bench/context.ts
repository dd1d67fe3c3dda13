/**
 * What every workload gets: the options and the plan they imply, the results being filled, the progress line, a
 * scratch directory, and `load()`, which runs one autocannon load and records it as a row with every process's
 * resource use.
 */
import { runCannon, type CannonRequest, type CannonTls } from './cannon.js'
import type { Options, Plan } from './options.js'
import type { Progress } from './progress.js'
import type { Watched } from './procfs.js'
import type { Results, Row, System } from './results.js'

export interface BenchContext {
  options: Options
  plan: Plan
  results: Results
  progress: Progress
  /** Scratch files (HAR request lists); removed at the end. */
  workDir: string
  /** Size in bytes of a token record as warden returns it, so etcd is given values of the same size. */
  valueBytes: number
}

export interface LoadSpec {
  workload: string
  system: System
  name: string
  cluster: string
  origin: string
  connections: number
  requests: CannonRequest[]
  watched: Watched[]
  durationS?: number
  maxRequests?: number
  rotateTokens?: string[]
  rotatePaths?: string[]
  note?: string
  /** For an https:// origin: the files of the client certificate (cannon.ts). */
  tls?: CannonTls
  /**
   * false: measured and returned, but not added to the results' rows (a workload that runs a case several times
   * records one row of its own, the medians). Default true.
   */
  record?: boolean
}

/** One autocannon load, recorded as a row (and returned, with what autocannon said about status codes). */
export async function load(ctx: BenchContext, spec: LoadSpec): Promise<Row & { statusCodes: Record<string, number>; ok: number; durationS: number }> {
  const { result, usage } = await runCannon(
    {
      origin: spec.origin,
      connections: spec.connections,
      durationS: spec.durationS ?? ctx.plan.loadS,
      requests: spec.requests,
      workDir: ctx.workDir,
      ...(spec.maxRequests === undefined ? {} : { maxRequests: spec.maxRequests }),
      ...(spec.rotateTokens === undefined ? {} : { rotateTokens: spec.rotateTokens }),
      ...(spec.rotatePaths === undefined ? {} : { rotatePaths: spec.rotatePaths }),
      ...(spec.tls === undefined ? {} : { tls: spec.tls }),
    },
    spec.watched,
  )
  const row: Row = {
    workload: spec.workload,
    system: spec.system,
    name: spec.name,
    cluster: spec.cluster,
    connections: spec.connections,
    rps: result.rps,
    p50Ms: result.p50Ms,
    p99Ms: result.p99Ms,
    errors: result.errors,
    processes: usage,
    ...(spec.note === undefined ? {} : { note: spec.note }),
  }
  if (spec.record !== false) ctx.results.rows.push(row)
  if (result.errors > 0) {
    const codes = Object.entries(result.statusCodes).map(([code, count]) => `${code}×${count}`).join(' ')
    ctx.progress.note(`  ${spec.system} ${spec.name} c=${spec.connections}: ${result.errors} errors (status codes: ${codes})`)
  }
  return { ...row, statusCodes: result.statusCodes, ok: result.ok, durationS: result.durationS }
}

/** A short unrecorded load, so the first measured row does not pay for JIT warm-up and LevelDB's first compactions. */
export async function warmUp(ctx: BenchContext, spec: Omit<LoadSpec, 'workload' | 'system' | 'name' | 'cluster'>): Promise<void> {
  if (ctx.plan.warmupS <= 0) return
  const tls = spec.tls === undefined ? {} : { tls: spec.tls }
  await runCannon({ origin: spec.origin, connections: spec.connections, durationS: ctx.plan.warmupS, requests: spec.requests, workDir: ctx.workDir, ...tls }, [])
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

export function jsonHeaders(token: string): Record<string, string> {
  return { 'X-Service-Token': token, 'Content-Type': 'application/json' }
}
