/**
 * The safety properties of Raft (Figure 3 of the paper), checked as the simulation runs, after
 * tigerbeetle/tigerbeetle `src/testing/cluster/state_checker.zig`. Each check is incremental, so it can run after
 * every simulated event:
 *
 * - Election Safety: at most one leader per term.
 * - Log Matching: if two logs hold an entry with the same index and term, they are identical up to it. Each node
 *   keeps a chained hash of its durable log; the first hash seen for an (index, term) is the reference.
 * - Leader Completeness: a new leader's log holds every entry committed before its term.
 * - State Machine Safety: no two nodes apply different entries at one index (compared as chained state hashes, which
 *   also covers state that arrived by snapshot).
 * - Committed entries never change, and linearizable reads (ReadIndex, lease) never miss a committed write.
 */
import type { Entry, NodeId } from '../../src/raft/types.js'

export class SimulationViolation extends Error {
  override readonly name = 'SimulationViolation'
}

const TYPE_CODES = { command: 1, noop: 2, configuration: 3 } as const
const TERM_LIMIT = 1 << 21

/** FNV-1a over an entry's term, type and data, chained onto `previous`. */
export function chainHash(previous: number, entry: Entry): number {
  let hash = (previous ^ 0x811c9dc5) >>> 0
  hash = Math.imul(hash ^ entry.term, 0x01000193)
  hash = Math.imul(hash ^ TYPE_CODES[entry.type], 0x01000193)
  const data = entry.data
  for (let i = 0; i < data.length; i += 1) hash = Math.imul(hash ^ data[i]!, 0x01000193)
  return hash >>> 0
}

function entryKey(index: number, term: number): number {
  if (term >= TERM_LIMIT) throw new SimulationViolation(`term ${term} is beyond what the checker can key`)
  return index * TERM_LIMIT + term
}

/** A node's chained hashes of its durable log: prefix(i) covers entries 1..i. */
export class PrefixChain {
  /** hashes[i] = prefix hash through index i; holes below the last snapshot. */
  private hashes: number[] = [0]

  prefix(index: number): number | undefined {
    return this.hashes[index]
  }

  /** Entries written at entries[0].index and on, replacing what was there. Returns their prefix hashes. */
  append(entries: readonly Entry[]): number[] {
    const first = entries[0]!
    let previous = this.hashes[first.index - 1]
    if (previous === undefined) throw new SimulationViolation(`log written at ${first.index} with no known entry before it`)
    this.hashes.length = first.index
    const result: number[] = []
    for (const entry of entries) {
      previous = chainHash(previous, entry)
      this.hashes.push(previous)
      result.push(previous)
    }
    return result
  }

  /** The log was replaced by a snapshot ending at `index` whose prefix hash is `prefixHash`. */
  reset(index: number, prefixHash: number): void {
    this.hashes = []
    this.hashes[index] = prefixHash
  }
}

export class StateChecker {
  private readonly leaderByTerm = new Map<number, NodeId>()
  /** The prefix hash of the first log seen holding (index, term). */
  private readonly prefixByEntry = new Map<number, number>()
  /** committedTerms[i]: the term of the committed entry at index i, once some node reported it. */
  private readonly committedTerms: number[] = []
  /**
   * commitTerms[i]: the lowest term in which some node was seen knowing index i committed, an upper bound on the term
   * in which it was committed. Non-decreasing in i, since committing i commits everything before it.
   */
  private readonly commitTerms: number[] = [0]
  /** appliedStates[i]: the state hash after applying index i. */
  private readonly appliedStates: number[] = [0]
  /** The highest commitIndex any node has reached. */
  commitIndex = 0

  checkLeader(term: number, id: NodeId): void {
    const existing = this.leaderByTerm.get(term)
    if (existing === undefined) this.leaderByTerm.set(term, id)
    else if (existing !== id) throw new SimulationViolation(`election safety: ${existing} and ${id} are both leaders of term ${term}`)
  }

  /** A node durably wrote `entries` (with their prefix hashes). */
  checkLogMatching(id: NodeId, entries: readonly Entry[], prefixes: readonly number[]): void {
    for (let i = 0; i < entries.length; i += 1) {
      const entry = entries[i]!
      const key = entryKey(entry.index, entry.term)
      const seen = this.prefixByEntry.get(key)
      if (seen === undefined) this.prefixByEntry.set(key, prefixes[i]!)
      else if (seen !== prefixes[i]) {
        throw new SimulationViolation(`log matching: ${id} holds entry ${entry.index} of term ${entry.term} after a log that differs from another server's`)
      }
    }
  }

  /** The prefix hash of the log ending at (index, term), which a snapshot of it must carry. */
  snapshotPrefix(index: number, term: number): number {
    if (index === 0) return 0
    const prefix = this.prefixByEntry.get(entryKey(index, term))
    if (prefix === undefined) throw new SimulationViolation(`snapshot at ${index} (term ${term}) of an entry no server ever wrote`)
    return prefix
  }

  /** A node in `observerTerm` moved its commitIndex from `from` to `to`; termAt reads its log. */
  recordCommit(id: NodeId, observerTerm: number, from: number, to: number, termAt: (index: number) => number | undefined): void {
    for (let index = from + 1; index <= to; index += 1) {
      const seen = this.commitTerms[index]
      if (seen === undefined || observerTerm < seen) this.commitTerms[index] = observerTerm
      const term = termAt(index)
      if (term === undefined) continue // compacted, or covered by a snapshot: checked through applied state
      const known = this.committedTerms[index]
      if (known === undefined) this.committedTerms[index] = term
      else if (known !== term) throw new SimulationViolation(`committed entry changed: ${id} committed index ${index} with term ${term}, earlier committed with term ${known}`)
    }
    if (to > this.commitIndex) this.commitIndex = to
  }

  /**
   * A node just became leader of `term`: its log must hold every entry committed in an earlier term (Figure 3). The
   * highest such entry is enough, since Log Matching covers the entries before it. An entry seen committed only in
   * `term` or later is not checked: with delayed messages, a leader of an old term can be elected after a newer term
   * committed entries it lacks, which the property allows.
   */
  checkLeaderCompleteness(id: NodeId, term: number, firstIndex: number, termAt: (index: number) => number | undefined): void {
    let low = 0
    let high = this.commitIndex
    while (low < high) {
      // The last index whose commit was seen before `term`, by bisection over the non-decreasing commitTerms.
      const middle = Math.ceil((low + high) / 2)
      if ((this.commitTerms[middle] ?? Number.POSITIVE_INFINITY) < term) low = middle
      else high = middle - 1
    }
    for (let index = low; index >= 1; index -= 1) {
      const committed = this.committedTerms[index]
      if (committed === undefined) continue
      const ours = termAt(index)
      if (ours === undefined && index < firstIndex) return // covered by its snapshot, checked by state hashes
      if (ours !== committed) {
        throw new SimulationViolation(`leader completeness: ${id} leads term ${term} but holds term ${ours} at committed index ${index} (committed with term ${committed})`)
      }
      return
    }
  }

  /** A node's state machine reached `index` with state hash `state` (by applying it, or by a snapshot). */
  recordApplied(id: NodeId, index: number, state: number): void {
    const known = this.appliedStates[index]
    if (known === undefined) this.appliedStates[index] = state
    else if (known !== state) throw new SimulationViolation(`state machine safety: ${id} applied a different history through index ${index}`)
  }
}
