/**
 * Archives crafted to break a restore (a review's findings, each a test that failed before its fix): a record nested
 * deeper than MessagePack re-encodes, a key staged twice, pairs larger than any record, an expiration time without its
 * offset; and records a live state holds (binding rules, login tokens) that must be restorable.
 */
import { expect } from 'chai'
import { encode } from '../../../src/state/codec.js'
import { COMMAND_VERSION, type ApplyResult, type Command } from '../../../src/state/commands.js'
import { recordKey } from '../../../src/state/keys.js'
import { nextDigest, RESTORE_PAIR_BYTES_MAX, stagedPairProblem } from '../../../src/state/restore.js'
import { finishStateSwitch } from '../../../src/state/snapshot.js'
import { StateStore } from '../../../src/state/store.js'
import { tokenBySecret } from '../../../src/state/tables.js'
import { dump, indexProblems } from '../../support/state.js'
import { useTempDirs } from '../../support/temp-dir.js'

const NOW = '2026-11-26T08:00:00Z'
const uuid = (kind: number, n: number): string => `${kind.toString(16).padStart(8, '0')}-0000-4000-8000-${n.toString(16).padStart(12, '0')}`

class Node {
  index = 0
  constructor(
    public store: StateStore,
    readonly directory: string,
  ) {}

  async apply(command: Command): Promise<ApplyResult> {
    this.index += 1
    return this.store.apply(command, this.index)
  }

  async ok(command: Command): Promise<unknown> {
    const result = await this.apply(command)
    expect(result, `${command.type}: ${JSON.stringify(result)}`).to.have.property('ok', true)
    return (result as { value?: unknown }).value
  }
}

const tokenRecord = (accessor: string, secret: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  AccessorID: accessor,
  SecretID: secret,
  Description: '',
  Policies: [],
  Roles: [],
  TemplatedPolicies: [],
  ServiceIdentities: [],
  NodeIdentities: [],
  Local: false,
  AuthMethod: '',
  CreateTime: NOW,
  Namespace: 'default',
  Hash: 'h',
  CreateIndex: 1,
  ModifyIndex: 1,
  ...extra,
})

