/**
 * The production driver under simulation: servers running the real RaftReplica, ClusterNode, Raft storage
 * (LevelRaftStorage) and state machine (StateStore) over a simulated disk, network and clock (world.ts), driven by
 * clients whose operations are recorded and checked for linearizability with the checker the chaos runner uses.
 *
 * Faults, drawn per schedule from the seed: message loss, duplication and delay; partitions (symmetric and one-way);
 * kill -9 (unsynced writes kept) and power loss (unsynced writes lost, a torn tail kept); wiped data dirs restarted
 * with the same flags (the server must rejoin safely); process pauses; restarts with edited --peer flags (refused);
 * slow disks; wall-clock jumps; servers joining with --join and servers removed; snapshots small enough to be streamed
 * while leaders change. After the chaos everything heals: a write must then commit within a bound, and every running
 * member must converge on the same state. Checked after every step: at most one leader per term. At the end: the
 * history is linearizable, every member's state is identical, committed log entries agree.
 */
import { pino } from 'pino'
import { WardenError } from '../../../src/lib/errors.js'
import { SeededRng } from '../../../src/lib/rng.js'
import { LevelRaftStorage, type RaftDb } from '../../../src/raft/storage/level-storage.js'
import { RaftReplica } from '../../../src/replica/raft-replica.js'
import { ClusterNode } from '../../../src/rpc/cluster-node.js'
import { COMMAND_VERSION } from '../../../src/state/commands.js'
import { configEntryKey } from '../../../src/state/config-entries.js'
import { openNode } from '../../../src/rpc/open-node.js'
import { STAGED_MARK_KEY, SYNC_KEY } from '../../../src/state/keys.js'
import { decodeCommand, StateStore } from '../../../src/state/store.js'
import { configSpec, getRecord } from '../../../src/state/tables.js'
import { checkOperations, describePartition, registerModel, type Operation, type RegisterInput, type RegisterOutput } from '../../support/linearizability.js'
import { Process, SimDisk, SimLinks, SimNetwork, World } from './world.js'

const KIND = 'service-defaults'

function describeCommand(command: { type?: string; Node?: string; Incarnation?: string } | undefined): string {
  if (command === undefined) return '?'
  return command.type === 'raft.member.set' ? `member(${command.Node}${command.Incarnation === undefined ? '' : `,${command.Incarnation}`})` : (command.type ?? '?')
}

function decodeCommandSafe(data: Uint8Array): { type?: string; Node?: string; Incarnation?: string } | undefined {
  try {
    return decodeCommand(data, 0) as { type?: string; Node?: string; Incarnation?: string }
  } catch {
    return undefined
  }
}
const KEYS = ['k1', 'k2', 'k3', 'k4']
const silent = pino({ level: 'silent' })

export class DriverSimulationFailure extends Error {
  override readonly name = 'DriverSimulationFailure'
  constructor(
    readonly seed: number,
    readonly steps: number,
    readonly timeMs: number,
    cause: unknown,
    readonly trace: readonly string[] = [],
  ) {
    const reason = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause)
    super(`seed=0x${seed.toString(16).padStart(8, '0')} steps=${steps} time=${Math.round(timeMs)}ms: ${reason}\n  replay: npm run sim -- --driver --seed 0x${seed.toString(16).padStart(8, '0')}`, { cause })
  }
}

export interface DriverOptions {
  founders: number
  spares: number
  heartbeatIntervalMs: number
  electionTimeoutMs: number
  snapshotThreshold: number
  chaosMs: number
  clientIntervalMs: number
  faultIntervalMs: number
  lossProbability: number
  duplicateProbability: number
  delayMaxMs: number
  diskLatencyMaxMs: number
  /** Relative weights of the faults. */
  weights: Record<FaultKind, number>
}

type FaultKind = 'kill' | 'power' | 'wipe' | 'pause' | 'partition' | 'oneWay' | 'heal' | 'slowDisk' | 'editedFlags' | 'join' | 'remove' | 'clockJump'

export interface DriverResult {
  seed: number
  steps: number
  timeMs: number
  operations: number
  faults: Record<string, number>
}

