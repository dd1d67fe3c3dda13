/**
 * The cloud link: one record named `global` in the `link` table, and the apply functions of its commands.
 *
 * - `link.set` replaces the data with the three user fields (accessLevel and cloudClusterUrl are the controller's to
 *   fill in again for the new data), takes the command's new generation, keeps the uid of an existing link, and
 *   raises the version. `version` in the command makes it a compare-and-set; a missing link has version 0.
 * - `link.delete` removes the link (idempotent), under the same optional compare-and-set.
 * - `link.status` records what the controller found for one generation. It is dropped (value false) when the link
 *   was deleted or rewritten since the controller read it, so a slow check never overwrites a newer link's status.
 *
 * The version shown to clients is the record's ModifyIndex: numeric, and raised by every write, data or status.
 */
import { applyError, type ApplyResult, type LinkStatusWrite, type LinkWrite } from './commands.js'
import type { CloudLink } from './records.js'
import { deleteRecord, getRecord, writeRecord, type TableSpec } from './tables.js'
import type { Txn } from './txn.js'

export const LINK_NAME = 'global'
export const LINK_STATUS_KEY = 'service.io/cloud/link'

export const linkSpec: TableSpec<CloudLink> = {
  table: 'link',
  key: () => LINK_NAME,
  unique: {},
  multi: {},
}

function versionOf(link: CloudLink | undefined): number {
  return link?.ModifyIndex ?? 0
}

function checkVersion(link: CloudLink | undefined, version: number | undefined): ApplyResult | undefined {
  if (typeof version !== 'number' || version === versionOf(link)) return undefined
  return applyError(
    'conflict',
    link === undefined
      ? `the link does not exist (version 0), not version ${version}`
      : `the link is at version ${versionOf(link)}, not ${version}; read it again and retry`,
    'version',
  )
}

export async function setLink(txn: Txn, input: LinkWrite, version: number | undefined, index: number): Promise<ApplyResult> {
  const existing = await getRecord(txn, linkSpec, LINK_NAME)
  const conflict = checkVersion(existing, version)
  if (conflict !== undefined) return conflict
  const link: CloudLink = {
    uid: existing?.uid ?? input.uid,
    generation: input.generation,
    data: { resourceId: input.resourceId, clientId: input.clientId, clientSecret: input.clientSecret },
    ...(existing?.status === undefined ? {} : { status: existing.status }),
    source: input.source,
    CreateIndex: existing?.CreateIndex ?? index,
    ModifyIndex: index,
  }
  writeRecord(txn, linkSpec, existing, link)
  return { ok: true, value: link }
}

export async function deleteLink(txn: Txn, version: number | undefined): Promise<ApplyResult> {
  const existing = await getRecord(txn, linkSpec, LINK_NAME)
  const conflict = checkVersion(existing, version)
  if (conflict !== undefined) return conflict
  if (existing !== undefined) deleteRecord(txn, linkSpec, existing)
  return { ok: true, value: true }
}

export async function setLinkStatus(txn: Txn, input: LinkStatusWrite, index: number): Promise<ApplyResult> {
  const existing = await getRecord(txn, linkSpec, LINK_NAME)
  if (existing === undefined || existing.generation !== input.generation) return { ok: true, value: false }
  const data = { ...existing.data }
  if (typeof input.accessLevel === 'string') data.accessLevel = input.accessLevel
  if (typeof input.cloudClusterUrl === 'string') data.cloudClusterUrl = input.cloudClusterUrl
  const link: CloudLink = {
    ...existing,
    data,
    status: { conditions: input.conditions, observedGeneration: input.generation, updatedAt: input.updatedAt },
    ModifyIndex: index,
  }
  writeRecord(txn, linkSpec, existing, link)
  return { ok: true, value: true }
}

/** The parts of a resource ID: `organization/<org_id>/project/<project_id>/service.global-network-manager.cluster/<cluster_name>`. */
export interface ResourceId {
  organization: string
  project: string
  cluster: string
}

export const CLUSTER_RESOURCE_TYPE = 'service.global-network-manager.cluster'

const ID_PART = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

/** Parses a resource ID, or says which part is wrong (the message names the part and the rule). */
export function parseResourceId(text: string): { ok: true; id: ResourceId } | { ok: false; message: string } {
  const parts = text.split('/')
  const fixed: Array<[number, string]> = [
    [0, 'organization'],
    [2, 'project'],
    [4, CLUSTER_RESOURCE_TYPE],
  ]
  const form = `must have the form organization/<org_id>/project/<project_id>/${CLUSTER_RESOURCE_TYPE}/<cluster_name>`
  if (parts.length !== 6) return { ok: false, message: `${form} (found ${parts.length} parts separated by "/", not 6)` }
  for (const [position, word] of fixed) {
    if (parts[position] !== word) {
      return { ok: false, message: `${form}: part ${position + 1} must be "${word}", not ${JSON.stringify(parts[position])}` }
    }
  }
  const named: Array<[number, string]> = [
    [1, 'org_id'],
    [3, 'project_id'],
    [5, 'cluster_name'],
  ]
  for (const [position, name] of named) {
    const value = parts[position] ?? ''
    if (!ID_PART.test(value)) {
      return {
        ok: false,
        message: `${form}: ${name} ${JSON.stringify(value)} must be 1 to 128 letters, digits, ".", "-" or "_", starting with a letter or digit`,
      }
    }
  }
  return { ok: true, id: { organization: parts[1] ?? '', project: parts[3] ?? '', cluster: parts[5] ?? '' } }
}
