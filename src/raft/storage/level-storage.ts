/**
 * The durable Raft log in LevelDB (`<data-dir>/raft`), with a synchronous in-memory mirror (MemoryStorage) that the
 * core reads through `LogReader`. A write reaches the mirror only after LevelDB has it (synced when asked), so the
 * core never sees anything that a crash could take back.
 *
 * Layout: `e<index, 16 hex digits>` entries (msgpack {term, type, data}), `h` the hard state, `s` the latest snapshot
 * metadata, `c` the last compacted entry (index, term), so term(firstIndex - 1) survives a restart, `m` the
 * membership record (how this server entered its cluster, raft-storage.ts), `a` addresses learned outside the log.
 *
 * Compaction writes only the new `c` at once; the compacted entries leave LevelDB a chunk at a time with the persists
 * after it (compactedDeletes): thousands of deletes in one batch held the driver's loop 7–25 ms every snapshot. A
 * restart skips whatever compacted entries are still there (below `c`), and deletes them the same way.
 *
 * Concurrency: one writer (the driver's loop), one write at a time; reads are synchronous on the mirror.
 */
import { Level } from 'level'
import { Packr } from 'msgpackr'
import { assert } from '../../lib/assert.js'
import type { Entry, EntryType, HardState, SnapshotMetadata } from '../types.js'
import { MemoryStorage } from './memory-storage.js'
import type { MembershipRecord, PersistRequest, RaftStorage } from './raft-storage.js'

export type { PersistRequest } from './raft-storage.js'

const packr = new Packr({ useRecords: false })
const ENTRY_PREFIX = 'e'
const HARD_STATE_KEY = 'h'
const SNAPSHOT_KEY = 's'
const COMPACTED_KEY = 'c'
const MEMBERSHIP_KEY = 'm'
const ADDRESSES_KEY = 'a'

function entryKey(index: number): string {
  return ENTRY_PREFIX + index.toString(16).padStart(16, '0')
}

type Op = { type: 'put'; key: string; value: Buffer } | { type: 'del'; key: string }

/**
 * Compacted entries a persist deletes at least, or twice as many as it appends if that is more: the deletes keep
 * ahead of the log's growth, so what a snapshot compacted is gone long before the next one.
 */
export const COMPACTED_DELETES_MIN = 256

/** The database the log lives in: classic-level on disk, or a simulated one with the same API in the simulator. */
export type RaftDb = Level<string, Buffer>

export class LevelRaftStorage implements RaftStorage {
  /** The newest hard state the core gave; it may be ahead of LevelDB's (the mirror's) by a commit index (see persist). */
  private latestHardState: HardState
  /**
   * Compacted entries LevelDB may still hold, `from` to `to` (below firstIndex), deleted by the next persists. Every
   * entry LevelDB holds below firstIndex is in this range.
   */
  private compactedLeft: { from: number; to: number } | undefined

  private constructor(
    private readonly db: RaftDb,
    private readonly mirror: MemoryStorage,
    private membership: MembershipRecord | null,
    private addresses: Record<string, string>,
    left: { from: number; to: number } | undefined,
  ) {
    this.latestHardState = mirror.hardState()
    this.compactedLeft = left
  }

  static async open(directory: string): Promise<LevelRaftStorage> {
    return LevelRaftStorage.openDb(new Level<string, Buffer>(directory, { keyEncoding: 'utf8', valueEncoding: 'buffer' }))
  }

