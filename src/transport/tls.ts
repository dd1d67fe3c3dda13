/**
 * Peer links over TLS 1.3 (issue 18), when the operator has a PKI: what the transport needs of the certificates, and
 * the two checks it makes on a TLS socket beyond what OpenSSL does.
 *
 * OpenSSL, with the options below, verifies each side's chain against the one CA and the purpose of the other's
 * certificate (a dialer's must allow clientAuth, an acceptor's serverAuth). It does not check names: a dialer's
 * certificate carries no name OpenSSL would compare with anything, and the name a dialer expects depends on the
 * datacenter the acceptor states in the handshake (a Raft link expects the local one; a cross-datacenter link the
 * remote one). So the handshake checks, on both sides, that the other's certificate names `server.<its datacenter>
 * .warden` (Consul's verify_server_hostname): a certificate made for a client names `client.<dc>.warden` and never
 * acts as a server.
 *
 * Under TLS the frames after the handshake are not sealed a second time: TLS gives them secrecy, integrity and order,
 * with forward secrecy. The handshake still proves the cluster key, and binds the proofs to this TLS connection with
 * an exported keying material (RFC 5705, as RFC 9266's tls-exporter channel binding): a party holding a valid
 * certificate but not the key cannot relay two nodes' handshakes between two TLS connections of its own.
 */
import { checkServerIdentity, type PeerCertificate, type TLSSocket } from 'node:tls'
import { serverName } from '../lib/tls-names.js'

/** PEM of the CA (or CAs), of this node's certificate (and chain), and of its key. */
export interface PeerTlsMaterial {
  ca: Buffer
  cert: Buffer
  key: Buffer
}

/** TLS 1.3 only between peers: every warden node has a TLS 1.3 stack, and it is the version without legacy choices. */
export const PEER_TLS_VERSION = 'TLSv1.3' as const

/** The label of the keying material exported for the handshake's channel binding. */
const EXPORTER_LABEL = 'EXPORTER-warden-peer-v3'
const EXPORTER_BYTES = 32

/** Whether this socket is a TLS socket (a link over TLS), as opposed to plain TCP. */
export function isTlsSocket(socket: unknown): socket is TLSSocket {
  return typeof socket === 'object' && socket !== null && (socket as { encrypted?: unknown }).encrypted === true
}

/**
 * Why the certificate the other side of `socket` presented may not act as a server of `datacenter`, or undefined.
 * The chain was verified already (rejectUnauthorized): this is the name.
 */
export function peerCertificateProblem(socket: TLSSocket, datacenter: string): string | undefined {
  const expected = serverName(datacenter)
  if (!socket.authorized) return `peer certificate not verified: ${String(socket.authorizationError ?? 'no certificate')}`
  const certificate: PeerCertificate = socket.getPeerCertificate()
  if (certificate === null || Object.keys(certificate).length === 0) return 'peer presented no certificate'
  const mismatch = checkServerIdentity(expected, certificate)
  if (mismatch === undefined) return undefined
  const names = certificate.subjectaltname ?? `CN=${String(certificate.subject?.CN ?? '?')}`
  return `peer certificate does not name ${expected} (it names ${names})`
}

/** The channel binding of a TLS connection: the same bytes at both ends of it, different on every other. */
export function channelBinding(socket: TLSSocket): Buffer {
  return socket.exportKeyingMaterial(EXPORTER_BYTES, EXPORTER_LABEL, Buffer.alloc(0))
}
