/**
 * Where the state's databases live: the live one, the one a snapshot from the leader is staged in, and the one being
 * retired during a switch. The state machine and the snapshot switch reach the disk only through `StateFiles`, so that
 * the simulator can run them over a simulated disk whose crashes lose what was not synced.
 *
 * Durability contract: a database's writes follow its own `sync` options; `mark` is durable when it resolves;
 * `rename` and `remove` are atomic, and durable once `syncDirectory` resolves (POSIX: a rename reaches the disk with
 * the directory's fsync, not before).
 */
import { open, rename, rm, stat, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { openStateDb, type StateDb } from './reader.js'

export type StateDirectoryName = 'live' | 'incoming' | 'old'

export interface StateFiles {
  /** Opens (creating if needed) the database of `name`. */
  openDb(name: StateDirectoryName): Promise<StateDb>
  exists(name: StateDirectoryName): Promise<boolean>
  remove(name: StateDirectoryName): Promise<void>
  rename(from: StateDirectoryName, to: StateDirectoryName): Promise<void>
  /** Writes the empty file `marker` inside `name`'s directory, durably. */
  mark(name: StateDirectoryName, marker: string): Promise<void>
  hasMark(name: StateDirectoryName, marker: string): Promise<boolean>
  unmark(name: StateDirectoryName, marker: string): Promise<void>
  /** Makes every rename and removal so far durable. */
  syncDirectory(): Promise<void>
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

async function fsync(path: string): Promise<void> {
  const handle = await open(path, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/** The state's databases as directories: `state` (live), `state.incoming` (staged), `state.old` (being retired). */
export function directoryFiles(stateDirectory: string): StateFiles {
  const path = (name: StateDirectoryName): string => (name === 'live' ? stateDirectory : `${stateDirectory}.${name}`)
  return {
    openDb: (name) => openStateDb(path(name)),
    exists: (name) => exists(path(name)),
    remove: (name) => rm(path(name), { recursive: true, force: true }),
    rename: (from, to) => rename(path(from), path(to)),
    async mark(name, marker) {
      const file = join(path(name), marker)
      await writeFile(file, '')
      await fsync(file)
      await fsync(path(name))
    },
    hasMark: (name, marker) => exists(join(path(name), marker)),
    unmark: (name, marker) => rm(join(path(name), marker), { force: true }),
    syncDirectory: () => fsync(dirname(stateDirectory)),
  }
}