  /** Opens the log in `db` (opening the database if it is not open yet). */
  static async openDb(db: RaftDb): Promise<LevelRaftStorage> {
    if (db.status !== 'open') await db.open()
    const mirror = new MemoryStorage()
    const membershipBytes = await db.get(MEMBERSHIP_KEY)
    const addressBytes = await db.get(ADDRESSES_KEY)
    const snapshotBytes = await db.get(SNAPSHOT_KEY)
    const compactedBytes = await db.get(COMPACTED_KEY)
    const hard = await db.get(HARD_STATE_KEY)
    const snapshot = snapshotBytes === undefined ? null : (packr.unpack(snapshotBytes) as SnapshotMetadata)
    if (compactedBytes !== undefined) {
      // The log starts after the last compacted entry; a snapshot at or after it exists (compaction needs one).
      const { index, term } = packr.unpack(compactedBytes) as { index: number; term: number }
      assert(snapshot !== null && snapshot.index >= index, `log compacted to ${index} without a snapshot covering it`)
      mirror.installSnapshot(snapshot.index === index ? snapshot : { index, term, configuration: snapshot.configuration })
    }
    const entries: Entry[] = []
    // The compacted entries still in LevelDB, if any, lowest and highest: the persists after the restart delete them.
    let left: { from: number; to: number } | undefined
    for await (const [key, value] of db.iterator({ gte: ENTRY_PREFIX, lt: 'f' })) {
      const index = parseInt(key.slice(1), 16)
      if (index < mirror.firstIndex()) {
        left = { from: left?.from ?? index, to: index }
        continue
      }
      const decoded = packr.unpack(value) as { term: number; type: EntryType; data: Uint8Array }
      entries.push({ index, term: decoded.term, type: decoded.type, data: new Uint8Array(decoded.data) })
    }
    if (entries.length > 0) mirror.append(entries)
    if (snapshot !== null && snapshot.index > mirror.firstIndex() - 1) mirror.saveSnapshot(snapshot)
    if (hard !== undefined) mirror.setHardState(packr.unpack(hard) as HardState)
    const addresses = addressBytes === undefined ? {} : (packr.unpack(addressBytes) as Record<string, string>)
    return new LevelRaftStorage(db, mirror, membershipBytes === undefined ? null : (packr.unpack(membershipBytes) as MembershipRecord), addresses, left)
  }

  membershipRecord(): MembershipRecord | null {
    return this.membership
  }

  learnedAddresses(): Record<string, string> {
    return { ...this.addresses }
  }

  async saveLearnedAddresses(addresses: Record<string, string>): Promise<void> {
    await this.db.put(ADDRESSES_KEY, packr.pack(addresses))
    this.addresses = { ...addresses }
  }

  async saveMembershipRecord(record: MembershipRecord): Promise<void> {
    await this.db.put(MEMBERSHIP_KEY, packr.pack(record), { sync: true })
    this.membership = record
  }

  hardState(): HardState {
    return this.mirror.hardState()
  }

  snapshot(): SnapshotMetadata | null {
    return this.mirror.snapshot()
  }

  firstIndex(): number {
    return this.mirror.firstIndex()
  }

  lastIndex(): number {
    return this.mirror.lastIndex()
  }

  term(index: number): number | undefined {
    return this.mirror.term(index)
  }

  entries(lo: number, hi: number): readonly Entry[] {
    return this.mirror.entries(lo, hi)
  }