function drawOptions(rng: SeededRng): DriverOptions {
  const weight = (probability: number, max: number): number => (rng.chance(probability) ? rng.between(1, max) : 0)
  return {
    founders: rng.chance(0.8) ? 3 : rng.chance(0.5) ? 5 : 1,
    spares: rng.between(0, 2),
    heartbeatIntervalMs: 50,
    electionTimeoutMs: rng.between(300, 600),
    snapshotThreshold: rng.chance(0.6) ? rng.between(8, 60) : 8192,
    chaosMs: rng.between(4_000, 12_000),
    clientIntervalMs: rng.between(5, 60),
    faultIntervalMs: rng.between(150, 800),
    lossProbability: rng.chance(0.5) ? rng.nextInt(100) / 1000 : 0,
    duplicateProbability: rng.chance(0.3) ? rng.nextInt(50) / 1000 : 0,
    delayMaxMs: rng.between(2, 40),
    diskLatencyMaxMs: rng.between(1, 8),
    weights: {
      kill: weight(0.7, 4),
      power: weight(0.6, 4),
      wipe: weight(0.5, 2),
      pause: weight(0.5, 3),
      partition: weight(0.6, 3),
      oneWay: weight(0.4, 2),
      heal: 3,
      slowDisk: weight(0.4, 2),
      editedFlags: weight(0.3, 1),
      join: weight(0.5, 2),
      remove: weight(0.4, 1),
      clockJump: weight(0.3, 1),
    },
  }
}

/** A server of the simulation: its process, disk, and the running incarnation (if any). */
class SimServer {
  readonly process: Process
  readonly disk: SimDisk
  founder: boolean
  /** Started with --join (a spare joining, or a removed server coming back). */
  joining = false
  replica: RaftReplica | undefined
  cluster: ClusterNode | undefined
  storage: LevelRaftStorage | undefined
  state: StateStore | undefined
  links: SimLinks | undefined
  /** Set while this server is out of the cluster on purpose (removed; not to be restarted until it joins). */
  removed = false
  /** Wiped and not yet re-added as a voter: no second server is wiped meanwhile (that would be a lost majority). */
  wiped = false
  starting = false

  constructor(name: string, world: World, founder: boolean, diskLatencyMaxMs: number) {
    this.process = new Process(name)
    this.disk = new SimDisk(world, this.process, { latencyMaxMs: diskLatencyMaxMs, slowFactor: 40 })
    this.founder = founder
  }

  get name(): string {
    return this.process.name
  }

  get running(): boolean {
    return this.process.up && this.replica !== undefined
  }
}

type Input = RegisterInput<string>
type Output = RegisterOutput<string>

export class DriverSimulation {
  readonly options: DriverOptions
  private readonly world: World
  private readonly rng: SeededRng
  private readonly network: SimNetwork
  private readonly servers: SimServer[]
  private readonly history: Array<Operation<Input, Output>> = []
  private readonly pending = new Set<Operation<Input, Output>>()
  private readonly leaders = new Map<number, string>()
  private readonly faultCounts: Record<string, number> = {}
  private failure: unknown
  private valueCounter = 0
  /** Reads in flight: bounded with the writes, or long leaderless stretches pile up overlapping reads the checker cannot order in time. */
  private readsInFlight = 0
  private phase: 'chaos' | 'healing' | 'done' = 'chaos'
  /** What happened, for a failure's report (and --trace). */
  readonly trace: string[] = []
  private readonly roles = new Map<string, string>()

  private note(text: string): void {
    this.trace.push(`${this.world.now.toFixed(0).padStart(6)} ${text}`)
  }

  constructor(
    readonly seed: number,
    overrides: Partial<DriverOptions> = {},
  ) {
    this.rng = new SeededRng(seed)
    this.options = { ...drawOptions(this.rng), ...overrides }
    this.world = new World(this.rng)
    this.network = new SimNetwork(this.world, {
      delayMinMs: 1,
      delayMaxMs: this.options.delayMaxMs,
      lossProbability: this.options.lossProbability,
      duplicateProbability: this.options.duplicateProbability,
    })
    const total = this.options.founders + (this.options.founders === 1 ? 0 : this.options.spares)
    this.servers = Array.from({ length: total }, (_, i) => new SimServer(`n${i + 1}`, this.world, i < this.options.founders, this.options.diskLatencyMaxMs))
  }

  /** The founding members: what every founder's --peer flags name, for good (an operator need not edit them later). */
  private founderNames(): string[] {
    return this.servers.slice(0, this.options.founders).map((server) => server.name)
  }

