/**
 * Apply of a login: the token a verified identity was bound to, written only if the auth method that verified it is
 * still the same record (same ModifyIndex: not deleted, recreated or reconfigured meanwhile, so a method deleted
 * mid-login never leaves a token behind its cascade). Roles are named by the binding rules; each is looked up at this
 * index and dropped when missing, as Consul drops them. A token left with no privilege at all is refused.
 */
import { applyError, type ApplyResult, type LoginWrite } from './commands.js'
import { insertToken, tokenIdsInUse, type TokenLinks } from './acl-tokens.js'
import { nsKey } from './keys.js'
import { DEFAULT_NAMESPACE, type AclRole, type IdLink } from './records.js'
import { authMethodSpec, getByUnique, getRecord, roleSpec } from './tables.js'
import type { Txn } from './txn.js'

export async function createLoginToken(txn: Txn, login: LoginWrite, index: number): Promise<ApplyResult> {
  const input = login.token
  const method = await getRecord(txn, authMethodSpec, nsKey(login.authMethodNamespace, input.AuthMethod))
  if (method === undefined || method.ModifyIndex !== login.authMethodModifyIndex) {
    return applyError(
      'permission_denied',
      `Permission denied: auth method "${input.AuthMethod}" was deleted or changed while the login was being verified; log in again`,
    )
  }
  const inUse = await tokenIdsInUse(txn, input)
  if (inUse !== undefined) return inUse
  const roles: IdLink[] = []
  const missing: string[] = []
  for (const link of input.Roles) {
    const role = link.Name === undefined ? undefined : await roleByName(txn, link.Name, input.Namespace)
    if (role === undefined) missing.push(link.Name ?? '')
    else if (!roles.some((existing) => existing.ID === role.ID)) roles.push({ ID: role.ID })
  }
  if (roles.length === 0 && input.ServiceIdentities.length === 0 && input.NodeIdentities.length === 0 && input.TemplatedPolicies.length === 0) {
    return applyError(
      'permission_denied',
      `Permission denied: login through auth method "${input.AuthMethod}" yields no privilege: the roles its binding rules name do not exist (${missing.join(', ')})`,
    )
  }
  const links: TokenLinks = { Policies: [], Roles: roles, TemplatedPolicies: input.TemplatedPolicies, ServiceIdentities: input.ServiceIdentities, NodeIdentities: input.NodeIdentities }
  return insertToken(txn, input, links, index, login.authMethodNamespace)
}

/** As links by name resolve (links.ts): the token's namespace first, then the default namespace. */
async function roleByName(txn: Txn, name: string, namespace: string): Promise<AclRole | undefined> {
  const role = await getByUnique(txn, roleSpec, 'name', nsKey(namespace, name))
  if (role !== undefined || namespace === DEFAULT_NAMESPACE) return role
  return getByUnique(txn, roleSpec, 'name', nsKey(DEFAULT_NAMESPACE, name))
}
