/**
 * Peer links between warden nodes: one authenticated WebSocket per pair of nodes, carrying msgpack frames, with a
 * bounded send queue per peer and request/response on the same connection.
 *
 * What it promises to the Raft driver (which tolerates loss, duplication and reordering across reconnects):
 * - Messages to one peer leave in the order `send` accepted them, on one link at a time. A message may be lost:
 *   when the peer's queue is full (send returns false), and when the link is lost or a dial fails (whatever was
 *   still queued is dropped, since it would be stale by the time a reconnect succeeds).
 * - Nothing from a connection is delivered before it has passed the handshake (handshake.ts), and the `from` given
 *   to handlers is the node name proven there, never an address. After the handshake every frame is sealed (seal.ts):
 *   nobody on the path can read, alter, replay, reorder or move one; one that fails to open closes its link, which
 *   the transport redials as after any loss.
 * - Everything is bounded: frame size, queued frames and bytes per peer, socket buffer before queueing, requests in
 *   flight each way, pending inbound handshakes (pending.ts: a flood of them cannot crowd out a real peer's). When a
 *   bound is hit the caller is told (false, a typed error, a `rate_limited` answer) and nothing grows.
 *
 * Threading: all methods are called from the one event loop; handlers run synchronously inside socket events, so a
 * handler that throws is a bug and takes the process down (STYLE.md: broken invariants crash the node).
 */
import { randomInt } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import type { Logger } from 'pino'
import { WebSocket } from 'ws'
import { assert } from '../lib/assert.js'
import { Backoff, type BackoffOptions } from '../lib/backoff.js'
import { BoundedQueue } from '../lib/bounded-queue.js'
import { clusterAddressProblem } from '../lib/cluster-address.js'
import { errorFromWire, InvalidInputError, WardenError, type WireError } from '../lib/errors.js'
import { LogLimiter } from '../lib/log-limiter.js'
import { TransportError, type Delivery, type TransportErrorCode } from './errors.js'
import {
  ADDRESS_CHARS_MAX,
  datacenterOfWanName,
  encodeFrame,
  HANDSHAKE_FRAME_BYTES_MAX,
  isDatacenter,
  isNodeName,
  LINK_KINDS,
  LINK_PATHS,
  type DataFrame,
  type LinkKind,
} from './frames.js'
import { ACCEPT_KEYS_MAX, ClusterKeys } from './handshake.js'
import { CloseCode, Link, type LinkHost } from './link.js'
import { addressGroup, PendingConnections } from './pending.js'
import { PeerListener, type Route } from './listener.js'
import { SEAL_TAG_BYTES } from './seal.js'
import { PEER_TLS_VERSION, type PeerTlsMaterial } from './tls.js'
import { serverName } from '../lib/tls-names.js'

/** The HTTP path of the peer endpoint; any other upgrade request is answered 400 by ws. */
export const PEER_PATH = LINK_PATHS.raft

export interface TransportOptions {
  nodeName: string
  /** The cluster address this node advertises to its peers (carried, and proven, in the handshake). */
  advertiseAddress: string
  /** This node's datacenter, carried (and proven) in the handshake: a Raft link refuses a peer of another. */
  datacenter: string
  /**
   * For 'wan' links: the most peers this node links with (its own datacenter's servers included). The peer set of
   * a WAN transport is open: any server that proves the key (and, under TLS, holds a server certificate of the
   * datacenter its NODE.DC name says) is adopted as a peer while there is room, and `introduce` dials an address
   * without knowing whom it will reach. Default 512.
   */
  peersMax?: number
  /** The kind of link this transport serves and dials (frames.ts LinkKind). Default 'raft'. */
  linkKind?: LinkKind
  /**
   * The shared cluster key; required as soon as there is any peer. This node proves with it, and the keys that seal
   * its links derive from it (or from an accepted key a peer proved with).
   */
  clusterKey: string | undefined
  /**
   * Keys accepted from a dialing peer besides clusterKey, for rotation (handshake.ts): a link whose dialer proved
   * with one of them is sealed under it. At most 8. Default none.
   */
  acceptKeys?: readonly string[]
  /**
   * Run every link over TLS 1.3 with mutual verification against this CA (tls.ts), instead of sealing frames under the
   * cluster key. All nodes of a cluster must agree: a plain node and a TLS node cannot link. `reloadTls` replaces the
   * certificates for the connections made after it.
   */
  tls?: PeerTlsMaterial
  /**
   * Leaves frames after the handshake unsealed, for the benchmark's measure of what sealing costs; never for use.
   * Such a node links only with nodes as unsealed as itself. Ignored with tls.
   */
  unsealedForBenchmark?: boolean
  /**
   * Where to listen, on a port of this transport's own (port 0 picks a free port; the bound one is
   * `PeerTransport.address`). Or `listener`: a cluster port shared with the transports of other kinds of link, which
   * then also decides TLS (its `tls`, not this one's) and which the caller stops after the transports.
   */
  listen?: { host: string; port: number }
  listener?: PeerListener
  /** Node name to the host:port to dial it at (which may be a proxy in front of it). This node's own name is ignored. */
  peers: Map<string, string>
  /** Largest frame sent or accepted (the WebSocket maxPayload). Default 8 MiB. */
  frameBytesMax?: number
  /** Frames queued per peer while its socket is busy or connecting. Default 4096. */
  sendQueueFramesMax?: number
  /** Bytes queued per peer; at least frameBytesMax. Default 4 * frameBytesMax. */
  sendQueueBytesMax?: number
  /** Bytes in a socket's buffer above which frames wait in the queue instead. Default 1 MiB. */
  socketBufferedBytesMax?: number
  /** Requests this node waits on, all peers together. Default 1024. */
  requestsInFlightMax?: number
  /** Requests from peers this node's handler works on at once; more are answered `rate_limited`. Default 1024. */
  requestsServingMax?: number
  /** Inbound connections not yet authenticated; more are closed at once. Default 32. */
  handshakesPendingMax?: number
  /** From connect to authenticated, either side. Default 5000 ms. */
  handshakeTimeoutMs?: number
  /** Ping period of an open link; a link silent for 3 periods is closed. Default 1000 ms. */
  keepaliveIntervalMs?: number
  /** Redial delays. Default { initialMs: 50, maxMs: 2000, jitter: 0.5 }. */
  backoff?: Partial<BackoffOptions>
  log: Logger
  /** The jitter source, in [0, 1). Default node:crypto. Handshake nonces always come from node:crypto. */
  random?: () => number
}

