/**
 * A bound on the HTTP connections one client address holds at once (`limits.http_max_conns_per_client`, 200 by
 * default, as Consul's). The node's own bound on connections (agent/limits.ts) keeps it from running out of file
 * descriptors, but one address could take all of them; this one keeps a client from taking more than its share.
 * Loopback counts like any address: what runs on the node's own host and needs more (the bench, a test parking many
 * blocking queries) raises the limit explicitly.
 *
 * A connection over the limit is answered at once, whatever it sends, with a 429 in the one JSON error shape and
 * Connection: close, and closed: Consul's agent answers such a connection with a 429 too (hashicorp/go-connlimit,
 * HTTPConnStateFuncWithDefault429Handler), in plain text. No request on it reaches a route. The answer is written
 * when the connection is accepted; what the client sends meanwhile is read and dropped until the client closes or
 * REFUSED_LINGER_MS pass, so that its request does not meet a closed socket whose reset destroys the answer before
 * the client reads it. At most REFUSED_LINGERING_MAX refused connections of one address linger at once: past that a
 * refused connection is closed without an answer, so a flood of connections from one address holds no more than
 * the limit and that many.
 *
 * On HTTPS the limit is applied to the TCP connection, before TLS: there is no way to answer in HTTP before the TLS
 * handshake, and doing one for a connection about to be refused would spend the CPU the limit is meant to protect. A
 * refused HTTPS connection is closed at once.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Logger } from 'pino'
import { LogLimiter } from '../lib/log-limiter.js'
import { errorBody, STATUS_BY_CODE } from './errors.js'

export const REFUSED_LINGER_MS = 1_000
export const REFUSED_LINGERING_MAX = 16

/** Set on a connection refused here: requests parsed on it are dropped, never answered by a route. */
const REFUSED = Symbol('warden.refusedConnection')
type Marked = Socket & { [REFUSED]?: true }

/** The client's address, IPv4 written one way whether the listener is IPv4 or dual-stack (::ffff:127.0.0.1). */
function clientOf(socket: Socket): string | undefined {
  const address = socket.remoteAddress
  if (address === undefined) return undefined
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice('::ffff:'.length) : address
}

function refusal(perClientMax: number): Buffer {
  const body = JSON.stringify(
    errorBody('rate_limited', `connection: this client already holds ${perClientMax} connections to this node (limits.http_max_conns_per_client); close some or reuse them`),
  )
  return Buffer.from(`HTTP/1.1 ${STATUS_BY_CODE.rate_limited} Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`)
}

/** Counts of something per client address, the entry dropped at zero so that the map holds only live clients. */
class PerClient {
  private readonly counts = new Map<string, number>()
  get(client: string): number {
    return this.counts.get(client) ?? 0
  }
  add(client: string, delta: number): void {
    const next = this.get(client) + delta
    if (next <= 0) this.counts.delete(client)
    else this.counts.set(client, next)
  }
}

/**
 * Applies the limit to `server`'s connections; `perClientMax` 0 applies none. Registered before Node's HTTP listener,
 * so a connection is counted or refused before anything is parsed on it.
 */
export function limitConnectionsPerClient(server: Server, perClientMax: number, log: Logger, onRefused?: (client: string) => void, secure = false): void {
  if (perClientMax === 0) return
  const open = new PerClient()
  const lingering = new PerClient()
  const answer = refusal(perClientMax)
  const logged = new LogLimiter()
  server.prependListener('connection', (socket: Marked) => {
    const client = clientOf(socket)
    // Gone before it was seen: Node's own listener disposes of it.
    if (client === undefined) return
    if (open.get(client) < perClientMax) {
      open.add(client, 1)
      socket.once('close', () => open.add(client, -1))
      return
    }
    socket[REFUSED] = true
    // One key for every client: addresses are the caller's to choose from, lines per address could flood the log.
    logged.warn(log, 'connections per client', { client, limit: perClientMax }, 'refused a connection: the client holds the most connections allowed per client')
    onRefused?.(client)
    if (secure || lingering.get(client) >= REFUSED_LINGERING_MAX) {
      socket.destroy()
      return
    }
    lingering.add(client, 1)
    const timer = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS)
    socket.once('close', () => {
      clearTimeout(timer)
      lingering.add(client, -1)
    })
    socket.end(answer)
  })
}

/** The request handler, but for requests on a refused connection: their bodies are dropped and nothing answers them. */
export function skipRefusedConnections(handler: (request: IncomingMessage, response: ServerResponse) => void): (request: IncomingMessage, response: ServerResponse) => void {
  return (request, response) => {
    if ((request.socket as Marked)[REFUSED] === true) {
      request.resume()
      return
    }
    handler(request, response)
  }
}
