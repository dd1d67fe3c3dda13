/**
 * Apply functions of the config-entry commands. The compare-and-set is decided here, at the command's index, so that
 * two writers racing with the same `cas` cannot both win: the first to be applied raises ModifyIndex and the second
 * no longer matches (readings.md, "Config cas").
 *
 * - `cas` absent: unconditional (upsert; delete).
 * - `cas` 0: apply only if the entry is absent; delete nothing that exists.
 * - `cas` N: only if N equals the entry's current ModifyIndex.
 *
 * Every successful apply writes and raises ModifyIndex, even when the entry is unchanged (Consul skips identical
 * writes without checking the cas; warden does not, so that exactly one CAS writer wins per index).
 */
import { applyError, type ApplyResult, type ConfigEntryWrite } from './commands.js'
import { SEP } from './keys.js'
import type { ConfigEntry } from './records.js'
import { configSpec, deleteRecord, getRecord, writeRecord } from './tables.js'
import type { Txn } from './txn.js'

/** The config-entry kinds of the contract (api.md "Config entries"). */
export const CONFIG_KINDS = [
  'api-gateway',
  'bound-api-gateway',
  'exported-services',
  'file-system-certificate',
  'http-route',
  'ingress-gateway',
  'inline-certificate',
  'mesh',
  'proxy-defaults',
  'service-defaults',
  'service-intentions',
  'service-resolver',
  'service-router',
  'service-splitter',
  'tcp-route',
  'terminating-gateway',
] as const

export interface ConfigEntryAddress {
  Kind: string
  Namespace: string
  Name: string
}

/** The record key of an entry (configSpec's key): kind, namespace and name, so a list of one kind is one prefix scan. */
export function configEntryKey(address: ConfigEntryAddress): string {
  return configSpec.key({ ...address, CreateIndex: 0, ModifyIndex: 0 })
}

/** The key prefix of every entry of one kind, or of one kind in one namespace. */
export function configEntryPrefix(kind: string, namespace?: string): string {
  return namespace === undefined ? `${kind}${SEP}` : `${kind}${SEP}${namespace}${SEP}`
}

function hasCas(cas: number | undefined): cas is number {
  // Commands are msgpack-decoded: an absent cas may come back as undefined or null, never as a number.
  return typeof cas === 'number'
}

export async function applyConfigEntry(txn: Txn, input: ConfigEntryWrite, cas: number | undefined, index: number): Promise<ApplyResult> {
  if (input.Kind === '' || input.Name === '') return applyError('invalid_input', 'Kind and Name are required')
  const existing = await getRecord(txn, configSpec, configEntryKey(input))
  if (hasCas(cas)) {
    if (cas === 0 && existing !== undefined) return { ok: true, value: false }
    if (cas !== 0 && existing?.ModifyIndex !== cas) return { ok: true, value: false }
  }
  // Indexes are the state's to decide; whatever the command carries under those names is replaced.
  const entry: ConfigEntry = { ...input, CreateIndex: existing?.CreateIndex ?? index, ModifyIndex: index }
  writeRecord(txn, configSpec, existing, entry)
  return { ok: true, value: true }
}

/** Answers true when the entry is gone afterwards (whether or not it existed); false only when the cas stopped it. */
export async function deleteConfigEntry(txn: Txn, address: ConfigEntryAddress, cas: number | undefined): Promise<ApplyResult> {
  const existing = await getRecord(txn, configSpec, configEntryKey(address))
  if (existing === undefined) return { ok: true, value: true }
  if (hasCas(cas) && (cas === 0 || existing.ModifyIndex !== cas)) return { ok: true, value: false }
  deleteRecord(txn, configSpec, existing)
  return { ok: true, value: true }
}
