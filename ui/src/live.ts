/**
 * Data for a view. useLive keeps a list (or a record) current through the agent's blocking queries (?index=N&wait=…,
 * README "Blocking queries"): one request in flight per view, each waiting until the table's index passes the last
 * one seen, so a change made elsewhere shows without polling. Errors back off (1 s doubling to 30 s, with jitter);
 * an error that waiting will not fix (a 4xx other than 429) stops the loop until the user retries. What is shown
 * always belongs to the view's current inputs: a new path, filter or datacenter shows nothing of the old one's
 * answer, and an error that stops the loop (a record deleted, a read refused) clears the last answer too.
 */
import { useEffect, useState } from 'preact/hooks'
import { ApiError, request, type Query } from './api.js'
import { session, subscribe } from './session.js'

export interface Loaded<T> {
  data: T | undefined
  error: ApiError | undefined
  /** True until the first answer (or error). */
  loading: boolean
  /** The last answer's headers (X-Service-Results-Filtered-By-ACLs, say). */
  headers: Headers | undefined
  /** Ask again now (after a write, or to retry after an error that stopped the loop). */
  reload(): void
}

const WAIT = '60s'
const BACKOFF_MS_MIN = 1_000
const BACKOFF_MS_MAX = 30_000
/** An answer to a blocking query faster than this, with nothing new, did not block. */
const SPIN_MS = 1_000

/** Re-renders on every session change (sign-out, datacenter picked) and returns the session's datacenter. */
export function useSession(): ReturnType<typeof session> {
  const [, setTick] = useState(0)
  useEffect(() => subscribe(() => setTick((tick) => tick + 1)), [])
  return session()
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener('abort', () => {
      clearTimeout(timer)
      resolve()
    })
  })
}

function stopsTheLoop(error: ApiError): boolean {
  return error.status >= 400 && error.status < 500 && error.status !== 429
}

/**
 * `path` with `query`, kept current by blocking queries while `live` (else asked once per change of its inputs).
 * A null path asks nothing (a view still waiting for what it needs to know).
 */
export function useLive<T>(path: string | null, query: Query = {}, options: { live?: boolean; local?: boolean; version?: string | number } = {}): Loaded<T> {
  const live = options.live ?? true
  const local = options.local ?? false
  const { datacenter, token } = useSession()
  // What the answer is about: another path, filter, datacenter or token is another answer, and what was shown for the
  // old one must go at once (not a previous datacenter's list under this one's error). `version` (the record the
  // view is about changed) and `generation` (reload) ask again but keep what is shown until the answer comes.
  const scope = JSON.stringify([path, query, local ? undefined : datacenter, token])
  const [state, setState] = useState<{ scope: string; data: T | undefined; error: ApiError | undefined; loading: boolean; headers: Headers | undefined }>({ scope, data: undefined, error: undefined, loading: true, headers: undefined })
  const [generation, setGeneration] = useState(0)
  const key = JSON.stringify([scope, live, options.version, generation])
  useEffect(() => {
    if (path === null || token === undefined) return
    const controller = new AbortController()
    const { signal } = controller
    void (async () => {
      let index = 0
      let failures = 0
      while (!signal.aborted) {
        try {
          const asked = Date.now()
          const answer = await request<T>('GET', path, { query: { ...query, ...(index > 0 ? { index, wait: WAIT } : {}) }, signal, local })
          if (signal.aborted) return
          failures = 0
          setState({ scope, data: answer.body, error: undefined, loading: false, headers: answer.headers })
          if (!live || answer.index === 0) return
          // The same index back at once means the endpoint did not wait (it cannot block): never spin on it.
          if (index > 0 && answer.index === index && Date.now() - asked < SPIN_MS) await sleep(SPIN_MS, signal)
          // An index that went backwards (a restored snapshot, another server) starts over rather than waiting forever.
          index = answer.index < index ? 0 : answer.index
        } catch (error) {
          if (signal.aborted) return
          const failure = error instanceof ApiError ? error : new ApiError(0, 'network', String(error))
          const stops = stopsTheLoop(failure)
          // A passing failure (the network, no leader) leaves the last answer shown under the error; one that waiting
          // will not fix (the record is gone, the token may no longer read it) or one for new inputs shows none.
          setState((previous) => {
            const kept = previous.scope === scope && !stops
            return { scope, data: kept ? previous.data : undefined, error: failure, loading: false, headers: kept ? previous.headers : undefined }
          })
          if (stops || !live) return
          failures += 1
          const ceiling = Math.min(BACKOFF_MS_MAX, BACKOFF_MS_MIN * 2 ** (failures - 1))
          await sleep(ceiling / 2 + Math.random() * (ceiling / 2), signal)
        }
      }
    })()
    return () => controller.abort()
  }, [key])
  const reload = (): void => setGeneration((value) => value + 1)
  // Until the new inputs' first answer, nothing of the old ones.
  if (state.scope !== scope) return { data: undefined, error: undefined, loading: true, headers: undefined, reload }
  return { data: state.data, error: state.error, loading: state.loading, headers: state.headers, reload }
}
