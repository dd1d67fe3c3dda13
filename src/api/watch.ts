/**
 * Watching a read: the blocking-query loop Consul's clients run. The first read answers at once; each next one waits
 * on the index the last answer carried, and a value is yielded only when the index moved. Failures the server or the
 * network may get over (no answer, no leader, 429, 5xx) are retried after a jittered exponential backoff; an answer
 * that will not change by retrying (a 4xx: no permission, bad input) ends the watch by throwing.
 */
import { Backoff } from '../lib/backoff.js'
import { realEnvironment, sleep } from '../lib/environment.js'
import type { Client, QueryOptions, Result } from './client.js'
import { ApiError } from './errors.js'

export interface WatchOptions extends QueryOptions {
  /** Ends the watch (the loop returns without throwing). */
  signal?: AbortSignal
  backoff?: { initialMs: number; maxMs: number }
  /** Called before each retry, with the error and the delay. */
  onRetry?: (error: unknown, delayMs: number) => void
}

export async function* watch<T>(client: Client, path: string, options: WatchOptions = {}): AsyncGenerator<Result<T>, void, undefined> {
  const { backoff: backoffOptions, onRetry, ...query } = options
  const backoff = new Backoff({ initialMs: backoffOptions?.initialMs ?? 250, maxMs: backoffOptions?.maxMs ?? 30_000, jitter: 0.5 }, Math.random)
  const stopped = (): boolean => options.signal?.aborted === true
  let index: number | undefined
  while (!stopped()) {
    let result: Result<T>
    try {
      result = await client.query<T>(path, { ...query, ...(index === undefined ? {} : { index }) })
    } catch (error) {
      if (stopped()) return
      if (error instanceof ApiError && error.status < 500 && error.status !== 429) throw error
      const delayMs = backoff.next()
      onRetry?.(error, delayMs)
      await sleep(realEnvironment, delayMs, options.signal) // An abort ends the wait early; the loop then sees it.
      continue
    }
    backoff.reset()
    const previous = index
    // An index that went backwards (a restored snapshot, another server's view) starts over rather than waiting for
    // the old index to come back, as Consul's API documentation tells clients to.
    index = result.meta.index < (previous ?? 0) ? 0 : result.meta.index
    if (previous === undefined || result.meta.index !== previous) yield result
  }
}
