/**
 * One WebSocket connection to a peer, from its first byte to its close: the handshake state machine (handshake.ts),
 * then sealed frames (seal.ts), keepalive and orderly closing. A Link knows nothing of queues, requests or which link
 * of a pair to keep; it asks its host (the PeerTransport) and reports to it.
 *
 * Invariant: the host hears of a data frame only from a link in state 'open', a link becomes 'open' only after the
 * handshake verified the peer's proof of the cluster key, and an open link delivers only frames that opened under
 * its keys at their place in the sequence. Nothing an unauthenticated party sends, nor anything altered on the path,
 * reaches the host.
 */
import { performance } from 'node:perf_hooks'
import type { Logger } from 'pino'
import type { RawData, WebSocket } from 'ws'
import { assert, unreachable } from '../lib/assert.js'
import type { LogLimiter } from '../lib/log-limiter.js'
import {
  datacenterOfWanName,
  decodeFrame,
  encodeFrame,
  FrameError,
  HANDSHAKE_FRAME_BYTES_MAX,
  isHandshakeFrame,
  PROTOCOL_VERSION,
  ProtocolVersionError,
  type DataFrame,
  type Frame,
  type HandshakeFrame,
  type LinkKind,
} from './frames.js'
import { freshNonce, type ClusterKey, type ClusterKeys, type Direction, type HandshakeTranscript } from './handshake.js'
import { Opener, Sealer } from './seal.js'
import { channelBinding, isTlsSocket, peerCertificateProblem } from './tls.js'
import type { TLSSocket } from 'node:tls'

/** The transcript's last field on an unsealed link (see LinkHost.unsealed): no sealed node accepts its proofs. */
const UNSEALED_MARK = Buffer.from('warden/peer/v3 unsealed, for benchmarks only')

/** WebSocket close codes. 4000-4999 are for applications (RFC 6455 §7.4.2); ws itself sends 1009 for a frame too large. */
export const CloseCode = {
  stopping: 1001,
  tooLarge: 1009,
  refused: 4001,
  duplicate: 4002,
  badFrame: 4003,
  handshakeTimeout: 4004,
  removed: 4005,
  silent: 4006,
  /** A sealed frame did not open: altered, replayed, reordered, dropped before it, or from another link. */
  notAuthentic: 4007,
  /** The link sealed SEALED_FRAMES_MAX frames; a new link has new keys. */
  exhausted: 4008,
} as const

/**
 * How long a closing link waits for the peer's close frame before destroying the socket. ws would wait 30 s by
 * default, which lets a peer that never answers hold a socket (and stop()) that long.
 */
const CLOSE_GRACE_MS = 500
/** A link that has received nothing (not even a pong) for this many keepalive intervals is dead. */
const KEEPALIVE_MISSES_MAX = 3

export interface LinkHost {
  readonly nodeName: string
  readonly advertiseAddress: string
  /** This node's datacenter, stated in the handshake; a Raft link refuses a peer of another. */
  readonly datacenter: string
  /** The one kind of link this node's transport serves and dials. */
  readonly linkKind: LinkKind
  /** Undefined when no key is configured: then every handshake is refused. */
  readonly keys: ClusterKeys | undefined
  /**
   * Whether links run over TLS (tls.ts): then each side checks the other's certificate names a server of the
   * datacenter it states, the proofs bind the TLS connection, and frames are not sealed again. A plain link refuses
   * to open on a TLS node and the other way round (the sockets could not even speak).
   */
  readonly tls: boolean
  /**
   * Frames after the handshake travel in clear: for the benchmark's measure of what sealing costs, never for use.
   * Such a node proves under a marked transcript, so it links only with nodes as unsealed as itself.
   */
  readonly unsealed: boolean
  readonly handshakeTimeoutMs: number
  readonly keepaliveIntervalMs: number
  readonly log: Logger
  /** Bounds the warnings about refused or broken connections, which anyone reaching the peer port can cause. */
  readonly warnings: LogLimiter
  /** Whether `name` is in the peer set (never this node itself). */
  isPeer(name: string): boolean
  /** Called once the peer is authenticated: false to refuse the link as a duplicate of a better one. No side effects. */
  shouldKeep(link: Link): boolean
  /** The link is open; the host adopts it. */
  onOpen(link: Link): void
  onFrame(link: Link, frame: DataFrame): void
  /** The handshake failed, refused by either side (the link logs why); for the host's counters. */
  onHandshakeFailed(link: Link): void
  /** A sealed frame failed to open on this open link (which then closes; the link logs it); for the host's counters. */
  onFrameRejected(link: Link): void
  /** The socket closed, whatever the state; called exactly once. */
  onClose(link: Link): void
}

