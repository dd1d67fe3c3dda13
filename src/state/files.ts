/**
 * Where the state's databases live: the live one, the one a snapshot from the leader is staged in, and the one being
 * retired during a switch. The state machine and the snapshot switch reach the disk only through `StateFiles`, so that
 * the simulator can run them over a simulated disk whose crashes lose what was not synced.
 *
 * Durability contract: a database's writes follow its own `sync` options; `mark` is durable when it resolves;
 * `rename` and `remove` are atomic, and durable once `syncDirectory` resolves (POSIX: a rename reaches the disk with
 * the directory's fsync, not before).
 */
import { rename, rm, writeFile } from 'node:fs/promises'
import { fsyncPath, pathExists } from '../lib/files.js'
import { dirname, join } from 'node:path'
import { openStateDb, STATE_WRITE_BUFFER_BYTES, type StateDb } from './reader.js'

/** live; incoming: a snapshot from the leader being staged; restore: a restored state being built (restore.ts); old. */
export type StateDirectoryName = 'live' | 'incoming' | 'restore' | 'old'

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



/** The state's databases as directories: `state` (live), `state.incoming` and `state.restore` (staged), `state.old` (being retired). */
export function directoryFiles(stateDirectory: string): StateFiles {
  const path = (name: StateDirectoryName): string => (name === 'live' ? stateDirectory : `${stateDirectory}.${name}`)
  return {
    // Only the live state takes writes at the rate of the API: a staged database (a snapshot streaming in, a restore
    // being built) keeps LevelDB's default buffer, so that two databases side by side do not double the memtables.
    openDb: (name) => openStateDb(path(name), name === 'live' ? { writeBufferBytes: STATE_WRITE_BUFFER_BYTES } : {}),
    exists: (name) => pathExists(path(name)),
    remove: (name) => rm(path(name), { recursive: true, force: true }),
    rename: (from, to) => rename(path(from), path(to)),
    async mark(name, marker) {
      const file = join(path(name), marker)
      await writeFile(file, '')
      await fsyncPath(file)
      await fsyncPath(path(name))
    },
    hasMark: (name, marker) => pathExists(join(path(name), marker)),
    unmark: (name, marker) => rm(join(path(name), marker), { force: true }),
    syncDirectory: () => fsyncPath(dirname(stateDirectory)),
  }
}