export interface PeerStats {
  /** The address dialed. */
  address: string
  connected: boolean
  /** Which side dialed the open link (for checking that both ends keep the same one). */
  linkRole: 'dialer' | 'acceptor' | undefined
  /** The address the peer advertised in its last handshake. */
  advertiseAddress: string | undefined
  queueFrames: number
  queueBytes: number
  socketBufferedBytes: number
  /** Frames refused (queue full) or dropped (queued when the link was lost or a dial failed). */
  framesDropped: number
  /** Sealed frames from this peer's links that failed to open (each closed its link). */
  framesRejected: number
  /** The open link's smoothed round-trip time in ms (keepalive pings); undefined before its first pong. */
  rttMs: number | undefined
}

export interface TransportStats {
  peers: Map<string, PeerStats>
  linksOpen: number
  handshakesPending: number
  /** Handshakes refused by this node or by the other side. */
  handshakesFailed: number
  /** Frames refused because they encoded larger than frameBytesMax. */
  framesOversized: number
  /** Sealed frames that failed to open, on any link: altered, replayed, reordered or from another link. */
  framesRejected: number
  requestsInFlight: number
  requestsServing: number
}

export type MessageHandler = (from: string, message: unknown) => void
export type RequestHandler = (from: string, message: unknown) => Promise<unknown>
export type PeerStateHandler = (peer: string, connected: boolean) => void

interface Settings {
  frameBytesMax: number
  sendQueueFramesMax: number
  sendQueueBytesMax: number
  socketBufferedBytesMax: number
  requestsInFlightMax: number
  requestsServingMax: number
  handshakesPendingMax: number
  handshakeTimeoutMs: number
  keepaliveIntervalMs: number
  peersMax: number
  backoff: BackoffOptions
}

const MiB = 1024 * 1024
/**
 * A socket buffer mark below this could be held up by control frames alone (pings, pongs), which have no write
 * callback to resume the queue; data frames above it always have one pending.
 */
const SOCKET_BUFFERED_BYTES_MAX_MIN = 16 * 1024
/** Bytes an accepted connection may send after its upgrade and before its proof: a few handshake frames, with room. */
const PROOF_BYTES_MAX = 16 * HANDSHAKE_FRAME_BYTES_MAX

interface OutFrame {
  bytes: Buffer
  /** Set on request frames, so a request that expired while queued is never sent. */
  requestId: number | undefined
}

interface Peer {
  readonly name: string
  address: string
  /** Invariant: undefined, or a link in state 'open' whose peer is `name`. At most one per peer. */
  link: Link | undefined
  /** Our outbound connection attempt, still in its handshake. */
  dialing: Link | undefined
  /**
   * The link the peer just closed as a duplicate while our own dial to it was under way: the peer keeps that dial's
   * link, so the loss is not reported (nor the queue dropped) unless the dial fails. Only set while `dialing` is.
   */
  handover: Link | undefined
  dialTimer: NodeJS.Timeout | undefined
  readonly backoff: Backoff
  readonly queue: BoundedQueue<OutFrame>
  framesDropped: number
  framesRejected: number
  /** Whether the last send was refused: the warning is logged once per run of refusals, not per frame. */
  refusing: boolean
}

interface PendingRequest {
  readonly peer: string
  readonly resolve: (value: unknown) => void
  readonly reject: (error: Error) => void
  readonly timer: NodeJS.Timeout
  /** The link the request was written to; undefined while it waits in the queue (so never delivered). */
  writtenOn: Link | undefined
}

export class PeerTransport implements Route {
  readonly address: { host: string; port: number }
  private readonly peers = new Map<string, Peer>()
  /** Every link not yet closed, in any state: what stop() must close. Bounded by the server's maxConnections. */
  private readonly links = new Set<Link>()
  /** Inbound links still in their handshake. Invariant: size <= handshakesPendingMax (see pending.ts for who goes). */
  private readonly inboundHandshakes: PendingConnections<Link>
  /** An accepted link's socket, released from the listener's pending bound once the link proves the key. */
  private readonly socketOf = new Map<Link, Socket>()
  /** Stops counting what an accepted link's socket sent before it proved the key (countBeforeProof). */
  private readonly stopCounting = new Map<Link, () => void>()
  /** WAN dials by address (introduce) not yet settled: settled when the link opens or closes. */
  private readonly introductions = new Map<Link, { resolve: (name: string) => void; reject: (error: Error) => void }>()
  /** Invariant: size <= requestsInFlightMax. */
  private readonly requests = new Map<number, PendingRequest>()
  private requestIdNext = 1
  private requestsServing = 0
  private handshakesFailed = 0
  private framesOversized = 0
  private framesRejected = 0
  private stopping: Promise<void> | undefined
  private messageHandler: MessageHandler | undefined
  private requestHandler: RequestHandler | undefined
  private peerStateHandler: PeerStateHandler | undefined
  private readonly host: LinkHost
  /** Bounds the warning about dropped pending handshakes (anyone reaching the peer port can cause it). */
  private readonly pendingWarnings = new LogLimiter()
  /** Bounds the warning about a peer skipped for its address: setPeers runs again on every membership change. */
  private readonly peerWarnings = new LogLimiter()

