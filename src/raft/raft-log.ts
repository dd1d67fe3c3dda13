/**
 * The log as the core sees it: durable entries read through `LogReader`, with the unstable tail on top
 * (etcd-io/raft `log.go`), the commit and apply indexes, and the history of configurations in the log.
 */
import { assert } from '../lib/assert.js'
import { decodeConfiguration } from './configuration.js'
import type { LogReader } from './log-reader.js'
import { UnstableLog } from './log-unstable.js'
import type { Configuration, Entry, SnapshotMetadata } from './types.js'

/** A configuration and the index of the entry (or snapshot) that set it. */
export interface ConfigurationRecord {
  readonly index: number
  readonly configuration: Configuration
}

const CONFIGURATION_SCAN_BATCH_COUNT = 1024
/** What an entry costs in a message beyond its data: index, term and type, roughly, once encoded. */
const ENTRY_OVERHEAD_BYTES = 24

export function entrySizeBytes(entry: Entry): number {
  return entry.data.byteLength + ENTRY_OVERHEAD_BYTES
}

export class RaftLog {
  readonly unstable: UnstableLog
  /**
   * The highest index known to be committed (Figure 2, commitIndex).
   * Invariant: appliedIndex <= applyingIndex <= commitIndex <= lastIndex().
   */
  commitIndex: number
  /** The highest index handed out in a Ready's committedEntries. */
  applyingIndex: number
  /**
   * The highest index the state machine has applied (Figure 2, lastApplied), as confirmed through advance(), or with
   * RaftConfig.reportsApplied through RaftCore.appliedTo.
   */
  appliedIndex: number
  /**
   * Every configuration from the snapshot (or the bootstrap configuration at index 0) on, in index order. A server
   * uses the last one, committed or not (Thesis §4.1); truncating the log drops those it held.
   * Invariant: non-empty; configurations[0].index <= firstIndex() - 1 or it is the snapshot's.
   */
  private configurations: ConfigurationRecord[]

  constructor(
    private readonly storage: LogReader,
    bootstrap: Configuration,
    appliedIndex: number,
  ) {
    const firstIndex = storage.firstIndex()
    const lastIndex = storage.lastIndex()
    const snapshot = storage.snapshot()
    assert(firstIndex >= 1 && lastIndex >= firstIndex - 1, `storage range is broken: first ${firstIndex}, last ${lastIndex}`)
    const snapshotIndex = snapshot?.index ?? 0
    assert(firstIndex === 1 || (snapshot !== null && snapshot.index >= firstIndex - 1), `log compacted to ${firstIndex - 1} without a snapshot covering it`)
    assert(snapshotIndex <= lastIndex, `snapshot ${snapshotIndex} is beyond the last index ${lastIndex}`)
    assert(appliedIndex >= snapshotIndex && appliedIndex <= lastIndex, `applied index ${appliedIndex} outside [snapshot ${snapshotIndex}, last ${lastIndex}]`)
    this.unstable = new UnstableLog(lastIndex + 1)
    this.commitIndex = appliedIndex
    this.applyingIndex = appliedIndex
    this.appliedIndex = appliedIndex
    this.configurations = [{ index: snapshotIndex, configuration: snapshot?.configuration ?? bootstrap }]
    // Like hashicorp/raft NewRaft, recover the latest configuration by scanning the log after the snapshot.
    for (let lo = snapshotIndex + 1; lo <= lastIndex; lo += CONFIGURATION_SCAN_BATCH_COUNT) {
      const hi = Math.min(lo + CONFIGURATION_SCAN_BATCH_COUNT, lastIndex + 1)
      for (const entry of storage.entries(lo, hi)) this.recordConfiguration(entry)
    }
  }

  firstIndex(): number {
    return this.unstable.maybeFirstIndex() ?? this.storage.firstIndex()
  }

  lastIndex(): number {
    return this.unstable.maybeLastIndex() ?? this.storage.lastIndex()
  }

  /** The term at `index` for firstIndex() - 1 <= index <= lastIndex(); undefined elsewhere (compacted or absent). */
  term(index: number): number | undefined {
    if (index > this.lastIndex()) return undefined
    const unstableTerm = this.unstable.maybeTerm(index)
    if (unstableTerm !== undefined) return unstableTerm
    if (index === 0) return 0
    if (index < this.firstIndex() - 1) return undefined
    return this.storage.term(index)
  }

