/**
 * `?dc=X` (issue 19): a request for another datacenter travels as one request over a WAN link to a server of X,
 * which serves it as if it had been sent there (its own routes, consistency modes, blocking queries, ACLs) and sends
 * back status, headers and body unchanged. Only the cluster port needs to be open between datacenters.
 *
 * - The servers of X are tried nearest first (WAN membership's order). A request that provably never reached one
 *   (no link, queue full, refused) goes to the next. One that may have reached it and got no answer (the link broke,
 *   the wait ran out) is retried elsewhere only when it is a read; a write's outcome is then unknown, a 504, never a
 *   success.
 * - X unknown: 404 unknown_datacenter. Known, but no server of it answered: 503 no_path_to_datacenter.
 * - Bounded: bodies as any request's (the caller reads them under the usual limits), answers at most
 *   ANSWER_BYTES_MAX, headers at most HEADERS_MAX, requests in flight by the WAN transport's own bounds both ways.
 */
import type { Logger } from 'pino'
import { WardenError } from '../lib/errors.js'
import { TransportError, type PeerTransport } from '../transport/index.js'
import type { WanMembership } from './wan-membership.js'

/** A forwarded answer's body at most: well within a WAN frame (8 MiB) with its headers. */
export const ANSWER_BYTES_MAX = 6 * 1024 * 1024
/** Request bodies at most (the HTTP layer reads them under its own, lower, limits). */
export const REQUEST_BODY_BYTES_MAX = 1024 * 1024
/**
 * Bytes of forwarded request bodies a server holds at once while serving them (as BODIES_IN_FLIGHT_BYTES_MAX for
 * local ones): the WAN transport bounds requests served (1024), not their size, and each may carry 1 MiB.
 */
export const SERVING_BODY_BYTES_MAX = 64 * 1024 * 1024
const HEADERS_MAX = 64
const HEADER_CHARS_MAX = 16 * 1024
const PATH_CHARS_MAX = 8 * 1024
/** Beyond the request's own wait: the remote server's jitter and the way there and back. */
const FORWARD_SLACK_MS = 30_000
const METHODS = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'OPTIONS'] as const

export interface ForwardedRequest {
  method: string
  /** Path and query, as received (the `dc` parameter included: at X it names X itself). */
  path: string
  headers: Record<string, string>
  body?: Buffer | undefined
}

export interface ForwardedAnswer {
  status: number
  headers: Record<string, string>
  body: Buffer
}

interface ForwardMessage {
  type: 'http.forward'
  request: ForwardedRequest
}