  async run(): Promise<DriverResult> {
    try {
      // Starting touches the simulated disk, whose writes complete only as the world runs.
      for (const server of this.servers.filter((s) => s.founder)) this.world.schedule(0, () => void this.start(server).catch((error: unknown) => (this.failure ??= error)))
      this.world.schedule(this.rng.between(1, this.options.clientIntervalMs), () => this.clientTick())
      this.world.schedule(this.options.faultIntervalMs, () => this.faultTick())
      this.world.schedule(this.options.chaosMs, () => void this.heal())
      const deadline = this.options.chaosMs + 60_000
      while (this.phase !== 'done') {
        if (this.failure !== undefined) throw this.failure
        if (!(await this.world.step())) throw new Error('the world ran out of tasks')
        this.checkLeaders()
        if (this.world.now > deadline) throw new Error(`liveness: the cluster did not commit and converge within ${deadline - this.options.chaosMs} ms of healing\n${this.describeServers()}`)
      }
      if (this.failure !== undefined) throw this.failure
      await this.finalChecks()
      return { seed: this.seed, steps: this.world.steps, timeMs: this.world.now, operations: this.history.length, faults: this.faultCounts }
    } catch (error) {
      throw new DriverSimulationFailure(this.seed, this.world.steps, this.world.now, error, this.trace)
    } finally {
      await this.stopAll()
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Servers.

  private peerAddresses(server: SimServer, peerNames: readonly string[]): Map<string, string> {
    return new Map([server.name, ...peerNames].map((name) => [name, `sim:${name}`]))
  }

  /** Starts `server` with its flags: --peer for every founder (founders), --join (others). */
  private async start(server: SimServer, peerNamesOverride?: string[]): Promise<boolean> {
    if (server.starting || server.running) return false
    server.starting = true
    try {
      const process = server.process
      process.epoch += 1
      process.up = true
      process.pausedUntil = 0
      process.held = []
      const storage = await LevelRaftStorage.openDb((await server.disk.openDb('raft')) as unknown as RaftDb)
      const peerNames = peerNamesOverride ?? (server.joining ? [] : this.founderNames().filter((name) => name !== server.name))
      const flags = { nodeName: server.name, peerNames, joining: server.joining, incarnation: this.world.nextId() }
      const links = this.network.links(process)
      const epoch = process.epoch
      const opened = await openNode({
        storage,
        files: server.disk.stateFiles(),
        flags,
        links,
        dialAddresses: this.peerAddresses(server, peerNames),
        clusterKey: undefined,
        settings: {
          environment: this.world.environment(process),
          log: silent,
          onFatal: (error) => {
            // A dead incarnation's writes fail on purpose; a live one's failure is a bug.
            if (process.epoch === epoch && process.up) this.failure ??= new Error(`${server.name} failed: ${error instanceof Error ? error.stack : String(error)}`)
          },
          heartbeatIntervalMs: this.options.heartbeatIntervalMs,
          electionTimeoutMs: this.options.electionTimeoutMs,
          snapshotThreshold: this.options.snapshotThreshold,
          // Where runs snapshot often, they snapshot by bytes too and keep few bytes behind (no draw of the seeded
          // generator, so every seed keeps the run it had): compaction beyond the core's trailing entries.
          ...(this.options.snapshotThreshold < 8192 ? { snapshotBytesThreshold: 16 * 1024, trailingBytesMax: 2 * 1024 } : {}),
          leaderWaitMs: 3_000,
          applyWaitMs: 4_000,
        },
      })
      this.note(`${server.name}: start (${opened.ok ? opened.next : 'refused'}) peers ${peerNames.join(',')}${server.joining ? ' --join' : ''}`)
      if (!opened.ok) {
        await storage.close()
        process.up = false
        return false
      }
      const { state, replica, cluster } = opened
      Object.assign(server, { replica, cluster, storage, state, links })
      await replica.start()
      if (opened.next === 'join') void this.joinLoop(server, epoch)
      return true
    } finally {
      server.starting = false
    }
  }

  /** What `--join` does, over the simulated links: ask a member to add this server until one answers. */
  private async joinLoop(server: SimServer, epoch: number): Promise<void> {
    const replica = server.replica!
    for (let attempt = 0; server.process.epoch === epoch && server.process.up; attempt += 1) {
      const members = this.servers.filter((other) => other !== server && !other.removed && (other.founder || other.replica?.status().configuration.voters.includes(other.name)))
      const through = members[this.rng.nextInt(Math.max(1, members.length))]
      if (through !== undefined) {
        try {
          replica.membershipChanges.learnAddresses({ [through.name]: `sim:${through.name}` })
          if (!replica.membershipChanges.awaitingJoin()) return
          const incarnation = replica.membershipChanges.incarnation
          const join = { kind: 'join', node: server.name, address: `sim:${server.name}`, ...(incarnation === undefined ? {} : { incarnation }) }
          const answer = (await server.links!.request(through.name, join, 4_000)) as { members?: Record<string, string>; voteFromIndex?: number }
          if (typeof answer.voteFromIndex !== 'number') throw new Error('no index in the join answer')
          if (answer.members !== undefined) replica.membershipChanges.learnAddresses(answer.members)
          await replica.membershipChanges.recordVoteFrom(answer.voteFromIndex)
          return
        } catch {
          // Retried below.
        }
      }
      await replica.pause(200)
    }
  }

  /** kill -9, or a power loss (`power`): the incarnation is gone; its tasks and links die with it. */
  private crash(server: SimServer, power: boolean): void {
    if (!server.process.up) return
    this.note(`${server.name}: ${power ? 'power loss' : 'killed'}`)
    this.roles.delete(server.name)
    server.process.up = false
    server.process.epoch += 1
    server.disk.crash(power)
    server.disk.slow = false
    // Its log may hold less after a restart (power loss); its checks start again from what it then holds.
    this.checkedCommit.delete(server.name)
    Object.assign(server, { replica: undefined, cluster: undefined, storage: undefined, state: undefined, links: undefined })
  }

  private running(): SimServer[] {
    return this.servers.filter((server) => server.running && server.process.pausedUntil <= this.world.now)
  }

  private describeServers(): string {
    return this.servers
      .map((server) => {
        if (!server.running) return `  ${server.name}: down${server.founder ? ' founder' : ''}${server.joining ? ' joining' : ''}`
        const status = server.replica!.status()
        const record = server.storage!.membershipRecord()
        const entries = server.storage!.entries(server.storage!.firstIndex(), server.storage!.lastIndex() + 1).map((entry) => `${entry.index}/${entry.term}/${entry.type === 'command' ? describeCommand(decodeCommandSafe(entry.data)) : entry.type}`).join(' ')
        return `  ${server.name}: log [${process.env['SIM_LOGS'] === '1' ? entries : ''}] ${status.role} term ${status.term} leader ${status.leader} commit ${status.commitIndex} last ${status.lastIndex} applied ${server.state!.lastApplied} voters ${status.configuration.voters.join(',')} learners ${status.configuration.learners.join(',')} record ${JSON.stringify(record)} mayVote ${status.commitIndex >= (record?.voteFromIndex ?? 0)} first ${status.firstIndex} snapshot ${server.storage!.snapshot()?.index ?? '-'}${status.progress === undefined ? '' : ` progress ${JSON.stringify(status.progress)}`}`
      })
      .join('\n')
  }

  /** index → term of every entry some server has reported committed. */
  private readonly committed = new Map<number, number>()
  private readonly checkedCommit = new Map<string, number>()

  /**
   * State machine safety, incrementally: an entry a server reports committed has the same term on every server that
   * ever reports it committed, and no server's durable log later holds another term there.
   */
  private checkCommitted(server: SimServer): void {
    const replica = server.replica!
    const status = replica.status()
    // The core's view: a follower commits entries it holds before they are persisted (the next Ready writes them).
    const from = Math.max(status.firstIndex, (this.checkedCommit.get(server.name) ?? 0) + 1)
    const to = Math.min(status.commitIndex, status.lastIndex)
    for (let index = from; index <= to; index += 1) {
      const term = replica.termAt(index)
      if (term === undefined) continue
      const known = this.committed.get(index)
      if (known !== undefined && known !== term) throw new Error(`safety: ${server.name} committed term ${term} at index ${index}, where term ${known} was committed before`)
      this.committed.set(index, term)
    }
    if (to >= from) this.checkedCommit.set(server.name, to)
  }

  private checkLeaders(): void {
    for (const server of this.servers) {
      if (!server.running) continue
      this.checkCommitted(server)
      const status = server.replica!.status()
      const role = `${status.role} term ${status.term} commit ${status.commitIndex} applied ${server.state!.lastApplied} voters ${status.configuration.voters.join(',')}${status.configuration.learners.length > 0 ? ` learners ${status.configuration.learners.join(',')}` : ''}`
      if (this.roles.get(server.name) !== role.replace(/ commit \d+ applied \d+/, '')) {
        this.roles.set(server.name, role.replace(/ commit \d+ applied \d+/, ''))
        this.note(`${server.name}: ${role}`)
      }
      if (status.role !== 'leader') continue
      const known = this.leaders.get(status.term)
      if (known !== undefined && known !== server.name) throw new Error(`election safety: ${known} and ${server.name} both lead term ${status.term}`)
      this.leaders.set(status.term, server.name)
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Clients.

  private clientTick(): void {
    if (this.phase !== 'chaos') return
    this.world.schedule(this.rng.between(1, this.options.clientIntervalMs * 2), () => this.clientTick())
    const targets = this.running()
    const server = targets[this.rng.nextInt(Math.max(1, targets.length))]
    // Few writes in flight at once: each one whose outcome stays unknown doubles the checker's search.
    if (server === undefined) return
    const key = KEYS[this.rng.nextInt(KEYS.length)]!
    if (this.pending.size + this.readsInFlight >= 6) return
    if (this.rng.chance(0.5)) {
      if (this.pending.size < 3) void this.write(server, key)
    } else
    void this.read(server, key, this.rng.chance(0.5) ? 'consistent' : 'leader')
  }

  private async write(server: SimServer, key: string): Promise<boolean> {
    const cluster = server.cluster!
    this.valueCounter += 1
    const value = `v${this.valueCounter}`
    const operation: Operation<Input, Output> = { input: { key, kind: 'write', value }, call: this.world.now, output: undefined, return: Infinity }
    this.pending.add(operation)
    try {
      const result = await cluster.propose({ v: COMMAND_VERSION, type: 'config.apply', entry: { Kind: KIND, Name: key, Namespace: 'default', Value: value } })
      if (!result.ok) throw new Error(`a config write was refused: ${JSON.stringify(result)}`)
      operation.output = true
      operation.return = this.world.now
      this.history.push(operation)
      this.note(`${server.name}: write ${key}=${value} ok (called ${operation.call})`)
      return true
    } catch (error) {
      if (error instanceof WardenError && (error.code === 'no_leader' || error.code === 'rate_limited')) return false
      if (error instanceof WardenError && error.code === 'outcome_unknown') {
        this.note(`${server.name}: write ${key}=${value} unknown`)
        this.history.push(operation)
        return false
      }
      this.failure ??= error
      return false
    } finally {
      this.pending.delete(operation)
    }
  }

  private async read(server: SimServer, key: string, mode: 'consistent' | 'leader'): Promise<void> {
    const operation: Operation<Input, Output> = { input: { key, kind: 'read' }, call: this.world.now, output: undefined, return: Infinity }
    const epoch = server.process.epoch
    this.readsInFlight += 1
    try {
      await server.cluster!.readBarrier(mode)
      if (server.process.epoch !== epoch || server.state === undefined) return
      const record = await getRecord(server.state.reader, configSpec, configEntryKey({ Kind: KIND, Namespace: 'default', Name: key }))
      operation.output = (record as { Value?: string } | undefined)?.Value ?? null
      operation.return = this.world.now
      this.history.push(operation)
      this.note(`${server.name}: read ${mode} ${key} -> ${operation.output} (called ${operation.call}, applied ${server.state.lastApplied})`)
    } catch (error) {
      if (error instanceof WardenError) return
      this.failure ??= error
    } finally {
      this.readsInFlight -= 1
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Faults.

  private count(kind: string): void {
    this.faultCounts[kind] = (this.faultCounts[kind] ?? 0) + 1
  }

  private faultTick(): void {
    if (this.phase !== 'chaos') return
    this.world.schedule(this.rng.between(Math.floor(this.options.faultIntervalMs / 2), this.options.faultIntervalMs * 2), () => this.faultTick())
    const kinds = Object.entries(this.options.weights).filter(([, weight]) => weight > 0)
    let draw = this.rng.nextInt(kinds.reduce((sum, [, weight]) => sum + weight, 0))
    let kind = kinds[0]![0] as FaultKind
    for (const [name, weight] of kinds) {
      if (draw < weight) {
        kind = name as FaultKind
        break
      }
      draw -= weight
    }
    void this.inject(kind)
  }

  private async inject(kind: FaultKind): Promise<void> {
    const running = this.running()
    const victim = running[this.rng.nextInt(Math.max(1, running.length))]
    this.note(`fault ${kind} ${victim?.name ?? ''}`)
    const restartLater = (server: SimServer, delayMs: number): void => {
      this.world.schedule(delayMs, () => {
        if (!server.removed && this.phase === 'chaos') void this.start(server).catch((error: unknown) => (this.failure ??= error))
      })
    }
    switch (kind) {
      case 'kill':
      case 'power':
        if (victim === undefined) return
        this.count(kind)
        this.crash(victim, kind === 'power')
        restartLater(victim, this.rng.between(10, 2_000))
        return
      case 'wipe':
        // Wiping a majority at once is data loss by definition; at most one server is wiped at a time.
        if (victim === undefined || this.servers.some((server) => server.wiped)) return
        if (!this.othersHealthy(victim)) return
        this.count(kind)
        this.crash(victim, false)
        victim.disk.wipe()
        victim.wiped = true
        this.world.schedule(this.rng.between(10, 1_500), () => {
          if (victim.removed || this.phase !== 'chaos') return
          void this.start(victim)
            .then(() => this.waitRejoined(victim))
            .catch((error: unknown) => (this.failure ??= error))
        })
        return
      case 'pause':
        if (victim === undefined) return
        this.count(kind)
        this.world.pause(victim.process, this.rng.between(50, 3_000))
        return
      case 'partition': {
        if (victim === undefined) return
        this.count(kind)
        for (const other of this.servers) {
          if (other === victim) continue
          this.network.cut.add(`${victim.name}>${other.name}`)
          this.network.cut.add(`${other.name}>${victim.name}`)
        }
        return
      }
      case 'oneWay': {
        const other = running[this.rng.nextInt(Math.max(1, running.length))]
        if (victim === undefined || other === undefined || other === victim) return
        this.count(kind)
        this.network.cut.add(`${victim.name}>${other.name}`)
        return
      }
      case 'heal':
        this.network.cut.clear()
        return
      case 'slowDisk':
        if (victim === undefined) return
        this.count(kind)
        victim.disk.slow = true
        this.world.schedule(this.rng.between(100, 3_000), () => (victim.disk.slow = false))
        return
      case 'clockJump':
        if (victim === undefined) return
        this.count(kind)
        victim.process.wallOffsetMs += this.rng.chance(0.5) ? 3_600_000 : -3_600_000
        return
      case 'editedFlags': {
        const founder = this.servers.find((server) => server.founder && server.running && !server.wiped && server.storage?.membershipRecord()?.voters.length !== 0)
        if (founder === undefined || this.options.founders < 3) return
        this.count(kind)
        this.crash(founder, false)
        // A restart naming another set of members must be refused, whatever the data dir holds.
        const edited = [...this.founderNames().filter((name) => name !== founder.name).slice(1), 'stranger']
        if (await this.start(founder, edited)) throw new Error(`${founder.name} started with --peer flags naming other members than it founded with`)
        restartLater(founder, this.rng.between(10, 500))
        return
      }
      case 'join': {
        const spare = this.servers.find((server) => !server.founder && !server.process.up && !server.running && !server.starting && !server.removed)
        if (spare === undefined) return
        this.count(kind)
        spare.joining = true
        await this.start(spare)
        return
      }
      case 'remove': {
        const leader = running.find((server) => server.replica!.isLeader())
        const members = leader?.replica!.status().configuration
        if (leader === undefined || members === undefined || members.voters.length < 3) return
        const target = members.voters.filter((name) => name !== leader.name)[this.rng.nextInt(members.voters.length - 1)]
        const server = this.servers.find((candidate) => candidate.name === target)
        if (server === undefined || server.wiped || !this.othersHealthy(server)) return
        this.count(kind)
        server.removed = true
        try {
          await leader.cluster!.removeServer({ id: server.name })
        } catch (error) {
          if (!(error instanceof WardenError)) throw error
          // Not removed (or not known to be): it stays a member with its data.
          server.removed = false
          return
        }
        if (this.phase !== 'chaos') {
          server.removed = false
          return
        }
        // The removed server is stopped and its data deleted; it may come back later as a new server with --join.
        this.crash(server, false)
        server.disk.wipe()
        server.founder = false
        server.removed = false
        server.joining = true
        return
      }
    }
  }

  /**
   * Whether the voters other than `server` can still form a majority on their own: at least two, all running with
   * their data, past their join. Wiping or removing `server` otherwise loses the quorum for good, as it would for an
   * operator (the recover command is then the way out), which is not what a schedule is after.
   */
  /**
   * The voters of the newest configuration any running server holds (a lagging server's own view may miss a removal),
   * if that configuration is committed (its entry
   * at or below the highest commit index known); an empty list while it is not. Membership takes effect when
   * appended, so the newest configuration may be a leader's uncommitted promotion: counting it as in force let a
   * schedule wipe a second server of what was still a two-voter configuration, a lost majority (seed 0x715, once
   * followers' reads were answered under the leader's lease and the timings moved).
   */
  private newestVoters(): readonly string[] {
    let newest = { index: -1, voters: [] as readonly string[] }
    let commitIndex = 0
    for (const other of this.servers) {
      if (!other.running) continue
      const status = other.replica!.status()
      commitIndex = Math.max(commitIndex, status.commitIndex)
      if (status.configurationIndex > newest.index) newest = { index: status.configurationIndex, voters: status.configuration.voters }
    }
    return newest.index <= commitIndex ? newest.voters : []
  }

  private othersHealthy(server: SimServer): boolean {
    const voters = this.newestVoters()
    if (!voters.includes(server.name)) return false
    if (voters.length < 3) return false
    return voters
      .filter((name) => name !== server.name)
      .every((name) => {
        const other = this.servers.find((candidate) => candidate.name === name)
        return other !== undefined && other.running && !other.wiped && !other.replica!.membershipChanges.awaitingJoin()
      })
  }

  /** A wiped server is rebuilt once it has been re-added; until then no other server may be wiped. */
  private async waitRejoined(server: SimServer): Promise<void> {
    const epoch = server.process.epoch
    while (server.process.epoch === epoch && server.process.up && server.replica !== undefined) {
      if (!server.replica.membershipChanges.awaitingJoin() && server.replica.status().commitIndex >= (server.storage?.membershipRecord()?.voteFromIndex ?? 0) && this.newestVoters().includes(server.name)) {
        server.wiped = false
        return
      }
      await server.replica.pause(100)
    }
    if (server.wiped && !server.process.up) server.wiped = false
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Healing and the final checks.

  private async heal(): Promise<void> {
    this.phase = 'healing'
    this.network.cut.clear()
    this.network.faults = { ...this.network.faults, lossProbability: 0, duplicateProbability: 0 }
    for (const server of this.servers) {
      this.world.resume(server.process)
      server.disk.slow = false
      server.process.wallOffsetMs = 0
    }
    const members = (): SimServer[] => this.servers.filter((server) => server.founder || server.joining)
    for (const server of members()) if (!server.process.up) await this.start(server)
    // A write must commit after healing; then every running member must apply it.
    for (;;) {
      const running = this.running()
      const through = running[this.rng.nextInt(Math.max(1, running.length))]
      if (through !== undefined && (await this.write(through, KEYS[0]!))) break
      await new Promise<void>((resolve) => this.world.schedule(50, resolve))
    }
    for (;;) {
      // A fault still under way when the chaos ended may have stopped a member since.
      for (const server of members()) if (!server.process.up && !server.starting) await this.start(server)
      const leader = this.running().find((server) => server.replica!.isLeader())
      const commit = leader?.replica!.status().commitIndex ?? 0
      const voters = new Set(leader?.replica!.status().configuration.voters ?? [])
      const caughtUp = leader !== undefined && this.running().filter((server) => voters.has(server.name)).every((server) => server.state!.lastApplied >= commit && !server.replica!.membershipChanges.awaitingJoin())
      if (caughtUp && [...voters].every((name) => this.servers.find((server) => server.name === name)?.running === true)) break
      await new Promise<void>((resolve) => this.world.schedule(50, resolve))
    }
    this.phase = 'done'
  }

  private async finalChecks(): Promise<void> {
    // Acknowledged writes survive: a final consistent read of every key on every running member joins the history.
    for (const server of this.running()) for (const key of KEYS) await this.readSettled(server, key)
    for (const operation of this.pending) if (operation.input.kind === 'write') this.history.push(operation)
    const result = checkOperations(registerModel<string>(), this.history, { timeMsPerPartition: 20_000 })
    if (result.outcome !== 'ok') {
      const bad = result.partitions.find((partition) => partition.outcome !== 'ok')!
      throw new Error(`linearizability: ${result.outcome}\n${describePartition(registerModel<string>(), bad)}`)
    }
    // State machine safety: every voter that applied the same index holds the same state. Writes still in
    // flight when the chaos ended may commit during the reads above: first let every voter apply what the leader has
    // committed, so that the comparison is not vacuous; then compare voters at the same applied index only (seed
    // 0x17f515f2 compared n2 at 22 with n1 and n3 at 23, which had applied one more write).
    const leader = this.running().find((server) => server.replica!.isLeader())!
    const voters = leader.replica!.status().configuration.voters
    const voting = (): SimServer[] => this.running().filter((candidate) => voters.includes(candidate.name))
    // The world runs here only as it is stepped (readSettled does the same); a bounded number of steps.
    for (let step = 0; step < 100_000 && voting().some((server) => server.state!.lastApplied < leader.replica!.status().commitIndex); step += 1) {
      if (!(await this.world.step())) break
    }
    // The whole state, every key and value but the node's own marks (sync, a staged snapshot's): records, index entries, table indexes, the
    // applied index, member records. Followers apply the writes the leader shipped (shipped-writes.ts) wherever they
    // have them, so a difference in any of these is a difference this check must see.
    const dumps = new Map<string, { applied: number; records: string }>()
    for (const server of voting()) {
      const contents: string[] = []
      for await (const [key, value] of server.state!.db.iterator()) if (key !== SYNC_KEY && key !== STAGED_MARK_KEY) contents.push(`${key}=${Buffer.from(value).toString('hex')}`)
      dumps.set(`${server.name}@${server.state!.lastApplied}`, { applied: server.state!.lastApplied, records: contents.join('\n') })
    }
    const byApplied = new Map<number, Set<string>>()
    for (const { applied, records } of dumps.values()) byApplied.set(applied, (byApplied.get(applied) ?? new Set()).add(records))
    if ([...byApplied.values()].some((distinct) => distinct.size > 1)) {
      const lines = [...dumps.entries()].map(([name, dump]) => [name, new Set(dump.records.split('\n'))] as const)
      const differing = lines.flatMap(([name, set]) => [...set].filter((line) => lines.some(([, other]) => !other.has(line))).map((line) => `${name}: ${line.slice(0, 160)}`))
      throw new Error(`state machine safety: members differ: ${[...dumps.keys()].join(', ')}\n${differing.slice(0, 12).join('\n')}`)
    }
    // Log matching: where two members both hold a committed entry, it is the same entry.
    const byIndex = new Map<number, string>()
    for (const server of this.running()) {
      const storage = server.storage!
      const status = server.replica!.status()
      const lo = storage.firstIndex()
      const hi = Math.min(storage.lastIndex(), status.commitIndex)
      if (hi < lo) continue
      for (const entry of storage.entries(lo, hi + 1)) {
        const fingerprint = `${entry.term}:${entry.type}:${Buffer.from(entry.data).toString('base64')}`
        const known = byIndex.get(entry.index)
        if (known !== undefined && known !== fingerprint) throw new Error(`log matching: committed entries at ${entry.index} differ`)
        byIndex.set(entry.index, fingerprint)
      }
    }
  }

  private async readSettled(server: SimServer, key: string): Promise<void> {
    const read = this.read(server, key, 'consistent')
    let done = false
    void read.finally(() => (done = true))
    while (!done) if (!(await this.world.step())) break
  }

  private async stopAll(): Promise<void> {
    for (const server of this.servers) {
      server.process.up = false
      server.process.epoch += 1
      server.disk.crash(false)
    }
  }
}

export async function runDriverSeed(seed: number, overrides: Partial<DriverOptions> = {}): Promise<DriverResult> {
  return new DriverSimulation(seed, overrides).run()
}
