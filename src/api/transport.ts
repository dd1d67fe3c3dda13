/**
 * One HTTP exchange over node:http or node:https, with a keep-alive agent per client. node:http rather than fetch:
 * Node 20's fetch cannot take a CA or a client certificate without a second copy of undici, and an agent gives the
 * caller (the benchmark) control of how many sockets it opens.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { ConnectionError } from './errors.js'

export interface TlsOptions {
  /** PEM of the CA (or CAs) that signed the server's certificate; the system's CAs when absent. */
  ca?: string | Buffer
  /** PEM of a client certificate and its key, for servers that verify clients. */
  cert?: string | Buffer
  key?: string | Buffer
  /** The name the server's certificate must carry, when it is not the host dialled (Consul's -tls-server-name). */
  serverName?: string
  /** Accept any server certificate. For tests against throwaway certificates only. */
  insecureSkipVerify?: boolean
}

/** Where the server is: `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT` (Consul's -http-addr forms). */
export interface Endpoint {
  secure: boolean
  host: string
  port: number
  /** As given, for messages. */
  text: string
}

export function parseAddress(address: string): Endpoint {
  let rest = address.trim()
  let secure = false
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(rest)
  if (scheme !== null) {
    const name = scheme[1]!.toLowerCase()
    if (name !== 'http' && name !== 'https') throw new Error(`address "${address}": the scheme must be http:// or https://`)
    secure = name === 'https'
    rest = rest.slice(scheme[0].length)
  }
  rest = rest.replace(/\/+$/, '')
  if (rest.includes('/')) throw new Error(`address "${address}": give HOST:PORT without a path`)
  let host: string
  let portText: string | undefined
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(rest)
  if (bracketed !== null) {
    host = bracketed[1]!
    portText = bracketed[2]
  } else {
    const colon = rest.lastIndexOf(':')
    host = colon === -1 ? rest : rest.slice(0, colon)
    portText = colon === -1 ? undefined : rest.slice(colon + 1)
  }
  if (host === '') throw new Error(`address "${address}": the host is missing`)
  const port = portText === undefined ? (secure ? 8501 : 8500) : Number(portText)
  if (!/^\d+$/.test(portText ?? '0') || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new Error(`address "${address}": the port must be a number from 1 to 65535`)
  }
  return { secure, host, port, text: address }
}

export interface Exchange {
  method: string
  /** Path and query string, already encoded. */
  path: string
  headers: Record<string, string>
  body?: string | Buffer
  timeoutMs: number
  signal?: AbortSignal
  /** Answers longer than this are cut off with an error rather than held in memory. */
  responseBytesMax: number
  /** Read the answer's body and drop it: `text` is ''. */
  discardBody?: boolean
  /**
   * Called once the whole request has been handed to the operating system (node:http's 'finish'); again for a GET
   * or HEAD sent again on a fresh connection after its reused socket was reset (Transport.send).
   */
  onSent?: () => void
  /**
   * The request's body as a stream, in place of `body` (PUT /v1/snapshot: an archive of hundreds of MB): written a
   * chunk at a time as the connection takes it, never held whole. It is first read once the connection is up, so a
   * request that fails before then (`reached: 'no'`) leaves it untouched and it may be sent elsewhere; once a chunk
   * has been taken, a failure is `reached: 'maybe'` whatever its cause, since the stream cannot be sent again.
   */
  source?: AsyncIterable<Buffer | Uint8Array>
  /**
   * The source's length: sent as Content-Length (else the body is chunked). A source that yields more or fewer bytes
   * fails the request (reason 'source') rather than sending the server a body other than the one announced.
   */
  sourceBytes?: number
  /**
   * Takes a 2xx answer's body as it arrives instead of holding it (a snapshot of any size): `text` is then ''. The
   * answer waits while a returned promise is pending. Other answers are read as text as usual (their error body).
   */
  sink?: (chunk: Buffer) => void | Promise<void>
}

export interface RawAnswer {
  status: number
  /** Lower-case names, as node:http gives them. */
  headers: IncomingHttpHeaders
  text: string
}

export interface ConnectionOptions {
  tls?: TlsOptions
  /** Sockets open to the server at most; 64 by default. */
  maxSockets?: number
  /** Idle sockets kept open for the next request at most; min(maxSockets, 256) by default. */
  maxFreeSockets?: number
  /** false: every request on a connection of its own, closed after the answer (`Connection: close`). */
  keepAlive?: boolean
  /**
   * How long an idle socket is kept for the next request, when the server does not say (DEFAULT_IDLE_TIMEOUT_MS);
   * a server's `Keep-Alive: timeout=N` shortens it to N less a second. A server closes a connection it kept idle
   * for its own time; a request sent on it as it closes meets a reset, and a write then has an unknown outcome.
   */
  idleTimeoutMs?: number
  /**
   * Opens the connection itself instead of dialing the address (which then only names the server in messages): the
   * agent's in-process exchange with its own HTTP server, for requests forwarded from another datacenter.
   */
  createConnection?: () => Duplex
}

