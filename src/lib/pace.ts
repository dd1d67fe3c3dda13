/**
 * Giving the event loop a turn during long loops. Listing 100,000 tokens is 100,000 point reads, decodes and
 * renderings, then 40 MB of JSON: done in one go it held a node's event loop for about a second (measured on a
 * `--dev` node: a `/v1/status/leader` asked meanwhile waited 0.8–0.96 s), and with it every timer and socket of the
 * node. On a leader that is its heartbeats, its answers to forwarded writes and every other request; at a million
 * tokens it is ten times longer than an election timeout. A loop that calls a Pacer after each item yields to the
 * event loop (setImmediate) once it has run for a slice, so that list requests share the node with everything else.
 *
 * For reads outside the state machine (HTTP lists, the ACL replication's full walk) only: apply never yields (it must
 * not let other work see a half-applied entry, and the simulator counts on a task finishing within one turn of the
 * loop).
 */

/** Returns undefined while the slice lasts, else a promise of the next turn of the event loop, to await. */
export type Pacer = () => Promise<void> | undefined

/** How long a loop may hold the event loop before it yields: well below a heartbeat interval. */
export const PACE_SLICE_MS = 5

/** A pacer whose slice starts now, and again after each turn it yields. A slice of 0 yields at every call (tests). */
export function pacer(sliceMs = PACE_SLICE_MS): Pacer {
  let sliceStartedAt = performance.now()
  return () => {
    if (performance.now() - sliceStartedAt < sliceMs) return undefined
    return new Promise((resolve) =>
      setImmediate(() => {
        sliceStartedAt = performance.now()
        resolve()
      }),
    )
  }
}

/** `items.map(render)`, awaited one at a time, yielding as `pace` says. */
export async function mapPaced<T, U>(items: readonly T[], pace: Pacer, render: (item: T) => U | Promise<U>): Promise<U[]> {
  const rendered: U[] = []
  for (const item of items) {
    rendered.push(await render(item))
    const turn = pace()
    if (turn !== undefined) await turn
  }
  return rendered
}

/** JSON text in UTF-8 chunks, and their length in bytes. */
export interface JsonChunks {
  readonly chunks: readonly Buffer[]
  readonly bytes: number
}

/** Items per chunk of stringifyPaced's output. */
const ITEMS_PER_CHUNK = 256

/**
 * `JSON.stringify(items)` for an array, item by item, yielding as `pace` says, in UTF-8 chunks of a few hundred items:
 * the same bytes. Not one string: joining 40 MB of parts and encoding it took 75 ms more in one go.
 */
export async function stringifyPaced(items: readonly unknown[], pace: Pacer): Promise<JsonChunks> {
  const chunks: Buffer[] = []
  let bytes = 0
  let parts: string[] = []
  const flush = (last: boolean): void => {
    const chunk = Buffer.from(`${chunks.length === 0 ? '[' : ','}${parts.join(',')}${last ? ']' : ''}`)
    chunks.push(chunk)
    bytes += chunk.length
    parts = []
  }
  for (const item of items) {
    // As JSON.stringify writes an array's element that has no JSON form (undefined, a function).
    parts.push(JSON.stringify(item) ?? 'null')
    if (parts.length === ITEMS_PER_CHUNK) flush(false)
    const turn = pace()
    if (turn !== undefined) await turn
  }
  if (parts.length > 0 || chunks.length === 0) {
    flush(true)
  } else {
    chunks.push(Buffer.from(']'))
    bytes += 1
  }
  return { chunks, bytes }
}

/**
 * Runs callbacks at most `perTurn` per turn of the event loop, in the order they came. What each callback sets off in
 * microtasks (a woken blocking query's run and its response) runs in the same turn, before the next batch: one write
 * woke 10,000 blocking queries, and answering them all in one turn held the event loop for 0.6 s (a `--dev` node).
 */
export class TurnQueue {
  private queue: Array<() => void> = []
  private head = 0
  private scheduled = false

  constructor(private readonly perTurn: number) {}

  push(callback: () => void): void {
    this.queue.push(callback)
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(() => this.runBatch())
  }

  get size(): number {
    return this.queue.length - this.head
  }

  private runBatch(): void {
    const end = Math.min(this.queue.length, this.head + this.perTurn)
    while (this.head < end) {
      const callback = this.queue[this.head]!
      this.queue[this.head] = noop
      this.head += 1
      try {
        callback()
      } catch (error) {
        // Thrown where it would have been without the queue (uncaught), but after the queue has moved on.
        setImmediate(() => {
          throw error
        })
      }
    }
    if (this.head < this.queue.length) {
      setImmediate(() => this.runBatch())
      return
    }
    this.queue = []
    this.head = 0
    this.scheduled = false
  }
}

function noop(): void {}
