/**
 * The replica of a one-node cluster: proposals go to the local durable log with group commit (every proposal waiting
 * when a write starts goes into the same batch and the same sync), then are applied in order. At start, entries the
 * state has not applied yet (written before a crash) are applied first, so nothing acknowledged is lost and nothing
 * is applied twice.
 */
import { InvalidInputError, WardenError } from '../lib/errors.js'
import type { LogStore } from '../raft/storage/log-store.js'
import type { Cluster, RaftState } from './cluster.js'
import type { ApplyResult, Command } from '../state/commands.js'
import { APPLY_BATCH_MAX, encodeCommand, type StateStore } from '../state/store.js'

interface Pending {
  data: Buffer
  command: Command
  resolve: (result: ApplyResult) => void
  reject: (error: unknown) => void
}

/** Bound on proposals waiting for the disk: past it, writes are refused rather than queued without limit. */
const PENDING_MAX = 16_384

export class SingleNodeReplica implements Cluster {
  private readonly pending: Pending[] = []
  private flushing: Promise<void> | undefined
  private stopped = false
  /** Set when the log or the state failed: nothing more is written, the node is going down. */
  private failed = false

  constructor(
    private readonly log: LogStore,
    private readonly state: StateStore,
    private readonly nodeName: string,
    private readonly address: string,
    private readonly onFatal: (error: unknown) => void,
  ) {}

  /** Applies log entries that the state has not applied yet. */
  async recover(): Promise<void> {
    const from = this.state.lastApplied + 1
    await this.state.applyEntries(await this.log.entries(from, this.log.lastIndex))
  }

  get logIsEmpty(): boolean {
    return this.log.lastIndex === 0
  }

  propose(command: Command): Promise<ApplyResult> {
    if (this.stopped) return Promise.reject(new WardenError('no_leader', 'this node is shutting down; retry on another node'))
    if (this.failed) return Promise.reject(new WardenError('no_leader', 'this node stopped writing after a storage failure'))
    if (this.pending.length >= PENDING_MAX) {
      return Promise.reject(new WardenError('rate_limited', 'too many writes are waiting for the disk; retry later'))
    }
    return new Promise<ApplyResult>((resolve, reject) => {
      this.pending.push({ data: encodeCommand(command), command, resolve, reject })
      this.kick()
    })
  }

  /**
   * Starts the flush loop unless it runs. A proposal can arrive after the loop saw an empty queue but before its
   * promise settled (a caller woken by the last batch proposes again in the same tick), so the loop restarts itself
   * when it finds the queue non-empty on the way out.
   */
  private kick(): void {
    if (this.flushing !== undefined) return
    this.flushing = this.flush().finally(() => {
      this.flushing = undefined
      if (this.pending.length > 0 && !this.failed) this.kick()
    })
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      // At most APPLY_BATCH_MAX per log write and apply: an apply runs without yielding (its reads are synchronous),
      // so a batch of every waiting proposal could hold the event loop for seconds.
      const batch = this.pending.splice(0, APPLY_BATCH_MAX)
      const first = this.log.lastIndex + 1
      try {
        await this.log.append(batch.map((item, offset) => ({ index: first + offset, term: 1, data: item.data })), { sync: true })
      } catch (error) {
        // The batch may or may not be on disk: its outcome is unknown, and the log cannot be trusted to continue.
        for (const item of batch) item.reject(new WardenError('outcome_unknown', 'the log write failed', undefined, { cause: error }))
        this.fail(error)
        return
      }
      let results: ApplyResult[]
      try {
        results = await this.state.applyBatch(batch.map((item, offset) => ({ command: item.command, index: first + offset })))
      } catch (error) {
        // A committed command that cannot be applied is a bug: stop rather than continue with a diverged state. The
        // batch is in the log but not applied (one LevelDB batch applies all of it or none): its outcome is unknown.
        for (const item of batch) item.reject(new WardenError('outcome_unknown', 'the write was committed but could not be applied', undefined, { cause: error }))
        this.fail(error)
        return
      }
      for (const [offset, item] of batch.entries()) item.resolve(results[offset]!)
    }
  }

  private fail(error: unknown): void {
    this.failed = true
    for (const item of this.pending.splice(0)) item.reject(new WardenError('no_leader', 'this node stopped writing after a storage failure'))
    this.onFatal(error)
  }

  /** Stops taking proposals and waits for those in flight. */
  async stop(): Promise<void> {
    this.stopped = true
    // A flush that ends with proposals still queued starts the next one: wait for the last.
    while (this.flushing !== undefined) await this.flushing
  }

  leaderAddress(): string {
    return this.address
  }

  peerAddresses(): string[] {
    return [this.address]
  }

  isLeader(): boolean {
    return true
  }

  /** A single node is its own leader and quorum: every mode reads the local state at once. */
  async readBarrier(): Promise<void> {}

  lastContactMs(): number {
    return 0
  }

  raftState(): RaftState {
    const index = this.log.lastIndex
    return { node: this.nodeName, role: 'leader', term: 1, leader: this.nodeName, commitIndex: index, appliedIndex: this.state.lastApplied, lastIndex: index, lastContactMs: 0, forwardedWrites: 0, forwardedRequests: 0 }
  }

  membership(): { index: number; servers: Array<{ id: string; address: string; voter: boolean }> } {
    return { index: 1, servers: [{ id: this.nodeName, address: this.address, voter: true }] }
  }

  async join(): Promise<{ members: Record<string, string> }> {
    throw new InvalidInputError(undefined, 'this node runs a single-node cluster (no --peer): start every member with --peer and a cluster key to form a cluster')
  }

  async removeServer(which: { id?: string; address?: string }): Promise<void> {
    const known = which.id === this.nodeName || which.address === this.address
    if (!known) throw new InvalidInputError(which.id !== undefined ? 'id' : 'address', 'is not a server of this cluster')
    throw new InvalidInputError(which.id !== undefined ? 'id' : 'address', 'cannot remove the only server of a single-node cluster')
  }
}
