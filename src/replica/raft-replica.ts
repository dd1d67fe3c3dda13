/**
 * The Raft replica: the thin driver between the pure core (src/raft) and the world. A timer ticks the core; one loop
 * takes each Ready and does it in the order ready.ts prescribes: persist (one LevelDB batch, one sync: every proposal
 * waiting at that moment commits together), send, apply to the state machine, hand out read states, advance.
 *
 * Proposals on the leader wait until their entry is applied, with the apply result. A proposal on a follower is
 * forwarded to the leader over the peer connection and answered with the leader's result, after the follower has
 * applied it too (so the follower's own reads see the write). Outcomes are reported honestly:
 * - applied: the apply result;
 * - a different entry was applied at that index (the leader changed before the entry committed): `no_leader`, not
 *   applied, safe to retry;
 * - no answer in time, or the forwarding connection dropped after sending: `outcome_unknown`.
 *
 * Reads: `readBarrier` serves stale reads at once, default reads under the leader's lease, and consistent reads (and
 * default reads without a lease, and every non-stale read on a follower) after a ReadIndex round (Thesis §6.4) and
 * once this node has applied up to the read index.
 */
import { randomUUID, randomInt } from 'node:crypto'
import type { Logger } from 'pino'
import { WardenError } from '../lib/errors.js'
import { SeededRng } from '../lib/rng.js'
import { RaftCore, decodeConfiguration, type ConfChange, type Entry, type Message, type Ready, type SnapshotMetadata } from '../raft/index.js'
import type { LevelRaftStorage } from '../raft/storage/level-storage.js'
import { TransportError, type PeerTransport } from '../transport/index.js'
import { COMMAND_VERSION, type ApplyResult, type Command } from '../state/commands.js'
import { encodeCommand, type StateStore } from '../state/store.js'
import { IncomingState, openStateSnapshot, switchToStagedState } from '../state/snapshot.js'
import { listRecords, memberSpec } from '../state/tables.js'
import { makeJoinRequest, verifyJoinRequest, type JoinRequest } from '../lib/join-proof.js'
import type { Cluster, RaftState } from './cluster.js'
import {
  commandBytes,
  FORWARD_BATCH_BYTES_MAX,
  FORWARD_BATCH_COMMANDS_MAX,
  forwardFailure,
  settleForwarded,
  type ForwardBatch,
  type ProposeResponse,
  type ReplicaResponse,
} from './forward.js'

export interface RaftReplicaOptions {
  nodeName: string
  /** Cluster addresses of every founding member, this node included (name → advertised address). */
  members: Map<string, string>
  storage: LevelRaftStorage
  state: StateStore
  transport: PeerTransport
  log: Logger
  onFatal: (error: unknown) => void
  heartbeatIntervalMs: number
  electionTimeoutMs: number
  /** Applied entries after which the node snapshots its state and compacts its log. */
  snapshotThreshold: number
  /** The live state's directory, beside which a snapshot from the leader is staged. */
  stateDirectory: string
  /** The cluster key, to check a joining server's proof. */
  clusterKey: string
  /** A server joining a running cluster starts with no configuration and learns it from the leader. */
  joining?: boolean
  /** How long a write or a read waits for a leader before failing with no_leader. */
  leaderWaitMs?: number
  /** How long a write waits for its entry to be applied before its outcome is unknown. */
  applyWaitMs?: number
}

/** Messages between replicas besides Raft's own, carried by the transport's request/response. */
type ReplicaRequest =
  /** One command forwarded alone: what builds from before batching send, and what this one sends a leader that refuses batches. */
  | { kind: 'propose'; data: Uint8Array }
  /** Commands a follower forwards, every one its callers sent during one turn of its event loop (see forward). */
  | { kind: 'propose-batch'; commands: Uint8Array[] }
  | { kind: 'join'; node: string; address: string }
  | { kind: 'remove'; node: string }
  /** One chunk of a snapshot stream; the last one (done) carries the metadata and the leader's term. */
  | { kind: 'snapshot'; id: string; seq: number; pairs: Array<[string, Uint8Array]>; done: boolean; term?: number; snapshot?: SnapshotMetadata }

interface ProposalWaiter {
  term: number
  resolve: (result: ApplyResult) => void
  reject: (error: WardenError) => void
  timer: NodeJS.Timeout
}

interface Waiter {
  resolve: () => void
  reject: (error: WardenError) => void
}

const SNAPSHOT_CHUNK_TIMEOUT_MS = 30_000
/** How long the leader waits for a joining server to catch up before leaving it a non-voter. */
const PROMOTION_WAIT_MS = 120_000

/**
 * Pause before a write that was refused as not applied (its leader went away) is tried again: a follower learns of a
 * dead leader only after an election timeout, so trying at once would only fail again.
 */
const RETRY_PAUSE_MS = 50

/** Bound on proposals waiting for their entries to apply, and on reads waiting for their read index. */
const WAITING_MAX = 16_384

