/**
 * LevelDB key layout of the state database. Keys are UTF-8 strings whose parts are joined by NUL, which no record
 * name or ID may contain, so prefix scans of one part never run into a neighbouring value.
 *
 *   r<table><key>                  the record (msgpack)
 *   u<table><index><value>         a unique index: the value names exactly one record key (uniqueValue)
 *   x<table><index><value><key>    a non-unique index: one entry per record, empty value
 *   m applied                       the last applied log index (written in the same batch as every apply)
 *   m table-index<table>           the max index of a table, raised by creates, updates and deletes
 *   m <name>                        other metadata (bootstrap state, ...)
 *   m restore                       a snapshot restore in progress (restore.ts), absent otherwise
 *   s<key>                          a record of a restore in progress, staged under its final key (restore.ts)
 */
export const SEP = '\u0000'
/** One past SEP. */
const SEP_END = '\u0001'

/**
 * The exclusive upper bound of a scan over every key that starts with `prefix`. Every prefix ends with SEP, so
 * replacing that last SEP by the next code point bounds exactly the keys that extend the prefix.
 */
export function prefixEnd(prefix: string): string {
  if (!prefix.endsWith(SEP)) throw new Error(`scan prefix must end with the separator: ${JSON.stringify(prefix)}`)
  return prefix.slice(0, -1) + SEP_END
}

export type Table = 'token' | 'policy' | 'role' | 'auth-method' | 'binding-rule' | 'config' | 'link' | 'member' | 'replication'

export const TABLES: readonly Table[] = ['token', 'policy', 'role', 'auth-method', 'binding-rule', 'config', 'link', 'member', 'replication']

export function recordKey(table: Table, key: string): string {
  return `r${SEP}${table}${SEP}${key}`
}

export function recordPrefix(table: Table): string {
  return `r${SEP}${table}${SEP}`
}

export function uniqueKey(table: Table, index: string, value: string): string {
  return `u${SEP}${table}${SEP}${index}${SEP}${value}`
}

/**
 * A unique index entry's value: the record key it names, as UTF-8, but in the token secret index, which is held in
 * memory in slots of 16 bytes for the AccessorID (secret-index.ts): there an AccessorID that is a UUID in lower case
 * (every one a server makes) is written as its 16 bytes, and any other key as NUL and its UTF-8 bytes (no record key
 * holds NUL), with a second NUL where that would make 16 bytes. So a value of 16 bytes is a UUID's, whatever its first
 * byte (the built-ins' start with zeros).
 */
export function uniqueValue(table: Table, index: string, recordKey: string): Buffer {
  if (table !== 'token' || index !== 'secret') return Buffer.from(recordKey, 'utf8')
  if (LOWER_UUID.test(recordKey)) return Buffer.from(recordKey.replace(DASHES, ''), 'hex')
  const text = Buffer.from(recordKey, 'utf8')
  return Buffer.concat([text.length === 15 ? TWO_NULS : ONE_NUL, text])
}

/** The record key a unique index entry's value names (see uniqueValue). */
export function uniqueTarget(table: Table, index: string, value: Buffer): string {
  if (table !== 'token' || index !== 'secret') return value.toString('utf8')
  if (value.length === 16) {
    const hex = value.toString('hex')
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
  }
  let start = 0
  while (start < value.length && value[start] === 0) start++
  return value.toString('utf8', start)
}

const LOWER_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const DASHES = /-/g
const ONE_NUL = Buffer.from([0])
const TWO_NULS = Buffer.from([0, 0])

export function indexPrefix(table: Table, index: string, value: string): string {
  return `x${SEP}${table}${SEP}${index}${SEP}${value}${SEP}`
}

export function indexKey(table: Table, index: string, value: string, key: string): string {
  return indexPrefix(table, index, value) + key
}

export function tableIndexKey(table: Table): string {
  return `m${SEP}table-index${SEP}${table}`
}

export const APPLIED_KEY = `m${SEP}applied`
export const BOOTSTRAP_KEY = `m${SEP}bootstrap`
export const RESTORE_KEY = `m${SEP}restore`
/** Staged records of a restore in progress: inside the state so that snapshots and compaction carry them. */
export const STAGED_PREFIX = `s${SEP}`
/** Written with sync to make every earlier write durable (see StateStore.sync). */
export const SYNC_KEY = `m${SEP}sync`
/**
 * Says which form of the token secret index the state holds: "none" once it holds none (secret-index.ts keeps it in
 * memory); written when the store opens a state and drops the entries an earlier build stored
 * (secret-index-upgrade.ts), or else with the store's next apply batch.
 */
export const SECRET_INDEX_FORM_KEY = `m${SEP}secret-index-form`
/**
 * The token secret index's entries, as the transaction code writes and reads them: never stored, since the index is
 * held in memory (secret-index.ts); a state an earlier build wrote holds them until it is opened.
 */
export const SECRET_INDEX_PREFIX = uniqueKey('token', 'secret', '')
/** Written into a state staged from a leader's snapshot once it is complete; stays in it after the switch. */
export const STAGED_MARK_KEY = `m${SEP}staged`

/** Two-part keys (namespace and name) for records addressed by name. */
export function nsKey(namespace: string, name: string): string {
  return `${namespace}${SEP}${name}`
}
