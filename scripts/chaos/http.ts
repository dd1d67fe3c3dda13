/**
 * One HTTP request of the chaos workload: bounded by a timeout, and telling apart the failures that prove the request
 * never reached a server (connection refused: safe to count as not applied) from those that do not (a timeout, a reset
 * connection: the write may have been applied).
 */

export type Answer =
  | { kind: 'response'; status: number; body: unknown; text: string }
  | { kind: 'error'; reached: 'no' | 'maybe'; error: string }

export async function request(
  address: string,
  method: string,
  path: string,
  options: { token: string; body?: unknown; timeoutMs: number; signal?: AbortSignal },
): Promise<Answer> {
  const headers: Record<string, string> = { 'X-Service-Token': options.token }
  let body: string | undefined
  if (options.body !== undefined) {
    body = JSON.stringify(options.body)
    headers['Content-Type'] = 'application/json'
  }
  const signals = [AbortSignal.timeout(options.timeoutMs), ...(options.signal === undefined ? [] : [options.signal])]
  try {
    const response = await fetch(`http://${address}${path}`, { method, headers, body, signal: AbortSignal.any(signals) })
    const text = await response.text()
    let parsed: unknown
    try {
      parsed = text === '' ? undefined : JSON.parse(text)
    } catch {
      parsed = undefined // Not JSON: the caller has `text`.
    }
    return { kind: 'response', status: response.status, body: parsed, text }
  } catch (error) {
    return { kind: 'error', reached: neverReached(error) ? 'no' : 'maybe', error: describe(error) }
  }
}

/** Connection refused: nothing listened, so nothing was sent. Everything else may have been sent. */
function neverReached(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string } } | undefined)?.cause
  return cause?.code === 'ECONNREFUSED'
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  const cause = (error as { cause?: { code?: string; message?: string } }).cause
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return error.name
  return cause?.code ?? cause?.message ?? error.message
}
