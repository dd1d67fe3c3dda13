/**
 * Token resolution: the request's secret (or none, meaning the anonymous token) to a token and its permissions. The
 * lookup is by the SHA-256 index of the secret; an unknown or expired secret is `acl_not_found` (403 "ACL not found").
 */
import { AclNotFoundError } from '../lib/errors.js'
import { ANONYMOUS_TOKEN_ID, ANONYMOUS_TOKEN_SECRET } from '../state/builtins.js'
import type { AclToken } from '../state/records.js'
import type { StateStore } from '../state/store.js'
import { getByUnique, getRecord, secretDigest, tokenSpec } from '../state/tables.js'
import { isManagementToken } from '../state/acl-tokens.js'
import type { Permissions } from './authorization.js'

export interface Caller {
  token: AclToken
  /** How messages name the caller: its AccessorID, or `anonymous`. */
  accessorID: string
  permissions: Permissions
}

export function isExpired(token: AclToken, nowMs: number): boolean {
  return token.ExpirationTime !== undefined && Date.parse(token.ExpirationTime) <= nowMs
}

const ALL: Permissions = { allows: () => true }
const NONE: Permissions = { allows: () => false }
/** Until policy rules are enforced, a valid token that is not a management token may read the ACL API, nothing more. */
const ACL_READ: Permissions = { allows: (resource, access) => resource === 'acl' && access === 'read' }

export class TokenResolver {
  constructor(private readonly state: StateStore) {}

  async tokenBySecret(secret: string, nowMs: number): Promise<AclToken | undefined> {
    const token = await getByUnique(this.state.reader, tokenSpec, 'secret', secretDigest(secret))
    if (token === undefined || isExpired(token, nowMs)) return undefined
    return token
  }

  async resolve(secret: string | undefined, nowMs: number): Promise<Caller> {
    const anonymous = secret === undefined || secret === '' || secret === ANONYMOUS_TOKEN_SECRET
    const token = anonymous
      ? await getRecord(this.state.reader, tokenSpec, ANONYMOUS_TOKEN_ID)
      : await this.tokenBySecret(secret, nowMs)
    if (token === undefined) throw new AclNotFoundError()
    return {
      token,
      accessorID: token.AccessorID === ANONYMOUS_TOKEN_ID ? 'anonymous' : token.AccessorID,
      permissions: this.permissionsOf(token),
    }
  }

  private permissionsOf(token: AclToken): Permissions {
    if (isManagementToken(token)) return ALL
    if (token.AccessorID === ANONYMOUS_TOKEN_ID) return NONE
    return ACL_READ
  }
}