  private constructor(
    private readonly nodeName: string,
    advertiseAddress: string,
    identity: { datacenter: string; linkKind: LinkKind; keys: ClusterKeys | undefined; tls: boolean; unsealed: boolean },
    private readonly settings: Settings,
    private readonly listener: PeerListener,
    /** Whether this transport started the listener, and so stops it. */
    private readonly ownsListener: boolean,
    private readonly log: Logger,
    private readonly random: () => number,
  ) {
    this.address = listener.address
    this.inboundHandshakes = new PendingConnections(settings.handshakesPendingMax)
    this.host = {
      nodeName,
      advertiseAddress,
      ...identity,
      handshakeTimeoutMs: settings.handshakeTimeoutMs,
      keepaliveIntervalMs: settings.keepaliveIntervalMs,
      log,
      warnings: new LogLimiter(),
      isPeer: (name) => this.admits(name),
      shouldKeep: (link) => this.shouldKeep(link),
      onOpen: (link) => this.onOpen(link),
      onFrame: (link, frame) => this.onFrame(link, frame),
      onHandshakeFailed: () => (this.handshakesFailed += 1),
      onFrameRejected: (link) => this.onFrameRejected(link),
      onClose: (link) => this.onClose(link),
    }
  }

  static async start(options: TransportOptions): Promise<PeerTransport> {
    const settings = resolveSettings(options)
    if (!isNodeName(options.nodeName)) throw new InvalidInputError('nodeName', 'must be a string of 1 to 128 characters')
    if (options.advertiseAddress.length > ADDRESS_CHARS_MAX) {
      throw new InvalidInputError('advertiseAddress', `must be at most ${ADDRESS_CHARS_MAX} characters`)
    }
    if (options.clusterKey === '') throw new InvalidInputError('clusterKey', 'must not be empty')
    if (!isDatacenter(options.datacenter)) throw new InvalidInputError('datacenter', 'must be a string of 1 to 64 characters')
    const linkKind = options.linkKind ?? 'raft'
    if (!LINK_KINDS.includes(linkKind)) throw new InvalidInputError('linkKind', `must be one of ${LINK_KINDS.join(', ')}`)
    if (linkKind === 'wan' && datacenterOfWanName(options.nodeName) !== options.datacenter) {
      throw new InvalidInputError('nodeName', `a wan link's node name must be NODE.${options.datacenter}`)
    }
    const acceptKeys = options.acceptKeys ?? []
    if (acceptKeys.length > ACCEPT_KEYS_MAX) throw new InvalidInputError('acceptKeys', `must hold at most ${ACCEPT_KEYS_MAX} keys`)
    if (acceptKeys.some((key) => typeof key !== 'string' || key === '')) throw new InvalidInputError('acceptKeys', 'must not hold an empty key')
    if (acceptKeys.length > 0 && options.clusterKey === undefined) throw new InvalidInputError('acceptKeys', 'needs a clusterKey to prove with')
    // The peers given at start are the agent's own settings: a bad one is refused here, where the operator sees it,
    // while setPeers (fed later from replicated state too) skips one instead.
    for (const [name, address] of options.peers) {
      const problem = name === options.nodeName ? undefined : peerProblem(name, address)
      if (problem !== undefined) throw new InvalidInputError('peers', problem)
    }
    const keys = options.clusterKey === undefined ? undefined : new ClusterKeys(options.clusterKey, acceptKeys)
    const log = transportLogger(options.log, options.nodeName)

    if ((options.listen === undefined) === (options.listener === undefined)) throw new InvalidInputError('listen', 'give either listen or listener')
    const listener =
      options.listener ??
      (await PeerListener.start({
        listen: options.listen!,
        ...(options.tls === undefined ? {} : { tls: options.tls }),
        handshakeTimeoutMs: settings.handshakeTimeoutMs,
        handshakesPendingMax: settings.handshakesPendingMax,
        log,
      }))
    const random = options.random ?? cryptoRandom
    const unsealed = !listener.tls && options.unsealedForBenchmark === true
    const identity = { datacenter: options.datacenter, linkKind, keys, tls: listener.tls, unsealed }
    const transport = new PeerTransport(options.nodeName, options.advertiseAddress, identity, settings, listener, options.listener === undefined, log, random)
    listener.route(LINK_PATHS[linkKind], transport)
    const listening = { address: transport.address, advertiseAddress: options.advertiseAddress, datacenter: options.datacenter, linkKind, acceptKeys: acceptKeys.length }
    if (unsealed) log.warn(listening, 'peer transport listening with UNSEALED links: anyone on the path can read and forge frames; for benchmarks only')
    else log.info(listening, listener.tls ? 'peer transport listening (links over TLS 1.3)' : 'peer transport listening (links sealed)')
    try {
      transport.setPeers(options.peers)
    } catch (error) {
      await transport.stop()
      throw error
    }
    return transport
  }

  /**
   * New certificates (SIGHUP): connections accepted or dialed from now on use them; open links keep the ones they
   * were made with until they close, as a TLS session cannot change its certificate.
   */
  reloadTls(material: PeerTlsMaterial): void {
    this.listener.reloadTls(material)
  }

  /** Route: the largest WebSocket message: a sealed frame is its plaintext (at most frameBytesMax) and a tag. */
  get maxPayload(): number {
    return this.settings.frameBytesMax + SEAL_TAG_BYTES
  }

  /** Route: two connections per peer while a duplicate link is resolved. */
  expectedConnections(): number {
    return 2 * this.peers.size
  }

  /** Handlers are replaced, not added: there is one driver. */
  onMessage(handler: MessageHandler): void {
    this.messageHandler = handler
  }

