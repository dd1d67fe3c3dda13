/**
 * The tail of the log that is not yet durable: entries (and at most one snapshot) the core has accepted but the
 * driver has not yet confirmed written. Modelled on etcd-io/raft `log_unstable.go`, including the "in progress"
 * marks that let the core keep stepping messages while a Ready is being written.
 */
import { assert } from '../lib/assert.js'
import type { Entry, SnapshotMetadata } from './types.js'

export class UnstableLog {
  /** A snapshot received from the leader and not yet durable. Invariant: if set, offset === snapshot.index + 1. */
  snapshot: SnapshotMetadata | null = null
  /** Set once `snapshot` was handed out in a Ready; cleared when that Ready is advanced. */
  snapshotInProgress = false
  /** entries[i] has index offset + i. */
  entries: Entry[] = []
  /** The index of entries[0] (or where it would be). */
  offset: number
  /**
   * Entries below this index were handed out in a Ready whose write is under way.
   * Invariant: offset <= offsetInProgress <= offset + entries.length.
   */
  offsetInProgress: number

  constructor(offset: number) {
    this.offset = offset
    this.offsetInProgress = offset
  }

  /** The first index of the whole log, if the unstable snapshot decides it. */
  maybeFirstIndex(): number | undefined {
    return this.snapshot === null ? undefined : this.snapshot.index + 1
  }

  /** The last index of the whole log, if the unstable part decides it. */
  maybeLastIndex(): number | undefined {
    if (this.entries.length > 0) return this.offset + this.entries.length - 1
    return this.snapshot === null ? undefined : this.snapshot.index
  }

  maybeTerm(index: number): number | undefined {
    if (index < this.offset) {
      return this.snapshot !== null && this.snapshot.index === index ? this.snapshot.term : undefined
    }
    return this.entries[index - this.offset]?.term
  }

  /** Entries not yet handed out in a Ready. */
  nextEntries(): Entry[] {
    const start = this.offsetInProgress - this.offset
    return start >= this.entries.length ? [] : this.entries.slice(start)
  }

  /** The snapshot, if not yet handed out in a Ready. */
  nextSnapshot(): SnapshotMetadata | null {
    return this.snapshot !== null && !this.snapshotInProgress ? this.snapshot : null
  }

  /** Marks everything here as handed out in a Ready. */
  acceptInProgress(): void {
    this.offsetInProgress = this.offset + this.entries.length
    if (this.snapshot !== null) this.snapshotInProgress = true
  }

  /**
   * The driver wrote entries up to (index, term). If the entry at `index` has changed since (a new leader overwrote
   * it while the write was under way), nothing is marked stable: the newer entries will come in a later Ready.
   */
  stableTo(index: number, term: number): void {
    if (index < this.offset || this.maybeTerm(index) !== term) return
    // A snapshot below these entries must already be stable: it was handed out in an earlier or the same Ready.
    const count = index + 1 - this.offset
    this.entries = this.entries.slice(count)
    this.offset = index + 1
    this.offsetInProgress = Math.max(this.offsetInProgress, this.offset)
  }

  stableSnapshotTo(index: number): void {
    if (this.snapshot !== null && this.snapshot.index === index) {
      this.snapshot = null
      this.snapshotInProgress = false
    }
  }

  /** Replaces the whole log with a snapshot (§7: "discard the entire log"). */
  restore(snapshot: SnapshotMetadata): void {
    this.snapshot = snapshot
    this.snapshotInProgress = false
    this.entries = []
    this.offset = snapshot.index + 1
    this.offsetInProgress = this.offset
  }

  /**
   * Appends `entries`, first deleting every entry at or after entries[0].index (§5.3: "If an existing entry conflicts
   * with a new one, delete the existing entry and all that follow it").
   */
  truncateAndAppend(entries: readonly Entry[]): void {
    const first = entries[0]
    assert(first !== undefined, 'truncateAndAppend needs at least one entry')
    const fromIndex = first.index
    if (fromIndex === this.offset + this.entries.length) {
      this.entries.push(...entries)
    } else if (fromIndex <= this.offset) {
      // The new entries replace all of the unstable ones (and shadow a stale suffix of storage, which the driver
      // overwrites when it writes these).
      this.offset = fromIndex
      this.offsetInProgress = fromIndex
      this.entries = [...entries]
    } else {
      this.entries = this.entries.slice(0, fromIndex - this.offset).concat(entries)
      this.offsetInProgress = Math.min(this.offsetInProgress, fromIndex)
    }
  }

  /** Entries with lo <= index < hi; the caller has checked that the range lies inside the unstable part. */
  slice(lo: number, hi: number): Entry[] {
    assert(lo >= this.offset && hi <= this.offset + this.entries.length && lo <= hi, `unstable slice [${lo}, ${hi}) out of [${this.offset}, ${this.offset + this.entries.length})`)
    return this.entries.slice(lo - this.offset, hi - this.offset)
  }
}
