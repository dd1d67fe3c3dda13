/**
 * The one way auth methods talk to the outside (JWKS, OIDC discovery, Kubernetes TokenReview): a JSON request with a
 * deadline, a bound on the answer's size, and optionally a private CA. node:http(s) rather than global fetch because
 * fetch cannot be given a CA without undici's dispatcher, which is not a dependency; `ca` on a request replaces the
 * system roots, as Consul's CACert settings do.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { IdentityServiceError, loggableUrl } from './errors.js'

export const OUTBOUND_TIMEOUT_MS_DEFAULT = 10_000
/** JWKS documents, discovery documents and TokenReview answers are a few KiB; 1 MiB is far above any real one. */
export const OUTBOUND_RESPONSE_BYTES_MAX = 1024 * 1024

export interface JsonRequest {
  method?: 'GET' | 'POST'
  headers?: Record<string, string>
  body?: unknown
  /** Sent as application/x-www-form-urlencoded instead of a JSON body (an OAuth token request). */
  form?: Record<string, string>
  /** PEM: the only CA trusted for this request when set. */
  caCert?: string
  timeoutMs?: number
  responseBytesMax?: number
}

export interface JsonResponse {
  status: number
  body: unknown
}

/**
 * Sends the request and parses the answer as JSON whatever its status, so callers can read an API's error object.
 * Throws IdentityServiceError, naming `what` and the URL, when the service cannot be reached in time, answers more
 * than the bound, or answers something that is not JSON.
 */
export async function requestJson(what: string, url: string, options: JsonRequest = {}): Promise<JsonResponse> {
  const target = new URL(url)
  const timeoutMs = options.timeoutMs ?? OUTBOUND_TIMEOUT_MS_DEFAULT
  const bytesMax = options.responseBytesMax ?? OUTBOUND_RESPONSE_BYTES_MAX
  const payload =
    options.form !== undefined
      ? Buffer.from(new URLSearchParams(options.form).toString(), 'utf8')
      : options.body === undefined
        ? undefined
        : Buffer.from(JSON.stringify(options.body), 'utf8')
  const headers: Record<string, string> = { Accept: 'application/json', ...options.headers }
  if (payload !== undefined) {
    headers['Content-Type'] = options.form !== undefined ? 'application/x-www-form-urlencoded' : 'application/json'
    headers['Content-Length'] = String(payload.length)
  }
  const signal = AbortSignal.timeout(timeoutMs)
  const requestOptions = { method: options.method ?? 'GET', headers, signal }
  let text: string
  let status: number
  try {
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const sent =
        target.protocol === 'https:'
          ? httpsRequest(target, options.caCert === undefined ? requestOptions : { ...requestOptions, ca: options.caCert }, resolve)
          : httpRequest(target, requestOptions, resolve)
      sent.once('error', reject)
      sent.end(payload)
    })
    status = response.statusCode ?? 0
    text = await readBounded(response, bytesMax)
  } catch (error) {
    const reason = signal.aborted ? `no answer within ${timeoutMs} ms` : (error as Error).message
    throw new IdentityServiceError(`${what} failed: ${signal.aborted ? reason : 'the connection failed'}`, `${what} at ${loggableUrl(url)} failed: ${reason}`)
  }
  try {
    return { status, body: JSON.parse(text) as unknown }
  } catch {
    throw new IdentityServiceError(`${what} answered ${status} with a body that is not JSON`, `${what} at ${loggableUrl(url)} answered ${status} with a body that is not JSON`)
  }
}

async function readBounded(response: IncomingMessage, bytesMax: number): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of response as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > bytesMax) {
      response.destroy()
      throw new Error(`the answer is larger than ${bytesMax} bytes`)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}
