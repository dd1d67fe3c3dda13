/**
 * The Raft replica: the thin driver between the pure core (src/raft) and the world. A timer ticks the core; one loop
 * takes each Ready and does it in the order ready.ts prescribes: persist (one LevelDB batch, one sync: every proposal
 * waiting at that moment commits together), install a received snapshot, send, start applying its committed entries
 * to the state machine, hand out read states, advance; then, every snapshotThreshold applied entries, snapshot and
 * compact. The apply runs while the loop takes the next Ready (one apply at a time, in order), and the core learns
 * what is applied when it is (RaftConfig.reportsApplied).
 *
 * Everything outside the process comes in as a parameter: the clock, timers and randomness (Environment), the Raft
 * storage, the state machine (whose disk is StateFiles), and the peer links. The agent passes the real ones; the
 * simulator (test/sim) runs this same class over a simulated disk, network and clock.
 *
 * What lives elsewhere: waiting on entries (waiters.ts), snapshot streams and staging (snapshot-transfer.ts),
 * membership changes and the address book (membership.ts), and everything a client request needs beyond a local
 * proposal — forwarding to the leader, read barriers, join routing — in src/rpc/.
 *
 * Outcomes of a local proposal are reported honestly: applied with its result; `no_leader` when another entry was
 * applied at its index (not applied, safe to retry); `outcome_unknown` when no answer came in time.
 */
import type { Logger } from 'pino'
import { assert } from '../lib/assert.js'
import { sleep, type Environment, type Timer } from '../lib/environment.js'
import { WardenError } from '../lib/errors.js'
import { ownedBytes } from '../lib/owned-bytes.js'
import { SeededRng } from '../lib/rng.js'
import { RaftCore, type AppendEntries, type ConfChange, type Entry, type Message, type Ready, type RaftStatus, type SnapshotMetadata } from '../raft/index.js'
import type { MembershipRecord, RaftStorage } from '../raft/storage/raft-storage.js'
import type { ApplyResult, Command } from '../state/commands.js'
import { switchToStagedState } from '../state/snapshot.js'
import type { ApplyOptions, StateStore } from '../state/store.js'
import { holdsRaftState } from './founding.js'
import { Membership } from './membership.js'
import type { PeerLinks } from './peer-links.js'
import { ShippedWritesInbox, ShippedWritesOutbox } from './shipped-writes.js'
import { SnapshotTransfer, type SnapshotChunk } from './snapshot-transfer.js'
import { AppliedWaiters, EntryWaiters } from './waiters.js'

export interface RaftReplicaOptions {
  nodeName: string
  /** Where this node dials the servers named by its flags (name → address), itself included (its own address). */
  dialAddresses: Map<string, string>
  /** How this server entered its cluster (founding.ts), already saved in `storage`. */
  membership: MembershipRecord
  storage: RaftStorage
  state: StateStore
  links: PeerLinks
  environment: Environment
  log: Logger
  onFatal: (error: unknown) => void
  heartbeatIntervalMs: number
  electionTimeoutMs: number
  /** Applied entries after which the node snapshots its state and compacts its log. */
  snapshotThreshold: number
  /**
   * Bytes of entries appended since the last snapshot after which the node snapshots anyway (SNAPSHOT_BYTES_DEFAULT):
   * the log since the last compaction is mirrored in memory, and 8,192 entries of up to 1 MiB each would be 8 GiB.
   */
  snapshotBytesThreshold?: number
  /** Bytes of entries kept behind a snapshot for followers slightly behind, at most (TRAILING_BYTES_DEFAULT). */
  trailingBytesMax?: number
  /** Committed entries handed out to apply and not applied yet before the Ready loop waits. Default APPLY_QUEUE_ENTRIES_MAX. */
  applyQueueEntriesMax?: number
  /** How long a write or a read waits for a leader before failing with no_leader. */
  leaderWaitMs?: number
  /** How long a write waits for its entry to be applied before its outcome is unknown. */
  applyWaitMs?: number
  /** Checks a joining server's cluster address before it goes into the log (the problem, or undefined). Default: any. */
  addressCheck?: (address: string) => string | undefined
  /** Where the time of each step goes (the agent's metrics); none: the clock is not read for it. */
  timings?: ReplicaTimings
  /**
   * Whether a leader ships its followers the writes its apply produced, for them to apply instead of the commands
   * (shipped-writes.ts). Default true. False (the agent's raft.ship_writes): as leader this server ships nothing and
   * tells followers its commit index at once; as follower it runs every command, whatever it is sent.
   */
  shipWrites?: boolean
}

/**
 * Histograms the driver reports into, in seconds of the environment's clock. Called inside the Ready loop once per
 * batch (never per entry), so an observation must be a few arithmetic operations, never I/O.
 */
export interface ReplicaTimings {
  /** Persisting one Ready's entries and hard state: one storage batch, synced when the Ready says so. */
  append: { observe(seconds: number): void }
  /** Applying one Ready's committed entries to the state. */
  apply: { observe(seconds: number): void }
  /** Taking a snapshot: syncing the state, recording it and compacting the log. */
  snapshot: { observe(seconds: number): void }
}

/** Events the driver counts since it started, read by the agent's metrics when scraped. Only ever incremented. */
export interface ReplicaCounts {
  /** Times this node came to know a leader (itself included) after knowing another or none. */
  leaderChanges: number
  becameLeader: number
  snapshotsTaken: number
  snapshotsInstalled: number
  /** Snapshots streamed to a follower in full (as leader). */
  snapshotsSent: number
  /** Commands applied here from the writes a leader shipped, and commands applied by running them (not as leader). */
  appliedShipped: number
  appliedUnshipped: number
}

