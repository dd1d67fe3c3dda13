/**
 * The cluster port: one TCP listener (plain, or TLS 1.3 with client certificates required) whose WebSocket upgrades
 * are routed by path to the transport of each kind of link (Raft links inside a datacenter, WAN links between
 * datacenters), so that only this one port needs to be open between servers.
 *
 * What it bounds, before any path is known: TCP connections that have not yet proven the cluster key on some link
 * (pending.ts: at the bound, the oldest connection of the busiest address goes), and connections in all (the
 * server's maxConnections, from what the routes expect plus room for handshakes). A connection that never sends an
 * upgrade request is dropped after the handshake timeout; one that asks for an unknown path is answered 404.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createTlsServer, type Server as HttpsServer } from 'node:https'
import type { AddressInfo, Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { Logger } from 'pino'
import { WebSocketServer, type WebSocket } from 'ws'
import { assert } from '../lib/assert.js'
import { LogLimiter } from '../lib/log-limiter.js'
import { addressGroup, PendingConnections } from './pending.js'
import { PEER_TLS_VERSION, type PeerTlsMaterial } from './tls.js'

/** TCP connections beyond the expected links (two per peer while a duplicate is resolved) and pending handshakes. */
export const CONNECTIONS_SLACK = 16

export interface ListenerOptions {
  listen: { host: string; port: number }
  /** Run the port over TLS 1.3 with mutual verification against this CA (tls.ts). */
  tls?: PeerTlsMaterial
  /** From connect to upgrade (and to TLS established). */
  handshakeTimeoutMs: number
  /** TCP connections not yet authenticated on a link, beyond CONNECTIONS_SLACK. */
  handshakesPendingMax: number
  log: Logger
}

/** What a kind of link registers: its path's upgrades, and how many connections it expects to hold. */
export interface Route {
  readonly maxPayload: number
  accept(ws: WebSocket, request: IncomingMessage): void
  /** Connections its links may hold at once (two per peer while a duplicate is resolved). */
  expectedConnections(): number
}

export class PeerListener {
  readonly address: { host: string; port: number }
  /** Refused TLS handshakes, for the transports' counters (TLS comes before any path, so before any kind). */
  tlsHandshakesFailed = 0
  private readonly routes = new Map<string, { route: Route; wss: WebSocketServer }>()
  /** Invariant: size <= handshakesPendingMax + CONNECTIONS_SLACK (pending.ts says who goes at the bound). */
  private readonly unauthenticated: PendingConnections<Socket>
  /**
   * Accepted TCP sockets by remote address and port, while open: how an accepted TLS socket finds the TCP socket
   * under it (unique per connection to one listener). Bounded by the server's maxConnections.
   */
  private readonly tcpSockets = new Map<string, Socket>()
  private readonly warnings = new LogLimiter()
  private material: PeerTlsMaterial | undefined
  private stopping: Promise<void> | undefined

  private constructor(
    private readonly server: Server | HttpsServer,
    private readonly settings: ListenerOptions,
  ) {
    const bound = server.address() as AddressInfo
    this.address = { host: bound.address, port: bound.port }
    this.unauthenticated = new PendingConnections(settings.handshakesPendingMax + CONNECTIONS_SLACK)
    this.material = settings.tls
  }

