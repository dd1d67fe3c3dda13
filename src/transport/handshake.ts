/**
 * Mutual challenge-response authentication of a peer link over the shared cluster key, and the keys that seal every
 * frame after it (seal.ts).
 *
 * The protocol (version 3), on a fresh WebSocket, before any other frame:
 *
 *   dialer   -> acceptor  hello     { version, node: D, address: Dadv, nonce: Nd }                      in clear
 *   acceptor -> dialer    challenge { node: A, address: Aadv, datacenter: Adc, kind, nonce: Na }        in clear
 *   dialer   -> acceptor  proof     { datacenter: Ddc, kind, proof: HMAC(K, "dialer" | T) }             in clear
 *   acceptor -> dialer    welcome   { proof: HMAC(K, "acceptor" | T) }                                  in clear
 *   then, each way, only sealed frames: AEAD(key of that direction, sequence number, frame)
 *
 *   where T = kind | D | A | Dadv | Aadv | Ddc | Adc | Nd | Na, each field length-prefixed, and K is the cluster key
 *   the dialer proved with (see "Several keys").
 *
 * Authentication:
 * - The key never crosses the wire; each side proves it knows the key by an HMAC-SHA256 over the transcript T. Both
 *   nonces are fresh (node:crypto, 32 bytes) per connection, so a recorded proof is worthless on any other one.
 * - The dialer proves first. Anyone can connect to the peer port and name a peer; had the acceptor proved first (as
 *   version 1 did), that stranger would get an HMAC of the key over a transcript it helped choose, and could test
 *   guesses of a weak key against it offline. The dialer proves only to the address it was given for a peer. (A party
 *   that records a real handshake can still test guesses against its proofs offline: the key must be random, as
 *   `warden keygen` makes it, not a password.)
 * - The direction label makes the two proofs of one connection different, so a party without the key cannot
 *   reflect a node's proof back to it as its own, nor borrow a proof a node made in the other role. The labels carry
 *   the version: a proof made under one version is never a proof under another.
 * - Identity is the node name carried (and proven) here, not the address the connection came from or was dialed
 *   to: a peer may sit behind a proxy, and its advertised cluster address may differ from the one dialed.
 * - The acceptor refuses a hello of another version or naming a node outside its peer set before it proves anything;
 *   the dialer refuses a challenge from any node but the one it meant to dial, or from another datacenter or kind of
 *   link, before it proves anything; the acceptor refuses a proof from another datacenter or kind of link. The
 *   datacenters and the kind are in T, so neither side can be told a different one than the other proved.
 *   Proofs are compared with crypto.timingSafeEqual.
 * - welcome tells the dialer that the acceptor verified it and keeps this link (rather than a duplicate), and
 *   carries the acceptor's proof, which the dialer verifies before it sends or accepts anything else.
 * - Versions: there is no mixed mode. A node refuses a hello of any other version, and logs both versions; the hello
 *   keeps the shape of every earlier version, so a node of version 2 refuses a version 3 hello the same way.
 *
 * Sealing (what version 2 lacked: it had no secrecy nor integrity after the handshake):
 * - Two keys per link, one per direction, from HKDF-SHA256 (RFC 5869): the cluster key K as input key material,
 *   Nd | Na as the salt, and the direction's label and T as the info. Fresh nonces make fresh keys on every link, so
 *   nothing sealed on one link opens on another, and nothing sealed in one direction opens in the other.
 * - Each frame is AES-256-GCM under its direction's key, with a 96-bit nonce of four zero bytes and a 64-bit
 *   sequence number (0, 1, 2... per direction), the same eight bytes as associated data. The number is not sent:
 *   each side counts the frames it sealed and opened. WebSocket over TCP delivers in order, so a frame dropped,
 *   replayed, reordered or altered fails to open at the receiver, which closes the link (the transport redials and
 *   the new link has new keys). A link that sealed 2^48 frames closes too rather than come near a nonce's reuse.
 * - Handshake frames stay in clear: they hold names, addresses, datacenters, nonces and HMACs, none secret, and the
 *   proofs must be verifiable before any key is trusted (the acceptor learns which key to seal under from the proof).
 *   Every field they carry is bound by T, into both the proofs and the sealing keys.
 * - What is not protected: the link's existence and timing, its frames' sizes (to within the WebSocket framing),
 *   and its availability (anyone on the path can cut it). WebSocket control frames (ping, pong, close) carry nothing
 *   and are not sealed. The keys derive from K alone, with no Diffie-Hellman: whoever learns K can read links they
 *   recorded before (TLS gives forward secrecy).
 *
 * Over TLS (tls.ts) the same four frames run inside the TLS connection, T ends with the connection's exported keying
 * material (so a proof is good on that connection only), and both sides check that the other's certificate names
 * `server.<its datacenter>.warden` before proving anything. No sealing follows: TLS already gives every frame
 * secrecy, integrity and order.
 *
 * Several keys (rotation): a node proves with its cluster key and accepts a dialer's proof made with that key or any
 * key it is told to accept. The acceptor finds which by verifying the proof under each; it proves in welcome, and
 * derives the sealing keys, under that same key, and the dialer (which knows one key) checks the welcome under the
 * key it proved with, so both sides seal under the key the handshake used or the link does not open.
 */
