/**
 * What the Raft driver needs from the world besides storage and peers: a monotonic clock, the wall clock, timers,
 * "run this after the current turn", and randomness. The agent passes `realEnvironment`; the simulator passes one
 * whose time is simulated and whose randomness comes from the schedule's seed, so that one seed replays one run of the
 * production driver exactly (tigerbeetle/tigerbeetle `src/testing/time.zig` plays the same part for its replica).
 *
 * Ordering promises: a callback never runs inside the call that scheduled it; `defer` callbacks run in the order they
 * were deferred, before any timer that becomes due later; a cancelled timer never fires.
 */
import { randomInt, randomUUID } from 'node:crypto'

export interface Timer {
  cancel(): void
}

export interface Environment {
  /** Monotonic milliseconds (never goes back, does not follow wall-clock changes). */
  now(): number
  /** Milliseconds since the Unix epoch: only for what other servers check against their own wall clock (join proofs). */
  wallNow(): number
  setTimeout(callback: () => void, delayMs: number): Timer
  setInterval(callback: () => void, periodMs: number): Timer
  /** Runs `callback` once the current turn of the event loop is over (setImmediate). */
  defer(callback: () => void): void
  /** A 32-bit seed for a SeededRng (election timeouts). */
  randomSeed(): number
  /** A unique identifier for a request context (read contexts, snapshot streams). Not a secret. */
  randomId(): string
}

export const realEnvironment: Environment = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  setTimeout(callback, delayMs) {
    const handle = setTimeout(callback, delayMs)
    return { cancel: () => clearTimeout(handle) }
  },
  setInterval(callback, periodMs) {
    const handle = setInterval(callback, periodMs)
    return { cancel: () => clearInterval(handle) }
  },
  defer(callback) {
    setImmediate(callback)
  },
  randomSeed: () => randomInt(0, 2 ** 32),
  randomId: () => randomUUID(),
}

/** Resolves after `delayMs` of the environment's time, or at once when `signal` aborts (its timer cancelled). */
export function sleep(environment: Environment, delayMs: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted === true) return Promise.resolve()
  return new Promise((resolve) => {
    const done = (): void => {
      timer.cancel()
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const timer = environment.setTimeout(done, delayMs)
    signal?.addEventListener('abort', done, { once: true })
  })
}
