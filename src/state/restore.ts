/**
 * Restoring a snapshot archive, through the log (issue 20; docs/snapshots.md says why not as a Raft snapshot at an
 * unused index). A restore is four kinds of command:
 *
 * - `restore.begin` opens it: from then on every other write is refused (restore_in_progress) until it ends, so no
 *   write can be acknowledged and then lost under the restored state. Raft's membership records still change.
 * - `restore.chunk`, in order (`seq` 0, 1, ...): records of the archive, staged inside the live state under
 *   STAGED_PREFIX, so that Raft snapshots (to a follower, or for compaction) carry a restore that is half way. Each
 *   chunk's pairs are checked here, deterministically; a chunk refused changes nothing and leaves the restore to be
 *   abandoned.
 * - `restore.commit` checks that every chunk arrived (count, records and a chained SHA-256), then finishes the restored
 *   state, built as the chunks came in a database of its own (RestoreBuild), and switches to it as a snapshot install
 *   does (snapshot.ts). Records keep their CreateIndex (lowered to the begin's index if above it); their ModifyIndex
 *   becomes the begin's index, every table's index the commit's; the secondary indexes are rebuilt from the records
 *   (an archive's index entries are never trusted). Membership records are kept from the live state; replication
 *   progress starts over.
 * - `restore.abort` drops what was staged (the HTTP driver on failure, or the leader's janitor when a restore stalls).
 *
 * A crash anywhere leaves the old state with the restore still open (its chunks replay from the log, or come in the
 * next snapshot) or the restored state: the restored database is marked complete before the switch, and
 * `finishStateSwitch` completes a switch a crash interrupted.
 */
import { createHash } from 'node:crypto'
import { parseTime } from '../lib/ids.js'
import { assert } from '../lib/assert.js'
import { applyError, type ApplyResult, type CommandType } from './commands.js'
import { decode, encode } from './codec.js'
import type { StateFiles } from './files.js'
import {
  APPLIED_KEY,
  BOOTSTRAP_KEY,
  RESTORE_KEY,
  SECRET_INDEX_PREFIX,
  SEP,
  STAGED_PREFIX,
  SYNC_KEY,
  TABLES,
  indexKey,
  prefixEnd,
  recordPrefix,
  tableIndexKey,
  uniqueKey,
  uniqueValue,
  type Table,
} from './keys.js'
import type { BatchOp, StateDb } from './reader.js'
import { COMPLETE_MARKER } from './snapshot.js'
import { authMethodSpec, bindingRuleSpec, configSpec, policySpec, roleSpec, tokenSpec, type TableSpec } from './tables.js'
import { linkSpec } from './link.js'

export type RestoreCommand =
  | { v: 1; type: 'restore.begin'; id: string; chunks: number; records: number }
  | { v: 1; type: 'restore.chunk'; id: string; seq: number; pairs: Array<[string, Uint8Array]> }
  | { v: 1; type: 'restore.commit'; id: string; chunks: number; digest: string }
  | { v: 1; type: 'restore.abort'; id: string; reason: string }

/** A chunk's pairs, at most, in bytes of keys and values: far under a log entry's bound, and under a peer frame's. */
export const RESTORE_CHUNK_BYTES_MAX = 512 * 1024
export const RESTORE_CHUNK_PAIRS_MAX = 16_384

/** What the state holds (RESTORE_KEY) while a restore is open. */
export interface RestoreProgress {
  id: string
  beginIndex: number
  /** The chunks and records the begin announced. */
  chunks: number
  records: number
  /** The seq the next chunk must have; records staged so far; the chained digest of the chunks so far. */
  nextSeq: number
  staged: number
  digest: string
  /** The last key staged ('' before the first). */
  lastKey: string
}

/** Tables an archive restores, each with the spec its indexes are rebuilt from. */
const RESTORED: ReadonlyMap<Table, TableSpec<unknown>> = new Map<Table, TableSpec<never>>([
  ['token', tokenSpec as TableSpec<never>],
  ['policy', policySpec as TableSpec<never>],
  ['role', roleSpec as TableSpec<never>],
  ['auth-method', authMethodSpec as TableSpec<never>],
  ['binding-rule', bindingRuleSpec as TableSpec<never>],
  ['config', configSpec as TableSpec<never>],
  ['link', linkSpec as TableSpec<never>],
]) as unknown as ReadonlyMap<Table, TableSpec<unknown>>

