/**
 * Writes a follower forwards to the leader: the shapes of the request and answer, and what each outcome means for
 * the callers waiting on them. The batching itself (one request per turn of the event loop) is in cluster-node.ts.
 */
import { errorFromWire, WardenError, type WireError } from '../lib/errors.js'
import { ownedBytes } from '../lib/owned-bytes.js'
import { TransportError } from '../transport/index.js'
import type { ProposalOutcome } from '../replica/raft-replica.js'

/** A forwarded batch closes at this many commands or encoded bytes (a larger command goes alone). */
export const FORWARD_BATCH_COMMANDS_MAX = 256
export const FORWARD_BATCH_BYTES_MAX = 1024 * 1024

/**
 * The leader's answer to one forwarded command: its apply result and the log index it was applied at, and
 * `namesIndex`, the last index at which the leader's policies or roles had changed when it answered (absent from a
 * leader of an older build). A follower whose state has reached `namesIndex` resolves the names of the policies and
 * roles a result links to as the leader would at the command's index: nothing renamed, created or deleted one since.
 */
export type ReplicaResponse = ProposalOutcome & { namesIndex?: number }


/**
 * Whether a follower may answer a forwarded write before applying it itself (ProposeOptions.answerBeforeLocalApply):
 * the answer renders the names of the policies and roles the result links to from this node's state, which must
 * then name them as the leader's did. Otherwise the answer waits for this node's own apply, as it always did.
 */
export function namesCurrent(response: ReplicaResponse, lastApplied: number): boolean {
  return typeof response.namesIndex === 'number' && response.namesIndex <= lastApplied
}
/** The leader's answer to a forwarded batch, one outcome per command, in order. */
export type ProposeResponse = { outcomes: Array<ReplicaResponse | { error: WireError }> }

export interface ForwardBatch {
  leader: string
  bytes: number
  items: Array<{ data: Uint8Array; resolve: (response: ReplicaResponse) => void; reject: (error: unknown) => void }>
}

/** What a failed forward means for its writes: whether the leader may have them decides between retry and unknown. */
export function forwardFailure(leader: string, error: unknown): WardenError {
  // The leader refused the request before proposing anything: not applied.
  if (error instanceof WardenError && (error.code === 'no_leader' || error.code === 'rate_limited')) return error
  if (error instanceof WardenError && error.code === 'invalid_input') return refusedByLeader(leader, error)
  if (error instanceof TransportError && error.delivered === 'no') {
    return new WardenError('no_leader', `the leader ${leader} could not be reached; the write was not applied, retry`, undefined, { cause: error })
  }
  // Anything else (no answer in time, an answer too large to send back after the writes committed, ...) may come after
  // the writes were applied.
  return new WardenError('outcome_unknown', `the leader ${leader} did not answer in time; the write may or may not have been applied`, undefined, { cause: error })
}

/** Hands each forwarded write its own outcome from the leader's answer; every one settles, whatever the answer holds. */
export function settleForwarded(leader: string, items: ForwardBatch['items'], response: unknown): void {
  const outcomes = (response as Partial<ProposeResponse> | undefined)?.outcomes
  const unknown = (): WardenError => new WardenError('outcome_unknown', `the leader ${leader} did not answer for this write; it may or may not have been applied`)
  for (const [n, item] of items.entries()) {
    const outcome = Array.isArray(outcomes) && outcomes.length === items.length ? (outcomes[n] as unknown) : undefined
    if (typeof outcome !== 'object' || outcome === null) item.reject(unknown())
    else if ('error' in outcome) item.reject(outcomeError(leader, errorFromWire((outcome as { error: WireError }).error)))
    else if (typeof (outcome as Partial<ReplicaResponse>).index === 'number') item.resolve(outcome as ReplicaResponse)
    else item.reject(unknown())
  }
}

function outcomeError(leader: string, error: WardenError): WardenError {
  return error.code === 'invalid_input' ? refusedByLeader(leader, error) : error
}

/**
 * The leader refused a forwarded command as malformed, or of a version or type it does not know (cluster-node.ts),
 * before proposing it. Not the client's input: this node built the command from a request it had accepted, so the
 * caller sees an internal error (500) saying the write was not applied, never invalid_input (400) or outcome_unknown.
 * During a rolling upgrade this is a newer follower's command that an older leader cannot apply.
 */
function refusedByLeader(leader: string, error: WardenError): WardenError {
  return new WardenError('internal', `the leader ${leader} refused the write: ${error.message}`, undefined, { cause: error })
}

/**
 * A forwarded command as the leader proposes it: bytes of its own, not a view that keeps the forwarded batch's frame
 * alive as long as the log keeps the entry (lib/owned-bytes.ts); never empty (an empty entry could not be applied
 * anywhere).
 */
export function commandBytes(data: unknown): Uint8Array {
  if (!(data instanceof Uint8Array) || data.byteLength === 0) throw new WardenError('invalid_input', 'a forwarded command must be non-empty bytes')
  return ownedBytes(data)
}