/** Headers that describe one connection, not the request: never forwarded either way. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'content-length'])

export function forwardableHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const kept: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name.toLowerCase())) continue
    kept[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value
  }
  return kept
}

export class DatacenterForwarder {
  /** Invariant: the bytes of the bodies of the forwarded requests being served here, at most servingBodyBytesMax. */
  private servingBodyBytes = 0

  constructor(
    private readonly transport: PeerTransport,
    private readonly membership: WanMembership,
    private readonly log: Logger,
    /** SERVING_BODY_BYTES_MAX unless a test says otherwise. */
    private readonly servingBodyBytesMax = SERVING_BODY_BYTES_MAX,
    /**
     * Datacenters known whether or not a server of theirs has been heard of yet: a secondary's primary, which its
     * settings name. Before the WAN join completes (or while it is cut) it has no path, rather than being unknown.
     */
    private readonly configured: readonly string[] = [],
  ) {}

  /** The datacenters a `?dc` may name. */
  knows(datacenter: string): boolean {
    return this.configured.includes(datacenter) || this.membership.datacenters().includes(datacenter)
  }

  /**
   * The answer of a server of `datacenter`; throws WardenError unknown_datacenter, no_path_to_datacenter or
   * outcome_unknown. `waitMs`: how long the request may take there (a blocking query's wait).
   */
  async forward(datacenter: string, request: ForwardedRequest, waitMs: number): Promise<ForwardedAnswer> {
    if (!this.knows(datacenter)) throw new WardenError('unknown_datacenter', `dc: unknown datacenter ${JSON.stringify(datacenter)}: no server of it has joined this one's WAN`, 'dc')
    const servers = this.membership.serversOf(datacenter).filter((server) => server.connected)
    const read = request.method === 'GET' || request.method === 'HEAD'
    const message: ForwardMessage = { type: 'http.forward', request }
    const failures: string[] = []
    let busy = 0
    for (const server of servers) {
      try {
        const answer = answerOf(await this.transport.request(server.name, message, waitMs + FORWARD_SLACK_MS))
        if (answer === undefined) throw new WardenError('internal', `${server.name} sent an answer that is not one`)
        return answer
      } catch (error) {
        if (!(error instanceof TransportError)) throw error
        failures.push(error.message.startsWith(server.name) ? error.message : `${server.name}: ${error.message}`)
        if (error.code === 'too_many_requests' || error.code === 'queue_full') busy += 1
        if (error.delivered === 'no' || read) continue
        this.log.warn({ datacenter, server: server.name, err: error.message }, 'a write forwarded to another datacenter got no answer')
        throw new WardenError('outcome_unknown', `the write was sent to datacenter ${datacenter} (server ${server.name}) and no answer came back: it may or may not have been applied`)
      }
    }
    // Every server there was reachable but this server's own bounds were full: busy, not cut off (a caller deciding on
    // acl.down_policy must not take this for the datacenter being down).
    if (busy > 0 && busy === failures.length) throw new WardenError('rate_limited', `dc: too many requests in flight to datacenter ${JSON.stringify(datacenter)}; try again`, 'dc')
    const why = failures.length === 0 ? 'no server of it is linked with this one now' : failures.join('; ')
    throw new WardenError('no_path_to_datacenter', `dc: no path to datacenter ${JSON.stringify(datacenter)}: ${why}`, 'dc')
  }

  /** Serves the requests other datacenters forward here with `serve` (the agent's own HTTP stack). */
  serve(serve: (request: ForwardedRequest, from: string) => Promise<ForwardedAnswer>): void {
    this.transport.onRequest(async (from, message) => {
      const request = forwardedRequestOf(message)
      if (request === undefined) throw new WardenError('invalid_input', `${from} forwarded a request that is not one`)
      const bytes = request.body?.length ?? 0
      if (this.servingBodyBytes + bytes > this.servingBodyBytesMax) {
        throw new WardenError('rate_limited', `request: this server holds ${this.servingBodyBytesMax} bytes of bodies forwarded from other datacenters; try again`)
      }
      this.servingBodyBytes += bytes
      try {
        // `serve` keeps its answers within ANSWER_BYTES_MAX (a larger one is a 413 there).
        return await serve(request, from)
      } finally {
        this.servingBodyBytes -= bytes
      }
    })
  }
}

/** A forwarded request as received from a peer, checked, or undefined. */
export function forwardedRequestOf(message: unknown): ForwardedRequest | undefined {
  if (typeof message !== 'object' || message === null || (message as { type?: unknown }).type !== 'http.forward') return undefined
  const request = (message as { request?: unknown }).request
  if (typeof request !== 'object' || request === null) return undefined
  const { method, path, headers, body } = request as Record<string, unknown>
  if (typeof method !== 'string' || !(METHODS as readonly string[]).includes(method)) return undefined
  if (typeof path !== 'string' || !path.startsWith('/v1/') || path.length > PATH_CHARS_MAX) return undefined
  if (body !== undefined && body !== null && !(Buffer.isBuffer(body) || body instanceof Uint8Array)) return undefined
  const bytes = body === undefined || body === null ? undefined : Buffer.from(body as Uint8Array)
  if (bytes !== undefined && bytes.length > REQUEST_BODY_BYTES_MAX) return undefined
  const checked = stringRecord(headers)
  if (checked === undefined) return undefined
  return { method, path, headers: forwardableHeaders(checked), ...(bytes === undefined ? {} : { body: bytes }) }
}

function answerOf(value: unknown): ForwardedAnswer | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const { status, headers, body } = value as Record<string, unknown>
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 100 || status > 599) return undefined
  if (!(Buffer.isBuffer(body) || body instanceof Uint8Array)) return undefined
  const checked = stringRecord(headers)
  if (checked === undefined) return undefined
  return { status, headers: checked, body: Buffer.from(body) }
}

function stringRecord(value: unknown): Record<string, string> | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const entries = Object.entries(value)
  if (entries.length > HEADERS_MAX) return undefined
  const record: Record<string, string> = {}
  for (const [name, text] of entries) {
    if (typeof text !== 'string' || name.length > 256 || text.length > HEADER_CHARS_MAX) return undefined
    record[name] = text
  }
  return record
}
