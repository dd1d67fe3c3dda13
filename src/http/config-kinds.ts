/**
 * The config-entry kinds of the contract, each with its name rule and its permissions (api.md "Config entries"), and
 * the checks of an entry body: what warden interprets (Kind, Name, Protocol) is validated and normalized; every
 * other field is kept as given, within a bound on size and nesting depth.
 *
 * Permissions written "X or Y" pass when either is allowed; a refusal names the first. Service-scoped kinds are
 * checked on the entry's Name (a `*` name is the authorizer's to judge as a wildcard). "mesh or operator" is Consul's
 * MeshWrite/MeshRead: the authorizer answers mesh from the operator rule when no mesh rule exists, and an explicit
 * mesh rule wins (`mesh = "read"` with `operator = "write"` may not write mesh entries), so only mesh is asked.
 */
import { isValidIdentityName } from '../acl/names.js'
import { deniedError, type PermissionAccess, type PermissionResource, type Permissions } from '../acl/authorization.js'
import { InvalidInputError, PermissionDeniedError } from '../lib/errors.js'
import type { ApiContext } from './context.js'
import { callerOf } from './request.js'

export { CONFIG_KINDS } from '../state/config-entries.js'
import { CONFIG_KINDS } from '../state/config-entries.js'

export type ConfigKind = (typeof CONFIG_KINDS)[number]

interface Permission {
  resource: PermissionResource
  access: PermissionAccess
  /** Checked on the entry's Name (labelled resources); otherwise on the resource as a whole. */
  named: boolean
}

/**
 * - `fixed`: the only name allowed; an empty name becomes it.
 * - `service`: a service name; `service-or-wildcard` also allows `*`.
 */
type NameRule = { fixed: string } | 'service' | 'service-or-wildcard'

interface KindRules {
  name: NameRule
  /** Whether `Protocol` is checked (one of PROTOCOLS). */
  protocol: boolean
  /** Any one of these allows a write or delete; `not-writable` refuses every caller. */
  write: Permission[] | 'not-writable'
  /** Any one of these allows a get, or keeps an entry in a list; `none` needs no permission. */
  read: Permission[] | 'none'
}

const MESH_WRITE: Permission[] = [{ resource: 'mesh', access: 'write', named: false }]
const MESH_READ: Permission[] = [{ resource: 'mesh', access: 'read', named: false }]
const SERVICE_WRITE: Permission[] = [{ resource: 'service', access: 'write', named: true }]
const SERVICE_READ: Permission[] = [{ resource: 'service', access: 'read', named: true }]
const INTENTIONS_WRITE: Permission[] = [{ resource: 'intention', access: 'write', named: true }]
const INTENTIONS_READ: Permission[] = [{ resource: 'intention', access: 'read', named: true }]

const KINDS: Readonly<Record<ConfigKind, KindRules>> = {
  'api-gateway': { name: 'service', protocol: false, write: MESH_WRITE, read: SERVICE_READ },
  'bound-api-gateway': { name: 'service', protocol: false, write: 'not-writable', read: SERVICE_READ },
  'exported-services': { name: 'service', protocol: false, write: MESH_WRITE, read: MESH_READ },
  'file-system-certificate': { name: 'service', protocol: false, write: MESH_WRITE, read: MESH_READ },
  'http-route': { name: 'service', protocol: false, write: MESH_WRITE, read: MESH_READ },
  'ingress-gateway': { name: 'service', protocol: false, write: MESH_WRITE, read: SERVICE_READ },
  'inline-certificate': { name: 'service', protocol: false, write: MESH_WRITE, read: MESH_READ },
  mesh: { name: { fixed: 'mesh' }, protocol: false, write: MESH_WRITE, read: 'none' },
  'proxy-defaults': { name: { fixed: 'global' }, protocol: true, write: MESH_WRITE, read: 'none' },
  'service-defaults': { name: 'service', protocol: true, write: SERVICE_WRITE, read: SERVICE_READ },
  'service-intentions': { name: 'service-or-wildcard', protocol: false, write: INTENTIONS_WRITE, read: INTENTIONS_READ },
  'service-resolver': { name: 'service', protocol: false, write: SERVICE_WRITE, read: SERVICE_READ },
  'service-router': { name: 'service', protocol: false, write: SERVICE_WRITE, read: SERVICE_READ },
  'service-splitter': { name: 'service', protocol: false, write: SERVICE_WRITE, read: SERVICE_READ },
  'tcp-route': { name: 'service', protocol: false, write: MESH_WRITE, read: MESH_READ },
  'terminating-gateway': { name: 'service', protocol: false, write: MESH_WRITE, read: SERVICE_READ },
}

export const PROTOCOLS = ['tcp', 'http', 'http2', 'grpc'] as const

/** Bounds on one stored entry: its JSON size and the nesting depth of its objects and arrays. */
export const ENTRY_BYTES_MAX = 256 * 1024
export const ENTRY_DEPTH_MAX = 32

export function isConfigKind(value: string): value is ConfigKind {
  return (CONFIG_KINDS as readonly string[]).includes(value)
}

