/**
 * The messages servers exchange (Raft Figure 2 and §7; Thesis §3, §4.2.3, §6.4, §9.6). Every message carries the
 * sender's current term; the receiver applies the term rules of Figure 2 ("All Servers") before anything else.
 *
 * Messages are plain data: the transport may encode them field by field (msgpackr) and must deliver them unchanged.
 * Receivers treat them as immutable. Local requests (propose, read, campaign, transfer) are methods on RaftCore,
 * not messages, so that they can return a result.
 */
import type { Entry, NodeId, SnapshotMetadata } from './types.js'

interface MessageBase {
  readonly from: NodeId
  readonly to: NodeId
  readonly term: number
}

/**
 * RequestVote (§5.2), or its PreVote form (Thesis §9.6) when `preVote` is set: then `term` is the term the sender
 * would campaign in, and the receiver neither changes its term nor records a vote.
 */
export interface RequestVote extends MessageBase {
  readonly type: 'requestVote'
  readonly preVote: boolean
  readonly lastLogIndex: number
  readonly lastLogTerm: number
  /** Set by a candidate that received TimeoutNow (Thesis §3.10): voters then ignore their leader lease. */
  readonly transfer: boolean
}

export interface RequestVoteResponse extends MessageBase {
  readonly type: 'requestVoteResponse'
  readonly preVote: boolean
  readonly granted: boolean
}

/** AppendEntries (§5.3). `entries` may be empty, to carry `leaderCommit` or to probe. */
export interface AppendEntries extends MessageBase {
  readonly type: 'appendEntries'
  readonly prevLogIndex: number
  readonly prevLogTerm: number
  readonly entries: readonly Entry[]
  readonly leaderCommit: number
}

/**
 * The answer to AppendEntries and InstallSnapshot. On success `index` is the last index now known to match the
 * leader's log. On rejection `index` is the prevLogIndex that did not match, and (conflictIndex, conflictTerm) is the
 * follower's best guess of where the logs last agree: the largest index <= min(prevLogIndex, lastIndex) whose term is
 * <= prevLogTerm, with its term (0 if unknown). This is the fast back-tracking of §5.3 ("the follower can include the
 * term of the conflicting entry and the first index it stores for that term"), done the way etcd-io/raft
 * `findConflictByTerm` does it, so the leader skips a whole term per round trip.
 */
export interface AppendEntriesResponse extends MessageBase {
  readonly type: 'appendEntriesResponse'
  readonly success: boolean
  readonly index: number
  readonly conflictIndex: number
  readonly conflictTerm: number
  /** See HeartbeatResponse.rebuilt. */
  readonly rebuilt?: boolean
}

/**
 * The leader's periodic heartbeat, kept apart from AppendEntries (as etcd-io/raft does) so it needs no log matching.
 * `leaderCommit` is min(matchIndex of the receiver, commitIndex), so the receiver can commit it without checking.
 * `seq` confirms ReadIndex requests (Thesis §6.4) and `tick` (the leader's clock when sending) extends the lease.
 */
export interface Heartbeat extends MessageBase {
  readonly type: 'heartbeat'
  readonly leaderCommit: number
  readonly seq: number
  readonly tick: number
}

/** Echoes the heartbeat's `seq` and `tick`. */
export interface HeartbeatResponse extends MessageBase {
  readonly type: 'heartbeatResponse'
  readonly seq: number
  readonly tick: number
  /**
   * The follower's last log index. Lower than the matchIndex the leader holds for it only when the follower lost
   * entries it had acknowledged (its storage was wiped): the leader then probes it again from there.
   */
  readonly lastIndex: number
  /**
   * Set by a server that waits for the answer to its join (its data dir was empty: a new server, or one rebuilt after
   * losing its data), and after it until its commit index reaches the index of its re-add (RaftCore.rebuilt). It may
   * have forgotten a term it voted in, so its acknowledgement vouches for nothing: a leader that still counts it as a
   * voter keeps replicating to it but counts its answers towards no commit, ReadIndex or lease. Otherwise a stale
   * leader could commit with it after a newer leader was elected with the vote it gave before it lost its data.
   * Absent from older builds, whose answers count as before.
   */
  readonly rebuilt?: boolean
}

/**
 * InstallSnapshot (§7, Figure 13), as metadata only. On the leader's side, the core emits it to ask the driver to
 * stream the snapshot with this metadata (or a newer one, with the metadata updated to match) to `to`, in chunks,
 * and to call `reportSnapshot` when that finishes or fails. On the follower's side, the driver steps it into the core
 * once every chunk has arrived and the new state sits beside the old; the core answers with AppendEntriesResponse.
 */
export interface InstallSnapshot extends MessageBase {
  readonly type: 'installSnapshot'
  readonly snapshot: SnapshotMetadata
}

/** Leadership transfer (Thesis §3.10): the receiver starts an election at once, without PreVote. */
export interface TimeoutNow extends MessageBase {
  readonly type: 'timeoutNow'
}

/** A follower forwards a ReadIndex request to its leader (Thesis §6.4, "followers ... request the current readIndex"). */
export interface ReadIndexRequest extends MessageBase {
  readonly type: 'readIndex'
  readonly context: string
  /**
   * The read accepts an index vouched for by the leader's lease (a default read), which a leader holding one answers
   * at once; without it (`?consistent`) the leader confirms with a heartbeat round. Absent from older builds: they get
   * the heartbeat round, and an older leader ignores it.
   */
  readonly lease?: boolean
}

export interface ReadIndexResponse extends MessageBase {
  readonly type: 'readIndexResponse'
  readonly context: string
  readonly index: number
}

export type Message =
  | RequestVote
  | RequestVoteResponse
  | AppendEntries
  | AppendEntriesResponse
  | Heartbeat
  | HeartbeatResponse
  | InstallSnapshot
  | TimeoutNow
  | ReadIndexRequest
  | ReadIndexResponse

export type MessageType = Message['type']
