/**
 * The cluster as the HTTP layer sees it (Cluster), over this node's Raft replica: writes proposed here when this node
 * leads and forwarded to the leader otherwise; read barriers (lease, ReadIndex); joins and removals routed to the
 * leader (leadership transfers too). On the leader it also serves what followers forward, each command checked
 * (state/validate.ts) before it is proposed: applying never throws for bytes a peer could send.
 *
 * Outcomes are reported honestly: applied with its result; `no_leader` when the write was not applied (safe to retry:
 * within raft.leader_wait it is retried here first, so a failover does not surface as errors); `outcome_unknown` when
 * it may have been applied.
 *
 * Reads: stale reads at once; default reads under the leader's lease; consistent reads (and default reads without a
 * lease, and every non-stale read on a follower) after a ReadIndex round (Thesis §6.4) and once this node has applied
 * up to the read index.
 */
import { sleep } from '../lib/environment.js'
import { WardenError } from '../lib/errors.js'
import { LogLimiter } from '../lib/log-limiter.js'
import { NODE_NAME_PATTERN } from '../lib/ids.js'
import { JoinReplayGuard, verifyJoinRequest, type JoinRequest, type JoinStamp } from '../lib/join-proof.js'
import type { JoinAnswer } from '../replica/membership.js'
import type { RaftReplica } from '../replica/raft-replica.js'
import type { ApplyResult, Command } from '../state/commands.js'
import { encodeCommand, LINKED_TABLES } from '../state/store.js'
import { checkCommand, validateCommand } from '../state/validate.js'
import { TransportError } from '../transport/index.js'
import type { Cluster, ProposeOptions, RaftState, ServerView } from './cluster.js'
import { ClusterStatusService, type ClusterAnswer, type ClusterQuery, type StatusDetail } from './cluster-status.js'
import {
  commandBytes,
  FORWARD_BATCH_BYTES_MAX,
  FORWARD_BATCH_COMMANDS_MAX,
  forwardFailure,
  namesCurrent,
  settleForwarded,
  type ForwardBatch,
  type ProposeResponse,
  type ReplicaResponse,
} from './forward.js'

/**
 * Pause before a write that was refused as not applied (its leader went away) is tried again: a follower learns of a
 * dead leader only after an election timeout, so trying at once would only fail again.
 */
const RETRY_PAUSE_MS = 50

/**
 * How long, at most, a follower waits for its own apply of a write it forwarded, before answering it (or, with
 * answerBeforeLocalApply, before serving a request after that answer): past it the node answers from what it has.
 */
const OWN_APPLY_WAIT_MS_MAX = 5_000
/**
 * Forwarded commands are answered as soon as their results are computed (RaftReplica.proposeLocally): the follower
 * either waits for its own apply, which follows the leader's written one, or answers ahead as its caller allows.
 */
const EARLY = { early: true } as const

/** Beyond the leader's own wait for a leadership transfer, how long a follower that forwarded it waits for the answer. */
const TRANSFER_ANSWER_SLACK_MS = 2_000

interface ReadBatch {
  readonly answer: Promise<'confirmed' | 'no_leader'>
  readonly fixed: Array<() => void>
}

