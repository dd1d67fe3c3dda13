/**
 * The one way auth methods talk to the outside (JWKS, OIDC discovery, Kubernetes TokenReview): a JSON request with a
 * deadline, a bound on the answer's size, and optionally a private CA. node:http(s) rather than global fetch because
 * fetch cannot be given a CA without undici's dispatcher, which is not a dependency; `ca` on a request replaces the
 * system roots, as Consul's CACert settings do.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { isIP } from 'node:net'
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
  const payload =
    options.form !== undefined
      ? Buffer.from(new URLSearchParams(options.form).toString(), 'utf8')
      : options.body === undefined
        ? undefined
        : Buffer.from(JSON.stringify(options.body), 'utf8')
  const headers: Record<string, string> = { Accept: 'application/json', ...options.headers }
  if (payload !== undefined) headers['Content-Type'] = options.form !== undefined ? 'application/x-www-form-urlencoded' : 'application/json'
  const { status, text } = await requestText(what, url, { ...options, headers, ...(payload === undefined ? {} : { payload }) })
  try {
    return { status, body: JSON.parse(text) as unknown }
  } catch {
    throw new IdentityServiceError(`${what} answered ${status} with a body that is not JSON`, `${what} at ${loggableUrl(url)} answered ${status} with a body that is not JSON`)
  }
}

export interface TextRequest {
  method?: 'GET' | 'POST'
  /** Sent as given: a signed request (aws-iam) must reach the service with exactly the headers it was signed with. */
  headers?: Record<string, string | string[]>
  payload?: Buffer
  caCert?: string
  timeoutMs?: number
  responseBytesMax?: number
}

/** The request as given, and the answer's status, content type and text, bounded like every outbound request. */
export async function requestText(what: string, url: string, options: TextRequest = {}): Promise<{ status: number; contentType: string; text: string }> {
  const target = new URL(url)
  const timeoutMs = options.timeoutMs ?? OUTBOUND_TIMEOUT_MS_DEFAULT
  const bytesMax = options.responseBytesMax ?? OUTBOUND_RESPONSE_BYTES_MAX
  const headers: Record<string, string | string[]> = { ...options.headers }
  if (options.payload !== undefined) headers['Content-Length'] = String(options.payload.length)
  const signal = AbortSignal.timeout(timeoutMs)
  // The TLS name is the host connected to, never a Host header the caller set (a signed aws-iam request keeps the
  // Host it was signed for while it goes to a configured endpoint). An IP address goes without SNI (RFC 6066).
  const servername = isIP(target.hostname.replace(/^\[|\]$/g, '')) === 0 ? target.hostname : ''
  const requestOptions = { method: options.method ?? 'GET', headers, signal }
  try {
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const sent =
        target.protocol === 'https:'
          ? httpsRequest(target, { ...requestOptions, servername, ...(options.caCert === undefined ? {} : { ca: options.caCert }) }, resolve)
          : httpRequest(target, requestOptions, resolve)
      sent.once('error', reject)
      sent.end(options.payload)
    })
    const contentType = String(response.headers['content-type'] ?? '')
    return { status: response.statusCode ?? 0, contentType, text: await readBounded(response, bytesMax) }
  } catch (error) {
    const reason = signal.aborted ? `no answer within ${timeoutMs} ms` : (error as Error).message
    throw new IdentityServiceError(`${what} failed: ${signal.aborted ? reason : 'the connection failed'}`, `${what} at ${loggableUrl(url)} failed: ${reason}`)
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
