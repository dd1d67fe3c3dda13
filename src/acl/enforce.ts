/**
 * Checks named by strings, as Consul's acl.Enforce (acl/enforce.go) takes them from `POST /v1/internal/acl/authorize`:
 * a resource, a segment (the name, for resources that have names) and an access. Which accesses each resource knows is
 * Consul's table; `identity` (Consul 1.17–1.18) is kept because warden's rules language has it. Each check is answered
 * by the caller's Permissions, that is by the authorizer every endpoint asks.
 */
import type { Permissions } from './authorization.js'
import type { Access, Resource } from './authorizer.js'

/** An access a check may name: the authorizer's three, and Consul's `write-prefix` for keys. */
export type EnforceAccess = Access | 'write-prefix'

/** The accesses each resource answers, in Consul's order. `list` and `write-prefix` exist for keys only. */
export const RESOURCE_ACCESSES: { readonly [R in Resource]: readonly EnforceAccess[] } = {
  acl: ['read', 'write'],
  agent: ['read', 'write'],
  event: ['read', 'write'],
  identity: ['read', 'write'],
  intention: ['read', 'write'],
  key: ['read', 'list', 'write', 'write-prefix'],
  keyring: ['read', 'write'],
  mesh: ['read', 'write'],
  node: ['read', 'write'],
  operator: ['read', 'write'],
  peering: ['read', 'write'],
  query: ['read', 'write'],
  service: ['read', 'write'],
  session: ['read', 'write'],
}

export function isResource(value: string): value is Resource {
  return Object.hasOwn(RESOURCE_ACCESSES, value)
}

/** The access as Consul reads it (case does not matter), or undefined when `resource` does not answer it. */
export function accessOf(resource: Resource, access: string): EnforceAccess | undefined {
  const lower = access.toLowerCase()
  return RESOURCE_ACCESSES[resource].find((known) => known === lower)
}

/** Consul's Enforce: whether `permissions` allow `access` on `resource` (named `segment` where it has names). */
export function enforce(permissions: Permissions, resource: Resource, segment: string, access: EnforceAccess): boolean {
  if (access === 'write-prefix') return permissions.allowsKeyWritePrefix(segment)
  return permissions.allows(resource, access, segment)
}
