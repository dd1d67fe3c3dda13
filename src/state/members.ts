/** Apply functions of the member table: each server's advertised cluster address. */
import type { ApplyResult } from './commands.js'
import type { ClusterMember } from './records.js'
import { deleteRecord, getRecord, memberSpec, writeRecord } from './tables.js'
import type { Txn } from './txn.js'

export async function setMember(txn: Txn, node: string, address: string, index: number, incarnation?: string): Promise<ApplyResult> {
  const existing = await getRecord(txn, memberSpec, node)
  // A recorded incarnation stays until a join names another (the leader's own address refreshes carry none).
  const keptIncarnation = incarnation ?? existing?.Incarnation
  if (existing?.Address === address && existing.Incarnation === keptIncarnation) return { ok: true, value: existing }
  const member: ClusterMember = {
    Node: node,
    Address: address,
    ...(keptIncarnation === undefined ? {} : { Incarnation: keptIncarnation }),
    CreateIndex: existing?.CreateIndex ?? index,
    ModifyIndex: index,
  }
  writeRecord(txn, memberSpec, existing, member)
  return { ok: true, value: member }
}

export async function deleteMember(txn: Txn, node: string): Promise<ApplyResult> {
  const existing = await getRecord(txn, memberSpec, node)
  if (existing !== undefined) deleteRecord(txn, memberSpec, existing)
  return { ok: true, value: true }
}
