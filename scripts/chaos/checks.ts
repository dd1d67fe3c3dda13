/**
 * The checks at the end of a chaos run, as pure functions of the recorded history (and of the final state, which
 * the history holds as `final.read` operations). Each returns whether it passed and enough detail to find why not.
 *
 * (a) Every acknowledged write is in the final state: a created policy or token exists, its Description is one no
 *     acknowledged write could have overwritten, and each config Counter reaches the largest value an acknowledged
 *     cas wrote and counts every acknowledged increment, and no more than were acknowledged or left unknown.
 * (b) Every key's history (writes, and reads in the default and consistent modes) is linearizable, by the checker in
 *     test/support/linearizability.ts with a CAS register per key.
 * (c) A stale read never shows a value that was never written (or not yet sent when the read returned).
 * (d) Versions agree: whichever node and mode served it, one ModifyIndex of a config entry always carries the same
 *     Counter, and a later version a larger one.
 * (f) The faults happened: every nemesis action succeeded, and every partitioned node was in fact cut off.
 * Failover times are measured here too: from each kill or pause of the leader to the next write acknowledged.
 */
import {
  casRegisterModel,
  checkOperations,
  describePartition,
  partitionBy,
  type CasRegisterInput,
  type CheckOutcome,
  type Model,
  type Operation,
  type RegisterOutput,
  type RegisterValue,
} from '../../test/support/linearizability.js'
import { isRead, isWrite, type Outcome, type RecordedOperation } from './history.js'
import type { NemesisEvent } from './nemesis.js'

export interface CheckReport {
  passed: boolean
  /** A line per problem (at most a few dozen; `count` has them all). */
  problems: string[]
  count: number
}

const PROBLEMS_SHOWN = 30

function report(problems: string[]): CheckReport {
  return { passed: problems.length === 0, problems: problems.slice(0, PROBLEMS_SHOWN), count: problems.length }
}

function groupByKey(history: readonly RecordedOperation[]): Map<string, RecordedOperation[]> {
  const byKey = new Map<string, RecordedOperation[]>()
  for (const operation of history) {
    const list = byKey.get(operation.key)
    if (list === undefined) byKey.set(operation.key, [operation])
    else list.push(operation)
  }
  return byKey
}

function describeOperation(operation: RecordedOperation): string {
  const end = operation.outcome === 'unknown' ? `${operation.end.toFixed(1)}+?` : operation.end.toFixed(1)
  const what = isWrite(operation.kind)
    ? `${operation.kind} ${JSON.stringify(operation.value)}${operation.expected === undefined ? '' : ` expecting ${JSON.stringify(operation.expected)}`}`
    : `${operation.kind}${operation.mode === undefined ? '' : ` ${operation.mode}`}`
  const result = operation.result === undefined ? '' : ` -> ${JSON.stringify(operation.result)}`
  return `#${operation.id} [${operation.start.toFixed(1)}, ${end}] ms client ${operation.client} on ${operation.node}: ${what}${result} (${operation.outcome})`
}

// ---------------------------------------------------------------------------------------------------------------
// (a) Acknowledged writes.

