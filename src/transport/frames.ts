/**
 * The frames on a peer link: one msgpack array per WebSocket binary message, `[tag, ...fields]`. Arrays rather than
 * maps because every Raft message pays for its envelope, and a tag says what the fields are.
 *
 * Handshake frames (tags 1-4) are the only ones accepted before the link is authenticated, and they travel in clear;
 * everything else is refused until then, and after it every frame travels sealed (seal.ts), this encoding being the
 * plaintext (see handshake.ts for the protocol). Decoding validates the envelope completely and throws FrameError on
 * anything else, so a malformed frame from any peer, authenticated or not, closes that link and nothing more. The
 * payloads inside message, request and response frames are opaque here: they are whatever the caller sent, as
 * msgpackr (without records) decodes it.
 *
 * The hello keeps the shape it had in versions 1 and 2 ([tag, version, node, address, nonce]), so that nodes of any
 * version can read each other's version and refuse with a line that says so, rather than with "malformed frame".
 */
import { Packr } from 'msgpackr'
import type { WireError } from '../lib/errors.js'

/**
 * 3: every frame after the handshake is sealed, and the handshake carries each side's datacenter and link kind.
 * (2: the acceptor proves the key last, in welcome, so that a stranger who dials it learns nothing keyed.) There is
 * no mixed mode: a node refuses a peer of any other version (handshake.ts).
 */
export const PROTOCOL_VERSION = 3
/** Bytes of each side's nonce: 256 bits, so a nonce never repeats by chance. */
export const NONCE_BYTES = 32
/** Bytes of an HMAC-SHA256 proof. */
export const PROOF_BYTES = 32
/** Node names are short identifiers; the bound keeps a hostile hello small and log lines short. */
export const NODE_NAME_CHARS_MAX = 128
/** An advertised address is host:port; 256 characters holds any DNS name (253) with a port. */
export const ADDRESS_CHARS_MAX = 256
/** The agent's datacenter rule allows 64 characters (agent/config.ts); the wire takes no more. */
export const DATACENTER_CHARS_MAX = 64
/**
 * What a link is for, on the same handshake and sealing. 'raft': the servers of one datacenter (a peer of another
 * datacenter is refused). 'wan': servers of every datacenter, each named NODE.DC (wanName), which federation's
 * membership, forwarding and replication run over. A transport serves one kind, and refuses a peer that asks for
 * another; each kind has its path on the shared cluster port (LINK_PATHS).
 */
export type LinkKind = 'raft' | 'wan'
export const LINK_KINDS: readonly LinkKind[] = ['raft', 'wan']

/** The WebSocket path of each kind of link on the cluster port (listener.ts). */
export const LINK_PATHS: Record<LinkKind, string> = { raft: '/warden/peer/v1', wan: '/warden/wan/v1' }

/** A server's name among WAN links: its node name, a dot, its datacenter (Consul's WAN member names). */
export function wanName(node: string, datacenter: string): string {
  return `${node}.${datacenter}`
}

/**
 * The datacenter a WAN name says (after its last dot: node names may hold dots, datacenter names never do), or
 * undefined when the name has none.
 */
export function datacenterOfWanName(name: string): string | undefined {
  const dot = name.lastIndexOf('.')
  if (dot <= 0 || dot === name.length - 1) return undefined
  const datacenter = name.slice(dot + 1)
  return WAN_DATACENTER.test(datacenter) ? datacenter : undefined
}

/** As the agent's rule for datacenter names (agent/config.ts). */
const WAN_DATACENTER = /^[a-z0-9_-]{1,64}$/
/** A link kind as the wire carries it: any short string, so that a peer asking for a kind we lack is refused by name. */
const LINK_KIND_CHARS_MAX = 16
/**
 * Handshake frames are a few hundred bytes at most; a larger one before authentication is refused before decoding,
 * so an unauthenticated client cannot make us parse megabytes.
 */
export const HANDSHAKE_FRAME_BYTES_MAX = 1024

const TAG = {
  hello: 1,
  challenge: 2,
  proof: 3,
  welcome: 4,
  message: 16,
  request: 17,
  response: 18,
  failure: 19,
} as const

