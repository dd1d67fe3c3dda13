/**
 * The promises that wait on the log: writes waiting for their entry to be applied, and readers waiting for this node
 * to apply up to an index. Both are bounded; every waiter has a timer and leaves no timer behind once settled.
 */
import type { Environment, Timer } from '../lib/environment.js'
import { WardenError } from '../lib/errors.js'

interface EntryWaiter<T> {
  readonly term: number
  /** May be told its entry's result before the entry's apply is written (released). */
  readonly early: boolean
  readonly resolve: (value: T) => void
  readonly reject: (error: WardenError) => void
  readonly timer: Timer
}

/**
 * Waiters for entries this leader proposed, keyed by log index AND term: an entry is the one proposed only if it was
 * applied at that index with that term. A leader of a later term may put another entry at the same index (the first
 * was never committed): both waiters are kept, the first is told `no_leader` (not applied, safe to retry) when the
 * other one applies, and a snapshot that skips the index tells every waiter at or below it `outcome_unknown`.
 */
export class EntryWaiters<T> {
  private readonly byIndex = new Map<number, Array<EntryWaiter<T>>>()
  private count = 0

  constructor(
    private readonly environment: Environment,
    private readonly countMax: number,
  ) {}

  get size(): number {
    return this.count
  }

  full(): boolean {
    return this.count >= this.countMax
  }

  /**
   * Waits for the entry (index, term) to be applied, at most `timeoutMs`; then its outcome is unknown. `early`: the
   * result may come as soon as it is computed (released), before the apply is written.
   */
  wait(index: number, term: number, timeoutMs: number, timeoutMessage: string, early = false): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const waiter: EntryWaiter<T> = {
        term,
        early,
        resolve,
        reject,
        timer: this.environment.setTimeout(() => {
          this.remove(index, waiter)
          reject(new WardenError('outcome_unknown', timeoutMessage))
        }, timeoutMs),
      }
      const list = this.byIndex.get(index)
      if (list === undefined) this.byIndex.set(index, [waiter])
      else list.push(waiter)
      this.count += 1
    })
  }

  /** Whether a write waits on the entry at `index` (of any term). */
  has(index: number): boolean {
    return this.byIndex.has(index)
  }

  /** The entry at `index` with `term` was applied with `value`. */
  applied(index: number, term: number, value: T): void {
    const list = this.byIndex.get(index)
    if (list === undefined) return
    this.byIndex.delete(index)
    this.count -= list.length
    for (const waiter of list) {
      waiter.timer.cancel()
      if (waiter.term === term) waiter.resolve(value)
      else waiter.reject(new WardenError('no_leader', 'the leader changed before this write was committed; it was not applied, so it is safe to retry'))
    }
  }

  /**
   * The result of the entry (index, term) is computed, and its apply not yet written: the waiters that accept an
   * early result for that very entry get it now (`applied` settles the others). Whether any did.
   */
  released(index: number, term: number, value: T): boolean {
    const list = this.byIndex.get(index)
    if (list === undefined) return false
    let released = false
    for (const waiter of [...list]) {
      if (!waiter.early || waiter.term !== term) continue
      this.remove(index, waiter)
      waiter.timer.cancel()
      waiter.resolve(value)
      released = true
    }
    return released
  }

  /** A snapshot up to `index` was installed: entries at or below it were never applied here one by one. */
  skippedTo(index: number): void {
    for (const [at, list] of this.byIndex) {
      if (at > index) continue
      this.byIndex.delete(at)
      this.count -= list.length
      for (const waiter of list) {
        waiter.timer.cancel()
        waiter.reject(new WardenError('outcome_unknown', 'this node installed a snapshot from a new leader before the write was applied here; it may or may not have been applied'))
      }
    }
  }

  rejectAll(error: WardenError): void {
    for (const list of this.byIndex.values()) {
      for (const waiter of list) {
        waiter.timer.cancel()
        waiter.reject(error)
      }
    }
    this.byIndex.clear()
    this.count = 0
  }

  private remove(index: number, waiter: EntryWaiter<T>): void {
    const list = this.byIndex.get(index)
    if (list === undefined) return
    const position = list.indexOf(waiter)
    if (position === -1) return
    list.splice(position, 1)
    this.count -= 1
    if (list.length === 0) this.byIndex.delete(index)
  }
}

interface IndexWaiter {
  readonly index: number
  readonly resolve: () => void
  readonly reject: (error: WardenError) => void
  readonly timer: Timer
}

/** Readers waiting for this node's applied index to reach theirs. Bounded: past `countMax` a wait is refused. */
export class AppliedWaiters {
  private readonly waiters = new Set<IndexWaiter>()

  constructor(
    private readonly environment: Environment,
    private readonly countMax: number,
  ) {}

  get size(): number {
    return this.waiters.size
  }

  wait(index: number, timeoutMs: number): Promise<void> {
    if (this.waiters.size >= this.countMax) return Promise.reject(new WardenError('rate_limited', 'too many requests are waiting for this node to catch up; retry later'))
    return new Promise<void>((resolve, reject) => {
      const waiter: IndexWaiter = {
        index,
        resolve,
        reject,
        timer: this.environment.setTimeout(() => {
          this.waiters.delete(waiter)
          reject(new WardenError('no_leader', `this node has not caught up to index ${index} in time; retry`))
        }, timeoutMs),
      }
      this.waiters.add(waiter)
    })
  }

  /** Wakes every waiter whose index is at most `applied`. */
  release(applied: number): void {
    for (const waiter of this.waiters) {
      if (waiter.index > applied) continue
      this.waiters.delete(waiter)
      waiter.timer.cancel()
      waiter.resolve()
    }
  }

  rejectAll(error: WardenError): void {
    for (const waiter of this.waiters) {
      waiter.timer.cancel()
      waiter.reject(error)
    }
    this.waiters.clear()
  }
}