export function checkAcknowledgedWrites(history: readonly RecordedOperation[]): CheckReport & { keys: number } {
  const problems: string[] = []
  let keys = 0
  for (const [key, operations] of groupByKey(history)) {
    const final = operations.find((operation) => operation.kind === 'final.read')
    if (final === undefined) continue
    keys += 1
    const found = final.result ?? null
    if (key.startsWith('config:')) {
      const acknowledged = operations.filter((operation) => operation.kind === 'config.cas' && operation.outcome === 'ok' && operation.result === true).length
      const unknown = operations.filter((operation) => operation.kind === 'config.cas' && operation.outcome === 'unknown').length
      const created = operations.some((operation) => operation.kind === 'config.create' && operation.outcome === 'ok' && operation.result === true)
      // The Counter only grows, one step per applied cas: it ends at or above the largest value an acknowledged cas
      // wrote, and counts every acknowledged increment and at most the unknown ones besides.
      const highest = Math.max(0, ...operations.filter((operation) => operation.kind === 'config.cas' && operation.outcome === 'ok' && operation.result === true).map((operation) => Number(operation.value)))
      if (created && found === null) problems.push(`${key}: created (acknowledged) but absent at the end`)
      else if (typeof found === 'number' && found < highest) {
        problems.push(`${key}: Counter is ${found} at the end, but an acknowledged cas had written ${highest}`)
      } else if (typeof found === 'number' && (found < acknowledged || found > acknowledged + unknown)) {
        problems.push(`${key}: Counter is ${found} at the end, but ${acknowledged} increments were acknowledged and ${unknown} unknown`)
      }
      continue
    }
    const writes = operations.filter((operation) => isWrite(operation.kind))
    const acknowledged = writes.filter((operation) => operation.outcome === 'ok')
    const createdAcknowledged = acknowledged.some((operation) => operation.kind.endsWith('.create'))
    if (found === null) {
      if (createdAcknowledged) problems.push(`${key}: created (acknowledged) but absent at the end`)
      continue
    }
    // The final value must come from a write that took effect (acknowledged, or unknown) and that no acknowledged
    // write certainly followed: one sent after it had returned would have overwritten it.
    const candidates = writes.filter((operation) => operation.outcome !== 'failed' && operation.value === found)
    const survivor = candidates.find((write) => {
      const returned = write.outcome === 'unknown' ? Infinity : write.end
      return !acknowledged.some((later) => later.start > returned)
    })
    if (survivor === undefined) {
      const last = acknowledged.reduce<RecordedOperation | undefined>((latest, operation) => (latest === undefined || operation.start > latest.start ? operation : latest), undefined)
      problems.push(
        candidates.length === 0
          ? `${key}: the final value ${JSON.stringify(found)} was never written`
          : `${key}: the final value ${JSON.stringify(found)} was overwritten by the acknowledged ${last === undefined ? 'write' : describeOperation(last)}`,
      )
    }
  }
  return { ...report(problems), keys }
}

// ---------------------------------------------------------------------------------------------------------------
// (b) Linearizability.

type CheckerInput = CasRegisterInput<RegisterValue> & { note: string }
type CheckerOperation = Operation<CheckerInput, RegisterOutput<RegisterValue>>

/** The linearizable part of the history as checker operations: no stale reads, no failed operations. */
export function checkerOperations(history: readonly RecordedOperation[]): CheckerOperation[] {
  const operations: CheckerOperation[] = []
  for (const operation of history) {
    if (operation.outcome === 'failed') continue
    const note = `#${operation.id} ${operation.mode ?? operation.kind} on ${operation.node}`
    const common = { clientId: operation.client, call: operation.start }
    if (isRead(operation.kind)) {
      if (operation.mode === 'stale' || operation.outcome !== 'ok') continue
      operations.push({ ...common, input: { key: operation.key, kind: 'read', note }, output: operation.result as RegisterValue | null, return: operation.end })
      continue
    }
    const unknown = operation.outcome === 'unknown'
    const returnTime = unknown ? Infinity : operation.end
    if (operation.kind === 'config.cas' || operation.kind === 'config.create') {
      const input: CheckerInput = { key: operation.key, kind: 'cas', expected: operation.expected ?? null, value: operation.value!, note }
      operations.push({ ...common, input, output: unknown ? undefined : operation.result === true, return: returnTime })
      continue
    }
    operations.push({ ...common, input: { key: operation.key, kind: 'write', value: operation.value!, note }, output: unknown ? undefined : true, return: returnTime })
  }
  return operations
}

export interface LinearizabilityReport extends CheckReport {
  outcome: CheckOutcome
  partitions: number
  byOutcome: Record<CheckOutcome, number>
  operations: number
  elapsedMs: number
  /** The key, steps and time of the hardest partition: to tell how close the budget came. */
  hardest?: { key: string; operations: number; steps: number; elapsedMs: number }
}

