/**
 * A linearizability checker in the manner of Porcupine (anishathalye/porcupine `model.go`, `checker.go`): the
 * Wing–Gong search with Lowe's memoization ("Testing for Linearizability", 2017), split by P-compositionality
 * (Horn and Kroening, "Faster linearizability checking via P-compositionality", 2015).
 *
 * A history is a list of operations, each with the time the client called it, the time it returned, its input and
 * its output. It is linearizable when some total order of the operations (1) keeps every operation that returned
 * before another was called ahead of it, and (2) is a legal run of the sequential model. An operation whose outcome
 * the client never learned (a timeout, a 504, a dropped connection) returns at `Infinity`: it may take effect at any
 * point after its call, or never (ordered after everything else, it is observed by nothing).
 *
 * The search (per partition): keep the calls and returns in time order in a doubly linked list. Walk from the head;
 * each call met before the first return is a candidate to linearize next. Linearizing one steps the model and lifts
 * the operation's call and return out of the list; meeting a return means every candidate has been tried, so undo the
 * last linearization and try the next candidate after it. The pair (set of linearized operations, model state) is
 * remembered: reaching it again by another order cannot succeed where the first visit failed.
 *
 * The search is exponential in the worst case, so each partition has a budget (time, steps, memory). When it runs
 * out the partition's outcome is 'unknown', never a guess: a checker that hangs or that says 'ok' because it gave up
 * would make a chaos run worthless.
 */
import { SeededRng } from '../../src/lib/rng.js'

export interface Operation<Input, Output> {
  /** The client that issued it; reports only. */
  clientId?: number
  input: Input
  /** When the client sent it, in ms on one monotonic clock shared by the whole history. */
  call: number
  output: Output
  /** When the client had the answer, on the same clock; `Infinity` when the outcome is unknown. */
  return: number
}

export type StepResult<State> = { ok: true; state: State } | { ok: false }

/** A sequential specification, shaped like Porcupine's `Model`. */
export interface Model<State, Input, Output> {
  /**
   * Splits a history into parts that are linearizable together exactly when each is linearizable alone (for a
   * map of independent keys: one part per key). Absent: the whole history is one part.
   */
  partition?: (history: readonly Operation<Input, Output>[]) => Operation<Input, Output>[][]
  /** Names a part for reports (for a key-partitioned model: the key). */
  partitionName?: (part: readonly Operation<Input, Output>[]) => string
  init: () => State
  /** Whether `input` may return `output` in `state`, and the state after it. Must not mutate `state`. */
  step: (state: State, input: Input, output: Output) => StepResult<State>
  /** Two states are the same state exactly when their keys are equal (the memo key). Default: JSON.stringify. */
  stateKey?: (state: State) => string
  describeOperation?: (input: Input, output: Output) => string
  describeState?: (state: State) => string
}

export type CheckOutcome = 'ok' | 'illegal' | 'unknown'

export interface CheckOptions {
  /** Wall-clock budget of one partition's search. */
  timeMsPerPartition?: number
  /** Model steps one partition's search may take. */
  stepsMaxPerPartition?: number
  /** 32-bit words the memo of one partition may hold (each entry costs one bitset of the partition's size). */
  memoWordsMaxPerPartition?: number
}

export interface PartitionReport<Input, Output> {
  name: string
  outcome: CheckOutcome
  /** The partition's operations, sorted by call time; `longest` holds positions in this list. */
  operations: Operation<Input, Output>[]
  steps: number
  elapsedMs: number
  /** For 'unknown': which budget ran out. */
  exhausted?: 'time' | 'steps' | 'memory'
  /** For 'illegal' and 'unknown': the longest order of operations the search could linearize. */
  longest?: number[]
}

export interface CheckResult<Input, Output> {
  /** 'illegal' if any partition is; otherwise 'unknown' if any partition's budget ran out; otherwise 'ok'. */
  outcome: CheckOutcome
  partitions: PartitionReport<Input, Output>[]
  elapsedMs: number
}

const DEFAULTS: Required<CheckOptions> = {
  timeMsPerPartition: 10_000,
  stepsMaxPerPartition: 20_000_000,
  memoWordsMaxPerPartition: 32 * 1024 * 1024,
}

/** Checks a history against a model, one partition at a time (Porcupine's `CheckOperations`). */
export function checkOperations<State, Input, Output>(
  model: Model<State, Input, Output>,
  history: readonly Operation<Input, Output>[],
  options: CheckOptions = {},
): CheckResult<Input, Output> {
  const started = performance.now()
  const budget = { ...DEFAULTS, ...options }
  for (const operation of history) validate(operation)
  const parts = model.partition?.(history) ?? [[...history]]
  const partitions = parts.map((part, index) => {
    const operations = [...part].sort((a, b) => a.call - b.call)
    const name = model.partitionName?.(operations) ?? String(index)
    return { name, operations, ...checkPartition(model, operations, budget) }
  })
  const outcomes = new Set(partitions.map((partition) => partition.outcome))
  const outcome: CheckOutcome = outcomes.has('illegal') ? 'illegal' : outcomes.has('unknown') ? 'unknown' : 'ok'
  return { outcome, partitions, elapsedMs: performance.now() - started }
}

