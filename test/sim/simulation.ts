/**
 * A deterministic simulation of a Raft cluster: N RaftCores in one process over a simulated network, disk and clock,
 * every choice drawn from one seeded PRNG (STYLE.md, "Simulation"; tigerbeetle/tigerbeetle's VOPR).
 *
 * Each node runs the loop a real driver runs: ready() -> one write (with a simulated latency, slow at times) ->
 * send -> apply -> advance. Faults: message loss, duplication, delay and reordering; symmetric and asymmetric
 * partitions; crashes that keep only what was synced (a write under way, or one made without sync, is lost) followed
 * by restarts from the durable state; slow disks; failed snapshot transfers. Clients propose, read (ReadIndex and the
 * lease), change membership, transfer leadership and nudge followers to campaign.
 *
 * After the chaos phase everything heals: then a command proposed after healing must commit within a bound, and
 * every member must apply it within another. The StateChecker runs after every event. The same seed always gives the
 * same run, event for event (the trace, when enabled, byte for byte).
 */
import { SeededRng } from '../../src/lib/rng.js'
import { isMember } from '../../src/raft/configuration.js'
import type { InstallSnapshot, Message } from '../../src/raft/messages.js'
import { RaftCore } from '../../src/raft/raft-core.js'
import type { Ready } from '../../src/raft/ready.js'
import { MemoryStorage } from '../../src/raft/storage/memory-storage.js'
import type { Entry, NodeId, Role, SnapshotMetadata } from '../../src/raft/types.js'
import { chainHash, PrefixChain, SimulationViolation, StateChecker } from './checker.js'
import { EventQueue } from './event-queue.js'
import { drawOptions, type NetworkOptions, type SimulationOptions, TICK_UNITS } from './options.js'

const MAX_STEPS = 3_000_000
const textEncoder = new TextEncoder()

export function formatSeed(seed: number): string {
  return `0x${seed.toString(16).padStart(8, '0')}`
}

export function parseSeed(text: string): number {
  const seed = Number(text)
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new Error(`a seed is a 32-bit unsigned integer, got ${text}`)
  return seed
}

export function replayCommand(seed: number): string {
  return `npx tsx scripts/sim.ts --seed ${formatSeed(seed)}`
}

/** A broken property or a crashed core, with what it takes to replay it. */
export class SimulationFailure extends Error {
  override readonly name = 'SimulationFailure'
  constructor(
    readonly seed: number,
    readonly steps: number,
    readonly timeUnits: number,
    cause: unknown,
    /** The events up to the failure, when the run was traced. */
    readonly trace: readonly string[] | null = null,
  ) {
    const reason = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause)
    super(`seed=${formatSeed(seed)} steps=${steps} time=${timeUnits}: ${reason}\n  replay: ${replayCommand(seed)}`, { cause })
  }
}

export interface SimulationResult {
  readonly seed: number
  readonly steps: number
  readonly timeUnits: number
  readonly commitIndex: number
  readonly leaderTerms: number
  readonly trace: readonly string[] | null
}

interface SnapshotData {
  readonly meta: SnapshotMetadata
  readonly stateHash: number
}

/** The state machine: a hash chained over every applied entry. Durable: it survives crashes (applied atomically). */
interface AppState {
  readonly appliedIndex: number
  readonly stateHash: number
}

type SimEvent =
  | { readonly kind: 'tick'; readonly node: number; readonly epoch: number }
  | { readonly kind: 'deliver'; readonly message: Message }
  | { readonly kind: 'diskDone'; readonly node: number; readonly epoch: number }
  | { readonly kind: 'snapshotArrive'; readonly from: number; readonly fromEpoch: number; readonly message: InstallSnapshot; readonly data: SnapshotData }
  | { readonly kind: 'snapshotFailed'; readonly from: number; readonly fromEpoch: number; readonly to: NodeId }
  | { readonly kind: 'restart'; readonly node: number }
  | { readonly kind: 'chaos' }
  | { readonly kind: 'endPartition'; readonly partition: number }
  | { readonly kind: 'client' }
  | { readonly kind: 'heal' }

