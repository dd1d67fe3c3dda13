/**
 * Each table's key and secondary indexes, declared once. Writing or deleting a record through `writeRecord` and
 * `deleteRecord` keeps every index in the same batch as the record, so no lookup ever sees a record without its index
 * entries or an index entry without its record (the token secret index, held in memory, follows its batch at once:
 * secret-index.ts).
 */
import { hash } from 'node:crypto'
import { isUuid } from '../lib/ids.js'
import { mapPaced, type Pacer } from '../lib/pace.js'
import {
  indexPrefix,
  nsKey,
  recordKey,
  recordPrefix,
  SEP,
  uniqueKey,
  uniqueTarget,
  type Table,
} from './keys.js'
import { decode } from './codec.js'
import { getDecoded, type Reader } from './reader.js'
import type { Txn } from './txn.js'
import type { AclAuthMethod, AclBindingRule, AclPolicy, AclRole, AclToken, ClusterMember, ConfigEntry } from './records.js'

export interface TableSpec<R> {
  table: Table
  key(record: R): string
  /** Unique indexes: each maps a record to at most one value. */
  unique: Record<string, (record: R) => string | undefined>
  /** Non-unique indexes: each maps a record to any number of values. */
  multi: Record<string, (record: R) => string[]>
}

/**
 * Tokens are found by a SHA-256 of their SecretID, so the index never holds a usable secret: its first 16 bytes, in
 * base64url (22 characters). 128 bits of SHA-256 are far beyond any collision among tokens, or a search for a secret
 * that shares them. The index is held in memory (secret-index.ts), rebuilt from the token records.
 * - A UUID is digested in lower case: UUIDs compare without regard to case (Consul indexes SecretIDs as UUID bytes),
 *   so a secret created as `F62D…` works when sent as `F62D…` or as `f62d…`. Other secrets (an operator's initial
 *   management token may be any string) are digested as they are.
 * - No memo of the last secret: checking it would compare the secret a caller presents, in time that depends on the
 *   bytes, with the last real secret seen, and keep that secret in memory.
 */
export function secretDigest(secret: string): string {
  return digestOf(isUuid(secret) ? secret.toLowerCase() : secret)
}

/** The index form of the SHA-256 of `text` (see secretDigest). */
function digestOf(text: string): string {
  // crypto.hash is the one-shot form: a third of createHash's cost, which builds a Hash object per call.
  return hash('sha256', text, 'buffer').toString('base64url', 0, SECRET_DIGEST_BYTES)
}

/** Bytes of a secret's SHA-256 that its index key keeps. */
const SECRET_DIGEST_BYTES = 16

/**
 * The token whose secret is `secret`, by its digest. The index is rebuilt from the records with secretDigest, so a
 * secret stored by a build that digested UUIDs as they were given (a configured initial management token with
 * upper-case letters) is found like any other.
 */
export async function tokenBySecret(reader: Reader, secret: string): Promise<AclToken | undefined> {
  return getByUnique(reader, tokenSpec, 'secret', secretDigest(secret))
}

/** Expiry index values sort by time: milliseconds since the epoch, zero-padded. */
export function expiryValue(expirationTime: string): string {
  return String(Date.parse(expirationTime)).padStart(16, '0')
}

export const tokenSpec: TableSpec<AclToken> = {
  table: 'token',
  key: (token) => token.AccessorID,
  unique: { secret: (token) => secretDigest(token.SecretID) },
  multi: {
    ns: (token) => [token.Namespace],
    policy: (token) => token.Policies.map((link) => link.ID),
    role: (token) => token.Roles.map((link) => link.ID),
    service: (token) => token.ServiceIdentities.map((identity) => identity.ServiceName),
    // Keyed by the auth method's own namespace: a namespace rule may put a login token in another namespace.
    authmethod: (token) => (token.AuthMethod === '' ? [] : [nsKey(token.AuthMethodNamespace ?? token.Namespace, token.AuthMethod)]),
    expires: (token) => (token.ExpirationTime === undefined ? [] : [expiryValue(token.ExpirationTime)]),
  },
}

export const policySpec: TableSpec<AclPolicy> = {
  table: 'policy',
  key: (policy) => policy.ID,
  unique: { name: (policy) => nsKey(policy.Namespace, policy.Name) },
  multi: { ns: (policy) => [policy.Namespace] },
}

export const roleSpec: TableSpec<AclRole> = {
  table: 'role',
  key: (role) => role.ID,
  unique: { name: (role) => nsKey(role.Namespace, role.Name) },
  multi: { ns: (role) => [role.Namespace], policy: (role) => role.Policies.map((link) => link.ID) },
}

export const authMethodSpec: TableSpec<AclAuthMethod> = {
  table: 'auth-method',
  key: (method) => nsKey(method.Namespace, method.Name),
  unique: {},
  multi: {},
}

export const bindingRuleSpec: TableSpec<AclBindingRule> = {
  table: 'binding-rule',
  key: (rule) => rule.ID,
  unique: {},
  multi: { ns: (rule) => [rule.Namespace], authmethod: (rule) => [nsKey(rule.Namespace, rule.AuthMethod)] },
}

