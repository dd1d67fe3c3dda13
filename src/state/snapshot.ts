/**
 * Snapshots of the state machine: the whole state database, read through one explicit LevelDB snapshot (a consistent
 * view at one applied index, whatever applies meanwhile) and streamed in bounded chunks; and the receiving side, which
 * builds the new state in a staging directory beside the live one and switches to it atomically.
 *
 * The switch survives a crash at any point: the staged database is marked complete only after everything is written
 * and synced, the renames are made durable with the directory's fsync before the old state is removed, and
 * `finishStateSwitch` (run before the state is opened at start) completes a switch that a crash interrupted, or
 * discards a staged state nobody installed. Databases (see files.ts): live, incoming (staging), old (being retired).
 */
import { decode } from './codec.js'
import type { StateDirectoryName, StateFiles } from './files.js'
import { APPLIED_KEY, RESTORE_KEY, STAGED_MARK_KEY, STAGED_PREFIX, prefixEnd } from './keys.js'
import type { StateDb } from './reader.js'
import type { StateStore } from './store.js'

export const CHUNK_BYTES_MAX = 512 * 1024
export const COMPLETE_MARKER = 'COMPLETE'

export interface StateSnapshotReader {
  /** The applied index the snapshot shows. */
  appliedIndex: number
  /** Key-value pairs in key order, in chunks of at most CHUNK_BYTES_MAX (one pair may exceed it alone). */
  chunks(): AsyncGenerator<Array<[string, Uint8Array]>>
  close(): Promise<void>
}

/**
 * `staged: false` leaves out a restore in progress (restore.ts), which a Raft snapshot must carry (a follower installing
 * it applies the restore's later chunks) and an archive must not (it shows the state that is, not one half-restored).
 */
export async function openStateSnapshot(store: StateStore, options: { staged: boolean } = { staged: true }): Promise<StateSnapshotReader> {
  const db = store.db
  const snapshot = db.snapshot()
  const applied = await db.get(APPLIED_KEY, { snapshot })
  const appliedIndex = applied === undefined ? 0 : decode<number>(applied)
  const ranges = options.staged ? [{}] : [{ lt: STAGED_PREFIX }, { gte: prefixEnd(STAGED_PREFIX) }]
  return {
    appliedIndex,
    async *chunks() {
      let chunk: Array<[string, Uint8Array]> = []
      let bytes = 0
      for (const range of ranges) for await (const [key, value] of db.iterator({ ...range, snapshot })) {
        if (!options.staged && key === RESTORE_KEY) continue
        chunk.push([key, value])
        bytes += key.length + value.length
        if (bytes >= CHUNK_BYTES_MAX) {
          yield chunk
          chunk = []
          bytes = 0
        }
      }
      if (chunk.length > 0) yield chunk
    },
    close: () => snapshot.close(),
  }
}

/** The receiving side: a fresh database in the staging place, filled chunk by chunk. */
export class IncomingState {
  private constructor(
    private readonly files: StateFiles,
    private readonly db: StateDb,
  ) {}

  static async create(files: StateFiles): Promise<IncomingState> {
    await files.remove('incoming')
    const db = await files.openDb('incoming')
    return new IncomingState(files, db)
  }

  async write(pairs: ReadonlyArray<readonly [string, Uint8Array]>): Promise<void> {
    await this.db.batch(pairs.map(([key, value]) => ({ type: 'put' as const, key, value: Buffer.from(value) })))
  }

  /** Syncs, closes and marks the staged state complete (durably); returns its applied index. */
  async complete(): Promise<number> {
    const applied = await this.db.get(APPLIED_KEY)
    await this.db.put(STAGED_MARK_KEY, Buffer.alloc(0), { sync: true })
    await this.db.close()
    await this.files.mark('incoming', COMPLETE_MARKER)
    return applied === undefined ? 0 : decode<number>(applied)
  }

  /** Removes the staged state. Safe to call at any point, and more than once. */
  async abort(): Promise<void> {
    if (this.db.status === 'open') await this.db.close()
    await this.files.remove('incoming')
  }
}

/** Discards a staged state (complete or not) that is not going to be installed. */
export async function discardStagedState(files: StateFiles): Promise<void> {
  await files.remove('incoming')
}

/**
 * Moves a complete staged state into place: live → old, staged → live, the directory synced so both renames are on
 * disk, then old removed. Each step is a rename, so a crash leaves one of the states `finishStateSwitch` recognises.
 */
export async function switchToStagedState(files: StateFiles, staged: 'incoming' | 'restore' = 'incoming'): Promise<void> {
  await files.remove('old')
  if (await files.exists('live')) await files.rename('live', 'old')
  await files.rename(staged, 'live')
  await files.syncDirectory()
  await files.unmark('live', COMPLETE_MARKER)
  await files.remove('old')
  await files.syncDirectory()
}

async function appliedIndexOf(files: StateFiles, name: StateDirectoryName): Promise<number> {
  const db = await files.openDb(name)
  try {
    const applied = await db.get(APPLIED_KEY)
    return applied === undefined ? 0 : decode<number>(applied)
  } finally {
    await db.close()
  }
}

/**
 * Run before opening the state at start. A staged state is switched in only when the Raft log already depends on it:
 * it is complete, the Raft snapshot was recorded at exactly its applied index (the install's persist step ran), and
 * it is newer than the live state. Anything else staged (a stream cut short, a snapshot the core refused, one whose
 * install never reached the log) is discarded: a start never switches in state older than what is live. A live state
 * missing because a crash came between the two renames is taken back from `old`.
 */
export async function finishStateSwitch(files: StateFiles, raftSnapshotIndex: number): Promise<void> {
  await finishRestore(files)
  if (await files.exists('incoming')) {
    let install = false
    if (raftSnapshotIndex > 0 && (await files.hasMark('incoming', COMPLETE_MARKER))) {
      const stagedIndex = await appliedIndexOf(files, 'incoming')
      const current = (await files.exists('live')) ? 'live' : (await files.exists('old')) ? 'old' : undefined
      const liveIndex = current === undefined ? 0 : await appliedIndexOf(files, current)
      install = stagedIndex === raftSnapshotIndex && stagedIndex > liveIndex
    }
    if (install) {
      // Also when the crash came between the renames: old is then the state being retired, and goes.
      await switchToStagedState(files)
      return
    }
    await files.remove('incoming')
  }
  if (!(await files.exists('live')) && (await files.exists('old'))) {
    await files.rename('old', 'live')
    await files.syncDirectory()
  }
  await files.remove('old')
}

/**
 * A restored state (restore.ts) is the result of applying a committed `restore.commit`: once complete it is switched in
 * if it is newer than the live state (a crash came between completing and switching, or between the renames), and
 * removed otherwise. One still being built is left to the state store, which keeps it while its restore is open.
 */
async function finishRestore(files: StateFiles): Promise<void> {
  if (!(await files.exists('restore')) || !(await files.hasMark('restore', COMPLETE_MARKER))) return
  const current = (await files.exists('live')) ? 'live' : (await files.exists('old')) ? 'old' : undefined
  const liveIndex = current === undefined ? 0 : await appliedIndexOf(files, current)
  if ((await appliedIndexOf(files, 'restore')) > liveIndex) {
    if (current === 'old') await files.rename('old', 'live')
    await switchToStagedState(files, 'restore')
    return
  }
  await files.remove('restore')
  await files.syncDirectory()
}
