/**
 * One command's writes, collected in memory and committed in a single LevelDB batch together with the last applied
 * index: a kill -9 either sees all of a command or none of it, and never applies it twice.
 *
 * Reads through a transaction see its own pending writes first, then its base: LevelDB, or the transaction of the
 * commands before it in the same batch (StateStore.applyBatch), so a handler reads back what it or they just wrote.
 */
import { encode } from './codec.js'
import { dbReader, type Reader, type StateDb } from './reader.js'
import {
  indexKey,
  recordKey,
  uniqueKey,
  uniqueValue,
  type Table,
} from './keys.js'

export class Txn implements Reader {
  /** Pending writes: a Buffer is a put, null a delete. */
  readonly writes = new Map<string, Buffer | null>()
  readonly touchedTables = new Set<Table>()
  /** Record keys (as recordKey gives them) that this command created, changed or deleted. */
  readonly touchedRecords = new Set<string>()
  private readonly base: Reader

  constructor(base: StateDb | Reader) {
    this.base = 'getSync' in base ? dbReader(base) : base
  }

  /**
   * Takes on a command's writes: those of a transaction applied on top of this one (its base was this one), or those
   * a leader's apply of the command produced (StateStore's shipped writes).
   */
  absorb(writes: Iterable<readonly [string, Buffer | null]>): void {
    for (const [key, value] of writes) this.writes.set(key, value)
  }

  async get(key: string): Promise<Buffer | undefined> {
    const pending = this.writes.get(key)
    if (pending === null) return undefined
    if (pending !== undefined) return pending
    return this.base.get(key)
  }

  async keys(prefix: string): Promise<string[]> {
    const found = new Set(await this.base.keys(prefix))
    for (const [key, value] of this.writes) {
      if (!key.startsWith(prefix)) continue
      if (value === null) found.delete(key)
      else found.add(key)
    }
    // LevelDB orders keys by their UTF-8 bytes; sort the merged set the same way.
    return [...found].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
  }

  async values(prefix: string): Promise<Buffer[]> {
    const keys = await this.keys(prefix)
    const values: Buffer[] = []
    for (const key of keys) {
      const value = await this.get(key)
      if (value !== undefined) values.push(value)
    }
    return values
  }

  put(key: string, value: Buffer): void {
    this.writes.set(key, value)
  }

  del(key: string): void {
    this.writes.set(key, null)
  }

  putRecord(table: Table, key: string, record: unknown): void {
    const full = recordKey(table, key)
    this.put(full, encode(record))
    this.touchedTables.add(table)
    this.touchedRecords.add(full)
  }

  delRecord(table: Table, key: string): void {
    const full = recordKey(table, key)
    this.del(full)
    this.touchedTables.add(table)
    this.touchedRecords.add(full)
  }

  putUnique(table: Table, index: string, value: string, key: string): void {
    this.put(uniqueKey(table, index, value), uniqueValue(table, index, key))
  }

  delUnique(table: Table, index: string, value: string): void {
    this.del(uniqueKey(table, index, value))
  }

  putIndex(table: Table, index: string, value: string, key: string): void {
    this.put(indexKey(table, index, value, key), EMPTY)
  }

  delIndex(table: Table, index: string, value: string, key: string): void {
    this.del(indexKey(table, index, value, key))
  }

  /** Replaces the entries of one non-unique index for a record: removes the old values, adds the new ones. */
  replaceIndex(table: Table, index: string, key: string, before: Iterable<string>, after: Iterable<string>): void {
    const next = new Set(after)
    for (const value of before) if (!next.has(value)) this.delIndex(table, index, value, key)
    for (const value of next) this.putIndex(table, index, value, key)
  }

}

const EMPTY = Buffer.alloc(0)