/** Kept from the live state through a restore: who the cluster's members are is this cluster's, not the archive's. */
const KEPT: readonly Table[] = ['member']

/** Commands applied while a restore is open; every other is refused. */
export const APPLIED_DURING_RESTORE: ReadonlySet<CommandType> = new Set<CommandType>(['noop', 'raft.member.set', 'raft.member.delete'])

export function isRestoreCommand(type: CommandType): type is RestoreCommand['type'] {
  return type === 'restore.begin' || type === 'restore.chunk' || type === 'restore.commit' || type === 'restore.abort'
}

export const STAGED_END = prefixEnd(STAGED_PREFIX)

/**
 * Whether an archive pair is one a restore takes: a record of a restored table or the bootstrap mark. Everything else
 * in an archive (index entries, table indexes, the applied index, membership, replication progress) is rebuilt or
 * kept, never copied.
 */
export function isRestoredPair(key: string): boolean {
  if (key === BOOTSTRAP_KEY) return true
  const table = recordTable(key)
  return table !== undefined && RESTORED.has(table)
}

function recordTable(key: string): Table | undefined {
  if (!key.startsWith(`r${SEP}`)) return undefined
  const end = key.indexOf(SEP, 2)
  if (end < 0) return undefined
  const table = key.slice(2, end) as Table
  return TABLES.includes(table) ? table : undefined
}

/**
 * What is wrong with a pair to stage, or undefined. A record must decode to a map whose key is the one it is stored
 * under, with integer indexes, and its index entries must be computable: what building the restored state needs. The
 * HTTP driver checks every pair before the restore begins (a 400 naming the record); apply checks again, so that no
 * entry in the log can make a node fail.
 */
export function stagedPairProblem(key: string, value: Uint8Array): string | undefined {
  if (Buffer.byteLength(key) + value.length > RESTORE_PAIR_BYTES_MAX) {
    return `the pair under ${JSON.stringify(key.slice(0, 200))} holds ${Buffer.byteLength(key) + value.length} bytes, more than any record can (${RESTORE_PAIR_BYTES_MAX})`
  }
  if (key === BOOTSTRAP_KEY) {
    try {
      const index = decode<unknown>(value)
      return typeof index === 'number' && Number.isSafeInteger(index) && index >= 0 ? undefined : `the bootstrap mark ${JSON.stringify(key)} is not an index`
    } catch {
      return `the bootstrap mark ${JSON.stringify(key)} is not MessagePack`
    }
  }
  const table = recordTable(key)
  const spec = table === undefined ? undefined : RESTORED.get(table)
  if (table === undefined || spec === undefined) return `the key ${JSON.stringify(key.slice(0, 200))} is not a record a restore takes`
  const name = `the ${table} record ${JSON.stringify(key.slice(recordPrefix(table).length, recordPrefix(table).length + 200))}`
  let record: unknown
  try {
    record = decode<unknown>(value)
  } catch {
    return `${name} is not MessagePack`
  }
  if (typeof record !== 'object' || record === null || Array.isArray(record) || Buffer.isBuffer(record)) return `${name} is not a map`
  // Encoding a record nested thousands deep overflows the stack (decoding goes deeper): refused here, on every replica
  // alike, rather than thrown out of an apply that every replica would then fail at every start.
  if (!withinDepth(record, RECORD_DEPTH_MAX)) return `${name} nests maps and lists deeper than ${RECORD_DEPTH_MAX} levels`
  const expiration = (record as { ExpirationTime?: unknown }).ExpirationTime
  // The expiry index is built from this time: one that depends on the server's time zone would index differently.
  if (table === 'token' && expiration !== undefined && (typeof expiration !== 'string' || parseTime(expiration) === undefined)) {
    return `${name}: ExpirationTime must be an RFC 3339 time with its offset`
  }
  const { CreateIndex, ModifyIndex } = record as { CreateIndex?: unknown; ModifyIndex?: unknown }
  for (const [field, index] of [['CreateIndex', CreateIndex], ['ModifyIndex', ModifyIndex]] as const) {
    if (typeof index !== 'number' || !Number.isSafeInteger(index) || index < 0) return `${name}: ${field} must be a non-negative integer`
  }
  try {
    if (recordPrefix(table) + spec.key(record) !== key) return `${name} is stored under a key that is not its own`
    for (const valueOf of Object.values(spec.unique)) {
      const unique = valueOf(record)
      if (unique !== undefined && typeof unique !== 'string') return `${name} has a field of the wrong type`
    }
    for (const valuesOf of Object.values(spec.multi)) {
      const values = valuesOf(record)
      if (!Array.isArray(values) || values.some((item) => typeof item !== 'string')) return `${name} has a field of the wrong type`
    }
  } catch {
    return `${name} lacks a field its table needs`
  }
  return undefined
}