  /** Ready step 1 in one LevelDB batch: snapshot, then entries (truncating a conflicting suffix), then hard state. */
  async persist(request: PersistRequest, sync: boolean): Promise<void> {
    const ops: Op[] = []
    let lastIndex = this.mirror.lastIndex()
    if (request.snapshot !== undefined) {
      // The whole log goes, and with it every compacted entry LevelDB still holds: nothing is left below the snapshot.
      const left = this.compactedLeft
      if (left !== undefined) for (let index = left.from; index <= left.to; index += 1) ops.push({ type: 'del', key: entryKey(index) })
      for (let index = this.mirror.firstIndex(); index <= lastIndex; index += 1) ops.push({ type: 'del', key: entryKey(index) })
      ops.push({ type: 'put', key: SNAPSHOT_KEY, value: packr.pack(request.snapshot) })
      ops.push({ type: 'put', key: COMPACTED_KEY, value: packr.pack({ index: request.snapshot.index, term: request.snapshot.term }) })
      lastIndex = request.snapshot.index
    }
    const first = request.entries[0]
    if (first !== undefined) {
      // A new leader may overwrite an uncommitted suffix (§5.3): delete what the new entries do not replace.
      const newLast = first.index + request.entries.length - 1
      for (let index = newLast + 1; index <= lastIndex; index += 1) ops.push({ type: 'del', key: entryKey(index) })
      for (const entry of request.entries) {
        ops.push({ type: 'put', key: entryKey(entry.index), value: packr.pack({ term: entry.term, type: entry.type, data: entry.data }) })
      }
    }
    if (request.hardState !== undefined) this.latestHardState = request.hardState
    // The commit index is volatile state (Figure 2): the core restarts from max(stored commit, applied index), so a
    // hard state that moved only its commit index is not worth a LevelDB write of its own, which every node would
    // otherwise make once per committed batch, on the write's path. It goes to disk with the next entries, snapshot,
    // term or vote.
    const durable = this.mirror.hardState()
    const latest = this.latestHardState
    const termOrVoteChanged = latest.term !== durable.term || latest.votedFor !== durable.votedFor
    if ((ops.length > 0 || termOrVoteChanged) && latest !== durable) ops.push({ type: 'put', key: HARD_STATE_KEY, value: packr.pack(latest) })
    // Compacted entries go with a write that is made anyway, never in one of their own.
    let left = this.compactedLeft
    if (request.snapshot !== undefined) left = undefined
    else if (ops.length > 0) left = this.compactedDeletes(ops, request.entries.length)
    if (ops.length > 0) await this.db.batch(ops, { sync })
    this.compactedLeft = left
    if (ops.length > 0 && latest !== durable) this.mirror.setHardState(latest)
    if (request.snapshot !== undefined) this.mirror.installSnapshot(request.snapshot)
    if (request.entries.length > 0) this.mirror.append(request.entries)
  }

  /** Records a snapshot the local state machine took (its data lives with the state), synced. */
  async saveSnapshot(snapshot: SnapshotMetadata): Promise<void> {
    await this.db.put(SNAPSHOT_KEY, packr.pack(snapshot), { sync: true })
    this.mirror.saveSnapshot(snapshot)
  }

  /**
   * Drops entries up to and including `index`, which the saved snapshot covers: from the log at once (`c` and the
   * mirror), from LevelDB with the persists after it (compactedDeletes).
   */
  async compact(index: number): Promise<void> {
    const first = this.mirror.firstIndex()
    if (index < first) return
    const term = this.mirror.term(index)
    assert(term !== undefined, `compact to ${index}: no such entry`)
    await this.db.put(COMPACTED_KEY, packr.pack({ index, term }))
    this.mirror.compact(index)
    this.compactedLeft = { from: this.compactedLeft?.from ?? first, to: index }
  }

  /**
   * Adds to `ops` the deletes of the next compacted entries LevelDB may still hold (COMPACTED_DELETES_MIN, or twice
   * `appended`), and gives what is left once the batch is written. They are below every entry a persist writes or
   * deletes, so their order in the batch does not matter. `c` goes with them again: a batch that survives a crash
   * keeps them below it even if the earlier write of `c` did not (LevelDB drops a damaged record of its log and reads
   * on), so no gap opens at the start of the log. A crash that loses the batch leaves them, still below `c`.
   */
  private compactedDeletes(ops: Op[], appended: number): { from: number; to: number } | undefined {
    const left = this.compactedLeft
    if (left === undefined) return undefined
    const to = Math.min(left.to, left.from + Math.max(COMPACTED_DELETES_MIN, 2 * appended) - 1)
    for (let at = left.from; at <= to; at += 1) ops.push({ type: 'del', key: entryKey(at) })
    // The mirror's placeholder is the last compacted entry, as `c` holds it.
    const compacted = this.mirror.firstIndex() - 1
    ops.push({ type: 'put', key: COMPACTED_KEY, value: packr.pack({ index: compacted, term: this.mirror.term(compacted) }) })
    return to >= left.to ? undefined : { from: to + 1, to: left.to }
  }

  async close(): Promise<void> {
    await this.db.close()
  }
}
