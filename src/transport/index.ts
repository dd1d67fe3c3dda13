/** The peer transport: see peer-transport.ts for its contract and handshake.ts for the authentication protocol. */
export { PeerTransport, PEER_PATH } from './peer-transport.js'
export type { MessageHandler, PeerStateHandler, PeerStats, RequestHandler, TransportOptions, TransportStats } from './peer-transport.js'
export type { LinkKind } from './frames.js'
export { TransportError } from './errors.js'
export type { Delivery, TransportErrorCode } from './errors.js'
export { ClosedLinks } from './closed-links.js'