export const memberSpec: TableSpec<ClusterMember> = {
  table: 'member',
  key: (member) => member.Node,
  unique: {},
  multi: {},
}

/** Config entries are keyed by kind, namespace and name, so a list by kind is one prefix scan. */
export const configSpec: TableSpec<ConfigEntry> = {
  table: 'config',
  key: (entry) => `${entry.Kind}${SEP}${entry.Namespace}${SEP}${entry.Name}`,
  unique: {},
  multi: {},
}

export function writeRecord<R>(txn: Txn, spec: TableSpec<R>, before: R | undefined, after: R): void {
  const key = spec.key(after)
  for (const [index, valueOf] of Object.entries(spec.unique)) {
    const old = before === undefined ? undefined : valueOf(before)
    const next = valueOf(after)
    if (old !== undefined && old !== next) txn.delUnique(spec.table, index, old)
    if (next !== undefined) txn.putUnique(spec.table, index, next, key)
  }
  for (const [index, valuesOf] of Object.entries(spec.multi)) {
    txn.replaceIndex(spec.table, index, key, before === undefined ? [] : valuesOf(before), valuesOf(after))
  }
  txn.putRecord(spec.table, key, after)
}

export function deleteRecord<R>(txn: Txn, spec: TableSpec<R>, before: R): void {
  const key = spec.key(before)
  for (const [index, valueOf] of Object.entries(spec.unique)) {
    const old = valueOf(before)
    if (old !== undefined) txn.delUnique(spec.table, index, old)
  }
  for (const [index, valuesOf] of Object.entries(spec.multi)) {
    for (const value of new Set(valuesOf(before))) txn.delIndex(spec.table, index, value, key)
  }
  txn.delRecord(spec.table, key)
}

export function getRecord<R>(reader: Reader, spec: TableSpec<R>, key: string): Promise<R | undefined> {
  return getDecoded<R>(reader, recordKey(spec.table, key))
}

export async function getByUnique<R>(reader: Reader, spec: TableSpec<R>, index: string, value: string): Promise<R | undefined> {
  const key = await reader.get(uniqueKey(spec.table, index, value))
  if (key === undefined) return undefined
  return getRecord(reader, spec, uniqueTarget(spec.table, index, key))
}

/** Record keys listed by a non-unique index value, in key order. */
export async function keysByIndex<R>(reader: Reader, spec: TableSpec<R>, index: string, value: string): Promise<string[]> {
  const prefix = indexPrefix(spec.table, index, value)
  return (await reader.keys(prefix)).map((key) => key.slice(prefix.length))
}

/**
 * Records whose `index` links them to the record `linkedKey` of `linked`, or none if that record is gone: a deleted
 * policy's or role's links stay in the index of what linked to it, but no read shows them any more.
 */
export async function listLinkedTo<R, L>(reader: Reader, spec: TableSpec<R>, index: string, linked: TableSpec<L>, linkedKey: string, pace?: Pacer): Promise<R[]> {
  if ((await getRecord(reader, linked, linkedKey)) === undefined) return []
  return listByIndex(reader, spec, index, linkedKey, pace)
}

/** The records an index value lists, in key order; a list served over HTTP passes a Pacer (lib/pace.ts). */
export async function listByIndex<R>(reader: Reader, spec: TableSpec<R>, index: string, value: string, pace?: Pacer): Promise<R[]> {
  const records: R[] = []
  for (const key of await keysByIndex(reader, spec, index, value)) {
    const record = await getRecord(reader, spec, key)
    if (record !== undefined) records.push(record)
    const turn = pace?.()
    if (turn !== undefined) await turn
  }
  return records
}

/** The records of one namespace by its index, or of every namespace for `*` (a list's `?ns=*`); see listByIndex for `pace`. */
export function listInNamespace<R>(reader: Reader, spec: TableSpec<R>, namespace: string, pace?: Pacer): Promise<R[]> {
  return namespace === '*' ? listRecords(reader, spec, '', pace) : listByIndex(reader, spec, 'ns', namespace, pace)
}

/** Every record of a table whose key starts with `keyPrefix` (the whole table when empty); see listByIndex for `pace`. */
export async function listRecords<R>(reader: Reader, spec: TableSpec<R>, keyPrefix = '', pace?: Pacer): Promise<R[]> {
  const values = await reader.values(recordPrefix(spec.table) + keyPrefix)
  if (pace === undefined) return values.map((bytes) => decode<R>(bytes))
  return mapPaced(values, pace, (bytes) => decode<R>(bytes))
}

/**
 * AccessorIDs of tokens whose ExpirationTime is at or before `nowMs`, oldest first, at most `limit`: one range scan
 * of the expiry index, for the reaper.
 */
export async function expiredTokenAccessors(db: import('./reader.js').StateDb, nowMs: number, limit: number): Promise<string[]> {
  const prefix = `x${SEP}token${SEP}expires${SEP}`
  const upper = prefix + String(nowMs + 1).padStart(16, '0')
  const accessors: string[] = []
  for await (const key of db.keys({ gte: prefix, lt: upper, limit })) accessors.push(key.slice(prefix.length + 17))
  return accessors
}