/** Bytes of one pair at most: past any record a write can make (bodies are 1 MiB), far under a peer frame. */
export const RESTORE_PAIR_BYTES_MAX = 2 * 1024 * 1024
/**
 * Nesting of a restored record at most: validate.ts's VALUE_DEPTH_MAX (64) for config entries and auth-method Config,
 * plus the record and its field. (A literal: validate.ts imports this module.)
 */
const RECORD_DEPTH_MAX = 66

function withinDepth(value: unknown, levels: number): boolean {
  if (typeof value !== 'object' || value === null || value instanceof Uint8Array) return true
  if (levels === 0) return false
  for (const item of Array.isArray(value) ? value : Object.values(value)) if (!withinDepth(item, levels - 1)) return false
  return true
}

/**
 * Whether the pairs of a chunk ascend strictly, from `after` (the last key staged before them): an archive is in key
 * order, and a key staged twice would index its first value in a build made chunk by chunk but not in one rebuilt.
 */
export function ascendingProblem(after: string, pairs: ReadonlyArray<readonly [string, Uint8Array]>): string | undefined {
  let previous = Buffer.from(after, 'utf8')
  for (const [key] of pairs) {
    const next = Buffer.from(key, 'utf8')
    if (Buffer.compare(previous, next) >= 0) return `the key ${JSON.stringify(key.slice(0, 200))} is out of order or repeated (an archive's keys ascend)`
    previous = next
  }
  return undefined
}

/** The digest after one more chunk: SHA-256 over the previous digest and the chunk's keys and values, length-prefixed. */
export function nextDigest(previous: string, pairs: ReadonlyArray<readonly [string, Uint8Array]>): string {
  const hash = createHash('sha256').update(previous, 'utf8')
  const length = Buffer.alloc(4)
  for (const [key, value] of pairs) {
    const keyBytes = Buffer.from(key, 'utf8')
    length.writeUInt32BE(keyBytes.length)
    hash.update(length).update(keyBytes)
    length.writeUInt32BE(value.length)
    hash.update(length).update(value)
  }
  return hash.digest('hex')
}

/**
 * What a restore command does to the state, decided from the command and the open restore alone: the writes (the
 * applied index is the caller's), whether the staged area is emptied first, and whether the restored state is built
 * and switched to. Pure, so that every replica decides alike.
 */
export interface RestoreStep {
  result: ApplyResult
  /** Empty the staged area before writing: a begin (leftovers of a crash), an abort, a commit that failed its check. */
  clearStaged: boolean
  ops: BatchOp[]
  /** Build the restored state and switch to it (a commit whose check passed). */
  install: boolean
  /** The restore open after the step (what `ops` write under RESTORE_KEY, or delete). */
  open: RestoreProgress | undefined
}