  onRequest(handler: RequestHandler): void {
    this.requestHandler = handler
  }

  /**
   * Called when a peer gains its (one) link or loses it; a replaced duplicate does not count as a loss. Only changes
   * after the handler is set are reported: links that opened before (start() dials the peers given) show in stats().
   */
  onPeerState(handler: PeerStateHandler): void {
    this.peerStateHandler = handler
  }

  /**
   * Queues `message` for `to`. False when `to` is not a peer, when its queue is full, when the message encodes
   * larger than frameBytesMax, or after stop(). True does not mean delivered: see the file comment.
   *
   * The message travels as msgpack (msgpackr without records): plain objects, arrays, strings, numbers, booleans,
   * null, undefined and Buffers arrive as sent; a Map arrives as a plain object, a class instance as its fields.
   */
  send(to: string, message: unknown): boolean {
    if (this.stopping !== undefined) return false
    const peer = this.peers.get(to)
    if (peer === undefined) return false
    const bytes = this.encode({ type: 'message', payload: message }, to)
    if (bytes === undefined) return false
    return this.enqueue(peer, { bytes, requestId: undefined })
  }

  /**
   * Sends `message` as a request and resolves with the peer's answer. Rejects with the WardenError the peer's
   * handler threw (rebuilt from { code, message, field }), or with a TransportError whose `delivered` says whether
   * the peer may have seen the request.
   */
  request(to: string, message: unknown, timeoutMs: number): Promise<unknown> {
    assert(Number.isFinite(timeoutMs) && timeoutMs > 0, 'request timeoutMs must be a positive number')
    return new Promise((resolve, reject) => {
      const refuse = (code: TransportErrorCode, text: string): void => reject(new TransportError(code, to, 'no', text))
      if (this.stopping !== undefined) return refuse('stopped', 'the transport is stopped')
      const peer = this.peers.get(to)
      if (peer === undefined) return refuse('unknown_peer', 'not a peer')
      const { requestsInFlightMax } = this.settings
      if (this.requests.size >= requestsInFlightMax) return refuse('too_many_requests', `${requestsInFlightMax} requests already in flight`)
      const id = this.requestIdNext++
      const bytes = this.encode({ type: 'request', id, payload: message }, to)
      if (bytes === undefined) return refuse('frame_too_large', `request larger than ${this.settings.frameBytesMax} bytes`)
      const timer = setTimeout(() => this.expire(id), timeoutMs)
      this.requests.set(id, { peer: to, resolve, reject, timer, writtenOn: undefined })
      if (!this.enqueue(peer, { bytes, requestId: id })) {
        clearTimeout(timer)
        this.requests.delete(id)
        refuse('queue_full', 'send queue full')
      }
    })
  }

  /**
   * Replaces the peer set. Removed peers lose their link, queue and requests; new peers are dialed at once; a peer
   * whose address changed keeps an open link (identity is its name) and is redialed at the new address otherwise.
   *
   * The addresses may come from replicated state (the member table a joining server's entry wrote), and applying a
   * committed entry must never throw for what a peer sent: that would stop every node, and again at each restart.
   * So a peer whose name or address is not valid is skipped with a rate-limited warning; one already known keeps
   * its last valid address. The agent's own --peer settings are refused, not skipped, in start().
   */
  setPeers(peers: Map<string, string>): void {
    assert(this.stopping === undefined, 'setPeers after stop')
    const wanted = new Map([...peers].filter(([name]) => name !== this.nodeName))
    if (wanted.size > 0 && this.host.keys === undefined) {
      throw new InvalidInputError('clusterKey', 'required when the cluster has other nodes')
    }
    const usable = new Map<string, string>()
    for (const [name, address] of wanted) {
      const problem = peerProblem(name, address)
      if (problem === undefined) {
        usable.set(name, address)
        continue
      }
      const peer = name.slice(0, 140)
      const kept = this.peers.get(name)?.address
      this.peerWarnings.warn(this.log, `skipped peer\u0000${peer}`, { peer, problem, ...(kept === undefined ? {} : { kept }) }, 'peer skipped: its name or address is not valid')
    }
    for (const peer of [...this.peers.values()]) if (!wanted.has(peer.name)) this.removePeer(peer)
    for (const [name, address] of usable) {
      const peer = this.peers.get(name)
      if (peer === undefined) this.addPeer(name, address)
      else if (peer.address !== address) this.readdress(peer, address)
    }
    this.listener.updateMaxConnections()
  }

  stats(): TransportStats {
    const peers = new Map<string, PeerStats>()
    for (const peer of this.peers.values()) {
      peers.set(peer.name, {
        address: peer.address,
        connected: peer.link !== undefined,
        linkRole: peer.link?.role,
        advertiseAddress: peer.link?.peerAdvertiseAddress,
        queueFrames: peer.queue.length,
        queueBytes: peer.queue.totalSize,
        socketBufferedBytes: peer.link?.bufferedBytes ?? 0,
        framesDropped: peer.framesDropped,
        framesRejected: peer.framesRejected,
        rttMs: peer.link?.rttMs,
      })
    }
    return {
      peers,
      linksOpen: [...this.links].filter((link) => link.state === 'open').length,
      handshakesPending: this.inboundHandshakes.size,
      // TLS refusals come before any path: on a shared port they count for every kind of link.
      handshakesFailed: this.handshakesFailed + this.listener.tlsHandshakesFailed,
      framesOversized: this.framesOversized,
      framesRejected: this.framesRejected,
      requestsInFlight: this.requests.size,
      requestsServing: this.requestsServing,
    }
  }

