/**
 * Serving reads: the consistency barrier, blocking queries and the response headers, the same for every endpoint.
 *
 * Blocking (readings.md): a list returns once its table's index exceeds the client's index; a read of one record once
 * that record's ModifyIndex exceeds it, or the record is missing and the table's index exceeds it. An index above the
 * current one (a restored snapshot) returns at once. The wait is bounded (default 5 min, at most 10 min, plus jitter
 * of up to wait/16), the number of waiting queries is bounded, and a query whose client hung up stops waiting. On
 * waking, the token is checked again.
 *
 * Every header goes out under the contract's name and Consul's (headers.ts).
 */
import { randomInt } from 'node:crypto'
import { Readable } from 'node:stream'
import { TurnQueue, type JsonChunks } from '../lib/pace.js'
import { WardenError } from '../lib/errors.js'
import type { Table } from '../state/keys.js'
import type { Reader } from '../state/reader.js'
import type { StateStore } from '../state/store.js'
import type { ApiContext } from './context.js'
import { blockingOf, consistencyOf, hasParam } from './request.js'
import { coalesceKey, ReadCoalescer, serializedBody, serializeLargeBody } from './coalesce.js'
import { setResponseHeader } from './headers.js'

export interface ReadResult {
  body: unknown
  /** For reads of one record: its ModifyIndex, or undefined when it is missing. */
  modifyIndex?: number
  /** Entries were left out because the caller may not read them. */
  filtered?: boolean
  /** The body as JSON, once serialized: coalesced reads share the result and so the text (coalesce.ts). */
  json?: string
  /** A long list's JSON, made a slice at a time (coalesce.ts serializeLargeBody); sent as it is, never joined. */
  jsonChunks?: JsonChunks
}

export interface ReadSpec {
  table: Table
  /** Set for reads of one record: the record key to watch while it exists or once it is known. */
  recordKey?: string
  /**
   * For routes that derive what they read from the caller's token (its namespace): runs after the read barrier and
   * gives the record key, or for a list its scope (the namespace it is confined to). Reads with different record keys
   * or scopes never share a run (coalesce.ts).
   */
  prepare?: () => Promise<{ recordKey?: string; scope?: string }>
  /** Reads of one record: the error when it is missing once the query returns. */
  missing?: () => WardenError
  /** Endpoints whose Consistency column says "none" ignore the modes; "all" endpoints honour them. */
  consistency: 'all' | 'none'
  blocking: boolean
}

/** The index as clients see it: never 0 (readings.md), so that 0 always means "do not block". */
function reportedIndex(tableIndex: number): number {
  return Math.max(1, tableIndex)
}

let waitingQueries = 0

/**
 * Blocking queries a write woke are released this many per turn of the event loop (lib/pace.ts TurnQueue): each one
 * runs its read again and answers in that turn, some 50 µs, so a turn holds the loop for about 5 ms however many wait.
 */
export const WAKES_PER_TURN = 100
const wakes = new TurnQueue(WAKES_PER_TURN)

export function waitingQueryCount(): number {
  return waitingQueries
}

/** One coalescer per state store: agents sharing a process (tests) must never share results. */
const coalescers = new WeakMap<object, ReadCoalescer>()

function coalescerOf(state: object): ReadCoalescer {
  let coalescer = coalescers.get(state)
  if (coalescer === undefined) {
    coalescer = new ReadCoalescer()
    coalescers.set(state, coalescer)
  }
  return coalescer
}