function validate(operation: Operation<unknown, unknown>): void {
  if (!Number.isFinite(operation.call)) throw new RangeError(`an operation's call time must be finite, got ${operation.call}`)
  if (Number.isNaN(operation.return) || operation.return === -Infinity || operation.return < operation.call) {
    throw new RangeError(`an operation must return at or after its call (call ${operation.call}, return ${operation.return})`)
  }
}

/** One part of a key-partitioned history per distinct key, in first-seen order. */
export function partitionBy<Input, Output>(
  keyOf: (input: Input) => string,
): (history: readonly Operation<Input, Output>[]) => Operation<Input, Output>[][] {
  return (history) => {
    const parts = new Map<string, Operation<Input, Output>[]>()
    for (const operation of history) {
      const key = keyOf(operation.input)
      const part = parts.get(key)
      if (part === undefined) parts.set(key, [operation])
      else part.push(operation)
    }
    return [...parts.values()]
  }
}

interface SearchResult {
  outcome: CheckOutcome
  steps: number
  elapsedMs: number
  exhausted?: 'time' | 'steps' | 'memory'
  longest?: number[]
}

/**
 * The entry list: node 0 is the head sentinel; node 1 + k is the k-th entry in time order. Arrays rather than
 * objects, since a chaos run's partitions hold thousands of operations and the search visits each node many times.
 */
interface EntryList {
  next: Int32Array
  prev: Int32Array
  /** The operation of each node (-1 for the head). */
  operation: Int32Array
  /** For a call node, its return node; -1 for return nodes and the head. */
  match: Int32Array
}

function buildEntries(operations: readonly Operation<unknown, unknown>[]): EntryList {
  const entries: Array<{ operation: number; isCall: boolean; time: number }> = []
  operations.forEach((operation, index) => {
    entries.push({ operation: index, isCall: true, time: operation.call })
    entries.push({ operation: index, isCall: false, time: operation.return })
  })
  // Equal times sort calls first: an operation called at the instant another returned counts as concurrent with it,
  // the weaker claim, so a clock's coarse resolution can never make a linearizable history look illegal.
  entries.sort((a, b) => a.time - b.time || (a.isCall === b.isCall ? a.operation - b.operation : a.isCall ? -1 : 1))
  const size = entries.length + 1
  const list: EntryList = {
    next: new Int32Array(size),
    prev: new Int32Array(size),
    operation: new Int32Array(size).fill(-1),
    match: new Int32Array(size).fill(-1),
  }
  const returnNode = new Int32Array(operations.length)
  entries.forEach((entry, position) => {
    if (!entry.isCall) returnNode[entry.operation] = position + 1
  })
  for (let node = 0; node < size; node += 1) {
    list.next[node] = node + 1 < size ? node + 1 : -1
    list.prev[node] = node - 1
    const entry = entries[node - 1]
    if (entry === undefined) continue
    list.operation[node] = entry.operation
    if (entry.isCall) list.match[node] = returnNode[entry.operation]!
  }
  return list
}

/** Takes a call node and its return node out of the list; their own links stay, so `unlift` can put them back. */
function lift(list: EntryList, call: number): void {
  const { next, prev } = list
  next[prev[call]!] = next[call]!
  prev[next[call]!] = prev[call]!
  const ret = list.match[call]!
  next[prev[ret]!] = next[ret]!
  if (next[ret] !== -1) prev[next[ret]!] = prev[ret]!
}

/** Undoes `lift`; valid only in reverse order of the lifts (the search's stack discipline guarantees it). */
function unlift(list: EntryList, call: number): void {
  const { next, prev } = list
  const ret = list.match[call]!
  next[prev[ret]!] = ret
  if (next[ret] !== -1) prev[next[ret]!] = ret
  next[prev[call]!] = call
  prev[next[call]!] = call
}

