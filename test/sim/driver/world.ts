/**
 * The simulated world the production driver runs in: one clock, one queue of tasks, and per server an Environment
 * (timers, defer, randomness), a disk and peer links, all drawn from one seeded PRNG (tigerbeetle/tigerbeetle's VOPR
 * does the same for its replica: `src/testing/time.zig`, `packet_simulator.zig`, `storage.zig`).
 *
 * Determinism: every callback the driver schedules goes through the queue, ordered by (time, insertion); after each
 * task the world waits one turn of Node's event loop (setImmediate), which runs every promise continuation the task
 * caused (memory-level, the state store and the driver resolve only through microtasks). Nothing else in the process
 * may schedule work meanwhile, so one seed gives one run.
 *
 * A server's tasks belong to its incarnation (`epoch`): a crash drops them; a pause holds them until it resumes.
 */
import { MemoryLevel } from 'memory-level'
import { Packr } from 'msgpackr'
import type { Environment, Timer } from '../../../src/lib/environment.js'
import { errorFromWire, WardenError } from '../../../src/lib/errors.js'
import type { SeededRng } from '../../../src/lib/rng.js'
import type { PeerLinks } from '../../../src/replica/peer-links.js'
import type { StateDirectoryName, StateFiles } from '../../../src/state/files.js'
import type { StateDb } from '../../../src/state/reader.js'
import { TransportError } from '../../../src/transport/index.js'
import { EventQueue } from '../event-queue.js'

interface Task {
  run: () => void
  cancelled: boolean
  owner: Process | undefined
  epoch: number
}

/** A server's process as the world sees it: which incarnation runs, and whether it is paused. */
export class Process {
  epoch = 0
  up = false
  pausedUntil = 0
  /** Tasks held while paused, released in order at resume. */
  held: Task[] = []
  /** Wall-clock offset (a jumped clock); only join proofs read the wall clock. */
  wallOffsetMs = 0
  constructor(readonly name: string) {}
}

export class World {
  readonly queue = new EventQueue<Task>()
  now = 0
  steps = 0
  private idCounter = 0

  constructor(readonly rng: SeededRng) {}

  schedule(delayMs: number, run: () => void, owner?: Process): Task {
    const task: Task = { run, cancelled: false, owner, epoch: owner?.epoch ?? 0 }
    this.queue.push(this.now + Math.max(0, delayMs), task)
    return task
  }

  /** Runs the next task and everything it set off; false when nothing is left. */
  async step(): Promise<boolean> {
    const next = this.queue.pop()
    if (next === undefined) return false
    this.now = Math.max(this.now, next.time)
    const task = next.item
    if (task.cancelled) return true
    const owner = task.owner
    if (owner !== undefined) {
      if (task.epoch !== owner.epoch || !owner.up) return true
      if (owner.pausedUntil > this.now) {
        owner.held.push(task)
        return true
      }
    }
    this.steps += 1
    task.run()
    await new Promise((resolve) => setImmediate(resolve))
    return true
  }

  pause(process: Process, durationMs: number): void {
    process.pausedUntil = this.now + durationMs
    this.schedule(durationMs, () => this.resume(process))
  }

  resume(process: Process): void {
    if (process.pausedUntil > this.now) process.pausedUntil = this.now
    const held = process.held.splice(0)
    for (const task of held) this.queue.push(this.now, task)
  }

  nextId(): string {
    this.idCounter += 1
    return `sim-${this.idCounter.toString(16).padStart(8, '0')}`
  }