export async function serveRead(ctx: ApiContext, given: ReadSpec, runAlone: () => Promise<ReadResult>): Promise<void> {
  const { state, cluster, settings } = ctx.state.app
  const { mode, maxStaleMs } = consistencyOf(ctx)
  let effective = given.consistency === 'all' ? mode : 'leader'
  // ?max_stale: a stale read, unless this node has not heard from the leader for longer; then the leader's view.
  if (effective === 'stale' && maxStaleMs !== undefined && !cluster.isLeader() && cluster.lastContactMs() >= maxStaleMs) effective = 'leader'
  await cluster.readBarrier(effective)
  // What the route resolves through the caller's token (its namespace) is resolved past the barrier, at the state the
  // read will see: a token created a moment ago through the leader is known here by now. Not while a snapshot install
  // has the state's database closed (a ?stale read passes the barrier at once), and again if one replaced it meanwhile.
  const prepared = given.prepare === undefined ? {} : await acrossReplacements(state, given.prepare)
  const spec = prepared.recordKey === undefined ? given : { ...given, recordKey: prepared.recordKey }
  const coalescer = coalescerOf(state)
  await coalescer.nextTurn()
  const scope = [spec.recordKey ?? '', prepared.scope ?? '']
  // The table's index as the run starts: the answer's X-Service-Index. Read before the records, never after: a write
  // applied while they are read would otherwise give an index newer than the body, and a client blocking on it would
  // never see that write (until another came). An index older than the body only costs that client one more round.
  let indexAtRun = state.tableIndex(spec.table)
  // A run resolves the caller afresh, at the applied index it reads (a read joining it is keyed by that index).
  const run = (): Promise<ReadResult> => {
    indexAtRun = state.tableIndex(spec.table)
    return coalescer.run(coalesceKey(ctx, state.lastApplied, scope), () =>
      acrossReplacements(state, () => {
        ctx.state.caller = undefined
        indexAtRun = state.tableIndex(spec.table)
        return runAlone()
      }),
    )
  }
  const blocking = spec.blocking ? blockingOf(ctx) : undefined
  let result = await run()
  if (blocking !== undefined) {
    const jitterMs = blocking.waitMs >= 16 ? randomInt(0, Math.floor(blocking.waitMs / 16) + 1) : 0
    const deadline = Date.now() + blocking.waitMs + jitterMs
    const isRecord = spec.recordKey !== undefined || spec.missing !== undefined
    for (;;) {
      // Compare with the index clients were given: X-Service-Index is never 0, so an untouched table reads as 1.
      const tableIndex = reportedIndex(state.tableIndex(spec.table))
      if (blocking.index > tableIndex) break
      const ready = isRecord
        ? result.modifyIndex !== undefined
          ? result.modifyIndex > blocking.index
          : tableIndex > blocking.index
        : tableIndex > blocking.index
      if (ready || ctx.state.app.closing.aborted) break
      if (Date.now() >= deadline) {
        // The wait ran out with nothing new here. That may be because this node is cut off from the leader: before
        // the answer says `leader` or `consistent`, confirm with the leader as at the start (no_leader if it cannot),
        // and answer with what it confirms. A stale read answers from here, as always: the run after the wait
        // below has just resolved its token again.
        if (effective !== 'stale') {
          await cluster.readBarrier(effective)
          result = await run()
        }
        break
      }
      const watchKey = result.modifyIndex !== undefined ? spec.recordKey : undefined
      // A waiting query keeps nothing of its answer (a list may be large) while it waits: every wake runs it again.
      result = { body: undefined, ...(result.modifyIndex === undefined ? {} : { modifyIndex: result.modifyIndex }) }
      const woke = await waitForChange(ctx, spec.table, watchKey, deadline, settings.blockingQueriesMax)
      if (woke === 'gone') return
      // The run resolves the token again: one revoked during the wait is refused.
      result = await run()
    }
  }
  // A long list's JSON is made a slice at a time (coalesce.ts); ?pretty is indented whole by the app.
  const serializing = hasParam(ctx, 'pretty') ? undefined : serializeLargeBody(result)
  if (serializing !== undefined) await serializing
  respond(ctx, spec, effective, result, indexAtRun)
}

/** How many times a read runs again when snapshot installs replaced the state under it. */
const RUNS_ACROSS_REPLACEMENTS = 3

/**
 * Runs `read`, and again when it failed because a snapshot install replaced the state under it (the database it was
 * reading closed): a paced list spends many turns of the event loop reading, and a follower may install a snapshot
 * from its leader meanwhile. The new run reads the new state.
 */
export async function acrossReplacements<T>(state: Pick<StateStore, 'generation' | 'whenReplaced'>, read: () => Promise<T>): Promise<T> {
  for (let run = 1; ; run += 1) {
    // A run that starts while an install has the database closed waits for the new one (review finding).
    await state.whenReplaced()
    const generation = state.generation
    try {
      return await read()
    } catch (error) {
      if (run === RUNS_ACROSS_REPLACEMENTS || state.generation === generation) throw error
      await state.whenReplaced()
    }
  }
}

