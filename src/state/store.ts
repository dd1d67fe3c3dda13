/**
 * The state machine over LevelDB. `apply(command, index)` must be called in log order; it writes the command's
 * records, their index entries, the raised table indexes and the last applied index in one atomic batch, then wakes
 * the watchers of what changed. Reads go straight to LevelDB through `reader`, but for the token secret index, which
 * the store holds in memory (secret-index.ts).
 *
 * Concurrency: one caller applies (the replica's apply loop); any number may read at the same time, and a read sees
 * the state before or after a batch, never part of one.
 */
import { assert } from '../lib/assert.js'
import { decode, encode } from './codec.js'
import { dispatch } from './apply.js'
import { applyError, COMMAND_VERSION, type ApplyResult, type Command } from './commands.js'
import { APPLIED_KEY, BOOTSTRAP_KEY, RESTORE_KEY, SECRET_INDEX_FORM_KEY, SEP, STAGED_PREFIX, SYNC_KEY, TABLES, tableIndexKey, type Table } from './keys.js'
import { APPLIED_DURING_RESTORE, isRestoreCommand, planRestore, RestoreBuild, STAGED_END, type RestoreCommand, type RestoreProgress } from './restore.js'
import { switchToStagedState } from './snapshot.js'
import { directoryFiles, type StateFiles } from './files.js'
import { KeyFilter } from './key-filter.js'
import { RecordCache } from './record-cache.js'
import { heldDigests, SecretIndex } from './secret-index.js'
import { SECRET_INDEX_FORM, dropStoredSecretIndex } from './secret-index-upgrade.js'
import { batchReader, dbReader, type BatchOp, type Reader, type StateDb } from './reader.js'
import { Txn } from './txn.js'
import { isKnownCommand, validateCommand } from './validate.js'
import { Watches } from './watch.js'

/** A committed command this build cannot apply. The node must stop: applying around it would fork the state. */
export class UnknownCommandError extends Error {
  override readonly name = 'UnknownCommandError'
}

/** A command that no build can apply (validate.ts): not MessagePack, not a map, or not the shape of its type. */
export class MalformedCommandError extends Error {
  override readonly name = 'MalformedCommandError'
}

export function encodeCommand(command: Command): Buffer {
  return encode(command)
}

/**
 * The command in a log entry's bytes. Throws UnknownCommandError for a version or type this build does not know, and
 * MalformedCommandError for bytes that are no command at all; the replica's apply loop does not throw for the latter
 * (see applyEntries).
 */
export function decodeCommand(bytes: Uint8Array, index: number): Command {
  const checked = validateCommand(bytes)
  if (checked.ok) return checked.command
  if (checked.problem === 'unknown') throw unknownCommand(bytes, index)
  throw new MalformedCommandError(`the command at log index ${index} is malformed: ${checked.message}`)
}

function unknownCommand(bytes: Uint8Array, index: number): UnknownCommandError {
  // Decoded again only to name the version and type: this happens once, before the node stops.
  const command = decode<{ v?: unknown; type?: unknown }>(bytes)
  return new UnknownCommandError(
    `the command at log index ${index} has version ${String(command.v)} and type ${String(command.type)}, which this ` +
      `warden (command version ${COMMAND_VERSION}) cannot apply; upgrade warden on this node before restarting it`,
  )
}

/** Commands applied in one LevelDB batch at most: bounds a catch-up's memory and how long one apply holds the loop. */
export const APPLY_BATCH_MAX = 256

/** A log entry as both logs hold it; Raft's own entries (noops, configurations) carry a type other than 'command'. */
export interface LogEntry {
  data: Uint8Array
  index: number
  type?: string
}

/**
 * What one command's apply wrote, in the order it wrote it: each key with its new value, or null for a delete; empty
 * for a command that failed or changed nothing. Applied as they are, they leave the state exactly as applying the
 * command does: apply is deterministic, and the record keys among them name the tables and records it touched.
 */
export type ShippedWrites = ReadonlyArray<readonly [string, Buffer | null]>

/** A command's writes with its version and type: a server applies them only for a command it knows and would ship. */
export interface Shipped {
  readonly v: number
  readonly type: string
  readonly writes: ShippedWrites
}

/**
 * A leader's followers apply its shipped writes instead of running each command again (RaftReplica). Membership
 * commands are not shipped: a follower acts on them beyond the state (Membership.afterApply) and needs the command.
 */