function checkPartition<State, Input, Output>(
  model: Model<State, Input, Output>,
  operations: readonly Operation<Input, Output>[],
  budget: Required<CheckOptions>,
): SearchResult {
  const started = performance.now()
  const count = operations.length
  const stateKey = model.stateKey ?? ((state: State) => JSON.stringify(state) ?? 'undefined')
  const list = buildEntries(operations)
  const words = Math.max(1, Math.ceil(count / 32))
  const linearized = new Uint32Array(words)
  // Zobrist hashing: the memo key of a set is the XOR of a random pair of words per member, updated in O(1) per
  // step. The bitsets themselves are compared on a key hit, so a hash collision costs time, never a wrong answer.
  const zobrist = new SeededRng(0x5eed)
  const hashLow = Uint32Array.from({ length: count }, () => zobrist.nextUint32())
  const hashHigh = Uint32Array.from({ length: count }, () => zobrist.nextUint32())
  let low = 0
  let high = 0
  const memo = new Map<string, Uint32Array[]>()
  let memoWords = 0
  const stack: Array<{ call: number; state: State }> = []
  let longest: number[] = []
  let state = model.init()
  let entry = list.next[0]!
  let steps = 0
  const finish = (outcome: CheckOutcome, exhausted?: SearchResult['exhausted']): SearchResult => {
    if (outcome !== 'ok' && stack.length > longest.length) longest = stack.map((frame) => list.operation[frame.call]!)
    return {
      outcome,
      steps,
      elapsedMs: performance.now() - started,
      ...(exhausted === undefined ? {} : { exhausted }),
      ...(outcome === 'ok' ? {} : { longest }),
    }
  }
  while (list.next[0] !== -1) {
    steps += 1
    if (steps > budget.stepsMaxPerPartition) return finish('unknown', 'steps')
    // Reading the clock costs more than a step; every 4096 steps keeps the overshoot far below a millisecond.
    if ((steps & 4095) === 0 && performance.now() - started > budget.timeMsPerPartition) return finish('unknown', 'time')
    const ret = list.match[entry]!
    if (ret !== -1) {
      // A call: try to linearize its operation next.
      const index = list.operation[entry]!
      const operation = operations[index]!
      const result = model.step(state, operation.input, operation.output)
      if (result.ok) {
        const word = index >>> 5
        const bit = 1 << (index & 31)
        linearized[word]! |= bit
        low ^= hashLow[index]!
        high ^= hashHigh[index]!
        const key = `${low}:${high}:${stateKey(result.state)}`
        const seen = memo.get(key)
        if (seen === undefined || !seen.some((set) => equalSets(set, linearized))) {
          if (seen === undefined) memo.set(key, [linearized.slice()])
          else seen.push(linearized.slice())
          memoWords += words
          if (memoWords > budget.memoWordsMaxPerPartition) return finish('unknown', 'memory')
          stack.push({ call: entry, state })
          state = result.state
          lift(list, entry)
          entry = list.next[0]!
          continue
        }
        linearized[word]! &= ~bit
        low ^= hashLow[index]!
        high ^= hashHigh[index]!
      }
      entry = list.next[entry]!
      continue
    }
    // A return: every candidate before it was tried from this prefix. Backtrack, or fail if there is nothing to undo.
    if (stack.length > longest.length) longest = stack.map((frame) => list.operation[frame.call]!)
    const top = stack.pop()
    if (top === undefined) return finish('illegal')
    const index = list.operation[top.call]!
    linearized[index >>> 5]! &= ~(1 << (index & 31))
    low ^= hashLow[index]!
    high ^= hashHigh[index]!
    state = top.state
    unlift(list, top.call)
    entry = list.next[top.call]!
  }
  return finish('ok')
}

function equalSets(a: Uint32Array, b: Uint32Array): boolean {
  for (let word = 0; word < a.length; word += 1) if (a[word] !== b[word]) return false
  return true
}

/**
 * A readable account of a partition that is not 'ok': the longest linearizable prefix (its last `prefixShown`
 * operations), the state it leaves, and the operations that could come next with whether the model allows each.
 * Times are shown relative to `origin`.
 */
