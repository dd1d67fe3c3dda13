/**
 * The Raft core: a deterministic state machine with no clock, no randomness of its own, no I/O and no await
 * (STYLE.md, "The Raft core is a deterministic state machine"). Inputs: `tick` (logical time), `step` (a message from
 * a peer) and the local requests below; outputs: `ready()` (see ready.ts for the order of the work). Its shape follows
 * etcd-io/raft `raft.go` and `rawnode.go`; its rules are the Raft paper's (cited by section, "§5.3") and Ongaro's
 * dissertation's ("Thesis §9.6").
 */
import { assert } from '../lib/assert.js'
import type { Rng } from '../lib/rng.js'
import {
  applyConfChange,
  type ConfChange,
  encodeConfiguration,
  isMember,
  isVoter,
  makeConfiguration,
  members,
} from './configuration.js'
import type { LogReader } from './log-reader.js'
import type {
  AppendEntries,
  AppendEntriesResponse,
  Heartbeat,
  HeartbeatResponse,
  InstallSnapshot,
  Message,
  RequestVote,
} from './messages.js'
import { Progress, type ProgressState } from './progress.js'
import { majorityValue, voteResult } from './quorum.js'
import { RaftLog } from './raft-log.js'
import type { ReadState, Ready, SoftState } from './ready.js'
import type { Configuration, Entry, EntryType, HardState, NodeId, Role, SnapshotMetadata } from './types.js'

export interface RaftConfig {
  /** This server's name. */
  readonly id: NodeId
  /**
   * The bootstrap configuration: the membership in force at index 0, before any configuration entry. It must be the
   * same on every founding member; a server that joins later passes empty lists and learns its membership from the
   * leader. Ignored once the storage holds a snapshot (which carries its own configuration).
   */
  readonly voters: readonly NodeId[]
  readonly learners?: readonly NodeId[]
  /**
   * The election timeout in ticks. A follower that hears from no leader for a random time in
   * [electionTimeoutTicks, 2 * electionTimeoutTicks) starts an election (§5.2).
   */
  readonly electionTimeoutTicks: number
  /** How often a leader sends heartbeats, in ticks. Must be below electionTimeoutTicks (§5.6). */
  readonly heartbeatIntervalTicks: number
  /**
   * How long a leader may serve reads from its own state after a majority acknowledged a heartbeat, in ticks
   * (Thesis §6.4.1). Must be below electionTimeoutTicks, with room for clock drift between servers.
   * Default: floor(0.8 * electionTimeoutTicks).
   */
  readonly leaseTicks?: number
  /** Ask for votes in a pre-election first, so a server that rejoins does not depose a healthy leader (Thesis §9.6). */
  readonly preVote: boolean
  /** A leader steps down when a majority has not answered within an election timeout (Thesis §6.2). */
  readonly checkQuorum: boolean
  /** AppendEntries messages in flight to one follower before the leader waits for answers (pipelining). */
  readonly maxInflightMessages: number
  /** Entries in one AppendEntries, at most. */
  readonly maxEntriesPerMessage: number
  /** Bytes of entries in one AppendEntries, at most (one entry is always sent, however large). */
  readonly maxBytesPerMessage: number
  /** Committed entries in one Ready, at most. Default 1024. */
  readonly maxCommittedEntriesPerReady?: number
  /** Entries a leader holds uncommitted before it refuses proposals (backpressure). Default 8192. */
  readonly maxUncommittedEntries?: number
  /**
   * Entries kept in the log behind a snapshot, so a follower slightly behind catches up from the log rather than
   * from a snapshot (hashicorp/raft TrailingLogs). Default 1024.
   */
  readonly trailingEntries?: number
  /**
   * The state machine's last applied index, which survives restarts (it is written atomically with what it
   * applied). Committed entries up to it are not handed out again. Default: the snapshot's index, or 0.
   */
  readonly appliedIndex?: number
  /**
   * The time the lease is measured in, in ticks: a monotonic clock divided by the tick length. Default: the tick
   * count. A driver with a real clock must give it: ticks come from a timer, and a process that was stopped (SIGSTOP,
   * a long pause) does not get the ticks it missed, so a lease counted in ticks would still hold when the process
   * wakes, long after the other servers stopped honouring it and elected another leader.
   */
  readonly clock?: () => number
  /**
   * This server neither grants votes nor campaigns until its commit index reaches this index. A server that came back
   * with an empty data dir forgot its votes and its log: until the leader has re-added it and it has caught up past
   * that point, its vote could elect a leader missing committed entries, or be given twice in one term. Default 0.
   * VOTE_INDEX_UNKNOWN while it waits for the answer to its join. Until its commit index reaches it, its answers to
   * AppendEntries and heartbeats say `rebuilt`, and count towards no majority (HeartbeatResponse.rebuilt).
   */
  readonly voteFromIndex?: number
  /**
   * A leader tells its followers a commit index no higher than what it has applied itself. The driver can then send,
   * with that commit index, the writes its own apply produced, and a follower applies those instead of running each
   * command again (RaftReplica: shipped writes). Only what followers learn is delayed, by the leader's apply: when an
   * entry commits is unchanged. A leader that has more than maxCommittedEntriesPerReady committed entries left to
   * apply tells its whole commit index. Default false.
   */
  readonly announceAppliedCommit?: boolean
  /**
   * The driver applies committed entries while the Ready loop goes on (persisting and sending the next entries), and
   * says what it has applied with `appliedTo`; `advance` then only marks them handed out. Default false: `advance`
   * marks a Ready's committed entries applied. What a leader announces (announceAppliedCommit) and `status` report
   * follow what the driver said it applied.
   */
  readonly reportsApplied?: boolean
}

interface Settings {
  readonly electionTimeoutTicks: number
  readonly heartbeatIntervalTicks: number
  readonly leaseTicks: number
  readonly preVote: boolean
  readonly checkQuorum: boolean
  readonly maxInflightMessages: number
  readonly maxEntriesPerMessage: number
  readonly maxBytesPerMessage: number
  readonly maxCommittedEntriesPerReady: number
  readonly maxUncommittedEntries: number
  readonly trailingEntries: number
  readonly announceAppliedCommit: boolean
  readonly reportsApplied: boolean
}

/** Problems with a configuration, each naming its setting; empty when the configuration is valid. */
export function validateRaftConfig(config: RaftConfig): string[] {
  const problems: string[] = []
  const positiveInteger = (name: string, value: number | undefined): void => {
    if (value !== undefined && !(Number.isInteger(value) && value >= 1)) problems.push(`${name} must be a positive integer, got ${value}`)
  }
  if (config.id.length === 0) problems.push('id must not be empty')
  positiveInteger('electionTimeoutTicks', config.electionTimeoutTicks)
  positiveInteger('heartbeatIntervalTicks', config.heartbeatIntervalTicks)
  positiveInteger('leaseTicks', config.leaseTicks)
  positiveInteger('maxInflightMessages', config.maxInflightMessages)
  positiveInteger('maxEntriesPerMessage', config.maxEntriesPerMessage)
  positiveInteger('maxBytesPerMessage', config.maxBytesPerMessage)
  positiveInteger('maxCommittedEntriesPerReady', config.maxCommittedEntriesPerReady)
  positiveInteger('maxUncommittedEntries', config.maxUncommittedEntries)
  if (config.trailingEntries !== undefined && !(Number.isInteger(config.trailingEntries) && config.trailingEntries >= 0)) {
    problems.push(`trailingEntries must be a non-negative integer, got ${config.trailingEntries}`)
  }
  if (config.heartbeatIntervalTicks >= config.electionTimeoutTicks) {
    problems.push(`heartbeatIntervalTicks (${config.heartbeatIntervalTicks}) must be below electionTimeoutTicks (${config.electionTimeoutTicks})`)
  }
  const leaseTicks = config.leaseTicks ?? defaultLeaseTicks(config.electionTimeoutTicks)
  // A voter's window may close electionTimeoutTicks - 1 ticks after it took the heartbeat (its first tick can come
  // right after), while the lease runs in real time from the send: one tick of margin at least.
  if (leaseTicks > config.electionTimeoutTicks - 2 || leaseTicks < 1) {
    problems.push(`leaseTicks (${leaseTicks}) must be at least 1 and at most electionTimeoutTicks - 2 (${config.electionTimeoutTicks - 2})`)
  }
  return problems
}

