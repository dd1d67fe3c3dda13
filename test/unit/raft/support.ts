/**
 * Helpers for driving RaftCores by hand in unit tests: a node that does what a driver does with each Ready (persist to
 * a MemoryStorage, collect messages, record applied entries), and a tiny network that delivers messages between nodes
 * until the cluster is quiet, with links that can be cut.
 */
import { SeededRng } from '../../../src/lib/rng.js'
import type { Message } from '../../../src/raft/messages.js'
import { RaftCore, type RaftConfig } from '../../../src/raft/raft-core.js'
import type { Ready, ReadState } from '../../../src/raft/ready.js'
import { MemoryStorage } from '../../../src/raft/storage/memory-storage.js'
import type { Entry, HardState, NodeId } from '../../../src/raft/types.js'

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder()

export type CoreOptions = Partial<Omit<RaftConfig, 'id'>>

export const BASE_CONFIG: Omit<RaftConfig, 'id' | 'voters'> = {
  electionTimeoutTicks: 10,
  heartbeatIntervalTicks: 1,
  preVote: false,
  checkQuorum: false,
  maxInflightMessages: 256,
  maxEntriesPerMessage: 1000,
  maxBytesPerMessage: 1 << 20,
}

export function bytes(text: string): Uint8Array {
  return textEncoder.encode(text)
}

export function text(data: Uint8Array): string {
  return textDecoder.decode(data)
}

/** Entries 1..n with the given terms, as commands named e1, e2, ... */
export function entriesWithTerms(terms: readonly number[], firstIndex = 1): Entry[] {
  return terms.map((term, i) => ({ index: firstIndex + i, term, type: 'command' as const, data: bytes(`e${firstIndex + i}`) }))
}

/** A storage holding a log with these terms, and the given hard state (term defaults to the last entry's). */
export function storageWithLog(terms: readonly number[], hardState: Partial<HardState> = {}): MemoryStorage {
  const storage = new MemoryStorage()
  storage.append(entriesWithTerms(terms))
  storage.setHardState({ term: terms[terms.length - 1] ?? 0, votedFor: null, commitIndex: 0, ...hardState })
  return storage
}

/** A node and its durable storage, driven the way the driver drives it (ready -> persist -> send -> apply -> advance). */
export class TestNode {
  core: RaftCore
  readonly applied: Entry[] = []
  readonly readStates: ReadState[] = []
  /** Every Ready taken, for tests that check what a Ready held. */
  readonly readies: Ready[] = []

  constructor(
    readonly id: NodeId,
    readonly config: RaftConfig,
    readonly storage: MemoryStorage = new MemoryStorage(),
    private readonly seed = 1,
  ) {
    this.core = new RaftCore(config, storage, new SeededRng(seed))
  }

  /** Does the work of every Ready there is; returns the messages to send. */
  drain(): Message[] {
    const messages: Message[] = []
    for (;;) {
      const ready = this.core.ready()
      if (ready === null) return messages
      this.readies.push(ready)
      this.persist(ready)
      messages.push(...ready.messages)
      this.applied.push(...ready.committedEntries)
      this.readStates.push(...ready.readStates)
      this.core.advance(ready)
    }
  }

  persist(ready: Ready): void {
    if (ready.snapshot !== undefined) this.storage.installSnapshot(ready.snapshot)
    this.storage.append(ready.entries)
    if (ready.hardState !== undefined) this.storage.setHardState(ready.hardState)
  }

  /** A crash and restart: a new core over the same durable storage. */
  restart(options: CoreOptions = {}): void {
    this.core = new RaftCore({ ...this.config, ...options, appliedIndex: options.appliedIndex ?? this.applied.at(-1)?.index ?? 0 }, this.storage, new SeededRng(this.seed + 1000))
  }

  tick(count = 1): void {
    for (let i = 0; i < count; i += 1) this.core.tick()
  }

  get status(): ReturnType<RaftCore['status']> {
    return this.core.status()
  }

  appliedCommands(): string[] {
    return this.applied.filter((entry) => entry.type === 'command').map((entry) => text(entry.data))
  }
}

export function newNode(id: NodeId, voters: readonly NodeId[], options: CoreOptions = {}, storage?: MemoryStorage, seed = 1): TestNode {
  return new TestNode(id, { ...BASE_CONFIG, id, voters, ...options }, storage, seed)
}

/** Nodes connected by a network that delivers every message, except over links that were cut. */
export class TestNetwork {
  readonly nodes = new Map<NodeId, TestNode>()
  /** Messages sent and not yet delivered. */
  inFlight: Message[] = []
  /** Every message delivered, in order. */
  readonly delivered: Message[] = []
  private readonly cut = new Set<string>()
  /** Messages matching this are dropped (tests use it to lose particular messages). */
  dropIf: (message: Message) => boolean = () => false