export class ClusterNode implements Cluster {
  /** Forwarded commands waiting for the end of this turn of the event loop, when they leave in one request. */
  private forwardBatch: ForwardBatch | undefined
  /** Counts for operators (GET /v1/operator/raft/state): how much write traffic came through this node. */
  private readonly forwarded = { writes: 0, requests: 0 }
  /** The read index the reads of this turn of the event loop will share (see readIndex), by whether they accept the lease. */
  /** The ReadIndex batch of this turn per kind: its answer, and who waits to hear when its request leaves. */
  private readonly readBatches: { lease?: ReadBatch; consistent?: ReadBatch } = {}
  /** The end of the current turn, awaited by the writes of the turn on the leader (endOfTurn). */
  private turnEnd: Promise<void> | undefined
  /** On the leader: the join proofs accepted, so that a recorded one cannot be sent again (lib/join-proof.ts). */
  private readonly joinProofs = new JoinReplayGuard()
  /**
   * The highest index of a write this node answered before applying it (answerBeforeLocalApply), and until when
   * (environment time) the requests it serves after that answer wait for its apply: as long as the answer would have.
   * `waiting`: the one wait every such request shares, for `index` (a waiter per request would fill the bounded
   * set of apply waiters under load).
   */
  private readonly answeredAhead: { index: number; untilMs: number; waiting?: { index: number; untilMs: number; done: Promise<void> } } = { index: 0, untilMs: 0 }
  /** The one wait for RaftReplica.releasedThrough that the requests served meanwhile share (ownWritesApplied). */
  private landing: { index: number; done: Promise<void> } | undefined
  /** Refused forwarded commands are logged at most once per peer and problem per interval: a peer could flood. */
  private readonly refusals = new LogLimiter()
  /** The cluster view of GET /v1/operator/cluster; serves the `raft-state` and `cluster-status` peer requests. */
  private readonly statusService: ClusterStatusService

  /**
   * @param clusterKey proves joining servers; without one (a single server started without a key) nobody may join.
   */
  constructor(
    readonly replica: RaftReplica,
    private readonly clusterKey: string | undefined,
  ) {
    replica.handleRequests('propose', async (from, request) => {
      const data = commandBytes(request['data'])
      const refusal = this.refusal(from, data)
      if (refusal !== undefined) throw refusal
      this.mustLead()
      // The follower waits for its own apply or answers ahead as its caller allows; this node's later requests wait
      // for the write (ownWritesApplied).
      const outcome = await this.replica.proposeLocally(data, EARLY)
      return { ...outcome, namesIndex: this.namesIndex() }
    })
    replica.handleRequests('propose-batch', (from, request) => this.serveBatch(from, request['commands']))
    replica.onLeadership(() => this.joinProofs.leadershipBegan(replica.environment.wallNow()))
    replica.handleRequests('join', async (_from, request) => {
      const incarnation = typeof request['incarnation'] === 'string' ? request['incarnation'] : undefined
      // A member forwarding a join it verified sends the proof's nonce and time (a member may add a server without a
      // proof, as the simulator's joins do: it proved the cluster key on its link).
      const stamp = typeof request['nonce'] === 'string' && typeof request['time'] === 'number' ? { nonce: request['nonce'], time: request['time'] } : undefined
      return { ok: true, ...(await this.routeJoin(String(request['node']), String(request['address']), incarnation, request['forwarded'] === true, stamp)) }
    })
    replica.handleRequests('remove', async (_from, request) => {
      this.mustLead()
      await this.replica.membershipChanges.removeAsLeader(String(request['node']))
      return { ok: true }
    })
    this.statusService = new ClusterStatusService(replica, () => {
      const status = replica.status()
      return { role: status.role, term: status.term, commitIndex: status.commitIndex, appliedIndex: replica.state.lastApplied, lastIndex: status.lastIndex }
    })
    replica.handleRequests('transfer-leader', async (_from, request) => {
      this.mustLead()
      const id = typeof request['id'] === 'string' ? request['id'] : undefined
      return { leader: await this.replica.transferLeadership(id, this.replica.leaderWaitMs) }
    })
  }

