/**
 * Apply of a login: the token a verified identity was bound to, written only if the auth method that verified it is
 * still the same record (same ModifyIndex: not deleted, recreated or reconfigured meanwhile, so a method deleted
 * mid-login never leaves a token behind its cascade). Roles are named by the binding rules; each is looked up at this
 * index and dropped when missing, as Consul drops them. A token left with no privilege at all is refused.
 */
import { applyError, type ApplyResult, type LoginWrite } from './commands.js'
import { tokenHash } from './acl-tokens.js'
import { nsKey } from './keys.js'
import { DEFAULT_NAMESPACE, type AclRole, type AclToken, type IdLink } from './records.js'
import { authMethodSpec, getByUnique, getRecord, roleSpec, secretDigest, tokenSpec, writeRecord } from './tables.js'
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
  if ((await getRecord(txn, tokenSpec, input.AccessorID)) !== undefined) return applyError('invalid_input', 'is already in use', 'AccessorID')
  if ((await getByUnique(txn, tokenSpec, 'secret', secretDigest(input.SecretID))) !== undefined) {
    return applyError('invalid_input', 'is already in use', 'SecretID')
  }
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
  const fields: Omit<AclToken, 'Hash' | 'CreateIndex' | 'ModifyIndex'> = {
    AccessorID: input.AccessorID,
    SecretID: input.SecretID,
    Description: input.Description,
    Policies: [],
    Roles: roles,
    TemplatedPolicies: input.TemplatedPolicies,
    ServiceIdentities: input.ServiceIdentities,
    NodeIdentities: input.NodeIdentities,
    Local: input.Local,
    AuthMethod: input.AuthMethod,
    AuthMethodNamespace: login.authMethodNamespace,
    ...(input.ExpirationTime === undefined ? {} : { ExpirationTime: input.ExpirationTime }),
    CreateTime: input.CreateTime,
    Namespace: input.Namespace,
  }
  const token: AclToken = { ...fields, Hash: tokenHash(fields), CreateIndex: index, ModifyIndex: index }
  writeRecord(txn, tokenSpec, undefined, token)
  return { ok: true, value: token }
}

/** As links by name resolve (links.ts): the token's namespace first, then the default namespace. */
async function roleByName(txn: Txn, name: string, namespace: string): Promise<AclRole | undefined> {
  const role = await getByUnique(txn, roleSpec, 'name', nsKey(namespace, name))
  if (role !== undefined || namespace === DEFAULT_NAMESPACE) return role
  return getByUnique(txn, roleSpec, 'name', nsKey(DEFAULT_NAMESPACE, name))
}
