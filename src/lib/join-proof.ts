/**
 * The proof a joining server gives that it holds the cluster key, without sending it: an HMAC-SHA256 over its name,
 * its advertised address, the time and a fresh nonce. Checked in constant time; a proof older than a minute is refused,
 * so a recorded request cannot be replayed later (replaying it within the minute only re-adds the same server).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

export interface JoinRequest {
  Node: string
  Address: string
  /** The joining data dir's random identifier (replica/membership.ts); not covered by the proof, and not a secret. */
  Incarnation?: string
  Time: number
  Nonce: string
  Proof: string
}

const PROOF_AGE_MS_MAX = 60_000

function proofOf(key: string, node: string, address: string, time: number, nonce: string): Buffer {
  return createHmac('sha256', key).update(`warden-join\u0000${node}\u0000${address}\u0000${time}\u0000${nonce}`).digest()
}

export function makeJoinRequest(key: string, node: string, address: string, nowMs: number): JoinRequest {
  const nonce = randomBytes(16).toString('hex')
  return { Node: node, Address: address, Time: nowMs, Nonce: nonce, Proof: proofOf(key, node, address, nowMs, nonce).toString('hex') }
}

export function verifyJoinRequest(key: string, request: JoinRequest, nowMs: number): boolean {
  if (Math.abs(nowMs - request.Time) > PROOF_AGE_MS_MAX) return false
  const expected = proofOf(key, request.Node, request.Address, request.Time, request.Nonce)
  const given = Buffer.from(request.Proof, 'hex')
  return given.length === expected.length && timingSafeEqual(given, expected)
}