/** The leader's view of one other member's replication (RaftReplica.followers). */
export interface FollowerView {
  id: string
  matchIndex: number
  /** Entries of the leader's log the member does not hold yet. */
  lagEntries: number
  /** Milliseconds since the member last answered the leader. */
  lastContactMs: number
}

/** A local proposal's answer: its apply result and the log index it was applied at. */
export interface ProposalOutcome {
  result: ApplyResult
  index: number
}

export type RequestHandler = (from: string, request: Record<string, unknown>) => Promise<unknown>

/** Bound on proposals waiting for their entries to apply, and on reads waiting for this node to catch up. */
export const WAITING_MAX = 16_384
/**
 * Committed entries handed out to apply and not applied yet, at most, before the Ready loop waits for the apply
 * (four Readies of the core's largest hand-out): what a slow apply holds in memory stays bounded.
 */
export const APPLY_QUEUE_ENTRIES_MAX = 4 * 1024
/** Bytes appended since the last snapshot after which a node snapshots, whatever the count of entries. */
export const SNAPSHOT_BYTES_DEFAULT = 64 * 1024 * 1024
/** Bytes of entries kept behind a snapshot at most, for followers slightly behind. */
export const TRAILING_BYTES_DEFAULT = 16 * 1024 * 1024

function entryBytes(entries: readonly Entry[]): number {
  let bytes = 0
  for (const entry of entries) bytes += entry.data.length
  return bytes
}

export class RaftReplica {
  readonly nodeName: string
  readonly environment: Environment
  readonly log: Logger
  readonly state: StateStore
  readonly storage: RaftStorage
  readonly links: PeerLinks
  readonly leaderWaitMs: number
  readonly applyWaitMs: number
  readonly membershipChanges: Membership
  private readonly core: RaftCore
  /** Randomness for the driver's own choices (which peer to ask), from the environment's seed. */
  private readonly rng: SeededRng
  private readonly tickMs: number
  /** The core's election timeout in ticks: also the window in which the leader counts a member as heard from. */
  private readonly electionTimeoutTicks: number
  private readonly transfer: SnapshotTransfer
  private ticker: Timer | undefined
  private processing = false
  /** Set by every input; the loop runs again if an input arrived after it last asked the core for work. */
  private dirty = false
  private loopDone: Promise<void> = Promise.resolve()
  /** The apply of the last committed entries handed out, after those before it, while the loop goes on (handleReady step 3). */
  private applying: Promise<void> | undefined
  /** Entries handed out to apply and not applied yet. */
  private applyQueued = 0
  private readonly applyQueueEntriesMax: number
  private stopped = false
  private failed = false
  private leaderId: string | null = null
  private role: string = 'follower'
  /** The term this node's Raft storage holds durably (see handleReady: what a leader may send before it persists). */
  private durableTerm: number
  /** When this node last heard from its leader, on the environment's monotonic clock. */
  private lastLeaderContactAt = 0
  private readonly writes: EntryWaiters<ApplyResult | undefined>
  /** See releasedThrough. */
  private released = 0
  private readonly applied: AppliedWaiters
  private readonly reads = new Map<string, { lease: boolean; resolve: () => void; reject: (error: WardenError) => void }>()
  private readonly leaderWaiters = new Set<{ resolve: () => void; reject: (error: WardenError) => void }>()
  private readonly leadershipListeners = new Set<() => void>()
  private readonly requestHandlers = new Map<string, RequestHandler>()
  /** Aborted when the replica stops: loops that pause (joins, discovery, promotion) end at once. */
  private readonly stopping = new AbortController()
  /** Bytes of the entries held in the log's in-memory mirror since its last compaction (about: what was appended). */
  private appendedBytes = 0
  readonly counts: ReplicaCounts = { leaderChanges: 0, becameLeader: 0, snapshotsTaken: 0, snapshotsInstalled: 0, snapshotsSent: 0, appliedShipped: 0, appliedUnshipped: 0 }
  private readonly shipWrites: boolean
  private readonly outbox = new ShippedWritesOutbox()
  private readonly inbox = new ShippedWritesInbox()

  constructor(private readonly options: RaftReplicaOptions) {
    this.nodeName = options.nodeName
    this.environment = options.environment
    this.log = options.log
    this.state = options.state
    this.storage = options.storage
    this.links = options.links
    // Ticks are half a heartbeat: heartbeats go out every two ticks, and timeouts are measured to a tick.
    this.tickMs = Math.max(5, Math.floor(options.heartbeatIntervalMs / 2))
    this.electionTimeoutTicks = Math.max(3, Math.round(options.electionTimeoutMs / this.tickMs))
    this.leaderWaitMs = options.leaderWaitMs ?? 7_000
    this.applyWaitMs = options.applyWaitMs ?? 10_000
    this.shipWrites = options.shipWrites ?? true
    this.applyQueueEntriesMax = options.applyQueueEntriesMax ?? APPLY_QUEUE_ENTRIES_MAX
    assert(Number.isInteger(this.applyQueueEntriesMax) && this.applyQueueEntriesMax >= 1, `applyQueueEntriesMax must be a positive integer, not ${this.applyQueueEntriesMax}`)
    this.writes = new EntryWaiters(options.environment, WAITING_MAX)
    this.applied = new AppliedWaiters(options.environment, WAITING_MAX)
    const environment = options.environment
    this.rng = new SeededRng(environment.randomSeed())
    this.core = new RaftCore(
      {
        id: options.nodeName,
        voters: options.membership.voters,
        voteFromIndex: options.membership.voteFromIndex,
        electionTimeoutTicks: this.electionTimeoutTicks,
        heartbeatIntervalTicks: 2,
        preVote: true,
        checkQuorum: true,
        maxInflightMessages: 64,
        maxEntriesPerMessage: 512,
        maxBytesPerMessage: 1024 * 1024,
        // Keep at most a snapshot interval of entries behind each snapshot for followers slightly behind.
        trailingEntries: Math.min(1024, options.snapshotThreshold),
        appliedIndex: options.state.lastApplied,
        // The writes a leader ships must reach a follower with the commit index that lets it apply them.
        announceAppliedCommit: this.shipWrites,
        // Entries are applied while the loop goes on (handleReady), and reported applied when they are.
        reportsApplied: true,
        // The lease in real time: the ticker does not catch up after the process was stopped, and a leader woken
        // from SIGSTOP must find its lease expired, not serve reads and authorize writes from its old state.
        clock: () => environment.now() / this.tickMs,
      },
      options.storage,
      new SeededRng(environment.randomSeed()),
    )
    this.durableTerm = this.core.status({ progress: false }).term
    this.transfer = new SnapshotTransfer({
      state: options.state,
      links: options.links,
      environment,
      log: options.log,
      snapshotMetadata: (index) => this.core.snapshotMetadata(index),
      offerSnapshot: (from, term, snapshot) => this.offerSnapshot(from, term, snapshot),
      reportSent: (to, ok) => {
        if (ok) this.counts.snapshotsSent += 1
        this.core.reportSnapshot(to, ok)
        this.kick()
      },
      leads: (term) => this.role === 'leader' && this.core.status({ progress: false }).term === term,
    })
    this.membershipChanges = new Membership(this, options.dialAddresses, options.membership, options.addressCheck ?? (() => undefined))
    // A leader checks every command before proposing it (src/rpc): a malformed entry was written by a leader that did
    // not (an older build). Every replica applies it as a no-op; each says so once per entry.
    options.state.malformedListeners.add((index, problem) => this.log.error({ index, problem }, 'a committed entry is malformed; applied as a no-op'))
  }

