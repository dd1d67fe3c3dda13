/**
 * An in-memory `LogReader` with the writes a driver performs (after etcd-io/raft `storage.go`, MemoryStorage). The
 * simulator and the unit tests use it as the durable log; a LevelDB driver can use it as the synchronous mirror of
 * what it has written (the log since the last compaction), updating it after each write is durable.
 *
 * Not thread-safe and not durable by itself: whoever owns it decides when a write counts as on disk.
 */
import { assert } from '../../lib/assert.js'
import type { LogReader } from '../log-reader.js'
import type { Entry, HardState, SnapshotMetadata } from '../types.js'
import { EMPTY_HARD_STATE } from '../types.js'

const EMPTY_DATA = new Uint8Array(0)

export class MemoryStorage implements LogReader {
  private hard: HardState = EMPTY_HARD_STATE
  private latestSnapshot: SnapshotMetadata | null = null
  /**
   * log[0] is a placeholder for the last compacted entry (index and term only; index 0 when nothing was compacted),
   * so that term(firstIndex() - 1) is always known. Invariant: log[i].index === log[0].index + i.
   */
  private log: Entry[] = [{ index: 0, term: 0, type: 'noop', data: EMPTY_DATA }]

  hardState(): HardState {
    return this.hard
  }

  snapshot(): SnapshotMetadata | null {
    return this.latestSnapshot
  }

  firstIndex(): number {
    return this.placeholder().index + 1
  }

  lastIndex(): number {
    return this.placeholder().index + this.log.length - 1
  }

  term(index: number): number | undefined {
    const offset = this.placeholder().index
    if (index < offset || index > this.lastIndex()) return undefined
    return this.log[index - offset]!.term
  }

  entries(lo: number, hi: number): readonly Entry[] {
    const offset = this.placeholder().index
    assert(lo > offset && hi <= this.lastIndex() + 1 && lo <= hi, `entries [${lo}, ${hi}) outside [${offset + 1}, ${this.lastIndex() + 1})`)
    return this.log.slice(lo - offset, hi - offset)
  }

  setHardState(hardState: HardState): void {
    this.hard = hardState
  }

  /** Appends entries, first deleting every entry at or after entries[0].index (Ready step 1b). */
  append(entries: readonly Entry[]): void {
    const first = entries[0]
    if (first === undefined) return
    const offset = this.placeholder().index
    assert(first.index > offset, `append at ${first.index} overwrites compacted entries (up to ${offset})`)
    assert(first.index <= this.lastIndex() + 1, `append at ${first.index} leaves a gap after ${this.lastIndex()}`)
    // Truncate in place, then push: appending at the end (the common case) costs only the new entries.
    this.log.length = first.index - offset
    for (const entry of entries) this.log.push(entry)
  }

  /** Replaces the whole log with a snapshot received from the leader (Ready step 1a). */
  installSnapshot(snapshot: SnapshotMetadata): void {
    this.latestSnapshot = snapshot
    this.log = [{ index: snapshot.index, term: snapshot.term, type: 'noop', data: EMPTY_DATA }]
  }

  /** Records a snapshot the local state machine made; the log is untouched until `compact`. */
  saveSnapshot(snapshot: SnapshotMetadata): void {
    assert(snapshot.index <= this.lastIndex(), `snapshot ${snapshot.index} is beyond the last index ${this.lastIndex()}`)
    assert(this.term(snapshot.index) === undefined || this.term(snapshot.index) === snapshot.term, `snapshot term ${snapshot.term} differs from the log's at ${snapshot.index}`)
    if (this.latestSnapshot === null || snapshot.index > this.latestSnapshot.index) this.latestSnapshot = snapshot
  }

  /** Deletes entries up to and including `index`, which a snapshot must cover. */
  compact(index: number): void {
    const offset = this.placeholder().index
    if (index <= offset) return
    assert(this.latestSnapshot !== null && index <= this.latestSnapshot.index, `compacting to ${index} beyond the snapshot`)
    assert(index <= this.lastIndex(), `compacting to ${index} beyond the last index ${this.lastIndex()}`)
    const kept = this.log.slice(index - offset)
    const last = kept[0]!
    kept[0] = { index: last.index, term: last.term, type: 'noop', data: EMPTY_DATA }
    this.log = kept
  }

  /** An independent copy (entries are immutable and shared). */
  clone(): MemoryStorage {
    const copy = new MemoryStorage()
    copy.hard = this.hard
    copy.latestSnapshot = this.latestSnapshot
    copy.log = this.log.slice()
    return copy
  }

  private placeholder(): Entry {
    return this.log[0]!
  }
}
