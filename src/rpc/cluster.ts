/**
 * What the HTTP layer and the controllers need from the cluster: propose a command and get its apply result, wait
 * until a read may be served, who leads, and membership. ClusterNode (cluster-node.ts) implements it over the Raft
 * replica, forwarding to the leader what only the leader can do.
 */
import type { ApplyResult, Command } from '../state/commands.js'
import type { JoinRequest } from '../lib/join-proof.js'
import type { ClusterAnswer, ClusterQuery, StatusDetail } from './cluster-status.js'

export interface RaftState {
  node: string
  role: string
  term: number
  leader: string | null
  commitIndex: number
  appliedIndex: number
  lastIndex: number
  lastContactMs: number
  /** Writes this node forwarded to a leader since it started, and the requests that carried them (batched per turn). */
  forwardedWrites: number
  forwardedRequests: number
}

/** A server of the configuration as this node sees it now (GET /v1/operator/servers). */
export interface ServerView {
  id: string
  /** Its cluster address, "" when this node does not know it. */
  address: string
  voter: boolean
  /** Whether it is the leader this node knows of. */
  leader: boolean
  /** Whether this node counts it as alive (RaftReplica.memberAlive says how). */
  alive: boolean
}

export interface ProposeOptions {
  /**
   * A follower that forwarded the command answers once the leader has applied it, without waiting to apply it itself,
   * when the leader's answer says this node already names the policies and roles the result links to as the leader
   * did (forward.ts namesCurrent: the HTTP layer renders those names from this node's state). Every request this node
   * serves after that answer waits for that apply first, up to 5 s (readBarrier('stale'); the other modes wait for the
   * leader's commit index, which covers it), so its reads see the write all the same. For the HTTP API's writes;
   * without it (controllers, the agent) the answer waits for this node's own apply, as their next steps may read it.
   */
  answerBeforeLocalApply?: boolean
  /**
   * Only as this node, while it leads: never forwarded to another leader, never tried again after a leadership
   * change (no_leader). For work only the leader does, decided from what it saw as leader: the ACL replication's
   * batches, which a deposed leader would otherwise send to the new one to be applied after the new one's newer batches.
   */
  leaderOnly?: boolean
}

export interface Cluster {
  /**
   * Resolves after the command is committed and applied on this node (or, with answerBeforeLocalApply, on the
   * leader), with the apply result. Rejects with a
   * WardenError: no_leader (not applied, safe to retry) or outcome_unknown (it may have been applied).
   */
  propose(command: Command, options?: ProposeOptions): Promise<ApplyResult>
  /** As propose, with the log index the command was committed at (the audit log records it). */
  proposeIndexed(command: Command, options?: ProposeOptions): Promise<{ result: ApplyResult; index: number }>
  /** The leader's advertised cluster address, "" while there is none. */
  leaderAddress(): string
  /** Cluster addresses of every member. */
  peerAddresses(): string[]
  isLeader(): boolean
  /**
   * Waits until this node may serve a read in the given mode from its own state: for stale reads once it has applied
   * every write it answered before applying it (answerBeforeLocalApply; usually at once), under the
   * leader's lease for default reads, after a ReadIndex round for consistent reads. Rejects with no_leader when it
   * cannot (a forwarding replica answers from the leader instead). `onFixed` is called when the index the read waits
   * for is fixed (a leader's lease read at once, a follower's ReadIndex when its request leaves): every write
   * acknowledged before that call is in what the read will see. It may be called more than once (a batch that found
   * no leader asks again, and calls it again before the index that counts is fixed), never after the barrier resolved.
   */
  readBarrier(mode: 'leader' | 'stale' | 'consistent', onFixed?: () => void): Promise<void>
  /** Milliseconds since this node last heard from the leader; 0 on the leader. */
  lastContactMs(): number
  /** The servers of the current configuration and the log index that set it. */
  membership(): { index: number; servers: Array<{ id: string; address: string; voter: boolean }> }
  /** This node's Raft state, for operators and the cluster tool. */
  raftState(): RaftState
  /**
   * Adds a server proven to hold the cluster key: records its address, adds it as a non-voter (removing it first if
   * it asks while a voter: it lost its data), and promotes it once it has caught up. Answers every member's address,
   * for the joining server's peer links, and the index before which the server may not vote.
   */
  join(request: JoinRequest): Promise<{ members: Record<string, string>; voteFromIndex: number }>
  /** Removes a server from the configuration (through the log). Rejects with a WardenError. */
  removeServer(which: { id?: string; address?: string }): Promise<void>
  /** The servers of the configuration as this node sees them now, without asking any other node. */
  servers(): ServerView[]
  /**
   * Hands leadership to the voter `id`, or to one the leader picks (Thesis §3.10), on the leader or forwarded to it,
   * and resolves with the new leader's name once the transfer is done. Rejects with invalid_input naming `id` (not a
   * server, a non-voter, no other voter), no_leader, or outcome_unknown when it did not complete in time.
   */
  transferLeadership(id?: string): Promise<string>
  /**
   * Every server as the leader sees it, with an index for blocking queries (cluster-status.ts): asked of the leader
   * from a follower, or this node's own view with `stale`. Rejects with no_leader when no leader answers in time.
   */
  clusterStatus(query: ClusterQuery): Promise<ClusterAnswer>
  /** Adds what a controller reports (`replication`) to the views this node answers; returns the function that removes it. */
  addStatusDetail(name: string, provider: () => StatusDetail): () => void
}
