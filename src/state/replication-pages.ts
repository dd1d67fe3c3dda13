/**
 * What a primary datacenter serves to the secondaries replicating from it (issue 19), in bounded pages, from its
 * stored records as they are (links by ID, a token's SecretID, a config entry's fields), so that a secondary applies
 * exactly what the primary holds and computes the same Hash.
 *
 * - A *full walk* lists a stream in key order, a page at a time from a cursor: each record's ID and Hash, and the
 *   whole record only when it changed after `since` (the index the secondary holds everything up to), so a secondary
 *   that is nearly caught up moves IDs and hashes, not records.
 * - A *delta* answers with the records changed after `since` and the IDs of those deleted, from the server's change
 *   feed (change-feed.ts), when the feed reaches back that far and the change is small enough for one answer.
 *
 * Local tokens and `exported-services` entries never appear: they are their datacenter's own.
 */
import { createHash } from 'node:crypto'
import { decode } from './codec.js'
import type { ChangeFeed } from './change-feed.js'
import { prefixEnd, recordKey, recordPrefix, SEP, type Table } from './keys.js'
import type { StateDb } from './reader.js'
import { configDeleteKey, LOCAL_CONFIG_KINDS, type ReplicatedStream } from './replication.js'

export const STREAM_TABLES: Readonly<Record<ReplicatedStream, Table>> = { policies: 'policy', roles: 'role', tokens: 'token', config: 'config' }

/** Records a page lists at most, and the most its caller may ask for. */
export const PAGE_ITEMS_DEFAULT = 2_000
export const PAGE_ITEMS_MAX = 10_000
/**
 * Bytes of JSON a page's items take at most, whole records and IDs with hashes alike: well within a forwarded answer
 * (6 MiB). One record alone is at most about 1 MiB of JSON (it came in a request body of at most that), so it fits.
 */
export const PAGE_BYTES_MAX = 4 * 1024 * 1024
/** Records a delta names at most; a larger change is answered as a full walk. */
export const DELTA_ITEMS_MAX = 2_000

export interface StreamItem {
  /** The record's ID in the stream: AccessorID for tokens, configDeleteKey for config entries. */
  ID: string
  Hash: string
  /** The stored record, when the page carries it. */
  Record?: Record<string, unknown>
}

export interface StreamPage {
  /** `delta`: Records are every change after `since`, Deleted every deletion. `full`: one page of the walk. */
  Mode: 'delta' | 'full'
  Records: StreamItem[]
  Deleted: string[]
  /** Where the next page of a full walk starts (an opaque cursor), or '' when the walk is done. */
  Next: string
}

/** The stream's view of a stored record, or undefined when it is not the stream's (a local token, exported-services). */
export function streamItemOf(stream: ReplicatedStream, record: Record<string, unknown>): { ID: string; Hash: string } | undefined {
  if (stream === 'config') {
    if (LOCAL_CONFIG_KINDS.has(String(record['Kind']))) return undefined
    return { ID: configDeleteKey(record as { Kind: string; Namespace: string; Name: string }), Hash: configContentHash(record) }
  }
  if (stream === 'tokens') {
    if (record['Local'] === true) return undefined
    return { ID: String(record['AccessorID']), Hash: String(record['Hash']) }
  }
  return { ID: String(record['ID']), Hash: String(record['Hash']) }
}

/** A config entry has no Hash of its own: the digest of its fields but its indexes, keys in order. */
export function configContentHash(entry: Record<string, unknown>): string {
  const { CreateIndex: _create, ModifyIndex: _modify, ...fields } = entry
  return createHash('sha256').update(stableText(fields), 'utf8').digest('base64')
}