class SimNode {
  up = false
  /** Bumped at every start, so events scheduled for an earlier incarnation are ignored. */
  epoch = 0
  core: RaftCore | null = null
  /** What the process sees: the durable state plus writes made without sync. */
  storage = new MemoryStorage()
  /** What survives a crash. */
  durable = new MemoryStorage()
  app: AppState = { appliedIndex: 0, stateHash: 0 }
  /** The state machine snapshot matching durable.snapshot(). */
  snapshotData: SnapshotData | null = null
  /** Snapshots received from a leader, built beside the state machine until a Ready installs one. */
  staged = new Map<string, SnapshotData>()
  /** The Ready whose write is under way. */
  writing: Ready | null = null
  slowDiskUntilUnits = 0
  chain = new PrefixChain()
  /** The commitIndex last reported to the checker. */
  checkedCommitIndex = 0
  role: Role = 'follower'
  completenessCheckedTerm = -1

  constructor(
    readonly id: NodeId,
    readonly index: number,
    readonly founder: boolean,
  ) {}
}

type Phase = 'chaos' | 'committing' | 'converging' | 'done'

export interface SimulationSettings {
  readonly trace?: boolean
  /** Overrides of the drawn options, for focused tests. */
  readonly options?: Partial<SimulationOptions>
}

export class Simulation {
  readonly options: SimulationOptions
  private readonly rng: SeededRng
  private readonly queue = new EventQueue<SimEvent>()
  private readonly nodes: SimNode[]
  private readonly nodeIndexById = new Map<NodeId, number>()
  private readonly checker = new StateChecker()
  private readonly traceLines: string[] | null
  private network: NetworkOptions
  private nowUnits = 0
  private steps = 0
  private phase: Phase = 'chaos'
  private deadlineUnits = Number.POSITIVE_INFINITY
  private convergenceIndex = 0
  /** Directed links currently cut, as from * 16 + to. */
  private blockedLinks = new Set<number>()
  private partitionNumber = 0
  private commandSequence = 0
  private readSequence = 0
  private readonly postHealCommands = new WeakSet<Uint8Array>()
  /** Reads in flight: the highest committed index when each started, which its answer must reach. */
  private readonly reads = new Map<string, number>()
  private readonly touched = new Set<SimNode>()
  private leaderTermCount = 0

  constructor(
    readonly seed: number,
    settings: SimulationSettings = {},
  ) {
    this.rng = new SeededRng(seed)
    this.options = { ...drawOptions(this.rng), ...settings.options }
    this.network = this.options.network
    this.traceLines = settings.trace === true ? [] : null
    this.nodes = Array.from({ length: this.options.nodeCount }, (_, i) => new SimNode(`n${i + 1}`, i, i < this.options.founderCount))
    for (const node of this.nodes) this.nodeIndexById.set(node.id, node.index)
  }

