/**
 * Majority arithmetic, compared with deliberately dumb implementations on seeded random input (after etcd-io/raft
 * `quorum/quick_test.go`), plus the seeded PRNG the core and the simulator depend on being deterministic.
 */
import { expect } from 'chai'
import { SeededRng } from '../../../src/lib/rng.js'
import { majorityValue, voteResult, type VoteResult } from '../../../src/raft/quorum.js'

/** The largest v such that more than half of the values are >= v, by trying every candidate value. */
function dumbMajorityValue(values: readonly number[]): number {
  let best = Number.NEGATIVE_INFINITY
  for (const candidate of values) {
    const atLeast = values.filter((value) => value >= candidate).length
    if (atLeast * 2 > values.length && candidate > best) best = candidate
  }
  return best
}

function dumbVoteResult(voterCount: number, granted: number, rejected: number): VoteResult {
  if (granted * 2 > voterCount) return 'won'
  if ((voterCount - rejected) * 2 <= voterCount) return 'lost'
  return 'pending'
}

describe('raft: quorum arithmetic', function () {
  it('majorityValue agrees with a brute-force majority on random match indexes (§5.3)', function () {
    const rng = new SeededRng(7)
    for (let round = 0; round < 2000; round += 1) {
      const voters = Array.from({ length: rng.between(1, 7) }, (_, i) => `n${i}`)
      const values = new Map(voters.map((id) => [id, rng.nextInt(20)]))
      expect(majorityValue(voters, (id) => values.get(id)!)).to.equal(dumbMajorityValue([...values.values()]))
    }
  })

  it('voteResult agrees with counting by hand, ignoring votes of non-voters (§5.2)', function () {
    const rng = new SeededRng(8)
    for (let round = 0; round < 2000; round += 1) {
      const voters = Array.from({ length: rng.between(1, 7) }, (_, i) => `n${i}`)
      const votes = new Map<string, boolean>()
      let granted = 0
      let rejected = 0
      for (const id of voters) {
        const choice = rng.nextInt(3)
        if (choice === 0) continue
        votes.set(id, choice === 1)
        if (choice === 1) granted += 1
        else rejected += 1
      }
      votes.set('stranger', true)
      expect(voteResult(voters, votes)).to.equal(dumbVoteResult(voters.length, granted, rejected))
    }
  })

  it('the seeded PRNG gives the same stream for the same seed and stays in range', function () {
    const a = new SeededRng(0x1234)
    const b = new SeededRng(0x1234)
    const drawsA = Array.from({ length: 1000 }, () => a.nextInt(10))
    const drawsB = Array.from({ length: 1000 }, () => b.nextInt(10))
    expect(drawsA).to.deep.equal(drawsB)
    expect(drawsA.every((draw) => draw >= 0 && draw < 10)).to.equal(true)
    expect(new Set(drawsA).size).to.equal(10)
    expect(new SeededRng(0x1235).nextInt(1 << 30)).to.not.equal(new SeededRng(0x1234).nextInt(1 << 30))
  })
})
