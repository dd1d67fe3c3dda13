/**
 * A tiny TCP relay for peer-link tests: it sits on the path between a dialer and an acceptor, records every byte that
 * crosses it, and understands just enough WebSocket (RFC 6455 §5.2 framing, after the HTTP upgrade) to hand each
 * frame to a test, which may pass it on, alter it, repeat it, drop it or put another in its place. It can also add
 * latency and connect upstream from another loopback address (127.0.0.2), as a peer on another machine would.
 *
 * cluster/proxy.ts is the cluster tool's proxy (partitions, whole connections); this one works frame by frame.
 */
import { createServer, connect, type Server, type Socket } from 'node:net'
import { pairSockets } from './socket-pair.js'

export type RelayDirection = 'toAcceptor' | 'toDialer'

export interface RelayFrame {
  /** Which relayed connection, from 1 in the order accepted. */
  connection: number
  direction: RelayDirection
  /** The WebSocket opcode: 2 binary, 8 close, 9 ping, 10 pong. */
  opcode: number
  /** Binary frames of this connection and direction, from 1; undefined for other opcodes. */
  binaryIndex: number | undefined
  /** The frame as it crossed the wire: header, mask key if any, payload (masked from the dialer, as RFC 6455 wants). */
  raw: Buffer
}

/** What to write in a frame's place: itself by default; nothing drops it; several repeat it or add others. */
export type Tamper = (frame: RelayFrame) => Buffer[]

export interface Relay {
  address: string
  connections: number
  /** Every frame seen, in order, both ways (bounded). */
  frames: RelayFrame[]
  tamper: Tamper | undefined
  /** Every byte that crossed, both ways, as one buffer. */
  captured(): Buffer
  /** Ends every relayed connection at once (both sides see the connection reset). */
  cutAll(): void
}

/** Bytes kept for captured(): enough for any test's traffic, bounded all the same. */
const CAPTURE_BYTES_MAX = 64 * 1024 * 1024
const FRAMES_MAX = 100_000

export interface RelayOptions {
  /** The address to connect upstream from (a loopback address other than 127.0.0.1 looks like another machine). */
  localAddress?: string
  /** Latency added to each chunk in each direction. */
  delayMs?: number
}

export async function startRelay(defer: (closer: () => unknown) => void, target: string, options: RelayOptions = {}): Promise<Relay> {
  const [host, port] = target.split(':') as [string, string]
  const sockets = new Set<Socket>()
  const chunks: Buffer[] = []
  let capturedBytes = 0
  const capture = (chunk: Buffer): void => {
    if (capturedBytes + chunk.length > CAPTURE_BYTES_MAX) return
    capturedBytes += chunk.length
    chunks.push(Buffer.from(chunk))
  }
  const server: Server = createServer((client) => {
    relay.connections += 1
    const connection = relay.connections
    const upstream = connect({ host, port: Number(port), ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress }) })
    pairSockets(client, upstream, sockets)
    const forward = (from: Socket, to: Socket, direction: RelayDirection): void => {
      const parser = new FrameSplitter((frame) => {
        if (relay.frames.length < FRAMES_MAX) relay.frames.push(frame)
        return relay.tamper?.(frame) ?? [frame.raw]
      }, connection, direction)
      from.on('data', (chunk: Buffer) => {
        capture(chunk)
        const out = parser.push(chunk)
        if (out.length === 0) return
        const write = (): void => {
          if (!to.destroyed) to.write(Buffer.concat(out))
        }
        if (options.delayMs === undefined) write()
        // Timers of one duration fire in the order set, so the delay keeps each direction's order.
        else setTimeout(write, options.delayMs)
      })
    }
    forward(client, upstream, 'toAcceptor')
    forward(upstream, client, 'toDialer')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const relay: Relay = {
    address: `127.0.0.1:${(server.address() as { port: number }).port}`,
    connections: 0,
    frames: [],
    tamper: undefined,
    captured: () => Buffer.concat(chunks),
    cutAll() {
      for (const socket of sockets) socket.resetAndDestroy()
    },
  }
  defer(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })
  return relay
}