function stableText(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableText).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${stableText((value as Record<string, unknown>)[key])}`)
      .join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/** The stream ID of a record by its table key (for deletions, whose record is gone). */
function streamIdOfKey(stream: ReplicatedStream, key: string): string {
  if (stream !== 'config') return key
  const [Kind = '', Namespace = '', Name = ''] = key.split(SEP)
  return configDeleteKey({ Kind, Namespace, Name })
}

/** The changes after `since` as one answer, or undefined when the feed does not reach back or they are too many. */
export function deltaPage(db: StateDb, feed: ChangeFeed, stream: ReplicatedStream, since: number): StreamPage | undefined {
  const table = STREAM_TABLES[stream]
  const keys = feed.changedSince(table, since, DELTA_ITEMS_MAX)
  if (keys === undefined) return undefined
  const page: StreamPage = { Mode: 'delta', Records: [], Deleted: [], Next: '' }
  let bytes = 0
  for (const key of keys) {
    const stored = db.getSync(recordKey(table, key))
    if (stored === undefined) {
      // A deleted token may have been a local one: its AccessorID says nothing, and the secondary deletes by it only
      // a global token of its own.
      const id = streamIdOfKey(stream, key)
      bytes += id.length + 4
      page.Deleted.push(id)
      continue
    }
    const record = decode<Record<string, unknown>>(stored)
    const item = streamItemOf(stream, record)
    if (item === undefined) continue
    const whole = { ...item, Record: record }
    bytes += jsonBytes(whole)
    // Too large for one answer (many large records): the walk pages it.
    if (bytes > PAGE_BYTES_MAX) return undefined
    page.Records.push(whole)
  }
  return page
}

/**
 * One page of the full walk from `cursor` (''= the start): at most `limit` records, whole when changed after `since`,
 * and at most PAGE_BYTES_MAX of items as JSON. Scans at most four times `limit` keys, so a page of a table full
 * of local tokens still ends soon (with a cursor past them).
 */
export async function walkPage(db: StateDb, stream: ReplicatedStream, since: number, cursor: string, limit: number): Promise<StreamPage> {
  const prefix = recordPrefix(STREAM_TABLES[stream])
  const after = cursor === '' ? undefined : prefix + Buffer.from(cursor, 'base64url').toString('utf8')
  const page: StreamPage = { Mode: 'full', Records: [], Deleted: [], Next: '' }
  let bytes = 0
  let scanned = 0
  let previous = after ?? prefix
  const iterator = db.iterator({ ...(after === undefined ? { gte: prefix } : { gt: after }), lt: prefixEnd(prefix) })
  try {
    for await (const [key, stored] of iterator) {
      scanned += 1
      const record = decode<Record<string, unknown>>(stored)
      const item = streamItemOf(stream, record)
      if (item !== undefined) {
        const listed: StreamItem = Number(record['ModifyIndex'] ?? 0) > since ? { ...item, Record: record } : item
        const size = jsonBytes(listed)
        // Full: this record starts the next page (the cursor is the key before it).
        if (page.Records.length > 0 && bytes + size > PAGE_BYTES_MAX) {
          page.Next = Buffer.from(previous.slice(prefix.length), 'utf8').toString('base64url')
          break
        }
        bytes += size
        page.Records.push(listed)
      }
      previous = key
      if (page.Records.length >= limit || scanned >= limit * 4) {
        page.Next = Buffer.from(key.slice(prefix.length), 'utf8').toString('base64url')
        break
      }
    }
  } finally {
    await iterator.close()
  }
  return page
}

/** The bytes an item takes in the answer's JSON (control characters take six bytes there, one in msgpack). */
function jsonBytes(item: StreamItem): number {
  return Buffer.byteLength(JSON.stringify(item), 'utf8') + 1
}

/**
 * What the primary answers to one request of a secondary's replication (GET /v1/internal/acl/replication/:stream):
 * a delta only when asked for one (`delta`, which the replicator asks only when blocking on its last round) and the
 * feed has it, else a page of the walk. A walk is never answered with a delta: its deletions would take every
 * unchanged record for gone.
 */
export async function replicationPage(
  db: StateDb,
  feed: ChangeFeed,
  stream: ReplicatedStream,
  query: { since: number; cursor: string; limit: number; delta: boolean },
): Promise<StreamPage> {
  const delta = query.delta && query.cursor === '' ? deltaPage(db, feed, stream, query.since) : undefined
  return delta ?? walkPage(db, stream, query.since, query.cursor, query.limit)
}