export function planRestore(open: RestoreProgress | undefined, command: RestoreCommand, index: number): RestoreStep {
  const refuse = (result: ApplyResult): RestoreStep => ({ result, clearStaged: false, ops: [], install: false, open })
  const notThis = (): RestoreStep =>
    refuse(
      open === undefined
        ? applyError('not_found', `restore ${command.id} is not in progress: it was completed or abandoned`)
        : applyError('conflict', `restore ${command.id} is not in progress: restore ${open.id} is`),
    )
  switch (command.type) {
    case 'restore.begin': {
      if (open !== undefined) return refuse(applyError('conflict', `a snapshot restore is in progress already (${open.id}); wait for it to end`))
      const progress: RestoreProgress = { id: command.id, beginIndex: index, chunks: command.chunks, records: command.records, nextSeq: 0, staged: 0, digest: '', lastKey: '' }
      return { result: { ok: true, value: { index } }, clearStaged: true, ops: [put(RESTORE_KEY, encode(progress))], install: false, open: progress }
    }
    case 'restore.chunk': {
      if (open === undefined || open.id !== command.id) return notThis()
      if (command.seq !== open.nextSeq) return refuse(applyError('conflict', `restore ${open.id} expects chunk ${open.nextSeq}, not ${command.seq}`))
      if (command.seq >= open.chunks) return refuse(applyError('invalid_input', `restore ${open.id} announced ${open.chunks} chunks; chunk ${command.seq} is one too many`))
      const disordered = ascendingProblem(open.lastKey, command.pairs)
      if (disordered !== undefined) return refuse(applyError('invalid_input', `chunk ${command.seq}: ${disordered}`))
      const ops: BatchOp[] = []
      let records = 0
      for (const [key, value] of command.pairs) {
        const problem = stagedPairProblem(key, value)
        if (problem !== undefined) return refuse(applyError('invalid_input', `chunk ${command.seq}: ${problem}`))
        ops.push(put(STAGED_PREFIX + key, Buffer.from(value.buffer, value.byteOffset, value.byteLength)))
        if (key !== BOOTSTRAP_KEY) records += 1
      }
      const lastKey = command.pairs.at(-1)?.[0] ?? open.lastKey
      const progress: RestoreProgress = { ...open, nextSeq: open.nextSeq + 1, staged: open.staged + records, digest: nextDigest(open.digest, command.pairs), lastKey }
      ops.push(put(RESTORE_KEY, encode(progress)))
      return { result: { ok: true }, clearStaged: false, ops, install: false, open: progress }
    }
    case 'restore.commit': {
      if (open === undefined || open.id !== command.id) return notThis()
      const problem =
        open.nextSeq !== open.chunks || command.chunks !== open.chunks
          ? `${open.nextSeq} of ${open.chunks} chunks arrived`
          : open.staged !== open.records
            ? `${open.staged} of ${open.records} records arrived`
            : open.digest !== command.digest
              ? 'the chunks that arrived are not the ones sent (their digest differs)'
              : undefined
      if (problem !== undefined) {
        // Abandoned here and now, so that writes are not refused for a restore that can no longer complete.
        return { result: applyError('invalid_input', `restore ${open.id} did not arrive whole (${problem}); nothing was restored`), clearStaged: true, ops: [del(RESTORE_KEY)], install: false, open: undefined }
      }
      // Every table's index becomes the commit's (the restore's index, as the caller is answered); every record's
      // ModifyIndex the begin's, at which the records were staged (nothing else was written in between).
      return { result: { ok: true, value: { index } }, clearStaged: false, ops: [], install: true, open: undefined }
    }
    case 'restore.abort': {
      if (open === undefined || open.id !== command.id) return notThis()
      return { result: { ok: true }, clearStaged: true, ops: [del(RESTORE_KEY)], install: false, open: undefined }
    }
  }
}

function put(key: string, value: Buffer): BatchOp {
  return { type: 'put', key, value }
}

function del(key: string): BatchOp {
  return { type: 'del', key }
}

/** Writes of a rebuild are batched about this large: bounded memory whatever the archive's size. */
const BUILD_BATCH_BYTES = 4 * 1024 * 1024
/** In the restore database: the restore it is built for and the chunks it holds (removed when it is complete). */
const BUILD_PROGRESS_KEY = `m${SEP}restore-build`

interface BuildProgress {
  id: string
  nextSeq: number
}

/**
 * The writes that put one staged pair into the restored state: a record with CreateIndex at most the restore's index
 * and ModifyIndex equal to it, and its index entries; or the bootstrap mark as it is.
 */
function restoredOps(key: string, value: Uint8Array, restoreIndex: number): BatchOp[] {
  if (key === BOOTSTRAP_KEY) return [put(key, Buffer.from(value.buffer, value.byteOffset, value.byteLength))]
  const table = recordTable(key)
  const spec = table === undefined ? undefined : RESTORED.get(table)
  assert(table !== undefined && spec !== undefined, `staged key ${JSON.stringify(key)} passed the chunk check but is no restored record`)
  const record = decode<Record<string, unknown> & { CreateIndex: number }>(value)
  record.CreateIndex = Math.min(record.CreateIndex, restoreIndex)
  record.ModifyIndex = restoreIndex
  const recordKey = key.slice(recordPrefix(table).length)
  const ops: BatchOp[] = [put(key, encode(record))]
  for (const [name, valueOf] of Object.entries(spec.unique)) {
    const unique = valueOf(record)
    const key = unique === undefined ? undefined : uniqueKey(table, name, unique)
    // The token secret index is not stored: the store fills it from the restored tokens when it switches.
    if (key !== undefined && !key.startsWith(SECRET_INDEX_PREFIX)) ops.push(put(key, uniqueValue(table, name, recordKey)))
  }
  for (const [name, valuesOf] of Object.entries(spec.multi)) {
    for (const item of new Set(valuesOf(record))) ops.push(put(indexKey(table, name, item, recordKey), EMPTY))
  }
  return ops
}