/**
 * An idle socket's time when the server announces none: undici's (Node's fetch) default. A server that announces
 * its time (node:http, warden: `Keep-Alive: timeout=N`) has the socket dropped a second before it would close it
 * (node:http's agent, which applies the hint only when it has a timeout of its own to shorten).
 */
export const DEFAULT_IDLE_TIMEOUT_MS = 4_000

/**
 * Errors that say a reused socket was closed by the server before the request reached it (the server's idle close
 * racing the request), when no answer has begun: Go's net/http sends an idempotent request again on a fresh
 * connection then, and so does this client, for GET and HEAD only (its other methods write).
 */
const STALE_SOCKET = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED'])
const REPLAYABLE = new Set(['GET', 'HEAD'])

/**
 * Sends of one request at most, the first included, when its reused sockets fail (see STALE_SOCKET): each failed
 * socket is gone from the pool, so the next try usually gets a fresh connection.
 */
const SENDS_MAX = 3

/** A failed attempt the transport may send again (see STALE_SOCKET): carries the error to report if it does not. */
class StaleSocket {
  constructor(readonly error: ConnectionError) {}
}

export class Transport {
  readonly endpoint: Endpoint
  private readonly agent: HttpAgent | HttpsAgent
  private readonly createConnection: (() => Duplex) | undefined

  constructor(address: string, options: ConnectionOptions = {}) {
    this.endpoint = parseAddress(address)
    this.createConnection = options.createConnection
    const tls = options.tls ?? {}
    const maxSockets = options.maxSockets ?? 64
    // Without keep-alive, node:http opens a socket per request and closes it after the answer only while maxSockets is
    // unbounded (a bounded agent would queue requests and hand them sockets that are still open).
    const common =
      options.keepAlive === false
        ? { keepAlive: false, maxSockets: Infinity }
        : {
            keepAlive: true,
            maxSockets,
            maxFreeSockets: options.maxFreeSockets ?? Math.min(maxSockets, 256),
            // Set on every socket (at its connect, and again when it goes idle), but the agent destroys only a free
            // socket that times out; on a busy one node:http only emits 'timeout', which nothing here listens to, so
            // a request that waits longer for its answer (a blocking query) is not cut.
            timeout: options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
          }
    this.agent = this.endpoint.secure
      ? new HttpsAgent({
          ...common,
          ...(tls.ca === undefined ? {} : { ca: tls.ca }),
          ...(tls.cert === undefined ? {} : { cert: tls.cert }),
          ...(tls.key === undefined ? {} : { key: tls.key }),
          ...(tls.serverName === undefined ? {} : { servername: tls.serverName }),
          rejectUnauthorized: tls.insecureSkipVerify !== true,
          minVersion: 'TLSv1.2',
        })
      : new HttpAgent(common)
  }

  /** Set by close(): a request whose socket it closed fails, and is never sent again. */
  private closed = false

  /** Closes every socket: idle ones, and those of requests still running (which then fail with a ConnectionError). */
  close(): void {
    this.closed = true
    this.agent.destroy()
  }

  async send(exchange: Exchange): Promise<RawAnswer> {
    const startedAt = Date.now()
    for (let sends = 1; ; sends++) {
      const timeoutMs = Math.max(1, exchange.timeoutMs - (Date.now() - startedAt))
      try {
        return await this.attempt(timeoutMs === exchange.timeoutMs ? exchange : { ...exchange, timeoutMs }, exchange.timeoutMs)
      } catch (error) {
        if (!(error instanceof StaleSocket)) throw error
        // Sent again only while the socket that failed was a reused one (a fresh connection's failure is the
        // answer), not after close(), and within the request's time.
        if (this.closed || sends >= SENDS_MAX || Date.now() - startedAt >= exchange.timeoutMs) throw error.error
      }
    }
  }

