/**
 * autocannon through its programmatic API, in its own process, for the loads its CLI cannot express:
 *
 * - every request with the next of many tokens, or for the next of many paths. The CLI's HAR input restarts its list
 *   on every connection, so a short run at 64 connections would only ever use the first few hundred of 10,000
 *   tokens, and its connections would walk a list of paths nearly in step; here one counter shared by all
 *   connections walks the whole list.
 * - latencies to the microsecond (`latencyUs`). autocannon times each request with process.hrtime, but records the
 *   time in milliseconds in an integer histogram, so its percentiles are whole milliseconds: a 600 µs write reads 0
 *   or 1 ms. Here every 2xx answer's time, as autocannon measured it, is also kept as it is, and the percentiles are
 *   taken from those.
 * - the CPU time of given processes over the load itself (`cpuPids`): read from /proc just before the first request
 *   and just after the last answer, so that neither this process's start nor its exit counts as part of the load.
 *
 * Prints the same JSON result as `autocannon --json`, with `latencyUs` ({ p50, p90, p99, max }, µs, 2xx answers
 * only) and `cpuS` ({ pid: CPU seconds over the load }) added when asked for.
 *
 *   node --import tsx scripts/bench/cannon-rotating.ts SPEC.json
 *   SPEC: { url, connections, durationS, timeoutS, method, path, headers, body?, tokens?: string[], paths?: string[],
 *           tls?: { caFile, certFile, keyFile } (for an https:// url: the client certificate to present),
 *           latencyUs?: boolean, cpuPids?: number[] }
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { cpuSeconds } from './procfs.js'

interface Spec {
  url: string
  connections: number
  durationS: number
  timeoutS: number
  method: string
  path: string
  headers: Record<string, string>
  body?: string
  tokens?: string[]
  paths?: string[]
  tls?: { caFile: string; certFile: string; keyFile: string }
  latencyUs?: boolean
  cpuPids?: number[]
}

interface RequestData {
  headers: Record<string, string>
  path: string
}

/** What autocannon() returns: its result when awaited, and its events meanwhile. */
interface Instance extends PromiseLike<Record<string, unknown>> {
  on(event: 'response', listener: (client: unknown, statusCode: number, bytes: number, responseTimeMs: number) => void): void
}

type Autocannon = (options: Record<string, unknown>) => Instance

// autocannon ships no type declarations; this is the one call used.
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: Float64Array, fraction: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))] ?? 0
}

/** µs percentiles of the kept answer times (in ms, as autocannon measured them). */
function latencyUs(timesMs: number[]): { p50: number; p90: number; p99: number; max: number } {
  const sorted = Float64Array.from(timesMs).sort()
  const us = (ms: number): number => Math.round(ms * 1000)
  return { p50: us(percentile(sorted, 0.5)), p90: us(percentile(sorted, 0.9)), p99: us(percentile(sorted, 0.99)), max: us(sorted.at(-1) ?? 0) }
}

function cpuNow(pids: number[]): Map<number, number | undefined> {
  return new Map(pids.map((pid) => [pid, cpuSeconds(pid)]))
}

/** CPU seconds of each process between two readings (0 for one that was gone at either). */
function cpuBetween(pids: number[], before: Map<number, number | undefined>, after: Map<number, number | undefined>): Record<string, number> {
  return Object.fromEntries(
    pids.map((pid) => {
      const [from, to] = [before.get(pid), after.get(pid)]
      return [String(pid), from === undefined || to === undefined ? 0 : Math.round((to - from) * 100) / 100]
    }),
  )
}

const specPath = process.argv[2]
if (specPath === undefined) throw new Error('usage: cannon-rotating.ts SPEC.json')
const spec = JSON.parse(readFileSync(specPath, 'utf8')) as Spec
let next = 0
const tls = spec.tls
const cpuPids = spec.cpuPids ?? []
const timesMs: number[] = []
const cpuBefore = cpuNow(cpuPids)
const rotates = (spec.tokens?.length ?? 0) > 0 || (spec.paths?.length ?? 0) > 0
function setupRequest(request: RequestData): RequestData {
  const n = next++
  const { tokens, paths } = spec
  if (tokens !== undefined && tokens.length > 0) request.headers = { ...request.headers, 'X-Service-Token': tokens[n % tokens.length] ?? '' }
  if (paths !== undefined && paths.length > 0) request.path = paths[n % paths.length] ?? spec.path
  return request
}
const instance = autocannon({
  url: spec.url,
  ...(tls === undefined ? {} : { tlsOptions: { ca: readFileSync(tls.caFile), cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) } }),
  connections: spec.connections,
  duration: spec.durationS,
  timeout: spec.timeoutS,
  requests: [
    {
      method: spec.method,
      path: spec.path,
      headers: spec.headers,
      ...(spec.body === undefined ? {} : { body: spec.body }),
      // Only when something rotates: with a setupRequest, autocannon builds every request's bytes anew (headers,
      // body, an id) instead of sending the ones it built once, which cost this process about half again the CPU
      // of the CLI's load on the same server (docs/benchmarks.md, issue 22, fourteenth session), CPU taken from the
      // servers it shares the machine with.
      ...(rotates ? { setupRequest } : {}),
    },
  ],
})
if (spec.latencyUs === true) {
  instance.on('response', (_client, statusCode, _bytes, responseTimeMs) => {
    if (statusCode >= 200 && statusCode < 300) timesMs.push(responseTimeMs)
  })
}
const result = await instance
const cpuS = cpuBetween(cpuPids, cpuBefore, cpuNow(cpuPids))
process.stdout.write(`${JSON.stringify({ ...result, ...(spec.latencyUs === true ? { latencyUs: latencyUs(timesMs) } : {}), ...(cpuPids.length > 0 ? { cpuS } : {}) })}\n`)