export class RaftReplica implements Cluster {
  private readonly core: RaftCore
  private readonly tickMs: number
  private readonly leaderWaitMs: number
  private readonly applyWaitMs: number
  private ticker: NodeJS.Timeout | undefined
  private processing = false
  /** Set by every input; the loop runs again if an input arrived after it last asked the core for work. */
  private dirty = false
  private stopped = false
  private failed = false
  private leaderId: string | null = null
  private role: string = 'follower'
  private lastLeaderContactAt = 0
  private readonly proposals = new Map<number, ProposalWaiter>()
  private readonly reads = new Map<string, Waiter & { index?: number }>()
  /** The read index the reads of this turn of the event loop will share (see readIndex). */
  private readBatch: Promise<'confirmed' | 'no_leader'> | undefined
  /** Waiters for this node's applied index, keyed by the index they wait for. */
  private readonly appliedWaiters: Array<{ index: number } & Waiter> = []
  private readonly leaderWaiters = new Set<Waiter>()
  private readonly members: Map<string, string>

  constructor(private readonly options: RaftReplicaOptions) {
    this.members = new Map(options.members)
    // Ticks are half a heartbeat: heartbeats go out every two ticks, and timeouts are measured to a tick.
    this.tickMs = Math.max(5, Math.floor(options.heartbeatIntervalMs / 2))
    this.leaderWaitMs = options.leaderWaitMs ?? 7_000
    this.applyWaitMs = options.applyWaitMs ?? 10_000
    const voters = options.joining === true ? [] : [...options.members.keys()].sort()
    const seed = randomInt(0, 2 ** 32)
    this.core = new RaftCore(
      {
        id: options.nodeName,
        voters,
        electionTimeoutTicks: Math.max(3, Math.round(options.electionTimeoutMs / this.tickMs)),
        heartbeatIntervalTicks: 2,
        preVote: true,
        checkQuorum: true,
        maxInflightMessages: 64,
        maxEntriesPerMessage: 512,
        maxBytesPerMessage: 1024 * 1024,
        // Keep at most a snapshot interval of entries behind each snapshot for followers slightly behind.
        trailingEntries: Math.min(1024, options.snapshotThreshold),
        appliedIndex: options.state.lastApplied,
        // The lease in real time: the ticker does not catch up after the process was stopped, and a leader woken
        // from SIGSTOP must find its lease expired, not serve reads and authorize writes from its old state.
        clock: () => performance.now() / this.tickMs,
      },
      options.storage,
      new SeededRng(seed),
    )
  }

