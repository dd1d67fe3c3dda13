/**
 * autocannon, run as its own process through its CLI (`autocannon --json`), so that the load generator's CPU is its
 * own and shows up in the table next to the servers' (on a two-core machine it competes with them). Requests that
 * must differ from one another (10,000 tokens, 1,000 policies) go in a HAR file: the CLI cycles through its entries
 * on every connection.
 */
import { writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { runTracked } from './children.js'
import { UsageMonitor, type ProcessUsage, type Watched } from './procfs.js'

const REPO_ROOT = resolve(import.meta.dirname, '..', '..')
const AUTOCANNON = join(REPO_ROOT, 'node_modules', '.bin', 'autocannon')
/** tsx's loader, for the benchmark's own helper processes (resolved from the repository, as cluster/lib.ts does). */
export const TSX_LOADER = pathToFileURL(createRequire(join(REPO_ROOT, 'package.json')).resolve('tsx')).href

export interface CannonRequest {
  method: string
  path: string
  headers: Record<string, string>
  body?: string
}

/** Files for a load over HTTPS: the CA that signed the server's certificate, and the client certificate and its key. */
export interface CannonTls {
  caFile: string
  certFile: string
  keyFile: string
}

export interface CannonOptions {
  /** http://host:port or https://host:port (then `tls` names the files). */
  origin: string
  connections: number
  /** Seconds of load; the run also ends after `maxRequests` when that is set. */
  durationS: number
  maxRequests?: number
  /** One request, or many to cycle through (written to a HAR file in `workDir`). */
  requests: CannonRequest[]
  workDir: string
  timeoutS?: number
  /** Send each request with the next of these as X-Service-Token (one counter across all connections). */
  rotateTokens?: string[]
  /** Send each request to the next of these paths (the same counter). */
  rotatePaths?: string[]
  /**
   * For an https:// origin: the client presents this certificate. autocannon does not check the server's certificate
   * (it connects with rejectUnauthorized off); the CA is given anyway.
   */
  tls?: CannonTls
  /**
   * Percentiles to the microsecond as well (CannonResult.latencyUs): autocannon's own are whole milliseconds (its
   * histogram holds integers), too coarse for a write that takes under a millisecond on one connection.
   */
  latencyUs?: boolean
  /** CPU seconds of these processes over the load itself, read by the load generator (CannonResult.cpuS). */
  cpuPids?: number[]
}

/** Latency percentiles of the 2xx answers, in µs. */
export interface LatencyUs {
  p50: number
  p90: number
  p99: number
  max: number
}

export interface CannonResult {
  /** autocannon's mean of per-second request counts. */
  rps: number
  p50Ms: number
  p90Ms: number
  p99Ms: number
  maxMs: number
  /** Connection errors and timeouts plus non-2xx answers. */
  errors: number
  non2xx: number
  ok: number
  completed: number
  statusCodes: Record<string, number>
  durationS: number
  /** With CannonOptions.latencyUs. */
  latencyUs?: LatencyUs
  /** With CannonOptions.cpuPids: each one's CPU seconds from the first request to the last answer, keyed by pid. */
  cpuS?: Record<string, number>
}

interface AutocannonJson {
  requests: { average: number }
  latency: { p50: number; p90: number; p99: number; max: number }
  errors: number
  timeouts: number
  non2xx: number
  '2xx': number
  statusCodeStats?: Record<string, { count: number }>
  duration: number
  /** Added by cannon-rotating.ts when asked for. */
  latencyUs?: LatencyUs
  cpuS?: Record<string, number>
}

let harCounter = 0

export async function runCannon(options: CannonOptions, watched: Watched[]): Promise<{ result: CannonResult; usage: ProcessUsage[] }> {
  const [only] = options.requests
  if (only === undefined) throw new Error('runCannon: no requests')
  if (options.rotateTokens !== undefined || options.rotatePaths !== undefined || options.latencyUs === true || options.cpuPids !== undefined) {
    if (options.requests.length > 1 || options.maxRequests !== undefined) throw new Error('runCannon: many requests or maxRequests cannot go with rotation, latencyUs or cpuPids')
    return runProgrammatic(options, only, watched)
  }
  const args = ['--json', '-c', String(options.connections), '-d', String(options.durationS), '-t', String(options.timeoutS ?? 20)]
  if (options.maxRequests !== undefined) args.push('-O', String(options.maxRequests))
  // Paths only: autocannon reads the files itself, and no key goes on a command line.
  if (options.tls !== undefined) args.push('--ca', options.tls.caFile, '--cert', options.tls.certFile, '--key', options.tls.keyFile)
  if (options.requests.length === 1) {
    args.push('-m', only.method)
    for (const [name, value] of Object.entries(only.headers)) args.push('-H', `${name}=${value}`)
    if (only.body !== undefined) args.push('-b', only.body)
    args.push(`${options.origin}${only.path}`)
  } else {
    const harPath = join(options.workDir, `requests-${process.pid}-${++harCounter}.har`)
    await writeFile(harPath, JSON.stringify(toHar(options.origin, options.requests)))
    args.push('--har', harPath, options.origin)
  }
  const monitor = new UsageMonitor([...watched]).start()
  let output: string
  try {
    // No NODE_OPTIONS: a --cpu-prof meant for the servers must not profile the load generator too.
    const env = { ...process.env }
    delete env.NODE_OPTIONS
    const run = await runTracked(AUTOCANNON, args, { env }, (pid) => monitor.add({ label: 'autocannon', pid }))
    output = run.stdout
  } catch (error) {
    monitor.stop()
    throw error
  }
  return { result: parseResult(output), usage: monitor.stop() }
}

/** One request (rotated, timed to the µs, with CPU read around it, as asked) through cannon-rotating.ts. */
async function runProgrammatic(options: CannonOptions, request: CannonRequest, watched: Watched[]): Promise<{ result: CannonResult; usage: ProcessUsage[] }> {
  const specPath = join(options.workDir, `rotating-${process.pid}-${++harCounter}.json`)
  const spec = {
    url: options.origin,
    connections: options.connections,
    durationS: options.durationS,
    timeoutS: options.timeoutS ?? 20,
    method: request.method,
    path: request.path,
    headers: request.headers,
    ...(request.body === undefined ? {} : { body: request.body }),
    ...(options.rotateTokens === undefined ? {} : { tokens: options.rotateTokens }),
    ...(options.rotatePaths === undefined ? {} : { paths: options.rotatePaths }),
    ...(options.tls === undefined ? {} : { tls: options.tls }),
    ...(options.latencyUs === true ? { latencyUs: true } : {}),
    ...(options.cpuPids === undefined ? {} : { cpuPids: options.cpuPids }),
  }
  await writeFile(specPath, JSON.stringify(spec))
  const monitor = new UsageMonitor([...watched]).start()
  let output: string
  try {
    const env = { ...process.env }
    delete env.NODE_OPTIONS
    const script = join(import.meta.dirname, 'cannon-rotating.ts')
    const run = await runTracked(process.execPath, ['--import', TSX_LOADER, script, specPath], { env }, (pid) => monitor.add({ label: 'autocannon', pid }))
    output = run.stdout
  } catch (error) {
    monitor.stop()
    throw error
  }
  return { result: parseResult(output), usage: monitor.stop() }
}

function parseResult(output: string): CannonResult {
  const json = JSON.parse(output.trim().split('\n').at(-1) ?? '{}') as AutocannonJson
  const statusCodes: Record<string, number> = {}
  for (const [code, stats] of Object.entries(json.statusCodeStats ?? {})) statusCodes[code] = stats.count
  return {
    rps: Math.round(json.requests.average),
    p50Ms: json.latency.p50,
    p90Ms: json.latency.p90,
    p99Ms: json.latency.p99,
    maxMs: json.latency.max,
    errors: json.errors + json.timeouts + json.non2xx,
    non2xx: json.non2xx,
    ok: json['2xx'],
    completed: Object.values(statusCodes).reduce((sum, count) => sum + count, 0),
    statusCodes,
    durationS: json.duration,
    ...(json.latencyUs === undefined ? {} : { latencyUs: json.latencyUs }),
    ...(json.cpuS === undefined ? {} : { cpuS: json.cpuS }),
  }
}

function toHar(origin: string, requests: CannonRequest[]): unknown {
  return {
    log: {
      entries: requests.map((request) => ({
        request: {
          method: request.method,
          url: `${origin}${request.path}`,
          headers: Object.entries(request.headers).map(([name, value]) => ({ name, value })),
          ...(request.body === undefined ? {} : { postData: { mimeType: 'application/json', text: request.body } }),
        },
      })),
    },
  }
}
