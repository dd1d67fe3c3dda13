/**
 * The records of the small tables apply reads over and over (policies and roles a token links, auth methods and
 * binding rules a login reads), held in memory for the store's apply, which is their only writer.
 *
 * Why: a LevelDB point read of a key that lives below level 0 consults every level-0 table on its way (each spans
 * most of the key space: a batch writes at the ends of several tables), and LevelDB charges such a read to the first table
 * it consulted; a table charged about once per 16 KiB of its size is compacted for it (LevelDB's seek compaction).
 * A leader's apply reads the policy its token creates link once per batch, a hundred times a second, and so compacted
 * its state nearly twice as much as its followers, which read nothing (docs/benchmarks.md, issue 22, tenth session).
 *
 * Consistency: the store updates the cache from each batch's writes right after LevelDB has taken the batch, before
 * anything else applies, and from each restore step's writes, and drops it whole when the state is replaced; only apply reads it, so
 * it never shows apply a record other than the one in LevelDB. Absent keys are not held. Bounded by RECORDS_MAX,
 * dropping the oldest held first.
 */
import { recordPrefix, type Table } from './keys.js'
import type { BatchOp, Reader } from './reader.js'

const CACHED_TABLES: readonly Table[] = ['policy', 'role', 'auth-method', 'binding-rule']
const CACHED_PREFIXES: readonly string[] = CACHED_TABLES.map((table) => recordPrefix(table))
/** Records held at most: a thousand policies and as many roles fit, at a few MB. */
export const RECORDS_MAX = 4096

export class RecordCache {
  private readonly records = new Map<string, Buffer>()

  static covers(key: string): boolean {
    // Every cached prefix starts with `r` and the separator: one comparison rules out most keys.
    if (key.charCodeAt(0) !== 0x72) return false
    for (const prefix of CACHED_PREFIXES) if (key.startsWith(prefix)) return true
    return false
  }

  /** `base` with the cached tables' records read through the cache. */
  reader(base: Reader): Reader {
    return {
      get: async (key) => {
        if (!RecordCache.covers(key)) return base.get(key)
        const held = this.records.get(key)
        if (held !== undefined) return held
        const value = await base.get(key)
        if (value !== undefined) this.hold(key, value)
        return value
      },
      keys: (prefix) => base.keys(prefix),
      values: (prefix) => base.values(prefix),
    }
  }

  /** Takes on a batch LevelDB has written: what it put is held (if held before), what it deleted is not. */
  written(ops: readonly BatchOp[]): void {
    for (const op of ops) {
      if (!RecordCache.covers(op.key)) continue
      // A copy: an encoded value may be a view of a larger buffer the encoder shares, which holding it would pin.
      if (op.type === 'put' && this.records.has(op.key)) this.records.set(op.key, Buffer.from(op.value))
      else this.records.delete(op.key)
    }
  }

  clear(): void {
    this.records.clear()
  }

  get size(): number {
    return this.records.size
  }

  private hold(key: string, value: Buffer): void {
    if (this.records.size >= RECORDS_MAX) this.records.delete(this.records.keys().next().value as string)
    this.records.set(key, value)
  }
}