const NOT_SHIPPED: ReadonlySet<string> = new Set(['noop', 'raft.member.set', 'raft.member.delete'])

export interface ApplyOptions<E extends LogEntry> {
  /** Called for each command applied here that may be shipped, with the writes it produced, once its batch is written. */
  produced?: (entry: E, shipped: Shipped) => void
  /**
   * The writes the leader's apply of `entry` produced, when this server was sent them: applied instead of its command,
   * if this build knows the command and every key is one a command's apply writes (acceptShipped); else it runs it.
   */
  shipped?: (entry: E) => Shipped | undefined
  /**
   * Called for each entry of a batch once the batch's results are computed, before LevelDB has its writes, unless the
   * batch changed a policy or a role (an answer names the policies and roles its result links to from the live
   * state, which holds the batch's changes only once it is written). What reads this state must wait for the batch
   * to be written (lastApplied) before it may see the result: it is not in the state until then. `applied` is still
   * called for every entry once the batch is written.
   */
  computed?: (entry: E, result: ApplyResult) => void
}

/**
 * The tables whose records a write's answer names through its links (http/render.ts LinkNames), from the live state:
 * a batch that changes one gives out no result before it is written (ApplyOptions.computed), and a follower answers
 * a forwarded write ahead of its own apply only once it holds the leader's changes to them (rpc/forward.ts).
 */
export const LINKED_TABLES: readonly Table[] = ['policy', 'role']

/**
 * The result given for an entry applied from shipped writes: the outcome was the leader's to report, and no write
 * waits on it here (the driver runs the command itself for an entry a write of its own waits on).
 */
const SHIPPED_RESULT: ApplyResult = Object.freeze({ ok: true })
/** The command passed on for an entry applied from shipped writes, which was not decoded (never a membership one). */
const SHIPPED_COMMAND: Command = Object.freeze({ v: COMMAND_VERSION, type: 'noop' })
const KNOWN_TABLES: ReadonlySet<string> = new Set(TABLES)

/** Shipped writes accepted for an entry, with the tables and records they touch. */
interface ShippedChange {
  readonly writes: ShippedWrites
  readonly tables: Table[]
  readonly records: string[]
}

/**
 * A command to apply at `index`. With `refused`, the command is not applied: `refused` is its result, and only the
 * applied index moves (a malformed entry: see applyEntries).
 */
export interface ApplyItem {
  command: Command
  index: number
  refused?: ApplyResult
  /** The leader's writes for this entry, accepted: applied instead of `command`. */
  shipped?: ShippedChange
}

/**
 * Decodes log entries up to the first one of a version or type this build does not know: the ones before it are still
 * applied (then the node stops), nothing at or after it is. A malformed entry is decoded as a no-op whose result is
 * an invalid_input error, on every replica alike (see applyEntries).
 */
function decodeEntries<E extends LogEntry>(entries: readonly E[], shipped?: (entry: E) => Shipped | undefined): { items: ApplyItem[]; malformed: Array<{ index: number; message: string }>; undecodable?: unknown } {
  const items: ApplyItem[] = []
  const malformed: Array<{ index: number; message: string }> = []
  for (const entry of entries) {
    // Raft's own entries change no record, but the applied index must advance through them.
    if (entry.type !== undefined && entry.type !== 'command') {
      items.push({ command: NOOP, index: entry.index })
      continue
    }
    const offered = shipped?.(entry)
    const change = offered === undefined ? undefined : acceptShipped(offered)
    if (change !== undefined) {
      items.push({ command: SHIPPED_COMMAND, index: entry.index, shipped: change })
      continue
    }
    const checked = validateCommand(entry.data)
    if (checked.ok) {
      items.push({ command: checked.command, index: entry.index })
    } else if (checked.problem === 'unknown') {
      return { items, malformed, undecodable: unknownCommand(entry.data, entry.index) }
    } else {
      const message = `the command at log index ${entry.index} is malformed and was not applied: ${checked.message}`
      items.push({ command: NOOP, index: entry.index, refused: applyError('invalid_input', message) })
      malformed.push({ index: entry.index, message: checked.message })
    }
  }
  return { items, malformed }
}

const NOOP: Command = { v: COMMAND_VERSION, type: 'noop' }

/**
 * Called after every applied batch, once per command that changed something, with what it changed and its log index;
 * caches of derived data (compiled authorizers) and the change feed (change-feed.ts) listen here.
 */