function defaultLeaseTicks(electionTimeoutTicks: number): number {
  return Math.max(1, Math.min(Math.floor(electionTimeoutTicks * 0.8), electionTimeoutTicks - 2))
}

export type RequestError =
  /** This server is not the leader; `leader` names the one it knows of, if any. */
  | 'not_leader'
  /** A leadership transfer is under way; proposals wait for the new leader (Thesis §3.10). */
  | 'transfer_in_progress'
  /** Too many entries are uncommitted (maxUncommittedEntries). */
  | 'too_many_uncommitted'
  /** A configuration change is not yet committed, or this leader has not yet committed an entry of its term. */
  | 'configuration_change_pending'
  /** The change or transfer makes no sense for the current configuration; see `message`. */
  | 'invalid_request'

export type RequestResult =
  | { readonly ok: true }
  | { readonly ok: false; readonly error: RequestError; readonly leader: NodeId | null; readonly message: string }

/** On success, the entries of a proposal have indexes index, index + 1, ... in `term`. */
export type ProposalResult =
  | { readonly ok: true; readonly index: number; readonly term: number }
  | { readonly ok: false; readonly error: RequestError; readonly leader: NodeId | null; readonly message: string }

export interface ProgressStatus {
  readonly matchIndex: number
  /** The highest index it acknowledged in answers that count (not marked `rebuilt`): see Progress.vouchedIndex. */
  readonly vouchedIndex: number
  readonly nextIndex: number
  readonly state: ProgressState
  readonly isLearner: boolean
  readonly pendingSnapshotIndex: number
  readonly inflightCount: number
  readonly lastResponseTick: number
}

export interface RaftStatus {
  readonly id: NodeId
  readonly term: number
  readonly votedFor: NodeId | null
  readonly role: Role
  readonly leader: NodeId | null
  readonly commitIndex: number
  readonly lastApplied: number
  readonly firstIndex: number
  readonly lastIndex: number
  readonly lastTerm: number
  /** The core's logical clock: the number of ticks since it was constructed. */
  readonly tick: number
  readonly configuration: Configuration
  readonly configurationIndex: number
  readonly leadTransferee: NodeId | null
  /** The leader's view of each other member; present on the leader only. */
  readonly progress?: Readonly<Record<NodeId, ProgressStatus>>
}

type CampaignKind = 'preVote' | 'election' | 'transfer'

interface PendingRead {
  readonly context: string
  /** This server's id for a local read, or the follower that forwarded it. */
  readonly from: NodeId
}

interface QueuedRead extends PendingRead {
  /** The commitIndex when the read arrived: the index the read must observe. */
  readonly index: number
  /** The heartbeat round that confirms this leader is still the leader (Thesis §6.4, step 3). */
  readonly seq: number
}

const EMPTY_DATA = new Uint8Array(0)

type MessageFields<M extends Message> = Omit<M, 'from'>
type Mutable<T> = { -readonly [K in keyof T]: T[K] }

export class RaftCore {
  readonly id: NodeId
  private readonly settings: Settings
  private readonly log: RaftLog

  // Persistent state on all servers (Figure 2), mirrored in HardState.
  /** The latest term this server has seen. Invariant: never decreases. */
  private term: number
  /** The candidate voted for in `term`, or null. Invariant: set at most once per term. */
  private votedFor: NodeId | null

  private role: Role = 'follower'
  /** The leader of `term` as far as this server knows. Invariant: role === 'leader' implies leader === id. */
  private leader: NodeId | null = null
  /** Votes received in the current (pre-)election. */
  private readonly votes = new Map<NodeId, boolean>()
  /** The leader's view of every other member (nextIndex, matchIndex, ...). Empty unless role === 'leader'. */
  private readonly progress = new Map<NodeId, Progress>()

  /** Logical clock: ticks since construction. CheckQuorum and the timers measure time with it; the lease uses leaseClock. */
  private nowTicks = 0
  /** The lease's clock (RaftConfig.clock), or the tick count. */
  private readonly leaseClock: () => number
  /** Ticks since the last reset of the election timer (followers and candidates). */
  private electionElapsedTicks = 0
  /** Drawn in [electionTimeoutTicks, 2 * electionTimeoutTicks) at each reset, so split votes resolve (§5.2). */
  private randomizedElectionTimeoutTicks = 0
  private heartbeatElapsedTicks = 0
  /**
   * Ticks since this server last heard from a leader of its term, was leader itself, or started. While below
   * electionTimeoutTicks (and checkQuorum is on), it ignores RequestVote and PreVote: Thesis §4.2.3, which keeps
   * removed servers from disrupting the cluster, and what makes the leader lease safe (Thesis §6.4.1). Starting at 0
   * on construction means a restarted server also waits, since it may have acknowledged a lease before it crashed;
   * a server that never saw a term (term 0) cannot have, and starts past it.
   */
  private leaderContactElapsedTicks = 0

  /** The server leadership is being transferred to, or null (Thesis §3.10). */
  private leadTransferee: NodeId | null = null
  private transferElapsedTicks = 0
  /**
   * Set once this leader sent TimeoutNow in this term: the target's election ignores leases, so this leader's lease
   * is void for the rest of its term.
   */
  private leaseRevoked = false

  /** The number of the last heartbeat round sent; never decreases, so acknowledgements are unambiguous. */
  private heartbeatSeq = 0
  /** A heartbeat round is due (timer, or a read waiting for confirmation); sent by the next ready(). */
  private heartbeatPending = false
  /** New entries or a new commitIndex wait to be sent to followers; sent (batched) by the next ready(). */
  private appendPending = false
  /** Set while a leader removed from the configuration sends its last messages (announcedCommit). */
  private announceAll = false
  /** ReadIndex requests waiting until this leader commits an entry of its own term (Thesis §6.4, step 1). */
  private readsAwaitingCommit: PendingRead[] = []
  /** ReadIndex requests waiting for a heartbeat round acknowledged by a majority, in seq order. */
  private readsAwaitingQuorum: QueuedRead[] = []

  private messages: Message[] = []
  private readStates: ReadState[] = []
  private prevHardState: HardState
  private prevSoftState: SoftState
  /** The Ready handed out and not yet advanced. */
  private readyInProgress: Ready | null = null
  /** See RaftConfig.voteFromIndex. */
  private voteFromIndex: number