/** Splits one direction's bytes into the HTTP upgrade (passed on as is) and then whole WebSocket frames. */
class FrameSplitter {
  private pending = Buffer.alloc(0)
  private upgraded = false
  private binaryFrames = 0

  constructor(
    private readonly onFrame: (frame: RelayFrame) => Buffer[],
    private readonly connection: number,
    private readonly direction: RelayDirection,
  ) {}

  /** What to write on for this chunk (possibly nothing yet: a frame split across chunks waits for its end). */
  push(chunk: Buffer): Buffer[] {
    this.pending = Buffer.concat([this.pending, chunk])
    const out: Buffer[] = []
    if (!this.upgraded) {
      const end = this.pending.indexOf('\r\n\r\n')
      if (end < 0) return out
      out.push(this.pending.subarray(0, end + 4))
      this.pending = this.pending.subarray(end + 4)
      this.upgraded = true
    }
    for (;;) {
      const length = frameLength(this.pending)
      if (length === undefined || this.pending.length < length) return out
      const raw = Buffer.from(this.pending.subarray(0, length))
      this.pending = this.pending.subarray(length)
      const opcode = raw[0]! & 0x0f
      const binaryIndex = opcode === 2 ? ++this.binaryFrames : undefined
      out.push(...this.onFrame({ connection: this.connection, direction: this.direction, opcode, binaryIndex, raw }))
    }
  }
}

/** The whole length of the frame `bytes` begins with, or undefined while its header is incomplete. */
function frameLength(bytes: Buffer): number | undefined {
  if (bytes.length < 2) return undefined
  const masked = (bytes[1]! & 0x80) !== 0
  let length = bytes[1]! & 0x7f
  let offset = 2
  if (length === 126) {
    if (bytes.length < 4) return undefined
    length = bytes.readUInt16BE(2)
    offset = 4
  } else if (length === 127) {
    if (bytes.length < 10) return undefined
    length = Number(bytes.readBigUInt64BE(2))
    offset = 10
  }
  return offset + (masked ? 4 : 0) + length
}

/** Where a frame's payload starts, and its mask key (zeros when unmasked). */
function payloadStart(raw: Buffer): { offset: number; mask: Buffer } {
  const masked = (raw[1]! & 0x80) !== 0
  const length = raw[1]! & 0x7f
  const offset = length === 126 ? 4 : length === 127 ? 10 : 2
  return masked ? { offset: offset + 4, mask: raw.subarray(offset, offset + 4) } : { offset, mask: Buffer.alloc(4) }
}

/** The frame's payload, unmasked. */
export function payloadOf(raw: Buffer): Buffer {
  const { offset, mask } = payloadStart(raw)
  const payload = Buffer.from(raw.subarray(offset))
  for (let index = 0; index < payload.length; index += 1) payload[index]! ^= mask[index % 4]!
  return payload
}

/** A copy of the frame with one payload bit flipped (masking is XOR, so flipping a masked byte flips the plain one). */
export function flipped(raw: Buffer, at = 0.5): Buffer {
  const copy = Buffer.from(raw)
  const { offset } = payloadStart(copy)
  const index = offset + Math.floor((copy.length - offset - 1) * at)
  copy[index]! ^= 0x01
  return copy
}

/**
 * A frame from the acceptor (unmasked) rewritten as one from a dialer (masked, with a zero mask key, so the payload
 * bytes are unchanged): to send an acceptor's frame back to it as if its peer had sealed it.
 */
export function asDialerFrame(raw: Buffer): Buffer {
  const { offset } = payloadStart(raw)
  const header = Buffer.from(raw.subarray(0, offset))
  header[1]! |= 0x80
  return Buffer.concat([header, Buffer.alloc(4), raw.subarray(offset)])
}
