/**
 * Apply functions of auth methods and binding rules. Deleting an auth method deletes its binding rules and every
 * token it created in the same command, so no replica ever sees a rule or a login token without its method.
 */
import { applyError, type ApplyResult, type AuthMethodWrite, type BindingRuleWrite } from './commands.js'
import { nsKey } from './keys.js'
import type { AclAuthMethod, AclBindingRule } from './records.js'
import { authMethodSpec, bindingRuleSpec, deleteRecord, getRecord, listByIndex, tokenSpec, writeRecord } from './tables.js'
import type { Txn } from './txn.js'

export async function setAuthMethod(txn: Txn, input: AuthMethodWrite, index: number, mode: 'create' | 'update'): Promise<ApplyResult> {
  const existing = await getRecord(txn, authMethodSpec, nsKey(input.Namespace, input.Name))
  if (mode === 'create' && existing !== undefined) {
    return applyError('invalid_input', `an auth method named "${input.Name}" already exists`, 'Name')
  }
  if (mode === 'update' && existing === undefined) return applyError('not_found', `auth method "${input.Name}" does not exist`)
  if (existing !== undefined && existing.Type !== input.Type) {
    return applyError('invalid_input', `is immutable and must match the existing value "${existing.Type}"`, 'Type')
  }
  const method: AclAuthMethod = { ...input, CreateIndex: existing?.CreateIndex ?? index, ModifyIndex: index }
  writeRecord(txn, authMethodSpec, existing, method)
  return { ok: true, value: method }
}

export async function deleteAuthMethod(txn: Txn, namespace: string, name: string): Promise<ApplyResult> {
  const existing = await getRecord(txn, authMethodSpec, nsKey(namespace, name))
  if (existing === undefined) return { ok: true, value: true }
  const methodKey = nsKey(namespace, name)
  for (const rule of await listByIndex(txn, bindingRuleSpec, 'authmethod', methodKey)) deleteRecord(txn, bindingRuleSpec, rule)
  for (const token of await listByIndex(txn, tokenSpec, 'authmethod', methodKey)) deleteRecord(txn, tokenSpec, token)
  deleteRecord(txn, authMethodSpec, existing)
  return { ok: true, value: true }
}

export async function setBindingRule(txn: Txn, input: BindingRuleWrite, index: number, mode: 'create' | 'update'): Promise<ApplyResult> {
  const existing = await getRecord(txn, bindingRuleSpec, input.ID)
  if (mode === 'create' && existing !== undefined) return applyError('invalid_input', 'is already in use', 'ID')
  if (mode === 'update' && existing === undefined) return applyError('not_found', `binding rule "${input.ID}" does not exist`)
  if (existing !== undefined && existing.AuthMethod !== input.AuthMethod) {
    return applyError('invalid_input', `is immutable and must match the existing value "${existing.AuthMethod}"`, 'AuthMethod')
  }
  if (existing !== undefined && existing.Namespace !== input.Namespace) {
    return applyError('invalid_input', `must equal the binding rule's namespace "${existing.Namespace}"`, 'Namespace')
  }
  const method = await getRecord(txn, authMethodSpec, nsKey(input.Namespace, input.AuthMethod))
  if (method === undefined) return applyError('invalid_input', `no auth method named "${input.AuthMethod}"`, 'AuthMethod')
  const rule: AclBindingRule = { ...input, CreateIndex: existing?.CreateIndex ?? index, ModifyIndex: index }
  writeRecord(txn, bindingRuleSpec, existing, rule)
  return { ok: true, value: rule }
}

export async function deleteBindingRule(txn: Txn, id: string): Promise<ApplyResult> {
  const existing = await getRecord(txn, bindingRuleSpec, id)
  if (existing !== undefined) deleteRecord(txn, bindingRuleSpec, existing)
  return { ok: true, value: true }
}