/** Runs `read` on a fixed view of the state (StateStore.view), for a list that yields while it reads (lib/pace.ts). */
export async function withReadView<T>(ctx: ApiContext, read: (reader: Reader) => Promise<T>): Promise<T> {
  const view = ctx.state.app.state.view()
  try {
    return await read(view.reader)
  } finally {
    view.close().catch(() => undefined)
  }
}

function respond(ctx: ApiContext, spec: ReadSpec, effective: string, result: ReadResult, tableIndex: number): void {
  const { cluster } = ctx.state.app
  setResponseHeader(ctx, 'Index', String(reportedIndex(tableIndex)))
  setResponseHeader(ctx, 'KnownLeader', String(cluster.leaderAddress() !== ''))
  setResponseHeader(ctx, 'LastContact', String(cluster.lastContactMs()))
  setResponseHeader(ctx, 'Effective-Consistency', effective)
  if (result.filtered === true) setResponseHeader(ctx, 'Results-Filtered-By-ACLs', 'true')
  if (spec.missing !== undefined && result.modifyIndex === undefined) throw spec.missing()
  if (result.body !== null && typeof result.body === 'object' && !hasParam(ctx as ApiContext, 'pretty')) {
    // The type first: Koa types a string body as text unless a type is already set.
    ctx.type = 'application/json'
    if (result.jsonChunks !== undefined) {
      // Each response reads the shared chunks through its own stream; the length keeps Content-Length.
      ctx.body = Readable.from(result.jsonChunks.chunks, { objectMode: false })
      ctx.length = result.jsonChunks.bytes
    } else ctx.body = serializedBody(result)
  } else ctx.body = result.body
}

/** Waits for the next change of the table (or of one record), the deadline, or the client hanging up. */
function waitForChange(
  ctx: ApiContext,
  table: Table,
  recordKey: string | undefined,
  deadline: number,
  waitingMax: number,
): Promise<'changed' | 'timeout' | 'gone'> {
  // A client that hung up while the query ran has already emitted 'close'; a listener added now would never fire,
  // and the query would hold its waiting slot until the deadline.
  if (ctx.res.destroyed) return Promise.resolve('gone')
  if (waitingQueries >= waitingMax) {
    return Promise.reject(new WardenError('rate_limited', `too many blocking queries are waiting on this node (at most ${waitingMax}); retry later`))
  }
  const { watches } = ctx.state.app.state
  waitingQueries += 1
  return new Promise((resolve) => {
    let settled = false
    const finish = (outcome: 'changed' | 'timeout' | 'gone'): void => {
      if (settled) return
      settled = true
      waitingQueries -= 1
      clearTimeout(timer)
      unsubscribe()
      ctx.res.off('close', onClose)
      releasedOnStop(ctx.state.app.closing).delete(onClosing)
      resolve(outcome)
    }
    const onClose = (): void => finish('gone')
    const onClosing = (): void => finish('timeout')
    const timer = setTimeout(() => finish('timeout'), Math.max(0, deadline - Date.now()))
    const unsubscribe = watches.subscribe(table, recordKey === undefined ? undefined : [recordKey], () => wakes.push(() => finish('changed')))
    ctx.res.on('close', onClose)
    releasedOnStop(ctx.state.app.closing).add(onClosing)
  })
}

const stopListeners = new WeakMap<AbortSignal, Set<() => void>>()

/**
 * The waiters to release when the agent stops. One abort listener per signal calls them all: adding one listener per
 * waiting query makes parking ten thousand of them quadratic (an EventTarget's add and remove scan its listeners).
 */
function releasedOnStop(closing: AbortSignal): Set<() => void> {
  let waiters = stopListeners.get(closing)
  if (waiters === undefined) {
    const created = new Set<() => void>()
    closing.addEventListener('abort', () => {
      for (const release of [...created]) release()
    }, { once: true })
    stopListeners.set(closing, created)
    waiters = created
  }
  return waiters
}