export type HandshakeFrame =
  /** Dialer to acceptor: who I am, the cluster address I advertise, and my fresh nonce. */
  | { type: 'hello'; version: number; node: string; address: string; nonce: Buffer }
  /**
   * Acceptor to dialer: who I am, the address I advertise, my datacenter, the kind of link I serve, and my fresh
   * nonce. No proof yet: see handshake.ts.
   */
  | { type: 'challenge'; node: string; address: string; datacenter: string; kind: string; nonce: Buffer }
  /** Dialer to acceptor: my datacenter, the kind of link I ask for, and my proof of the key over the transcript. */
  | { type: 'proof'; datacenter: string; kind: string; proof: Buffer }
  /** Acceptor to dialer: you are authenticated, this link is the one we keep, and here is my proof of the key. */
  | { type: 'welcome'; proof: Buffer }

export type DataFrame =
  | { type: 'message'; payload: unknown }
  | { type: 'request'; id: number; payload: unknown }
  | { type: 'response'; id: number; payload: unknown }
  | { type: 'failure'; id: number; error: WireError }

export type Frame = HandshakeFrame | DataFrame

export class FrameError extends Error {
  override readonly name: string = 'FrameError'
}

/** A hello of another protocol version, refused as such whatever else it carries (see the file comment). */
export class ProtocolVersionError extends FrameError {
  override readonly name = 'ProtocolVersionError'
  constructor(readonly version: number) {
    super(`unsupported protocol version ${version}`)
  }
}

// Records (msgpackr's shared structures) are off: they would make a frame's meaning depend on earlier frames.
// A binary field decodes to a view into the frame's bytes (no copyBuffers): a copy per field was a new ArrayBuffer
// each, through Uint8Array's slow species path, and cost 5–26 µs per write over the cluster (docs/benchmarks.md,
// issue 22, twelfth session). A frame's bytes are never reused, so a view stays valid; what a receiver keeps long
// after the frame it copies (lib/owned-bytes.ts), so as not to keep a frame of up to frameBytesMax alive with it.
const packr = new Packr({ useRecords: false })

export function encodeFrame(frame: Frame): Buffer {
  return packr.pack(toArray(frame))
}

function toArray(frame: Frame): unknown[] {
  switch (frame.type) {
    case 'hello':
      return [TAG.hello, frame.version, frame.node, frame.address, frame.nonce]
    case 'challenge':
      return [TAG.challenge, frame.node, frame.address, frame.datacenter, frame.kind, frame.nonce]
    case 'proof':
      return [TAG.proof, frame.datacenter, frame.kind, frame.proof]
    case 'welcome':
      return [TAG.welcome, frame.proof]
    case 'message':
      return [TAG.message, frame.payload]
    case 'request':
      return [TAG.request, frame.id, frame.payload]
    case 'response':
      return [TAG.response, frame.id, frame.payload]
    case 'failure':
      return [TAG.failure, frame.id, frame.error]
  }
}

/** Decodes and validates one frame; throws FrameError on anything that is not exactly a frame. */
export function decodeFrame(bytes: Buffer): Frame {
  let value: unknown
  try {
    value = packr.unpack(bytes)
  } catch (error) {
    // Truncated data, trailing bytes, or nesting deep enough to overflow the stack: all mean a bad frame.
    throw new FrameError(`not msgpack: ${decoderProblem(error)}`)
  }
  if (!Array.isArray(value) || value.length === 0) throw new FrameError('not a frame array')
  const [tag, ...fields] = value as unknown[]
  switch (tag) {
    case TAG.hello:
      // The version first, whatever the rest: the one thing every version's hello is sure to agree on.
      if (integer(fields[0], 'version') !== PROTOCOL_VERSION) throw new ProtocolVersionError(integer(fields[0], 'version'))
      expectFields('hello', fields, 4)
      return {
        type: 'hello',
        version: integer(fields[0], 'version'),
        node: nodeName(fields[1]),
        address: address(fields[2]),
        nonce: bytesOf(fields[3], NONCE_BYTES, 'nonce'),
      }
    case TAG.challenge:
      expectFields('challenge', fields, 5)
      return {
        type: 'challenge',
        node: nodeName(fields[0]),
        address: address(fields[1]),
        datacenter: datacenter(fields[2]),
        kind: linkKind(fields[3]),
        nonce: bytesOf(fields[4], NONCE_BYTES, 'nonce'),
      }
    case TAG.proof:
      expectFields('proof', fields, 3)
      return { type: 'proof', datacenter: datacenter(fields[0]), kind: linkKind(fields[1]), proof: bytesOf(fields[2], PROOF_BYTES, 'proof') }
    case TAG.welcome:
      expectFields('welcome', fields, 1)
      return { type: 'welcome', proof: bytesOf(fields[0], PROOF_BYTES, 'proof') }
    case TAG.message:
      expectFields('message', fields, 1)
      return { type: 'message', payload: fields[0] }
    case TAG.request:
      expectFields('request', fields, 2)
      return { type: 'request', id: integer(fields[0], 'id'), payload: fields[1] }
    case TAG.response:
      expectFields('response', fields, 2)
      return { type: 'response', id: integer(fields[0], 'id'), payload: fields[1] }
    case TAG.failure:
      expectFields('failure', fields, 2)
      return { type: 'failure', id: integer(fields[0], 'id'), error: wireError(fields[1]) }
    default:
      throw new FrameError('unknown frame tag')
  }
}