  static async start(options: ListenerOptions): Promise<PeerListener> {
    // An HTTP server of our own (rather than ws's) so that stop() can close connections that never upgraded, and so
    // that a connection that sends no upgrade request is dropped after the handshake timeout, not Node's 60 s.
    const serverOptions = {
      headersTimeout: options.handshakeTimeoutMs,
      requestTimeout: options.handshakeTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, options.handshakeTimeoutMs),
    }
    const refuseHttp = (_request: IncomingMessage, response: ServerResponse): void => {
      response.writeHead(426, { connection: 'close' }).end()
    }
    // Over TLS a dialer must present a certificate the CA signed (OpenSSL checks its chain and clientAuth purpose);
    // its name is checked in the handshake, against the datacenter it states (tls.ts).
    const server =
      options.tls === undefined
        ? createServer(serverOptions, refuseHttp)
        : createTlsServer({ ...serverOptions, ...tlsServerOptions(options.tls), handshakeTimeout: options.handshakeTimeoutMs }, refuseHttp)
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(options.listen.port, options.listen.host, () => {
        server.off('error', reject)
        resolve()
      })
    })
    const listener = new PeerListener(server, options)
    listener.updateMaxConnections()
    server.on('connection', (socket: Socket) => listener.onConnection(socket))
    server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => listener.onUpgrade(request, socket, head))
    // A TLS handshake refused (no certificate, another CA, a client-only certificate): a failed handshake like any other.
    server.on('tlsClientError', (error: Error & { code?: string }, socket: Socket) => listener.onTlsError(error, socket))
    return listener
  }

  /** Whether connections to this port run over TLS. */
  get tls(): boolean {
    return this.material !== undefined
  }

  /** The certificates in use, for dials (undefined on a plain port). */
  get tlsMaterial(): PeerTlsMaterial | undefined {
    return this.material
  }

  /** Sends the upgrades of `path` to `route`. One route per path. */
  route(path: string, route: Route): void {
    assert(!this.routes.has(path), `a second route for ${path}`)
    // noServer: the listener routes upgrades by path itself (ws with `server` would answer 400 for other paths).
    // No compression: it would let a small frame inflate past what maxPayload bounds, and costs CPU per frame.
    // No client tracking: the transports track their own links.
    const wss = new WebSocketServer({ noServer: true, maxPayload: route.maxPayload, perMessageDeflate: false, clientTracking: false })
    wss.on('error', (error) => this.settings.log.error({ err: error, path }, 'peer listener error'))
    this.routes.set(path, { route, wss })
    this.updateMaxConnections()
  }

  /** The route of `path` is gone (its transport stopped): its upgrades are answered 404 from now on. */
  unroute(path: string): void {
    const entry = this.routes.get(path)
    if (entry === undefined) return
    this.routes.delete(path)
    entry.wss.close()
    this.updateMaxConnections()
  }

  /**
   * The connection under `requestSocket` proved the cluster key: it leaves the pending bound. Under TLS the request's
   * socket is the TLS socket over the TCP one the bound holds.
   */
  authenticated(requestSocket: Socket): void {
    this.unauthenticated.delete(this.tcpSockets.get(remoteKey(requestSocket)) ?? requestSocket)
  }

  /** Recomputes the ceiling on connections; routes call it when their peer sets change. */
  updateMaxConnections(): void {
    let expected = 0
    for (const { route } of this.routes.values()) expected += route.expectedConnections()
    this.server.maxConnections = expected + 4 * (this.settings.handshakesPendingMax + CONNECTIONS_SLACK)
  }

  /**
   * New certificates (SIGHUP): connections accepted or dialed from now on use them; open links keep the ones they
   * were made with until they close, as a TLS session cannot change its certificate.
   */
  reloadTls(material: PeerTlsMaterial): void {
    assert(this.material !== undefined && 'setSecureContext' in this.server, 'reloadTls on a listener that is not over TLS')
    this.server.setSecureContext(tlsServerOptions(material))
    this.material = material
  }

  /** Closes the port and every connection still on it. The transports close their links first. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      for (const { wss } of this.routes.values()) wss.close()
      this.routes.clear()
      const closed = new Promise<void>((resolve) => this.server.close(() => resolve()))
      // Connections that never sent an upgrade request would otherwise hold server.close() open.
      this.server.closeAllConnections()
      await closed
    })()
    return this.stopping
  }

  /** A new TCP connection: beyond the bound, one unauthenticated connection goes (pending.ts). */
  private onConnection(socket: Socket): void {
    const remote = remoteKey(socket)
    this.tcpSockets.set(remote, socket)
    socket.once('close', () => {
      this.unauthenticated.delete(socket)
      if (this.tcpSockets.get(remote) === socket) this.tcpSockets.delete(remote)
    })
    const evicted = this.unauthenticated.add(socket, addressGroup(socket.remoteAddress))
    if (evicted === undefined) return
    this.warnPending(`${evicted.remoteAddress ?? '?'}:${evicted.remotePort ?? '?'}`)
    evicted.destroy()
  }

  private onUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = (request.url ?? '').split('?', 1)[0] ?? ''
    const entry = this.stopping === undefined ? this.routes.get(path) : undefined
    if (entry === undefined) {
      // Node's server no longer listens for this socket's errors once it is an upgrade's: a reset while the 404 is
      // written would be an uncaught error, and take the process down.
      socket.on('error', () => socket.destroy())
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n')
      return
    }
    entry.wss.handleUpgrade(request, socket, head, (ws) => entry.route.accept(ws, request))
  }

  /** The TLS handshake of an accepted connection failed: counted, and a warning at most once per reason and interval. */
  private onTlsError(error: Error & { code?: string }, socket: Socket): void {
    this.tlsHandshakesFailed += 1
    const remoteAddress = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`
    const reason = error.code ?? error.message
    this.warnings.warn(this.settings.log, `tls ${reason}`, { remoteAddress, reason }, 'peer TLS handshake refused')
  }

  /** Called by a transport too, when its own bound on handshakes evicts one. */
  warnPending(remoteAddress: string): void {
    const { handshakesPendingMax } = this.settings
    this.warnings.warn(this.settings.log, 'too many pending handshakes', { remoteAddress, handshakesPendingMax }, 'too many pending peer handshakes, dropping the oldest of the busiest address')
  }
}

/**
 * The acceptor's TLS options: its certificate, the CA every dialer's certificate must chain to, TLS 1.3, and a
 * certificate required of every dialer (requestCert with rejectUnauthorized: a dialer without one, or with one of
 * another CA, fails the TLS handshake before it can send a byte of WebSocket).
 */
function tlsServerOptions(material: PeerTlsMaterial): { ca: Buffer; cert: Buffer; key: Buffer; minVersion: 'TLSv1.3'; requestCert: true; rejectUnauthorized: true } {
  return { ca: material.ca, cert: material.cert, key: material.key, minVersion: PEER_TLS_VERSION, requestCert: true, rejectUnauthorized: true }
}

/** A connection's remote address and port, the key of `tcpSockets`. */
function remoteKey(socket: Socket): string {
  return `${socket.remoteAddress ?? '?'}|${socket.remotePort ?? '?'}`
}
