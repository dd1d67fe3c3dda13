/**
 * Change notifications per table and per record, for blocking queries. A waiter subscribes a callback and gets back
 * an unsubscribe function; nothing is held after either fires or the waiter gives up, so ten thousand queries that
 * time out leave nothing behind.
 */
import type { Table } from './keys.js'

type Listener = () => void

export class Watches {
  private readonly byTable = new Map<Table, Set<Listener>>()
  private readonly byRecord = new Map<string, Set<Listener>>()

  /** Calls `listener` once, at the next change of the table (or of any of `recordKeys` when given). */
  subscribe(table: Table, recordKeys: readonly string[] | undefined, listener: Listener): () => void {
    let fired = false
    const once: Listener = () => {
      if (fired) return
      fired = true
      unsubscribe()
      listener()
    }
    const targets: Array<[Map<string, Set<Listener>>, string]> =
      recordKeys === undefined ? [[this.byTable as Map<string, Set<Listener>>, table]] : recordKeys.map((key) => [this.byRecord, key])
    for (const [map, key] of targets) add(map, key, once)
    const unsubscribe = (): void => {
      for (const [map, key] of targets) remove(map, key, once)
    }
    return unsubscribe
  }

  notify(tables: Iterable<Table>, recordKeys: Iterable<string>): void {
    const listeners: Listener[] = []
    for (const table of tables) listeners.push(...(this.byTable.get(table) ?? []))
    for (const key of recordKeys) listeners.push(...(this.byRecord.get(key) ?? []))
    for (const listener of listeners) listener()
  }

  /** Wakes every waiter, as a snapshot restore must. */
  notifyAll(): void {
    const listeners = [...this.byTable.values(), ...this.byRecord.values()].flatMap((set) => [...set])
    for (const listener of listeners) listener()
  }

  get size(): number {
    let count = 0
    for (const set of this.byTable.values()) count += set.size
    for (const set of this.byRecord.values()) count += set.size
    return count
  }
}

function add(map: Map<string, Set<Listener>>, key: string, listener: Listener): void {
  let set = map.get(key)
  if (set === undefined) {
    set = new Set()
    map.set(key, set)
  }
  set.add(listener)
}

function remove(map: Map<string, Set<Listener>>, key: string, listener: Listener): void {
  const set = map.get(key)
  if (set === undefined) return
  set.delete(listener)
  if (set.size === 0) map.delete(key)
}