export type LinkState = 'handshake' | 'open' | 'closed'

let linkIdNext = 1

export class Link {
  /** For logs: tells apart the links of one peer over time. */
  readonly id = linkIdNext++
  state: LinkState = 'handshake'
  /**
   * The peer's node name. A dialer knows whom it dialed from the start; an acceptor learns the claimed name from
   * the hello. Either way it is proven only once state is 'open'.
   */
  peer: string | undefined
  /** The cluster address the peer advertised in the handshake (may differ from the address dialed). */
  peerAdvertiseAddress: string | undefined
  closeCode: number | undefined
  /** Settles when the socket has closed. */
  readonly closed: Promise<void>

  /** Which handshake frame this side waits for next; undefined once open. */
  private awaiting: HandshakeFrame['type'] | undefined
  private readonly localNonce = freshNonce()
  /** Acceptor: the nonce of the hello, kept until the proof completes the transcript. */
  private dialerNonce: Buffer | undefined
  private transcript: HandshakeTranscript | undefined
  /** The key this handshake proves under: the dialer's own, or the one the acceptor found the dialer's proof made with. */
  private handshakeKey: ClusterKey | undefined
  /**
   * Set when a plain link is authenticated: seals what this side writes, and opens what the peer wrote. Both stay
   * undefined on an open link over TLS, which TLS protects.
   */
  private sealer: Sealer | undefined
  private opener: Opener | undefined
  /** The TLS socket under the WebSocket, on a link over TLS: an acceptor's from the start, a dialer's once upgraded. */
  private tlsSocket: TLSSocket | undefined
  private lastReceivedAtMs = performance.now()
  private handshakeTimer: NodeJS.Timeout | undefined
  private keepaliveTimer: NodeJS.Timeout | undefined
  /** When the unanswered keepalive ping left, if one is out. */
  private pingSentAtMs: number | undefined
  /**
   * The round-trip time of this link, smoothed (RFC 6298's 1/8 gain) over keepalive pings and their pongs, in ms;
   * undefined before the first pong. What datacenters are ordered by (Consul lists them by round-trip time).
   */
  rttMs: number | undefined
  private closeTimer: NodeJS.Timeout | undefined
  /** Closing, but still delivering data frames (see close). Only ever set on an open link. */
  private draining = false
  private resolveClosed: () => void = () => {}
  private readonly log: Logger