  environment(process: Process): Environment {
    const world = this
    return {
      now: () => world.now,
      wallNow: () => 1_700_000_000_000 + world.now + process.wallOffsetMs,
      setTimeout(callback, delayMs): Timer {
        const task = world.schedule(delayMs, callback, process)
        return { cancel: () => (task.cancelled = true) }
      },
      setInterval(callback, periodMs): Timer {
        let current: Task
        const again = (): void => {
          current = world.schedule(periodMs, () => {
            again()
            callback()
          }, process)
        }
        again()
        return { cancel: () => (current.cancelled = true) }
      },
      defer(callback) {
        world.schedule(0, callback, process)
      },
      randomSeed: () => world.rng.nextInt(2 ** 32),
      randomId: () => world.nextId(),
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The disk.

type Op = { type: 'put'; key: string; value: Buffer } | { type: 'del'; key: string }

/** One database's contents: what the process sees, what a power loss keeps, and the writes between the two. */
class Inode {
  current = new Map<string, Buffer>()
  durable = new Map<string, Buffer>()
  /** Unsynced writes, in order; current = durable + journal. */
  journal: Op[][] = []
  readonly marks = new Set<string>()

  record(ops: Op[], sync: boolean): void {
    for (const op of ops) if (op.type === 'put') this.current.set(op.key, op.value)
    else this.current.delete(op.key)
    this.journal.push(ops)
    if (sync) {
      this.durable = new Map(this.current)
      this.journal = []
    }
  }

  /** A power loss: the unsynced writes are lost, but for a prefix of them (LevelDB's log is written in order). */
  powerLoss(keptBatches: number): void {
    const kept = this.journal.slice(0, keptBatches)
    this.current = new Map(this.durable)
    for (const ops of kept) for (const op of ops) if (op.type === 'put') this.current.set(op.key, op.value)
    else this.current.delete(op.key)
    this.durable = new Map(this.current)
    this.journal = []
  }
}

export interface DiskFaults {
  /** Latency of one write, in ms, drawn in [1, latencyMaxMs]; a slow disk multiplies it. */
  latencyMaxMs: number
  slowFactor: number
}

/**
 * A server's disk: named databases (the Raft log, the live state, a staged one) whose writes take simulated time and
 * whose unsynced writes a power loss takes back, and a directory whose renames and removals are durable only after
 * syncDirectory (the POSIX rule).
 */
export class SimDisk {
  private live = new Map<string, Inode>()
  private durable = new Map<string, Inode>()
  /** Every open database of the current incarnation; a crash kills them, so a dead process writes nothing. */
  private open = new Set<{ dead: boolean }>()
  slow = false

  constructor(
    private readonly world: World,
    private readonly process: Process,
    private readonly faults: DiskFaults,
  ) {}

  async openDb(name: string): Promise<StateDb> {
    let inode = this.live.get(name)
    if (inode === undefined) {
      inode = new Inode()
      this.live.set(name, inode)
      // Creating a database is durable at once here: the real one fsyncs its files as it creates them.
      this.durable.set(name, inode)
    }
    const db = new MemoryLevel<string, Buffer>({ keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    const initial: Op[] = [...inode.current].map(([key, value]) => ({ type: 'put', key, value }))
    if (initial.length > 0) await db.batch(initial)
    const handle = { dead: false }
    this.open.add(handle)
    const disk = this
    const theInode = inode
    const batch = db.batch.bind(db) as (ops: Op[], options?: { sync?: boolean }) => Promise<void>
    const write = async (ops: Op[], options: { sync?: boolean } | undefined): Promise<void> => {
      await disk.latency()
      if (handle.dead) throw new Error('simulated disk: the process that opened this database is dead')
      const normalized: Op[] = ops.map((op) => (op.type === 'put' ? { type: 'put', key: String(op.key), value: Buffer.from(op.value) } : { type: 'del', key: String(op.key) }))
      await batch(normalized)
      theInode.record(normalized, options?.sync === true)
    }
    const patched = db as unknown as Record<string, unknown>
    patched['batch'] = (ops?: Op[], options?: { sync?: boolean }) => {
      if (!Array.isArray(ops)) throw new Error('simulated disk: chained batches are not simulated')
      return write(ops, options)
    }
    patched['put'] = (key: string, value: Buffer, options?: { sync?: boolean }) => write([{ type: 'put', key, value }], options)
    patched['del'] = (key: string, options?: { sync?: boolean }) => write([{ type: 'del', key }], options)
    return db as unknown as StateDb
  }

  private latency(): Promise<void> {
    const base = 1 + this.world.rng.nextInt(this.faults.latencyMaxMs)
    const delay = this.slow ? base * this.faults.slowFactor : base
    return new Promise((resolve) => this.world.schedule(delay, () => resolve(), this.process))
  }

  stateFiles(): StateFiles {
    const path = (name: StateDirectoryName): string => `state.${name}`
    return {
      openDb: (name) => this.openDb(path(name)),
      exists: async (name) => this.live.has(path(name)),
      remove: async (name) => {
        this.live.delete(path(name))
      },
      rename: async (from, to) => {
        const inode = this.live.get(path(from))
        if (inode === undefined) throw new Error(`simulated disk: rename of missing ${from}`)
        this.live.set(path(to), inode)
        this.live.delete(path(from))
      },
      mark: async (name, marker) => {
        this.live.get(path(name))?.marks.add(marker)
      },
      hasMark: async (name, marker) => this.live.get(path(name))?.marks.has(marker) === true,
      unmark: async (name, marker) => {
        this.live.get(path(name))?.marks.delete(marker)
      },
      syncDirectory: async () => {
        this.durable = new Map(this.live)
      },
    }
  }

  /**
   * The process dies. `power`: the machine lost power too, so unsynced writes are lost (each database keeps a random
   * prefix of them: a torn tail) and so are renames and removals not yet synced.
   */
  crash(power: boolean): void {
    for (const handle of this.open) handle.dead = true
    this.open.clear()
    if (!power) return
    this.live = new Map(this.durable)
    for (const inode of new Set(this.live.values())) inode.powerLoss(this.world.rng.nextInt(inode.journal.length + 1))
  }

  /** An operator deletes the data dir. */
  wipe(): void {
    this.crash(false)
    this.live = new Map()
    this.durable = new Map()
  }

  /** The databases the data dir holds now ('raft', 'state.live', 'state.incoming', ...), sorted; read-only, for tests. */
  names(): string[] {
    return [...this.live.keys()].sort()
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The network.

export interface NetworkFaults {
  delayMinMs: number
  delayMaxMs: number
  lossProbability: number
  duplicateProbability: number
  /**
   * Messages on a link arrive in the order they were sent, as on the peers' TCP streams; by default each takes its
   * own delay, so they overtake one another (a harsher world for safety).
   */
  ordered?: boolean
}

const packr = new Packr({ useRecords: false })

/** Messages travel msgpack-encoded, as on the real links, so nothing is shared between servers by reference. */
function copy<T>(value: T): T {
  return packr.unpack(packr.pack(value)) as T
}

export class SimNetwork {
  /** Directed links that are cut, as "from>to". */
  readonly cut = new Set<string>()
  private readonly endpoints = new Map<string, SimLinks>()
  /** With ordered links: when the last message sent on each directed link arrives. */
  private readonly lastArrival = new Map<string, number>()

  constructor(
    private readonly world: World,
    public faults: NetworkFaults,
  ) {}

  links(process: Process): SimLinks {
    const links = new SimLinks(this, this.world, process)
    this.endpoints.set(process.name, links)
    return links
  }

  isCut(from: string, to: string): boolean {
    return this.cut.has(`${from}>${to}`)
  }

  /** Carries `deliver` to `to`'s current incarnation after a delay, unless lost; sometimes twice. */
  carry(from: string, to: string, deliver: (target: SimLinks) => void, reliable = false): void {
    if (this.isCut(from, to)) return
    const copies = !reliable && this.world.rng.chance(this.faults.duplicateProbability) ? 2 : 1
    for (let n = 0; n < copies; n += 1) {
      if (!reliable && this.world.rng.chance(this.faults.lossProbability)) continue
      const target = this.endpoints.get(to)
      if (target === undefined || !target.process.up) continue
      let delay = this.faults.delayMinMs + this.world.rng.nextInt(this.faults.delayMaxMs - this.faults.delayMinMs + 1)
      if (this.faults.ordered === true) {
        const link = `${from}>${to}`
        delay = Math.max(delay, (this.lastArrival.get(link) ?? 0) - this.world.now)
        this.lastArrival.set(link, this.world.now + delay)
      }
      this.world.schedule(delay, () => {
        if (!this.isCut(from, to)) deliver(target)
      }, target.process)
    }
  }
}

export class SimLinks implements PeerLinks {
  private messageHandler: (from: string, message: unknown) => void = () => undefined
  private requestHandler: (from: string, message: unknown) => Promise<unknown> = () => Promise.reject(new Error('no handler'))
  private peers = new Map<string, string>()
  private readonly epoch: number

  constructor(
    private readonly network: SimNetwork,
    private readonly world: World,
    readonly process: Process,
  ) {
    this.epoch = process.epoch
  }

  private alive(): boolean {
    return this.process.up && this.process.epoch === this.epoch
  }

  send(to: string, message: unknown): boolean {
    if (!this.alive() || !this.peers.has(to)) return false
    const payload = copy(message)
    this.network.carry(this.process.name, to, (target) => target.messageHandler(this.process.name, payload))
    return true
  }

  request(to: string, message: unknown, timeoutMs: number): Promise<unknown> {
    if (!this.alive()) return Promise.reject(new TransportError('stopped', to, 'no', 'the process is dead'))
    if (!this.peers.has(to)) return Promise.reject(new TransportError('unknown_peer', to, 'no', 'not a peer'))
    if (this.network.isCut(this.process.name, to)) {
      return new Promise((_, reject) => this.world.schedule(1, () => reject(new TransportError('disconnected', to, 'no', 'no link')), this.process))
    }
    const payload = copy(message)
    const from = this.process.name
    return new Promise((resolve, reject) => {
      let settled = false
      const settle = (outcome: () => void): void => {
        if (settled) return
        settled = true
        timer.cancelled = true
        outcome()
      }
      const timer = this.world.schedule(timeoutMs, () => settle(() => reject(new TransportError('timeout', to, 'maybe', 'no answer in time'))), this.process)
      // Requests and their answers ride a reliable stream (TCP): delayed, not lost, unless the link is cut.
      this.network.carry(from, to, (target) => {
        // An answer reaches only the incarnation that asked: one that died meanwhile never hears it.
        target.requestHandler(from, payload).then(
          (answer) => this.network.carry(to, from, () => this.alive() && settle(() => resolve(copy(answer))), true),
          (error: unknown) => {
            const wire = error instanceof WardenError ? error.toWire() : new WardenError('outcome_unknown', String(error)).toWire()
            this.network.carry(to, from, () => this.alive() && settle(() => reject(errorFromWire(copy(wire)))), true)
          },
        )
      }, true)
    })
  }

  onMessage(handler: (from: string, message: unknown) => void): void {
    this.messageHandler = handler
  }

  onRequest(handler: (from: string, message: unknown) => Promise<unknown>): void {
    this.requestHandler = handler
  }

  onPeerState(): void {}

  setPeers(peers: Map<string, string>): void {
    this.peers = new Map(peers)
  }

  advertisedAddress(peer: string): string | undefined {
    return this.peers.get(peer)
  }
}
