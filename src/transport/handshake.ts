/**
 * Mutual challenge-response authentication of a peer link over the shared cluster key.
 *
 * The protocol (version 2), on a fresh WebSocket, before any other frame:
 *
 *   dialer   -> acceptor  hello     { version, node: D, address: Dadv, nonce: Nd }
 *   acceptor -> dialer    challenge { node: A, address: Aadv, nonce: Na }
 *   dialer   -> acceptor  proof     { proof: HMAC(key, "dialer" | T) }
 *   acceptor -> dialer    welcome   { proof: HMAC(key, "acceptor" | T) }
 *
 *   where T = D | A | Dadv | Aadv | Nd | Na, each field length-prefixed
 *
 * - The key never crosses the wire; each side proves it knows the key by an HMAC-SHA256 over both names, both
 *   advertised addresses and both nonces. Both nonces are fresh (node:crypto) per connection, so a recorded proof
 *   is worthless on any other one.
 * - The dialer proves first. Anyone can connect to the peer port and name a peer; had the acceptor proved first (as
 *   version 1 did), that stranger would get an HMAC of the key over a transcript it helped choose, and could test
 *   guesses of a weak key against it offline. The dialer proves only to the address it was given for a peer.
 * - The direction label makes the two proofs of one connection different, so a party without the key cannot
 *   reflect a node's proof back to it as its own, nor borrow a proof a node made in the other role.
 * - Every field is length-prefixed in the HMAC input, so no two different transcripts share an input.
 * - Identity is the node name carried (and proven) here, not the address the connection came from or was dialed
 *   to: a peer may sit behind a proxy, and its advertised cluster address may differ from the one dialed.
 * - The acceptor refuses a hello naming a node outside its peer set before it proves anything; the dialer refuses a
 *   challenge from any node but the one it meant to dial. Proofs are compared with crypto.timingSafeEqual.
 * - welcome tells the dialer that the acceptor verified it and keeps this link (rather than a duplicate), and
 *   carries the acceptor's proof, which the dialer verifies before it sends or accepts anything else.
 *
 * What this does not give: secrecy or integrity after the handshake. Frames are neither encrypted nor MACed, so a
 * party on the network path can read them and, by relaying a genuine handshake, inject into the link. Encryption
 * for untrusted networks needs sealed frames or TLS (issue 18); until then peers must talk over a trusted network.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { inspect } from 'node:util'
import { NONCE_BYTES, PROOF_BYTES } from './frames.js'

export type Direction = 'dialer' | 'acceptor'

/** Versioned with the protocol: a proof made under one version is never a proof under another. */
const LABEL: Record<Direction, Buffer> = {
  dialer: Buffer.from('warden/peer/v2 dialer proof'),
  acceptor: Buffer.from('warden/peer/v2 acceptor proof'),
}

export interface HandshakeTranscript {
  dialerNode: string
  acceptorNode: string
  dialerAddress: string
  acceptorAddress: string
  dialerNonce: Buffer
  acceptorNonce: Buffer
}

/**
 * The cluster key, held so that it cannot leak by accident: the bytes live in a #private field, and logging or
 * serialising the object (pino, JSON.stringify, util.inspect) prints "[redacted]".
 */
export class ClusterKey {
  readonly #key: Buffer

  constructor(key: string) {
    this.#key = Buffer.from(key, 'utf8')
  }

  /** The proof that the `direction` side of the transcribed connection knows the key. */
  proof(direction: Direction, transcript: HandshakeTranscript): Buffer {
    const hmac = createHmac('sha256', this.#key)
    hmac.update(LABEL[direction])
    for (const field of [
      Buffer.from(transcript.dialerNode, 'utf8'),
      Buffer.from(transcript.acceptorNode, 'utf8'),
      Buffer.from(transcript.dialerAddress, 'utf8'),
      Buffer.from(transcript.acceptorAddress, 'utf8'),
      transcript.dialerNonce,
      transcript.acceptorNonce,
    ]) {
      const length = Buffer.alloc(4)
      length.writeUInt32BE(field.length)
      hmac.update(length)
      hmac.update(field)
    }
    return hmac.digest()
  }

  /** Whether `proof` is the `direction` side's proof, compared in constant time. */
  verify(direction: Direction, transcript: HandshakeTranscript, proof: Buffer): boolean {
    const expected = this.proof(direction, transcript)
    // Lengths are public (PROOF_BYTES); timingSafeEqual throws on a mismatch, so check first.
    return proof.length === PROOF_BYTES && timingSafeEqual(expected, proof)
  }

  toJSON(): string {
    return '[redacted]'
  }

  [inspect.custom](): string {
    return 'ClusterKey [redacted]'
  }
}

export function freshNonce(): Buffer {
  return randomBytes(NONCE_BYTES)
}