export type ChangeListener = (tables: readonly Table[], recordKeys: readonly string[], index: number) => void

export class StateStore {
  readonly watches = new Watches()
  readonly changeListeners = new Set<ChangeListener>()
  /** Called after the whole state was replaced by a snapshot: every derived cache must be dropped. */
  readonly resetListeners = new Set<() => void>()
  /** Called for each malformed entry applied as a no-op (the replica logs it): its index and what is wrong with it. */
  readonly malformedListeners = new Set<(index: number, problem: string) => void>()
  private appliedIndex = 0
  /** The snapshot restore in progress (restore.ts), as the state holds it. */
  private openRestore: RestoreProgress | undefined
  /** The restored state being built while that restore stages (opened at its first chunk after a start). */
  private build: RestoreBuild | undefined
  private readonly tableIndexes = new Map<Table, number>()
  private currentDb: StateDb
  /** Holds the live database's token IDs, for lookups that expect none (key-filter.ts). */
  private filter: KeyFilter
  /** The live database through the filter: for apply, whose lookups of new tokens' keys are what it is for. */
  private applyReader: Reader
  /** Policies, roles, auth methods and binding rules, as apply reads them (record-cache.ts). */
  private readonly recordCache = new RecordCache()
  private currentReader: Reader
  private replacements = 0
  private replacing: Promise<void> | undefined
  /** Whether the live state holds the mark that it stores no secret index (secret-index-upgrade.ts). */
  private secretIndexMarked = false
  /** The live state's token secret index, held in memory (secret-index.ts). */
  private secrets: SecretIndex

  private constructor(
    db: StateDb,
    /** Where the live database is, and where a snapshot is staged beside it. */
    readonly files: StateFiles,
    secrets: SecretIndex,
  ) {
    this.currentDb = db
    this.secrets = secrets
    this.filter = new KeyFilter()
    this.applyReader = this.recordCache.reader(dbReader(db, undefined, this.filter, secrets))
    this.currentReader = dbReader(db, undefined, undefined, secrets)
  }

  /** Resolves when the key filter's fill is done, at once when none started: whether it is in use (tests). */
  keyFilterReady(): Promise<boolean> {
    return this.filter.whenFilled()
  }

  /** The LevelDB of the state. It changes when a snapshot is installed: read it through the store each time. */
  get db(): StateDb {
    return this.currentDb
  }

  get reader(): Reader {
    return this.currentReader
  }

  /** How many times a snapshot install replaced the state (replace): a read that failed across one may run again. */
  get generation(): number {
    return this.replacements
  }

  /**
   * The state as it is now, fixed: a LevelDB snapshot, for a read that yields to the event loop while it reads (a
   * paced list), so that what applies meanwhile stays out of it. Close it when done. A snapshot install closes the
   * database under it, and its reads then fail (see generation).
   */
  view(): { reader: Reader; close(): Promise<void> } {
    const db = this.currentDb
    const snapshot = db.snapshot()
    return { reader: dbReader(db, snapshot, undefined, this.secrets), close: () => snapshot.close() }
  }

  static async open(directory: string): Promise<StateStore> {
    return StateStore.openFiles(directoryFiles(directory))
  }

  /** Opens the live database of `files` (the simulator passes a simulated disk). */
  static async openFiles(files: StateFiles): Promise<StateStore> {
    const db = await files.openDb('live')
    const marked = await dropStoredSecretIndex(db)
    const store = new StateStore(db, files, await SecretIndex.fill(db))
    store.secretIndexMarked = marked
    await store.loadIndexes()
    // A build left by a restore that is no longer open (abandoned or completed before a crash) is of no use.
    if (store.openRestore === undefined && (await files.exists('restore'))) await files.remove('restore')
    return store
  }

  private async loadIndexes(): Promise<void> {
    const applied = await this.currentDb.get(APPLIED_KEY)
    this.appliedIndex = applied === undefined ? 0 : decode<number>(applied)
    const restore = await this.currentDb.get(RESTORE_KEY)
    this.openRestore = restore === undefined ? undefined : decode<RestoreProgress>(restore)
    for (const table of TABLES) {
      const value = await this.currentDb.get(tableIndexKey(table))
      this.tableIndexes.set(table, value === undefined ? 0 : decode<number>(value))
    }
  }