export function describePartition<State, Input, Output>(
  model: Model<State, Input, Output>,
  report: PartitionReport<Input, Output>,
  options: { origin?: number; prefixShown?: number; candidatesShown?: number } = {},
): string {
  const origin = options.origin ?? 0
  const describeOperation = model.describeOperation ?? ((input: Input, output: Output) => `${JSON.stringify(input)} -> ${JSON.stringify(output)}`)
  const describeState = model.describeState ?? ((state: State) => JSON.stringify(state))
  const line = (position: number): string => {
    const operation = report.operations[position]!
    const end = operation.return === Infinity ? '∞' : (operation.return - origin).toFixed(1)
    const client = operation.clientId === undefined ? '' : ` client ${operation.clientId}`
    return `  #${position} [${(operation.call - origin).toFixed(1)}, ${end}] ms${client}: ${describeOperation(operation.input, operation.output)}`
  }
  const order = report.longest ?? []
  let state = model.init()
  for (const position of order) {
    const operation = report.operations[position]!
    const result = model.step(state, operation.input, operation.output)
    if (result.ok) state = result.state
  }
  const done = new Set(order)
  const remaining = report.operations.map((_, position) => position).filter((position) => !done.has(position))
  const firstReturn = Math.min(...remaining.map((position) => report.operations[position]!.return))
  const candidates = remaining.filter((position) => report.operations[position]!.call <= firstReturn)
  const prefixShown = options.prefixShown ?? 10
  const candidatesShown = options.candidatesShown ?? 10
  const lines = [
    `partition ${report.name}: ${report.outcome}${report.exhausted === undefined ? '' : ` (${report.exhausted} budget ran out)`}, ${report.operations.length} operations, ${report.steps} steps`,
    `longest linearizable prefix: ${order.length} operations${order.length > prefixShown ? `, the last ${prefixShown}` : ''}:`,
    ...order.slice(-prefixShown).map(line),
    `state after it: ${describeState(state)}`,
    `operations that could come next (called before the first pending return):`,
    ...candidates.slice(0, candidatesShown).map((position) => {
      const operation = report.operations[position]!
      const allowed = model.step(state, operation.input, operation.output).ok
      return `${line(position)}  ${allowed ? '(allowed here)' : '(not allowed here)'}`
    }),
  ]
  if (candidates.length > candidatesShown) lines.push(`  … ${candidates.length - candidatesShown} more`)
  return lines.join('\n')
}

// ---------------------------------------------------------------------------------------------------------------
// Models. Values are strings or numbers; `null` is an absent key. An output of `undefined` means the client never
// learned the outcome (the operation's return is then Infinity): the step is allowed whatever the state.

export type RegisterValue = string | number

export type RegisterInput<V extends RegisterValue> = { key: string; kind: 'read' } | { key: string; kind: 'write'; value: V }

export type CasRegisterInput<V extends RegisterValue> = RegisterInput<V> | { key: string; kind: 'cas'; expected: V | null; value: V }

/** read: the value seen (null: absent). write: true. cas: whether it applied. undefined: the outcome is unknown. */
export type RegisterOutput<V extends RegisterValue> = V | null | boolean | undefined

/** A read/write register per key (Porcupine README's model, partitioned by key). */
export function registerModel<V extends RegisterValue>(initial: V | null = null): Model<V | null, RegisterInput<V>, RegisterOutput<V>> {
  return {
    ...keyedDescriptions<V, RegisterInput<V>>(),
    init: () => initial,
    step: (state, input, output) => {
      if (input.kind === 'write') return { ok: true, state: input.value }
      return output === undefined || output === state ? { ok: true, state } : { ok: false }
    },
  }
}

/**
 * A register per key with compare-and-set, as Jepsen's and Porcupine's etcd model: cas(expected, value) applies
 * exactly when the state equals `expected` (null: the key is absent) and answers whether it did.
 */
export function casRegisterModel<V extends RegisterValue>(initial: V | null = null): Model<V | null, CasRegisterInput<V>, RegisterOutput<V>> {
  return {
    ...keyedDescriptions<V, CasRegisterInput<V>>(),
    init: () => initial,
    step: (state, input, output) => {
      switch (input.kind) {
        case 'write':
          return { ok: true, state: input.value }
        case 'read':
          return output === undefined || output === state ? { ok: true, state } : { ok: false }
        case 'cas': {
          const applies = state === input.expected
          if (output === undefined) return { ok: true, state: applies ? input.value : state }
          if (output !== applies) return { ok: false }
          return { ok: true, state: applies ? input.value : state }
        }
      }
    },
  }
}

function keyedDescriptions<V extends RegisterValue, Input extends CasRegisterInput<V>>(): Pick<
  Model<V | null, Input, RegisterOutput<V>>,
  'partition' | 'partitionName' | 'stateKey' | 'describeOperation' | 'describeState'
> {
  return {
    partition: partitionBy<Input, RegisterOutput<V>>((input) => input.key),
    partitionName: (part) => part[0]?.input.key ?? '(empty)',
    // Type-tagged, so that the number 1 and the string '1' stay different states.
    stateKey: (state) => (state === null ? 'null' : `${typeof state}:${state}`),
    describeState: (state) => JSON.stringify(state),
    describeOperation: (input, output) => {
      const seen = output === undefined ? '?' : JSON.stringify(output)
      switch (input.kind) {
        case 'read':
          return `read ${input.key} -> ${seen}`
        case 'write':
          return `write ${input.key} ${JSON.stringify(input.value)} -> ${seen}`
        case 'cas':
          return `cas ${input.key} ${JSON.stringify(input.expected)}→${JSON.stringify(input.value)} -> ${seen}`
      }
    },
  }
}