  /** Closes every link and the listener, rejects waiting requests, clears every timer. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown()
    return this.stopping
  }

  private async shutdown(): Promise<void> {
    for (const peer of this.peers.values()) {
      clearTimeout(peer.dialTimer)
      peer.dialTimer = undefined
    }
    this.rejectRequests(() => true, 'stopped', 'the transport stopped')
    const links = [...this.links]
    for (const link of links) link.close(CloseCode.stopping, 'stopping')
    // Each link destroys its socket after a short grace if the peer does not answer the close, so this is bounded.
    await Promise.all(links.map((link) => link.closed))
    this.listener.unroute(LINK_PATHS[this.host.linkKind])
    if (this.ownsListener) await this.listener.stop()
    this.log.info('peer transport stopped')
  }

  private addPeer(name: string, address: string, options: { dial: boolean } = { dial: true }): Peer {
    const sizeOf = (frame: OutFrame): number => frame.bytes.length
    const peer: Peer = {
      name,
      address,
      link: undefined,
      dialing: undefined,
      handover: undefined,
      dialTimer: undefined,
      backoff: new Backoff(this.settings.backoff, this.random),
      queue: new BoundedQueue(this.settings.sendQueueFramesMax, this.settings.sendQueueBytesMax, sizeOf),
      framesDropped: 0,
      framesRejected: 0,
      refusing: false,
    }
    this.peers.set(name, peer)
    this.log.info({ peer: name, address }, 'peer added')
    if (options.dial) this.dial(peer)
    return peer
  }

  /**
   * Whether `name` may have a link: a peer, or on a WAN transport any NODE.DC name while there is room (the key,
   * and under TLS the certificate, are proven before the link opens).
   */
  private admits(name: string): boolean {
    if (this.peers.has(name)) return true
    if (this.host.linkKind !== 'wan' || name === this.nodeName || !isNodeName(name) || datacenterOfWanName(name) === undefined) return false
    return this.peers.size < this.settings.peersMax
  }

  private removePeer(peer: Peer): void {
    // Deleted first: the close events that follow then find no peer (or a new one of the same name) and do nothing.
    this.peers.delete(peer.name)
    clearTimeout(peer.dialTimer)
    peer.dialTimer = undefined
    // Every link of that name: the current one, our dial, a replaced one still draining, inbound handshakes.
    for (const link of this.links) if (link.peer === peer.name) link.close(CloseCode.removed, 'removed from the peer set')
    this.rejectRequests((request) => request.peer === peer.name, 'unknown_peer', 'removed from the peer set')
    this.dropQueue(peer)
    this.log.info({ peer: peer.name }, 'peer removed')
    if ((peer.link ?? peer.handover) !== undefined) this.peerStateHandler?.(peer.name, false)
  }

  private readdress(peer: Peer, address: string): void {
    this.log.info({ peer: peer.name, address, previousAddress: peer.address }, 'peer address changed')
    peer.address = address
    if (peer.link !== undefined) return
    const dialing = peer.dialing
    peer.dialing = undefined
    dialing?.close(CloseCode.removed, 'peer address changed')
    clearTimeout(peer.dialTimer)
    peer.dialTimer = undefined
    this.dial(peer)
  }

  private dial(peer: Peer): void {
    peer.dialTimer = undefined
    if (this.stopping !== undefined || peer.link !== undefined || peer.dialing !== undefined || this.peers.get(peer.name) !== peer) return
    const link = new Link(this.connect(peer.address), 'dialer', peer.address, this.host, peer.name)
    peer.dialing = link
    this.links.add(link)
  }

  private connect(address: string): WebSocket {
    const tls = this.listener.tlsMaterial
    return new WebSocket(`${tls === undefined ? 'ws' : 'wss'}://${address}${LINK_PATHS[this.host.linkKind]}`, {
      maxPayload: this.settings.frameBytesMax + SEAL_TAG_BYTES,
      perMessageDeflate: false,
      handshakeTimeout: this.settings.handshakeTimeoutMs,
      ...(tls === undefined ? {} : this.tlsDialOptions(tls)),
    })
  }

  /**
   * WAN links only: dials `address` without knowing whom it will reach (`--join-wan`), and resolves with the name of
   * the server that answered once it is a peer with an open link (this one, or one it already had). Rejects when the
   * dial fails or the handshake is refused; the caller retries. A server adopted this way is dialed again at this
   * address after a loss, like any peer.
   */
  introduce(address: string): Promise<string> {
    assert(this.host.linkKind === 'wan', 'introduce on a transport whose links are not wan links')
    return new Promise((resolve, reject) => {
      if (this.stopping !== undefined) return reject(new TransportError('stopped', address, 'no', 'the transport is stopped'))
      const problem = clusterAddressProblem(address)
      if (problem !== undefined) return reject(new InvalidInputError('address', problem))
      const link = new Link(this.connect(address), 'dialer', address, this.host)
      this.links.add(link)
      this.introductions.set(link, { resolve, reject })
    })
  }

  /**
   * A dial's TLS options: this node's certificate (it acts as a TLS client), the CA, TLS 1.3, and the name of a
   * server of this datacenter for SNI. The certificate's name is checked in the handshake against the datacenter the
   * acceptor states (tls.ts), so OpenSSL's own host check, which would compare it with the address dialed, is off.
   */
  private tlsDialOptions(material: PeerTlsMaterial): Record<string, unknown> {
    return {
      ca: material.ca,
      cert: material.cert,
      key: material.key,
      minVersion: PEER_TLS_VERSION,
      rejectUnauthorized: true,
      servername: serverName(this.host.datacenter),
      checkServerIdentity: () => undefined,
    }
  }

  private scheduleDial(peer: Peer): void {
    if (this.stopping !== undefined || peer.link !== undefined || peer.dialing !== undefined || peer.dialTimer !== undefined) return
    peer.dialTimer = setTimeout(() => this.dial(peer), peer.backoff.next())
  }