  lastTerm(): number {
    const term = this.term(this.lastIndex())
    assert(term !== undefined, `no term for the last index ${this.lastIndex()}`)
    return term
  }

  matchTerm(index: number, term: number): boolean {
    return this.term(index) === term
  }

  /**
   * §5.4.1: a candidate's log is at least as up-to-date as ours if its last term is higher, or equal with a last
   * index at least as high.
   */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const ourLastTerm = this.lastTerm()
    return lastTerm > ourLastTerm || (lastTerm === ourLastTerm && lastIndex >= this.lastIndex())
  }

  /**
   * The largest index <= `index` whose term is <= `term`, with its term; (index, 0) where the term is unknown
   * (compacted), and (0, 0) if none. See AppendEntriesResponse for how both sides use it.
   */
  findConflictByTerm(index: number, term: number): { index: number; term: number } {
    for (let candidate = index; candidate > 0; candidate -= 1) {
      const candidateTerm = this.term(candidate)
      if (candidateTerm === undefined) return { index: candidate, term: 0 }
      if (candidateTerm <= term) return { index: candidate, term: candidateTerm }
    }
    return { index: 0, term: 0 }
  }

  /**
   * The AppendEntries receiver rules (Figure 2, steps 2–5): if the entry at prevIndex has prevTerm, append what is new
   * (deleting a conflicting suffix first) and commit up to min(leaderCommit, index of last new entry). Returns that
   * last new index, or null when the logs do not match at prevIndex.
   */
  maybeAppend(prevIndex: number, prevTerm: number, leaderCommit: number, entries: readonly Entry[]): number | null {
    if (!this.matchTerm(prevIndex, prevTerm)) return null
    const lastNewIndex = prevIndex + entries.length
    const conflictIndex = this.findConflict(entries)
    if (conflictIndex !== 0) {
      // Figure 3, State Machine Safety: a committed entry is never overwritten.
      assert(conflictIndex > this.commitIndex, `entry ${conflictIndex} conflicts with the committed log (commitIndex ${this.commitIndex})`)
      this.append(entries.slice(conflictIndex - prevIndex - 1))
    }
    this.commitTo(Math.min(leaderCommit, lastNewIndex))
    return lastNewIndex
  }

  /** The index of the first entry whose term differs from ours (or that we lack), or 0 if all match. */
  private findConflict(entries: readonly Entry[]): number {
    for (const entry of entries) {
      if (!this.matchTerm(entry.index, entry.term)) return entry.index
    }
    return 0
  }

  /** Appends entries, deleting any existing entry at or after entries[0].index. Returns the new last index. */
  append(entries: readonly Entry[]): number {
    const first = entries[0]
    if (first === undefined) return this.lastIndex()
    assert(first.index > this.commitIndex, `append at ${first.index} would overwrite the committed log (commitIndex ${this.commitIndex})`)
    assert(first.index <= this.lastIndex() + 1, `append at ${first.index} leaves a gap after ${this.lastIndex()}`)
    this.unstable.truncateAndAppend(entries)
    // Thesis §4.1: a configuration disappears with the entry that carried it.
    while (this.configurations.length > 1 && this.configurations[this.configurations.length - 1]!.index >= first.index) {
      this.configurations.pop()
    }
    for (const entry of entries) this.recordConfiguration(entry)
    return this.lastIndex()
  }

  commitTo(index: number): void {
    if (index <= this.commitIndex) return
    assert(index <= this.lastIndex(), `commit ${index} is beyond the last index ${this.lastIndex()}`)
    this.commitIndex = index
  }

  /**
   * Entries with lo <= index < hi, at most `maxCount` of them and, past the first, at most `maxBytes` in all; null if
   * lo was compacted away.
   */
  entries(lo: number, hi: number, maxCount = Number.POSITIVE_INFINITY, maxBytes = Number.POSITIVE_INFINITY): Entry[] | null {
    if (lo < this.firstIndex()) return null
    const end = Math.min(hi, this.lastIndex() + 1, lo + maxCount)
    if (lo >= end) return []
    const offset = this.unstable.offset
    let result: Entry[] = []
    if (lo < offset) result = [...this.storage.entries(lo, Math.min(end, offset))]
    if (end > offset) {
      const fromUnstable = this.unstable.slice(Math.max(lo, offset), end)
      result = result.length === 0 ? fromUnstable : result.concat(fromUnstable)
    }
    assert(result.length === end - lo && result[0]?.index === lo, `log read [${lo}, ${end}) returned ${result.length} entries`)
    if (maxBytes === Number.POSITIVE_INFINITY) return result
    let bytes = 0
    for (let i = 0; i < result.length; i += 1) {
      bytes += entrySizeBytes(result[i]!)
      if (bytes > maxBytes && i > 0) return result.slice(0, i)
    }
    return result
  }

  /** Committed entries not yet handed out for applying; none while a received snapshot is pending. */
  nextCommittedEntries(maxCount: number): Entry[] {
    if (this.unstable.snapshot !== null) return []
    const lo = this.applyingIndex + 1
    const hi = this.commitIndex + 1
    if (lo >= hi) return []
    const entries = this.entries(lo, hi, maxCount)
    assert(entries !== null, `committed entries from ${lo} were compacted before being applied`)
    return entries
  }

  acceptApplying(index: number): void {
    assert(index <= this.commitIndex, `applying ${index} beyond commitIndex ${this.commitIndex}`)
    this.applyingIndex = Math.max(this.applyingIndex, index)
  }

  appliedTo(index: number): void {
    this.appliedIndex = Math.max(this.appliedIndex, index)
  }

  /** Replaces the log with a snapshot received from the leader (§7). */
  restore(snapshot: SnapshotMetadata): void {
    assert(snapshot.index > this.commitIndex, `restoring snapshot ${snapshot.index} at or below commitIndex ${this.commitIndex}`)
    this.unstable.restore(snapshot)
    this.commitIndex = snapshot.index
    this.configurations = [{ index: snapshot.index, configuration: snapshot.configuration }]
  }

  stableTo(index: number, term: number): void {
    this.unstable.stableTo(index, term)
  }

  stableSnapshotTo(index: number): void {
    this.unstable.stableSnapshotTo(index)
    this.applyingIndex = Math.max(this.applyingIndex, index)
    this.appliedIndex = Math.max(this.appliedIndex, index)
  }

  /**
   * The highest index of this log known to be durable: what the leader may count for itself towards commit. While a
   * received snapshot is not yet durable, nothing of this log is.
   */
  persistedIndex(): number {
    if (this.unstable.snapshot !== null) return 0
    return this.unstable.entries.length > 0 ? this.unstable.offset - 1 : this.lastIndex()
  }

  configuration(): Configuration {
    return this.latestConfigurationRecord().configuration
  }

  /** The index of the entry that set the latest configuration. */
  configurationIndex(): number {
    return this.latestConfigurationRecord().index
  }

  /**
   * The configuration in force at `index`: the latest one set at or before it. Undefined below the first one this log
   * still remembers (a snapshot made the ones before it unreachable: pruneConfigurations), where it is no longer known.
   */
  configurationAt(index: number): Configuration | undefined {
    let found = this.configurations[0]!
    if (index < found.index) return undefined
    for (const record of this.configurations) {
      if (record.index > index) break
      found = record
    }
    return found.configuration
  }

  /** Forgets configurations that a snapshot at `index` has made unreachable, keeping the one in force there. */
  pruneConfigurations(index: number): void {
    let keepFrom = 0
    for (let i = 0; i < this.configurations.length; i += 1) {
      if (this.configurations[i]!.index <= index) keepFrom = i
    }
    if (keepFrom > 0) this.configurations = this.configurations.slice(keepFrom)
  }

  private latestConfigurationRecord(): ConfigurationRecord {
    return this.configurations[this.configurations.length - 1]!
  }

  private recordConfiguration(entry: Entry): void {
    if (entry.type !== 'configuration') return
    this.configurations.push({ index: entry.index, configuration: decodeConfiguration(entry.data) })
  }
}