const EMPTY = Buffer.alloc(0)

/**
 * The restored state is built as the chunks arrive, in the `restore` database beside the live one, so that the commit
 * only finishes it and switches: on a million tokens a build at commit would hold the apply loop for a minute. The
 * staged area in the live state stays the truth (a Raft snapshot carries it, a crash cannot tear it from the applied
 * index); the build follows it, and is rebuilt from it whenever it has fallen behind (a crash lost its tail, or a
 * snapshot installed half way brought chunks it never saw).
 */
export class RestoreBuild {
  private constructor(
    private readonly files: StateFiles,
    private db: StateDb,
  ) {}

  /** Opens the build for the restore `open`, rebuilt from `live`'s staged area unless it holds every chunk staged. */
  static async open(files: StateFiles, live: StateDb, open: RestoreProgress): Promise<RestoreBuild> {
    let progress: BuildProgress | undefined
    let db: StateDb
    try {
      db = await files.openDb('restore')
      const stored = await db.get(BUILD_PROGRESS_KEY)
      progress = stored === undefined ? undefined : decode<BuildProgress>(stored)
    } catch {
      // The build is a cache of the staged records: one that cannot be read is built again.
      await files.remove('restore')
      db = await files.openDb('restore')
    }
    const build = new RestoreBuild(files, db)
    if (progress === undefined || progress.id !== open.id || progress.nextSeq < open.nextSeq) await build.rebuild(live, open)
    return build
  }

  private async rebuild(live: StateDb, open: RestoreProgress): Promise<void> {
    await this.db.close()
    await this.files.remove('restore')
    this.db = await this.files.openDb('restore')
    let ops: BatchOp[] = []
    let bytes = 0
    for await (const [stagedKey, value] of live.iterator({ gte: STAGED_PREFIX, lt: STAGED_END })) {
      for (const op of restoredOps(stagedKey.slice(STAGED_PREFIX.length), value, open.beginIndex)) {
        ops.push(op)
        bytes += op.key.length + (op.type === 'put' ? op.value.length : 0)
      }
      if (bytes < BUILD_BATCH_BYTES) continue
      await this.db.batch(ops)
      ops = []
      bytes = 0
    }
    ops.push(put(BUILD_PROGRESS_KEY, encode({ id: open.id, nextSeq: open.nextSeq } satisfies BuildProgress)))
    await this.db.batch(ops)
  }

  /** Adds chunk `seq` of restore `open` (the pairs checked already). Written before the live state's batch. */
  async add(open: RestoreProgress, seq: number, pairs: ReadonlyArray<readonly [string, Uint8Array]>): Promise<void> {
    const ops: BatchOp[] = []
    for (const [key, value] of pairs) ops.push(...restoredOps(key, value, open.beginIndex))
    ops.push(put(BUILD_PROGRESS_KEY, encode({ id: open.id, nextSeq: seq + 1 } satisfies BuildProgress)))
    await this.db.batch(ops)
  }

  /**
   * Completes the build at log index `index` (the commit's): the kept tables copied from `live`, every table's index
   * and the applied index `index`; synced, closed and marked complete.
   */
  async complete(live: StateDb, index: number): Promise<void> {
    const ops: BatchOp[] = [{ type: 'del', key: BUILD_PROGRESS_KEY }]
    for (const table of KEPT) {
      for (const prefix of [`r${SEP}${table}${SEP}`, `u${SEP}${table}${SEP}`, `x${SEP}${table}${SEP}`]) {
        for await (const [key, value] of live.iterator({ gte: prefix, lt: prefixEnd(prefix) })) ops.push(put(key, value))
      }
    }
    for (const table of TABLES) ops.push(put(tableIndexKey(table), encode(index)))
    ops.push(put(APPLIED_KEY, encode(index)))
    // Not marked as storing no secret index: chunks an earlier build added before a restart stored one, which the
    // store drops when it switches to this state (StateStore.replaceDatabase), before it fills the index.
    await this.db.batch(ops)
    // Synced before it is marked complete: a complete restored state is one a crash cannot take back.
    await this.db.put(SYNC_KEY, encode(index), { sync: true })
    await this.db.close()
    await this.files.mark('restore', COMPLETE_MARKER)
  }

  async close(): Promise<void> {
    if (this.db.status === 'open') await this.db.close()
  }
}
