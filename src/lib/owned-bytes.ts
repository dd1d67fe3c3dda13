/**
 * Bytes decoded from a peer's frame are views into that frame (transport/frames.ts). What is kept long after its
 * frame is copied here first, so that it does not keep the whole frame alive: a follower's log entries until the log
 * is compacted, a forwarded command in the leader's log, a shipped-writes batch until its entries apply.
 */

/** `bytes` in a Buffer of their own. Small ones come from node's shared pool, as any small Buffer does. */
export function ownedBytes(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes)
}