  /** Route: an upgraded connection on this kind's path; its handshake starts. */
  accept(ws: WebSocket, request: IncomingMessage): void {
    const remoteAddress = `${request.socket.remoteAddress ?? '?'}:${request.socket.remotePort ?? '?'}`
    if (this.stopping !== undefined) return ws.terminate()
    const link = new Link(ws, 'acceptor', remoteAddress, this.host, undefined, request.socket)
    this.links.add(link)
    // Beyond the bound one handshake goes, the oldest of the busiest address (pending.ts).
    const evicted = this.inboundHandshakes.add(link, addressGroup(request.socket.remoteAddress))
    if (evicted !== undefined) {
      this.listener.warnPending(evicted.remoteAddress)
      evicted.terminate()
    }
    this.socketOf.set(link, request.socket)
    this.stopCounting.set(link, this.countBeforeProof(request.socket, remoteAddress))
  }

  /**
   * A connection that has not proven the key may send a few handshake frames of at most HANDSHAKE_FRAME_BYTES_MAX,
   * but ws buffers a whole frame, up to the 8 MiB a Raft frame may take, before the link sees it and can refuse its
   * size: with every pending handshake doing that, a node would hold hundreds of megabytes for anyone who can reach
   * its peer port. So the socket's bytes are counted until the proof, and past PROOF_BYTES_MAX it is closed.
   */
  private countBeforeProof(socket: Socket, remoteAddress: string): () => void {
    let received = 0
    const count = (chunk: Buffer): void => {
      received += chunk.length
      if (received <= PROOF_BYTES_MAX) return
      socket.off('data', count)
      this.pendingWarnings.warn(this.log, 'peer sent too much before its proof', { remoteAddress, bytes: received }, 'a peer connection sent too much before proving the cluster key; closed')
      socket.destroy()
    }
    socket.on('data', count)
    return () => socket.off('data', count)
  }

  /**
   * Which link of a pair to keep, decided the same way at both ends so they keep the same one: the link dialed by
   * the node with the lower name wins. Between two links dialed the same way, the newer wins: the older is then
   * most likely what is left of a connection from before the peer restarted.
   */
  private shouldKeep(candidate: Link): boolean {
    const name = candidate.peer
    const peer = name === undefined ? undefined : this.peers.get(name)
    // A WAN server not yet a peer is adopted when its link opens (onOpen), if there is room.
    if (this.stopping === undefined && name !== undefined && peer === undefined && this.admits(name)) return true
    if (this.stopping !== undefined || name === undefined || peer === undefined) return false
    if (peer.link === undefined) return true
    const preferred = (link: Link): boolean => (link.role === 'dialer' ? this.nodeName < name : name < this.nodeName)
    return preferred(candidate) || !preferred(peer.link)
  }

  private onOpen(link: Link): void {
    this.inboundHandshakes.delete(link)
    const socket = this.socketOf.get(link)
    if (socket !== undefined) this.listener.authenticated(socket)
    this.socketOf.delete(link)
    this.stopCounting.get(link)?.()
    this.stopCounting.delete(link)
    const introduction = this.introductions.get(link)
    this.introductions.delete(link)
    let peer = this.peers.get(link.peer!)
    if (peer === undefined) {
      // A WAN server adopted (shouldKeep admitted it): dialed again after a loss at the address we reached it on, or
      // the one it advertised when it dialed us.
      assert(this.host.linkKind === 'wan', 'a link opened for a node outside the peer set')
      peer = this.addPeer(link.peer!, link.role === 'dialer' ? link.remoteAddress : (link.peerAdvertiseAddress ?? link.remoteAddress), { dial: false })
      this.listener.updateMaxConnections()
    }
    introduction?.resolve(peer.name)
    if (peer.dialing === link) peer.dialing = undefined
    const previous = peer.link ?? peer.handover
    const handedOver = peer.link === undefined
    peer.link = link
    peer.handover = undefined
    peer.backoff.reset()
    clearTimeout(peer.dialTimer)
    peer.dialTimer = undefined
    if (previous !== undefined) {
      this.log.debug({ peer: peer.name, link: link.id, replaced: previous.id }, 'peer link replaced')
      if (!handedOver) previous.close(CloseCode.duplicate, 'replaced by another link', { drain: true })
      // The peer answers on whichever link is current for it when it answers; the timeout covers a request that the
      // swap lost. Failing them here would turn every simultaneous dial into failed requests.
      for (const request of this.requests.values()) if (request.writtenOn === previous) request.writtenOn = link
    } else {
      this.log.info({ peer: peer.name, role: link.role, peerAdvertiseAddress: link.peerAdvertiseAddress }, 'peer connected')
      this.peerStateHandler?.(peer.name, true)
    }
    this.flush(peer)
  }

  private onClose(link: Link): void {
    const introduction = this.introductions.get(link)
    if (introduction !== undefined) {
      this.introductions.delete(link)
      // Refused as a duplicate of a link we already have with that server: introduced all the same.
      const known = link.peer === undefined ? undefined : this.peers.get(link.peer)
      if (link.closeCode === CloseCode.duplicate && known?.link !== undefined) introduction.resolve(known.name)
      else introduction.reject(new TransportError('disconnected', link.remoteAddress, 'no', `no link with the server at ${link.remoteAddress} (close code ${link.closeCode ?? '?'})`))
    }
    this.links.delete(link)
    this.inboundHandshakes.delete(link)
    this.socketOf.delete(link)
    this.stopCounting.delete(link)
    const peer = link.peer === undefined ? undefined : this.peers.get(link.peer)
    if (peer === undefined || this.stopping !== undefined) return
    if (peer.dialing === link) {
      peer.dialing = undefined
      if (peer.link !== undefined) return
      this.log.debug({ peer: peer.name, address: peer.address, closeCode: link.closeCode }, 'peer dial failed')
      const handover = peer.handover
      peer.handover = undefined
      if (handover !== undefined) return this.lose(peer, handover)
      // Refused as a duplicate: the peer keeps a link with us that is about to open here, so the queue waits for it.
      if (link.closeCode !== CloseCode.duplicate) this.dropQueue(peer)
      this.scheduleDial(peer)
    } else if (peer.link === link) {
      peer.link = undefined
      // The peer closed this link because it prefers the one we are dialing (see shouldKeep): wait for that one.
      if (link.closeCode === CloseCode.duplicate && peer.dialing !== undefined) {
        peer.handover = link
        return
      }
      this.lose(peer, link)
    }
  }