  /**
   * Replaces the whole state with a staged one (a snapshot received from the leader): `switchDirectories` moves the
   * staged database into place while this store has it closed, then the store reopens, reloads its indexes and wakes
   * every watcher and cache. Called by the Raft driver only once its queued applies are done (RaftReplica install),
   * so no apply runs meanwhile.
   */
  async replace(switchDirectories: (files: StateFiles) => Promise<void>): Promise<void> {
    // Counted before the database closes under the reads in flight, so that each of them can tell (generation).
    this.replacements += 1
    const replaced = this.replaceDatabase(switchDirectories)
    this.replacing = replaced
    try {
      await replaced
    } finally {
      if (this.replacing === replaced) this.replacing = undefined
    }
  }

  /** Resolves once no snapshot install is replacing the state (at once when none is). */
  async whenReplaced(): Promise<void> {
    await this.replacing?.catch(() => undefined)
  }

  private async replaceDatabase(switchDirectories: (files: StateFiles) => Promise<void>): Promise<void> {
    // A build in progress is checked again against the new state's staged area at the next chunk.
    await this.build?.close()
    this.build = undefined
    this.filter.close()
    await this.currentDb.close()
    await switchDirectories(this.files)
    const db = await this.files.openDb('live')
    // A snapshot of a leader of an earlier build, or a restore an earlier build began, stores a secret index.
    this.secretIndexMarked = await dropStoredSecretIndex(db)
    // The new database and its index are taken on together: a view() meanwhile reads the old pair (and fails, closed).
    this.secrets = await SecretIndex.fill(db)
    this.currentDb = db
    // Started, if a lookup wants it, at an apply batch of the new database, as at open.
    this.filter = new KeyFilter()
    this.recordCache.clear()
    this.applyReader = this.recordCache.reader(dbReader(this.currentDb, undefined, this.filter, this.secrets))
    this.currentReader = dbReader(this.currentDb, undefined, undefined, this.secrets)
    await this.loadIndexes()
    for (const listener of this.resetListeners) listener()
    this.watches.notifyAll()
  }

  /** The secret a token of the live database holds now (for the secret index's checks, secret-index.ts). */
  private readonly readLive = heldDigests((key) => this.currentDb.getSync(key))

  /** Makes every write so far durable: LevelDB syncs its write-ahead log, which holds all earlier writes too. */
  async sync(): Promise<void> {
    await this.currentDb.put(SYNC_KEY, encode(this.appliedIndex), { sync: true })
  }

  get lastApplied(): number {
    return this.appliedIndex
  }

  tableIndex(table: Table): number {
    return this.tableIndexes.get(table) ?? 0
  }

  /** The snapshot restore in progress, if one is: while it is, writes other than its own are refused. */
  get restoreInProgress(): Readonly<RestoreProgress> | undefined {
    return this.openRestore
  }

  async apply(command: Command, index: number): Promise<ApplyResult> {
    const [result] = await this.applyBatch([{ command, index }])
    return result!
  }

  /**
   * Applies consecutive commands in one LevelDB batch: each through its own transaction on top of the ones before it,
   * so it sees their writes, and a command that fails leaves nothing but its share of the applied index. One batch of
   * 64 token creates costs about a quarter of 64 batches of one (classic-level's cost is mostly per batch).
   */
  async applyBatch(items: readonly ApplyItem[], produced?: (index: number, shipped: Shipped) => void, computed?: (index: number, result: ApplyResult) => void): Promise<ApplyResult[]> {
    // A restore's commands are applied one at a time, in their own writes (restore.ts); the rest in batches between.
    const results: ApplyResult[] = []
    let start = 0
    for (let n = 0; n <= items.length; n++) {
      const item = items[n]
      if (item !== undefined && (item.refused !== undefined || !isRestoreCommand(item.command.type))) continue
      if (n > start) results.push(...(await this.applyCommands(items.slice(start, n), produced, computed)))
      if (item !== undefined) results.push(await this.applyRestore(item.command as RestoreCommand, item.index))
      start = n + 1
    }
    return results
  }

