/**
 * Name rules for ACL records and identities, as Consul enforces them (acl/validation.go).
 *
 * Identity names (service and node identities, and the `name` variable of the builtin/service and builtin/node
 * templates) are interpolated into rules text without escaping, so they are held to a strict lowercase alphabet.
 * Record names (policies, roles, auth methods) only have to be safe in URLs and logs.
 */

/** Service and node identity names are at most 256 characters long (Consul's Service/NodeIdentityNameMaxLength). */
export const IDENTITY_NAME_LENGTH_MAX = 256

/** The kinds of record whose names follow the record-name rule; each kind has its own length limit in Consul. */
export type RecordKind = 'policy' | 'role' | 'auth-method'

/**
 * Consul's limits: policy names 1..128 (PolicyNameMaxLength), role names 1..256 (validRoleName), auth method names
 * 1..128 (validAuthMethodName).
 */
export const RECORD_NAME_LENGTH_MAX: Readonly<Record<RecordKind, number>> = {
  policy: 128,
  role: 256,
  'auth-method': 128,
}

// The first and last characters must be alphanumeric so that a name never starts or ends with a separator; a single
// character name is therefore one alphanumeric.
const identityNamePattern = /^[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?$/

// Consul 1.17+ also lets a policy name contain one '/' (for `builtin/...` names it reserves), but the contract allows
// only alphanumerics, '-' and '_', so warden keeps the older, stricter alphabet for every record kind.
const recordNamePattern = /^[A-Za-z0-9_-]+$/

/** True when `name` may be used as a service identity or node identity name. */
export function isValidIdentityName(name: string): boolean {
  if (name.length < 1 || name.length > IDENTITY_NAME_LENGTH_MAX) return false
  return identityNamePattern.test(name)
}

/** True when `name` may be used as the name of a policy (default), role or auth method. */
export function isValidRecordName(name: string, kind: RecordKind = 'policy'): boolean {
  if (name.length < 1 || name.length > RECORD_NAME_LENGTH_MAX[kind]) return false
  return recordNamePattern.test(name)
}