import { createHmac, createSecretKey, hkdfSync, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto'
import { inspect } from 'node:util'
import { NONCE_BYTES, PROOF_BYTES } from './frames.js'

export type Direction = 'dialer' | 'acceptor'

/** Versioned with the protocol: a proof made under one version is never a proof under another. */
const LABEL: Record<Direction, Buffer> = {
  dialer: Buffer.from('warden/peer/v3 dialer proof'),
  acceptor: Buffer.from('warden/peer/v3 acceptor proof'),
}

/** HKDF info labels, one per direction of a link: the key a side seals with is the one the other side opens with. */
const SEALING_LABEL = {
  dialerToAcceptor: Buffer.from('warden/peer/v3 seal dialer to acceptor'),
  acceptorToDialer: Buffer.from('warden/peer/v3 seal acceptor to dialer'),
}

/** AES-256 takes a 32-byte key. */
export const SEALING_KEY_BYTES = 32

/** Keys a node may accept besides its own: each costs an HMAC per proof from anyone who reaches the peer port. */
export const ACCEPT_KEYS_MAX = 8

export interface HandshakeTranscript {
  /** The kind of link (frames.ts LinkKind), as both sides stated it. */
  kind: string
  dialerNode: string
  acceptorNode: string
  dialerAddress: string
  acceptorAddress: string
  dialerDatacenter: string
  acceptorDatacenter: string
  dialerNonce: Buffer
  acceptorNonce: Buffer
  /**
   * On a link over TLS, the connection's exported keying material (tls.ts), so that a proof holds on this TLS
   * connection only. Absent on a plain link, whose transcript is then what it was before TLS existed.
   */
  channelBinding?: Buffer
}

/** The two sealing keys of one link, as KeyObjects (which print their type and size, never their bytes). */
export interface SealingKeys {
  dialerToAcceptor: KeyObject
  acceptorToDialer: KeyObject
}

/**
 * A cluster key, held so that it cannot leak by accident: the bytes live in a #private field, and logging or
 * serialising the object (pino, JSON.stringify, util.inspect) prints "[redacted]".
 */
export class ClusterKey {
  readonly #key: Buffer

  constructor(key: string) {
    this.#key = Buffer.from(key, 'utf8')
  }

  /** The proof that the `direction` side of the transcribed connection knows the key. */
  proof(direction: Direction, transcript: HandshakeTranscript): Buffer {
    return createHmac('sha256', this.#key).update(LABEL[direction]).update(transcriptBytes(transcript)).digest()
  }

  /** Whether `proof` is the `direction` side's proof, compared in constant time. */
  verify(direction: Direction, transcript: HandshakeTranscript, proof: Buffer): boolean {
    const expected = this.proof(direction, transcript)
    // Lengths are public (PROOF_BYTES); timingSafeEqual throws on a mismatch, so check first.
    return proof.length === PROOF_BYTES && timingSafeEqual(expected, proof)
  }

  /** The link's two sealing keys: HKDF-SHA256 of this key, salted with both nonces, per direction over the transcript. */
  sealingKeys(transcript: HandshakeTranscript): SealingKeys {
    const salt = Buffer.concat([transcript.dialerNonce, transcript.acceptorNonce])
    const fields = transcriptBytes(transcript)
    const derive = (label: Buffer): KeyObject =>
      createSecretKey(Buffer.from(hkdfSync('sha256', this.#key, salt, Buffer.concat([label, fields]), SEALING_KEY_BYTES)))
    return { dialerToAcceptor: derive(SEALING_LABEL.dialerToAcceptor), acceptorToDialer: derive(SEALING_LABEL.acceptorToDialer) }
  }

  toJSON(): string {
    return '[redacted]'
  }

  [inspect.custom](): string {
    return 'ClusterKey [redacted]'
  }
}

/** The key a node proves with, and the keys it accepts besides (rotation: see the file comment). */
export class ClusterKeys {
  readonly proving: ClusterKey
  /** The proving key first: the one a peer most likely used. */
  private readonly accepting: readonly ClusterKey[]

  constructor(proving: string, accepted: readonly string[] = []) {
    this.proving = new ClusterKey(proving)
    this.accepting = [this.proving, ...[...new Set(accepted)].filter((key) => key !== proving).map((key) => new ClusterKey(key))]
  }

  /** The accepted key under which `proof` is the `direction` side's proof, if any. */
  verifying(direction: Direction, transcript: HandshakeTranscript, proof: Buffer): ClusterKey | undefined {
    return this.accepting.find((key) => key.verify(direction, transcript, proof))
  }

  toJSON(): string {
    return '[redacted]'
  }

  [inspect.custom](): string {
    return 'ClusterKeys [redacted]'
  }
}

/** The transcript as HMAC and HKDF input: every field length-prefixed, so no two different transcripts share one. */
function transcriptBytes(transcript: HandshakeTranscript): Buffer {
  const fields = [
    Buffer.from(transcript.kind, 'utf8'),
    Buffer.from(transcript.dialerNode, 'utf8'),
    Buffer.from(transcript.acceptorNode, 'utf8'),
    Buffer.from(transcript.dialerAddress, 'utf8'),
    Buffer.from(transcript.acceptorAddress, 'utf8'),
    Buffer.from(transcript.dialerDatacenter, 'utf8'),
    Buffer.from(transcript.acceptorDatacenter, 'utf8'),
    transcript.dialerNonce,
    transcript.acceptorNonce,
    ...(transcript.channelBinding === undefined ? [] : [transcript.channelBinding]),
  ]
  const parts: Buffer[] = []
  for (const field of fields) {
    const length = Buffer.alloc(4)
    length.writeUInt32BE(field.length)
    parts.push(length, field)
  }
  return Buffer.concat(parts)
}

export function freshNonce(): Buffer {
  return randomBytes(NONCE_BYTES)
}
