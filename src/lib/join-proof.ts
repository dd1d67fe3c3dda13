/**
 * The proof a joining server gives that it holds the cluster key, without sending it: an HMAC-SHA256 over its name,
 * its advertised address, its data dir's incarnation, the time and a fresh nonce. Checked in constant time; a proof
 * whose time is more than a minute from the verifier's clock is refused.
 *
 * A proof travels in an HTTP request anyone on the path may record, so within its minute it could be sent again: to
 * re-add a server an operator just removed, or to demote a voter (a voter that asks to join is taken for one that
 * lost its data, and starts over as a non-voter). JoinReplayGuard refuses a proof whose nonce was accepted before.
 * Where it lives, and why that is enough across leader changes, is in its comment.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { WardenError } from './errors.js'

export interface JoinRequest {
  Node: string
  Address: string
  /** The joining data dir's random identifier (replica/membership.ts); covered by the proof, not a secret. */
  Incarnation?: string
  Time: number
  Nonce: string
  Proof: string
}

/** How far a proof's time may be from the verifier's clock, either way: message delay plus clock skew. */
export const PROOF_AGE_MS_MAX = 60_000
/** Joins one leader remembers within a proof's minute: far more than a cluster's servers, bounded all the same. */
export const JOIN_NONCES_MAX = 1024

/**
 * The fields as one JSON array: unambiguous whatever they hold (the incarnation may be any string), and versioned,
 * so that a proof of the earlier form (which did not cover the incarnation) is never a proof of this one.
 */
function proofOf(key: string, node: string, address: string, incarnation: string | undefined, time: number, nonce: string): Buffer {
  return createHmac('sha256', key).update(JSON.stringify(['warden-join/v2', node, address, incarnation ?? null, time, nonce])).digest()
}

export function makeJoinRequest(key: string, node: string, address: string, nowMs: number, incarnation?: string): JoinRequest {
  const nonce = randomBytes(16).toString('hex')
  const proof = proofOf(key, node, address, incarnation, nowMs, nonce).toString('hex')
  return { Node: node, Address: address, ...(incarnation === undefined ? {} : { Incarnation: incarnation }), Time: nowMs, Nonce: nonce, Proof: proof }
}

export function verifyJoinRequest(key: string, request: JoinRequest, nowMs: number): boolean {
  if (!(Math.abs(nowMs - request.Time) <= PROOF_AGE_MS_MAX)) return false
  const expected = proofOf(key, request.Node, request.Address, request.Incarnation, request.Time, request.Nonce)
  const given = Buffer.from(request.Proof, 'hex')
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/** What of a verified proof the leader checks: its nonce and the time it was made (the joining server's clock). */
export interface JoinStamp {
  nonce: string
  time: number
}

/**
 * The leader's memory of the join proofs it accepted, so that none is accepted twice.
 *
 * Where: every join, whichever server its request reached (and verified its proof), is carried out by the leader,
 * and the follower that verified it forwards the proof's nonce and time with it (rpc/cluster-node.ts). So one memory,
 * the leader's, sees every proof accepted while it leads. A nonce is kept until its proof is older than
 * PROOF_AGE_MS_MAX by the leader's own clock, after which the leader refuses the proof for its age anyway. The
 * memory is bounded (JOIN_NONCES_MAX): when it is full of proofs still young, a join is refused as rate_limited
 * rather than a nonce forgotten early. Only holders of the cluster key can fill it, since proofs are verified first.
 *
 * Across leader changes: a new leader (or this one again, after a restart or a term away) cannot know what its
 * predecessors accepted. Rather than replicate the memory through the log, it accepts only proofs made since it
 * became the leader: a proof whose time is earlier than its leadership's start, by its own clock, is refused
 * (no_leader: the joining server retries with a fresh proof, as it does after any refusal). A proof an earlier leader
 * accepted was made before that leadership ended, so before this one began. The proof's time is the joining
 * server's clock, so this holds as long as that clock is not ahead of the new leader's by more than the time between
 * the proof's making and the election: with clocks kept by NTP (milliseconds apart) a recorded proof would have to
 * be made within milliseconds of an election it then survives. The same assumption, looser, is in the minute's
 * window itself. A margin for worse clocks would delay every join right after an election by that much.
 */
export class JoinReplayGuard {
  /** Nonce to the time (this node's wall clock) after which its proof is too old anyway. Invariant: size <= noncesMax. */
  private readonly accepted = new Map<string, number>()
  /** When this node last became the leader, by its wall clock; until it leads, no proof is young enough. */
  private leaderSinceMs = Number.POSITIVE_INFINITY

  constructor(private readonly noncesMax = JOIN_NONCES_MAX) {}

  /** Called each time this node becomes the leader: it starts remembering afresh (see the class comment). */
  leadershipBegan(nowMs: number): void {
    this.accepted.clear()
    this.leaderSinceMs = nowMs
  }

  /** Remembers the proof's nonce, or throws the WardenError that refuses the join. Called on the leader only. */
  admit(stamp: JoinStamp, nowMs: number): void {
    if (!(Math.abs(nowMs - stamp.time) <= PROOF_AGE_MS_MAX)) {
      throw new WardenError('permission_denied', 'the join request is older than a minute by the leader\'s clock (or from the future): make a fresh one')
    }
    if (!(stamp.time >= this.leaderSinceMs)) {
      throw new WardenError('no_leader', 'the join proof was made before this server became the leader, which accepts only proofs made since: retry with a fresh one')
    }
    if (this.accepted.has(stamp.nonce)) throw new WardenError('permission_denied', 'the join proof was used before: a proof is good for one join')
    if (this.accepted.size >= this.noncesMax) this.forgetExpired(nowMs)
    if (this.accepted.size >= this.noncesMax) {
      throw new WardenError('rate_limited', `${this.noncesMax} servers joined within a minute; retry later`)
    }
    this.accepted.set(stamp.nonce, stamp.time + PROOF_AGE_MS_MAX)
  }

  private forgetExpired(nowMs: number): void {
    for (const [nonce, expiresAtMs] of this.accepted) if (expiresAtMs < nowMs) this.accepted.delete(nonce)
  }
}
