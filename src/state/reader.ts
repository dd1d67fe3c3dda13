/**
 * Read access to the state database, shared by apply (through a transaction that sees its own pending writes) and by
 * the HTTP layer (straight from LevelDB). Lookups that both need (a policy by name, tokens by policy, ...) are
 * written once against this interface.
 */
import type { Level } from 'level'
import { decode } from './codec.js'
import { prefixEnd } from './keys.js'

export type StateDb = Level<string, Buffer>

export interface Reader {
  get(key: string): Promise<Buffer | undefined>
  /** Keys that start with `prefix`, in key order. */
  keys(prefix: string): Promise<string[]>
  /** Values of keys that start with `prefix`, in key order. */
  values(prefix: string): Promise<Buffer[]>
}

export function dbReader(db: StateDb): Reader {
  return {
    // A point lookup answered synchronously costs about a microsecond; the asynchronous get goes through libuv's
    // thread pool and costs tens (the benchmark's largest hot spot, eight of them per token create). The interface
    // stays a promise so callers need not change.
    get: async (key) => db.getSync(key),
    keys: async (prefix) => {
      const keys: string[] = []
      for await (const key of db.keys({ gte: prefix, lt: prefixEnd(prefix) })) keys.push(key)
      return keys
    },
    values: async (prefix) => {
      const values: Buffer[] = []
      for await (const value of db.values({ gte: prefix, lt: prefixEnd(prefix) })) values.push(value)
      return values
    },
  }
}

export async function getDecoded<T>(reader: Reader, key: string): Promise<T | undefined> {
  const bytes = await reader.get(key)
  return bytes === undefined ? undefined : decode<T>(bytes)
}
