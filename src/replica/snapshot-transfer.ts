/**
 * Snapshots between servers: the leader streams its state to a follower too far behind for the log, and the follower
 * stages what it receives beside its live state until the core takes it and the Ready loop installs it.
 *
 * Staging is owned here and has one state at a time: idle, receiving one stream, or staged (complete, taken by the
 * core, waiting for the Ready loop to switch it in). While a snapshot is staged no new stream may start, so nothing
 * recreates the staging place under the switch; a stream the core refuses (stale term, already covered) is discarded
 * at once, so no stale staged state waits for the next start (finishStateSwitch discards it there too).
 *
 * Sending reads the state through one LevelDB snapshot, chunk by chunk, each chunk acknowledged. While a send holds
 * its position the driver does not compact the log past it, so the term of the index it sends stays known.
 */
import type { Logger } from 'pino'
import type { Environment, Timer } from '../lib/environment.js'
import { WardenError } from '../lib/errors.js'
import type { SnapshotMetadata } from '../raft/index.js'
import { discardStagedState, IncomingState, openStateSnapshot } from '../state/snapshot.js'
import type { StateStore } from '../state/store.js'
import type { PeerLinks } from './peer-links.js'

/** One chunk of a snapshot stream; the last one (done) carries the metadata and the leader's term. */
export interface SnapshotChunk {
  kind: 'snapshot'
  id: string
  seq: number
  pairs: Array<[string, Uint8Array]>
  done: boolean
  term?: number
  snapshot?: SnapshotMetadata
}

const SNAPSHOT_CHUNK_TIMEOUT_MS = 30_000
/** A stream being received with no chunk for this long was abandoned (its leader was deposed or died): discarded. */
const SNAPSHOT_IDLE_MS = 2 * SNAPSHOT_CHUNK_TIMEOUT_MS

export interface SnapshotHost {
  readonly state: StateStore
  readonly links: PeerLinks
  readonly environment: Environment
  readonly log: Logger
  /**
   * Metadata for a snapshot of the state at `index` (RaftCore.snapshotMetadata), or null while one is being installed
   * or when a snapshot taken since has made the configuration at `index` unknown.
   */
  snapshotMetadata(index: number): SnapshotMetadata | null
  /** Hands a fully received snapshot to the core; returns whether the core took it (it waits in the next Ready). */
  offerSnapshot(from: string, term: number, snapshot: SnapshotMetadata): boolean
  /** The stream to `to` finished (ok) or failed. */
  reportSent(to: string, ok: boolean): void
  /** Whether this server still leads `term`: a deposed leader stops streaming (the follower would refuse it). */
  leads(term: number): boolean
}

type Staging =
  | { readonly phase: 'idle' }
  | { readonly phase: 'receiving'; readonly id: string; readonly from: string; nextSeq: number; readonly incoming: IncomingState }
  | { readonly phase: 'staged'; readonly index: number }

export class SnapshotTransfer {
  private staging: Staging = { phase: 'idle' }
  /** Serialises the receiving side's disk work: a chunk, an abort and a new stream never interleave. */
  private receiving: Promise<unknown> = Promise.resolve()
  private readonly sending = new Set<string>()
  /** Applied indexes that streams being sent read at; the log is not compacted past the lowest. */
  private readonly holds = new Set<{ index: number }>()
  private stopped = false
  private idleTimer: Timer | undefined

  constructor(private readonly host: SnapshotHost) {}

  /** The highest index the log may be compacted to while sends are reading (Infinity when none is). */
  compactionLimit(): number {
    let limit = Number.POSITIVE_INFINITY
    for (const hold of this.holds) limit = Math.min(limit, hold.index)
    return limit
  }

  /** Streams the state to `to`, once at a time per follower; the core hears how it went. */
  send(to: string, term: number): void {
    if (this.sending.has(to) || this.stopped) return
    this.sending.add(to)
    // The hold starts now, before any await: the log still holds the term of anything applied from here on.
    const hold = { index: this.host.state.lastApplied }
    this.holds.add(hold)
    this.stream(to, term, hold)
      .then(
        () => this.host.reportSent(to, true),
        (error: unknown) => {
          this.host.log.warn({ err: error, to }, 'sending a snapshot failed; the leader will try again')
          this.host.reportSent(to, false)
        },
      )
      .finally(() => {
        this.holds.delete(hold)
        this.sending.delete(to)
      })
  }