export function isHandshakeFrame(frame: Frame): frame is HandshakeFrame {
  return frame.type === 'hello' || frame.type === 'challenge' || frame.type === 'proof' || frame.type === 'welcome'
}

/** The rule for node names on the wire: the same bound the handshake applies to a hello. */
export function isNodeName(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= NODE_NAME_CHARS_MAX
}

function expectFields(type: string, fields: unknown[], count: number): void {
  if (fields.length !== count) throw new FrameError(`${type} frame must have ${count} fields`)
}

function integer(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) throw new FrameError(`${field} must be a non-negative integer`)
  return value
}

function nodeName(value: unknown): string {
  if (!isNodeName(value)) throw new FrameError(`node name must be a string of 1 to ${NODE_NAME_CHARS_MAX} characters`)
  return value
}

/** The rule for a datacenter name on the wire (the agent's own rule is stricter: agent/config.ts). */
export function isDatacenter(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= DATACENTER_CHARS_MAX
}

function datacenter(value: unknown): string {
  if (!isDatacenter(value)) throw new FrameError(`datacenter must be a string of 1 to ${DATACENTER_CHARS_MAX} characters`)
  return value
}

function linkKind(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > LINK_KIND_CHARS_MAX) {
    throw new FrameError(`link kind must be a string of 1 to ${LINK_KIND_CHARS_MAX} characters`)
  }
  return value
}

/**
 * The decoder's complaint, named by kind and without the data: msgpackr puts what it decoded into some of its messages
 * (up to 100 characters of it after trailing bytes, the value of an unknown token or extension), and a frame's
 * plaintext (a SecretID inside a log entry, say) must never reach a log line.
 */
function decoderProblem(error: unknown): string {
  const message = error instanceof Error ? error.message : ''
  if (message.startsWith('Data read, but end of buffer not reached')) return 'trailing bytes after the frame'
  if (message.startsWith('Unexpected end')) return 'truncated'
  if (message.startsWith('Unknown')) return 'unknown token or extension'
  if (error instanceof RangeError) return 'nested too deeply'
  return 'undecodable'
}

function address(value: unknown): string {
  if (typeof value !== 'string' || value.length > ADDRESS_CHARS_MAX) {
    throw new FrameError(`address must be a string of at most ${ADDRESS_CHARS_MAX} characters`)
  }
  return value
}

function bytesOf(value: unknown, length: number, field: string): Buffer {
  if (!(value instanceof Uint8Array) || value.length !== length) throw new FrameError(`${field} must be ${length} bytes`)
  return Buffer.from(value.buffer, value.byteOffset, value.byteLength)
}

function wireError(value: unknown): WireError {
  if (typeof value !== 'object' || value === null) throw new FrameError('failure error must be an object')
  const { code, message, field } = value as Record<string, unknown>
  if (typeof code !== 'string' || typeof message !== 'string' || (field !== undefined && typeof field !== 'string')) {
    throw new FrameError('failure error must be { code, message, field? } of strings')
  }
  // The code is trusted to be an ErrorCode: it comes from an authenticated peer running warden.
  return { code: code as WireError['code'], message, field }
}
