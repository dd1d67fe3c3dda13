/**
 * Snapshots of the state machine: the whole state database, read through one explicit LevelDB snapshot (a consistent
 * view at one applied index, whatever applies meanwhile) and streamed in bounded chunks; and the receiving side, which
 * builds the new state in a staging directory beside the live one and switches to it atomically.
 *
 * The switch survives a crash at any point: the staged directory is marked complete only after everything is written
 * and synced, and `finishStateSwitch` (run before the state is opened at start) completes a switch that a crash
 * interrupted. Directories: `state` (live), `state.incoming` (staging), `state.old` (being retired).
 */
import { rename, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { decode } from './codec.js'
import { APPLIED_KEY } from './keys.js'
import { openStateDb, type StateDb } from './reader.js'
import type { StateStore } from './store.js'

export const CHUNK_BYTES_MAX = 512 * 1024
const COMPLETE_MARKER = 'COMPLETE'

export interface StateSnapshotReader {
  /** The applied index the snapshot shows. */
  appliedIndex: number
  /** Key-value pairs in key order, in chunks of at most CHUNK_BYTES_MAX (one pair may exceed it alone). */
  chunks(): AsyncGenerator<Array<[string, Uint8Array]>>
  close(): Promise<void>
}

export async function openStateSnapshot(store: StateStore): Promise<StateSnapshotReader> {
  const db = store.db
  const snapshot = db.snapshot()
  const applied = await db.get(APPLIED_KEY, { snapshot })
  const appliedIndex = applied === undefined ? 0 : decode<number>(applied)
  return {
    appliedIndex,
    async *chunks() {
      let chunk: Array<[string, Uint8Array]> = []
      let bytes = 0
      for await (const [key, value] of db.iterator({ snapshot })) {
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

export function stagingDirectory(stateDirectory: string): string {
  return `${stateDirectory}.incoming`
}

/** The receiving side: a fresh database in the staging directory, filled chunk by chunk. */
export class IncomingState {
  private constructor(
    private readonly directory: string,
    private readonly db: StateDb,
  ) {}

  static async create(stateDirectory: string): Promise<IncomingState> {
    const directory = stagingDirectory(stateDirectory)
    await rm(directory, { recursive: true, force: true })
    const db = await openStateDb(directory)
    return new IncomingState(directory, db)
  }

  async write(pairs: ReadonlyArray<readonly [string, Uint8Array]>): Promise<void> {
    await this.db.batch(pairs.map(([key, value]) => ({ type: 'put' as const, key, value: Buffer.from(value) })))
  }

  /** Syncs, closes and marks the staged state complete; returns its applied index. */
  async complete(): Promise<number> {
    const applied = await this.db.get(APPLIED_KEY)
    await this.db.put('m\u0000staged', Buffer.alloc(0), { sync: true })
    await this.db.close()
    await writeFile(join(this.directory, COMPLETE_MARKER), '')
    return applied === undefined ? 0 : decode<number>(applied)
  }

  async abort(): Promise<void> {
    if (this.db.status === 'open') await this.db.close()
    await rm(this.directory, { recursive: true, force: true })
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

/**
 * Moves a complete staged state into place: live → old, staged → live, then removes old. Each step is a rename, so
 * a crash leaves one of the states `finishStateSwitch` recognises.
 */
export async function switchToStagedState(stateDirectory: string): Promise<void> {
  const staged = stagingDirectory(stateDirectory)
  const old = `${stateDirectory}.old`
  await rm(old, { recursive: true, force: true })
  if (await exists(stateDirectory)) await rename(stateDirectory, old)
  await rename(staged, stateDirectory)
  await rm(join(stateDirectory, COMPLETE_MARKER), { force: true })
  await rm(old, { recursive: true, force: true })
}

/**
 * Run before opening the state at start. A complete staged state that the Raft log already depends on (its snapshot
 * index is at least the staged applied index) finishes switching in; an incomplete one is discarded; a live state
 * missing because a crash came between the two renames is taken from `old` or from the staging directory.
 */
export async function finishStateSwitch(stateDirectory: string, raftSnapshotIndex: number): Promise<void> {
  const staged = stagingDirectory(stateDirectory)
  const old = `${stateDirectory}.old`
  if (await exists(staged)) {
    const complete = await exists(join(staged, COMPLETE_MARKER))
    if (complete && raftSnapshotIndex > 0) {
      const db = await openStateDb(staged)
      const applied = await db.get(APPLIED_KEY)
      await db.close()
      const stagedIndex = applied === undefined ? 0 : decode<number>(applied)
      if (stagedIndex <= raftSnapshotIndex && stagedIndex > 0) {
        await switchToStagedState(stateDirectory)
        return
      }
    }
    await rm(staged, { recursive: true, force: true })
  }
  if (!(await exists(stateDirectory)) && (await exists(old))) await rename(old, stateDirectory)
  await rm(old, { recursive: true, force: true })
}
