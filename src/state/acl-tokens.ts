/**
 * Apply functions of the token commands. Each checks again, against the state at its own index, every rule that
 * depends on the state (unique IDs and secrets, links that must exist, immutable fields), and returns an operating
 * error as a value rather than throwing: the same result on every replica.
 */
import { applyError, type ApplyResult, type TokenCreate, type TokenUpdate } from './commands.js'
import { ANONYMOUS_TOKEN_ID } from './builtins.js'
import { blake2bBase64 } from './hash.js'
import { resolvePolicyLinks, resolveRoleLinks } from './links.js'
import type { AclToken, IdLink, NodeIdentity, ServiceIdentity, TemplatedPolicyLink } from './records.js'
import { deleteRecord, getRecord, policySpec, roleSpec, secretDigest, tokenBySecret, tokenSpec, writeRecord } from './tables.js'
import type { Txn } from './txn.js'

/** A token's links as stored: policies and roles resolved to IDs. */
export interface TokenLinks {
  Policies: IdLink[]
  Roles: IdLink[]
  TemplatedPolicies: TemplatedPolicyLink[]
  ServiceIdentities: ServiceIdentity[]
  NodeIdentities: NodeIdentity[]
}

export function tokenHash(token: Omit<AclToken, 'Hash' | 'CreateIndex' | 'ModifyIndex'>): string {
  const parts = [token.Description, token.Local ? 'local' : 'global']
  for (const link of token.Policies) parts.push(`policy:${link.ID}`)
  for (const link of token.Roles) parts.push(`role:${link.ID}`)
  for (const identity of token.ServiceIdentities) parts.push(`service:${identity.ServiceName}`, ...(identity.Datacenters ?? []))
  for (const identity of token.NodeIdentities) parts.push(`node:${identity.NodeName}`, identity.Datacenter)
  for (const link of token.TemplatedPolicies) parts.push(`template:${link.TemplateName}`, JSON.stringify(link.TemplateVariables ?? {}))
  return blake2bBase64(parts)
}

async function resolveTokenLinks(txn: Txn, input: TokenCreate | TokenUpdate, namespace: string): Promise<TokenLinks | ApplyResult> {
  const policies = await resolvePolicyLinks(txn, input.Policies, namespace)
  if (!policies.ok) return applyError('invalid_input', policies.message, policies.field)
  const roles = await resolveRoleLinks(txn, input.Roles, namespace)
  if (!roles.ok) return applyError('invalid_input', roles.message, roles.field)
  return {
    Policies: policies.links,
    Roles: roles.links,
    TemplatedPolicies: input.TemplatedPolicies,
    ServiceIdentities: input.ServiceIdentities,
    NodeIdentities: input.NodeIdentities,
  }
}

function isApplyResult(value: TokenLinks | ApplyResult): value is ApplyResult {
  return 'ok' in value
}

/** A new token's AccessorID and SecretID must not be in use: the error naming the first that is, if one is. */
export async function tokenIdsInUse(txn: Txn, input: Pick<TokenCreate, 'AccessorID' | 'SecretID'>): Promise<ApplyResult | undefined> {
  if ((await getRecord(txn, tokenSpec, input.AccessorID)) !== undefined) {
    return applyError('invalid_input', 'is already in use', 'AccessorID')
  }
  if ((await tokenBySecret(txn, input.SecretID)) !== undefined) {
    return applyError('invalid_input', 'is already in use', 'SecretID')
  }
  return undefined
}

/**
 * Writes a new token at `index`: `input` with its links as resolved (`links`) and, for a token a login made, the
 * namespace of the auth method that made it. The caller has checked everything else.
 */
export function insertToken(txn: Txn, input: TokenCreate, links: TokenLinks, index: number, authMethodNamespace?: string): ApplyResult {
  const fields: Omit<AclToken, 'Hash' | 'CreateIndex' | 'ModifyIndex'> = {
    AccessorID: input.AccessorID,
    SecretID: input.SecretID,
    Description: input.Description,
    ...links,
    Local: input.Local,
    AuthMethod: input.AuthMethod,
    ...(authMethodNamespace === undefined ? {} : { AuthMethodNamespace: authMethodNamespace }),
    ...(input.ExpirationTime === undefined ? {} : { ExpirationTime: input.ExpirationTime }),
    CreateTime: input.CreateTime,
    Namespace: input.Namespace,
  }
  const token: AclToken = { ...fields, Hash: tokenHash(fields), CreateIndex: index, ModifyIndex: index }
  writeRecord(txn, tokenSpec, undefined, token)
  return { ok: true, value: token }
}

