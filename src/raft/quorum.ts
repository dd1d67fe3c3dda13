/**
 * Majority arithmetic over a set of voters (etcd-io/raft `quorum/majority.go`). Everything that needs "a majority
 * agrees" goes through here: the commit index (Raft §5.3), election results (§5.2), CheckQuorum and the lease
 * (Thesis §6.2, §6.4.1) and ReadIndex confirmation (Thesis §6.4).
 */
import type { NodeId } from './types.js'

/**
 * The largest value v such that a majority of `voters` have a value of at least v. For match indexes this is the
 * highest index stored on a majority. With no voters it is +Infinity (an empty set agrees to anything), which callers
 * never reach because the last voter cannot be removed.
 */
export function majorityValue(voters: readonly NodeId[], valueOf: (id: NodeId) => number): number {
  const count = voters.length
  if (count === 0) return Number.POSITIVE_INFINITY
  if (count === 1) return valueOf(voters[0]!)
  const values = new Float64Array(count)
  for (let i = 0; i < count; i += 1) values[i] = valueOf(voters[i]!)
  values.sort()
  // Sorted ascending, the value at position n - 1 - floor(n/2) is held (or exceeded) by floor(n/2) + 1 voters: a
  // majority.
  return values[count - 1 - Math.floor(count / 2)]!
}

export type VoteResult = 'won' | 'lost' | 'pending'

/** The outcome of an election given the votes received so far; votes from non-voters are ignored. */
export function voteResult(voters: readonly NodeId[], votes: ReadonlyMap<NodeId, boolean>): VoteResult {
  if (voters.length === 0) return 'won'
  const quorum = Math.floor(voters.length / 2) + 1
  let granted = 0
  let rejected = 0
  for (const voter of voters) {
    const vote = votes.get(voter)
    if (vote === true) granted += 1
    else if (vote === false) rejected += 1
  }
  if (granted >= quorum) return 'won'
  if (voters.length - rejected < quorum) return 'lost'
  return 'pending'
}
