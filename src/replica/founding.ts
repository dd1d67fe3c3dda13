/**
 * How a server enters its cluster, decided once at its first start and recorded in its Raft storage
 * (raft-storage.ts, MembershipRecord). A restart reads the record and never takes its membership from its flags again.
 *
 * First start, empty data dir:
 * - no --peer and no --join: a cluster of one, founded at once;
 * - --join: a new server for a running cluster; it asks a member to add it (without a vote until caught up);
 * - --peer: a founding member, unless the cluster already exists. It cannot tell from its flags whether it is one of
 *   the first servers or a rebuilt one whose data was wiped (etcd needs `--initial-cluster-state` for this), so it asks
 *   its peers first (`discover`): if any of them already holds Raft state, it rejoins as a joining server does; once
 *   every other founding member has answered that it holds none, it founds. Until then it neither votes nor
 *   campaigns, so it can only ever acknowledge entries it really stored.
 * A data dir written before the record existed (an upgrade) gets one from its flags, as that release read them.
 */
import type { MembershipRecord, RaftStorage } from '../raft/storage/raft-storage.js'
import { VOTE_INDEX_UNKNOWN } from '../raft/storage/raft-storage.js'

export interface FoundingFlags {
  nodeName: string
  /** The names given with --peer, this node's included or not. */
  peerNames: readonly string[]
  /** Whether --join was given. */
  joining: boolean
  /** A fresh random identifier, for a record made now (or one written before records had it). */
  incarnation?: string
}

export type FoundingPlan =
  | { readonly ok: true; readonly record: MembershipRecord; readonly save: boolean; readonly next: 'run' | 'discover' | 'join' }
  | { readonly ok: false; readonly problem: string }

/** Whether this storage holds anything Raft wrote: a term, an entry or a snapshot. */
export function holdsRaftState(storage: RaftStorage): boolean {
  return storage.hardState().term > 0 || storage.lastIndex() > 0 || storage.snapshot() !== null
}

function sameMembers(a: readonly string[], b: readonly string[]): boolean {
  const wanted = new Set(b)
  return a.length === b.length && a.every((name) => wanted.has(name))
}

export function planMembership(storage: RaftStorage, flags: FoundingFlags): FoundingPlan {
  const withIncarnation = (record: MembershipRecord): MembershipRecord => (flags.incarnation === undefined ? record : { ...record, incarnation: flags.incarnation })
  const founders = [...new Set([flags.nodeName, ...flags.peerNames])].sort()
  const found = storage.membershipRecord()
  if (found !== null) {
    const record = found.incarnation === undefined && flags.incarnation !== undefined ? { ...found, incarnation: flags.incarnation } : found
    const save = record !== found
    if (record.voteFromIndex !== VOTE_INDEX_UNKNOWN) return { ok: true, record, save, next: 'run' }
    // A start that ended before the cluster answered: ask again.
    return { ok: true, record, save, next: record.voters.length > 0 ? 'discover' : 'join' }
  }
  if (holdsRaftState(storage)) {
    // Written by a release before the record: read the flags as that release did, once.
    const voters = flags.joining && flags.peerNames.length === 0 ? [] : founders
    return { ok: true, record: withIncarnation({ voters, voteFromIndex: 0 }), save: true, next: 'run' }
  }
  if (flags.joining) return { ok: true, record: withIncarnation({ voters: [], voteFromIndex: VOTE_INDEX_UNKNOWN }), save: true, next: 'join' }
  if (founders.length === 1) return { ok: true, record: withIncarnation({ voters: founders, voteFromIndex: 0 }), save: true, next: 'run' }
  return { ok: true, record: withIncarnation({ voters: founders, voteFromIndex: VOTE_INDEX_UNKNOWN }), save: true, next: 'discover' }
}

/**
 * The problem with a restart's --peer flags, or undefined. They may name the founding members (the flags the server
 * was first started with) or the members of its current configuration (an operator who updated the flags after a
 * membership change); any other set is refused, since a member's name cannot change and membership changes go through
 * the cluster. The flags never set the voters again; they only say where to dial.
 */
export function peerFlagsProblem(record: MembershipRecord, currentMembers: readonly string[], flags: FoundingFlags): string | undefined {
  if (flags.peerNames.length === 0) return undefined
  const named = [...new Set([flags.nodeName, ...flags.peerNames])].sort()
  if (record.voters.length > 0 && sameMembers(record.voters, named)) return undefined
  if (sameMembers(currentMembers, named)) return undefined
  const founders = record.voters.length > 0 ? `was founded with ${record.voters.join(', ')} and ` : ''
  return (
    `--peer: this server's cluster ${founders}has the members ${[...currentMembers].sort().join(', ') || '(none known yet)'}, but the flags name ` +
    `${named.join(', ')}. A member's name cannot change across restarts, and membership changes go through the cluster ` +
    `(--join, DELETE /v1/operator/raft/peer); --peer may change where a member is dialed, not who the members are`
  )
}

/** A peer's answer to "do you hold Raft state?" during discovery. */
export interface ClusterStateAnswer {
  existing: boolean
}

/**
 * Decides from the answers so far: 'rejoin' if any peer holds Raft state, 'found' once every other founder answered
 * that it holds none, 'wait' otherwise. Every founder, not a majority: a founder that does not answer may be the one
 * that holds the cluster (the driver simulation found two fresh servers, one wiped and one that had never stored
 * anything, founding a second cluster beside a third that was restarting; seed 0x94c). Like Consul's
 * bootstrap_expect, a new cluster forms once all its founders are up.
 */
export function decideFounding(founders: readonly string[], answers: ReadonlyMap<string, ClusterStateAnswer>): 'found' | 'rejoin' | 'wait' {
  for (const answer of answers.values()) if (answer.existing) return 'rejoin'
  // The answers come from the other founders (this node is fresh, or it would not ask).
  return answers.size >= founders.length - 1 ? 'found' : 'wait'
}
