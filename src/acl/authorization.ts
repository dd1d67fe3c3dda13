/**
 * What a request may do. `Permissions` is the narrow interface the HTTP layer asks ("may this caller do acl:write?");
 * `requirePermission` turns a refusal into the 403 whose message names the permission and the resource lacked, the
 * thing operators most need when debugging ACLs.
 */
import { PermissionDeniedError } from '../lib/errors.js'
import type { Access, Resource } from './authorizer.js'

/** A resource a permission names: the authorizer's resources, under the name the HTTP layer uses. */
export type PermissionResource = Resource

/** An access level a permission names: the authorizer's, under the name the HTTP layer uses. */
export type PermissionAccess = Access

export interface Permissions {
  allows(resource: PermissionResource, access: PermissionAccess, name?: string): boolean
  /** Consul's KeyWritePrefix (the `write-prefix` access of POST /v1/internal/acl/authorize): write on every key under `prefix`. */
  allowsKeyWritePrefix(prefix: string): boolean
}

/** The permission's spelling in messages: intentions are checked as `intentions:write on "web"`, as Consul writes it. */
export function permissionText(resource: PermissionResource, access: PermissionAccess, name?: string): string {
  const noun = resource === 'intention' ? 'intentions' : resource
  return name === undefined ? `${noun}:${access}` : `${noun}:${access} on ${JSON.stringify(name)}`
}

export function deniedError(accessorID: string, resource: PermissionResource, access: PermissionAccess, name?: string): PermissionDeniedError {
  return new PermissionDeniedError(
    `Permission denied: token with AccessorID '${accessorID}' lacks permission ${permissionText(resource, access, name)}`,
  )
}
