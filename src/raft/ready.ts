/**
 * The work the core hands to its driver, and the order in which it must be done (after etcd-io/raft `node.go`,
 * `Ready`, in its synchronous form).
 */
import type { Message } from './messages.js'
import type { Entry, HardState, NodeId, Role, SnapshotMetadata } from './types.js'

/** Volatile state worth reporting (leadership changes); never persisted. */
export interface SoftState {
  readonly role: Role
  readonly leader: NodeId | null
}

/**
 * A confirmed linearizable read (Thesis §6.4): once the state machine has applied `index`, the read that asked with
 * `context` may be served from local state.
 */
export interface ReadState {
  readonly index: number
  readonly context: string
}

/**
 * One batch of work. `RaftCore.ready()` returns it; the driver does it, in this order, then calls
 * `RaftCore.advance(ready)` before asking for the next one. The core may be stepped and ticked while the driver
 * works on a Ready (its log tracks what is "in progress").
 *
 * 1. Persist, in one atomic write (one LevelDB batch), synced when `mustSync` is true:
 *    a. `snapshot`, if set: switch the state machine to the received snapshot (staged beside the old state by the
 *       InstallSnapshot stream) and replace the whole log with it (the log becomes empty after snapshot.index);
 *    b. `entries`: append them, first deleting every stored entry at or after entries[0].index (a new leader may
 *       overwrite an uncommitted suffix, §5.3);
 *    c. `hardState`, if set.
 *    Term and vote must be durable before any message leaves (Thesis §3.8: a voter that forgets its vote could vote
 *    twice in one term), and entries before the AppendEntriesResponse that acknowledges them (a leader counts the
 *    acknowledgement towards commit). After the write, `LogReader` must show it.
 * 2. Send `messages`, in order per destination. Any of them may be lost; none may be sent before step 1 is durable,
 *    with one exception: a leader's leading AppendEntries, heartbeats and ReadIndex answers of a term already durable
 *    may go before step 1 (Thesis §10.2.1), since the core counts the leader's own log towards commit only once
 *    `advance` reports it persisted (and a ReadIndex answer names a committed index).
 *    An `installSnapshot` message means: stream the current snapshot to `to`, then call `reportSnapshot`.
 * 3. Apply `committedEntries` to the state machine, in order (they are durable by now: committed entries were
 *    persisted in an earlier Ready or in step 1). `noop` entries change nothing; `configuration` entries carry the
 *    membership (already in force in the core, Thesis §4.1) for the driver to act on.
 * 4. Hand each `readStates` entry to the read waiting on its context; serve it once applied >= index.
 * 5. Call `advance(ready)`.
 *
 * Steps 2 and 3 may run in parallel once step 1 is done. `softState` may be read at any time.
 */
export interface Ready {
  /** Set when role or leader changed since the last Ready. */
  readonly softState?: SoftState
  /** Set when term, vote or commitIndex changed since the last Ready. */
  readonly hardState?: HardState
  /** Entries to append to the durable log. */
  readonly entries: readonly Entry[]
  /** A snapshot received from the leader, to install. */
  readonly snapshot?: SnapshotMetadata
  /** Messages to send once step 1 is durable. */
  readonly messages: readonly Message[]
  /** Entries to apply, in index order, contiguous with what was applied before. */
  readonly committedEntries: readonly Entry[]
  /** Reads confirmed since the last Ready. */
  readonly readStates: readonly ReadState[]
  /**
   * Whether step 1 must be synced before step 2: true when there are entries or a snapshot, or term or vote
   * changed. A change of commitIndex alone may be written lazily: on restart the core recovers it as at least the
   * state machine's last applied index, and the leader resends it.
   */
  readonly mustSync: boolean
}