  private async stream(to: string, term: number, hold: { index: number }): Promise<void> {
    const reader = await openStateSnapshot(this.host.state)
    try {
      hold.index = Math.min(hold.index, reader.appliedIndex)
      const snapshot = this.host.snapshotMetadata(reader.appliedIndex)
      // Null while a snapshot from a leader waits to be installed, or when a snapshot of this node's own, taken while
      // this reader opened, has made the configuration at its index unknown: the leader tries again with a fresh one.
      if (snapshot === null) throw new Error('no snapshot can be sent now (one is being installed, or a newer one was taken meanwhile)')
      const id = this.host.environment.randomId()
      let seq = 0
      for await (const pairs of reader.chunks()) {
        if (this.stopped) throw new Error('stopping')
        if (!this.host.leads(term)) throw new Error(`no longer the leader of term ${term}`)
        await this.host.links.request(to, { kind: 'snapshot', id, seq, pairs, done: false } satisfies SnapshotChunk, SNAPSHOT_CHUNK_TIMEOUT_MS)
        seq += 1
      }
      await this.host.links.request(to, { kind: 'snapshot', id, seq, pairs: [], done: true, term, snapshot } satisfies SnapshotChunk, SNAPSHOT_CHUNK_TIMEOUT_MS)
      this.host.log.info({ to, index: snapshot.index, chunks: seq }, 'sent a snapshot')
    } finally {
      await reader.close()
    }
  }

  /** One chunk from a leader. Answers once the chunk is on disk; throws to make the leader restart its stream. */
  receive(from: string, chunk: SnapshotChunk): Promise<{ ok: true }> {
    const next = this.receiving.then(() => this.receiveInOrder(from, chunk))
    this.receiving = next.catch(() => undefined)
    return next
  }

  private async receiveInOrder(from: string, chunk: SnapshotChunk): Promise<{ ok: true }> {
    if (this.stopped) throw new WardenError('no_leader', 'this node is shutting down')
    if (this.staging.phase === 'staged') throw new WardenError('no_leader', 'a snapshot is being installed; the leader retries later')
    if (chunk.seq === 0) {
      await this.abortReceiving()
      this.staging = { phase: 'receiving', id: chunk.id, from, nextSeq: 0, incoming: await IncomingState.create(this.host.state.files) }
    }
    const staging = this.staging
    if (staging.phase !== 'receiving' || staging.id !== chunk.id || staging.from !== from || staging.nextSeq !== chunk.seq) {
      throw new WardenError('invalid_input', 'snapshot chunk out of order; the leader restarts the stream')
    }
    await staging.incoming.write(chunk.pairs)
    staging.nextSeq += 1
    this.idleTimer?.cancel()
    if (!chunk.done) {
      this.idleTimer = this.host.environment.setTimeout(() => this.abandon(staging.id), SNAPSHOT_IDLE_MS)
      return { ok: true }
    }
    const stagedIndex = await staging.incoming.complete()
    const snapshot = chunk.snapshot
    if (snapshot === undefined || chunk.term === undefined || stagedIndex !== snapshot.index) {
      await this.abortReceiving()
      throw new WardenError('invalid_input', 'snapshot stream ended without matching metadata')
    }
    if (this.host.offerSnapshot(from, chunk.term, snapshot)) {
      this.staging = { phase: 'staged', index: snapshot.index }
    } else {
      // Refused (stale term, or this node already has what it covers): nothing may keep it around.
      this.staging = { phase: 'idle' }
      await discardStagedState(this.host.state.files)
    }
    return { ok: true }
  }

  /** Whether a staged snapshot at `index` waits for the Ready loop (which checks before switching it in). */
  isStaged(index: number): boolean {
    return this.staging.phase === 'staged' && this.staging.index === index
  }

  /** The Ready loop switched the staged snapshot in. */
  installed(): void {
    this.staging = { phase: 'idle' }
  }

  /** Discards stream `id` if it is still the one being received and no chunk came since. */
  private abandon(id: string): void {
    const next = this.receiving.then(async () => {
      if (this.staging.phase === 'receiving' && this.staging.id === id) {
        this.host.log.info({ from: this.staging.from }, 'a snapshot stream was abandoned; its staged part is discarded')
        await this.abortReceiving()
      }
    })
    this.receiving = next.catch((error: unknown) => this.host.log.warn({ err: error }, 'discarding an abandoned snapshot stream failed'))
  }

  private async abortReceiving(): Promise<void> {
    const staging = this.staging
    if (staging.phase !== 'receiving') return
    this.staging = { phase: 'idle' }
    await staging.incoming.abort()
  }

  /** Stops sending and receiving; a stream being received is discarded (a staged one stays for finishStateSwitch). */
  async stop(): Promise<void> {
    this.stopped = true
    this.idleTimer?.cancel()
    await this.receiving
    await this.abortReceiving()
  }
}
