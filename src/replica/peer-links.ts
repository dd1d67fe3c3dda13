/**
 * What the driver needs from its peer links. The agent passes the real transport (src/transport); the simulator passes
 * a simulated network. Promises the driver relies on:
 * - `send` is fire-and-forget: a message may be lost, delayed, duplicated or reordered, never altered, and never
 *   delivered from anyone but its sender. It returns false when the message could not even be queued.
 * - `request` resolves with the peer handler's answer, rejects with the error the handler threw (rebuilt as a
 *   WardenError), or with a TransportError whose `delivered` says whether the peer may have acted on it.
 * - Handlers run on the driver's event loop, one message at a time per call; they may be called at any moment between
 *   the driver's own steps.
 */
export interface PeerLinks {
  send(to: string, message: unknown): boolean
  request(to: string, message: unknown, timeoutMs: number): Promise<unknown>
  onMessage(handler: (from: string, message: unknown) => void): void
  onRequest(handler: (from: string, message: unknown) => Promise<unknown>): void
  /**
   * Reports each change after the handler is registered: a peer gaining its link (with its advertised address readable
   * then) or losing it. A link already open when the handler is registered is not reported: the agent starts the
   * transport, which dials the --peer servers, before the replica exists. So a driver registers its handler and, in
   * the same turn, asks `advertisedAddress` about each peer it knows (RaftReplica.start does).
   */
  onPeerState(handler: (peer: string, connected: boolean) => void): void
  /** The servers to keep links to (name → address to dial); links to others are closed. */
  setPeers(peers: Map<string, string>): void
  /**
   * The address `peer` advertised in its handshake while connected (it may differ from the one dialed: proxies);
   * undefined while no link to it is open (Membership.linkOpen relies on this).
   */
  advertisedAddress(peer: string): string | undefined
}