  run(): SimulationResult {
    try {
      this.trace(() => `options ${JSON.stringify(this.options)}`)
      for (const node of this.nodes) this.start(node)
      this.schedule(TICK_UNITS, { kind: 'chaos' })
      this.schedule(this.rng.between(1, this.options.clientIntervalUnits), { kind: 'client' })
      this.schedule(this.options.chaosDurationUnits, { kind: 'heal' })
      for (;;) {
        const next = this.queue.pop()
        if (next === undefined) throw new SimulationViolation('the event queue ran dry')
        this.nowUnits = next.time
        this.steps += 1
        if (this.steps > MAX_STEPS) throw new SimulationViolation(`no end after ${MAX_STEPS} steps`)
        this.touched.clear()
        this.handle(next.item)
        this.checkAfterStep()
        if (this.phase === 'done') break
        if (this.nowUnits > this.deadlineUnits) {
          throw new SimulationViolation(
            this.phase === 'committing'
              ? `liveness: no command proposed after healing was committed within ${this.options.livenessBoundUnits} units`
              : `liveness: members did not all apply index ${this.convergenceIndex} within ${this.options.convergenceBoundUnits} units`,
          )
        }
      }
    } catch (error) {
      throw new SimulationFailure(this.seed, this.steps, this.nowUnits, error, this.traceLines)
    }
    return {
      seed: this.seed,
      steps: this.steps,
      timeUnits: this.nowUnits,
      commitIndex: this.checker.commitIndex,
      leaderTerms: this.leaderTermCount,
      trace: this.traceLines,
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Events.

  private handle(event: SimEvent): void {
    switch (event.kind) {
      case 'tick': {
        const node = this.nodes[event.node]!
        if (!node.up || node.epoch !== event.epoch) return
        this.trace(() => `${node.id} tick`)
        node.core!.tick()
        this.process(node)
        this.schedule(this.nowUnits + this.options.tickPeriodUnits[node.index]!, event)
        return
      }
      case 'deliver':
        this.deliver(event.message)
        return
      case 'diskDone': {
        const node = this.nodes[event.node]!
        if (!node.up || node.epoch !== event.epoch) return
        const ready = node.writing!
        node.writing = null
        this.trace(() => `${node.id} disk done`)
        this.persist(node, ready, true)
        this.finish(node, ready)
        this.process(node)
        return
      }
      case 'snapshotArrive': {
        const to = this.node(event.message.to)
        const from = this.nodes[event.from]!
        const arrived = to.up && !this.isBlocked(from.index, to.index)
        this.trace(() => `snapshot ${from.id}->${to.id} index=${event.data.meta.index} ${arrived ? 'arrived' : 'lost'}`)
        if (arrived) {
          to.staged.set(snapshotKey(event.data.meta), event.data)
          to.core!.step(event.message)
          this.process(to)
        }
        this.reportSnapshot(event.from, event.fromEpoch, to.id, arrived)
        return
      }
      case 'snapshotFailed':
        this.trace(() => `snapshot ${this.nodes[event.from]!.id}->${event.to} failed`)
        this.reportSnapshot(event.from, event.fromEpoch, event.to, false)
        return
      case 'restart': {
        const node = this.nodes[event.node]!
        if (!node.up) this.start(node)
        return
      }
      case 'chaos':
        if (this.phase !== 'chaos') return
        this.chaos()
        this.schedule(this.nowUnits + this.rng.between(TICK_UNITS / 2, TICK_UNITS * 2), event)
        return
      case 'endPartition':
        if (event.partition === this.partitionNumber && this.blockedLinks.size > 0) {
          this.trace(() => 'partition healed')
          this.blockedLinks = new Set()
        }
        return
      case 'client':
        this.client()
        this.schedule(this.nowUnits + this.rng.between(1, 2 * this.options.clientIntervalUnits), event)
        return
      case 'heal':
        this.heal()
        return
    }
  }

  private deliver(message: Message): void {
    const to = this.node(message.to)
    const from = this.node(message.from)
    if (!to.up || this.isBlocked(from.index, to.index)) {
      this.trace(() => `drop ${describe(message)}`)
      return
    }
    this.trace(() => `deliver ${describe(message)}`)
    to.core!.step(message)
    this.process(to)
  }

  private reportSnapshot(fromIndex: number, fromEpoch: number, to: NodeId, ok: boolean): void {
    const from = this.nodes[fromIndex]!
    if (!from.up || from.epoch !== fromEpoch) return
    from.core!.reportSnapshot(to, ok)
    this.process(from)
  }

  // -------------------------------------------------------------------------------------------------------------
  // The driver loop of one node.

  private start(node: SimNode): void {
    node.epoch += 1
    node.up = true
    node.writing = null
    node.staged = new Map()
    node.storage = node.durable.clone()
    node.role = 'follower'
    node.completenessCheckedTerm = -1
    const founders = this.nodes.filter((n) => n.founder).map((n) => n.id)
    node.core = new RaftCore(
      {
        id: node.id,
        voters: node.founder ? founders : [],
        electionTimeoutTicks: this.options.electionTimeoutTicks,
        heartbeatIntervalTicks: this.options.heartbeatIntervalTicks,
        preVote: this.options.preVote,
        checkQuorum: this.options.checkQuorum,
        announceAppliedCommit: this.options.announceAppliedCommit,
        maxInflightMessages: this.options.maxInflightMessages,
        maxEntriesPerMessage: this.options.maxEntriesPerMessage,
        maxBytesPerMessage: this.options.maxBytesPerMessage,
        trailingEntries: this.options.trailingEntries,
        maxUncommittedEntries: this.options.maxUncommittedEntries,
        appliedIndex: node.app.appliedIndex,
      },
      node.storage,
      this.rng.fork(),
    )
    node.checkedCommitIndex = node.core.status().commitIndex
    this.trace(() => `${node.id} start epoch=${node.epoch} applied=${node.app.appliedIndex} last=${node.storage.lastIndex()}`)
    const tick: SimEvent = { kind: 'tick', node: node.index, epoch: node.epoch }
    this.schedule(this.nowUnits + this.rng.between(1, this.options.tickPeriodUnits[node.index]!), tick)
  }

  private crash(node: SimNode): void {
    this.trace(() => `${node.id} crash${node.writing !== null ? ' (write under way is lost)' : ''}`)
    node.up = false
    node.core = null
    node.writing = null
    node.staged = new Map()
    const delay = this.rng.between(1, this.options.restartDelayMaxTicks) * TICK_UNITS
    this.schedule(this.nowUnits + delay, { kind: 'restart', node: node.index })
  }

  /** ready() until there is nothing to do or a synced write has to wait for the disk. */
  private process(node: SimNode): void {
    this.touched.add(node)
    while (node.up && node.writing === null) {
      const ready = node.core!.ready()
      if (ready === null) return
      const needsWrite = ready.entries.length > 0 || ready.snapshot !== undefined || ready.hardState !== undefined
      if (needsWrite && ready.mustSync) {
        node.writing = ready
        this.schedule(this.nowUnits + this.diskLatency(node), { kind: 'diskDone', node: node.index, epoch: node.epoch })
        return
      }
      if (needsWrite) this.persist(node, ready, false)
      this.finish(node, ready)
    }
  }

  private diskLatency(node: SimNode): number {
    if (this.nowUnits < node.slowDiskUntilUnits) return this.rng.between(1, this.options.slowDiskLatencyMaxUnits)
    return this.rng.between(1, this.options.diskLatencyMaxUnits)
  }

  /** Ready step 1. A synced write also makes earlier unsynced writes durable (fsync semantics). */
  private persist(node: SimNode, ready: Ready, synced: boolean): void {
    if (ready.snapshot !== undefined) this.installSnapshot(node, ready.snapshot)
    if (ready.entries.length > 0) {
      node.storage.append(ready.entries)
      node.durable.append(ready.entries)
      const prefixes = node.chain.append(ready.entries)
      this.checker.checkLogMatching(node.id, ready.entries, prefixes)
    }
    if (ready.hardState !== undefined) node.storage.setHardState(ready.hardState)
    if (synced) node.durable.setHardState(node.storage.hardState())
  }

  private installSnapshot(node: SimNode, meta: SnapshotMetadata): void {
    const data = node.staged.get(snapshotKey(meta))
    if (data === undefined) throw new SimulationViolation(`${node.id} was told to install snapshot ${meta.index} (term ${meta.term}) it never received`)
    this.trace(() => `${node.id} install snapshot index=${meta.index} term=${meta.term}`)
    // A newer snapshot may have arrived while this one was being written: keep it for the next Ready.
    for (const [key, staged] of node.staged) if (staged.meta.index <= meta.index) node.staged.delete(key)
    node.app = { appliedIndex: meta.index, stateHash: data.stateHash }
    this.checker.recordApplied(node.id, meta.index, data.stateHash)
    node.snapshotData = data
    node.storage.installSnapshot(meta)
    node.durable.installSnapshot(meta)
    node.chain.reset(meta.index, this.checker.snapshotPrefix(meta.index, meta.term))
  }

  /** Ready steps 2 to 5, then a snapshot of the state machine if it is due. */
  private finish(node: SimNode, ready: Ready): void {
    for (const message of ready.messages) this.send(node, message)
    if (ready.messages.length > 0 && this.phase === 'chaos' && this.rng.chance(this.options.crashAfterSendProbability)) {
      this.crash(node)
      return
    }
    for (const entry of ready.committedEntries) this.apply(node, entry)
    for (const readState of ready.readStates) this.checkRead(node, readState.context, readState.index)
    node.core!.advance(ready)
    this.maybeSnapshot(node)
  }

  private apply(node: SimNode, entry: Entry): void {
    if (entry.index !== node.app.appliedIndex + 1) {
      throw new SimulationViolation(`${node.id} was given entry ${entry.index} to apply after ${node.app.appliedIndex}`)
    }
    const stateHash = chainHash(node.app.stateHash, entry)
    node.app = { appliedIndex: entry.index, stateHash }
    this.checker.recordApplied(node.id, entry.index, stateHash)
    if (this.phase === 'committing' && entry.type === 'command' && this.postHealCommands.has(entry.data)) {
      this.trace(() => `post-heal command committed at ${entry.index}`)
      this.phase = 'converging'
      this.convergenceIndex = entry.index
      this.deadlineUnits = this.nowUnits + this.options.convergenceBoundUnits
    }
  }

  private maybeSnapshot(node: SimNode): void {
    const threshold = this.options.snapshotThresholdEntries
    const snapshotIndex = node.storage.snapshot()?.index ?? 0
    if (threshold === 0 || node.app.appliedIndex - snapshotIndex < threshold) return
    const core = node.core!
    const meta = core.snapshotMetadata(node.app.appliedIndex)
    if (meta === null) return
    node.snapshotData = { meta, stateHash: node.app.stateHash }
    node.storage.saveSnapshot(meta)
    node.durable.saveSnapshot(meta)
    const compactIndex = core.snapshotSaved(meta.index)
    node.storage.compact(compactIndex)
    node.durable.compact(compactIndex)
    this.trace(() => `${node.id} snapshot index=${meta.index} compact=${compactIndex}`)
  }

  // -------------------------------------------------------------------------------------------------------------
  // The network.

  private send(from: SimNode, message: Message): void {
    if (message.type === 'installSnapshot') {
      this.sendSnapshot(from, message)
      return
    }
    const to = this.node(message.to)
    if (this.isBlocked(from.index, to.index) || this.rng.chance(this.network.lossProbability)) {
      this.trace(() => `lose ${describe(message)}`)
      return
    }
    const copies = this.rng.chance(this.network.duplicateProbability) ? 2 : 1
    for (let copy = 0; copy < copies; copy += 1) {
      let delay = this.rng.between(this.network.delayMinUnits, this.network.delayMaxUnits)
      if (this.rng.chance(this.network.spikeProbability)) delay += this.rng.nextInt(this.network.spikeMaxUnits)
      this.schedule(this.nowUnits + delay, { kind: 'deliver', message })
    }
  }

  /** The core asked for a snapshot to be streamed: the driver sends its latest, which may be newer. */
  private sendSnapshot(from: SimNode, message: InstallSnapshot): void {
    const data = from.snapshotData
    if (data === null) throw new SimulationViolation(`${from.id} asked to send a snapshot it does not have`)
    const streamed: InstallSnapshot = { ...message, snapshot: data.meta }
    const duration = this.rng.between(TICK_UNITS, 10 * TICK_UNITS)
    this.trace(() => `stream snapshot ${from.id}->${message.to} index=${data.meta.index}`)
    if (this.rng.chance(this.options.snapshotFailureProbability)) {
      this.schedule(this.nowUnits + duration, { kind: 'snapshotFailed', from: from.index, fromEpoch: from.epoch, to: message.to })
    } else {
      this.schedule(this.nowUnits + duration, { kind: 'snapshotArrive', from: from.index, fromEpoch: from.epoch, message: streamed, data })
    }
  }

  private isBlocked(from: number, to: number): boolean {
    return this.blockedLinks.size > 0 && this.blockedLinks.has(from * 16 + to)
  }

  // -------------------------------------------------------------------------------------------------------------
  // Faults and clients.

  private chaos(): void {
    const options = this.options
    if (this.blockedLinks.size === 0 && this.rng.chance(options.partitionProbability)) this.partition()
    if (this.rng.chance(options.crashProbability)) {
      const running = this.nodes.filter((node) => node.up)
      if (running.length > 0) this.crash(this.pick(running))
    }
    if (this.rng.chance(options.slowDiskProbability)) {
      const node = this.pick(this.nodes)
      node.slowDiskUntilUnits = this.nowUnits + this.rng.between(1, 30) * TICK_UNITS
      this.trace(() => `${node.id} disk slow until ${node.slowDiskUntilUnits}`)
    }
  }

  private partition(): void {
    const count = this.nodes.length
    const blocked = new Set<number>()
    // Half the time the partition is about a node that believes it leads: the cases where leases and CheckQuorum
    // matter most.
    const leaders = this.nodes.filter((node) => node.up && node.role === 'leader')
    const victim = leaders.length > 0 && this.rng.chance(0.5) ? this.pick(leaders).index : this.rng.nextInt(count)
    const mode = this.rng.chance(this.options.asymmetricPartitionShare) ? this.rng.nextInt(3) : 3
    if (mode === 0 || mode === 1) {
      // Asymmetric: the victim is not heard by some (mode 0), or does not hear some (mode 1), in one direction only.
      for (let other = 0; other < count; other += 1) {
        if (other === victim || !this.rng.chance(0.6)) continue
        blocked.add(mode === 0 ? victim * 16 + other : other * 16 + victim)
      }
    } else if (mode === 2) {
      // Asymmetric: random directed links.
      for (let a = 0; a < count; a += 1) {
        for (let b = 0; b < count; b += 1) if (a !== b && this.rng.chance(0.3)) blocked.add(a * 16 + b)
      }
    } else {
      // Symmetric: two sides that cannot talk; the victim's side is random.
      const side = Array.from({ length: count }, (_, i) => (i === victim ? true : this.rng.chance(0.5)))
      for (let a = 0; a < count; a += 1) {
        for (let b = 0; b < count; b += 1) if (side[a] !== side[b]) blocked.add(a * 16 + b)
      }
    }
    if (blocked.size === 0) return
    this.blockedLinks = blocked
    this.partitionNumber += 1
    const links = [...blocked].map((link) => `${this.nodes[link >> 4]!.id}->${this.nodes[link & 15]!.id}`)
    this.trace(() => `partition ${links.join(' ')}`)
    const duration = this.rng.between(1, this.options.partitionDurationMaxTicks) * TICK_UNITS
    this.schedule(this.nowUnits + duration, { kind: 'endPartition', partition: this.partitionNumber })
  }

  private client(): void {
    const running = this.nodes.filter((node) => node.up)
    if (running.length === 0) return
    const leaders = running.filter((node) => node.role === 'leader')
    if (leaders.length > 0) {
      const leader = this.pick(leaders)
      const commands = Array.from({ length: this.rng.between(1, 3) }, () => textEncoder.encode(`c${++this.commandSequence}`))
      const result = leader.core!.propose(commands)
      this.trace(() => `propose at ${leader.id}: ${result.ok ? `index ${result.index}` : result.error}`)
      if (result.ok && this.phase !== 'chaos') for (const command of commands) this.postHealCommands.add(command)
      this.process(leader)
    }
    if (this.rng.chance(this.options.readProbability) && running.some((node) => node.up)) {
      const node = this.pick(running.filter((node) => node.up))
      const context = `r${++this.readSequence}`
      // Every other read accepts the leader's lease (a default read), which a leader holding one answers at once; the
      // others (?consistent) confirm with a heartbeat round. By the sequence, not the RNG, so schedules keep their draws.
      const lease = this.readSequence % 2 === 0
      const result = node.core!.readIndex(context, { lease })
      this.trace(() => `read ${context}${lease ? ' (lease)' : ''} at ${node.id}: ${result.ok ? 'started' : result.error}`)
      if (result.ok) this.reads.set(context, this.checker.commitIndex)
      this.process(node)
    }
    if (this.phase === 'chaos') this.operator(running, leaders)
    if (this.phase === 'converging') this.checkConvergence()
  }

  /** Membership changes, leadership transfers and campaign hints, during the chaos phase only. */
  private operator(runningBefore: SimNode[], leadersBefore: SimNode[]): void {
    const options = this.options
    // A client action may have crashed a node (crashAfterSendProbability); act only on nodes still running.
    const running = runningBefore.filter((node) => node.up)
    let leaders = leadersBefore.filter((node) => node.up)
    if (leaders.length > 0 && this.rng.chance(options.membershipChangeProbability)) {
      const leader = this.pick(leaders)
      const status = leader.core!.status()
      const configuration = status.configuration
      const outsiders = this.nodes.filter((node) => !isMember(configuration, node.id))
      const caughtUpLearners = configuration.learners.filter((id) => (status.progress?.[id]?.matchIndex ?? 0) >= status.commitIndex)
      const removable = configuration.voters.length > 2 ? [...configuration.voters, ...configuration.learners] : [...configuration.learners]
      const choice = this.rng.nextInt(3)
      let change: { type: 'addLearner' | 'addVoter' | 'removeServer'; nodeId: NodeId } | null = null
      if (choice === 0 && outsiders.length > 0) change = { type: 'addLearner', nodeId: this.pick(outsiders).id }
      else if (choice === 1 && caughtUpLearners.length > 0) change = { type: 'addVoter', nodeId: this.pick(caughtUpLearners) }
      else if (choice === 2 && removable.length > 0) change = { type: 'removeServer', nodeId: this.pick(removable) }
      if (change !== null) {
        const result = leader.core!.proposeConfChange(change)
        this.trace(() => `${change.type} ${change.nodeId} at ${leader.id}: ${result.ok ? `index ${result.index}` : result.error}`)
        this.process(leader)
      }
    }
    leaders = leaders.filter((node) => node.up)
    if (leaders.length > 0 && this.rng.chance(options.transferProbability)) {
      const leader = this.pick(leaders)
      const voters = leader.core!.status().configuration.voters.filter((id) => id !== leader.id)
      if (voters.length > 0) {
        const target = this.pick(voters)
        const result = leader.core!.transferLeadership(target)
        this.trace(() => `transfer ${leader.id}->${target}: ${result.ok ? 'started' : result.error}`)
        this.process(leader)
      }
    }
    if (this.rng.chance(options.campaignHintProbability)) {
      const followers = running.filter((node) => node.up && node.role !== 'leader')
      if (followers.length > 0) {
        const node = this.pick(followers)
        this.trace(() => `${node.id} campaign hint`)
        node.core!.campaign()
        this.process(node)
      }
    }
  }

  private heal(): void {
    this.trace(() => 'heal')
    this.phase = 'committing'
    this.deadlineUnits = this.nowUnits + this.options.livenessBoundUnits
    this.blockedLinks = new Set()
    this.network = { ...this.network, lossProbability: 0, spikeProbability: 0 }
    for (const node of this.nodes) {
      node.slowDiskUntilUnits = 0
      if (!node.up) this.start(node)
    }
  }

  /** Done when a leader has committed the post-heal command and every member of its configuration applied it. */
  private checkConvergence(): void {
    for (const node of this.nodes) {
      if (!node.up || node.role !== 'leader') continue
      const status = node.core!.status()
      if (status.commitIndex < this.convergenceIndex) continue
      const configuration = status.configuration
      const lagging = [...configuration.voters, ...configuration.learners].filter(
        (id) => this.node(id).app.appliedIndex < this.convergenceIndex,
      )
      if (lagging.length === 0) {
        this.trace(() => `converged at ${this.convergenceIndex}`)
        this.phase = 'done'
        return
      }
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // Checks.

  private checkAfterStep(): void {
    for (const node of this.touched) {
      if (!node.up) continue
      const core = node.core!
      const status = core.status({ progress: false })
      node.role = status.role
      if (status.role === 'leader') {
        this.checker.checkLeader(status.term, node.id)
        if (node.completenessCheckedTerm !== status.term) {
          node.completenessCheckedTerm = status.term
          this.leaderTermCount += 1
          this.trace(() => `${node.id} leads term ${status.term}`)
          this.checker.checkLeaderCompleteness(node.id, status.term, status.firstIndex, (index) => core.termAt(index))
        }
      }
      if (status.commitIndex > node.checkedCommitIndex) {
        this.checker.recordCommit(node.id, status.term, node.checkedCommitIndex, status.commitIndex, (index) => core.termAt(index))
        node.checkedCommitIndex = status.commitIndex
      }
    }
    // A lease read must see every write committed anywhere: no other leader may have committed past this one.
    for (const node of this.nodes) {
      if (!node.up || node.role !== 'leader') continue
      const index = node.core!.leaseRead()
      if (index !== null && index < this.checker.commitIndex) {
        throw new SimulationViolation(`stale lease: ${node.id} would serve a read at ${index}, but ${this.checker.commitIndex} is committed`)
      }
    }
  }

  private checkRead(node: SimNode, context: string, index: number): void {
    const committedAtStart = this.reads.get(context)
    if (committedAtStart === undefined) return
    this.reads.delete(context)
    this.trace(() => `read ${context} at ${node.id} confirmed at ${index}`)
    if (index < committedAtStart) {
      throw new SimulationViolation(`linearizability: read ${context} at ${node.id} got index ${index}, but ${committedAtStart} was committed when it started`)
    }
  }

  // -------------------------------------------------------------------------------------------------------------

  private schedule(time: number, event: SimEvent): void {
    this.queue.push(time, event)
  }

  private node(id: NodeId): SimNode {
    return this.nodes[this.nodeIndexById.get(id)!]!
  }

  private pick<T>(items: readonly T[]): T {
    return items[this.rng.nextInt(items.length)]!
  }

  /** Records a line when tracing; the line is built only then, since most runs are not traced. */
  private trace(line: () => string): void {
    if (this.traceLines !== null) this.traceLines.push(`${this.nowUnits} ${line()}`)
  }
}

function snapshotKey(meta: SnapshotMetadata): string {
  return `${meta.index}:${meta.term}`
}

function describe(message: Message): string {
  const head = `${message.type} ${message.from}->${message.to} t${message.term}`
  switch (message.type) {
    case 'appendEntries': {
      const entries = message.entries
      const range = entries.length === 0 ? 'none' : `${entries[0]!.index}..${entries[entries.length - 1]!.index}`
      return `${head} prev=${message.prevLogIndex}/${message.prevLogTerm} entries=${range} commit=${message.leaderCommit}`
    }
    case 'appendEntriesResponse':
      return `${head} ${message.success ? 'ok' : 'reject'} index=${message.index} hint=${message.conflictIndex}/${message.conflictTerm}`
    case 'requestVote':
      return `${head}${message.preVote ? ' pre' : ''}${message.transfer ? ' transfer' : ''} last=${message.lastLogIndex}/${message.lastLogTerm}`
    case 'requestVoteResponse':
      return `${head}${message.preVote ? ' pre' : ''} ${message.granted ? 'granted' : 'rejected'}`
    case 'heartbeat':
      return `${head} commit=${message.leaderCommit} seq=${message.seq}`
    case 'heartbeatResponse':
      return `${head} seq=${message.seq} last=${message.lastIndex}`
    case 'installSnapshot':
      return `${head} snapshot=${message.snapshot.index}/${message.snapshot.term}`
    case 'readIndex':
      return `${head} ${message.context}`
    case 'readIndexResponse':
      return `${head} ${message.context} index=${message.index}`
    case 'timeoutNow':
      return head
  }
}

/** Runs one seed; throws SimulationFailure on a violation. */
export function runSeed(seed: number, settings: SimulationSettings = {}): SimulationResult {
  return new Simulation(seed, settings).run()
}