  async start(): Promise<void> {
    // Addresses of servers that joined after the founding members are in the replicated member table.
    for (const member of await listRecords(this.options.state.reader, memberSpec)) {
      if (this.dialsFromTable(member.Node)) this.members.set(member.Node, member.Address)
    }
    this.updatePeers()
    const { transport } = this.options
    transport.onMessage((from, message) => this.onPeerMessage(from, message))
    transport.onRequest((from, request) => this.onPeerRequest(from, request as ReplicaRequest))
    transport.onPeerState((peer, connected) => {
      // A peer may be dialed through a proxy; what operators see is the address it advertised in its handshake.
      const advertised = connected ? transport.stats().peers.get(peer)?.advertiseAddress : undefined
      if (advertised !== undefined) this.advertised.set(peer, advertised)
    })
    this.ticker = setInterval(() => {
      this.core.tick()
      this.kick()
    }, this.tickMs)
    // A cluster of one needs no election timeout to find out it wins.
    if (this.members.size === 1 && this.options.joining !== true) this.core.campaign()
    this.kick()
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The Ready loop.

  private kick(): void {
    this.dirty = true
    if (this.processing || this.stopped || this.failed) return
    this.processing = true
    setImmediate(() => {
      this.processReadies()
        .catch((error: unknown) => this.fail(error))
        .finally(() => {
          this.processing = false
          if (this.dirty) this.kick()
        })
    })
  }

  private async processReadies(): Promise<void> {
    for (;;) {
      if (this.stopped || this.failed) return
      this.dirty = false
      const ready = this.core.ready()
      if (ready === null) return
      await this.handleReady(ready)
      this.core.advance(ready)
      await this.maybeSnapshot()
    }
  }

  /**
   * Every snapshotThreshold applied entries: make the state durable, record the snapshot (its data is the state
   * database itself, read through a LevelDB snapshot when a follower needs it), and compact the log behind it, keeping
   * the core's trailing entries so a follower slightly behind catches up from the log.
   */
  private async maybeSnapshot(): Promise<void> {
    const applied = this.options.state.lastApplied
    const last = this.options.storage.snapshot()?.index ?? 0
    if (applied - last < this.options.snapshotThreshold) return
    const metadata = this.core.snapshotMetadata(applied)
    if (metadata === null) return
    await this.options.state.sync()
    await this.options.storage.saveSnapshot(metadata)
    const compactTo = this.core.snapshotSaved(metadata.index)
    await this.options.storage.compact(compactTo)
    this.options.log.debug({ index: metadata.index, compactedTo: compactTo }, 'snapshot taken, log compacted')
  }

  private async handleReady(ready: Ready): Promise<void> {
    if (ready.softState !== undefined) this.onSoftState(ready.softState.role, ready.softState.leader)
    // 1. Persist before anything leaves (Thesis §3.8).
    if (ready.entries.length > 0 || ready.hardState !== undefined || ready.snapshot !== undefined) {
      await this.options.storage.persist(
        {
          entries: ready.entries,
          ...(ready.hardState === undefined ? {} : { hardState: ready.hardState }),
          ...(ready.snapshot === undefined ? {} : { snapshot: ready.snapshot }),
        },
        ready.mustSync,
      )
    }
    // 1a. A snapshot from the leader: its state was staged beside ours while it streamed; the log now depends on it,
    // so switch to it (finishStateSwitch completes this at start if a crash interrupts it).
    if (ready.snapshot !== undefined) {
      await this.options.state.replace(switchToStagedState)
      this.incoming = undefined
      this.options.log.info({ index: ready.snapshot.index }, 'installed a snapshot from the leader')
      this.releaseApplied()
    }
    // 2. Send. Loss is fine: Raft retries.
    for (const message of ready.messages) this.send(message)
    // 3. Apply, in order; then wake what waited for this node to catch up (once per Ready, not per entry).
    await this.options.state.applyEntries(ready.committedEntries, (entry, command, result) => this.afterApply(entry, command, result))
    if (ready.committedEntries.length > 0) this.releaseApplied()
    // 4. Confirmed reads.
    for (const readState of ready.readStates) {
      const waiter = this.reads.get(readState.context)
      if (waiter === undefined) continue
      this.reads.delete(readState.context)
      this.afterApplied(readState.index).then(waiter.resolve, waiter.reject)
    }
  }

  private send(message: Message): void {
    if (message.type === 'installSnapshot') {
      this.streamSnapshot(message.to, message.term)
      return
    }
    if (!this.options.transport.send(message.to, message)) this.core.reportUnreachable(message.to)
  }

  /** What an applied entry means beyond the state: membership, and the proposal waiting on it. */
  private afterApply(entry: Entry, command: Command, result: ApplyResult): void {
    if (command.type === 'raft.member.set' && this.dialsFromTable(command.Node)) {
      this.members.set(command.Node, command.Address)
      this.updatePeers()
    } else if (command.type === 'raft.member.delete' && this.dialsFromTable(command.Node)) {
      this.members.delete(command.Node)
      this.updatePeers()
    } else if (entry.type === 'configuration') this.onConfiguration(entry)
    const waiter = this.proposals.get(entry.index)
    if (waiter !== undefined) {
      this.proposals.delete(entry.index)
      clearTimeout(waiter.timer)
      if (waiter.term === entry.term) waiter.resolve(result)
      else waiter.reject(new WardenError('no_leader', 'the leader changed before this write was committed; it was not applied, so it is safe to retry'))
    }
  }

  private onConfiguration(entry: Entry): void {
    const configuration = decodeConfiguration(entry.data)
    this.options.log.info({ index: entry.index, voters: configuration.voters, learners: configuration.learners }, 'membership changed')
  }

  private onSoftState(role: string, leader: string | null): void {
    const changed = leader !== this.leaderId
    this.role = role
    this.leaderId = leader
    if (changed) this.options.log.info({ role, leader, term: this.core.status().term }, leader === null ? 'no leader' : 'leader known')
    if (leader !== null) {
      this.lastLeaderContactAt = Date.now()
      for (const waiter of this.leaderWaiters) waiter.resolve()
      this.leaderWaiters.clear()
      // Reads confirmed by an old leader that went away would wait out their timeout: ask the new one. A read index
      // from any leader of a later term is at least as recent, so a late answer to the first request is still safe.
      if (changed) for (const context of this.reads.keys()) this.core.readIndex(context)
    }
    if (role === 'leader') this.onBecomeLeader()
  }

  private onBecomeLeader(): void {
    this.options.log.info({ term: this.core.status().term }, 'became leader')
    for (const listener of this.leadershipListeners) listener()
    // Founding members know each other from their flags; a server that joins later learns them from this table.
    void this.readBarrier('consistent')
      .then(() => this.recordKnownMembers())
      .catch((error: unknown) => this.options.log.debug({ err: error }, 'recording members failed; the next leader retries'))
  }

  /**
   * On a new leader: every member of the configuration has its address recorded, and addresses of servers no longer in
   * it (a leader that removed itself) are forgotten. A server between its address and its configuration change (a
   * join under way) loses its address too; its join is retried and records it again.
   */
  private async recordKnownMembers(): Promise<void> {
    const recorded = new Map((await listRecords(this.options.state.reader, memberSpec)).map((member) => [member.Node, member.Address]))
    const configuration = this.core.status().configuration
    const inConfiguration = new Set([...configuration.voters, ...configuration.learners])
    for (const [node, address] of this.members) {
      if (address !== '' && inConfiguration.has(node) && recorded.get(node) !== address) {
        await this.propose({ v: COMMAND_VERSION, type: 'raft.member.set', Node: node, Address: address })
      }
    }
    for (const node of recorded.keys()) {
      if (!inConfiguration.has(node)) await this.propose({ v: COMMAND_VERSION, type: 'raft.member.delete', Node: node })
    }
  }

  /**
   * Whether this node dials `node` at the address the member table records. Not for itself, and not for a member
   * given by --peer: that address is how this node reaches it (perhaps through a proxy), whatever it advertises.
   */
  private dialsFromTable(node: string): boolean {
    return node !== this.options.nodeName && !this.options.members.has(node)
  }

  private updatePeers(): void {
    const peers = new Map([...this.members].filter(([node, address]) => node !== this.options.nodeName && address !== ''))
    this.options.transport.setPeers(peers)
  }

  private readonly leadershipListeners = new Set<() => void>()

  /** Called each time this node becomes leader (the agent writes the built-ins of a new cluster then). */
  onLeadership(listener: () => void): void {
    this.leadershipListeners.add(listener)
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Peers.

  private onPeerMessage(from: string, message: unknown): void {
    const raft = message as Message
    if (typeof raft !== 'object' || raft === null || raft.from !== from) return
    if (raft.from === this.leaderId) this.lastLeaderContactAt = Date.now()
    this.core.step(raft)
    this.kick()
  }

  private async onPeerRequest(from: string, request: ReplicaRequest): Promise<ReplicaResponse | ProposeResponse | { ok: true; members?: Record<string, string> }> {
    if (request?.kind === 'snapshot') return this.receiveSnapshotChunk(from, request)
    if (request?.kind === 'join') return { ok: true, ...(await this.joinAsLeader(request.node, request.address)) }
    if (request?.kind === 'remove') {
      await this.removeAsLeader(request.node)
      return { ok: true }
    }
    if (request?.kind === 'propose') {
      if (this.role !== 'leader') throw new WardenError('no_leader', 'this node is no longer the leader; retry')
      return this.proposeLocally(commandBytes(request.data))
    }
    if (request?.kind !== 'propose-batch' || !Array.isArray(request.commands)) throw new WardenError('invalid_input', 'unknown replica request')
    // Checked whole before anything is proposed: a refusal of the request must mean that none of it was applied.
    const commands = request.commands.map(commandBytes)
    if (this.role !== 'leader') throw new WardenError('no_leader', 'this node is no longer the leader; retry')
    // Each command succeeds or fails on its own (one may be refused as rate_limited while the others commit).
    const settled = await Promise.allSettled(commands.map((data) => this.proposeLocally(data)))
    return {
      outcomes: settled.map((outcome) => {
        if (outcome.status === 'fulfilled') return outcome.value
        const error = outcome.reason instanceof WardenError ? outcome.reason : new WardenError('outcome_unknown', 'the write failed on the leader in an unexpected way; it may or may not have been applied')
        return { error: error.toWire() }
      }),
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Snapshots to and from peers.

  private readonly streaming = new Set<string>()
  private incoming: { id: string; from: string; nextSeq: number; state: IncomingState } | undefined

  /** Streams the state, as of one LevelDB snapshot, to a follower too far behind for the log; chunk by chunk, each acknowledged. */
  private streamSnapshot(to: string, term: number): void {
    if (this.streaming.has(to)) return
    this.streaming.add(to)
    const run = async (): Promise<void> => {
      const reader = await openStateSnapshot(this.options.state)
      try {
        const snapshot = this.core.snapshotMetadata(reader.appliedIndex)
        if (snapshot === null) throw new Error('no snapshot can be taken while one is being installed')
        const id = randomUUID()
        let seq = 0
        for await (const pairs of reader.chunks()) {
          await this.options.transport.request(to, { kind: 'snapshot', id, seq, pairs, done: false } satisfies ReplicaRequest, SNAPSHOT_CHUNK_TIMEOUT_MS)
          seq += 1
        }
        await this.options.transport.request(to, { kind: 'snapshot', id, seq, pairs: [], done: true, term, snapshot } satisfies ReplicaRequest, SNAPSHOT_CHUNK_TIMEOUT_MS)
        this.options.log.info({ to, index: snapshot.index, chunks: seq }, 'sent a snapshot')
      } finally {
        await reader.close()
      }
    }
    run().then(
      () => this.core.reportSnapshot(to, true),
      (error: unknown) => {
        this.options.log.warn({ err: error, to }, 'sending a snapshot failed; the leader will try again')
        this.core.reportSnapshot(to, false)
      },
    ).finally(() => {
      this.streaming.delete(to)
      this.kick()
    })
  }

  private async receiveSnapshotChunk(from: string, request: Extract<ReplicaRequest, { kind: 'snapshot' }>): Promise<{ ok: true }> {
    if (request.seq === 0) {
      await this.incoming?.state.abort()
      this.incoming = undefined
      this.incoming = { id: request.id, from, nextSeq: 0, state: await IncomingState.create(this.stateDirectory()) }
    }
    const incoming = this.incoming
    if (incoming === undefined || incoming.id !== request.id || incoming.from !== from || incoming.nextSeq !== request.seq) {
      throw new WardenError('invalid_input', 'snapshot chunk out of order; the leader restarts the stream')
    }
    await incoming.state.write(request.pairs)
    incoming.nextSeq += 1
    if (!request.done) return { ok: true }
    const stagedIndex = await incoming.state.complete()
    const snapshot = request.snapshot
    if (snapshot === undefined || request.term === undefined || stagedIndex !== snapshot.index) {
      throw new WardenError('invalid_input', 'snapshot stream ended without matching metadata')
    }
    // The core decides whether the snapshot is still wanted; if so, the next Ready installs the staged state.
    this.core.step({ type: 'installSnapshot', from, to: this.options.nodeName, term: request.term, snapshot })
    this.kick()
    return { ok: true }
  }

  private stateDirectory(): string {
    return this.options.stateDirectory
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Cluster.

  async propose(command: Command): Promise<ApplyResult> {
    this.checkRunning()
    const data = encodeCommand(command)
    const deadline = Date.now() + this.leaderWaitMs
    for (;;) {
      try {
        if (this.role === 'leader') return (await this.proposeLocally(data)).result
        const leader = this.leaderId
        if (leader !== null) {
          const response = await this.forward(leader, data)
          // Serve the caller's next read from this node with its own write in it.
          await this.afterApplied(response.index, Math.min(this.applyWaitMs, 5_000)).catch(() => undefined)
          return response.result
        }
      } catch (error) {
        // no_leader means the write was not applied: the leader it went to died, stepped down or lost the entry to a
        // new leader. Until the leader wait is up it is tried again, as a write that found no leader at first waits
        // for one, so a failover does not surface as errors. Any other failure is the caller's to see.
        if (!(error instanceof WardenError) || error.code !== 'no_leader' || this.stopped || this.failed || Date.now() >= deadline) throw error
        await new Promise((resolve) => setTimeout(resolve, Math.min(RETRY_PAUSE_MS, Math.max(0, deadline - Date.now()))))
        continue
      }
      await this.waitForLeader(deadline)
    }
  }

  /** Forwarded commands waiting for the end of this turn of the event loop, when they leave in one request. */
  private forwardBatch: ForwardBatch | undefined
  /** Counts for operators (GET /v1/operator/raft/state): how much write traffic came through this node. */
  private readonly forwarded = { writes: 0, requests: 0 }

  /**
   * Forwards a command to the leader with every other command this node's callers send during the same turn of the
   * event loop: one request and one answer for the batch instead of one each, which is most of what a forwarded write
   * cost the follower and the leader beyond the write itself. The leader proposes them together, so they commit in
   * the same Raft batch, and answers once every one of them has an outcome.
   */
  private forward(leader: string, data: Uint8Array): Promise<ReplicaResponse> {
    let batch = this.forwardBatch
    if (batch !== undefined && (batch.leader !== leader || batch.items.length >= FORWARD_BATCH_COMMANDS_MAX || batch.bytes + data.byteLength > FORWARD_BATCH_BYTES_MAX)) {
      this.sendForwardBatch(batch)
      batch = undefined
    }
    if (batch === undefined) {
      const opened: ForwardBatch = { leader, bytes: 0, items: [] }
      this.forwardBatch = batch = opened
      setImmediate(() => this.sendForwardBatch(opened))
    }
    batch.bytes += data.byteLength
    return new Promise<ReplicaResponse>((resolve, reject) => batch.items.push({ data, resolve, reject }))
  }

  private sendForwardBatch(batch: ForwardBatch): void {
    if (this.forwardBatch === batch) this.forwardBatch = undefined
    if (batch.items.length === 0) return
    const items = batch.items.splice(0)
    if (this.stopped) {
      const error = new WardenError('no_leader', 'this node is shutting down; the write was not applied, retry on another node')
      for (const item of items) item.reject(error)
      return
    }
    // Nothing has left yet, so the batch may follow a leader change that happened since it opened.
    if (this.role === 'leader') {
      for (const item of items) this.proposeLocally(item.data).then(item.resolve, item.reject)
      return
    }
    const leader = this.leaderId ?? batch.leader
    const request: ReplicaRequest = { kind: 'propose-batch', commands: items.map((item) => item.data) }
    this.forwarded.requests += 1
    this.forwarded.writes += items.length
    this.options.transport.request(leader, request, this.applyWaitMs).then(
      (response) => settleForwarded(leader, items, response),
      (error: unknown) => {
        // A leader that does not know batches (an older build, during a rolling upgrade) refuses the request whole,
        // before proposing any of it: send the commands one by one, as that build expects.
        if (error instanceof WardenError && error.code === 'invalid_input') {
          this.forwarded.requests += items.length
          for (const item of items) this.forwardOne(leader, item.data).then(item.resolve, item.reject)
          return
        }
        const failure = forwardFailure(leader, error)
        for (const item of items) item.reject(failure)
      },
    )
  }

  private async forwardOne(leader: string, data: Uint8Array): Promise<ReplicaResponse> {
    try {
      const response = (await this.options.transport.request(leader, { kind: 'propose', data } satisfies ReplicaRequest, this.applyWaitMs)) as Partial<ReplicaResponse>
      if (typeof response?.index !== 'number' || typeof response.result !== 'object') throw new WardenError('outcome_unknown', `the leader ${leader} answered in a form this node does not know; the write may or may not have been applied`)
      return response as ReplicaResponse
    } catch (error) {
      throw forwardFailure(leader, error)
    }
  }

  private proposeLocally(data: Uint8Array): Promise<ReplicaResponse> {
    if (this.proposals.size >= WAITING_MAX) {
      return Promise.reject(new WardenError('rate_limited', 'too many writes are waiting to commit; retry later'))
    }
    const proposed = this.core.propose([data])
    if (!proposed.ok) {
      const code = proposed.error === 'too_many_uncommitted' ? 'rate_limited' : 'no_leader'
      return Promise.reject(new WardenError(code, `the write was not accepted: ${proposed.message}; it was not applied, retry`))
    }
    this.kick()
    const index = proposed.index
    return new Promise<ReplicaResponse>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.proposals.delete(index)
        reject(new WardenError('outcome_unknown', 'the write was not committed in time; it may or may not be applied'))
      }, this.applyWaitMs)
      this.proposals.set(index, {
        term: proposed.term,
        resolve: (result) => resolve({ result, index }),
        reject,
        timer,
      })
    })
  }

  async readBarrier(mode: 'leader' | 'stale' | 'consistent'): Promise<void> {
    if (mode === 'stale') return
    this.checkRunning()
    const deadline = Date.now() + this.leaderWaitMs
    for (;;) {
      if (mode === 'leader' && this.role === 'leader') {
        const index = this.core.leaseRead()
        if (index !== null) return this.afterApplied(index)
      }
      if (this.leaderId !== null) {
        if ((await this.readIndex()) === 'confirmed') return
        // The core knew no leader when the batch asked (this node's view of the leader lags the core's by a Ready):
        // wait for one, as a read that found none at first does, and ask again.
        if (Date.now() >= deadline) throw new WardenError('no_leader', 'no leader could confirm the read in time; retry')
        await (this.leaderId === null ? this.waitForLeader(deadline) : new Promise((resolve) => setTimeout(resolve, 10)))
        continue
      }
      await this.waitForLeader(deadline)
    }
  }

  /**
   * One read index for every read that asks during this turn of the event loop, requested at its end (in the check
   * phase): each read of the batch arrived before the request left, so the leader's commit index when it answers is
   * at least what any of them must see (Thesis §6.4). Requesting it at the first read and letting later ones join
   * would not be safe: a write acknowledged after the request reached the leader but before a later read arrived
   * could be missing from that read. Batching spares the leader a message and a confirmation per read.
   */
  private readIndex(): Promise<'confirmed' | 'no_leader'> {
    this.readBatch ??= new Promise<'confirmed' | 'no_leader'>((resolve, reject) =>
      setImmediate(() => {
        this.readBatch = undefined
        this.readIndexNow().then(resolve, reject)
      }),
    )
    return this.readBatch
  }

  private readIndexNow(): Promise<'confirmed' | 'no_leader'> {
    // The node may have stopped since the batch's reads arrived: no waiter (nor its timer) is left behind then.
    if (this.stopped || this.failed) return Promise.reject(new WardenError('no_leader', 'this node is shutting down; retry on another node'))
    if (this.reads.size >= WAITING_MAX) return Promise.reject(new WardenError('rate_limited', 'too many reads are waiting; retry later'))
    const context = randomUUID()
    const started = this.core.readIndex(context)
    if (!started.ok) {
      if (started.error === 'not_leader') return Promise.resolve('no_leader')
      return Promise.reject(new WardenError('no_leader', `cannot confirm a read now: ${started.message}`))
    }
    this.kick()
    return new Promise<'confirmed' | 'no_leader'>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.reads.delete(context)
        reject(new WardenError('no_leader', 'the leader did not confirm the read in time; retry'))
      }, this.leaderWaitMs)
      this.reads.set(context, {
        resolve: () => {
          clearTimeout(timer)
          resolve('confirmed')
        },
        reject: (error) => {
          clearTimeout(timer)
          reject(error)
        },
      })
    })
  }

  /** Resolves once this node's state machine has applied `index`. */
  private afterApplied(index: number, timeoutMs = this.applyWaitMs): Promise<void> {
    if (this.options.state.lastApplied >= index) return Promise.resolve()
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        index,
        resolve: () => {
          clearTimeout(timer)
          resolve()
        },
        reject: (error: WardenError) => {
          clearTimeout(timer)
          reject(error)
        },
      }
      const timer = setTimeout(() => {
        const position = this.appliedWaiters.indexOf(waiter)
        if (position !== -1) this.appliedWaiters.splice(position, 1)
        reject(new WardenError('no_leader', `this node has not caught up to index ${index} in time; retry`))
      }, timeoutMs)
      this.appliedWaiters.push(waiter)
    })
  }

  private releaseApplied(): void {
    const applied = this.options.state.lastApplied
    for (let position = this.appliedWaiters.length - 1; position >= 0; position -= 1) {
      const waiter = this.appliedWaiters[position]!
      if (waiter.index <= applied) {
        this.appliedWaiters.splice(position, 1)
        waiter.resolve()
      }
    }
  }

  private waitForLeader(deadline: number): Promise<void> {
    const remaining = deadline - Date.now()
    if (remaining <= 0) return Promise.reject(new WardenError('no_leader', 'no cluster leader; the request was not applied, retry'))
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve: () => {
          clearTimeout(timer)
          resolve()
        },
        reject,
      }
      const timer = setTimeout(() => {
        this.leaderWaiters.delete(waiter)
        reject(new WardenError('no_leader', 'no cluster leader; the request was not applied, retry'))
      }, remaining)
      this.leaderWaiters.add(waiter)
    })
  }

  private checkRunning(): void {
    if (this.stopped) throw new WardenError('no_leader', 'this node is shutting down; retry on another node')
    if (this.failed) throw new WardenError('no_leader', 'this node stopped after a storage failure; retry on another node')
  }

  /** Addresses peers advertised in their handshakes, which may differ from the addresses dialed (proxies). */
  private readonly advertised = new Map<string, string>()

  private addressOf(node: string): string {
    if (node === this.options.nodeName) return this.members.get(node) ?? ''
    return this.advertised.get(node) ?? this.members.get(node) ?? ''
  }

  leaderAddress(): string {
    return this.leaderId === null ? '' : this.addressOf(this.leaderId)
  }

  peerAddresses(): string[] {
    const configuration = this.core.status().configuration
    return configuration.voters.map((id) => this.addressOf(id)).filter((address) => address !== '')
  }

  isLeader(): boolean {
    return this.role === 'leader'
  }

  lastContactMs(): number {
    if (this.role === 'leader') return 0
    return this.lastLeaderContactAt === 0 ? 0 : Date.now() - this.lastLeaderContactAt
  }

  membership(): { index: number; servers: Array<{ id: string; address: string; voter: boolean }> } {
    const status = this.core.status()
    return {
      index: status.configurationIndex,
      servers: [
        ...status.configuration.voters.map((id) => ({ id, address: this.addressOf(id), voter: true })),
        ...status.configuration.learners.map((id) => ({ id, address: this.addressOf(id), voter: false })),
      ],
    }
  }

  async join(request: JoinRequest): Promise<{ members: Record<string, string> }> {
    if (!verifyJoinRequest(this.options.clusterKey, request, Date.now())) {
      throw new WardenError('permission_denied', 'the join request does not prove the cluster key (or is older than a minute)')
    }
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(request.Node)) throw new WardenError('invalid_input', 'Node: is not a valid node name', 'Node')
    return this.onLeader(
      () => this.joinAsLeader(request.Node, request.Address),
      (leader) => this.forwardMembership(leader, { kind: 'join', node: request.Node, address: request.Address }),
    )
  }

  async removeServer(which: { id?: string; address?: string }): Promise<void> {
    const id = which.id ?? [...this.members].find(([, address]) => address === which.address)?.[0]
    if (id === undefined || !this.membership().servers.some((server) => server.id === id)) {
      throw new WardenError('invalid_input', `${which.id ?? which.address} is not a server of this cluster`, which.id !== undefined ? 'id' : 'address')
    }
    await this.onLeader(
      () => this.removeAsLeader(id),
      async (leader) => {
        await this.forwardMembership(leader, { kind: 'remove', node: id })
      },
    )
  }

  /** Runs `local` on the leader, or `forward` to the leader from a follower, waiting a while for a leader to exist. */
  private async onLeader<T>(local: () => Promise<T>, forward: (leader: string) => Promise<T>): Promise<T> {
    this.checkRunning()
    const deadline = Date.now() + this.leaderWaitMs
    for (;;) {
      if (this.role === 'leader') return local()
      if (this.leaderId !== null) return forward(this.leaderId)
      await this.waitForLeader(deadline)
    }
  }

  private async forwardMembership(leader: string, request: ReplicaRequest): Promise<{ members: Record<string, string> }> {
    try {
      const response = (await this.options.transport.request(leader, request, this.applyWaitMs)) as { members?: Record<string, string> }
      return { members: response.members ?? {} }
    } catch (error) {
      if (error instanceof TransportError) throw new WardenError(error.delivered === 'no' ? 'no_leader' : 'outcome_unknown', `the leader ${leader} did not answer: ${error.message}`)
      throw error
    }
  }

  /** A membership change, retried while the previous one (or this leader's first entry) is still uncommitted. */
  private async changeMembership(change: ConfChange): Promise<void> {
    const deadline = Date.now() + this.applyWaitMs
    for (;;) {
      if (this.role !== 'leader') throw new WardenError('no_leader', 'leadership changed during a membership change; retry')
      const proposed = this.core.proposeConfChange(change)
      if (proposed.ok) {
        this.kick()
        await this.afterApplied(proposed.index)
        return
      }
      if (proposed.error !== 'configuration_change_pending' || Date.now() > deadline) {
        throw new WardenError('invalid_input', `cannot ${change.type} ${change.nodeId}: ${proposed.message}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }

  private async joinAsLeader(node: string, address: string): Promise<{ members: Record<string, string> }> {
    const configuration = this.core.status().configuration
    await this.propose({ v: COMMAND_VERSION, type: 'raft.member.set', Node: node, Address: address })
    if (!configuration.voters.includes(node) && !configuration.learners.includes(node)) {
      // Thesis §4.2.1: a new server joins without a vote, so that it cannot slow down commits while it catches up.
      await this.changeMembership({ type: 'addLearner', nodeId: node })
      this.options.log.info({ node, address }, 'server joined as a non-voter')
    }
    if (!this.core.status().configuration.voters.includes(node)) void this.promoteWhenCaughtUp(node)
    return { members: Object.fromEntries(this.members) }
  }

  /** Promotes a learner once its log has reached the leader's commit index, checking for a bounded time. */
  private async promoteWhenCaughtUp(node: string): Promise<void> {
    if (this.promoting.has(node)) return
    this.promoting.add(node)
    try {
      const deadline = Date.now() + PROMOTION_WAIT_MS
      while (!this.stopped && this.role === 'leader' && Date.now() < deadline) {
        const status = this.core.status()
        if (!status.configuration.learners.includes(node)) return
        const progress = status.progress?.[node]
        if (progress !== undefined && progress.matchIndex >= status.commitIndex) {
          await this.changeMembership({ type: 'addVoter', nodeId: node })
          this.options.log.info({ node }, 'server caught up and became a voter')
          return
        }
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      this.options.log.warn({ node }, 'a joining server did not catch up in time; it stays a non-voter until it joins again')
    } catch (error) {
      this.options.log.warn({ err: error, node }, 'promoting a joining server failed')
    } finally {
      this.promoting.delete(node)
    }
  }

  private readonly promoting = new Set<string>()

  /** Removes a server (Thesis §4.2.2: the leader may remove itself; it steps down once the change commits). */
  private async removeAsLeader(node: string): Promise<void> {
    await this.changeMembership({ type: 'removeServer', nodeId: node })
    this.options.log.info({ node }, 'server removed')
    // The address goes after the configuration change, so the links the change needs stay up until it commits. A
    // leader that removed itself has stepped down and is out of the cluster: the next leader forgets its address.
    if (node !== this.options.nodeName) await this.propose({ v: COMMAND_VERSION, type: 'raft.member.delete', Node: node })
  }

  /** Joins a running cluster through one of its members' HTTP addresses (the `--join` flag). */
  async joinThrough(httpAddresses: readonly string[], advertiseAddress: string): Promise<void> {
    for (let attempt = 0; !this.stopped; attempt += 1) {
      for (const httpAddress of httpAddresses) {
        try {
          const request = makeJoinRequest(this.options.clusterKey, this.options.nodeName, advertiseAddress, Date.now())
          const response = await fetch(`http://${httpAddress}/v1/operator/raft/join`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify(request),
            signal: AbortSignal.timeout(this.applyWaitMs),
          })
          const body = (await response.json()) as { Members?: Record<string, string>; Error?: string }
          if (!response.ok || body.Members === undefined) throw new Error(body.Error ?? `HTTP ${response.status}`)
          for (const [node, address] of Object.entries(body.Members)) if (node !== this.options.nodeName) this.members.set(node, address)
          this.updatePeers()
          this.options.log.info({ through: httpAddress, members: Object.keys(body.Members) }, 'joined the cluster')
          return
        } catch (error) {
          this.options.log.warn({ err: error, through: httpAddress, attempt }, 'join attempt failed; retrying')
        }
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, 250 * 2 ** Math.min(attempt, 5))))
    }
  }

  raftState(): RaftState {
    const status = this.core.status()
    return {
      node: this.options.nodeName,
      role: status.role,
      term: status.term,
      leader: status.leader,
      commitIndex: status.commitIndex,
      appliedIndex: this.options.state.lastApplied,
      lastIndex: status.lastIndex,
      lastContactMs: this.lastContactMs(),
      forwardedWrites: this.forwarded.writes,
      forwardedRequests: this.forwarded.requests,
    }
  }

  /** Raft status for operators and tests. */
  status(): ReturnType<RaftCore['status']> {
    return this.core.status()
  }

  /** Hands leadership to another voter before stopping (Thesis §3.10), so clients see no election timeout. */
  async transferLeadershipBeforeStop(waitMs = 1_000): Promise<void> {
    if (this.role !== 'leader' || this.members.size < 2) return
    const status = this.core.status()
    const progress = status.progress ?? {}
    const target = Object.entries(progress)
      .filter(([, p]) => !p.isLearner)
      .sort(([, a], [, b]) => b.matchIndex - a.matchIndex)[0]?.[0]
    if (target === undefined) return
    this.core.transferLeadership(target)
    this.kick()
    const deadline = Date.now() + waitMs
    while (this.role === 'leader' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
    if (this.role !== 'leader') this.options.log.info({ to: target }, 'handed leadership over before stopping')
  }

  private fail(error: unknown): void {
    if (this.failed) return
    this.failed = true
    this.rejectAll(new WardenError('outcome_unknown', 'this node stopped after a storage failure'))
    this.options.onFatal(error)
  }

  private rejectAll(error: WardenError): void {
    for (const waiter of this.proposals.values()) {
      clearTimeout(waiter.timer)
      waiter.reject(error)
    }
    this.proposals.clear()
    for (const waiter of this.reads.values()) waiter.reject(new WardenError('no_leader', error.message))
    this.reads.clear()
    for (const waiter of this.appliedWaiters.splice(0)) waiter.reject(new WardenError('no_leader', error.message))
    for (const waiter of this.leaderWaiters) waiter.reject(new WardenError('no_leader', error.message))
    this.leaderWaiters.clear()
  }

  async stop(): Promise<void> {
    if (this.stopped) return
    await this.transferLeadershipBeforeStop().catch(() => undefined)
    this.stopped = true
    if (this.ticker !== undefined) clearInterval(this.ticker)
    // Writes still waiting may yet commit on the other nodes: their outcome is unknown to their callers.
    this.rejectAll(new WardenError('outcome_unknown', 'this node is shutting down; the write may or may not have been applied'))
    while (this.processing) await new Promise((resolve) => setTimeout(resolve, 5))
  }
}
