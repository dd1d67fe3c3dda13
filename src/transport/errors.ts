/**
 * Why a request to a peer failed in the transport itself (as opposed to the peer's handler answering with an error,
 * which arrives as the WardenError the handler threw, rebuilt with errorFromWire).
 *
 * These are not WardenErrors: none of them is an answer a client should see as is. The caller (rpc/) maps them, and
 * the one thing it must know is whether the peer may have acted on the request, hence `delivered`: a forwarded write
 * that was never handed to a socket can be retried or answered `no_leader`; one that may have reached the leader
 * must be answered `outcome_unknown`, never success and never a blind retry.
 */
export type TransportErrorCode =
  /** The peer is not in the peer set (or was removed while the request waited). */
  | 'unknown_peer'
  /** The peer's send queue was full: the request was never queued. */
  | 'queue_full'
  /** requestsInFlightMax requests are already waiting for answers. */
  | 'too_many_requests'
  /** The encoded request is larger than frameBytesMax. */
  | 'frame_too_large'
  /** No answer within the caller's timeout. */
  | 'timeout'
  /** The connection was lost (or could not be made) before an answer came. */
  | 'disconnected'
  /** The transport is stopping or stopped. */
  | 'stopped'

/** 'no': the request never left this process. 'maybe': it was written to a socket, so the peer may have acted on it. */
export type Delivery = 'no' | 'maybe'

export class TransportError extends Error {
  override readonly name = 'TransportError'
  constructor(
    readonly code: TransportErrorCode,
    readonly peer: string,
    readonly delivered: Delivery,
    message: string,
  ) {
    super(`${peer}: ${message}`)
  }
}
