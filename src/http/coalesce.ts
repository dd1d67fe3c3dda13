/**
 * Read coalescing: identical reads that run in the same turn of the event loop at the same applied index share one
 * run and one serialized body. Ten thousand blocking queries woken by one write would otherwise each re-run the same
 * list and each serialize it, which costs seconds and hundreds of megabytes at once.
 *
 * Identical means: same method, path and the query parameters that can change the answer (RESULT_PARAMS in
 * request.ts; not those that decide when and how it is served, nor ones no route reads), same secret, same
 * namespace header (under the contract's name or Consul's: headers.ts), same scope (what the route resolved before
 * the read: its record key, its namespace), same applied index. The run resolves the caller
 * itself (serveRead), so permissions are those of that applied index. What else a read's answer depends on is the
 * clock (token expiry): joiners share the first run's clock reading, taken in the same turn of the loop, at most a
 * few milliseconds earlier, never a later turn's.
 */
import { pacer, stringifyPaced } from '../lib/pace.js'
import type { ApiContext } from './context.js'
import { queryOf, RESULT_PARAMS, secretOf } from './request.js'
import { requestHeader } from './headers.js'
import type { ReadResult } from './read.js'

/** Bounds the memory of one turn's shared results; beyond it, reads run alone. */
const MAX_ENTRIES = 1024

export class ReadCoalescer {
  private entries = new Map<string, Promise<ReadResult>>()
  private clearScheduled = false
  private turn: Promise<void> | undefined

  /** Runs `run`, or joins a run of the same read in this turn of the loop. */
  run(key: string | undefined, run: () => Promise<ReadResult>): Promise<ReadResult> {
    if (key === undefined) return run()
    const shared = this.entries.get(key)
    if (shared !== undefined) return shared
    const started = run()
    if (this.entries.size < MAX_ENTRIES) {
      this.entries.set(key, started)
      if (!this.clearScheduled) {
        this.clearScheduled = true
        setImmediate(() => {
          this.entries = new Map()
          this.clearScheduled = false
        })
      }
    }
    return started
  }

  /**
   * Resolves in the check phase of this turn of the event loop, the same promise for every read that asks during the
   * turn. serveRead waits on it so that the reads whose requests arrived in one poll phase run and answer together,
   * after it, instead of each answering in the middle of parsing the next: on the benchmark's two cores, a response
   * written between two requests woke the client, which took the CPU from the server mid-batch, and reads on the
   * leader ran at half the rate of consistent reads, which a Ready already releases together (9,000–10,000/s against
   * 14,000–16,600/s; 17,500–21,600/s for `?stale` with this wait). It also lets identical reads of the turn share a run.
   */
  nextTurn(): Promise<void> {
    this.turn ??= new Promise((resolve) =>
      setImmediate(() => {
        this.turn = undefined
        resolve()
      }),
    )
    return this.turn
  }

  get size(): number {
    return this.entries.size
  }
}

/** The key of a read for coalescing, or undefined for a request that must run alone. */
export function coalesceKey(ctx: ApiContext, appliedIndex: number, scope: readonly string[]): string | undefined {
  if (ctx.method !== 'GET') return undefined
  // Parsed as the routes parse them (Koa's query), so `?fil%74er=` is the filter here as it is there. A repeated
  // parameter keeps all its values: the first counts, and two requests differing only after it still run apart.
  const query = queryOf(ctx)
  const params = RESULT_PARAMS.map((name) => query[name] ?? null)
  // JSON keeps the parts apart whatever they contain (a secret from ?token may hold any character). The secret and the
  // namespace header are the values the routes will use, whichever header name (the contract's or Consul's) carried
  // them: the same caller asking under either name gets the same answer.
  const namespaceHeader = requestHeader(ctx, 'Namespace')?.value ?? ''
  return JSON.stringify([appliedIndex, ctx.path, params, secretOf(ctx) ?? '', namespaceHeader, ...scope])
}

/** Lists longer than this are serialized an item at a time, giving the event loop turns (lib/pace.ts). */
export const PACED_SERIALIZE_ITEMS = 1_000

const serializing = new WeakMap<ReadResult, Promise<void>>()

/**
 * For a list longer than PACED_SERIALIZE_ITEMS, computes its JSON (result.jsonChunks) yielding to the event loop as it
 * goes, once however many coalesced reads share the result; undefined when there is nothing to wait for.
 */
export function serializeLargeBody(result: ReadResult): Promise<void> | undefined {
  if (result.jsonChunks !== undefined || !Array.isArray(result.body) || result.body.length <= PACED_SERIALIZE_ITEMS) return undefined
  let done = serializing.get(result)
  if (done === undefined) {
    done = stringifyPaced(result.body, pacer()).then((json) => {
      result.jsonChunks = json
    })
    serializing.set(result, done)
  }
  return done
}

/** The JSON text of a result's body, computed once however many responses carry it. */
export function serializedBody(result: ReadResult): string {
  result.json ??= JSON.stringify(result.body)
  return result.json
}