  /** One send of the request; `budgetMs`, the whole request's time, for the message when it runs out. */
  private attempt(exchange: Exchange, budgetMs: number): Promise<RawAnswer> {
    const { endpoint } = this
    return new Promise<RawAnswer>((resolve, reject) => {
      // Whether any byte of the request can have reached the server: not before the connection (and its TLS
      // handshake) is up. Decides whether a failure is "never sent" or "outcome unknown".
      let connected = false
      let settled = false
      // Whether a chunk of exchange.source has been taken: the source cannot be sent again after that.
      let sourceTaken = false
      // The source's writer waits here for the connection to take more ('drain'), or to end.
      let wake: (() => void) | undefined
      const wakeSource = (): void => {
        const waiting = wake
        wake = undefined
        waiting?.()
      }
      const fail = (reason: string, message: string, cause?: unknown): void => {
        if (settled) return
        settled = true
        cleanup()
        // A TLS alert refusing our certificate comes after a TLS 1.3 client counts itself connected, but the server
        // sends it before it reads any request: such a request never reached it.
        const reached = (connected && !CERTIFICATE_REFUSED.has(reason)) || sourceTaken ? 'maybe' : 'no'
        reject(new ConnectionError(endpoint.text, reached, reason, message, { cause }))
        wakeSource()
      }
      const headers: Record<string, string | number> = { ...exchange.headers }
      const { source } = exchange
      if (source !== undefined && exchange.body !== undefined) throw new Error('an exchange takes a body or a source, not both')
      if (exchange.body !== undefined) headers['Content-Length'] = Buffer.byteLength(exchange.body)
      // Said outright rather than left to node:http, which chunks only the methods that usually carry a body.
      if (source !== undefined) {
        if (exchange.sourceBytes === undefined) headers['Transfer-Encoding'] = 'chunked'
        else headers['Content-Length'] = exchange.sourceBytes
      }
      const target = { host: endpoint.host, port: endpoint.port, method: exchange.method, path: exchange.path, headers }
      // A connection of the caller's own takes no agent: node:http then uses it for this one request.
      const options = this.createConnection === undefined ? { ...target, agent: this.agent } : { ...target, createConnection: this.createConnection as never }
      const request = endpoint.secure ? httpsRequest(options) : httpRequest(options)
      const timer = setTimeout(() => {
        fail('timeout', `${exchange.method} ${pathOnly(exchange.path)} on ${endpoint.text}: no answer within ${budgetMs} ms`)
        request.destroy()
      }, exchange.timeoutMs)
      const onAbort = (): void => {
        fail('aborted', `${exchange.method} ${pathOnly(exchange.path)} on ${endpoint.text}: aborted`)
        request.destroy()
      }
      exchange.signal?.addEventListener('abort', onAbort, { once: true })
      const cleanup = (): void => {
        clearTimeout(timer)
        exchange.signal?.removeEventListener('abort', onAbort)
      }
      if (exchange.signal?.aborted === true) {
        onAbort()
        return
      }
      if (exchange.onSent !== undefined) request.once('finish', exchange.onSent)
      // Set once an answer begins: the source is then read no further (a server refusing a large body, 403 or 413,
      // answers before reading it), and a body cut short leaves the connection unfit for the next request.
      let answered = false
      let sourceEnded = source === undefined
      const writeSource = async (from: AsyncIterable<Buffer | Uint8Array>): Promise<void> => {
        const stopped = (): boolean => settled || answered || request.destroyed
        const wanted = exchange.sourceBytes
        const where = `${exchange.method} ${pathOnly(exchange.path)} on ${endpoint.text}`
        const refuse = (message: string): void => {
          fail('source', `${where}: ${message}`)
          request.destroy()
        }
        // From the first pull on: a generator that has begun cannot be started again.
        sourceTaken = true
        const chunks = from[Symbol.asyncIterator]()
        let done = false
        try {
          let written = 0
          let next = await chunks.next()
          while (next.done !== true) {
            if (stopped()) return
            const chunk = next.value
            written += chunk.length
            if (wanted !== undefined && written > wanted) return refuse(`the body is longer than the ${wanted} bytes announced`)
            // The chunk that completes the length announced is held until the source is known to end with it: sent
            // first, it would give the server a whole request that is only the start of the body.
            if (wanted !== undefined && written === wanted && chunk.length > 0) {
              const after = await chunks.next()
              if (after.done !== true) return refuse(`the body is longer than the ${wanted} bytes announced`)
              done = true
              if (stopped()) return
              request.write(chunk)
              break
            }
            if (!request.write(chunk)) {
              await new Promise<void>((resolve) => {
                wake = resolve
                request.once('drain', wakeSource)
              })
              request.off('drain', wakeSource)
            }
            if (stopped()) return
            next = await chunks.next()
          }
          done = true
          if (stopped()) return
          if (wanted !== undefined && written !== wanted) return refuse(`the body ended after ${written} of the ${wanted} bytes announced`)
          sourceEnded = true
          request.end()
        } catch (error) {
          done = true
          fail('source', `${where}: reading the body failed: ${(error as Error).message}`, error)
          request.destroy()
        } finally {
          // A source left part-read is closed (a file stream releases its descriptor), as for-await would.
          if (!done) await chunks.return?.().catch(() => undefined)
        }
      }
      request.on('close', wakeSource)
      request.on('socket', (socket: Socket) => {
        // The source is read only from here: a request that never got a connection leaves it as it was.
        const up = (): void => {
          connected = true
          if (source !== undefined && !settled) void writeSource(source)
        }
        if (!socket.connecting) up()
        else socket.once(endpoint.secure ? 'secureConnect' : 'connect', up)
      })
      request.on('error', (error: NodeJS.ErrnoException) => {
        const reason = error.code ?? 'error'
        const message = `${exchange.method} ${pathOnly(exchange.path)} on ${endpoint.text}: ${describe(error)}`
        if (!settled && !answered && request.reusedSocket && STALE_SOCKET.has(reason) && REPLAYABLE.has(exchange.method.toUpperCase()) && source === undefined) {
          settled = true
          cleanup()
          reject(new StaleSocket(new ConnectionError(endpoint.text, 'maybe', reason, message, { cause: error })))
          return
        }
        fail(reason, message, error)
      })
      request.on('response', (response) => {
        answered = true
        wakeSource()
        const chunks: Buffer[] = []
        let size = 0
        const status = response.statusCode ?? 0
        const sink = exchange.sink
        if (exchange.discardBody === true) response.resume()
        else if (sink !== undefined && status >= 200 && status <= 299) {
          response.on('data', (chunk: Buffer) => {
            const taken = sink(chunk)
            if (taken === undefined) return
            response.pause()
            taken.then(
              () => response.resume(),
              (error: unknown) => {
                fail('sink', `${exchange.method} ${pathOnly(exchange.path)} on ${endpoint.text}: ${(error as Error).message}`, error)
                request.destroy()
              },
            )
          })
        } else {
          response.on('data', (chunk: Buffer) => {
            size += chunk.length
            if (size > exchange.responseBytesMax) {
              fail('too_large', `${exchange.method} ${pathOnly(exchange.path)} on ${endpoint.text}: the answer is over ${exchange.responseBytesMax} bytes`)
              request.destroy()
              return
            }
            chunks.push(chunk)
          })
        }
        response.on('error', (error: NodeJS.ErrnoException) => fail(error.code ?? 'error', `${endpoint.text}: the answer broke off: ${describe(error)}`, error))
        response.on('end', () => {
          if (settled) return
          settled = true
          cleanup()
          resolve({ status: response.statusCode ?? 0, headers: response.headers, text: Buffer.concat(chunks).toString('utf8') })
          // An answer before the whole body went (a refusal): the request can never be completed on this connection.
          if (!sourceEnded) request.destroy()
        })
      })
      if (source === undefined) request.end(exchange.body)
    })
  }
}