  constructor(
    config: RaftConfig,
    private readonly storage: LogReader,
    private readonly rng: Rng,
  ) {
    const problems = validateRaftConfig(config)
    assert(problems.length === 0, `invalid Raft configuration: ${problems.join('; ')}`)
    this.id = config.id
    this.voteFromIndex = config.voteFromIndex ?? 0
    this.leaseClock = config.clock ?? (() => this.nowTicks)
    this.settings = {
      electionTimeoutTicks: config.electionTimeoutTicks,
      heartbeatIntervalTicks: config.heartbeatIntervalTicks,
      leaseTicks: config.leaseTicks ?? defaultLeaseTicks(config.electionTimeoutTicks),
      preVote: config.preVote,
      checkQuorum: config.checkQuorum,
      maxInflightMessages: config.maxInflightMessages,
      maxEntriesPerMessage: config.maxEntriesPerMessage,
      maxBytesPerMessage: config.maxBytesPerMessage,
      maxCommittedEntriesPerReady: config.maxCommittedEntriesPerReady ?? 1024,
      maxUncommittedEntries: config.maxUncommittedEntries ?? 8192,
      trailingEntries: config.trailingEntries ?? 1024,
      announceAppliedCommit: config.announceAppliedCommit ?? false,
      reportsApplied: config.reportsApplied ?? false,
    }
    const hardState = storage.hardState()
    const appliedIndex = config.appliedIndex ?? storage.snapshot()?.index ?? 0
    this.log = new RaftLog(storage, makeConfiguration(config.voters, config.learners ?? []), appliedIndex)
    this.term = hardState.term
    this.votedFor = hardState.votedFor
    // A commitIndex written lazily may be behind what the state machine applied; both were committed.
    this.log.commitTo(Math.max(hardState.commitIndex, appliedIndex))
    this.prevHardState = hardState
    this.becomeFollower(this.term, null)
    this.leaderContactElapsedTicks = this.term === 0 ? this.settings.electionTimeoutTicks : 0
    this.prevSoftState = { role: this.role, leader: this.leader }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Inputs.

  /** Advances logical time by one tick. */
  tick(): void {
    this.nowTicks += 1
    if (this.role === 'leader') this.tickLeader()
    else this.tickElection()
  }

  /** Takes a message from a peer (the driver routes it here; `to` must be this server). */
  step(message: Message): void {
    if (message.to !== this.id || message.from === this.id) return
    if (message.term > this.term) {
      if (!this.acceptHigherTerm(message)) return
    } else if (message.term < this.term) {
      this.answerStaleTerm(message)
      return
    }
    if (message.type === 'requestVote') {
      this.handleRequestVote(message)
      return
    }
    switch (this.role) {
      case 'leader':
        this.stepLeader(message)
        return
      case 'candidate':
      case 'preCandidate':
        this.stepCandidate(message)
        return
      case 'follower':
        this.stepFollower(message)
        return
    }
  }

  /** Appends commands to the log (leader only). Entries are sent and persisted by the next Ready (group commit). */
  propose(commands: readonly Uint8Array[]): ProposalResult {
    assert(commands.length > 0, 'propose needs at least one command')
    const refusal = this.refuseProposal(commands.length)
    if (refusal !== null) return refusal
    const index = this.appendAsLeader(commands.map((data) => ({ type: 'command' as const, data })))
    return { ok: true, index, term: this.term }
  }

  /**
   * Proposes one membership change (Thesis §4.1): it takes effect on every server as soon as the entry is in its log.
   * Refused while an earlier change is uncommitted, and until this leader has committed an entry of its own term
   * (the fix to single-server changes in Ongaro's raft-dev post of 2015: otherwise two leaders of successive terms
   * could each commit a change, with disjoint majorities).
   */
  proposeConfChange(change: ConfChange): ProposalResult {
    const refusal = this.refuseProposal(1)
    if (refusal !== null) return refusal
    if (this.log.configurationIndex() > this.log.commitIndex || !this.committedEntryInCurrentTerm()) {
      return this.refusal('configuration_change_pending', 'the previous configuration change, or the leader’s first entry, is not yet committed')
    }
    const next = applyConfChange(this.log.configuration(), change)
    if (typeof next === 'string') return this.refusal('invalid_request', next)
    const index = this.appendAsLeader([{ type: 'configuration', data: encodeConfiguration(next) }])
    return { ok: true, index, term: this.term }
  }

  /**
   * Starts a linearizable read (Thesis §6.4). The answer comes as a ReadState with this context in a later Ready (on
   * a follower, after a round trip to the leader). A read may be dropped when leadership changes: callers time out.
   */
  readIndex(context: string, options: { lease?: boolean } = {}): RequestResult {
    const lease = options.lease === true
    if (this.role === 'leader') {
      this.handleReadIndex(context, this.id, lease)
      return { ok: true }
    }
    if (this.leader === null) return this.refusal('not_leader', 'no leader is known')
    this.send<'readIndex'>({ type: 'readIndex', to: this.leader, term: this.term, context, ...(lease ? { lease: true } : {}) })
    return { ok: true }
  }

  /** Starts an election now (with a pre-election when preVote is on), e.g. when the leader's connection dropped. */
  campaign(): void {
    if (this.role === 'leader') return
    this.campaignAs(this.settings.preVote ? 'preVote' : 'election')
  }

  /**
   * Hands leadership to `to` (Thesis §3.10): bring its log up to date, then send it TimeoutNow. Proposals are
   * refused meanwhile; the transfer is abandoned after an election timeout.
   */
  transferLeadership(to: NodeId): RequestResult {
    if (this.role !== 'leader') return this.refusal('not_leader', 'only the leader can transfer leadership')
    if (to === this.id) return { ok: true }
    const progress = this.progress.get(to)
    if (progress === undefined || progress.isLearner) return this.refusal('invalid_request', `${to} is not a voter`)
    if (this.leadTransferee === to) return { ok: true }
    this.leadTransferee = to
    this.transferElapsedTicks = 0
    if (progress.matchIndex === this.log.lastIndex()) this.sendTimeoutNow(to)
    else this.maybeSendAppend(to, true)
    return { ok: true }
  }

  /** The driver finished (ok) or gave up (not ok) streaming a snapshot to `to` (etcd's ReportSnapshot). */
  reportSnapshot(to: NodeId, ok: boolean): void {
    const progress = this.progress.get(to)
    if (this.role !== 'leader' || progress === undefined || progress.state !== 'snapshot') return
    if (!ok) progress.pendingSnapshotIndex = 0
    progress.becomeProbe()
    // Wait for the follower's answer (or the next heartbeat's) before sending more.
    progress.paused = true
  }

  /** The transport could not reach `to`: stop pipelining to it, since what is in flight is probably lost. */
  reportUnreachable(to: NodeId): void {
    const progress = this.progress.get(to)
    if (this.role === 'leader' && progress !== undefined && progress.state === 'replicate') progress.becomeProbe()
  }

  /** Sets RaftConfig.voteFromIndex (the leader told a rebuilt server where it was re-added). */
  setVoteFromIndex(index: number): void {
    this.voteFromIndex = index
  }

  /** The index of a snapshot received from a leader that waits in the next Ready to be installed, or null. */
  pendingSnapshotIndex(): number | null {
    return this.log.unstable.snapshot?.index ?? null
  }

  /** Whether this server may vote and campaign (see RaftConfig.voteFromIndex). */
  mayVote(): boolean {
    return this.log.commitIndex >= this.voteFromIndex
  }

  /**
   * The driver made a snapshot up to `snapshotIndex` (metadata from `snapshotMetadata`) durable and visible through
   * `LogReader.snapshot()`. Returns the index up to which it may now delete log entries (keeping trailingEntries).
   * The snapshot may be of entries handed out for applying whose Ready is not yet advanced: they are never handed out
   * again.
   */
  snapshotSaved(snapshotIndex: number): number {
    assert(snapshotIndex <= this.log.applyingIndex, `snapshot ${snapshotIndex} is beyond what was handed out to apply (${this.log.applyingIndex})`)
    const saved = this.storage.snapshot()
    assert(saved !== null && saved.index >= snapshotIndex, `storage does not show the snapshot at ${snapshotIndex}`)
    this.log.pruneConfigurations(snapshotIndex)
    // The durable log's first index, not the log's: a snapshot from the leader accepted meanwhile (waiting in the next
    // Ready) moves the log's first index past what storage holds, and nothing past the saved snapshot may go.
    return Math.min(snapshotIndex, Math.max(snapshotIndex - this.settings.trailingEntries, this.storage.firstIndex() - 1))
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Outputs.

  /** The work to do now, or null if there is none. See `Ready` for the order; call `advance` when done. */
  ready(): Ready | null {
    assert(this.readyInProgress === null, 'ready() called again before advance()')
    this.flushPendingSends()
    if (!this.hasReady()) return null
    const termOrVoteChanged = this.term !== this.prevHardState.term || this.votedFor !== this.prevHardState.votedFor
    const softChanged = this.role !== this.prevSoftState.role || this.leader !== this.prevSoftState.leader
    const hardChanged = termOrVoteChanged || this.log.commitIndex !== this.prevHardState.commitIndex
    const entries = this.log.unstable.nextEntries()
    const snapshot = this.log.unstable.nextSnapshot()
    const committedEntries = this.log.nextCommittedEntries(this.settings.maxCommittedEntriesPerReady)
    const ready: Mutable<Ready> = {
      entries,
      messages: this.messages,
      committedEntries,
      readStates: this.readStates,
      mustSync: entries.length > 0 || snapshot !== null || termOrVoteChanged,
    }
    if (softChanged) ready.softState = this.prevSoftState = { role: this.role, leader: this.leader }
    if (hardChanged) ready.hardState = this.prevHardState = { term: this.term, votedFor: this.votedFor, commitIndex: this.log.commitIndex }
    if (snapshot !== null) ready.snapshot = snapshot
    this.messages = []
    this.readStates = []
    this.log.unstable.acceptInProgress()
    const lastCommitted = committedEntries[committedEntries.length - 1]
    if (lastCommitted !== undefined) this.log.acceptApplying(lastCommitted.index)
    this.readyInProgress = ready
    return ready
  }

  /** Whether ready() would return work (without taking it). */
  private hasReady(): boolean {
    const log = this.log
    const unstable = log.unstable
    return (
      this.messages.length > 0 ||
      this.readStates.length > 0 ||
      this.role !== this.prevSoftState.role ||
      this.leader !== this.prevSoftState.leader ||
      this.term !== this.prevHardState.term ||
      this.votedFor !== this.prevHardState.votedFor ||
      log.commitIndex !== this.prevHardState.commitIndex ||
      unstable.offsetInProgress < unstable.offset + unstable.entries.length ||
      unstable.nextSnapshot() !== null ||
      (unstable.snapshot === null && log.applyingIndex < log.commitIndex)
    )
  }

  /**
   * The driver did everything `ready` asked: persisted, sent, and applied its committed entries, or with
   * reportsApplied handed them to its apply (it reports them applied with `appliedTo`).
   */
  advance(ready: Ready): void {
    assert(ready === this.readyInProgress, 'advance() must be given the Ready from the last ready()')
    this.readyInProgress = null
    if (ready.snapshot !== undefined) this.log.stableSnapshotTo(ready.snapshot.index)
    const lastEntry = ready.entries[ready.entries.length - 1]
    if (lastEntry !== undefined) this.log.stableTo(lastEntry.index, lastEntry.term)
    const lastCommitted = ready.committedEntries[ready.committedEntries.length - 1]
    if (lastCommitted !== undefined && !this.settings.reportsApplied) this.markApplied(lastCommitted.index)
    // The leader's own entries now count towards commit (its match is its durable log).
    if (this.role === 'leader' && lastEntry !== undefined) this.maybeCommit()
  }

  /**
   * With reportsApplied: the driver has applied every committed entry up to `index`, which it was handed in a Ready
   * (a snapshot installed since may already count for more: then this changes nothing).
   */
  appliedTo(index: number): void {
    assert(this.settings.reportsApplied, 'appliedTo is for a driver that reports what it applied (reportsApplied)')
    assert(index <= this.log.applyingIndex, `applied ${index} beyond what was handed out to apply (${this.log.applyingIndex})`)
    this.markApplied(index)
  }

  private markApplied(index: number): void {
    if (index <= this.log.appliedIndex) return
    this.log.appliedTo(index)
    // What was applied may now be announced (announceAppliedCommit): at the next ready(), to followers told less.
    if (this.settings.announceAppliedCommit && this.role === 'leader') this.appendPending = true
  }

  /**
   * The commit index a leader tells its followers: its own, or with announceAppliedCommit no more than it applied.
   * A follower that learns less commits later, never wrongly; a leader leaving after its removal tells all it knows.
   */
  private announcedCommit(): number {
    const { commitIndex, appliedIndex } = this.log
    if (!this.settings.announceAppliedCommit || this.announceAll) return commitIndex
    // A leader further behind than one Ready's worth of entries (a new leader applying a backlog, a slow apply) does
    // not hold its followers back: they apply those entries themselves. A driver that applies beside its loop
    // (reportsApplied) holds entries handed out and not yet applied as a matter of course: there the backlog is what
    // it has not been handed yet.
    const behind = commitIndex - (this.settings.reportsApplied ? this.log.applyingIndex : appliedIndex)
    if (behind > this.settings.maxCommittedEntriesPerReady) return commitIndex
    return Math.min(commitIndex, appliedIndex)
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Queries.

  /** This server's state; `progress` (the leader's view of each follower) unless asked to leave it out. */
  status(options: { progress?: boolean } = {}): RaftStatus {
    const base = {
      id: this.id,
      term: this.term,
      votedFor: this.votedFor,
      role: this.role,
      leader: this.leader,
      commitIndex: this.log.commitIndex,
      lastApplied: this.log.appliedIndex,
      firstIndex: this.log.firstIndex(),
      lastIndex: this.log.lastIndex(),
      lastTerm: this.log.lastTerm(),
      tick: this.nowTicks,
      configuration: this.log.configuration(),
      configurationIndex: this.log.configurationIndex(),
      leadTransferee: this.leadTransferee,
    }
    if (this.role !== 'leader' || options.progress === false) return base
    const progress: Record<NodeId, ProgressStatus> = {}
    for (const [id, pr] of this.progress) {
      progress[id] = {
        matchIndex: pr.matchIndex,
        vouchedIndex: pr.vouchedIndex,
        nextIndex: pr.nextIndex,
        state: pr.state,
        isLearner: pr.isLearner,
        pendingSnapshotIndex: pr.pendingSnapshotIndex,
        inflightCount: pr.inflights.count,
        lastResponseTick: pr.lastResponseTick,
      }
    }
    return { ...base, progress }
  }

  /** The term of the entry at `index` in this server's log (unstable part included), or undefined. For checks. */
  termAt(index: number): number | undefined {
    return this.log.term(index)
  }

  /**
   * The first tick at which this leader's lease has expired (Thesis §6.4.1); 0 when it holds none. A majority
   * acknowledged a heartbeat sent at tick t, and each of them ignores votes for an election timeout after receiving
   * it, so no other leader can be elected before t + electionTimeoutTicks; the lease ends leaseTicks after t.
   * Requires checkQuorum (which enables that rule); void after sending TimeoutNow.
   */
  leaseValidUntilTick(): number {
    if (this.role !== 'leader' || !this.settings.checkQuorum || this.leaseRevoked) return 0
    const quorumTick = majorityValue(this.log.configuration().voters, (id) =>
      id === this.id ? this.leaseClock() : (this.progress.get(id)?.ackedTick ?? Number.NEGATIVE_INFINITY),
    )
    return Math.max(0, quorumTick + this.settings.leaseTicks)
  }

  /** Whether this leader's lease holds at `tick` (default: now, on the lease's clock). */
  isLeaseValid(tick: number = this.leaseClock()): boolean {
    return tick < this.leaseValidUntilTick()
  }

  /**
   * For a cheap read under the lease: the index the state machine must have applied before serving it, or null
   * when the lease does not hold (fall back to readIndex). Only once this leader committed an entry of its term,
   * since before that its commitIndex may lag the previous leader's (Thesis §6.4).
   */
  leaseRead(): number | null {
    if (!this.isLeaseValid() || !this.committedEntryInCurrentTerm()) return null
    return this.log.commitIndex
  }

  /**
   * Metadata for a snapshot of the state machine at `index`, a committed index (the state machine may have applied
   * it before this Ready is advanced): the term there and the configuration in force there (Thesis §5.1). Null while
   * a snapshot received from the leader waits to be installed: it replaces the state machine and the log anyway. Null
   * too below a snapshot saved since, whose configuration history no longer reaches `index` (a snapshot send reading
   * an older state, say): null rather than another index's configuration.
   */
  snapshotMetadata(index: number): SnapshotMetadata | null {
    assert(index <= this.log.commitIndex, `snapshot at ${index} is beyond the commit index ${this.log.commitIndex}`)
    if (this.log.unstable.snapshot !== null) return null
    const configuration = this.log.configurationAt(index)
    if (configuration === undefined) return null
    const term = this.log.term(index)
    assert(term !== undefined, `no term known for applied index ${index}`)
    return { index, term, configuration }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Terms and roles.

  /**
   * Figure 2, "All Servers": a higher term makes us a follower in it. Returns false when the message is to be
   * ignored instead.
   */
  private acceptHigherTerm(message: Message): boolean {
    if (message.type === 'requestVote') {
      // Thesis §4.2.3: within an election timeout of hearing from a leader, neither update the term nor vote.
      if (!message.transfer && this.inLease()) return false
      // Thesis §9.6: a PreVote never changes anyone's term.
      if (message.preVote) return true
    } else if (message.type === 'requestVoteResponse' && message.preVote && message.granted) {
      // A granted PreVote carries the term we would campaign in; we move to it only when we campaign.
      return true
    }
    const fromLeader = message.type === 'appendEntries' || message.type === 'heartbeat' || message.type === 'installSnapshot'
    this.becomeFollower(message.term, fromLeader ? message.from : null)
    return true
  }

  /** A message from an older term: ignored, except where answering tells the sender to catch up. */
  private answerStaleTerm(message: Message): void {
    if ((this.settings.checkQuorum || this.settings.preVote) && (message.type === 'appendEntries' || message.type === 'heartbeat')) {
      // A deposed leader may not learn of the new term otherwise: with PreVote and CheckQuorum nobody bumps its term
      // by asking for votes. This answer carries our term and makes it step down (etcd-io/raft raft.go Step).
      this.send<'appendEntriesResponse'>({ type: 'appendEntriesResponse', to: message.from, term: this.term, success: false, index: 0, conflictIndex: 0, conflictTerm: 0 })
    } else if (message.type === 'requestVote') {
      // Figure 2: "Reply false if term < currentTerm", with our term, so the candidate catches up. This matters
      // after membership changes: a voter that others still see as a learner gets no RequestVote from them, and
      // without this answer it could campaign in a stale term forever.
      this.send<'requestVoteResponse'>({ type: 'requestVoteResponse', to: message.from, term: this.term, preVote: message.preVote, granted: false })
    }
  }

  private inLease(): boolean {
    return this.settings.checkQuorum && this.leaderContactElapsedTicks < this.settings.electionTimeoutTicks
  }

  private becomeFollower(term: number, leader: NodeId | null): void {
    const wasLeader = this.role === 'leader'
    this.reset(term)
    this.role = 'follower'
    this.leader = leader
    // A deposed leader held its own lease a moment ago: it waits before voting, like any other voter of that lease.
    if (wasLeader) this.leaderContactElapsedTicks = 0
  }

  private becomePreCandidate(): void {
    assert(this.role !== 'leader', 'a leader cannot become a pre-candidate')
    // Thesis §9.6: the term does not change and no vote is recorded until the pre-election is won.
    this.role = 'preCandidate'
    this.leader = null
    this.votes.clear()
    this.electionElapsedTicks = 0
    this.randomizeElectionTimeout()
  }

  private becomeCandidate(): void {
    assert(this.role !== 'leader', 'a leader cannot become a candidate')
    // §5.2: increment the term and vote for ourselves. Ready persists both before the RequestVotes leave.
    this.reset(this.term + 1)
    this.votedFor = this.id
    this.role = 'candidate'
  }

  private becomeLeader(): void {
    assert(this.role === 'candidate', `only a candidate can become leader, not a ${this.role}`)
    this.reset(this.term)
    this.role = 'leader'
    this.leader = this.id
    this.leaderContactElapsedTicks = 0
    const nextIndex = this.log.lastIndex() + 1
    const configuration = this.log.configuration()
    for (const id of members(configuration)) {
      if (id === this.id) continue
      this.progress.set(id, new Progress(nextIndex, this.settings.maxInflightMessages, this.nowTicks, !isVoter(configuration, id)))
    }
    // §5.4.2 and Thesis §6.4: entries of earlier terms are committed only through an entry of this term, so commit a
    // no-op at once; it also tells this leader the current commitIndex, which ReadIndex and the lease need.
    this.appendAsLeader([{ type: 'noop', data: EMPTY_DATA }])
  }

  /** Clears the volatile state of a role; moves to `term` (forgetting the vote) if it is new. */
  private reset(term: number): void {
    assert(term >= this.term, `term must not go back from ${this.term} to ${term}`)
    if (term !== this.term) {
      this.term = term
      this.votedFor = null
    }
    this.leader = null
    this.electionElapsedTicks = 0
    this.heartbeatElapsedTicks = 0
    this.randomizeElectionTimeout()
    this.leadTransferee = null
    this.transferElapsedTicks = 0
    this.leaseRevoked = false
    this.votes.clear()
    this.progress.clear()
    this.readsAwaitingCommit = []
    this.readsAwaitingQuorum = []
    this.heartbeatPending = false
    this.appendPending = false
  }

  private randomizeElectionTimeout(): void {
    const timeout = this.settings.electionTimeoutTicks
    this.randomizedElectionTimeoutTicks = timeout + this.rng.nextInt(timeout)
  }

  /** Whether this server may campaign: it is a voter in its latest configuration, and not installing a snapshot. */
  private promotable(): boolean {
    return isVoter(this.log.configuration(), this.id) && this.log.unstable.snapshot === null && this.mayVote()
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Time.

  private tickElection(): void {
    this.electionElapsedTicks += 1
    this.leaderContactElapsedTicks += 1
    if (this.electionElapsedTicks >= this.randomizedElectionTimeoutTicks) {
      this.electionElapsedTicks = 0
      if (this.promotable()) this.campaignAs(this.settings.preVote ? 'preVote' : 'election')
    }
  }

  private tickLeader(): void {
    this.heartbeatElapsedTicks += 1
    // Thesis §6.2: a leader that has not heard from a majority within an election timeout steps down, so that
    // clients can find the real leader and, with the lease, so that it stops serving reads.
    if (this.settings.checkQuorum && !this.quorumActive()) {
      this.becomeFollower(this.term, null)
      return
    }
    if (this.leadTransferee !== null) {
      this.transferElapsedTicks += 1
      // Thesis §3.10: abort a transfer that did not finish within an election timeout, and take proposals again.
      if (this.transferElapsedTicks >= this.settings.electionTimeoutTicks) this.abortLeaderTransfer()
    }
    if (this.heartbeatElapsedTicks >= this.settings.heartbeatIntervalTicks) {
      this.heartbeatElapsedTicks = 0
      this.heartbeatPending = true
    }
  }

  /** Whether a majority of voters (this leader included, if it is one) was heard from within an election timeout. */
  private quorumActive(): boolean {
    const quorumTick = majorityValue(this.log.configuration().voters, (id) =>
      id === this.id ? this.nowTicks : (this.progress.get(id)?.lastResponseTick ?? Number.NEGATIVE_INFINITY),
    )
    return this.nowTicks - quorumTick < this.settings.electionTimeoutTicks
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Elections (§5.2, Thesis §9.6).

  private campaignAs(kind: CampaignKind): void {
    if (!this.promotable()) return
    if (kind === 'preVote') this.becomePreCandidate()
    else this.becomeCandidate()
    const voteTerm = kind === 'preVote' ? this.term + 1 : this.term
    this.votes.set(this.id, true)
    if (this.tallyVotes()) return
    const lastLogIndex = this.log.lastIndex()
    const lastLogTerm = this.log.lastTerm()
    for (const voter of this.log.configuration().voters) {
      if (voter === this.id) continue
      this.send<'requestVote'>({
        type: 'requestVote',
        to: voter,
        term: voteTerm,
        preVote: kind === 'preVote',
        lastLogIndex,
        lastLogTerm,
        transfer: kind === 'transfer',
      })
    }
  }

  /** Acts on the votes so far; returns whether the (pre-)election is decided. */
  private tallyVotes(): boolean {
    const result = voteResult(this.log.configuration().voters, this.votes)
    if (result === 'pending') return false
    if (result === 'lost') {
      this.becomeFollower(this.term, null)
    } else if (this.role === 'preCandidate') {
      this.campaignAs('election')
    } else {
      this.becomeLeader()
    }
    return true
  }

  private handleRequestVote(message: RequestVote): void {
    // Figure 2 (RequestVote receiver): grant if we have not voted for someone else in this term and the
    // candidate's log is at least as up-to-date as ours (§5.4.1). A PreVote for a later term asks only the second.
    const canVote =
      this.mayVote() &&
      (this.votedFor === message.from || (this.votedFor === null && this.leader === null) || (message.preVote && message.term > this.term))
    if (canVote && this.log.isUpToDate(message.lastLogIndex, message.lastLogTerm)) {
      // Answer in the message's term: a PreVote's term is ahead of ours, and the pre-candidate ignores older terms.
      this.send<'requestVoteResponse'>({ type: 'requestVoteResponse', to: message.from, term: message.term, preVote: message.preVote, granted: true })
      if (!message.preVote) {
        // §5.2: granting a vote resets the election timer. Thesis §3.8: Ready persists the vote before the answer.
        this.electionElapsedTicks = 0
        this.votedFor = message.from
      }
    } else {
      this.send<'requestVoteResponse'>({ type: 'requestVoteResponse', to: message.from, term: this.term, preVote: message.preVote, granted: false })
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Behaviour by role.

  private stepLeader(message: Message): void {
    const progress = this.progress.get(message.from)
    // Any message of this term from a member shows it is alive and follows us (CheckQuorum), a rebuilt one's too:
    // CheckQuorum only decides when a leader gives up, and a leader that stays can still remove and re-add a rebuilt
    // voter (the removal commits without it). Its answers count towards no commit, read or lease (vouchedIndex).
    if (progress !== undefined) progress.lastResponseTick = this.nowTicks
    switch (message.type) {
      case 'appendEntriesResponse':
        if (progress !== undefined) this.handleAppendEntriesResponse(message, progress)
        return
      case 'heartbeatResponse':
        if (progress !== undefined) this.handleHeartbeatResponse(message, progress)
        return
      case 'readIndex':
        this.handleReadIndex(message.context, message.from, message.lease === true)
        return
      case 'appendEntries':
      case 'heartbeat':
      case 'installSnapshot':
        // Election Safety (Figure 3): at most one leader per term.
        assert(false, `${this.id} is leader of term ${this.term} and got ${message.type} from ${message.from} in the same term`)
        return
      default:
        return
    }
  }

  private stepCandidate(message: Message): void {
    switch (message.type) {
      case 'appendEntries':
      case 'heartbeat':
      case 'installSnapshot':
        // §5.2: a leader of our term exists; return to follower and take its message.
        this.becomeFollower(this.term, message.from)
        this.stepFollower(message)
        return
      case 'requestVoteResponse':
        if (message.preVote !== (this.role === 'preCandidate')) return
        this.votes.set(message.from, message.granted)
        this.tallyVotes()
        return
      default:
        return
    }
  }

  private stepFollower(message: Message): void {
    switch (message.type) {
      case 'appendEntries':
        this.heardFromLeader(message.from)
        this.handleAppendEntries(message)
        return
      case 'heartbeat':
        this.heardFromLeader(message.from)
        this.handleHeartbeat(message)
        return
      case 'installSnapshot':
        this.heardFromLeader(message.from)
        this.handleInstallSnapshot(message)
        return
      case 'timeoutNow':
        // Thesis §3.10: start an election at once, skipping PreVote, and tell voters to ignore their lease.
        this.campaignAs('transfer')
        return
      case 'readIndexResponse':
        this.readStates.push({ index: message.index, context: message.context })
        return
      default:
        return
    }
  }

  /**
   * Whether this server's answers must say `rebuilt`: until its commit index reaches the index at which it was
   * re-added (mayVote), not only until its join is answered. The answer comes over the peer links, not Raft, so the
   * server's term may still be older than the term it voted in before it lost its data; in a cluster of five a stale
   * leader of that older term could then commit with it and one other voter while the removal committed with the
   * three others (review finding). A commit index at the re-add means a leader whose log holds the re-add told it so,
   * and it took that leader's term: every leader still counting it as a voter is older, and its messages are refused.
   */
  private rebuilt(): boolean {
    return !this.mayVote()
  }

  private heardFromLeader(leader: NodeId): void {
    this.electionElapsedTicks = 0
    this.leaderContactElapsedTicks = 0
    this.leader = leader
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Replication, follower side (§5.3).

  private handleAppendEntries(message: AppendEntries): void {
    if (message.prevLogIndex < this.log.commitIndex) {
      // Everything up to our commitIndex matches the leader's log (Leader Completeness). Acknowledge no further than
      // what this message shows the leader holds: should that property ever be broken (a voter rebuilt without being
      // re-added), an acknowledgement past the leader's own log would make it look for entries it never had.
      const index = Math.min(this.log.commitIndex, message.prevLogIndex + message.entries.length)
      this.sendAppendEntriesResponse(message.from, true, index, 0, 0)
      return
    }
    const lastNewIndex = this.log.maybeAppend(message.prevLogIndex, message.prevLogTerm, message.leaderCommit, message.entries)
    if (lastNewIndex !== null) {
      this.sendAppendEntriesResponse(message.from, true, lastNewIndex, 0, 0)
      return
    }
    // §5.3 fast back-tracking: point the leader at the last entry that may match, skipping our entries whose terms
    // are above prevLogTerm, which cannot be in the leader's log at those indexes.
    const hint = this.log.findConflictByTerm(Math.min(message.prevLogIndex, this.log.lastIndex()), message.prevLogTerm)
    this.sendAppendEntriesResponse(message.from, false, message.prevLogIndex, hint.index, hint.term)
  }

  private handleHeartbeat(message: Heartbeat): void {
    // leaderCommit is at most our matchIndex as the leader knows it, so those entries are ours too. A follower whose
    // storage was wiped (an operator rebuilding a node) has less than the leader remembers: commit only what it
    // holds, all of which came through AppendEntries' consistency check; the leader's probe brings the rest.
    this.log.commitTo(Math.min(message.leaderCommit, this.log.lastIndex()))
    const rebuilt = this.rebuilt() ? { rebuilt: true } : {}
    this.send<'heartbeatResponse'>({ type: 'heartbeatResponse', to: message.from, term: this.term, seq: message.seq, tick: message.tick, lastIndex: this.log.lastIndex(), ...rebuilt })
  }

  private handleInstallSnapshot(message: InstallSnapshot): void {
    const snapshot = message.snapshot
    if (snapshot.index <= this.log.commitIndex) {
      this.sendAppendEntriesResponse(message.from, true, this.log.commitIndex, 0, 0)
      return
    }
    if (this.log.matchTerm(snapshot.index, snapshot.term)) {
      // Figure 13, step 6: we already hold the entry the snapshot ends with; keep the log after it.
      this.log.commitTo(snapshot.index)
      this.sendAppendEntriesResponse(message.from, true, this.log.commitIndex, 0, 0)
      return
    }
    // Figure 13, step 7: discard the log and take the snapshot. The answer leaves after it is durable (Ready).
    this.log.restore(snapshot)
    this.sendAppendEntriesResponse(message.from, true, snapshot.index, 0, 0)
  }

  private sendAppendEntriesResponse(to: NodeId, success: boolean, index: number, conflictIndex: number, conflictTerm: number): void {
    const rebuilt = this.rebuilt() ? { rebuilt: true } : {}
    this.send<'appendEntriesResponse'>({ type: 'appendEntriesResponse', to, term: this.term, success, index, conflictIndex, conflictTerm, ...rebuilt })
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Replication, leader side (§5.3, §5.4.2, §7).

  private refuseProposal(count: number): ProposalResult | null {
    if (this.role !== 'leader') return this.refusal('not_leader', 'this server is not the leader')
    if (this.leadTransferee !== null) return this.refusal('transfer_in_progress', `leadership is being transferred to ${this.leadTransferee}`)
    if (this.log.lastIndex() - this.log.commitIndex + count > this.settings.maxUncommittedEntries) {
      return this.refusal('too_many_uncommitted', `more than ${this.settings.maxUncommittedEntries} entries would be uncommitted`)
    }
    return null
  }

  private refusal(error: RequestError, message: string): { ok: false; error: RequestError; leader: NodeId | null; message: string } {
    return { ok: false, error, leader: this.leader, message }
  }

  /** Appends entries of this term to the leader's log; returns the index of the first. */
  private appendAsLeader(items: ReadonlyArray<{ type: EntryType; data: Uint8Array }>): number {
    const firstIndex = this.log.lastIndex() + 1
    const entries: Entry[] = items.map((item, i) => ({ index: firstIndex + i, term: this.term, type: item.type, data: item.data }))
    this.log.append(entries)
    this.appendPending = true
    if (entries.some((entry) => entry.type === 'configuration')) this.syncProgressWithConfiguration()
    // A leader alone commits as soon as its own write is durable (advance); nothing to wait for here.
    return firstIndex
  }

  /** Thesis §4.1: the leader uses the new configuration from the moment it appends it. */
  private syncProgressWithConfiguration(): void {
    const configuration = this.log.configuration()
    for (const id of members(configuration)) {
      if (id === this.id) continue
      const learner = !isVoter(configuration, id)
      const existing = this.progress.get(id)
      if (existing !== undefined) existing.isLearner = learner
      else this.progress.set(id, new Progress(this.log.lastIndex() + 1, this.settings.maxInflightMessages, this.nowTicks, learner))
    }
    for (const id of [...this.progress.keys()]) {
      if (!isMember(configuration, id)) this.progress.delete(id)
    }
    if (this.leadTransferee !== null && !isVoter(configuration, this.leadTransferee)) this.abortLeaderTransfer()
  }

  private handleAppendEntriesResponse(message: AppendEntriesResponse, progress: Progress): void {
    if (!message.success) {
      let nextProbeIndex = message.conflictIndex
      if (message.conflictTerm > 0) {
        // The follower holds conflictTerm at conflictIndex; our entries with a higher term cannot match there or
        // below, so probe at our last entry whose term is at most conflictTerm (etcd-io/raft stepLeader).
        nextProbeIndex = this.log.findConflictByTerm(message.conflictIndex, message.conflictTerm).index
      }
      if (progress.maybeDecrTo(message.index, nextProbeIndex)) {
        if (progress.state === 'replicate') progress.becomeProbe()
        this.maybeSendAppend(message.from, true)
      }
      return
    }
    // A follower never holds more of this term's log than the leader sent; an index past our log is a broken follower.
    const index = Math.min(message.index, this.log.lastIndex())
    // Only an answer that does not say `rebuilt` counts towards commit (Progress.vouchedIndex).
    const vouched = !isRebuiltAnswer(message) && index > progress.vouchedIndex
    if (vouched) progress.vouchedIndex = index
    const updated = progress.maybeUpdate(index)
    if (!updated && !(progress.matchIndex === index && progress.state === 'probe')) {
      if (vouched) this.maybeCommit()
      return
    }
    if (progress.state === 'probe') {
      progress.becomeReplicate()
    } else if (progress.state === 'snapshot' && progress.matchIndex + 1 >= this.log.firstIndex()) {
      // The follower caught up (by the snapshot, or otherwise) to where our log can continue.
      progress.becomeProbe()
      progress.becomeReplicate()
    } else if (progress.state === 'replicate') {
      progress.inflights.freeLE(message.index)
    }
    this.maybeCommit()
    if (this.role !== 'leader') return
    while (this.maybeSendAppend(message.from, false)) {
      // Fill the pipeline up to maxInflightMessages.
    }
    if (message.from === this.leadTransferee && progress.matchIndex === this.log.lastIndex()) this.sendTimeoutNow(message.from)
  }

  private handleHeartbeatResponse(message: HeartbeatResponse, progress: Progress): void {
    progress.paused = false
    if (message.lastIndex < progress.matchIndex && progress.state !== 'snapshot') {
      // The follower lost entries it had acknowledged (an operator wiped its storage). Raft assumes this never
      // happens; rather than leave it stuck (every rejection would look stale), forget what it had and probe it again.
      progress.matchIndex = message.lastIndex
      progress.vouchedIndex = Math.min(progress.vouchedIndex, message.lastIndex)
      progress.becomeProbe()
    }
    const vouches = !isRebuiltAnswer(message)
    if (vouches) {
      progress.ackedSeq = Math.max(progress.ackedSeq, message.seq)
      progress.ackedTick = Math.max(progress.ackedTick, message.tick)
    }
    // A follower that is behind, or one we are probing, gets an AppendEntries now rather than at the next proposal;
    // if everything in flight to it was lost, this is what restarts the flow. So does one whose entries only rebuilt
    // answers acknowledged, once it vouches for itself: its answer to that AppendEntries then counts towards commit
    // (a heartbeat's answer shows no log matching, so it cannot).
    const unvouched = vouches && progress.vouchedIndex < progress.matchIndex
    if (progress.matchIndex < this.log.lastIndex() || progress.state === 'probe' || unvouched) this.maybeSendAppend(message.from, true)
    this.releaseConfirmedReads()
  }

  /**
   * §5.3, §5.4.2: commitIndex becomes the highest index stored on a majority, but only if that entry is of the
   * current term (Figure 8). The leader counts itself with its durable log only.
   */
  private maybeCommit(): boolean {
    const index = majorityValue(this.log.configuration().voters, (id) =>
      id === this.id ? this.log.persistedIndex() : (this.progress.get(id)?.vouchedIndex ?? 0),
    )
    if (index <= this.log.commitIndex || this.log.term(index) !== this.term) return false
    this.log.commitTo(index)
    this.appendPending = true
    if (this.readsAwaitingCommit.length > 0) {
      const waiting = this.readsAwaitingCommit
      this.readsAwaitingCommit = []
      for (const read of waiting) this.queueRead(read)
    }
    // Thesis §4.2.2: a leader removed from the configuration leads until that change commits, then steps down.
    if (!isVoter(this.log.configuration(), this.id) && this.log.configurationIndex() <= this.log.commitIndex) this.stepDownAfterRemoval()
    return true
  }

  private stepDownAfterRemoval(): void {
    // Tell followers the new commitIndex before leaving, and hand over to an up-to-date voter so the cluster need
    // not wait for an election timeout (Thesis §3.10, §4.2.2).
    this.announceAll = true
    this.appendPending = true
    try {
      this.flushPendingSends()
    } finally {
      this.announceAll = false
    }
    const lastIndex = this.log.lastIndex()
    const successor = this.log.configuration().voters.find((id) => this.progress.get(id)?.vouchedIndex === lastIndex)
    if (successor !== undefined) this.sendTimeoutNow(successor)
    this.becomeFollower(this.term, null)
  }

  /** Sends what the last steps made due: one heartbeat round and one batch of AppendEntries per follower. */
  private flushPendingSends(): void {
    if (this.role !== 'leader') return
    if (this.heartbeatPending) {
      this.heartbeatPending = false
      this.broadcastHeartbeat()
    }
    if (this.appendPending) {
      this.appendPending = false
      for (const [id, progress] of this.progress) {
        this.maybeSendAppend(id, progress.sentCommitIndex < this.announcedCommit())
        while (this.maybeSendAppend(id, false)) {
          // Batched by maxEntriesPerMessage and maxBytesPerMessage, pipelined up to maxInflightMessages.
        }
      }
    }
  }

  /**
   * Sends the next AppendEntries to `to` if its flow allows; an empty one only if `sendIfEmpty`. Falls back to a
   * snapshot when the entries it needs were compacted. Returns whether a message was sent.
   */
  private maybeSendAppend(to: NodeId, sendIfEmpty: boolean): boolean {
    const progress = this.progress.get(to)
    if (progress === undefined || progress.isPaused()) return false
    const prevLogIndex = progress.nextIndex - 1
    const prevLogTerm = this.log.term(prevLogIndex)
    if (prevLogTerm === undefined) return this.maybeSendSnapshot(to, progress)
    let entries: Entry[] = []
    // With a full pipeline, send only an empty AppendEntries: if everything in flight was lost, its answer (a
    // rejection) is what resets the flow (etcd-io/raft maybeSendAppend).
    if (progress.state !== 'replicate' || !progress.inflights.full()) {
      const found = this.log.entries(progress.nextIndex, Number.POSITIVE_INFINITY, this.settings.maxEntriesPerMessage, this.settings.maxBytesPerMessage)
      if (found === null) return this.maybeSendSnapshot(to, progress)
      entries = found
    }
    if (entries.length === 0 && !sendIfEmpty) return false
    const leaderCommit = this.announcedCommit()
    this.send<'appendEntries'>({ type: 'appendEntries', to, term: this.term, prevLogIndex, prevLogTerm, entries, leaderCommit })
    progress.sentEntries(entries.length, prevLogIndex + entries.length)
    progress.sentCommitIndex = Math.max(progress.sentCommitIndex, Math.min(leaderCommit, prevLogIndex + entries.length))
    return true
  }

  private maybeSendSnapshot(to: NodeId, progress: Progress): boolean {
    // Streaming a snapshot is expensive: not to a server we have not heard from lately.
    if (this.nowTicks - progress.lastResponseTick >= this.settings.electionTimeoutTicks) return false
    const snapshot = this.storage.snapshot()
    assert(snapshot !== null, `entries before ${progress.nextIndex} were compacted but there is no snapshot`)
    progress.becomeSnapshot(snapshot.index)
    this.send<'installSnapshot'>({ type: 'installSnapshot', to, term: this.term, snapshot })
    return true
  }

  private broadcastHeartbeat(): void {
    this.heartbeatSeq += 1
    for (const [id, progress] of this.progress) {
      // Never more than the follower is known to hold: it commits what we send without checking (etcd sendHeartbeat).
      const leaderCommit = Math.min(progress.matchIndex, this.announcedCommit())
      // The lease runs from when the heartbeat left, on the lease's clock, which the follower echoes back.
      this.send<'heartbeat'>({ type: 'heartbeat', to: id, term: this.term, leaderCommit, seq: this.heartbeatSeq, tick: this.leaseClock() })
    }
  }

  private sendTimeoutNow(to: NodeId): void {
    this.leaseRevoked = true
    this.send<'timeoutNow'>({ type: 'timeoutNow', to, term: this.term })
  }

  private abortLeaderTransfer(): void {
    this.leadTransferee = null
    this.transferElapsedTicks = 0
  }

  private committedEntryInCurrentTerm(): boolean {
    return this.log.term(this.log.commitIndex) === this.term
  }

  // ---------------------------------------------------------------------------------------------------------------
  // ReadIndex (Thesis §6.4).

  private handleReadIndex(context: string, from: NodeId, lease: boolean): void {
    // Step 1: until this leader has committed an entry of its term, its commitIndex may be behind.
    if (!this.committedEntryInCurrentTerm()) {
      this.readsAwaitingCommit.push({ context, from })
      return
    }
    // Under its lease no other server can have been elected (Thesis §6.4.1), so the commit index now holds every
    // write acknowledged before the read asked: a read that accepts the lease (a default read, here or on a follower)
    // is answered at once, without the heartbeat round. The leader's own default reads use leaseRead directly.
    if (lease && this.isLeaseValid()) {
      if (from === this.id) this.readStates.push({ index: this.log.commitIndex, context })
      else this.send<'readIndexResponse'>({ type: 'readIndexResponse', to: from, term: this.term, context, index: this.log.commitIndex })
      return
    }
    this.queueRead({ context, from })
  }

  /** Steps 2 and 3: record readIndex = commitIndex, then confirm leadership with the next heartbeat round. */
  private queueRead(read: PendingRead): void {
    this.readsAwaitingQuorum.push({ ...read, index: this.log.commitIndex, seq: this.heartbeatSeq + 1 })
    this.heartbeatPending = true
    this.releaseConfirmedReads()
  }

  private releaseConfirmedReads(): void {
    if (this.readsAwaitingQuorum.length === 0) return
    const confirmedSeq = majorityValue(this.log.configuration().voters, (id) =>
      id === this.id ? Number.POSITIVE_INFINITY : (this.progress.get(id)?.ackedSeq ?? 0),
    )
    let released = 0
    for (const read of this.readsAwaitingQuorum) {
      if (read.seq > confirmedSeq) break
      released += 1
      if (read.from === this.id) this.readStates.push({ index: read.index, context: read.context })
      else this.send<'readIndexResponse'>({ type: 'readIndexResponse', to: read.from, term: this.term, context: read.context, index: read.index })
    }
    if (released > 0) this.readsAwaitingQuorum = this.readsAwaitingQuorum.slice(released)
  }

  // ---------------------------------------------------------------------------------------------------------------

  private send<T extends Message['type']>(fields: MessageFields<Extract<Message, { type: T }>>): void {
    this.messages.push({ ...fields, from: this.id } as Message)
  }
}

/** An answer from a server waiting for its join's answer, which vouches for nothing (HeartbeatResponse.rebuilt). */
function isRebuiltAnswer(message: Message): boolean {
  return (message.type === 'appendEntriesResponse' || message.type === 'heartbeatResponse') && message.rebuilt === true
}