describe('state/restore: crafted archives', function () {
  const dirs = useTempDirs()
  const open = async (): Promise<Node> => {
    const directory = await dirs.make('warden-restore-crafted-')
    const node = new Node(await StateStore.open(directory), directory)
    dirs.defer(async () => {
      if (node.store.db.status === 'open') await node.store.close()
    })
    return node
  }

  it('a record nested deeper than MessagePack can re-encode is refused by the check, not thrown out of apply', async () => {
    const node = await open()
    await node.ok({ v: COMMAND_VERSION, type: 'acl.init' })
    const key = recordKey('policy', uuid(0xb, 1))
    // The record with Extra: [[[...null...]]] 2,000 deep, written as bytes (msgpackr itself cannot encode it).
    const shallow = encode({ ID: uuid(0xb, 1), Name: 'p', Namespace: 'default', Description: '', Rules: '', Datacenters: [], Hash: 'h', CreateIndex: 1, ModifyIndex: 1, Extra: null })
    expect(shallow[shallow.length - 1]).to.equal(0xc0)
    const value = Buffer.concat([shallow.subarray(0, shallow.length - 1), Buffer.alloc(2000, 0x91), Buffer.from([0xc0])])
    expect(stagedPairProblem(key, value)).to.match(/nests maps and lists deeper than/)
    await node.ok({ v: COMMAND_VERSION, type: 'restore.begin', id: 'r1', chunks: 1, records: 1 })
    const result = await node.apply({ v: COMMAND_VERSION, type: 'restore.chunk', id: 'r1', seq: 0, pairs: [[key, value]] })
    expect(result).to.have.property('ok', false)
  })

  it('a key staged twice is refused, so a build made chunk by chunk and one rebuilt hold the same state', async () => {
    const a = await open()
    const b = await open()
    const accessor = uuid(0xa, 1)
    const oldSecret = uuid(0x5, 1)
    const newSecret = uuid(0x5, 2)
    const chunk0: Array<[string, Uint8Array]> = [[recordKey('token', accessor), encode(tokenRecord(accessor, oldSecret))]]
    const chunk1: Array<[string, Uint8Array]> = [[recordKey('token', accessor), encode(tokenRecord(accessor, newSecret))]]
    for (const node of [a, b]) {
      await node.ok({ v: COMMAND_VERSION, type: 'acl.init' })
      await node.ok({ v: COMMAND_VERSION, type: 'restore.begin', id: 'r1', chunks: 2, records: 2 })
      await node.ok({ v: COMMAND_VERSION, type: 'restore.chunk', id: 'r1', seq: 0, pairs: chunk0 })
      const repeated = (await node.apply({ v: COMMAND_VERSION, type: 'restore.chunk', id: 'r1', seq: 1, pairs: chunk1 })) as { ok: boolean; error?: { message: string } }
      expect(repeated.ok).to.equal(false)
      expect(repeated.error?.message).to.match(/out of order or repeated/)
    }
    // b loses its build (a power loss, or a Raft snapshot installed half way): the commit rebuilds it from s/.
    await b.store.close()
    await b.store.files.remove('restore')
    await finishStateSwitch(b.store.files, 0)
    b.store = await StateStore.open(b.directory)
    const one: Array<[string, Uint8Array]> = [[recordKey('token', uuid(0xa, 2)), encode(tokenRecord(uuid(0xa, 2), uuid(0x5, 3)))]]
    for (const node of [a, b]) {
      await node.ok({ v: COMMAND_VERSION, type: 'restore.chunk', id: 'r1', seq: 1, pairs: one })
      await node.ok({ v: COMMAND_VERSION, type: 'restore.commit', id: 'r1', chunks: 2, digest: nextDigest(nextDigest('', chunk0), one) })
    }
    const keys = (entries: Awaited<ReturnType<typeof dump>>): string[] => entries.filter(([key]) => key !== 'm\u0000sync').map(([key, value]) => `${key}=${value.toString('hex')}`)
    expect(keys(await dump(a.store))).to.deep.equal(keys(await dump(b.store)))
    expect(await indexProblems(a.store)).to.deep.equal([])
    expect((await tokenBySecret(a.store.reader, oldSecret))?.AccessorID).to.equal(accessor)
    expect(await tokenBySecret(a.store.reader, newSecret)).to.equal(undefined)
  })

  it('records a live state holds are restorable: a binding rule, a token made by a login', () => {
    const rule = { ID: uuid(0xc, 1), Description: '', AuthMethod: 'm', Selector: '', BindType: 'service', BindName: 'x', Namespace: 'default', CreateIndex: 1, ModifyIndex: 1 }
    expect(stagedPairProblem(recordKey('binding-rule', rule.ID), encode(rule)), 'binding rule').to.equal(undefined)
    const login = tokenRecord(uuid(0xa, 3), uuid(0x5, 3), { AuthMethod: 'm', AuthMethodNamespace: 'default' })
    expect(stagedPairProblem(recordKey('token', uuid(0xa, 3)), encode(login)), 'login token').to.equal(undefined)
  })

  it('a pair larger than any record, and an expiration time whose instant depends on the time zone, are refused', () => {
    const key = recordKey('token', uuid(0xa, 4))
    const big = encode(tokenRecord(uuid(0xa, 4), uuid(0x5, 4), { Description: 'x'.repeat(RESTORE_PAIR_BYTES_MAX) }))
    expect(stagedPairProblem(key, big)).to.match(/more than any record can/)
    const local = encode(tokenRecord(uuid(0xa, 4), uuid(0x5, 4), { ExpirationTime: '2030-01-01T00:00:00' }))
    expect(stagedPairProblem(key, local)).to.match(/ExpirationTime must be an RFC 3339 time with its offset/)
    const zoned = encode(tokenRecord(uuid(0xa, 4), uuid(0x5, 4), { ExpirationTime: '2030-01-01T00:00:00Z' }))
    expect(stagedPairProblem(key, zoned)).to.equal(undefined)
  })
})