  private async applyRestore(command: RestoreCommand, index: number): Promise<ApplyResult> {
    assert(index === this.appliedIndex + 1, `apply of index ${index} after ${this.appliedIndex}: commands must be applied once each, in order, without gaps`)
    const open = this.openRestore
    const step = planRestore(open, command, index)
    if (step.install) {
      assert(open !== undefined, 'a restore commit passed its check with no restore open')
      // The restored state was built as the chunks came (restore.ts RestoreBuild): finish it, then switch to it as to a
      // snapshot (replace wakes every watcher and cache).
      const build = await this.restoreBuild(open)
      this.build = undefined
      await build.complete(this.currentDb, index)
      await this.replace((files) => switchToStagedState(files, 'restore'))
      return step.result
    }
    if (command.type === 'restore.chunk' && step.result.ok && open !== undefined) {
      // The build first: one ahead of the live state is harmless (the chunk is written again, alike), one behind is
      // rebuilt from the staged area.
      await (await this.restoreBuild(open)).add(open, command.seq, command.pairs)
    }
    if (step.clearStaged) {
      // A begin, an abort, a failed commit: no build survives them. Emptying the staged area is not atomic with the
      // batch after it; both are idempotent, and a crash between them applies the command again from the log.
      await this.dropRestoreBuild()
      await this.currentDb.clear({ gte: STAGED_PREFIX, lt: STAGED_END })
    }
    this.filter.beforeWrite(step.ops)
    await this.currentDb.batch([...SecretIndex.stored(step.ops), { type: 'put', key: APPLIED_KEY, value: encode(index) }])
    this.secrets.written(step.ops, this.readLive)
    this.recordCache.written(step.ops)
    this.appliedIndex = index
    this.openRestore = step.open
    return step.result
  }

  private async restoreBuild(open: RestoreProgress): Promise<RestoreBuild> {
    this.build ??= await RestoreBuild.open(this.files, this.currentDb, open)
    return this.build
  }

  private async dropRestoreBuild(): Promise<void> {
    await this.build?.close()
    this.build = undefined
    await this.files.remove('restore')
  }

  private async applyCommands(
    items: readonly ApplyItem[],
    produced?: (index: number, shipped: Shipped) => void,
    computed?: (index: number, result: ApplyResult) => void,
  ): Promise<ApplyResult[]> {
    // No batch of this store's is in flight here: a filter a lookup asked for may start (key-filter.ts).
    this.filter.startIfWanted(this.currentDb)
    // Through the filter, which answers lookups of what is certainly absent; each key read once per batch.
    const batch = new Txn(batchReader(this.applyReader))
    const results: ApplyResult[] = []
    const changes: Array<{ index: number; tables: Table[]; records: string[] }> = []
    const producedWrites: Array<[number, Shipped]> = []
    // Each changed table's index is written once per batch, at the last command that changed it: nothing reads it
    // back during the batch (the store keeps it in memory), and its encoding cost a microsecond per command.
    const tableIndexes = new Map<Table, number>()
    let expected = this.appliedIndex + 1
    for (const { command, index, refused, shipped } of items) {
      // The message is built only on failure: a template per command is a cost on every node's write path.
      if (index !== expected) assert(false, `apply of index ${index} after ${expected - 1}: commands must be applied once each, in order, without gaps`)
      expected++
      if (refused !== undefined) {
        results.push(refused)
        continue
      }
      if (shipped !== undefined) {
        // What the leader's apply wrote (its refusal during a restore included, as nothing).
        results.push(SHIPPED_RESULT)
        const { tables, records } = shipped
        batch.absorb(shipped.writes)
        if (tables.length === 0) continue
        for (const table of tables) tableIndexes.set(table, index)
        changes.push({ index, tables, records })
        continue
      }
      const ships = produced !== undefined && !NOT_SHIPPED.has(command.type)
      if (this.openRestore !== undefined && !APPLIED_DURING_RESTORE.has(command.type)) {
        results.push(applyError('restore_in_progress', `a snapshot restore is in progress (${this.openRestore.id}); every other write waits for it: retry when it is done`))
        if (ships) producedWrites.push([index, { v: command.v, type: command.type, writes: [] }])
        continue
      }
      const txn = new Txn(batch)
      const result = await dispatch(txn, command, index)
      results.push(result)
      // A command that fails writes nothing but the applied index: nothing is half-written.
      if (ships) producedWrites.push([index, { v: command.v, type: command.type, writes: result.ok ? [...txn.writes] : [] }])
      if (!result.ok) continue
      batch.absorb(txn.writes)
      // A command that touched no table (the same member address again) changes nothing anyone listens to.
      if (txn.touchedTables.size === 0) continue
      const tables = [...txn.touchedTables]
      for (const table of tables) tableIndexes.set(table, index)
      changes.push({ index, tables, records: [...txn.touchedRecords] })
    }
    const last = expected - 1
    for (const [table, index] of tableIndexes) batch.put(tableIndexKey(table), encode(index))
    batch.put(APPLIED_KEY, encode(last))
    if (!this.secretIndexMarked) batch.put(SECRET_INDEX_FORM_KEY, SECRET_INDEX_FORM)
    const ops: BatchOp[] = []
    for (const [key, value] of batch.writes) ops.push(value === null ? { type: 'del', key } : { type: 'put', key, value })
    this.filter.beforeWrite(ops)
    // The results are final here; handing them out now saves a caller the batch's write (issue 22).
    if (computed !== undefined && !LINKED_TABLES.some((table) => tableIndexes.has(table))) {
      for (const [n, { index }] of items.entries()) computed(index, results[n]!)
    }
    await this.db.batch(SecretIndex.stored(ops))
    this.secrets.written(ops, this.readLive)
    this.recordCache.written(ops)
    // Deleted tokens' keys stay in the filter: once they are many, it is filled again, in the background.
    void this.filter.refillIfOvergrown(this.db)
    this.appliedIndex = last
    this.secretIndexMarked = true
    for (const [table, index] of tableIndexes) this.tableIndexes.set(table, index)
    for (const { index, tables, records } of changes) {
      for (const listener of this.changeListeners) listener(tables, records, index)
      this.watches.notify(tables, records)
    }
    if (produced !== undefined) for (const [index, writes] of producedWrites) produced(index, writes)
    return results
  }