  /** Counted per transport and per peer; the link logs the one rate-limited line and closes itself. */
  private onFrameRejected(link: Link): void {
    this.framesRejected += 1
    const peer = link.peer === undefined ? undefined : this.peers.get(link.peer)
    if (peer !== undefined) peer.framesRejected += 1
  }

  /** The peer's link is gone with nothing to replace it: report it, fail what was waiting on it, redial. */
  private lose(peer: Peer, link: Link): void {
    this.log.info({ peer: peer.name, closeCode: link.closeCode }, 'peer disconnected')
    this.rejectRequests((request) => request.writtenOn === link, 'disconnected', 'link lost before the answer')
    this.dropQueue(peer)
    this.peerStateHandler?.(peer.name, false)
    this.scheduleDial(peer)
  }

  private onFrame(link: Link, frame: DataFrame): void {
    // The current link delivers, and so does one draining after its replacement (see onOpen). removePeer closes
    // every link of a removed peer without draining, so a frame here always comes from a peer in the set.
    const peer = this.peers.get(link.peer!)
    if (peer === undefined || this.stopping !== undefined) return
    switch (frame.type) {
      case 'message':
        this.messageHandler?.(peer.name, frame.payload)
        return
      case 'request':
        this.serve(peer.name, frame.id, frame.payload)
        return
      case 'response':
        this.settle(peer.name, frame.id, (request) => request.resolve(frame.payload))
        return
      case 'failure':
        this.settle(peer.name, frame.id, (request) => request.reject(errorFromWire(frame.error)))
        return
    }
  }

  private enqueue(peer: Peer, frame: OutFrame): boolean {
    if (!peer.queue.push(frame)) {
      peer.framesDropped += 1
      if (!peer.refusing) {
        const { length, totalSize } = peer.queue
        this.log.warn({ peer: peer.name, queueFrames: length, queueBytes: totalSize }, 'peer send queue full, refusing frames')
      }
      peer.refusing = true
      return false
    }
    peer.refusing = false
    this.flush(peer)
    return true
  }

  /**
   * Moves queued frames to the socket while its buffer is below the mark. A write's callback runs when ws has
   * handed it to the kernel, and calls flush again: that is what drains the queue once a slow peer catches up.
   */
  private flush(peer: Peer): void {
    const link = peer.link
    if (link === undefined || !link.writable) return
    while (link.bufferedBytes < this.settings.socketBufferedBytesMax) {
      const frame = peer.queue.shift()
      if (frame === undefined) return
      if (frame.requestId !== undefined) {
        const request = this.requests.get(frame.requestId)
        // It expired while queued and was reported as never delivered: it must not be sent now.
        if (request === undefined) continue
        request.writtenOn = link
      }
      link.write(frame.bytes, (error) => {
        // Success is null or undefined (Node passes null). An error means the link closed; onClose deals with it.
        if (!error && peer.link === link) this.flush(peer)
      })
    }
  }

  /** Drops whatever waits in the queue (link lost, dial failed, peer removed); queued requests fail as undelivered. */
  private dropQueue(peer: Peer): void {
    let dropped = 0
    for (let frame = peer.queue.shift(); frame !== undefined; frame = peer.queue.shift()) {
      dropped += 1
      if (frame.requestId === undefined) continue
      const request = this.requests.get(frame.requestId)
      if (request === undefined) continue
      this.finishRequest(frame.requestId, request)
      request.reject(new TransportError('disconnected', peer.name, 'no', 'no link to the peer'))
    }
    peer.framesDropped += dropped
    if (dropped > 0) this.log.debug({ peer: peer.name, dropped }, 'dropped queued frames')
  }

  private encode(frame: DataFrame, peer: string): Buffer | undefined {
    const packed = encodeFrame(frame)
    if (packed.length > this.settings.frameBytesMax) {
      this.framesOversized += 1
      const fields = { peer, frameType: frame.type, frameBytes: packed.length, frameBytesMax: this.settings.frameBytesMax }
      this.log.error(fields, 'frame larger than frameBytesMax, not sent')
      return undefined
    }
    // msgpackr returns a view into a shared slab that grows to several times the largest frame; a queued view would
    // keep the whole slab alive, memory the queue's byte bound does not count. A copy holds only the frame.
    return packed.byteLength * 2 < packed.buffer.byteLength ? Buffer.from(packed) : packed
  }

  private serve(from: string, id: number, payload: unknown): void {
    const handler = this.requestHandler
    if (handler === undefined) return this.answer(from, { type: 'failure', id, error: { code: 'internal', message: 'no request handler' } })
    if (this.requestsServing >= this.settings.requestsServingMax) {
      return this.answer(from, { type: 'failure', id, error: { code: 'rate_limited', message: 'too many peer requests in flight' } })
    }
    this.requestsServing += 1
    let result: Promise<unknown>
    try {
      result = handler(from, payload)
    } catch (error) {
      result = Promise.reject(error)
    }
    void result
      .then(
        (value) => this.answer(from, { type: 'response', id, payload: value }),
        (error: unknown) => this.answer(from, { type: 'failure', id, error: this.toWire(error, from) }),
      )
      .finally(() => (this.requestsServing -= 1))
  }

