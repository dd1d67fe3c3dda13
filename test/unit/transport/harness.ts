/**
 * Shared pieces of the transport tests: real transports on 127.0.0.1 port 0, a captured pino log, a TCP proxy,
 * raw WebSocket clients (and ones that speak the handshake and sealing by hand), and a cleanup stack run after every
 * test (even a failed one) so no socket, server or timer outlives its test.
 */
import { createHook } from 'node:async_hooks'
import { createServer, type Server, type Socket, connect } from 'node:net'
import { pino, type Logger } from 'pino'
import { WebSocket } from 'ws'
import { randomBytes } from 'node:crypto'
import { PeerTransport, PEER_PATH, type TransportOptions } from '../../../src/transport/index.js'
import { decodeFrame, encodeFrame, PROTOCOL_VERSION, type Frame } from '../../../src/transport/frames.js'
import { ClusterKey, type HandshakeTranscript } from '../../../src/transport/handshake.js'
import { Opener, Sealer } from '../../../src/transport/seal.js'
import { pairSockets } from '../../support/socket-pair.js'

export const CLUSTER_KEY = 'test-cluster-key-5b0c1d7e-not-for-production'
/** The datacenter of every test node unless a test says otherwise. */
export const DATACENTER = 'dc1'

/** Closers run last registered, first run; every one is tried, then the first failure is rethrown. */
export class Cleanup {
  private closers: Array<() => unknown> = []

  defer(closer: () => unknown): void {
    this.closers.push(closer)
  }

  async run(): Promise<void> {
    const closers = this.closers.reverse()
    this.closers = []
    let failure: unknown
    for (const closer of closers) {
      try {
        await closer()
      } catch (error) {
        failure ??= error
      }
    }
    if (failure !== undefined) throw failure
  }
}

/** One Cleanup for the suite, run in afterEach. */
export function useCleanup(): Cleanup {
  const cleanup = new Cleanup()
  afterEach(async () => cleanup.run())
  return cleanup
}

export interface CapturedLog {
  logger: Logger
  /** Every line as written (to check that a secret never appears), bounded. */
  raw: string[]
  records: Array<Record<string, unknown>>
}

const LOG_LINES_MAX = 20_000

export function captureLog(): CapturedLog {
  const raw: string[] = []
  const records: Array<Record<string, unknown>> = []
  const stream = {
    write(line: string): void {
      if (raw.length >= LOG_LINES_MAX) return
      raw.push(line)
      records.push(JSON.parse(line) as Record<string, unknown>)
    },
  }
  return { logger: pino({ level: 'debug' }, stream), raw, records }
}

export function logged(log: CapturedLog, message: string, fields: Record<string, unknown> = {}): boolean {
  return log.records.some((record) => record['msg'] === message && Object.entries(fields).every(([key, value]) => record[key] === value))
}

export function addressOf(transport: PeerTransport): string {
  return `127.0.0.1:${transport.address.port}`
}

export interface TestNode {
  name: string
  transport: PeerTransport
  log: CapturedLog
  /** Messages received, in order (bounded by what the tests send). */
  inbox: Array<{ from: string; message: unknown }>
  peerEvents: Array<{ peer: string; connected: boolean }>
}

/** Starts a transport with test-sized timings and no peers; stopped by the cleanup. */
export async function startNode(cleanup: Cleanup, name: string, options: Partial<TransportOptions> = {}): Promise<TestNode> {
  const log = options.log === undefined ? captureLog() : { logger: options.log, raw: [], records: [] }
  const transport = await PeerTransport.start({
    nodeName: name,
    advertiseAddress: `${name}.cluster.test:8300`,
    clusterKey: CLUSTER_KEY,
    listen: { host: '127.0.0.1', port: 0 },
    peers: new Map(),
    handshakeTimeoutMs: 2000,
    keepaliveIntervalMs: 200,
    backoff: { initialMs: 20, maxMs: 200, jitter: 0.5 },
    ...options,
    datacenter: options.datacenter ?? DATACENTER,
    log: log.logger,
  })
  cleanup.defer(() => transport.stop())
  const node: TestNode = { name, transport, log, inbox: [], peerEvents: [] }
  transport.onMessage((from, message) => node.inbox.push({ from, message }))
  transport.onPeerState((peer, connected) => node.peerEvents.push({ peer, connected }))
  return node
}

/** Gives every node every other node as a peer, at its real address. */
export function connectAll(nodes: TestNode[]): void {
  for (const node of nodes) {
    node.transport.setPeers(new Map(nodes.filter((other) => other !== node).map((other) => [other.name, addressOf(other.transport)])))
  }
}

