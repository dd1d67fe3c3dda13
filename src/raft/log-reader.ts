/**
 * The core's read-only view of durable storage. The core never writes: it hands writes to the driver through
 * `Ready`, and the driver makes them visible here before it calls `RaftCore.advance` (see ready.ts).
 *
 * Contract, for implementations (the driver's in-memory mirror of LevelDB, or storage/memory-storage.ts):
 * - Synchronous and cheap: the core calls these inside `step` and `ready`. Keep the log since the last compaction in
 *   memory, as etcd's MemoryStorage does; it is bounded by snapshot compaction.
 * - Durable: everything returned has been synced, except a commit index that was written with mustSync=false.
 * - Single-threaded: called only from the loop that calls the core, never concurrently with a write it observes
 *   half-done. A write from one Ready is visible all at once (snapshot, then entries, then hard state).
 */
import type { Entry, HardState, SnapshotMetadata } from './types.js'

export interface LogReader {
  /** The hard state as last persisted. The core reads it once, in its constructor. */
  hardState(): HardState
  /** The latest durable snapshot, or null if none was ever taken or installed. */
  snapshot(): SnapshotMetadata | null
  /**
   * The index of the first entry still in the log. Entries before it were compacted into a snapshot.
   * Invariant: firstIndex() >= 1, and firstIndex() - 1 <= snapshot().index when firstIndex() > 1.
   */
  firstIndex(): number
  /** The index of the last entry, or firstIndex() - 1 when the log is empty. */
  lastIndex(): number
  /**
   * The term of the entry at `index`, for firstIndex() - 1 <= index <= lastIndex(): the storage remembers the term
   * of the last compacted entry (etcd's MemoryStorage keeps it as a dummy entry), and term(0) is 0. Outside that
   * range: undefined.
   */
  term(index: number): number | undefined
  /** Entries with lo <= index < hi, in order; firstIndex() <= lo <= hi <= lastIndex() + 1. */
  entries(lo: number, hi: number): readonly Entry[]
}