  private mustLead(): void {
    if (!this.replica.isLeader()) throw new WardenError('no_leader', 'this node is no longer the leader; retry')
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Writes.

  async propose(command: Command, options: ProposeOptions = {}): Promise<ApplyResult> {
    return (await this.proposeIndexed(command, options)).result
  }

  async proposeIndexed(command: Command, options: ProposeOptions = {}): Promise<{ result: ApplyResult; index: number }> {
    this.replica.checkRunning()
    // This node's own commands are checked too (1.3 µs for a token create: scripts/bench/validate-micro.ts): one built
    // from a request the HTTP layer let through by mistake is refused here, before it reaches any log, rather than
    // applied as a no-op on every replica. Types cannot promise it: bodies are JSON cast to command fields.
    const checked = checkCommand(command)
    if (!checked.ok) throw new WardenError('internal', `this node made a malformed ${String(command.type)} command (${checked.message}); it was not applied`)
    const data = encodeCommand(command)
    // Proposed here, it may be answered once its result is computed when its caller renders from the result alone.
    const local = { early: options.answerBeforeLocalApply === true }
    if (options.leaderOnly === true) {
      if (!this.replica.isLeader()) throw new WardenError('no_leader', 'this node is no longer the leader; only the leader proposes this')
      return this.replica.proposeLocally(data, local)
    }
    const { environment } = this.replica
    const deadline = environment.now() + this.replica.leaderWaitMs
    for (;;) {
      try {
        if (this.replica.isLeader()) return await this.replica.proposeLocally(data, local)
        const leader = this.replica.leader
        if (leader !== null) {
          const response = await this.forward(leader, data)
          // Serve the caller's next read from this node with its own write in it: wait for this node's apply now, or
          // have every request served after the answer wait for it (ownWritesApplied). The second answers sooner, and
          // the answers of a forwarded batch then leave together, so its callers' next writes share a batch too
          // (docs/benchmarks.md, issue 22, ninth session).
          const waitMs = Math.min(this.replica.applyWaitMs, OWN_APPLY_WAIT_MS_MAX)
          if (options.answerBeforeLocalApply === true && namesCurrent(response, this.replica.state.lastApplied)) this.answerAhead(response.index, waitMs)
          else await this.replica.afterApplied(response.index, waitMs).catch(() => undefined)
          return { result: response.result, index: response.index }
        }
      } catch (error) {
        // no_leader means the write was not applied: the leader it went to died, stepped down or lost the entry to a
        // new leader. Until the leader wait is up it is tried again, as a write that found no leader at first waits
        // for one. Any other failure is the caller's to see.
        if (!(error instanceof WardenError) || error.code !== 'no_leader' || this.replica.isStopped || environment.now() >= deadline) throw error
        await sleep(environment, Math.min(RETRY_PAUSE_MS, Math.max(0, deadline - environment.now())))
        continue
      }
      await this.replica.waitForLeader(deadline)
    }
  }

  /**
   * Forwards a command to the leader with every other command this node's callers send during the same turn of the
   * event loop: one request and one answer for the batch instead of one each. The leader proposes them together, so
   * they commit in the same Raft batch, and answers once every one of them has an outcome.
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
      this.replica.environment.defer(() => this.sendForwardBatch(opened))
    }
    batch.bytes += data.byteLength
    return new Promise<ReplicaResponse>((resolve, reject) => batch.items.push({ data, resolve, reject }))
  }

  private sendForwardBatch(batch: ForwardBatch): void {
    if (this.forwardBatch === batch) this.forwardBatch = undefined
    if (batch.items.length === 0) return
    const items = batch.items.splice(0)
    if (this.replica.isStopped) {
      const error = new WardenError('no_leader', 'this node is shutting down; the write was not applied, retry on another node')
      for (const item of items) item.reject(error)
      return
    }
    // Nothing has left yet, so the batch may follow a leader change that happened since it opened.
    if (this.replica.isLeader()) {
      for (const item of items) this.replica.proposeLocally(item.data, EARLY).then(item.resolve, item.reject)
      return
    }
    const leader = this.replica.leader ?? batch.leader
    this.forwarded.requests += 1
    this.forwarded.writes += items.length
    this.replica.links.request(leader, { kind: 'propose-batch', commands: items.map((item) => item.data) }, this.replica.applyWaitMs).then(
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
      const response = (await this.replica.links.request(leader, { kind: 'propose', data }, this.replica.applyWaitMs)) as Partial<ReplicaResponse>
      if (typeof response?.index !== 'number' || typeof response.result !== 'object') throw new WardenError('outcome_unknown', `the leader ${leader} answered in a form this node does not know; the write may or may not have been applied`)
      return response as ReplicaResponse
    } catch (error) {
      throw forwardFailure(leader, error)
    }
  }

  /** A follower's batch, on the leader: each command succeeds or fails on its own. */
  private async serveBatch(from: string, commandsField: unknown): Promise<ProposeResponse> {
    if (!Array.isArray(commandsField)) throw new WardenError('invalid_input', 'unknown replica request')
    // Checked whole before anything is proposed: a refusal of the request must mean that none of it was applied.
    const commands = commandsField.map(commandBytes)
    this.mustLead()
    // A malformed command is refused on its own: the others of the batch are proposed.
    const settled = await Promise.allSettled(
      commands.map((data) => {
        const refusal = this.refusal(from, data)
        return refusal === undefined ? this.replica.proposeLocally(data, EARLY) : Promise.reject(refusal)
      }),
    )
    // Read once the whole batch has settled: the same for every outcome of it.
    const namesIndex = this.namesIndex()
    return {
      outcomes: settled.map((outcome) => {
        if (outcome.status === 'fulfilled') return { ...outcome.value, namesIndex }
        const error = outcome.reason instanceof WardenError ? outcome.reason : new WardenError('outcome_unknown', 'the write failed on the leader in an unexpected way; it may or may not have been applied')
        return { error: error.toWire() }
      }),
    }
  }

  /** The index of the last change to the tables a forwarded write's answer names (forward.ts ReplicaResponse). */
  private namesIndex(): number {
    const { state } = this.replica
    let index = 0
    for (const table of LINKED_TABLES) index = Math.max(index, state.tableIndex(table))
    return index
  }

  /**
   * Why the leader refuses a command a peer forwarded, or undefined when it may be proposed (issue 18: applying an
   * entry must never throw for bytes a peer could send, and every replica applies what the leader proposes). The peer
   * is told invalid_input naming the field; its caller sees a write that was not applied (forward.ts).
   */
  private refusal(from: string, data: Uint8Array): WardenError | undefined {
    const checked = validateCommand(data)
    if (checked.ok) return undefined
    this.refusals.warn(this.replica.log, `${from}\u0000${checked.problem}`, { peer: from, field: checked.field, problem: checked.message }, 'refused a command forwarded by a peer')
    const what =
      checked.problem === 'unknown'
        ? `the forwarded command is of a version or type this leader does not know (${checked.message}): upgrade it`
        : `the forwarded command is malformed: ${checked.message}`
    return new WardenError('invalid_input', `${what}; it was not applied`, checked.field)
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Reads.

  async readBarrier(mode: 'leader' | 'stale' | 'consistent', onFixed?: () => void): Promise<void> {
    // The other modes wait for at least the leader's commit index, which covers every write it answered.
    if (mode === 'stale') return this.ownWritesApplied()
    this.replica.checkRunning()
    const { environment } = this.replica
    const deadline = environment.now() + this.replica.leaderWaitMs
    // A write's barrier on the leader is fixed at the end of the turn, as a follower's ReadIndex leaves then: by then
    // a body that came with its headers has been parsed, and the barrier covers it too (app.ts catchUp), so the write
    // needs no second barrier and no second resolution of its caller once the body is in (request.ts).
    if (onFixed !== undefined && mode === 'leader' && this.replica.isLeader()) await this.endOfTurn()
    for (;;) {
      if (mode === 'leader') {
        const index = this.replica.leaseRead()
        if (index !== null) {
          onFixed?.()
          return this.replica.afterApplied(index)
        }
      }
      if (this.replica.leader !== null) {
        if ((await this.readIndex(mode === 'leader', onFixed)) === 'confirmed') return
        // The core knew no leader when the batch asked (this node's view of the leader lags the core's by a Ready):
        // wait for one, as a read that found none at first does, and ask again.
        if (environment.now() >= deadline) throw new WardenError('no_leader', 'no leader could confirm the read in time; retry')
        await (this.replica.leader === null ? this.replica.waitForLeader(deadline) : sleep(environment, 10))
        continue
      }
      await this.replica.waitForLeader(deadline)
    }
  }

  /** Resolves at the end of the current turn of the event loop; one wait shared by every caller of the turn. */
  private endOfTurn(): Promise<void> {
    let turn = this.turnEnd
    if (turn === undefined) {
      turn = this.turnEnd = new Promise<void>((resolve) =>
        this.replica.environment.defer(() => {
          this.turnEnd = undefined
          resolve()
        }),
      )
    }
    return turn
  }

  /** A forwarded write at `index` was answered before this node applied it: what it serves next waits for it. */
  private answerAhead(index: number, waitMs: number): void {
    if (this.replica.state.lastApplied >= index) return
    this.answeredAhead.index = Math.max(this.answeredAhead.index, index)
    this.answeredAhead.untilMs = Math.max(this.answeredAhead.untilMs, this.replica.environment.now() + waitMs)
  }

  /**
   * Resolves once this node has applied every write it answered before applying it, or once the answer's wait is
   * up (then, as a write that waited that long, it goes on with what it has). Usually at once: a follower applies a
   * write a fraction of a millisecond after the leader's answer reaches it.
   */
  private ownWritesApplied(): Promise<void> {
    // Results this node gave out before their apply was written (RaftReplica.releasedThrough): the batch in flight,
    // usually under a millisecond away. Every request waits for it, status and agent endpoints too; a write that
    // takes longer than applyWaitMs fails the requests waiting with no_leader rather than answer without it (a
    // failed write stops the replica).
    const released = this.replica.releasedThrough
    if (this.replica.state.lastApplied < released) {
      let landing = this.landing
      if (landing === undefined || landing.index < released) {
        const wait = { index: released, done: this.replica.afterApplied(released) }
        // Forgotten once settled, so that a wait that timed out is not handed to the requests that come after it.
        const forget = (): void => {
          if (this.landing === wait) this.landing = undefined
        }
        wait.done.then(forget, forget)
        this.landing = landing = wait
      }
      return landing.done.then(() => this.aheadApplied())
    }
    return this.aheadApplied()
  }

  /** The follower's part of ownWritesApplied: the writes it answered ahead of its own apply (answerAhead). */
  private aheadApplied(): Promise<void> {
    const ahead = this.answeredAhead
    if (this.replica.state.lastApplied >= ahead.index) return Promise.resolve()
    const remainingMs = ahead.untilMs - this.replica.environment.now()
    if (remainingMs <= 0) return Promise.resolve()
    // Shared while it waits for as much, as long: a wait for less, or one that timed out before a later answer
    // moved the deadline, is not.
    const shared = ahead.waiting
    if (shared !== undefined && shared.index >= ahead.index && shared.untilMs >= ahead.untilMs) return shared.done
    const waiting = { index: ahead.index, untilMs: ahead.untilMs, done: Promise.resolve() }
    waiting.done = this.replica.afterApplied(ahead.index, remainingMs).catch((error: unknown) => {
      // Out of time (the waiters' no_leader): go on, as above. Too many waiting (rate_limited), or the node stopping:
      // the request fails rather than answer without its caller's write, and the next request asks again.
      if (error instanceof WardenError && error.code === 'no_leader' && !this.replica.isStopped) return
      if (ahead.waiting === waiting) ahead.waiting = undefined
      throw error
    })
    ahead.waiting = waiting
    return waiting.done
  }

  /**
   * One read index for every read that asks during this turn of the event loop, requested at its end: each read of
   * the batch arrived before the request left, so the leader's commit index when it answers is at least what any of
   * them must see (Thesis §6.4). Requesting it at the first read and letting later ones join would not be safe: a
   * write acknowledged after the request reached the leader but before a later read arrived could be missing from
   * that read. Batching spares the leader a message and a confirmation per read.
   */
  private readIndex(lease: boolean, onFixed?: () => void): Promise<'confirmed' | 'no_leader'> {
    // Default reads (and the barrier of every write) accept the leader's lease; ?consistent reads never do: two
    // batches, so a default read never waits on a heartbeat round for a ?consistent one, nor the reverse.
    const kind = lease ? 'lease' : 'consistent'
    let batch = this.readBatches[kind]
    if (batch === undefined) {
      const fixed: Array<() => void> = []
      const answer = new Promise<'confirmed' | 'no_leader'>((resolve, reject) =>
        this.replica.environment.defer(() => {
          this.readBatches[kind] = undefined
          // A callback that threw must not keep the batch from asking: every read in it would wait for good.
          for (const callback of fixed) {
            try {
              callback()
            } catch (error) {
              this.replica.log.error({ err: error }, 'a read barrier callback failed')
            }
          }
          this.replica.readIndex({ lease }).then(resolve, reject)
        }),
      )
      batch = this.readBatches[kind] = { answer, fixed }
    }
    if (onFixed !== undefined) batch.fixed.push(onFixed)
    return batch.answer
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Membership.

  async join(request: JoinRequest): Promise<{ members: Record<string, string>; voteFromIndex: number }> {
    if (this.clusterKey === undefined) {
      throw new WardenError('invalid_input', 'this server runs without a cluster key, so no server can prove it may join: start every member with a cluster key (--cluster-key) to form a cluster')
    }
    if (!verifyJoinRequest(this.clusterKey, request, this.replica.environment.wallNow())) {
      throw new WardenError('permission_denied', 'the join request does not prove the cluster key (or is older than a minute)')
    }
    return this.routeJoin(request.Node, request.Address, request.Incarnation, false, { nonce: request.Nonce, time: request.Time })
  }

  /**
   * Joins on the leader, or forwards the join there (once: a forwarded join is not forwarded again). The leader
   * refuses a proof (its stamp) it accepted before; followers only verify, so the stamp travels with the join.
   */
  private async routeJoin(node: string, address: string, incarnation: string | undefined, forwarded: boolean, stamp: JoinStamp | undefined): Promise<JoinAnswer> {
    if (!NODE_NAME_PATTERN.test(node)) throw new WardenError('invalid_input', 'Node: is not a valid node name', 'Node')
    return this.onLeader(
      () => {
        if (stamp !== undefined) this.joinProofs.admit(stamp, this.replica.environment.wallNow())
        return this.replica.membershipChanges.joinAsLeader(node, address, incarnation)
      },
      async (leader) => {
        if (forwarded) throw new WardenError('no_leader', 'this node is not the leader; retry')
        const request = { kind: 'join', node, address, forwarded: true, ...(incarnation === undefined ? {} : { incarnation }), ...(stamp === undefined ? {} : stamp) }
        const answer = (await this.requestLeader(leader, request)) as Partial<JoinAnswer>
        return { members: answer.members ?? {}, voteFromIndex: typeof answer.voteFromIndex === 'number' ? answer.voteFromIndex : 0 }
      },
    )
  }

  async removeServer(which: { id?: string; address?: string }): Promise<void> {
    const servers = this.membership().servers
    const id = which.id ?? servers.find((server) => server.address === which.address)?.id
    const field = which.id !== undefined ? 'id' : 'address'
    if (id === undefined || !servers.some((server) => server.id === id)) {
      throw new WardenError('invalid_input', `${field}: ${which.id ?? which.address} is not a server of this cluster`, field)
    }
    const voters = servers.filter((server) => server.voter)
    if (voters.length === 1 && voters[0]!.id === id) {
      throw new WardenError('invalid_input', `${field}: ${id} is the only voter of this cluster and cannot be removed`, field)
    }
    await this.onLeader(
      () => this.replica.membershipChanges.removeAsLeader(id),
      async (leader) => {
        await this.requestLeader(leader, { kind: 'remove', node: id })
      },
    )
  }

  async transferLeadership(id?: string): Promise<string> {
    if (id !== undefined) {
      // Checked here too, against this node's view, so that a bad id is refused without a leader or a round trip; the
      // leader checks again against the configuration it holds.
      const server = this.membership().servers.find((candidate) => candidate.id === id)
      if (server === undefined) throw new WardenError('invalid_input', `id: ${id} is not a server of this cluster`, 'id')
      if (!server.voter) throw new WardenError('invalid_input', `id: ${id} is a non-voter; only a voter can become the leader`, 'id')
    }
    const waitMs = this.replica.leaderWaitMs
    const leader = await this.onLeader(
      () => this.replica.transferLeadership(id, waitMs),
      async (current) => {
        // The leader answers once the transfer is done or its own wait ran out: give the answer time to come back.
        const answer = (await this.requestLeader(current, { kind: 'transfer-leader', ...(id === undefined ? {} : { id }) }, waitMs + TRANSFER_ANSWER_SLACK_MS)) as { leader?: unknown } | undefined
        if (typeof answer?.leader !== 'string') throw new WardenError('outcome_unknown', `the leader ${current} answered the transfer in a form this node does not know; check /v1/status/leader`)
        return answer.leader
      },
    )
    // A follower hears of the new leader with its first heartbeat: wait for it (bounded), so that what this node
    // answers next (/v1/status/leader, a write it forwards) already knows. The transfer is done either way.
    if (!this.replica.isLeader()) await this.replica.leaderKnownAs(leader, waitMs)
    return leader
  }

  /** Runs `local` on the leader, or `forward` to the leader from a follower, waiting a while for a leader to exist. */
  private async onLeader<T>(local: () => Promise<T>, forward: (leader: string) => Promise<T>): Promise<T> {
    this.replica.checkRunning()
    const deadline = this.replica.environment.now() + this.replica.leaderWaitMs
    for (;;) {
      if (this.replica.isLeader()) return local()
      const leader = this.replica.leader
      if (leader !== null) return forward(leader)
      await this.replica.waitForLeader(deadline)
    }
  }

  private async requestLeader(leader: string, request: Record<string, unknown>, timeoutMs = this.replica.applyWaitMs): Promise<unknown> {
    try {
      return await this.replica.links.request(leader, request, timeoutMs)
    } catch (error) {
      if (error instanceof TransportError) throw new WardenError(error.delivered === 'no' ? 'no_leader' : 'outcome_unknown', `the leader ${leader} did not answer: ${error.message}`)
      throw error
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Status.

  leaderAddress(): string {
    return this.replica.leaderAddress()
  }

  peerAddresses(): string[] {
    return this.replica.membershipChanges.peerAddresses()
  }

  isLeader(): boolean {
    return this.replica.isLeader()
  }

  lastContactMs(): number {
    return this.replica.lastContactMs()
  }

  membership(): { index: number; servers: Array<{ id: string; address: string; voter: boolean }> } {
    return this.replica.membershipChanges.membership()
  }

  servers(): ServerView[] {
    const leader = this.replica.leader
    return this.membership().servers.map((server) => ({ ...server, leader: server.id === leader, alive: this.replica.memberAlive(server.id) }))
  }

  clusterStatus(query: ClusterQuery): Promise<ClusterAnswer> {
    return this.statusService.status(query)
  }

  addStatusDetail(name: string, provider: () => StatusDetail): () => void {
    return this.statusService.addDetail(name, provider)
  }

  raftState(): RaftState {
    const status = this.replica.status()
    return {
      node: this.replica.nodeName,
      role: status.role,
      term: status.term,
      leader: status.leader,
      commitIndex: status.commitIndex,
      appliedIndex: this.replica.state.lastApplied,
      lastIndex: status.lastIndex,
      lastContactMs: this.replica.lastContactMs(),
      forwardedWrites: this.forwarded.writes,
      forwardedRequests: this.forwarded.requests,
    }
  }
}