export function isConnected(node: TestNode, peer: string): boolean {
  return node.transport.stats().peers.get(peer)?.connected === true
}

/** Polls `condition` until it holds; fails with `what` after timeoutMs. Every wait in these tests is bounded. */
export async function waitFor(what: string, condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(10)
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** A port that was free a moment ago and has nothing listening on it: dials to it are refused. */
export async function deadAddress(): Promise<string> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return `127.0.0.1:${port}`
}

export interface Proxy {
  address: string
  /** Connections accepted so far. */
  connections: number
  /** Every byte relayed, both ways, up to CAPTURE_BYTES_MAX: what anyone on the path could record. */
  captured(): Buffer
  /** Stops reading from the dialing side: the sender's socket buffers fill up, as with a slow peer. */
  pause(): void
  resume(): void
}

const CAPTURE_BYTES_MAX = 16 * 1024 * 1024

/** A TCP proxy on a free port piping every connection to `target`: what the peer dials is not where it listens. */
export async function startProxy(cleanup: Cleanup, target: string): Promise<Proxy> {
  const [host, port] = target.split(':') as [string, string]
  const sockets = new Set<Socket>()
  const pairs: Array<{ client: Socket; upstream: Socket }> = []
  let paused = false
  const capture: Buffer[] = []
  let capturedBytes = 0
  const record = (chunk: Buffer): void => {
    if (capturedBytes >= CAPTURE_BYTES_MAX) return
    capture.push(chunk)
    capturedBytes += chunk.length
  }
  const server: Server = createServer((client) => {
    proxy.connections += 1
    const upstream = connect(Number(port), host)
    client.on('data', record)
    upstream.on('data', record)
    pairSockets(client, upstream, sockets)
    upstream.pipe(client)
    client.pipe(upstream)
    if (paused) client.pause()
    pairs.push({ client, upstream })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const proxy: Proxy = {
    address: `127.0.0.1:${(server.address() as { port: number }).port}`,
    connections: 0,
    captured: () => Buffer.concat(capture),
    pause() {
      paused = true
      for (const { client, upstream } of pairs) {
        client.unpipe(upstream)
        client.pause()
      }
    },
    resume() {
      paused = false
      for (const { client, upstream } of pairs) {
        client.pipe(upstream)
        client.resume()
      }
    },
  }
  cleanup.defer(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })
  return proxy
}

/** A TCP listener that accepts connections and never answers: a dial to it hangs until the handshake timeout. */
export async function startSilentServer(cleanup: Cleanup): Promise<{ address: string }> {
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => socket.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  cleanup.defer(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })
  return { address: `127.0.0.1:${(server.address() as { port: number }).port}` }
}

/** A bare WebSocket client to a transport's peer endpoint, as an attacker or a broken peer would open one. */
export async function rawClient(cleanup: Cleanup, transport: PeerTransport, maxPayload = 64 * 1024 * 1024): Promise<RawClient> {
  const ws = new WebSocket(`ws://${addressOf(transport)}${PEER_PATH}`, { perMessageDeflate: false, maxPayload })
  const client = new RawClient(ws)
  cleanup.defer(() => client.destroy())
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('error', reject)
  })
  return client
}

export class RawClient {
  readonly received: Buffer[] = []
  closeCode: number | undefined
  private readonly closed: Promise<number>

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => this.received.push(data as Buffer))
    ws.on('error', () => {
      // A refused or reset test connection is what these tests provoke; 'close' records the outcome.
    })
    this.closed = new Promise((resolve) => ws.on('close', (code) => resolve((this.closeCode = code))))
  }

  send(bytes: Buffer | string): void {
    this.ws.send(bytes)
  }

  /** Bytes straight onto the socket, past ws's framing: a frame begun and never finished. */
  sendRaw(bytes: Buffer): void {
    ;(this.ws as unknown as { _socket: { write(bytes: Buffer): void } })._socket.write(bytes)
  }

  /** The close code, once the server closes the connection (bounded wait). */
  async closedWith(timeoutMs = 3000): Promise<number> {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`connection not closed within ${timeoutMs} ms`)), timeoutMs)
    })
    try {
      return await Promise.race([this.closed, timeout])
    } finally {
      clearTimeout(timer)
    }
  }

  async nextFrame(timeoutMs = 3000): Promise<Buffer> {
    await waitFor('a frame from the server', () => this.received.length > 0, timeoutMs)
    return this.received.shift()!
  }

  destroy(): Promise<number> {
    this.ws.terminate()
    return this.closedWith()
  }
}