export function checkLinearizability(history: readonly RecordedOperation[], options: { timeMsPerPartition: number }): LinearizabilityReport {
  const base = casRegisterModel<RegisterValue>()
  // The CAS register model, its inputs carrying a note (operation id, mode, node) that failure reports show.
  const model: Model<RegisterValue | null, CheckerInput, RegisterOutput<RegisterValue>> = {
    init: base.init,
    step: base.step,
    ...(base.stateKey === undefined ? {} : { stateKey: base.stateKey }),
    ...(base.describeState === undefined ? {} : { describeState: base.describeState }),
    partition: partitionBy((input: CheckerInput) => input.key),
    partitionName: (part) => part[0]?.input.key ?? '(empty)',
    describeOperation: (input, output) => `${base.describeOperation!(input, output)}  (${input.note})`,
  }
  const operations = checkerOperations(history)
  const result = checkOperations(model, operations, { timeMsPerPartition: options.timeMsPerPartition })
  const byOutcome: Record<CheckOutcome, number> = { ok: 0, illegal: 0, unknown: 0 }
  for (const partition of result.partitions) byOutcome[partition.outcome] += 1
  const problems = result.partitions
    .filter((partition) => partition.outcome !== 'ok')
    .map((partition) => describePartition(model, partition, { prefixShown: 12, candidatesShown: 12 }))
  const hardest = [...result.partitions].sort((a, b) => b.elapsedMs - a.elapsedMs)[0]
  return {
    ...report(problems),
    outcome: result.outcome,
    partitions: result.partitions.length,
    byOutcome,
    operations: operations.length,
    elapsedMs: Math.round(result.elapsedMs),
    ...(hardest === undefined
      ? {}
      : { hardest: { key: hardest.name, operations: hardest.operations.length, steps: hardest.steps, elapsedMs: Math.round(hardest.elapsedMs) } }),
  }
}

// ---------------------------------------------------------------------------------------------------------------
// (c) Stale reads.

export function checkStaleReads(history: readonly RecordedOperation[]): CheckReport & { checked: number } {
  const problems: string[] = []
  let checked = 0
  for (const [key, operations] of groupByKey(history)) {
    const writes = operations.filter((operation) => isWrite(operation.kind) && operation.outcome !== 'failed')
    for (const read of operations) {
      if (read.mode !== 'stale' || read.outcome !== 'ok' || !isRead(read.kind)) continue
      checked += 1
      if (read.result === null || read.result === undefined) continue
      // Written by a write that may have applied, and sent before this read returned.
      const source = writes.some((write) => write.value === read.result && write.start < read.end)
      if (!source) problems.push(`${key}: stale ${describeOperation(read)} shows a value no write had sent by then`)
    }
  }
  return { ...report(problems), checked }
}

// ---------------------------------------------------------------------------------------------------------------
// (d) Versions of config entries.

export function checkVersions(history: readonly RecordedOperation[]): CheckReport & { versions: number } {
  const problems: string[] = []
  let versions = 0
  for (const [key, operations] of groupByKey(history)) {
    if (!key.startsWith('config:')) continue
    const counterAt = new Map<number, { counter: number; read: RecordedOperation }>()
    for (const read of operations) {
      if (!isRead(read.kind) || read.outcome !== 'ok' || typeof read.result !== 'number' || read.modifyIndex === undefined) continue
      const seen = counterAt.get(read.modifyIndex)
      if (seen === undefined) counterAt.set(read.modifyIndex, { counter: read.result, read })
      else if (seen.counter !== read.result) {
        problems.push(`${key}: ModifyIndex ${read.modifyIndex} read with Counter ${seen.counter} (${describeOperation(seen.read)}) and ${read.result} (${describeOperation(read)})`)
      }
    }
    versions += counterAt.size
    const ordered = [...counterAt.entries()].sort((a, b) => a[0] - b[0])
    for (let position = 1; position < ordered.length; position += 1) {
      const [previousIndex, previous] = ordered[position - 1]!
      const [index, current] = ordered[position]!
      if (current.counter <= previous.counter) {
        problems.push(`${key}: ModifyIndex ${index} has Counter ${current.counter}, not above ${previous.counter} at ModifyIndex ${previousIndex}`)
      }
    }
  }
  return { ...report(problems), versions }
}

