/**
 * Apply functions of the policy and role commands: unique names per namespace, links that must exist, and the guards
 * on the built-in global-management policy, all decided at the command's index.
 */
import { applyError, type ApplyResult, type PolicyWrite, type RoleWrite } from './commands.js'
import { GLOBAL_MANAGEMENT_POLICY_ID } from './builtins.js'
import { blake2bBase64 } from './hash.js'
import { nsKey } from './keys.js'
import { resolvePolicyLinks } from './links.js'
import type { AclPolicy, AclRole } from './records.js'
import { deleteRecord, getByUnique, getRecord, policySpec, roleSpec, writeRecord } from './tables.js'
import type { Txn } from './txn.js'

/** Consul's ACLPolicy.SetHash: BLAKE2b-256 over Name, Description, Rules and each datacenter. */
export function policyHash(policy: Pick<AclPolicy, 'Name' | 'Description' | 'Rules' | 'Datacenters'>): string {
  return blake2bBase64([policy.Name, policy.Description, policy.Rules, ...policy.Datacenters])
}

export async function setPolicy(txn: Txn, input: PolicyWrite, index: number, mode: 'create' | 'update'): Promise<ApplyResult> {
  const existing = await getRecord(txn, policySpec, input.ID)
  if (mode === 'create' && existing !== undefined) return applyError('invalid_input', 'is already in use', 'ID')
  if (mode === 'update' && existing === undefined) return applyError('not_found', `policy "${input.ID}" does not exist`)
  const namespace = existing?.Namespace ?? input.Namespace
  if (existing !== undefined && input.Namespace !== existing.Namespace) {
    return applyError('invalid_input', `must equal the policy's namespace "${existing.Namespace}"`, 'Namespace')
  }
  const sameName = await getByUnique(txn, policySpec, 'name', nsKey(namespace, input.Name))
  if (sameName !== undefined && sameName.ID !== input.ID) {
    return applyError('invalid_input', `a policy named "${input.Name}" already exists`, 'Name')
  }
  if (existing?.ID === GLOBAL_MANAGEMENT_POLICY_ID) {
    if (input.Rules !== existing.Rules) {
      return applyError('invalid_input', 'the rules of the global-management policy cannot be changed', 'Rules')
    }
    if (JSON.stringify(input.Datacenters) !== JSON.stringify(existing.Datacenters)) {
      return applyError('invalid_input', 'the datacenters of the global-management policy cannot be changed', 'Datacenters')
    }
  }
  const fields = { ...input, Namespace: namespace }
  const policy: AclPolicy = { ...fields, Hash: policyHash(fields), CreateIndex: existing?.CreateIndex ?? index, ModifyIndex: index }
  writeRecord(txn, policySpec, existing, policy)
  return { ok: true, value: policy }
}

export async function deletePolicy(txn: Txn, id: string): Promise<ApplyResult> {
  if (id === GLOBAL_MANAGEMENT_POLICY_ID) {
    return applyError('invalid_input', 'the global-management policy cannot be deleted', 'ID')
  }
  const existing = await getRecord(txn, policySpec, id)
  // Tokens and roles keep the dangling link; reads leave out links whose target is gone, as Consul does.
  if (existing !== undefined) deleteRecord(txn, policySpec, existing)
  return { ok: true, value: true }
}

export function roleHash(role: Omit<AclRole, 'Hash' | 'CreateIndex' | 'ModifyIndex'>): string {
  const parts = [role.Name, role.Description]
  for (const link of role.Policies) parts.push(`policy:${link.ID}`)
  for (const identity of role.ServiceIdentities) parts.push(`service:${identity.ServiceName}`, ...(identity.Datacenters ?? []))
  for (const identity of role.NodeIdentities) parts.push(`node:${identity.NodeName}`, identity.Datacenter)
  for (const link of role.TemplatedPolicies) parts.push(`template:${link.TemplateName}`, JSON.stringify(link.TemplateVariables ?? {}))
  return blake2bBase64(parts)
}

export async function setRole(txn: Txn, input: RoleWrite, index: number, mode: 'create' | 'update'): Promise<ApplyResult> {
  const existing = await getRecord(txn, roleSpec, input.ID)
  if (mode === 'create' && existing !== undefined) return applyError('invalid_input', 'is already in use', 'ID')
  if (mode === 'update' && existing === undefined) return applyError('not_found', `role "${input.ID}" does not exist`)
  if (existing !== undefined && input.Namespace !== existing.Namespace) {
    return applyError('invalid_input', `must equal the role's namespace "${existing.Namespace}"`, 'Namespace')
  }
  const sameName = await getByUnique(txn, roleSpec, 'name', nsKey(input.Namespace, input.Name))
  if (sameName !== undefined && sameName.ID !== input.ID) {
    return applyError('invalid_input', `a role named "${input.Name}" already exists`, 'Name')
  }
  const policies = await resolvePolicyLinks(txn, input.Policies, input.Namespace)
  if (!policies.ok) return applyError('invalid_input', policies.message, policies.field)
  const fields = { ...input, Policies: policies.links }
  const role: AclRole = { ...fields, Hash: roleHash(fields), CreateIndex: existing?.CreateIndex ?? index, ModifyIndex: index }
  writeRecord(txn, roleSpec, existing, role)
  return { ok: true, value: role }
}

export async function deleteRole(txn: Txn, id: string): Promise<ApplyResult> {
  const existing = await getRecord(txn, roleSpec, id)
  if (existing !== undefined) deleteRecord(txn, roleSpec, existing)
  return { ok: true, value: true }
}
