/**
 * What a leader knows about one follower (Figure 2, "Volatile state on leaders": nextIndex and matchIndex) and how it
 * paces AppendEntries to it, after etcd-io/raft `tracker/progress.go` and `tracker/inflights.go`:
 *
 * - probe: the leader does not know where the follower's log ends; it sends one AppendEntries and waits for the
 *   answer (or the next heartbeat answer) before sending another.
 * - replicate: the logs agree up to matchIndex; the leader pipelines AppendEntries, moving nextIndex on as it sends,
 *   with at most `maxInflightMessages` unanswered.
 * - snapshot: the follower needs entries the leader has compacted; the driver streams a snapshot and nothing else is
 *   sent until it reports back.
 */
import { assert } from '../lib/assert.js'

export type ProgressState = 'probe' | 'replicate' | 'snapshot'

/** A bounded FIFO of the last index of each AppendEntries in flight to one follower. */
export class Inflights {
  private readonly lastIndexes: number[] = []

  constructor(readonly capacity: number) {
    assert(capacity >= 1, `maxInflightMessages must be at least 1, got ${capacity}`)
  }

  get count(): number {
    return this.lastIndexes.length
  }

  full(): boolean {
    return this.lastIndexes.length >= this.capacity
  }

  add(lastIndex: number): void {
    assert(!this.full(), 'inflights overflow')
    const previous = this.lastIndexes[this.lastIndexes.length - 1]
    assert(previous === undefined || lastIndex > previous, `inflights must grow: ${lastIndex} after ${previous}`)
    this.lastIndexes.push(lastIndex)
  }

  /** Frees every message whose last index is at most `index`: the follower has acknowledged them. */
  freeLE(index: number): void {
    let count = 0
    while (count < this.lastIndexes.length && this.lastIndexes[count]! <= index) count += 1
    if (count > 0) this.lastIndexes.splice(0, count)
  }

  reset(): void {
    this.lastIndexes.length = 0
  }
}

export class Progress {
  /** The highest index known to be replicated on the follower. Invariant: matchIndex < nextIndex. */
  matchIndex = 0
  /** The index of the next entry to send. In replicate state, entries in (matchIndex, nextIndex) are in flight. */
  nextIndex: number
  state: ProgressState = 'probe'
  /** In snapshot state: the index of the snapshot being sent. 0 otherwise, or after the driver reported failure. */
  pendingSnapshotIndex = 0
  /** Set after a probe (or when inflights are full): send nothing more until an answer or a heartbeat answer. */
  paused = false
  /** The highest commit index sent to the follower, to avoid sending an empty AppendEntries for nothing. */
  sentCommitIndex = 0
  /** The leader's tick when it last heard anything from this follower in its term (CheckQuorum, Thesis §6.2). */
  lastResponseTick: number
  /**
   * The highest index acknowledged by an answer that does not say `rebuilt` (messages.ts, HeartbeatResponse): what
   * counts towards commit (§5.3). A rebuilt server may have forgotten a term it voted in; its answers still move
   * matchIndex, which drives replication to it. Like ackedSeq and ackedTick below, it is raised by such answers alone,
   * so no order of arrival (an answer its previous incarnation sent, delivered late) can make rebuilt answers count.
   */
  vouchedIndex = 0
  /** The highest heartbeat `seq` this follower has echoed in the leader's term (ReadIndex, Thesis §6.4). */
  ackedSeq = 0
  /** The highest heartbeat send tick this follower has echoed in the leader's term (leader lease, Thesis §6.4.1). */
  ackedTick = Number.NEGATIVE_INFINITY
  readonly inflights: Inflights

  constructor(
    nextIndex: number,
    maxInflightMessages: number,
    nowTicks: number,
    public isLearner: boolean,
  ) {
    this.nextIndex = nextIndex
    this.inflights = new Inflights(maxInflightMessages)
    this.lastResponseTick = nowTicks
  }

  becomeProbe(): void {
    // After a snapshot the follower holds at least the snapshot: probe from there rather than from matchIndex.
    const next = this.state === 'snapshot' ? Math.max(this.matchIndex + 1, this.pendingSnapshotIndex + 1) : this.matchIndex + 1
    this.resetState('probe')
    this.nextIndex = next
  }

  becomeReplicate(): void {
    this.resetState('replicate')
    this.nextIndex = this.matchIndex + 1
  }

  becomeSnapshot(snapshotIndex: number): void {
    this.resetState('snapshot')
    this.pendingSnapshotIndex = snapshotIndex
    this.nextIndex = snapshotIndex + 1
  }

  /** A successful answer up to `index`. Returns whether matchIndex moved. */
  maybeUpdate(index: number): boolean {
    if (index <= this.matchIndex) return false
    this.matchIndex = index
    this.nextIndex = Math.max(this.nextIndex, index + 1)
    this.paused = false
    return true
  }

  /**
   * A rejection of the AppendEntries whose prevLogIndex was `rejected`, with the follower's hint that the logs may
   * agree up to `matchHint`. Returns false for a stale rejection (one that no longer matches what was sent).
   */
  maybeDecrTo(rejected: number, matchHint: number): boolean {
    if (this.state === 'replicate') {
      // Everything up to matchIndex is known to match, so a rejection at or below it is stale (reordered).
      if (rejected <= this.matchIndex) return false
      this.nextIndex = this.matchIndex + 1
      this.sentCommitIndex = Math.min(this.sentCommitIndex, this.nextIndex - 1)
      return true
    }
    // In probe state exactly one AppendEntries is outstanding, with prevLogIndex nextIndex - 1.
    if (this.nextIndex - 1 !== rejected) return false
    this.nextIndex = Math.max(Math.min(rejected, matchHint + 1), this.matchIndex + 1)
    this.sentCommitIndex = Math.min(this.sentCommitIndex, this.nextIndex - 1)
    this.paused = false
    return true
  }

  /** Records an AppendEntries with `count` entries ending at `lastIndex`. */
  sentEntries(count: number, lastIndex: number): void {
    if (this.state === 'replicate') {
      if (count > 0) {
        this.nextIndex = lastIndex + 1
        this.inflights.add(lastIndex)
      }
      this.paused = this.inflights.full()
    } else if (this.state === 'probe') {
      if (count > 0) this.paused = true
    } else {
      assert(false, 'AppendEntries sent in snapshot state')
    }
  }

  isPaused(): boolean {
    return this.state === 'snapshot' || this.paused
  }

  private resetState(state: ProgressState): void {
    this.state = state
    this.paused = false
    this.pendingSnapshotIndex = 0
    this.inflights.reset()
  }
}
