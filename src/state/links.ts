/**
 * Resolution of links by name or ID while applying, so that "the linked policy exists" is decided from the state of
 * the replica at the command's index and never by a read-then-write race in the HTTP layer.
 */
import { DEFAULT_NAMESPACE, type IdLink } from './records.js'
import { getByUnique, policySpec, roleSpec, type TableSpec } from './tables.js'
import { nsKey, recordKey } from './keys.js'
import type { Reader } from './reader.js'
import type { LinkInput } from './commands.js'

export type Resolved = { ok: true; links: IdLink[] } | { ok: false; field: string; message: string }

interface Named {
  ID: string
}

async function resolveLinks<R extends Named>(
  reader: Reader,
  spec: TableSpec<R>,
  noun: string,
  field: string,
  links: readonly LinkInput[],
  namespace: string,
): Promise<Resolved> {
  const seen = new Set<string>()
  const resolved: IdLink[] = []
  for (const [position, link] of links.entries()) {
    let id: string
    if (link.ID !== undefined && link.ID !== '') {
      // A record's key is its ID, so finding the key is enough: no need to decode the record (a policy's rules).
      if ((await reader.get(recordKey(spec.table, link.ID))) === undefined) {
        return { ok: false, field: `${field}[${position}].ID`, message: `no ${noun} with ID "${link.ID}"` }
      }
      id = link.ID
    } else if (link.Name !== undefined && link.Name !== '') {
      // A name is looked up in the record's namespace first, then in the default namespace, where shared policies
      // and roles usually live.
      let record = await getByUnique(reader, spec, 'name', nsKey(namespace, link.Name))
      if (record === undefined && namespace !== DEFAULT_NAMESPACE) {
        record = await getByUnique(reader, spec, 'name', nsKey(DEFAULT_NAMESPACE, link.Name))
      }
      if (record === undefined) return { ok: false, field: `${field}[${position}].Name`, message: `no ${noun} named "${link.Name}"` }
      id = record.ID
    } else {
      return { ok: false, field: `${field}[${position}]`, message: 'a link needs an ID or a Name' }
    }
    if (seen.has(id)) continue
    seen.add(id)
    resolved.push({ ID: id })
  }
  return { ok: true, links: resolved }
}

export function resolvePolicyLinks(reader: Reader, links: readonly LinkInput[], namespace: string): Promise<Resolved> {
  return resolveLinks(reader, policySpec, 'policy', 'Policies', links, namespace)
}

export function resolveRoleLinks(reader: Reader, links: readonly LinkInput[], namespace: string): Promise<Resolved> {
  return resolveLinks(reader, roleSpec, 'role', 'Roles', links, namespace)
}
