/**
 * What a secondary datacenter replicates from the primary (issue 19): policies and roles, applied by the
 * `acl.replicate` command its leader's replication loop proposes (controllers/acl-replication.ts), so its followers
 * get them like any write and a new leader resumes from the replicated index of each stream, kept here in the
 * `replication` table.
 *
 * A batch holds the primary's records as the primary has them (its IDs, names, fields; links by ID) and the IDs the
 * primary no longer has. Deletions apply first, then upserts. The primary is the authority, so an upsert is written
 * whatever the secondary holds: a local record of another ID holding the same name is dropped (the primary renamed or
 * deleted it, and a later batch brings its new name if it has one), and a role may link a policy not replicated yet
 * (reads leave out links whose target is missing, as for any deleted policy). Hashes are computed here as the primary
 * computes them, so they match.
 */
import { GLOBAL_MANAGEMENT_POLICY_ID } from './builtins.js'
import type { ApplyResult, ConfigEntryWrite, PolicyWrite, RoleWrite, TokenCreate } from './commands.js'
import { configEntryKey } from './config-entries.js'
import { tokenHash } from './acl-tokens.js'
import { policyHash, roleHash } from './acl-policies.js'
import type { AclPolicy, AclRole, AclToken, ConfigEntry } from './records.js'
import { configSpec, deleteRecord, getByUnique, getRecord, listRecords, policySpec, roleSpec, secretDigest, tokenSpec, writeRecord, type TableSpec } from './tables.js'
import { nsKey } from './keys.js'
import type { Reader } from './reader.js'
import type { Txn } from './txn.js'

export type ReplicatedStream = 'policies' | 'roles' | 'tokens' | 'config'
export const REPLICATED_STREAMS: readonly ReplicatedStream[] = ['policies', 'roles', 'tokens', 'config']

/** The config-entry kind written in each datacenter on its own, never replicated (issue 19, as Consul's). */
export const LOCAL_CONFIG_KINDS: ReadonlySet<string> = new Set(['exported-services'])

/** How far one stream has replicated: the primary's index it has caught up to, and when. */
export interface ReplicationRecord {
  Stream: ReplicatedStream
  /** The primary's index (its X-Service-Index of the list) that the secondary holds everything up to. */
  RemoteIndex: number
  /** When the batch that reached it was made, RFC 3339 (the leader's clock, carried in the command). */
  LastSuccess: string
  CreateIndex: number
  ModifyIndex: number
}

export const replicationSpec: TableSpec<ReplicationRecord> = {
  table: 'replication',
  key: (record) => record.Stream,
  unique: {},
  multi: {},
}

export type ReplicateCommand =
  | { v: 1; type: 'acl.replicate'; stream: 'policies'; upserts: PolicyWrite[]; deletes: string[]; remoteIndex: number; now: string }
  | { v: 1; type: 'acl.replicate'; stream: 'roles'; upserts: RoleWrite[]; deletes: string[]; remoteIndex: number; now: string }
  | { v: 1; type: 'acl.replicate'; stream: 'tokens'; upserts: TokenCreate[]; deletes: string[]; remoteIndex: number; now: string }
  /** Config entries: upserts as the primary has them, deletes by configDeleteKey (Kind, Namespace and Name as JSON). */
  | { v: 1; type: 'acl.replicate'; stream: 'config'; upserts: ConfigEntryWrite[]; deletes: string[]; remoteIndex: number; now: string }

export async function replicate(txn: Txn, command: ReplicateCommand, index: number): Promise<ApplyResult> {
  if (command.stream === 'policies') {
    for (const id of command.deletes) if (id !== GLOBAL_MANAGEMENT_POLICY_ID) await dropRecord(txn, policySpec, id)
    for (const input of command.upserts) {
      const fields = { ID: input.ID, Name: input.Name, Description: input.Description, Rules: input.Rules, Datacenters: input.Datacenters, Namespace: input.Namespace }
      await upsert<AclPolicy>(txn, policySpec, fields.ID, nsKey(fields.Namespace, fields.Name), (existing) => ({
        ...fields,
        Hash: policyHash(fields),
        CreateIndex: existing?.CreateIndex ?? index,
        ModifyIndex: index,
      }))
    }
  } else if (command.stream === 'tokens') {
    await replicateTokens(txn, command.upserts, command.deletes, index)
  } else if (command.stream === 'config') {
    for (const deleted of command.deletes) {
      const address = configDeleteAddress(deleted)
      if (address === undefined) continue
      const existing = await getRecord(txn, configSpec, configEntryKey(address))
      if (existing !== undefined && !LOCAL_CONFIG_KINDS.has(existing.Kind)) deleteRecord(txn, configSpec, existing)
    }
    for (const input of command.upserts) {
      if (LOCAL_CONFIG_KINDS.has(input.Kind)) continue
      const existing = await getRecord(txn, configSpec, configEntryKey(input))
      const { CreateIndex: _create, ModifyIndex: _modify, ...fields } = input as ConfigEntryWrite & { CreateIndex?: unknown; ModifyIndex?: unknown }
      writeRecord(txn, configSpec, existing, { ...fields, CreateIndex: existing?.CreateIndex ?? index, ModifyIndex: index } as ConfigEntry)
    }
  } else {
    for (const id of command.deletes) await dropRecord(txn, roleSpec, id)
    for (const input of command.upserts) {
      // Links by ID as the primary resolved them: names are resolved when a record is read.
      const fields = {
        ID: input.ID,
        Name: input.Name,
        Description: input.Description,
        Policies: input.Policies.filter((link) => link.ID !== undefined).map((link) => ({ ID: link.ID as string })),
        TemplatedPolicies: input.TemplatedPolicies,
        ServiceIdentities: input.ServiceIdentities,
        NodeIdentities: input.NodeIdentities,
        Namespace: input.Namespace,
      }
      await upsert<AclRole>(txn, roleSpec, fields.ID, nsKey(fields.Namespace, fields.Name), (existing) => ({
        ...fields,
        Hash: roleHash(fields),
        CreateIndex: existing?.CreateIndex ?? index,
        ModifyIndex: index,
      }))
    }
  }
  const existing = await getRecord(txn, replicationSpec, command.stream)
  const record: ReplicationRecord = {
    Stream: command.stream,
    // As the batch says, lower included: after the primary is restored to an older state its index goes back, and
    // what has been replicated is what the batch says.
    RemoteIndex: command.remoteIndex,
    LastSuccess: command.now,
    CreateIndex: existing?.CreateIndex ?? index,
    ModifyIndex: index,
  }
  writeRecord(txn, replicationSpec, existing, record)
  return { ok: true, value: record }
}