  async start(): Promise<void> {
    await this.membershipChanges.loadAddresses()
    const { links } = this.options
    links.onMessage((from, message) => this.onPeerMessage(from, message))
    links.onRequest((from, request) => this.onPeerRequest(from, request))
    links.onPeerState((peer, connected) => this.membershipChanges.onPeerState(peer, connected))
    // Links that opened before the handler was registered are not reported (PeerLinks.onPeerState): read them now,
    // in the same turn, so that no link event falls between the two.
    this.membershipChanges.noticeOpenLinks()
    this.ticker = this.environment.setInterval(() => {
      this.core.tick()
      this.kick()
    }, this.tickMs)
    // A cluster of one needs no election timeout to find out it wins.
    const voters = this.core.status().configuration.voters
    if (voters.length === 1 && voters[0] === this.nodeName) this.core.campaign()
    this.kick()
    this.membershipChanges.afterStart()
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The Ready loop.

  /** Asks the loop to run; it runs one turn at a time, never inside the caller. */
  kick(): void {
    this.dirty = true
    if (this.processing || this.stopped || this.failed) return
    this.processing = true
    this.loopDone = new Promise<void>((resolve) => {
      this.environment.defer(() => {
        this.processReadies()
          .catch((error: unknown) => this.fail(error))
          .finally(() => {
            this.processing = false
            resolve()
            if (this.dirty) this.kick()
          })
      })
    })
  }

  private async processReadies(): Promise<void> {
    for (;;) {
      if (this.stopped || this.failed) return
      this.dirty = false
      const ready = this.core.ready()
      if (ready === null) return
      await this.handleReady(ready)
      this.core.advance(ready)
      await this.maybeSnapshot()
    }
  }

  /**
   * Every snapshotThreshold applied entries: make the state durable, record the snapshot (its data is the state
   * database itself, read through a LevelDB snapshot when a follower needs it), and compact the log behind it, keeping
   * the core's trailing entries so a follower slightly behind catches up from the log, and every entry a snapshot
   * being sent still needs the term of. Runs inside the loop, so never at the same time as an install.
   */
  private async maybeSnapshot(): Promise<void> {
    const last = this.storage.snapshot()?.index ?? 0
    const bytesThreshold = this.options.snapshotBytesThreshold ?? SNAPSHOT_BYTES_DEFAULT
    const appliedSoFar = this.state.lastApplied
    if (appliedSoFar - last < this.options.snapshotThreshold && (this.appendedBytes < bytesThreshold || appliedSoFar === last)) return
    // The snapshot is the state at its index: no apply may move the state on while it is recorded.
    await this.applyDone()
    const applied = this.state.lastApplied
    const metadata = this.core.snapshotMetadata(applied)
    if (metadata === null) return
    const startedAt = this.environment.now()
    // The state first: the log may be compacted only behind a state that a crash cannot take back.
    await this.state.sync()
    await this.storage.saveSnapshot(metadata)
    this.counts.snapshotsTaken += 1
    // A snapshot from the leader accepted during those awaits replaces the whole log at the next Ready: nothing to
    // compact now (the driver simulation found this race, seed 0x550).
    if (this.core.pendingSnapshotIndex() !== null) return
    const compactTo = Math.min(this.trailingBound(this.core.snapshotSaved(metadata.index), metadata.index), this.transfer.compactionLimit())
    await this.storage.compact(compactTo)
    // What stays in memory: the entries after the compaction point.
    this.appendedBytes = this.storage.lastIndex() > compactTo ? entryBytes(this.storage.entries(compactTo + 1, this.storage.lastIndex() + 1)) : 0
    this.options.timings?.snapshot.observe((this.environment.now() - startedAt) / 1000)
    this.log.debug({ index: metadata.index, compactedTo: compactTo }, 'snapshot taken, log compacted')
  }

  /**
   * The compaction point the core suggests (its trailing entries behind the snapshot), moved up until the entries kept
   * behind the snapshot hold at most trailingBytesMax bytes: a follower further behind gets a snapshot instead.
   */
  private trailingBound(suggested: number, snapshotIndex: number): number {
    const max = this.options.trailingBytesMax ?? TRAILING_BYTES_DEFAULT
    let bytes = 0
    let bound = snapshotIndex
    const first = Math.max(suggested + 1, this.storage.firstIndex())
    for (let index = snapshotIndex; index >= first; index--) {
      const [entry] = this.storage.entries(index, index + 1)
      bytes += entry?.data.length ?? 0
      if (bytes > max) return Math.max(suggested, bound)
      bound = index - 1
    }
    return suggested
  }

  private async handleReady(ready: Ready): Promise<void> {
    if (ready.softState !== undefined) this.onSoftState(ready.softState.role, ready.softState.leader)
    const timings = this.options.timings
    // 0. A leader's AppendEntries, heartbeats and answers to ReadIndex leave before its own write, which then overlaps
    // the followers' (Thesis §10.2.1; etcd's raft node sends a leader's messages before saving too). Safe because the
    // core counts the leader's own log towards commit only up to what advance() reported persisted, so an entry commits
    // only once a majority holds it durably, whether or not the leader is in that majority. Only messages of a term
    // already durable here go early, and only a leading run of them, so each peer still receives this Ready's messages
    // in order.
    let sentEarly = 0
    if (this.role === 'leader') {
      while (sentEarly < ready.messages.length && mayLeaveBeforePersist(ready.messages[sentEarly]!, this.durableTerm)) {
        this.send(ready.messages[sentEarly]!)
        sentEarly += 1
      }
    }
    // 1. Persist before anything else leaves (Thesis §3.8).
    if (ready.entries.length > 0 || ready.hardState !== undefined || ready.snapshot !== undefined) {
      const persistStartedAt = timings === undefined ? 0 : this.environment.now()
      await this.storage.persist(
        {
          entries: ready.entries,
          ...(ready.hardState === undefined ? {} : { hardState: ready.hardState }),
          ...(ready.snapshot === undefined ? {} : { snapshot: ready.snapshot }),
        },
        ready.mustSync,
      )
      if (timings !== undefined) timings.append.observe((this.environment.now() - persistStartedAt) / 1000)
      this.appendedBytes += entryBytes(ready.entries)
      if (ready.hardState !== undefined) this.durableTerm = ready.hardState.term
    }
    // 1a. A snapshot from the leader: staged while it streamed; the log now depends on it, so switch to it
    // (finishStateSwitch completes this at start if a crash interrupts it).
    if (ready.snapshot !== undefined) {
      await this.applyDone()
      await this.install(ready.snapshot)
    }
    // 2. Send. Loss is fine: Raft retries.
    for (let n = sentEarly; n < ready.messages.length; n++) this.send(ready.messages[n]!)
    // 3. Apply, in order, while the loop goes on: the next Ready's entries are persisted and sent while these are
    // applied, as etcd's server applies in a goroutine of its own. Applies run one at a time, each after the one
    // before; past applyQueueEntriesMax entries waiting, the loop waits for them to be applied first.
    const committed = ready.committedEntries
    if (committed.length > 0 && !this.failed) {
      // Entries also stay in the log's in-memory mirror until a snapshot, which waits for the queued applies
      // (maybeSnapshot), and a snapshot is due after SNAPSHOT_BYTES_DEFAULT appended bytes: that bounds their bytes.
      if (this.applyQueued + committed.length > this.applyQueueEntriesMax) await this.applyDone()
      const leading = this.role === 'leader'
      const previous = this.applying ?? Promise.resolve()
      this.applyQueued += committed.length
      this.applying = previous.then(() => this.applyCommitted(committed, leading)).finally(() => (this.applyQueued -= committed.length))
    }
    // 4. Confirmed reads: each waits until this node applied its read index.
    for (const readState of ready.readStates) {
      const waiter = this.reads.get(readState.context)
      if (waiter === undefined) continue
      this.reads.delete(readState.context)
      this.afterApplied(readState.index).then(waiter.resolve, waiter.reject)
    }
  }

  /**
   * Applies committed entries handed out by a Ready, then wakes what waited for this node to catch up (once per
   * Ready, not per entry) and tells the core they are applied: only then may a leader announce them as committed
   * (announceAppliedCommit), with the writes this apply produced. Never rejects: a failure stops the replica.
   */
  private async applyCommitted(entries: readonly Entry[], leading: boolean): Promise<void> {
    // After a failure nothing more is applied: the entries queued behind the one that failed stay unapplied, as they
    // did when the loop itself stopped at the failed apply.
    if (this.failed) return
    try {
      const timings = this.options.timings
      const startedAt = timings === undefined ? 0 : this.environment.now()
      await this.state.applyEntries(entries, (entry, command, result) => this.afterApply(entry, command, result), this.applyOptions(leading))
      if (leading) this.outbox.seal()
      this.inbox.dropThrough(this.state.lastApplied)
      this.applied.release(this.state.lastApplied)
      if (timings !== undefined) timings.apply.observe((this.environment.now() - startedAt) / 1000)
      this.core.appliedTo(entries[entries.length - 1]!.index)
      this.kick()
    } catch (error) {
      this.fail(error)
    }
  }

  /** Resolves once no apply is running: before what needs the state to itself (a snapshot, an install, a stop). */
  private async applyDone(): Promise<void> {
    while (this.applying !== undefined) {
      const applying = this.applying
      await applying
      if (this.applying === applying) this.applying = undefined
    }
  }

  /**
   * A leader keeps the writes each command produced, for its followers; a follower applies the writes it was shipped
   * instead of a command, except where a write of its own waits on the entry (it proposed it while it led): that
   * write's caller needs the command's result, which only applying it here gives.
   */
  private applyOptions(leading: boolean): ApplyOptions<Entry> {
    const computed = this.releaseComputed
    if (leading) {
      if (!this.shipWrites) return { computed }
      // A leader without followers has no one to ship to.
      const { voters, learners } = this.core.status({ progress: false }).configuration
      if (voters.length + learners.length <= 1) return { computed }
      return { computed, produced: (entry, shipped) => this.outbox.produced(entry.index, entry.term, shipped) }
    }
    return {
      computed,
      shipped: (entry) => {
        // With shipping off this only counts: every command is run.
        const shipped = !this.shipWrites || this.writes.has(entry.index) ? undefined : this.inbox.take(entry.index, entry.term)
        if (shipped === undefined) this.counts.appliedUnshipped += 1
        else this.counts.appliedShipped += 1
        return shipped
      },
    }
  }

  private async install(snapshot: SnapshotMetadata): Promise<void> {
    assert(this.transfer.isStaged(snapshot.index), `the core installs a snapshot at ${snapshot.index} that was not staged`)
    this.inbox.dropThrough(snapshot.index)
    await this.state.replace(switchToStagedState)
    this.appendedBytes = 0
    this.transfer.installed()
    this.counts.snapshotsInstalled += 1
    this.writes.skippedTo(snapshot.index)
    this.applied.release(this.state.lastApplied)
    await this.membershipChanges.loadAddresses()
    this.log.info({ index: snapshot.index }, 'installed a snapshot from the leader')
  }

  private send(message: Message): void {
    if (message.type === 'installSnapshot') {
      this.transfer.send(message.to, message.term)
      return
    }
    const wire = this.withShippedWrites(message)
    if (this.links.send(message.to, wire)) return
    if (wire !== message) this.outbox.unsent(message.to)
    this.core.reportUnreachable(message.to)
  }

  /**
   * A leader's AppendEntries or heartbeat with the writes of the entries it lets the follower apply
   * (shipped-writes.ts). Both tell a follower the commit index, and a heartbeat often leaves first: one for a
   * ReadIndex goes ahead of the AppendEntries in the same Ready, so writes left to the AppendEntries would come after
   * the commit index that lets the follower apply their entries, and the follower would run those commands itself.
   */
  private withShippedWrites(message: Message): Message | (Message & { shipped: Uint8Array[] }) {
    if (!this.shipWrites || this.role !== 'leader') return message
    let shipped: Uint8Array[] | undefined
    if (message.type === 'appendEntries') {
      // The follower may apply up to the commit index sent, and no further than the entries it holds after this one;
      // batches that reach past that go whole (their entries are committed, and the follower keeps them for later).
      const through = Math.min(message.leaderCommit, message.prevLogIndex + message.entries.length)
      shipped = this.outbox.attach(message.to, message.prevLogIndex, through)
    } else if (message.type === 'heartbeat') {
      // A heartbeat's commit index is never more than the follower holds; it sends no entries again, so nothing
      // already sent goes again (ShippedWritesOutbox.attachNew).
      shipped = this.outbox.attachNew(message.to, message.leaderCommit)
    }
    return shipped === undefined ? message : { ...message, shipped }
  }

  /**
   * A batch's results are computed and its writes not yet in the state: the writes that accept it (proposeLocally's
   * `early`) are answered now, and what this node serves after that waits for the batch (releasedThrough).
   */
  private readonly releaseComputed = (entry: Entry, result: ApplyResult): void => {
    if (entry.type !== 'command' || !this.writes.released(entry.index, entry.term, result)) return
    if (entry.index > this.released) this.released = entry.index
  }

  /**
   * The highest index whose result this node gave out before its apply was written (proposeLocally's `early`): until
   * lastApplied reaches it, what this node reads may lack a write it has answered (ClusterNode waits for it).
   */
  get releasedThrough(): number {
    return this.released
  }

  /** What an applied entry means beyond the state: membership, and the proposal waiting on it. */
  private afterApply(entry: Entry, command: Command, result: ApplyResult): void {
    this.membershipChanges.afterApply(entry, command)
    this.writes.applied(entry.index, entry.term, entry.type === 'command' ? result : undefined)
  }

  private onSoftState(role: string, leader: string | null): void {
    const changed = leader !== this.leaderId
    // A leader's writes to ship start with its term; a server that stops leading has none to ship.
    if (role !== this.role) this.outbox.clear()
    this.role = role
    this.leaderId = leader
    if (changed) this.log.info({ role, leader, term: this.core.status().term }, leader === null ? 'no leader' : 'leader known')
    if (leader === null) return
    if (changed) this.counts.leaderChanges += 1
    this.lastLeaderContactAt = this.environment.now()
    for (const waiter of this.leaderWaiters) waiter.resolve()
    this.leaderWaiters.clear()
    // Reads confirmed by an old leader that went away would wait out their timeout: ask the new one. A read index
    // from any leader of a later term is at least as recent, so a late answer to the first request is still safe.
    if (changed) for (const [context, read] of this.reads) this.core.readIndex(context, { lease: read.lease })
    if (role === 'leader') {
      this.counts.becameLeader += 1
      this.log.info({ term: this.core.status().term }, 'became leader')
      for (const listener of this.leadershipListeners) listener()
      this.membershipChanges.onBecomeLeader()
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Peers.

  private onPeerMessage(from: string, message: unknown): void {
    const raft = message as Message
    if (typeof raft !== 'object' || raft === null || raft.from !== from) return
    if (raft.from === this.leaderId) this.lastLeaderContactAt = this.environment.now()
    const shipped = (raft as { shipped?: unknown }).shipped
    if (shipped !== undefined && this.shipWrites && (raft.type === 'appendEntries' || raft.type === 'heartbeat')) {
      this.inbox.receive(shipped, this.state.lastApplied)
    }
    this.core.step(raft.type === 'appendEntries' ? withOwnedEntries(raft) : raft)
    this.kick()
  }

  private async onPeerRequest(from: string, request: unknown): Promise<unknown> {
    if (typeof request !== 'object' || request === null || typeof (request as { kind?: unknown }).kind !== 'string') {
      throw new WardenError('invalid_input', 'unknown replica request')
    }
    const kind = (request as { kind: string }).kind
    if (kind === 'snapshot') return this.transfer.receive(from, request as SnapshotChunk)
    // A founding server with an empty data dir asks whether the cluster exists before it founds one (founding.ts).
    if (kind === 'cluster-state') return { existing: this.holdsRaftState() }
    if (kind === 'addresses') return { members: this.membershipChanges.knownAddresses() }
    const handler = this.requestHandlers.get(kind)
    if (handler === undefined) throw new WardenError('invalid_input', 'unknown replica request')
    return handler(from, request as Record<string, unknown>)
  }

  /** Lets src/rpc serve a kind of peer request (forwarded writes, reads, joins). */
  handleRequests(kind: string, handler: RequestHandler): void {
    this.requestHandlers.set(kind, handler)
  }

  /** Whether this server holds anything Raft wrote (or is past its first start's discovery). */
  holdsRaftState(): boolean {
    const status = this.core.status({ progress: false })
    return status.term > 0 || status.lastIndex > 0 || holdsRaftState(this.storage)
  }

  private offerSnapshot(from: string, term: number, snapshot: SnapshotMetadata): boolean {
    if (this.stopped || this.failed) return false
    this.core.step({ type: 'installSnapshot', from, to: this.nodeName, term, snapshot })
    this.kick()
    return this.core.pendingSnapshotIndex() === snapshot.index
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Proposals, reads and waits, for src/rpc and membership.

  /**
   * Proposes an encoded command on this node, which must lead; resolves once it is applied here. `early`: once its
   * result is computed, before its apply is written, where the caller needs only the result (an answer rendered from
   * it) and this node's later requests wait for the write (releasedThrough).
   */
  proposeLocally(data: Uint8Array, options: { early?: boolean } = {}): Promise<ProposalOutcome> {
    if (this.writes.full()) return Promise.reject(new WardenError('rate_limited', 'too many writes are waiting to commit; retry later'))
    const proposed = this.core.propose([data])
    if (!proposed.ok) {
      const code = proposed.error === 'too_many_uncommitted' ? 'rate_limited' : 'no_leader'
      return Promise.reject(new WardenError(code, `the write was not accepted: ${proposed.message}; it was not applied, retry`))
    }
    this.kick()
    const index = proposed.index
    return this.writes
      .wait(index, proposed.term, this.applyWaitMs, 'the write was not committed in time; it may or may not be applied', options.early === true)
      .then((result) => ({ result: result!, index }))
  }

  /**
   * Proposes a membership change on this node, which must lead, and resolves once that very entry (its index and
   * term) is applied here. Retried while an earlier change, or this leader's first entry, is uncommitted.
   */
  async proposeConfChange(change: ConfChange): Promise<number> {
    const deadline = this.environment.now() + this.applyWaitMs
    for (;;) {
      this.checkRunning()
      if (this.role !== 'leader') throw new WardenError('no_leader', 'leadership changed during a membership change; retry')
      const proposed = this.core.proposeConfChange(change)
      if (proposed.ok) {
        this.kick()
        await this.writes.wait(proposed.index, proposed.term, this.applyWaitMs, `the change to ${change.nodeId} was not committed in time; it may or may not be in force`)
        return proposed.index
      }
      if (proposed.error !== 'configuration_change_pending' || this.environment.now() > deadline) {
        throw new WardenError(proposed.error === 'not_leader' ? 'no_leader' : 'invalid_input', `cannot ${change.type} ${change.nodeId}: ${proposed.message}`)
      }
      await this.pause(20)
    }
  }

  /**
   * Asks for a read index now (Thesis §6.4) and resolves once it is confirmed and applied here; 'no_leader' when the
   * core knows no leader to ask. src/rpc batches the reads of a turn into one call. With `lease`, a leader that holds
   * its lease answers without a heartbeat round (a default read); without, it always confirms with one (?consistent).
   */
  readIndex(options: { lease?: boolean } = {}): Promise<'confirmed' | 'no_leader'> {
    const lease = options.lease === true
    if (this.stopped || this.failed) return Promise.reject(new WardenError('no_leader', 'this node is shutting down; retry on another node'))
    if (this.reads.size >= WAITING_MAX) return Promise.reject(new WardenError('rate_limited', 'too many reads are waiting; retry later'))
    const context = this.environment.randomId()
    const started = this.core.readIndex(context, { lease })
    if (!started.ok) {
      if (started.error === 'not_leader') return Promise.resolve('no_leader')
      return Promise.reject(new WardenError('no_leader', `cannot confirm a read now: ${started.message}`))
    }
    this.kick()
    return new Promise<'confirmed' | 'no_leader'>((resolve, reject) => {
      const timer = this.environment.setTimeout(() => {
        this.reads.delete(context)
        reject(new WardenError('no_leader', 'the leader did not confirm the read in time; retry'))
      }, this.leaderWaitMs)
      this.reads.set(context, {
        lease,
        resolve: () => {
          timer.cancel()
          resolve('confirmed')
        },
        reject: (error) => {
          timer.cancel()
          reject(error)
        },
      })
    })
  }

  /** The index a read under this leader's lease must wait for, or null when the lease does not hold. */
  leaseRead(): number | null {
    return this.role === 'leader' ? this.core.leaseRead() : null
  }

  /** Resolves once this node's state machine has applied `index`. */
  afterApplied(index: number, timeoutMs = this.applyWaitMs): Promise<void> {
    if (this.state.lastApplied >= index) return Promise.resolve()
    return this.applied.wait(index, timeoutMs)
  }

  /** Resolves when a leader is known, or rejects with no_leader at `deadline` (environment time). */
  waitForLeader(deadline: number): Promise<void> {
    const remaining = deadline - this.environment.now()
    const refusal = (): WardenError => new WardenError('no_leader', 'no cluster leader; the request was not applied, retry')
    if (remaining <= 0 || this.stopped || this.failed) return Promise.reject(refusal())
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        resolve: () => {
          timer.cancel()
          resolve()
        },
        reject: (error: WardenError) => {
          timer.cancel()
          reject(error)
        },
      }
      const timer = this.environment.setTimeout(() => {
        this.leaderWaiters.delete(waiter)
        reject(refusal())
      }, remaining)
      this.leaderWaiters.add(waiter)
    })
  }

  checkRunning(): void {
    if (this.stopped) throw new WardenError('no_leader', 'this node is shutting down; retry on another node')
    if (this.failed) throw new WardenError('no_leader', 'this node stopped after a storage failure; retry on another node')
  }

  get isStopped(): boolean {
    return this.stopped || this.failed
  }

  /** A number in [0, 1) from the environment's randomness. */
  random(): number {
    return this.rng.nextInt(2 ** 32) / 2 ** 32
  }

  /** Pauses for `delayMs`, or less if the replica stops meanwhile. */
  pause(delayMs: number): Promise<void> {
    return sleep(this.environment, delayMs, this.stopping.signal)
  }

  /** Saves a new membership record and sets the index from which this server may vote (once its join is answered). */
  async saveMembership(record: MembershipRecord): Promise<void> {
    this.checkRunning()
    await this.storage.saveMembershipRecord(record)
    this.core.setVoteFromIndex(record.voteFromIndex)
    this.kick()
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Who leads, and status.

  get leader(): string | null {
    return this.leaderId
  }

  isLeader(): boolean {
    return this.role === 'leader'
  }

  leaderAddress(): string {
    return this.leaderId === null ? '' : this.membershipChanges.addressOf(this.leaderId)
  }

  lastContactMs(): number {
    if (this.role === 'leader') return 0
    return this.lastLeaderContactAt === 0 ? 0 : Math.round(this.environment.now() - this.lastLeaderContactAt)
  }

  /** Raft status for operators and tests. */
  status(): ReturnType<RaftCore['status']> {
    return this.core.status()
  }

  /** On the leader, how far each other member has replicated (for metrics); empty on any other server. */
  followers(): FollowerView[] {
    const status = this.core.status()
    if (status.progress === undefined) return []
    const followers: FollowerView[] = []
    for (const [id, progress] of Object.entries(status.progress)) {
      if (id === this.nodeName) continue
      followers.push({
        id,
        matchIndex: progress.matchIndex,
        lagEntries: Math.max(0, status.lastIndex - progress.matchIndex),
        lastContactMs: Math.max(0, status.tick - progress.lastResponseTick) * this.tickMs,
      })
    }
    return followers
  }

  /** The term of the entry at `index` in this server's log, entries not yet persisted included; for checkers. */
  termAt(index: number): number | undefined {
    return this.core.termAt(index)
  }

  /** Called each time this node becomes the leader (the agent writes the built-ins of a new cluster then), and soon if it leads already. */
  onLeadership(listener: () => void): void {
    this.leadershipListeners.add(listener)
    if (this.role === 'leader') this.environment.defer(listener)
  }

  /**
   * Hands leadership to `target`, or when none is named to the voter the leader would pick (heard from lately, the
   * furthest log first), and resolves with the new leader's name once this node knows it (Thesis §3.10: the core
   * brings the target's log up to date, then sends it TimeoutNow). This node must lead. A target that is not a voter is
   * an invalid_input naming `id`; a transfer not done within `waitMs` is outcome_unknown, since the target may still
   * win the election TimeoutNow started. Naming this node itself is answered at once: it leads already.
   */
  async transferLeadership(target: string | undefined, waitMs = this.leaderWaitMs): Promise<string> {
    this.checkRunning()
    if (this.role !== 'leader') throw new WardenError('no_leader', 'this node is no longer the leader; retry')
    const to = target ?? this.pickSuccessor()
    if (to === this.nodeName) return to
    const { configuration } = this.core.status({ progress: false })
    if (configuration.learners.includes(to)) throw new WardenError('invalid_input', `id: ${to} is a non-voter; only a voter can become the leader`, 'id')
    if (!configuration.voters.includes(to)) throw new WardenError('invalid_input', `id: ${to} is not a server of this cluster`, 'id')
    const started = this.core.transferLeadership(to)
    if (!started.ok) {
      throw started.error === 'not_leader'
        ? new WardenError('no_leader', 'this node is no longer the leader; retry')
        : new WardenError('invalid_input', `id: cannot hand leadership to ${to}: ${started.message}`, 'id')
    }
    this.kick()
    this.log.info({ to }, 'transferring leadership')
    if (await this.leaderKnownAs(to, waitMs)) return to
    this.checkRunning()
    const now = this.leaderId === null ? 'no leader is known' : `the leader is ${this.leaderId}`
    throw new WardenError('outcome_unknown', `the leadership transfer to ${to} did not complete within ${waitMs} ms (${now}); it may still complete: check /v1/status/leader`)
  }

  /** The voter a transfer without a named target goes to (successorOf). */
  private pickSuccessor(): string {
    const chosen = successorOf(this.core.status(), this.nodeName, this.electionTimeoutTicks)
    if (chosen === undefined) throw new WardenError('invalid_input', 'id: this cluster has no other voter to hand leadership to', 'id')
    return chosen
  }

  /** Resolves true once this node knows `node` as the leader, false if it does not within `waitMs` (or it stops). */
  async leaderKnownAs(node: string, waitMs: number): Promise<boolean> {
    const deadline = this.environment.now() + waitMs
    for (;;) {
      if (this.leaderId === node && (node === this.nodeName) === (this.role === 'leader')) return true
      if (this.isStopped || this.environment.now() >= deadline) return false
      await this.pause(10)
    }
  }

  /**
   * Whether this node counts `node` as alive, from what it sees itself (GET /v1/operator/servers); no request leaves
   * for it, so a node cut off from the others answers too. This node itself is alive. Another member is alive while
   * this node's peer link to it is open (the transport closes a link that stayed silent for three keepalive
   * intervals, so a stopped, hung or cut-off server turns failed within seconds), and, on the leader, while it also
   * had a Raft answer from it within an election timeout, the window in which CheckQuorum counts it (Thesis §6.2).
   * Both, because the core starts each member's clock as heard-from when it adds it or becomes leader: a member that
   * never answered would otherwise look alive for an election timeout.
   */
  memberAlive(node: string): boolean {
    if (node === this.nodeName) return true
    if (!this.membershipChanges.linkOpen(node)) return false
    if (this.role !== 'leader') return true
    const status = this.core.status()
    const progress = status.progress?.[node]
    return progress !== undefined && status.tick - progress.lastResponseTick < this.electionTimeoutTicks
  }

  /** Hands leadership to another voter before stopping (Thesis §3.10), so clients see no election timeout. */
  async transferLeadershipBeforeStop(waitMs = 1_000): Promise<void> {
    if (this.role !== 'leader') return
    // The voter a transfer without a target would pick: a rebuilt one could not win the election it would start.
    const target = successorOf(this.core.status(), this.nodeName, this.electionTimeoutTicks)
    if (target === undefined) return
    this.core.transferLeadership(target)
    this.kick()
    const deadline = this.environment.now() + waitMs
    while (this.role === 'leader' && this.environment.now() < deadline) await sleep(this.environment, 10)
    if (this.role !== 'leader') this.log.info({ to: target }, 'handed leadership over before stopping')
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Failure and stop.

  /** A failure outside the Ready loop that leaves this node unable to go on (its storage failed). Ignored once stopped. */
  reportFatal(error: unknown): void {
    if (this.stopped) return
    this.fail(error)
  }

  private fail(error: unknown): void {
    if (this.failed) return
    this.failed = true
    this.rejectAll(new WardenError('outcome_unknown', 'this node stopped after a storage failure'))
    this.options.onFatal(error)
  }

  private rejectAll(error: WardenError): void {
    this.writes.rejectAll(error)
    const refusal = new WardenError('no_leader', error.message)
    for (const waiter of this.reads.values()) waiter.reject(refusal)
    this.reads.clear()
    this.applied.rejectAll(refusal)
    for (const waiter of this.leaderWaiters) waiter.reject(refusal)
    this.leaderWaiters.clear()
  }

  /** Stops ticking and taking work; what waits is told its outcome; resolves once the loop is idle. */
  async stop(options: { transferLeadership?: boolean } = {}): Promise<void> {
    if (this.stopped) return
    if (options.transferLeadership !== false) await this.transferLeadershipBeforeStop().catch(() => undefined)
    this.stopped = true
    this.stopping.abort()
    this.ticker?.cancel()
    this.membershipChanges.stop()
    // Writes still waiting may yet commit on the other nodes: their outcome is unknown to their callers.
    this.rejectAll(new WardenError('outcome_unknown', 'this node is shutting down; the write may or may not have been applied'))
    await this.loopDone
    await this.applyDone()
    await this.transfer.stop()
  }
}

/**
 * Whether a leader may send `message` before the Ready that holds it is persisted (see handleReady): its AppendEntries
 * and heartbeats, and its answers to ReadIndex (their index is committed, so durable on a majority already). The
 * answers matter on writes through a follower: each turn's barrier is answered at the head of the next Ready, and
 * would otherwise hold that Ready's AppendEntries back behind the leader's write.
 */
function mayLeaveBeforePersist(message: Message, durableTerm: number): boolean {
  return (message.type === 'appendEntries' || message.type === 'heartbeat' || message.type === 'readIndexResponse') && message.term <= durableTerm
}

/**
 * The voter a leader hands over to when no target is named, or undefined when it has no other voter: one heard from
 * within an election timeout, the furthest log it vouches for first. Vouched, not matched: a voter that lost its data
 * holds the log again long before its answers count (they say `rebuilt` until it is re-added), and TimeoutNow would
 * start an election it cannot win, costing an election timeout.
 */
export function successorOf(status: RaftStatus, self: string, electionTimeoutTicks: number): string | undefined {
  const candidates = status.configuration.voters
    .filter((id) => id !== self)
    .map((id) => {
      const progress = status.progress?.[id]
      const heard = progress !== undefined && status.tick - progress.lastResponseTick < electionTimeoutTicks
      return { id, heard, vouchedIndex: progress?.vouchedIndex ?? 0, matchIndex: progress?.matchIndex ?? 0 }
    })
    .sort((a, b) => Number(b.heard) - Number(a.heard) || b.vouchedIndex - a.vouchedIndex || b.matchIndex - a.matchIndex || a.id.localeCompare(b.id))
  return candidates[0]?.id
}

/**
 * An AppendEntries whose entries hold their data in bytes of their own. Decoded from a frame, each entry's data is a
 * view into it (transport/frames.ts), and the log keeps entries until a snapshot compacts them: thousands of entries
 * and up to SNAPSHOT_BYTES_DEFAULT of their bytes, which as views would keep every frame they came in alive, with its
 * shipped writes, two to three times their bytes.
 */
export function withOwnedEntries(message: AppendEntries): AppendEntries {
  if (message.entries.length === 0) return message
  return { ...message, entries: message.entries.map((entry) => ({ index: entry.index, term: entry.term, type: entry.type, data: ownedBytes(entry.data) })) }
}