/** The path without its query string: a query may carry a token (`?token=`), and messages are printed. */
function pathOnly(path: string): string {
  const question = path.indexOf('?')
  return question === -1 ? path : path.slice(0, question)
}

/** The server's TLS alerts refusing the client's certificate (or its absence), as Node names them. */
const CERTIFICATE_REFUSED = new Set([
  'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
  'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
  'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE',
  'ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED',
  'ERR_SSL_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE',
])

function describe(error: NodeJS.ErrnoException): string {
  switch (error.code) {
    case 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED':
      return 'the server requires a client certificate (give -client-cert and -client-key, or WARDEN_CLIENT_CERT and WARDEN_CLIENT_KEY)'
    case 'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA':
    case 'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE':
    case 'ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED':
    case 'ERR_SSL_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE':
      return `the server refused the client certificate: not signed by its CA, expired, or not for clients (${error.code})`
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
      return `the server's certificate is not signed by a CA this client trusts (give the CA with -ca-file) (${error.code})`
    case 'ERR_TLS_CERT_ALTNAME_INVALID':
      return `the server's certificate does not name the host dialed (${error.message}); -tls-server-name server.<dc>.warden checks the name warden's servers carry`
    case 'CERT_HAS_EXPIRED':
      return "the server's certificate has expired"
    case 'ECONNREFUSED':
      return 'connection refused (is the agent running, and is this its HTTP address?)'
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'the host name does not resolve'
    case 'ECONNRESET':
      return 'the connection was reset'
    case 'EPROTO':
      // A plain HTTP server answering a TLS client shows up as a TLS record of a wrong version.
      if (/wrong version number|packet length too long/.test(error.message)) return 'TLS failed: the server does not speak TLS here (is this its HTTPS address, or should the address be http://?)'
      return `TLS failed (${error.message})`
    default:
      return error.message
  }
}
