/**
 * What the Raft driver needs from its durable storage (hashicorp/raft splits the same promises over `log.go`,
 * `stable.go` and `snapshot.go`). The core reads the log synchronously through `LogReader`; the driver writes.
 *
 * Ordering and durability:
 * - One writer (the driver's Ready loop), one write at a time; reads may come at any time and see only what a write
 *   that already resolved put there: nothing that a crash could take back is ever visible to the core.
 * - `persist(…, true)` resolves once the whole request is on disk, atomically: after a crash either all of it or none
 *   of it is there. With `sync` false it is atomic but may be lost by a crash (never partly).
 * - `saveSnapshot` and `saveMembershipRecord` are synced; `compact` need not be (a compaction a crash undoes only
 *   leaves entries the snapshot already covers).
 */
import type { LogReader } from '../log-reader.js'
import type { Entry, HardState, NodeId, SnapshotMetadata } from '../types.js'

export interface PersistRequest {
  snapshot?: SnapshotMetadata
  entries: readonly Entry[]
  hardState?: HardState
}

/**
 * How this server entered its cluster, recorded at its first start and read at every start after, so that a restart
 * never takes its membership from its flags again (a joined server that did would count only itself as a voter).
 * - `voters`: the bootstrap configuration, the membership at index 0 (the founders; empty for a server that joined).
 * - `voteFromIndex`: the server neither votes nor campaigns until its commit index reaches it. 0 for a founder; for a
 *   server that joined a running cluster, or came back to one with an empty data dir (a rebuilt server), the log index
 *   at which the leader (re-)added it: before that its vote could elect a leader missing entries it had acknowledged
 *   and lost, or be given twice in a term it forgot. VOTE_INDEX_UNKNOWN until the cluster has answered.
 */
export interface MembershipRecord {
  readonly voters: readonly NodeId[]
  readonly voteFromIndex: number
  /**
   * A random identifier made with this data dir. A join carries it, and the leader records it with the server's
   * address after re-adding it, so a server that missed the answer to its join still learns where it was re-added.
   * Absent in records written before it existed.
   */
  readonly incarnation?: string
}

export { VOTE_INDEX_UNKNOWN } from '../types.js'

export interface RaftStorage extends LogReader {
  persist(request: PersistRequest, sync: boolean): Promise<void>
  /** Records a snapshot the local state machine took (its data lives with the state), synced. */
  saveSnapshot(snapshot: SnapshotMetadata): Promise<void>
  /** Deletes entries up to and including `index`, which the saved snapshot covers. */
  compact(index: number): Promise<void>
  membershipRecord(): MembershipRecord | null
  saveMembershipRecord(record: MembershipRecord): Promise<void>
  /**
   * Addresses of other servers this one learned outside its log (a join's answer, a peer's address book), so that a
   * restart can reach its cluster before it has applied the member entries that name them. Not synced: losing the
   * latest costs a retry, never safety.
   */
  learnedAddresses(): Record<string, string>
  saveLearnedAddresses(addresses: Record<string, string>): Promise<void>
  close(): Promise<void>
}