/** The kind named by a body field or a path parameter; an unknown kind is a 400 that lists the allowed ones. */
export function checkKind(value: unknown, field: string): ConfigKind {
  if (value === undefined || value === '') throw new InvalidInputError(field, 'is required: the body must name the config entry kind in Kind (or kind)')
  if (typeof value !== 'string') throw new InvalidInputError(field, 'must be a string')
  if (!isConfigKind(value)) throw new InvalidInputError(field, `unknown config entry kind ${JSON.stringify(value)}; allowed kinds: ${CONFIG_KINDS.join(', ')}`)
  return value
}

/** Refuses writes and deletes of kinds no client may write. */
export function checkWritable(kind: ConfigKind): void {
  if (KINDS[kind].write === 'not-writable') {
    throw new PermissionDeniedError(
      `config entries of kind ${JSON.stringify(kind)} are not writable: they are written by the gateway controller, not through the API`,
    )
  }
}

/** The entry's name by its kind's rule (readings.md "Config names"); fixed names replace an empty one. */
export function checkName(kind: ConfigKind, value: unknown): string {
  const rule = KINDS[kind].name
  if (value !== undefined && typeof value !== 'string') throw new InvalidInputError('Name', 'must be a string')
  const name = value ?? ''
  if (typeof rule === 'object') {
    if (name === '') return rule.fixed
    if (name !== rule.fixed) throw new InvalidInputError('Name', `invalid name (${JSON.stringify(name)}), only ${JSON.stringify(rule.fixed)} is supported for kind ${kind}`)
    return name
  }
  if (name === '') throw new InvalidInputError('Name', 'is required')
  if (name === '*') {
    if (rule === 'service-or-wildcard') return name
    throw new InvalidInputError('Name', `${kind} name must be the name of a service, and not a wildcard`)
  }
  if (!isValidIdentityName(name)) {
    throw new InvalidInputError(
      'Name',
      `must be a service name: 1 to 256 lowercase letters, digits, "-" or "_", starting and ending with a letter or digit`,
    )
  }
  return name
}

/**
 * `Protocol` of service-defaults and proxy-defaults, lowercased, must be a protocol warden knows. An empty one is the
 * default, as if left out (Consul omits it when empty), and is not stored.
 */
export function checkProtocol(kind: ConfigKind, value: unknown): string | undefined {
  if (value === '' && KINDS[kind].protocol) return undefined
  if (value === undefined || !KINDS[kind].protocol) return value as string | undefined
  if (typeof value !== 'string') throw new InvalidInputError('Protocol', 'must be a string')
  const protocol = value.toLowerCase()
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    throw new InvalidInputError('Protocol', `must be one of ${PROTOCOLS.join(', ')} (got ${JSON.stringify(value)})`)
  }
  return protocol
}

/** Bounds the stored entry: nesting depth (with the path that goes too deep) and encoded size. */
export function checkEntryBounds(entry: Record<string, unknown>): void {
  checkDepth(entry, '', 1)
  const bytes = Buffer.byteLength(JSON.stringify(entry), 'utf8')
  if (bytes > ENTRY_BYTES_MAX) throw new InvalidInputError('body', `a config entry must be at most ${ENTRY_BYTES_MAX} bytes of JSON (this one is ${bytes})`)
}

function checkDepth(value: unknown, path: string, depth: number): void {
  if (typeof value !== 'object' || value === null) return
  if (depth > ENTRY_DEPTH_MAX) throw new InvalidInputError(path, `nests objects and arrays deeper than ${ENTRY_DEPTH_MAX} levels`)
  if (Array.isArray(value)) {
    for (const [position, item] of value.entries()) checkDepth(item, `${path}[${position}]`, depth + 1)
    return
  }
  for (const [key, item] of Object.entries(value)) {
    const at = path === '' ? key : `${path}.${key}`
    // msgpack decoding assigns keys one by one; a `__proto__` key would replace the decoded object's prototype.
    if (key === '__proto__') throw new InvalidInputError(at, 'is not allowed as a field name')
    checkDepth(item, at, depth + 1)
  }
}

function firstAllowed(permissions: Permissions, checks: Permission[], name: string): Permission | undefined {
  return checks.find((check) => permissions.allows(check.resource, check.access, check.named ? name : undefined))
}

/** Whether the caller may read entries of `kind` named `name`. */
export function canRead(permissions: Permissions, kind: ConfigKind, name: string): boolean {
  const read = KINDS[kind].read
  return read === 'none' || firstAllowed(permissions, read, name) !== undefined
}

/** Throws the 403 naming the first permission of the kind's read column when the caller has none of them. */
export async function requireRead(ctx: ApiContext, kind: ConfigKind, name: string): Promise<Permissions> {
  const caller = await callerOf(ctx)
  const read = KINDS[kind].read
  if (read !== 'none' && firstAllowed(caller.permissions, read, name) === undefined) throw denied(caller.accessorID, read, name)
  return caller.permissions
}

/** Throws the 403 naming the first permission of the kind's write column when the caller has none of them. */
export async function requireWrite(ctx: ApiContext, kind: ConfigKind, name: string): Promise<void> {
  checkWritable(kind)
  const caller = await callerOf(ctx)
  const write = KINDS[kind].write
  if (write === 'not-writable') return
  if (firstAllowed(caller.permissions, write, name) === undefined) throw denied(caller.accessorID, write, name)
}

function denied(accessorID: string, checks: Permission[], name: string): PermissionDeniedError {
  const first = checks[0]
  if (first === undefined) return new PermissionDeniedError('Permission denied')
  return deniedError(accessorID, first.resource, first.access, first.named ? name : undefined)
}