/**
 * How a config-entry deletion names its entry in a batch: `["Kind","Namespace","Name"]` as JSON (the state's own key
 * holds NUL separators, which no command string may).
 */
export function configDeleteKey(address: { Kind: string; Namespace: string; Name: string }): string {
  return JSON.stringify([address.Kind, address.Namespace, address.Name])
}

/** The address a configDeleteKey names, or undefined when it is not one. */
export function configDeleteAddress(key: string): { Kind: string; Namespace: string; Name: string } | undefined {
  let parsed: unknown
  try {
    parsed = JSON.parse(key)
  } catch {
    return undefined
  }
  if (!Array.isArray(parsed) || parsed.length !== 3 || !parsed.every((part) => typeof part === 'string' && !part.includes('\u0000'))) return undefined
  const [Kind, Namespace, Name] = parsed as [string, string, string]
  return { Kind, Namespace, Name }
}

/** Each stream's record; absent for a stream that never replicated. */
export async function replicationRecords(reader: Reader): Promise<Map<ReplicatedStream, ReplicationRecord>> {
  const records = await listRecords(reader, replicationSpec)
  return new Map(records.map((record) => [record.Stream, record]))
}

async function dropRecord<R>(txn: Txn, spec: TableSpec<R>, id: string): Promise<void> {
  const existing = await getRecord(txn, spec, id)
  if (existing !== undefined) deleteRecord(txn, spec, existing)
}

/** Writes the record of `id`, first dropping another record that holds its name. */
async function upsert<R>(txn: Txn, spec: TableSpec<R>, id: string, name: string, build: (existing: R | undefined) => R): Promise<void> {
  const holder = await getByUnique(txn, spec, 'name', name)
  if (holder !== undefined && spec.key(holder) !== id) deleteRecord(txn, spec, holder)
  const existing = await getRecord(txn, spec, id)
  writeRecord(txn, spec, existing, build(existing))
}

/**
 * Global tokens as the primary has them. Local tokens are this datacenter's own and never touched: a deletion or an
 * upsert naming one is skipped, and a global token whose secret a local token holds is not written (secrets are
 * random UUIDs: that is a collision or an attack, never a real case).
 */
async function replicateTokens(txn: Txn, upserts: readonly TokenCreate[], deletes: readonly string[], index: number): Promise<void> {
  for (const accessor of deletes) {
    const existing = await getRecord(txn, tokenSpec, accessor)
    if (existing !== undefined && !existing.Local) deleteRecord(txn, tokenSpec, existing)
  }
  for (const input of upserts) {
    const existing = await getRecord(txn, tokenSpec, input.AccessorID)
    if (existing?.Local === true || input.Local) continue
    const holder = await getByUnique(txn, tokenSpec, 'secret', secretDigest(input.SecretID))
    if (holder !== undefined && holder.AccessorID !== input.AccessorID) {
      if (holder.Local) continue
      deleteRecord(txn, tokenSpec, holder)
    }
    const fields: Omit<AclToken, 'Hash' | 'CreateIndex' | 'ModifyIndex'> = {
      AccessorID: input.AccessorID,
      SecretID: input.SecretID,
      Description: input.Description,
      // Links by ID as the primary resolved them: names are resolved when a record is read.
      Policies: input.Policies.filter((link) => link.ID !== undefined).map((link) => ({ ID: link.ID as string })),
      Roles: input.Roles.filter((link) => link.ID !== undefined).map((link) => ({ ID: link.ID as string })),
      TemplatedPolicies: input.TemplatedPolicies,
      ServiceIdentities: input.ServiceIdentities,
      NodeIdentities: input.NodeIdentities,
      Local: false,
      AuthMethod: input.AuthMethod,
      ...(input.ExpirationTime === undefined ? {} : { ExpirationTime: input.ExpirationTime }),
      CreateTime: input.CreateTime,
      Namespace: input.Namespace,
    }
    writeRecord(txn, tokenSpec, existing, { ...fields, Hash: tokenHash(fields), CreateIndex: existing?.CreateIndex ?? index, ModifyIndex: index })
  }
}
