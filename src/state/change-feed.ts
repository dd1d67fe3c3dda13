/**
 * The records of the replicated tables (policies, roles, tokens, config entries) that changed after a given log
 * index, remembered in memory by every server, so that a secondary datacenter replicating from this one asks for what
 * changed since its last round instead of listing every record (issue 19: a round under steady writes would
 * otherwise read 100,000 tokens to find fifty).
 *
 * The feed is complete, for each table, above that table's `from`: every change of the table applied with an index
 * above it is in it, deletions included (a record key changed and now missing was deleted). It starts at the applied
 * index when it is made, restarts after a snapshot replaced the state, and forgets its oldest changes beyond
 * CHANGES_MAX, raising the `from` of the table each forgotten change was of: a busy table (100,000 token creates)
 * does not push a quiet one (policies) out of reach. A secondary whose index is below a table's `from` lists that
 * table's records instead (the full walk). Nothing of it is replicated or written to disk: it
 * is this server's memory, which is why the answer says whether it covers the index asked for.
 */
import type { Table } from './keys.js'
import { recordPrefix } from './keys.js'
import type { StateStore } from './store.js'

/** Changes remembered at most: about 100 bytes each. At 500 writes a second, more than three minutes of them. */
export const CHANGES_MAX = 100_000

const FED_TABLES: readonly Table[] = ['policy', 'role', 'token', 'config']
/** Each fed table with its record keys' prefix, built once: record() runs on every apply of every server. */
const FED_PREFIXES: ReadonlyArray<readonly [Table, string]> = FED_TABLES.map((table) => [table, recordPrefix(table)])

interface Change {
  index: number
  table: Table
  /** The record's key within its table. */
  key: string
}

export class ChangeFeed {
  /** Every change with an index above this one is remembered, whatever its table. */
  private fromIndex: number
  /** Per table, every change of it above this index is remembered (at least fromIndex). */
  private readonly fromByTable = new Map<Table, number>()
  private changes: Change[] = []
  /** The first live position of `changes`: dropping from the front is a move of this, compacted now and then. */
  private head = 0

  constructor(
    store: StateStore,
    private readonly max = CHANGES_MAX,
  ) {
    this.fromIndex = store.lastApplied
    store.changeListeners.add((tables, recordKeys, index) => this.record(tables, recordKeys, index))
    store.resetListeners.add(() => {
      this.changes = []
      this.head = 0
      this.fromIndex = store.lastApplied
      this.fromByTable.clear()
    })
  }

  /** The index above which the feed is complete for `table` (for every table when none is named). */
  from(table?: Table): number {
    if (table !== undefined) return Math.max(this.fromIndex, this.fromByTable.get(table) ?? 0)
    return Math.max(this.fromIndex, ...this.fromByTable.values())
  }

  /**
   * The keys of `table`'s records changed after `index` (each once, in the order of their first change after it), or
   * undefined when the feed does not reach back that far or more than `max` records changed.
   */
  changedSince(table: Table, index: number, max = Number.POSITIVE_INFINITY): string[] | undefined {
    if (index < this.from(table)) return undefined
    const keys = new Set<string>()
    // From the newest back to the first change after `index`: the changes are in index order.
    for (let position = this.changes.length - 1; position >= this.head; position--) {
      const change = this.changes[position]!
      if (change.index <= index) break
      if (change.table !== table) continue
      keys.delete(change.key)
      keys.add(change.key)
      if (keys.size > max) return undefined
    }
    return [...keys].reverse()
  }

  private record(tables: readonly Table[], recordKeys: readonly string[], index: number): void {
    if (!tables.some((table) => FED_TABLES.includes(table))) return
    for (const full of recordKeys) {
      const fed = FED_PREFIXES.find(([, prefix]) => full.startsWith(prefix))
      if (fed !== undefined) this.changes.push({ index, table: fed[0], key: full.slice(fed[1].length) })
    }
    while (this.changes.length - this.head > this.max) {
      // Forgetting a change forgets its index: the feed is complete for its table only above it from now on.
      const forgotten = this.changes[this.head]!
      this.fromByTable.set(forgotten.table, Math.max(this.fromByTable.get(forgotten.table) ?? 0, forgotten.index))
      this.head++
    }
    if (this.head > 4096 && this.head * 2 > this.changes.length) {
      this.changes = this.changes.slice(this.head)
      this.head = 0
    }
  }
}

/** One feed per state store, made at the first ask (an agent asks when it starts, so its feed reaches back to then). */
const feeds = new WeakMap<StateStore, ChangeFeed>()

export function changeFeedOf(store: StateStore): ChangeFeed {
  let feed = feeds.get(store)
  if (feed === undefined) {
    feed = new ChangeFeed(store)
    feeds.set(store, feed)
  }
  return feed
}