/**
 * Sends a hello as `node` and returns the challenge and the transcript the dialer proves, stating `datacenter` and a
 * raft link as a real dialer does in its proof.
 */
export async function helloAs(client: RawClient, node: string, datacenter = DATACENTER): Promise<{ challenge: Extract<Frame, { type: 'challenge' }>; transcript: HandshakeTranscript }> {
  const nonce = randomBytes(32)
  client.send(encodeFrame({ type: 'hello', version: PROTOCOL_VERSION, node, address: `${node}.cluster.test:8300`, nonce }))
  const challenge = decodeFrame(await client.nextFrame())
  if (challenge.type !== 'challenge') throw new Error(`expected a challenge, got ${challenge.type}`)
  const transcript: HandshakeTranscript = {
    kind: 'raft',
    dialerNode: node,
    acceptorNode: challenge.node,
    dialerAddress: `${node}.cluster.test:8300`,
    acceptorAddress: challenge.address,
    dialerDatacenter: datacenter,
    acceptorDatacenter: challenge.datacenter,
    dialerNonce: nonce,
    acceptorNonce: challenge.nonce,
  }
  return { challenge, transcript }
}

/** The dialer's proof frame for `transcript`, made with `key` (in the dialer's role unless told otherwise). */
export function proofFrame(key: string, transcript: HandshakeTranscript, role: 'dialer' | 'acceptor' = 'dialer'): Buffer {
  return encodeFrame({ type: 'proof', datacenter: transcript.dialerDatacenter, kind: transcript.kind, proof: new ClusterKey(key).proof(role, transcript) })
}

/** A raw client past the handshake: it seals what it sends and opens what it receives, as a real dialer does. */
export class SealedClient {
  private readonly sealer: Sealer
  private readonly opener: Opener

  constructor(
    readonly raw: RawClient,
    key: string,
    transcript: HandshakeTranscript,
  ) {
    const keys = new ClusterKey(key).sealingKeys(transcript)
    this.sealer = new Sealer(keys.dialerToAcceptor)
    this.opener = new Opener(keys.acceptorToDialer)
  }

  send(frame: Frame): void {
    this.sendPlaintext(encodeFrame(frame))
  }

  /** Seals any bytes as the next frame (a malformed one, say). */
  sendPlaintext(bytes: Buffer): void {
    this.raw.send(this.sealer.seal(bytes))
  }

  async next(timeoutMs = 3000): Promise<Frame> {
    const plaintext = this.opener.open(await this.raw.nextFrame(timeoutMs))
    if (plaintext === undefined) throw new Error('a frame from the server did not open')
    return decodeFrame(plaintext)
  }
}

/** A raw client that completes the handshake with `transport` as `node` with `key`, by the documented protocol. */
export async function authenticatedClient(cleanup: Cleanup, transport: PeerTransport, node = 'b', key = CLUSTER_KEY): Promise<SealedClient> {
  const client = await rawClient(cleanup, transport)
  const { transcript } = await helloAs(client, node)
  client.send(proofFrame(key, transcript))
  // The acceptor proves the key last, over the same transcript.
  const welcome = decodeFrame(await client.nextFrame())
  if (welcome.type !== 'welcome' || !new ClusterKey(key).verify('acceptor', transcript, welcome.proof)) throw new Error('no valid welcome')
  return new SealedClient(client, key, transcript)
}

/**
 * Sockets, servers and timers created while enabled and not yet destroyed, each with where it was created. Timers
 * count only when created by the transport or ws (the tests' own waits are not the subject); a TCP handle counts
 * whatever created it, since accepted sockets are created by libuv with no JavaScript stack.
 */
export function trackResources(): { live(): string[]; disable(): void } {
  const live = new Map<number, string>()
  const hook = createHook({
    init(id, type) {
      if (type !== 'Timeout' && type !== 'TCPWRAP' && type !== 'TCPSERVERWRAP') return
      const stack = new Error().stack ?? ''
      if (type === 'Timeout' && !/src\/transport|node_modules\/ws/.test(stack)) return
      const frames = stack.split('\n').slice(1).filter((line) => !line.includes('node:internal') && !line.includes('trackResources'))
      live.set(id, `${type} ${frames.slice(0, 6).join(' <- ')}`)
    },
    destroy(id) {
      live.delete(id)
    },
  })
  hook.enable()
  return { live: () => [...live.values()], disable: () => hook.disable() }
}