  /** Queues an answer; if the peer went away or its queue is full, the requester's timeout covers the loss. */
  private answer(to: string, frame: DataFrame): void {
    const peer = this.peers.get(to)
    if (peer === undefined || this.stopping !== undefined) return
    let bytes = this.encode(frame, to)
    if (bytes === undefined && frame.type === 'response') {
      bytes = this.encode({ type: 'failure', id: frame.id, error: { code: 'internal', message: 'answer larger than frameBytesMax' } }, to)
    }
    if (bytes !== undefined) this.enqueue(peer, { bytes, requestId: undefined })
  }

  /** Operating errors cross the wire as { code, message, field }; anything else is a fault of ours, logged here. */
  private toWire(error: unknown, from: string): WireError {
    if (error instanceof WardenError) return error.toWire()
    this.log.error({ err: error, peer: from }, 'peer request handler failed')
    return { code: 'internal', message: 'internal error' }
  }

  private settle(from: string, id: number, outcome: (request: PendingRequest) => void): void {
    const request = this.requests.get(id)
    // Late (after a timeout) or not ours to settle: a peer may only answer what was sent to it.
    if (request === undefined || request.peer !== from) return
    this.finishRequest(id, request)
    outcome(request)
  }

  private expire(id: number): void {
    const request = this.requests.get(id)
    if (request === undefined) return
    this.finishRequest(id, request)
    const delivered: Delivery = request.writtenOn === undefined ? 'no' : 'maybe'
    request.reject(new TransportError('timeout', request.peer, delivered, 'no answer in time'))
  }

  private rejectRequests(match: (request: PendingRequest) => boolean, code: TransportErrorCode, text: string): void {
    for (const [id, request] of [...this.requests]) {
      if (!match(request)) continue
      this.finishRequest(id, request)
      request.reject(new TransportError(code, request.peer, request.writtenOn === undefined ? 'no' : 'maybe', text))
    }
  }

  private finishRequest(id: number, request: PendingRequest): void {
    clearTimeout(request.timer)
    this.requests.delete(id)
  }
}

function resolveSettings(options: TransportOptions): Settings {
  const frameBytesMax = options.frameBytesMax ?? 8 * MiB
  const settings: Settings = {
    frameBytesMax,
    sendQueueFramesMax: options.sendQueueFramesMax ?? 4096,
    sendQueueBytesMax: options.sendQueueBytesMax ?? 4 * frameBytesMax,
    socketBufferedBytesMax: options.socketBufferedBytesMax ?? 1 * MiB,
    requestsInFlightMax: options.requestsInFlightMax ?? 1024,
    requestsServingMax: options.requestsServingMax ?? 1024,
    handshakesPendingMax: options.handshakesPendingMax ?? 32,
    handshakeTimeoutMs: options.handshakeTimeoutMs ?? 5000,
    keepaliveIntervalMs: options.keepaliveIntervalMs ?? 1000,
    peersMax: options.peersMax ?? 512,
    backoff: { initialMs: 50, maxMs: 2000, jitter: 0.5, ...options.backoff },
  }
  for (const [field, value] of Object.entries(settings)) {
    if (field === 'backoff') continue
    if (!Number.isSafeInteger(value) || (value as number) <= 0) throw new InvalidInputError(field, 'must be a positive integer')
  }
  const { initialMs, maxMs, jitter } = settings.backoff
  if (!(Number.isFinite(initialMs) && initialMs > 0)) throw new InvalidInputError('backoff.initialMs', 'must be a positive number')
  if (!(Number.isFinite(maxMs) && maxMs >= initialMs)) throw new InvalidInputError('backoff.maxMs', 'must be at least backoff.initialMs')
  if (!(jitter >= 0 && jitter <= 1)) throw new InvalidInputError('backoff.jitter', 'must be between 0 and 1')
  if (frameBytesMax < HANDSHAKE_FRAME_BYTES_MAX) throw new InvalidInputError('frameBytesMax', `must be at least ${HANDSHAKE_FRAME_BYTES_MAX}`)
  if (settings.sendQueueBytesMax < frameBytesMax) {
    throw new InvalidInputError('sendQueueBytesMax', 'must be at least frameBytesMax, or the largest frame could never be queued')
  }
  if (settings.socketBufferedBytesMax < SOCKET_BUFFERED_BYTES_MAX_MIN) {
    throw new InvalidInputError('socketBufferedBytesMax', `must be at least ${SOCKET_BUFFERED_BYTES_MAX_MIN}`)
  }
  return settings
}

/**
 * Why a peer cannot be dialed, or undefined. The address rule is the one in lib/cluster-address.ts, which also makes
 * sure `ws://${address}` parses: the WebSocket constructor throws on a URL it cannot parse, inside a dial timer.
 */
function peerProblem(name: string, address: string): string | undefined {
  if (!isNodeName(name as unknown)) return `node name ${JSON.stringify(name.slice(0, 140))} must be 1 to 128 characters`
  const problem = clusterAddressProblem(address)
  return problem === undefined ? undefined : `address of ${name}: ${problem}`
}

/** A child logger for this module; the module and node name are added unless the parent already carries them. */
function transportLogger(parent: Logger, nodeName: string): Logger {
  const bindings = parent.bindings()
  return parent.child({ ...(bindings['module'] === undefined ? { module: 'transport' } : {}), ...(bindings['node'] === undefined ? { node: nodeName } : {}) })
}

/** Uniform in [0, 1) from node:crypto (48 random bits is as many as randomInt gives). */
function cryptoRandom(): number {
  return randomInt(2 ** 47) / 2 ** 47
}