export async function createToken(txn: Txn, input: TokenCreate, index: number): Promise<ApplyResult> {
  const inUse = await tokenIdsInUse(txn, input)
  if (inUse !== undefined) return inUse
  const links = await resolveTokenLinks(txn, input, input.Namespace)
  if (isApplyResult(links)) return links
  return insertToken(txn, input, links, index)
}

export async function updateToken(txn: Txn, input: TokenUpdate, index: number): Promise<ApplyResult> {
  const existing = await getRecord(txn, tokenSpec, input.AccessorID)
  if (existing === undefined) return applyError('not_found', `token "${input.AccessorID}" does not exist`)
  // Compared by digest: in time that does not depend on where the secrets differ, and without regard to a UUID's case.
  if (input.SecretID !== undefined && secretDigest(input.SecretID) !== secretDigest(existing.SecretID)) {
    return applyError('invalid_input', 'is immutable and must match the existing value', 'SecretID')
  }
  if (input.AuthMethod !== undefined && input.AuthMethod !== existing.AuthMethod) {
    return applyError('invalid_input', 'is immutable and must match the existing value', 'AuthMethod')
  }
  if (input.ExpirationTime !== undefined && !sameInstant(input.ExpirationTime, existing.ExpirationTime)) {
    return applyError('invalid_input', 'is immutable and must match the existing value', 'ExpirationTime')
  }
  if (input.Local !== existing.Local) {
    return applyError('invalid_input', `cannot toggle local mode of token "${existing.AccessorID}"`, 'Local')
  }
  if (input.Namespace !== existing.Namespace) {
    return applyError('invalid_input', `must equal the token's namespace "${existing.Namespace}"`, 'Namespace')
  }
  const links = await resolveTokenLinks(txn, input, existing.Namespace)
  if (isApplyResult(links)) return links
  const fields: Omit<AclToken, 'Hash' | 'CreateIndex' | 'ModifyIndex'> = { ...existing, Description: input.Description, ...links }
  const token: AclToken = { ...fields, Hash: tokenHash(fields), CreateIndex: existing.CreateIndex, ModifyIndex: index }
  writeRecord(txn, tokenSpec, existing, token)
  return { ok: true, value: token }
}

export async function cloneToken(
  txn: Txn,
  sourceAccessorID: string,
  input: Pick<TokenCreate, 'AccessorID' | 'SecretID' | 'Description' | 'CreateTime' | 'Namespace'>,
  index: number,
): Promise<ApplyResult> {
  const source = await getRecord(txn, tokenSpec, sourceAccessorID)
  if (source === undefined) return applyError('not_found', `token "${sourceAccessorID}" does not exist`)
  if (source.AuthMethod !== '') {
    return applyError('invalid_input', `cannot clone token "${sourceAccessorID}": it was created by a login through an auth method`)
  }
  const { CreateIndex: _c, ModifyIndex: _m, Hash: _h, ...rest } = source
  // Links to policies or roles deleted since are dropped, as reads already leave them out.
  const Policies: IdLink[] = []
  for (const link of source.Policies) if ((await getRecord(txn, policySpec, link.ID)) !== undefined) Policies.push(link)
  const Roles: IdLink[] = []
  for (const link of source.Roles) if ((await getRecord(txn, roleSpec, link.ID)) !== undefined) Roles.push(link)
  return createToken(
    txn,
    {
      ...rest,
      Policies,
      Roles,
      AccessorID: input.AccessorID,
      SecretID: input.SecretID,
      Description: input.Description,
      CreateTime: input.CreateTime,
      Namespace: source.Namespace,
    },
    index,
  )
}

export async function deleteToken(txn: Txn, accessorID: string): Promise<ApplyResult> {
  if (accessorID === ANONYMOUS_TOKEN_ID) {
    return applyError('invalid_input', 'delete operation not permitted on the anonymous token', 'AccessorID')
  }
  const existing = await getRecord(txn, tokenSpec, accessorID)
  if (existing !== undefined) deleteRecord(txn, tokenSpec, existing)
  // Deletes are idempotent: the token is gone afterwards whether or not it existed.
  return { ok: true, value: true }
}

/** The reaper's batch delete: only tokens whose ExpirationTime has passed at `now` (decided by the proposer). */
export async function deleteExpiredTokens(txn: Txn, accessorIDs: readonly string[], now: string): Promise<ApplyResult> {
  const nowMs = Date.parse(now)
  let deleted = 0
  for (const accessorID of accessorIDs) {
    const token = await getRecord(txn, tokenSpec, accessorID)
    if (token?.ExpirationTime === undefined || Date.parse(token.ExpirationTime) > nowMs) continue
    deleteRecord(txn, tokenSpec, token)
    deleted += 1
  }
  return { ok: true, value: deleted }
}

function sameInstant(given: string, stored: string | undefined): boolean {
  if (stored === undefined) return given === ''
  return Date.parse(given) === Date.parse(stored)
}
