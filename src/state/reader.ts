/**
 * Read access to the state database, shared by apply (through a transaction that sees its own pending writes) and by
 * the HTTP layer (straight from LevelDB). Lookups that both need (a policy by name, tokens by policy, ...) are
 * written once against this interface.
 */
import { Level } from 'level'
import { decode } from './codec.js'
import type { KeyFilter } from './key-filter.js'
import { prefixEnd, SECRET_INDEX_PREFIX } from './keys.js'
import { heldDigests, type SecretIndex } from './secret-index.js'

export type StateDb = Level<string, Buffer>

/** One write of a batch to a state database. */
export type BatchOp = { type: 'put'; key: string; value: Buffer } | { type: 'del'; key: string }

/**
 * LevelDB keeps a table file mapped into memory for as long as its table cache holds it open (up to 1,000 maps on a
 * 64-bit build), and every mapped page a read touched counts in the process's RSS. At a million tokens the state is
 * a few hundred 2 MiB tables, and streaming a snapshot reads all of them: the leader's RSS grew by the size of the
 * whole database. A small table cache unmaps tables it evicts, which bounds the mapped part to about
 * (STATE_OPEN_FILES - 10) × 2 MiB; the price is reopening a table (its index and filter blocks) on a cache miss.
 */
export const STATE_OPEN_FILES = 64

/**
 * The memtable LevelDB fills before writing a level-0 table (its default is 4 MiB). Every level-0 table of the state
 * spans most of its key space (a batch writes at the ends of several tables), so each one merged into level 1
 * rewrites much of level 1: four times larger memtables rewrite it a quarter as often. Token creates at 64 connections
 * for 60 s (docs/benchmarks.md, issue 22): 9.9 KB compacted per write at 4 MiB, 3.0 KB at 16 MiB, 1.9 KB at 32 MiB,
 * while a token's SecretID index was a hash in LevelDB; since it is held in memory, 891 B at 4 MiB and 297 B at 16 MiB.
 * The price is memory: up to two memtables (one being written out), 32 MiB at most. For the live state only (files.ts).
 */
export const STATE_WRITE_BUFFER_BYTES = 16 * 1024 * 1024

/** Opens (creating if needed) a state database: the live one, or a snapshot being received. */
export async function openStateDb(directory: string, options: { writeBufferBytes?: number } = {}): Promise<StateDb> {
  const db: StateDb = new Level<string, Buffer>(directory, {
    keyEncoding: 'utf8',
    valueEncoding: 'buffer',
    maxOpenFiles: STATE_OPEN_FILES,
    ...(options.writeBufferBytes === undefined ? {} : { writeBufferSize: options.writeBufferBytes }),
  })
  await db.open()
  return db
}

export interface Reader {
  get(key: string): Promise<Buffer | undefined>
  /** Keys that start with `prefix`, in key order. */
  keys(prefix: string): Promise<string[]>
  /** Values of keys that start with `prefix`, in key order. */
  values(prefix: string): Promise<Buffer[]>
}

/**
 * Reads `db`, or with `snapshot` one LevelDB snapshot of it: whatever is applied after the snapshot was taken stays
 * out of its answers, for reads that yield to the event loop between their parts (a paced list, lib/pace.ts), which
 * would otherwise mix states.
 */
export function dbReader(db: StateDb, snapshot?: ReturnType<StateDb['snapshot']>, filter?: KeyFilter, secrets?: SecretIndex): Reader {
  const reader = storedReader(db, snapshot, filter)
  // The token secret index is held in memory (secret-index.ts): its entries are answered from there, each checked
  // against the token record as this reader reads it. A snapshot reader (StateStore.view) so reads the index as it is
  // now, not as it was at the snapshot: none of its callers (paced lists) looks a secret up. Nothing stores the index,
  // so a reader without it refuses those keys rather than answer every token "absent" for its secret.
  const held = heldDigests(snapshot === undefined ? (key) => db.getSync(key) : (key) => db.getSync(key, { snapshot }))
  const get = reader.get
  reader.get = async (key) => {
    if (!key.startsWith(SECRET_INDEX_PREFIX)) return get(key)
    if (secrets === undefined) throw new Error('the token secret index is held in memory: read the state through its store (StateStore.reader)')
    return secrets.resolve(key.slice(SECRET_INDEX_PREFIX.length), held)
  }
  return reader
}

/** What `db` (or its `snapshot`) stores. */
function storedReader(db: StateDb, snapshot?: ReturnType<StateDb['snapshot']>, filter?: KeyFilter): Reader {
  const range = (prefix: string): { gte: string; lt: string; snapshot?: ReturnType<StateDb['snapshot']> } => ({
    gte: prefix,
    lt: prefixEnd(prefix),
    ...(snapshot === undefined ? {} : { snapshot }),
  })
  return {
    // A point lookup answered synchronously costs about a microsecond; the asynchronous get goes through libuv's
    // thread pool and costs tens (the benchmark's largest hot spot, eight of them per token create). The interface
    // stays a promise so callers need not change. Without options getSync takes abstract-level's fast path.
    // The live state's filter answers most lookups of a key that is not there (key-filter.ts) without LevelDB; a
    // lookup it could have answered before it was ready asks for it.
    get:
      snapshot !== undefined
        ? async (key) => db.getSync(key, { snapshot })
        : filter === undefined
          ? async (key) => db.getSync(key)
          : async (key) => {
              if (filter.covers(key)) {
                if (!filter.ready) filter.want()
                else if (!filter.mightHold(key)) return undefined
              }
              return db.getSync(key)
            },
    keys: async (prefix) => {
      const keys: string[] = []
      for await (const key of db.keys(range(prefix))) keys.push(key)
      return keys
    },
    values: async (prefix) => {
      const values: Buffer[] = []
      for await (const value of db.values(range(prefix))) values.push(value)
      return values
    },
  }
}

/**
 * `base`, with each key's answer kept once read: for the reads of one apply batch (StateStore.applyCommands), during
 * which nothing writes the database: the batch's own writes wait in its transaction until its end, and the apply loop
 * runs one batch at a time. A batch of token creates that link the same policy then reads that policy once, not once
 * per create. At most a batch's reads are held, and only until the batch ends.
 */
export function batchReader(base: Reader): Reader {
  const read = new Map<string, Buffer | undefined>()
  return {
    get: async (key) => {
      if (read.has(key)) return read.get(key)
      const value = await base.get(key)
      read.set(key, value)
      return value
    },
    keys: (prefix) => base.keys(prefix),
    values: (prefix) => base.values(prefix),
  }
}

export async function getDecoded<T>(reader: Reader, key: string): Promise<T | undefined> {
  const bytes = await reader.get(key)
  return bytes === undefined ? undefined : decode<T>(bytes)
}
