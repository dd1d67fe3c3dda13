/**
 * Join proofs (lib/join-proof.ts): what the proof covers, and the leader's memory that accepts each proof once
 * (issue 18: a recorded proof could be sent again within its minute). The end-to-end refusals, through a follower,
 * another follower and a new leader, are in test/cluster/membership.test.ts.
 */
import { expect } from 'chai'
import { JOIN_NONCES_MAX, JoinReplayGuard, makeJoinRequest, PROOF_AGE_MS_MAX, verifyJoinRequest } from '../../../src/lib/join-proof.js'
import { WardenError } from '../../../src/lib/errors.js'

const KEY = 'join-proof-test-key-0123456789ab'
const NOW = 1_700_000_000_000

function refusal(action: () => void): WardenError | undefined {
  try {
    action()
  } catch (error) {
    if (error instanceof WardenError) return error
    throw error
  }
  return undefined
}

describe('lib: join proofs', () => {
  it('verifies a proof with the key within its minute, and refuses one altered in any field, out of time or made with another key', () => {
    const request = makeJoinRequest(KEY, 'n4', '10.0.0.4:8300', NOW, 'incarnation-1')
    expect(verifyJoinRequest(KEY, request, NOW + PROOF_AGE_MS_MAX)).to.equal(true)
    expect(verifyJoinRequest(KEY, request, NOW + PROOF_AGE_MS_MAX + 1)).to.equal(false)
    expect(verifyJoinRequest('another-key-0123456789abcdef', request, NOW)).to.equal(false)
    for (const altered of [
      { ...request, Node: 'n5' },
      { ...request, Address: '10.0.0.5:8300' },
      // The incarnation is covered: a replayed proof cannot pass for another data dir.
      { ...request, Incarnation: 'incarnation-2' },
      { ...request, Incarnation: undefined },
      { ...request, Time: NOW + 1 },
      { ...request, Nonce: 'f'.repeat(32) },
    ]) {
      expect(verifyJoinRequest(KEY, altered, NOW), JSON.stringify(altered)).to.equal(false)
    }
  })

  it('the leader accepts a proof once: the same nonce again is refused while its proof could still pass', () => {
    const guard = new JoinReplayGuard()
    guard.leadershipBegan(NOW - 1_000)
    guard.admit({ nonce: 'a1', time: NOW }, NOW)
    const again = refusal(() => guard.admit({ nonce: 'a1', time: NOW }, NOW + 30_000))
    expect(again?.code).to.equal('permission_denied')
    expect(again?.message).to.include('used before')
    expect(refusal(() => guard.admit({ nonce: 'a2', time: NOW + 10 }, NOW + 10))).to.equal(undefined)
  })

  it('refuses a proof older than a minute by the leader clock, whatever the follower that verified it thought', () => {
    const guard = new JoinReplayGuard()
    guard.leadershipBegan(NOW - 120_000)
    expect(refusal(() => guard.admit({ nonce: 'old', time: NOW - PROOF_AGE_MS_MAX - 1 }, NOW))?.code).to.equal('permission_denied')
    expect(refusal(() => guard.admit({ nonce: 'future', time: NOW + PROOF_AGE_MS_MAX + 1 }, NOW))?.code).to.equal('permission_denied')
  })

  it('refuses a proof made before this node became the leader, and forgets what it accepted in an earlier term', () => {
    const guard = new JoinReplayGuard()
    // Not yet a leader: nothing is young enough.
    expect(refusal(() => guard.admit({ nonce: 'early', time: NOW }, NOW))?.code).to.equal('no_leader')
    guard.leadershipBegan(NOW)
    expect(refusal(() => guard.admit({ nonce: 'made-before', time: NOW - 1 }, NOW + 5))?.code).to.equal('no_leader')
    guard.admit({ nonce: 'made-after', time: NOW + 1 }, NOW + 5)
    // A later term: the proof accepted in the first is refused for its age relative to this leadership.
    guard.leadershipBegan(NOW + 1_000)
    expect(refusal(() => guard.admit({ nonce: 'made-after', time: NOW + 1 }, NOW + 1_005))?.code).to.equal('no_leader')
  })

  it('is bounded: full of young proofs it refuses with rate_limited rather than forget one, and frees the expired', () => {
    const guard = new JoinReplayGuard(3)
    guard.leadershipBegan(NOW)
    for (let n = 0; n < 3; n += 1) guard.admit({ nonce: `n${n}`, time: NOW + n }, NOW + 10)
    expect(refusal(() => guard.admit({ nonce: 'n3', time: NOW + 10 }, NOW + 10))?.code).to.equal('rate_limited')
    // Once the first three are past their minute, they make room; the replay rule for them is the age check's.
    const later = NOW + PROOF_AGE_MS_MAX + 5
    guard.admit({ nonce: 'n3', time: later }, later)
    expect(refusal(() => guard.admit({ nonce: 'n0', time: NOW }, later))?.code).to.equal('permission_denied')
    expect(JOIN_NONCES_MAX).to.be.at.least(64)
  })
})