  constructor(nodes: readonly TestNode[]) {
    for (const node of nodes) this.nodes.set(node.id, node)
  }

  static of(ids: readonly NodeId[], options: CoreOptions = {}): TestNetwork {
    return new TestNetwork(ids.map((id, i) => newNode(id, ids, options, undefined, i + 1)))
  }

  node(id: NodeId): TestNode {
    const node = this.nodes.get(id)
    if (node === undefined) throw new Error(`no node ${id}`)
    return node
  }

  /** Collects every node's Ready work into the in-flight messages. */
  collect(): void {
    for (const node of this.nodes.values()) this.inFlight.push(...node.drain())
  }

  /** Delivers messages (and everything they cause) until nothing is in flight. */
  settle(maxRounds = 1000): void {
    for (let round = 0; round < maxRounds; round += 1) {
      this.collect()
      if (this.inFlight.length === 0) return
      const batch = this.inFlight
      this.inFlight = []
      for (const message of batch) this.deliver(message)
    }
    throw new Error('the network did not settle')
  }

  deliver(message: Message): void {
    const to = this.nodes.get(message.to)
    if (to === undefined || this.cut.has(`${message.from}->${message.to}`) || this.dropIf(message)) return
    this.delivered.push(message)
    to.core.step(message)
  }

  /** Cuts every link to and from `id`. */
  isolate(id: NodeId): void {
    for (const other of this.nodes.keys()) {
      if (other === id) continue
      this.cut.add(`${id}->${other}`)
      this.cut.add(`${other}->${id}`)
    }
  }

  cutLink(from: NodeId, to: NodeId): void {
    this.cut.add(`${from}->${to}`)
  }

  heal(): void {
    this.cut.clear()
  }

  tickAll(count = 1): void {
    for (let i = 0; i < count; i += 1) {
      for (const node of this.nodes.values()) node.core.tick()
      this.settle()
    }
  }

  /** Makes `id` campaign and settles: with an intact network it becomes leader. */
  elect(id: NodeId): void {
    this.node(id).core.campaign()
    this.settle()
  }

  leaders(): NodeId[] {
    return [...this.nodes.values()].filter((node) => node.core.status().role === 'leader').map((node) => node.id)
  }

  propose(id: NodeId, ...commands: string[]): void {
    const result = this.node(id).core.propose(commands.map(bytes))
    if (!result.ok) throw new Error(`proposal refused: ${result.error}`)
    this.settle()
  }
}

/**
 * Nodes whose messages wait in one queue until the test delivers, holds or drops them: for schedules written step by
 * step (an answer held back, a node stopped between rounds), where TestNetwork delivers everything at once.
 */
export class QueuedNetwork {
  readonly nodes = new Map<NodeId, TestNode>()
  private queued: Message[] = []

  constructor(nodes: readonly TestNode[]) {
    for (const node of nodes) this.nodes.set(node.id, node)
  }

  static of(ids: readonly NodeId[], options: CoreOptions = {}): QueuedNetwork {
    return new QueuedNetwork(ids.map((id, i) => newNode(id, ids, options, undefined, i + 1)))
  }

  node(id: NodeId): TestNode {
    const node = this.nodes.get(id)
    if (node === undefined) throw new Error(`no node ${id}`)
    return node
  }

  /** Does `id`'s Ready work and queues what it sends; returns those messages. */
  collect(id: NodeId): Message[] {
    const messages = this.node(id).drain()
    this.queued.push(...messages)
    return messages
  }

  /** Takes the queued messages `where` says out of the queue (to hold them back, or to drop them). */
  take(where: (message: Message) => boolean): Message[] {
    const taken = this.queued.filter(where)
    this.queued = this.queued.filter((message) => !where(message))
    return taken
  }

  /** Steps the queued messages `where` says into their receivers; returns how many. */
  deliver(where: (message: Message) => boolean): number {
    const messages = this.take(where)
    for (const message of messages) this.node(message.to).core.step(message)
    return messages.length
  }

  /** Collects and delivers among `group` until none of them has anything left; messages to or from others stay queued. */
  stabilize(group: readonly NodeId[]): void {
    for (let round = 0; round < 200; round += 1) {
      let busy = 0
      for (const id of group) busy += this.collect(id).length
      busy += this.deliver((message) => group.includes(message.to) && group.includes(message.from))
      if (busy === 0) return
    }
    throw new Error(`stabilize ${group.join(',')}: still busy after 200 rounds`)
  }
}

/** Drains one node and returns the messages of the given type. */
export function sent<T extends Message['type']>(messages: readonly Message[], type: T): Extract<Message, { type: T }>[] {
  return messages.filter((message): message is Extract<Message, { type: T }> => message.type === type)
}