// ---------------------------------------------------------------------------------------------------------------
// (f) The faults took effect. A run whose partitions never isolated anything has not tested what it claims to.

export function checkFaults(events: readonly NemesisEvent[]): CheckReport & { faults: number } {
  const problems: string[] = []
  for (const event of events) {
    if (event.error !== undefined) problems.push(`${event.action} ${event.node} at ${event.at.toFixed(0)} ms failed: ${event.error}`)
    if (event.isolated === false) problems.push(`partition of ${event.node} at ${event.at.toFixed(0)} ms did not isolate it: ${event.observed ?? ''}`)
  }
  const faults = events.filter((event) => event.action === 'kill' || event.action === 'pause' || event.action === 'partition').length
  return { ...report(problems), faults }
}

// ---------------------------------------------------------------------------------------------------------------
// Failover times and counts.

export interface FailoverReport {
  /** Leader kills and pauses. */
  faults: number
  /** ms from each such fault (once it had taken effect) to the first acknowledged write sent after it. */
  samplesMs: number[]
  minMs?: number
  medianMs?: number
  maxMs?: number
  /** Leader faults after which no write was acknowledged before the run ended. */
  withoutWrite: number
}

export function failoverTimes(history: readonly RecordedOperation[], events: readonly NemesisEvent[]): FailoverReport {
  const acknowledged = history.filter((operation) => isWrite(operation.kind) && operation.outcome === 'ok' && operation.client >= 0)
  const faults = events.filter((event) => (event.action === 'kill' || event.action === 'pause') && event.wasLeader === true && event.error === undefined)
  const samplesMs: number[] = []
  for (const fault of faults) {
    // From the moment the fault had surely taken effect, and only writes sent after it: one sent just before a
    // kill may have been committed by the old leader in the few ms the signal took.
    const from = fault.done ?? fault.at
    // A loop, not Math.min(...ends): a long run's history is too large to spread into one call's arguments.
    let firstEnd = Number.POSITIVE_INFINITY
    for (const operation of acknowledged) if (operation.start >= from && operation.end < firstEnd) firstEnd = operation.end
    if (firstEnd === Number.POSITIVE_INFINITY) continue
    samplesMs.push(Math.round(firstEnd - from))
  }
  const sorted = [...samplesMs].sort((a, b) => a - b)
  const summary =
    sorted.length === 0
      ? {}
      : {
          minMs: sorted[0]!,
          medianMs: sorted.length % 2 === 1 ? sorted[(sorted.length - 1) / 2]! : Math.round((sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2),
          maxMs: sorted[sorted.length - 1]!,
        }
  return { faults: faults.length, samplesMs, ...summary, withoutWrite: faults.length - samplesMs.length }
}

export function countOperations(history: readonly RecordedOperation[]): { byKind: Record<string, Record<Outcome, number>>; byMode: Record<string, number>; total: number } {
  const byKind: Record<string, Record<Outcome, number>> = {}
  const byMode: Record<string, number> = {}
  for (const operation of history) {
    const counts = (byKind[operation.kind] ??= { ok: 0, failed: 0, unknown: 0 })
    counts[operation.outcome] += 1
    if (operation.mode !== undefined && operation.kind !== 'final.read' && operation.outcome === 'ok') byMode[operation.mode] = (byMode[operation.mode] ?? 0) + 1
  }
  return { byKind, byMode, total: history.filter((operation) => operation.kind !== 'final.read').length }
}