  constructor(
    private readonly ws: WebSocket,
    readonly role: Direction,
    /** The address dialed, or the remote socket address of an accepted connection. */
    readonly remoteAddress: string,
    private readonly host: LinkHost,
    expectedPeer?: string,
    /** An acceptor's socket (a dialer's is known once the upgrade answers). */
    acceptedSocket?: unknown,
  ) {
    // A WAN dial to an address (--join-wan) learns whom it reached from the challenge; every other dial knows.
    assert(role === 'dialer' ? expectedPeer !== undefined || host.linkKind === 'wan' : expectedPeer === undefined, 'a dialer link must know whom it dials, an acceptor must not')
    if (isTlsSocket(acceptedSocket)) this.tlsSocket = acceptedSocket
    if (role === 'dialer') ws.once('upgrade', (response) => (this.tlsSocket = isTlsSocket(response.socket) ? response.socket : undefined))
    this.peer = expectedPeer
    this.log = host.log.child({ link: this.id, role, remoteAddress })
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve))
    this.handshakeTimer = setTimeout(() => this.onHandshakeTimeout(), host.handshakeTimeoutMs)
    ws.on('message', (data, isBinary) => this.onData(data, isBinary))
    ws.on('pong', () => this.onPong())
    ws.on('ping', () => this.touch())
    ws.on('close', (code, reason) => this.onSocketClose(code, reason))
    // ws emits 'close' after every error, which does the work. Refused dials and resets are routine (debug); a
    // WS_ERR_* is the peer breaking the WebSocket protocol, a frame above maxPayload for one, which is worth a warning.
    ws.on('error', (error: Error & { code?: unknown }) => {
      const protocol = typeof error.code === 'string' && error.code.startsWith('WS_ERR_')
      this.log[protocol ? 'warn' : 'debug']({ peer: this.peer, err: error.message, code: error.code }, 'peer socket error')
    })
    if (role === 'dialer') {
      this.awaiting = 'challenge'
      ws.once('open', () => this.sendHello())
    } else {
      this.awaiting = 'hello'
    }
  }

  /** Bytes written to the socket but not yet flushed to the kernel, plus bytes ws holds for it. */
  get bufferedBytes(): number {
    return this.ws.bufferedAmount
  }

  /**
   * Whether a write now would reach the peer. A link stays 'open' from the peer's close frame until the socket
   * closes; ws drops what is sent in between, so the transport must keep such frames queued instead.
   */
  get writable(): boolean {
    return this.state === 'open' && this.ws.readyState === this.ws.OPEN
  }

  /**
   * Seals and writes one encoded data frame; `done` runs once it has left for the kernel (or failed because the link
   * closed). Frames are sealed in the order they are written, which is the order ws puts them on the socket.
   */
  write(bytes: Buffer, done: (error?: Error | null) => void): void {
    assert(this.state === 'open', 'write on a link that is not open')
    if (this.sealer === undefined) {
      assert(this.host.tls || this.host.unsealed, 'an open plain link without keys')
      this.ws.send(bytes, { binary: true }, done)
      return
    }
    if (this.sealer.exhausted) {
      this.log.info({ peer: this.peer }, 'peer link sealed as many frames as one key may; closing it for a new one')
      this.close(CloseCode.exhausted, 'sealed frames exhausted')
      done(new Error('the link sealed as many frames as one key may'))
      return
    }
    this.ws.send(this.sealer.seal(bytes), { binary: true }, done)
  }

  /**
   * Starts an orderly close; the socket is destroyed if the peer does not answer within CLOSE_GRACE_MS. With
   * `drain`, data frames still arriving before the peer's close frame are delivered: a link replaced by a duplicate
   * may carry answers the peer wrote before it learned of the replacement.
   */
  close(code: number, reason: string, options: { drain?: boolean } = {}): void {
    if (this.state === 'closed') return
    if (this.closeTimer !== undefined) {
      // Already closing: a second close without drain (the peer was removed, say) ends the draining.
      if (options.drain !== true) this.draining = false
      return
    }
    this.draining = options.drain === true && this.state === 'open'
    this.clearTimers()
    this.closeTimer = setTimeout(() => this.ws.terminate(), CLOSE_GRACE_MS)
    // ws.close on a socket still connecting aborts the dial and emits 'error' then 'close': both are handled.
    this.ws.close(code, reason)
  }

  /** Destroys the socket at once (a dead or hostile peer is not owed a closing handshake). */
  terminate(): void {
    this.ws.terminate()
  }

  private onData(data: RawData, isBinary: boolean): void {
    if (this.state === 'closed' || (this.closeTimer !== undefined && !this.draining)) return
    this.touch()
    if (!isBinary) return this.fail('text frame', CloseCode.badFrame)
    if (this.state === 'handshake') return this.onHandshakeData(toBuffer(data))
    assert(this.opener !== undefined || this.host.tls || this.host.unsealed, 'an open plain link without keys')
    const plaintext = this.opener === undefined ? toBuffer(data) : this.opener.open(toBuffer(data))
    if (plaintext === undefined) {
      this.host.onFrameRejected(this)
      return this.fail('sealed frame failed to open', CloseCode.notAuthentic)
    }
    let frame: Frame
    try {
      frame = decodeFrame(plaintext)
    } catch (error) {
      if (!(error instanceof FrameError)) throw error
      // The peer sealed it, so the peer (which proved the key) sent it: a bug or a version skew there, not an attack.
      return this.fail(`bad frame: ${error.message}`, CloseCode.badFrame)
    }
    if (isHandshakeFrame(frame)) return this.fail(`${frame.type} frame after the handshake`, CloseCode.badFrame)
    this.host.onFrame(this, frame)
  }

  /** A frame before the link is authenticated: in clear, small, and only the one handshake frame awaited. */
  private onHandshakeData(bytes: Buffer): void {
    if (bytes.length > HANDSHAKE_FRAME_BYTES_MAX) return this.refuse('handshake frame too large', CloseCode.badFrame)
    let frame: Frame
    try {
      frame = decodeFrame(bytes)
    } catch (error) {
      if (error instanceof ProtocolVersionError) return this.refuseVersion(error.version)
      if (!(error instanceof FrameError)) throw error
      return this.refuse(`bad handshake frame: ${error.message}`, CloseCode.badFrame)
    }
    this.onHandshakeFrame(frame)
  }

  private onHandshakeFrame(frame: Frame): void {
    if (frame.type !== this.awaiting) return this.refuse(`expected a ${this.awaiting} frame, got ${frame.type}`, CloseCode.refused)
    const keys = this.host.keys
    if (keys === undefined) return this.refuse('no cluster key is configured', CloseCode.refused)
    switch (frame.type) {
      case 'hello':
        return this.onHello(frame)
      case 'challenge':
        return this.onChallenge(frame, keys)
      case 'proof':
        return this.onProof(frame, keys)
      case 'welcome':
        return this.onWelcome(frame)
      default:
        // Data frames never match `awaiting`, so they were refused above.
        return unreachable(frame, 'data frame in a handshake')
    }
  }

  private sendHello(): void {
    if (this.state !== 'handshake') return
    const { nodeName, advertiseAddress } = this.host
    this.send({ type: 'hello', version: PROTOCOL_VERSION, node: nodeName, address: advertiseAddress, nonce: this.localNonce })
  }

  /**
   * Acceptor: a dialer names itself. Nothing is proven to a node outside the peer set (nor of another version: the
   * decoder refused that hello already, see refuseVersion).
   */
  private onHello(frame: Extract<Frame, { type: 'hello' }>): void {
    this.peer = frame.node
    if (frame.node === this.host.nodeName || !this.host.isPeer(frame.node)) return this.refuse('not a node of the peer set', CloseCode.refused)
    this.peerAdvertiseAddress = frame.address
    this.dialerNonce = frame.nonce
    this.awaiting = 'proof'
    const { nodeName, advertiseAddress, datacenter, linkKind } = this.host
    // No proof here: whoever dials may be a stranger who names a peer, and an HMAC of the key over a transcript it
    // chose would let it test guesses of a weak key offline. The acceptor proves the key only to a proven dialer.
    this.send({ type: 'challenge', node: nodeName, address: advertiseAddress, datacenter, kind: linkKind, nonce: this.localNonce })
  }

  /**
   * Dialer: the acceptor names itself; we prove the key first (we dialed a peer address we were given), unless it is
   * not the node, the datacenter or the kind of link we meant to reach.
   */
  private onChallenge(frame: Extract<Frame, { type: 'challenge' }>, keys: ClusterKeys): void {
    if (this.peer === undefined) {
      // A dial by address: whoever answers, if it may be a peer (not this node, a WAN name, room for it).
      if (frame.node === this.host.nodeName || !this.host.isPeer(frame.node)) return this.refuse(`${frame.node} answered, which cannot be a peer`, CloseCode.refused)
      this.peer = frame.node
    }
    if (frame.node !== this.peer) return this.refuse(`dialed ${this.peer} but ${frame.node} answered`, CloseCode.refused)
    const mismatch = this.mismatch(frame.kind, frame.datacenter) ?? this.certificateProblem(frame.datacenter)
    if (mismatch !== undefined) return this.refuse(mismatch, CloseCode.refused)
    this.peerAdvertiseAddress = frame.address
    this.transcript = {
      kind: this.host.linkKind,
      dialerNode: this.host.nodeName,
      acceptorNode: frame.node,
      dialerAddress: this.host.advertiseAddress,
      acceptorAddress: frame.address,
      dialerDatacenter: this.host.datacenter,
      acceptorDatacenter: frame.datacenter,
      dialerNonce: this.localNonce,
      acceptorNonce: frame.nonce,
      ...this.binding(),
    }
    this.handshakeKey = keys.proving
    this.awaiting = 'welcome'
    const { datacenter, linkKind } = this.host
    this.send({ type: 'proof', datacenter, kind: linkKind, proof: keys.proving.proof('dialer', this.transcript) })
  }

  /**
   * Acceptor: the dialer proves the key, with ours or one we accept; the link opens if the host keeps it. The kind
   * and datacenter are checked first: refusing them costs no HMAC and proves nothing either way.
   */
  private onProof(frame: Extract<Frame, { type: 'proof' }>, keys: ClusterKeys): void {
    assert(this.dialerNonce !== undefined && this.peer !== undefined && this.peerAdvertiseAddress !== undefined, 'proof awaited before a hello was taken')
    const mismatch = this.mismatch(frame.kind, frame.datacenter) ?? this.certificateProblem(frame.datacenter)
    if (mismatch !== undefined) return this.refuse(mismatch, CloseCode.refused)
    this.transcript = {
      kind: this.host.linkKind,
      dialerNode: this.peer,
      acceptorNode: this.host.nodeName,
      dialerAddress: this.peerAdvertiseAddress,
      acceptorAddress: this.host.advertiseAddress,
      dialerDatacenter: frame.datacenter,
      acceptorDatacenter: this.host.datacenter,
      dialerNonce: this.dialerNonce,
      acceptorNonce: this.localNonce,
      ...this.binding(),
    }
    // welcome and the sealing keys use the key the dialer proved with, the only one the dialer knows.
    this.handshakeKey = keys.verifying('dialer', this.transcript, frame.proof)
    if (this.handshakeKey === undefined) return this.refuse('peer did not prove the cluster key', CloseCode.refused)
    // The peer set may have changed since the hello.
    if (!this.host.isPeer(this.peer)) return this.refuse('not a node of the peer set', CloseCode.refused)
    if (!this.host.shouldKeep(this)) return this.dropDuplicate()
    // welcome goes out before onOpen, which may flush queued data frames on this link: the dialer must see it first.
    this.send({ type: 'welcome', proof: this.handshakeKey.proof('acceptor', this.transcript) })
    this.open()
  }

  /** Dialer: the acceptor verified us, keeps this link, and proves the key in turn (the key we proved with). */
  private onWelcome(frame: Extract<Frame, { type: 'welcome' }>): void {
    assert(this.transcript !== undefined && this.handshakeKey !== undefined, 'welcome awaited before a challenge was taken')
    if (!this.handshakeKey.verify('acceptor', this.transcript, frame.proof)) return this.refuse('peer did not prove the cluster key', CloseCode.refused)
    if (this.host.shouldKeep(this)) return this.open()
    // We took a better link with this peer since we dialed. The acceptor decided before us and may already be
    // writing on this one, so it is authenticated and drained while it closes, not dropped like a handshake.
    this.authenticated()
    this.log.debug({ peer: this.peer }, 'closing a duplicate peer link')
    this.close(CloseCode.duplicate, 'duplicate link', { drain: true })
  }

  /**
   * Why a peer stating `kind` and `datacenter` may not have this link, or undefined. A Raft link joins the servers of
   * one datacenter: a peer of another may hold the same cluster key (one key for a federation), but its votes and
   * entries belong to another Raft group. (A cross-datacenter kind would require the opposite.)
   */
  private mismatch(kind: string, datacenter: string): string | undefined {
    if (kind !== this.host.linkKind) return `peer asks for a ${kind} link; this node serves ${this.host.linkKind} links`
    if (kind === 'wan') {
      // Any datacenter, but the one its name says: a WAN name is NODE.DC.
      const named = datacenterOfWanName(this.peer ?? '')
      return named === datacenter ? undefined : `peer ${this.peer ?? '?'} states datacenter ${datacenter}; a wan link's name must end in its datacenter`
    }
    if (datacenter !== this.host.datacenter) return `peer is in datacenter ${datacenter}; a ${kind} link joins servers of datacenter ${this.host.datacenter} only`
    return undefined
  }

  /**
   * On a TLS node, why the other side's certificate may not serve as a server of `datacenter` (tls.ts), or undefined.
   * Checked before either side proves anything, like the datacenter itself.
   */
  private certificateProblem(datacenter: string): string | undefined {
    if (!this.host.tls) return undefined
    if (this.tlsSocket === undefined) return 'a plain connection reached a node whose peer links run over TLS'
    return peerCertificateProblem(this.tlsSocket, datacenter)
  }

  /** The transcript's channel binding on a TLS link (see tls.ts); nothing on a plain one. */
  private binding(): { channelBinding?: Buffer } {
    if (this.host.unsealed) return { channelBinding: UNSEALED_MARK }
    return this.tlsSocket === undefined ? {} : { channelBinding: channelBinding(this.tlsSocket) }
  }

  /** A hello of another protocol version: refused with both versions named, and a close reason a later version can log. */
  private refuseVersion(version: number): void {
    const reason = `unsupported protocol version ${version}: this node speaks ${PROTOCOL_VERSION} (sealed links) and there is no mixed mode; run one release on every node`
    this.refuse(reason, CloseCode.refused, `protocol version ${PROTOCOL_VERSION} required`)
  }

  private onHandshakeTimeout(): void {
    // A dial that never connected is an unreachable peer, not a failed authentication: no warning, no count.
    if (this.ws.readyState === this.ws.CONNECTING) {
      this.log.debug({ peer: this.peer }, 'peer dial timed out')
      this.close(CloseCode.handshakeTimeout, 'dial timed out')
      return
    }
    this.refuse('handshake timed out', CloseCode.handshakeTimeout)
  }

  private open(): void {
    this.authenticated()
    this.keepaliveTimer = setInterval(() => this.keepalive(), this.host.keepaliveIntervalMs)
    this.log.debug({ peer: this.peer, peerAdvertiseAddress: this.peerAdvertiseAddress }, 'peer link authenticated')
    this.host.onOpen(this)
  }

  /**
   * The handshake succeeded: from here on every frame of a plain link is sealed, each way under its own key
   * (handshake.ts); a link over TLS leaves that to TLS.
   */
  private authenticated(): void {
    assert(this.transcript !== undefined && this.handshakeKey !== undefined, 'authenticated before both proofs were checked')
    if (!this.host.tls && !this.host.unsealed) {
      const keys = this.handshakeKey.sealingKeys(this.transcript)
      const [sealing, opening] = this.role === 'dialer' ? [keys.dialerToAcceptor, keys.acceptorToDialer] : [keys.acceptorToDialer, keys.dialerToAcceptor]
      this.sealer = new Sealer(sealing)
      this.opener = new Opener(opening)
    }
    this.state = 'open'
    this.awaiting = undefined
    this.transcript = undefined
    this.handshakeKey = undefined
    this.dialerNonce = undefined
    clearTimeout(this.handshakeTimer)
    this.handshakeTimer = undefined
  }

  private dropDuplicate(): void {
    this.log.debug({ peer: this.peer }, 'closing a duplicate peer link')
    this.close(CloseCode.duplicate, 'duplicate link')
  }

  private keepalive(): void {
    const silentMs = performance.now() - this.lastReceivedAtMs
    if (silentMs > KEEPALIVE_MISSES_MAX * this.host.keepaliveIntervalMs) {
      this.log.warn({ peer: this.peer, silentMs: Math.round(silentMs) }, 'peer link silent, closing it')
      this.closeCode = CloseCode.silent
      this.terminate()
      return
    }
    // One ping timed at a time: a pong answers the oldest ping, and an unanswered one is not timed at all.
    if (this.pingSentAtMs === undefined) this.pingSentAtMs = performance.now()
    this.ws.ping()
  }

  private onPong(): void {
    this.touch()
    if (this.pingSentAtMs === undefined) return
    const sample = performance.now() - this.pingSentAtMs
    this.pingSentAtMs = undefined
    this.rttMs = this.rttMs === undefined ? sample : this.rttMs + (sample - this.rttMs) / 8
  }

  private touch(): void {
    this.lastReceivedAtMs = performance.now()
  }

  /** A handshake that failed: logged without secrets (names, addresses and the reason only), counted, closed. */
  private refuse(reason: string, code: number, closeReason = 'handshake refused'): void {
    if (this.state !== 'handshake') return
    // Anyone who reaches the peer port can cause these: at most one line per kind of reason per 10 s.
    this.host.warnings.warn(this.log, warningKey(reason), { peer: this.peer, reason }, 'peer handshake refused')
    this.host.onHandshakeFailed(this)
    this.close(code, closeReason)
  }

  /** An authenticated peer broke the protocol: close the link, never the process. */
  private fail(reason: string, code: number): void {
    this.host.warnings.warn(this.log, warningKey(reason), { peer: this.peer, reason }, 'closing peer link after a bad frame')
    this.close(code, 'bad frame')
  }

  private send(frame: HandshakeFrame): void {
    this.ws.send(encodeFrame(frame), { binary: true })
  }

  private onSocketClose(code: number, reason: Buffer): void {
    if (this.state === 'closed') return
    const wasHandshaking = this.state === 'handshake'
    const closedByUs = this.closeTimer !== undefined
    this.state = 'closed'
    this.closeCode ??= code
    this.clearTimers()
    clearTimeout(this.closeTimer)
    if (wasHandshaking && !closedByUs && code === CloseCode.refused) {
      // The other side refused us (it logged why on its side; a wrong key shows up here as a bad proof there). Its
      // close reason is at most 123 bytes by RFC 6455 and says little on purpose; a version mismatch names the version.
      // Once per peer per interval: the dialer retries every few seconds for as long as the cause lasts.
      const fields = { peer: this.peer, closeReason: reason.toString('utf8') }
      this.host.warnings.warn(this.log, `peer refused\u0000${this.peer ?? ''}`, fields, 'peer refused the handshake')
      this.host.onHandshakeFailed(this)
    }
    this.host.onClose(this)
    this.resolveClosed()
  }

  private clearTimers(): void {
    clearTimeout(this.handshakeTimer)
    clearInterval(this.keepaliveTimer)
    this.handshakeTimer = undefined
    this.keepaliveTimer = undefined
  }
}

/** ws hands over a Buffer with the default binaryType ('nodebuffer'); the other shapes are handled for safety. */
function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data
  if (Array.isArray(data)) return Buffer.concat(data)
  return Buffer.from(data)
}

/**
 * What bounds a warning's rate: the kind of failure, as its first words say ("bad frame", "unsupported protocol
 * version", "peer did not prove"). Not the peer's name nor the rest of the reason, which the other side chooses
 * before proving anything: with them in the key, a new name per connection would get a line each.
 */
function warningKey(reason: string): string {
  return reason.split(' ', 3).join(' ')
}