  /**
   * Applies log entries in batches of APPLY_BATCH_MAX, calling `applied` for each in order once its batch is written.
   * An entry of a version or type this build does not know throws (UnknownCommandError) after the entries before it
   * were applied. A malformed entry (validate.ts: bytes no build could apply, which a leader that checked nothing may
   * have written) never throws: it is applied as a no-op, the same on every replica, its result an invalid_input error,
   * and `applied` is called with a noop command for it.
   */
  async applyEntries<E extends LogEntry>(entries: readonly E[], applied?: (entry: E, command: Command, result: ApplyResult) => void, options: ApplyOptions<E> = {}): Promise<void> {
    const { produced, computed } = options
    for (let start = 0; start < entries.length; start += APPLY_BATCH_MAX) {
      const chunk = entries.slice(start, start + APPLY_BATCH_MAX)
      const { items, malformed, undecodable } = decodeEntries(chunk, options.shipped)
      const first = chunk[0]?.index ?? 0
      const results = await this.applyBatch(
        items,
        produced === undefined ? undefined : (index, shipped) => produced(chunk[index - first]!, shipped),
        computed === undefined ? undefined : (index, result) => computed(chunk[index - first]!, result),
      )
      for (const { index, message } of malformed) for (const listener of this.malformedListeners) listener(index, message)
      if (applied !== undefined) for (const [n, { command }] of items.entries()) applied(chunk[n]!, command, results[n]!)
      if (undecodable !== undefined) throw undecodable
    }
  }

  async close(): Promise<void> {
    this.filter.close()
    await this.build?.close()
    this.build = undefined
    await this.currentDb.close()
  }
}

/**
 * Shipped writes this build may apply instead of their command: the command is of a version and type it knows and
 * would ship, and every key is one a command's apply writes (a record, a unique or a non-unique index entry of a
 * known table, the bootstrap mark), never the store's own bookkeeping (applied index, restore, staged records). Gives
 * the tables and records they touch, as Txn.putRecord would have noted them; undefined to run the command instead.
 */
function acceptShipped(shipped: Shipped): ShippedChange | undefined {
  if (!isKnownCommand(shipped.v, shipped.type) || NOT_SHIPPED.has(shipped.type)) return undefined
  const tables = new Set<Table>()
  const records: string[] = []
  for (const [key] of shipped.writes) {
    if (key === BOOTSTRAP_KEY) continue
    const kind = key.slice(0, 2)
    const end = key.indexOf(SEP, 2)
    const table = end === -1 ? '' : key.slice(2, end)
    if ((kind !== `r${SEP}` && kind !== `u${SEP}` && kind !== `x${SEP}`) || !KNOWN_TABLES.has(table)) return undefined
    if (kind !== `r${SEP}`) continue
    tables.add(table as Table)
    records.push(key)
  }
  return { writes: shipped.writes, tables: [...tables], records }
}
