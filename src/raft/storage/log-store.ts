/**
 * The durable log: entries by index in their own LevelDB database (apart from the state, so that a snapshot install
 * can replace the state without touching the log). This was the log of a single server in releases before one Raft
 * path; it is read only to upgrade such a data dir (src/agent/replicas.ts) and by `warden recover` to refuse one.
 *
 * Durability: `append(..., { sync: true })` resolves only after LevelDB has synced the batch to disk, so an entry
 * whose append resolved survives kill -9. Ordering: appends must be called one at a time, with contiguous indexes.
 */
import { Level } from 'level'
import { Packr } from 'msgpackr'
import { assert } from '../../lib/assert.js'

export interface LogEntry {
  index: number
  term: number
  /** The encoded command. */
  data: Buffer
}

const packr = new Packr({ useRecords: false })
const ENTRY_PREFIX = 'e'
const INDEX_WIDTH = 16

function entryKey(index: number): string {
  return ENTRY_PREFIX + index.toString(16).padStart(INDEX_WIDTH, '0')
}

export class LogStore {
  private last = 0
  private first = 1

  private constructor(private readonly db: Level<string, Buffer>) {}

  static async open(directory: string): Promise<LogStore> {
    const db = new Level<string, Buffer>(directory, { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    const store = new LogStore(db)
    for await (const key of db.keys({ gte: ENTRY_PREFIX, lt: 'f', reverse: true, limit: 1 })) store.last = parseInt(key.slice(1), 16)
    for await (const key of db.keys({ gte: ENTRY_PREFIX, lt: 'f', limit: 1 })) store.first = parseInt(key.slice(1), 16)
    if (store.last === 0) store.first = 1
    return store
  }

  get lastIndex(): number {
    return this.last
  }

  get firstIndex(): number {
    return this.first
  }

  async append(entries: readonly LogEntry[], options: { sync: boolean }): Promise<void> {
    if (entries.length === 0) return
    let expected = this.last + 1
    for (const entry of entries) {
      assert(entry.index === expected, `log append out of order: got ${entry.index}, expected ${expected}`)
      expected += 1
    }
    await this.db.batch(
      entries.map((entry) => ({ type: 'put' as const, key: entryKey(entry.index), value: packr.pack({ term: entry.term, data: entry.data }) })),
      { sync: options.sync },
    )
    this.last = expected - 1
  }

  /** Entries with lo <= index <= hi, in order. */
  async entries(lo: number, hi: number): Promise<LogEntry[]> {
    const result: LogEntry[] = []
    if (hi < lo) return result
    for await (const [key, value] of this.db.iterator({ gte: entryKey(lo), lte: entryKey(hi) })) {
      const decoded = packr.unpack(value) as { term: number; data: Buffer }
      result.push({ index: parseInt(key.slice(1), 16), term: decoded.term, data: Buffer.from(decoded.data) })
    }
    return result
  }

  async close(): Promise<void> {
    await this.db.close()
  }
}
