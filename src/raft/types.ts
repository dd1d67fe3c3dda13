/**
 * The nouns of the Raft paper (Ongaro and Ousterhout, "In Search of an Understandable Consensus Algorithm", Figure 2)
 * and of Ongaro's dissertation ("Consensus: Bridging Theory and Practice", 2014; cited as "Thesis"), as plain data.
 * Everything here is immutable once built: the core shares entry objects between its log and its messages.
 */

/**
 * The vote index of a server that waits for its cluster to answer its join (an empty data dir: a new server, or a
 * rebuilt one). See MembershipRecord.voteFromIndex and RaftConfig.voteFromIndex.
 */
export const VOTE_INDEX_UNKNOWN = Number.MAX_SAFE_INTEGER

/** A server's name. A server is identified by its name across restarts; its address is the transport's business. */
export type NodeId = string

/**
 * `command`: an opaque command for the state machine. `noop`: the empty entry a leader appends at the start of its
 * term (Raft §5.4.2, Thesis §6.4), applied as nothing. `configuration`: a cluster membership (see configuration.ts);
 * it takes effect as soon as it is in a server's log, committed or not (Thesis §4.1).
 */
export type EntryType = 'command' | 'noop' | 'configuration'

export interface Entry {
  readonly index: number
  readonly term: number
  readonly type: EntryType
  /** The command (type `command`), nothing (type `noop`), or the encoded configuration (type `configuration`). */
  readonly data: Uint8Array
}

/**
 * The state a server must persist before it answers anyone (Figure 2, "Persistent state on all servers"), plus the
 * commit index, which it may persist lazily (Ready.mustSync says when a sync is needed).
 */
export interface HardState {
  readonly term: number
  /** The candidate this server voted for in `term`, or null. Invariant: at most one vote per term (§5.2). */
  readonly votedFor: NodeId | null
  readonly commitIndex: number
}

/** A cluster membership. Voters elect and count towards commit; learners (non-voters, Thesis §4.2.1) only replicate. */
export interface Configuration {
  /** Sorted, no duplicates. */
  readonly voters: readonly NodeId[]
  /** Sorted, no duplicates, disjoint from voters. */
  readonly learners: readonly NodeId[]
}

/** What a snapshot replaces: the log up to and including `index` (Raft §7, Thesis §5.1). */
export interface SnapshotMetadata {
  /** The last index the snapshot covers (lastIncludedIndex). */
  readonly index: number
  /** The term of the entry at `index` (lastIncludedTerm). */
  readonly term: number
  /** The latest configuration at or before `index` (Thesis §5.1: a snapshot carries the configuration). */
  readonly configuration: Configuration
}

export type Role = 'follower' | 'preCandidate' | 'candidate' | 'leader'

export const EMPTY_HARD_STATE: HardState = Object.freeze({ term: 0, votedFor: null, commitIndex: 0 })
