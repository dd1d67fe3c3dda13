/**
 * The state machine's side of a snapshot restore (state/restore.ts) over real LevelDB: what commit builds (records
 * back with their CreateIndex, ModifyIndex and table indexes at the commit, indexes rebuilt from the records, members
 * kept, nothing staged left), the refusals (writes while open, chunks out of order, pairs that are no record, a commit
 * that did not get everything), a restore half way carried by a Raft snapshot to another store, and crashes between
 * building the restored state and switching to it; and archives crafted to break it (a record nested deeper than
 * MessagePack re-encodes, a key staged twice, pairs larger than any record, an expiration time without its offset) or
 * holding records a live state holds (binding rules, login tokens).
 */
import { expect } from 'chai'
import { decode, encode } from '../../../src/state/codec.js'
import { COMMAND_VERSION, type ApplyResult, type Command } from '../../../src/state/commands.js'
import { RESTORE_KEY, STAGED_PREFIX, TABLES, nsKey, recordKey, tableIndexKey } from '../../../src/state/keys.js'
import { isRestoredPair, nextDigest, RESTORE_PAIR_BYTES_MAX, RestoreBuild, stagedPairProblem } from '../../../src/state/restore.js'
import { finishStateSwitch, IncomingState, openStateSnapshot, switchToStagedState } from '../../../src/state/snapshot.js'
import { StateStore } from '../../../src/state/store.js'
import { authMethodSpec, getRecord, memberSpec, policySpec, tokenBySecret, tokenSpec } from '../../../src/state/tables.js'
import { buildTokenCreate, dump, indexProblems } from '../../support/state.js'
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

  async reopen(): Promise<void> {
    await this.store.close()
    await finishStateSwitch(this.store.files, 0)
    this.store = await StateStore.open(this.directory)
  }
}

const policy = (n: number): Command => ({
  v: COMMAND_VERSION,
  type: 'acl.policy.create',
  policy: { ID: uuid(0xb, n), Name: `policy-${n}`, Description: '', Rules: 'acl = "read"', Datacenters: [], Namespace: 'default' },
})
const token = (n: number, policies: number[] = []): Command => ({
  v: COMMAND_VERSION,
  type: 'acl.token.create',
  token: buildTokenCreate({ AccessorID: uuid(0xa, n), SecretID: uuid(0x5, n), CreateTime: NOW, Description: `token ${n}`, Policies: policies.map((p) => ({ ID: uuid(0xb, p) })) }),
})

/** The pairs of `store` an archive would carry and a restore takes, in key order. */
async function archivePairs(store: StateStore): Promise<Array<[string, Uint8Array]>> {
  const reader = await openStateSnapshot(store, { staged: false })
  const pairs: Array<[string, Uint8Array]> = []
  try {
    for await (const chunk of reader.chunks()) for (const [key, value] of chunk) if (isRestoredPair(key)) pairs.push([key, Buffer.from(value)])
  } finally {
    await reader.close()
  }
  return pairs
}

/** Begin, then `pairs` in chunks of `size`; answers the chunks and their digest, for the commit. */
async function stage(node: Node, id: string, pairs: Array<[string, Uint8Array]>, size: number): Promise<{ chunks: Array<Array<[string, Uint8Array]>>; digest: string }> {
  const chunks: Array<Array<[string, Uint8Array]>> = []
  for (let at = 0; at < pairs.length; at += size) chunks.push(pairs.slice(at, at + size))
  const records = pairs.filter(([key]) => key.startsWith('r\u0000')).length
  await node.ok({ v: COMMAND_VERSION, type: 'restore.begin', id, chunks: chunks.length, records })
  let digest = ''
  for (const [seq, chunk] of chunks.entries()) {
    await node.ok({ v: COMMAND_VERSION, type: 'restore.chunk', id, seq, pairs: chunk })
    digest = nextDigest(digest, chunk)
  }
  return { chunks, digest }
}

/** A token as the state stores it, for archives built by hand. */
const tokenRecord = (accessor: string, secret: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  ...buildTokenCreate({ AccessorID: accessor, SecretID: secret, CreateTime: NOW }),
  Hash: 'h',
  CreateIndex: 1,
  ModifyIndex: 1,
  ...extra,
})

describe('state/restore: a snapshot restore applied to the state machine', function () {
  const dirs = useTempDirs()
  let node: Node

  const open = async (): Promise<Node> => {
    const directory = await dirs.make('warden-restore-')
    const opened = new Node(await StateStore.open(directory), directory)
    dirs.defer(async () => {
      if (opened.store.db.status === 'open') await opened.store.close()
    })
    return opened
  }

  const seed = async (replica: Node): Promise<void> => {
    await replica.ok({ v: COMMAND_VERSION, type: 'acl.init' })
    for (let n = 1; n <= 3; n++) await replica.ok(policy(n))
    for (let n = 1; n <= 20; n++) await replica.ok(token(n, [n % 3 + 1]))
    await replica.ok({ v: COMMAND_VERSION, type: 'raft.member.set', Node: 'a', Address: '127.0.0.1:1' })
    // An auth method, a binding rule and a login's token: their indexes are keyed by namespace and name together.
    const method = { Name: 'jwt', Type: 'jwt', DisplayName: '', Description: '', MaxTokenTTLMs: 0, TokenLocality: '', Config: { JWTValidationPubKeys: ['k'] }, NamespaceRules: [], Namespace: 'default' }
    await replica.ok({ v: COMMAND_VERSION, type: 'acl.auth-method.create', method })
    await replica.ok({ v: COMMAND_VERSION, type: 'acl.binding-rule.create', rule: { ID: uuid(0xd, 1), Description: '', AuthMethod: 'jwt', Selector: '', BindType: 'service', BindName: 'web', Namespace: 'default' } })
    const { ModifyIndex } = (await getRecord(replica.store.reader, authMethodSpec, nsKey('default', 'jwt')))!
    const login = buildTokenCreate({ AccessorID: uuid(0xa, 50), SecretID: uuid(0x5, 50), CreateTime: NOW, Description: 'login', AuthMethod: 'jwt', ServiceIdentities: [{ ServiceName: 'web' }] })
    await replica.ok({ v: COMMAND_VERSION, type: 'acl.login', login: { token: login, authMethodNamespace: 'default', authMethodModifyIndex: ModifyIndex } })
  }

  beforeEach(async () => {
    node = await open()
    await seed(node)
  })

  it('commit brings back the saved records with their indexes rebuilt, members kept, nothing staged left', async () => {
    const saved = await archivePairs(node.store)
    const savedToken = await getRecord(node.store.reader, tokenSpec, uuid(0xa, 5))
    // Changes after the save: a new policy and token, a token deleted, a member added.
    await node.ok(policy(9))
    await node.ok(token(99, [9]))
    await node.ok({ v: COMMAND_VERSION, type: 'acl.token.delete', AccessorID: uuid(0xa, 5) })
    await node.ok({ v: COMMAND_VERSION, type: 'raft.member.set', Node: 'b', Address: '127.0.0.1:2' })
    const { chunks, digest } = await stage(node, 'r1', saved, 7)
    expect(chunks.length).to.be.greaterThan(2)
    const begun = node.store.restoreInProgress!.beginIndex
    const value = (await node.ok({ v: COMMAND_VERSION, type: 'restore.commit', id: 'r1', chunks: chunks.length, digest })) as { index: number }
    // Every table's index is the commit's, every record's ModifyIndex the begin's.
    expect(value.index).to.equal(node.index)
    expect(node.store.lastApplied).to.equal(node.index)
    const restored = await getRecord(node.store.reader, tokenSpec, uuid(0xa, 5))
    expect(restored).to.deep.equal({ ...savedToken, ModifyIndex: begun })
    // Every saved record is back as it was but for its ModifyIndex: the login's token and binding rule too.
    const now = new Map((await dump(node.store)).map(([key, value]) => [key, value]))
    for (const [key, value] of saved) {
      if (!key.startsWith('r\u0000')) continue
      expect({ ...decode<object>(now.get(key)!), ModifyIndex: 0 }, key).to.deep.equal({ ...decode<object>(value), ModifyIndex: 0 })
    }
    expect(saved.some(([key]) => key.startsWith(recordKey('binding-rule', '')))).to.equal(true)
    expect(await getRecord(node.store.reader, tokenSpec, uuid(0xa, 99))).to.equal(undefined)
    expect(await getRecord(node.store.reader, policySpec, uuid(0xb, 9))).to.equal(undefined)
    // Members are this cluster's: both kept, the one added after the save too.
    expect(await getRecord(node.store.reader, memberSpec, 'b')).to.include({ Address: '127.0.0.1:2' })
    expect(await indexProblems(node.store)).to.deep.equal([])
    for (const table of TABLES) expect(node.store.tableIndex(table), table).to.equal(value.index)
    const keys = (await dump(node.store)).map(([key]) => key)
    expect(keys.filter((key) => key.startsWith(STAGED_PREFIX) || key === RESTORE_KEY)).to.deep.equal([])
    expect(keys).to.include(tableIndexKey('token'))
    expect(node.store.restoreInProgress).to.equal(undefined)
    // Survives a reopen, and writes go on from the restore's index.
    await node.reopen()
    expect(node.store.lastApplied).to.equal(node.index)
    expect(await getRecord(node.store.reader, tokenSpec, uuid(0xa, 5))).to.deep.equal(restored)
    await node.ok(token(100))
  })

  it('refuses other writes while open (membership still changes), and again after an abort accepts them', async () => {
    await node.ok({ v: COMMAND_VERSION, type: 'restore.begin', id: 'r1', chunks: 1, records: 0 })
    const refused = await node.apply(policy(7))
    expect(refused).to.deep.include({ ok: false })
    expect((refused as { error: { code: string } }).error.code).to.equal('restore_in_progress')
    await node.ok({ v: COMMAND_VERSION, type: 'raft.member.set', Node: 'c', Address: '127.0.0.1:3' })
    // A second restore cannot begin.
    expect((await node.apply({ v: COMMAND_VERSION, type: 'restore.begin', id: 'r2', chunks: 1, records: 0 })) as unknown).to.deep.include({ ok: false })
    // The state reopened still has it open.
    await node.reopen()
    node.index = node.store.lastApplied
    expect(node.store.restoreInProgress?.id).to.equal('r1')
    await node.ok({ v: COMMAND_VERSION, type: 'restore.abort', id: 'r1', reason: 'test' })
    await node.ok(policy(7))
  })

  it('refuses a chunk out of order, one naming another restore, and pairs that are no restorable record', async () => {
    await node.ok({ v: COMMAND_VERSION, type: 'restore.begin', id: 'r1', chunks: 2, records: 1 })
    const good: Array<[string, Uint8Array]> = [[recordKey('policy', uuid(0xb, 1)), encode({ ID: uuid(0xb, 1), Name: 'x', Description: '', Rules: '', Datacenters: [], Namespace: 'default', Hash: 'h', CreateIndex: 1, ModifyIndex: 1 })]]
    const code = async (command: Command): Promise<string> => ((await node.apply(command)) as { error: { code: string; message: string } }).error.code
    expect(await code({ v: COMMAND_VERSION, type: 'restore.chunk', id: 'r1', seq: 1, pairs: good })).to.equal('conflict')
    expect(await code({ v: COMMAND_VERSION, type: 'restore.chunk', id: 'other', seq: 0, pairs: good })).to.equal('conflict')
    const bad: Array<Array<[string, Uint8Array]>> = [
      [['u\u0000token\u0000secret\u0000abc', Buffer.from('x')]],
      [[recordKey('member', 'a'), encode({ Node: 'a', Address: 'x', CreateIndex: 1, ModifyIndex: 1 })]],
      [[recordKey('policy', 'p'), Buffer.from([0xc1])]],
      [[recordKey('policy', 'p'), encode({ ID: 'another', Name: 'x', Namespace: 'default', CreateIndex: 1, ModifyIndex: 1 })]],
      [[recordKey('token', 't'), encode({ AccessorID: 't', CreateIndex: 1, ModifyIndex: 1 })]],
      [[recordKey('policy', 'p'), encode({ ID: 'p', Name: 'x', Namespace: 'default', CreateIndex: -1, ModifyIndex: 1 })]],
    ]
    for (const pairs of bad) {
      const result = (await node.apply({ v: COMMAND_VERSION, type: 'restore.chunk', id: 'r1', seq: 0, pairs })) as { ok: boolean; error: { code: string; message: string } }
      expect(result.ok, JSON.stringify(pairs[0]![0])).to.equal(false)
      expect(result.error.code).to.equal('invalid_input')
      expect(result.error.message).to.match(/^chunk 0: /)
    }
    // Nothing of the refused chunks was staged.
    expect((await dump(node.store)).filter(([key]) => key.startsWith(STAGED_PREFIX))).to.deep.equal([])
    expect(node.store.restoreInProgress?.nextSeq).to.equal(0)
  })

  it('a commit that did not get every chunk, or got other ones, abandons the restore with nothing changed', async () => {
    const before = await dump(node.store)
    const saved = await archivePairs(node.store)
    const { chunks } = await stage(node, 'r1', saved.slice(0, 10), 5)
    const missing = (await node.apply({ v: COMMAND_VERSION, type: 'restore.commit', id: 'r1', chunks: chunks.length + 1, digest: 'x' })) as { ok: boolean; error: { message: string } }
    expect(missing.ok).to.equal(false)
    expect(missing.error.message).to.match(/did not arrive whole .*nothing was restored/)
    expect(node.store.restoreInProgress).to.equal(undefined)
    const { chunks: again } = await stage(node, 'r2', saved.slice(0, 10), 5)
    const wrong = (await node.apply({ v: COMMAND_VERSION, type: 'restore.commit', id: 'r2', chunks: again.length, digest: nextDigest('', []) })) as { ok: boolean; error: { message: string } }
    expect(wrong.error.message).to.match(/digest differs/)
    // The records are as before (only the applied index moved).
    const after = await dump(node.store)
    const records = (entries: typeof before): string[] => entries.filter(([key]) => !key.startsWith('m\u0000')).map(([key, value]) => `${key}=${value.toString('hex')}`)
    expect(records(after)).to.deep.equal(records(before))
  })

  it('a restore half way travels in a Raft snapshot: the store that installs it completes it', async () => {
    const saved = await archivePairs(node.store)
    await node.ok(token(77))
    const half = saved.slice(0, 12)
    const rest = saved.slice(12)
    await node.ok({ v: COMMAND_VERSION, type: 'restore.begin', id: 'r1', chunks: 2, records: saved.filter(([key]) => key.startsWith('r\u0000')).length })
    await node.ok({ v: COMMAND_VERSION, type: 'restore.chunk', id: 'r1', seq: 0, pairs: half })
    // Another replica installs this state as a snapshot from its leader, then applies the rest of the log.
    const other = await open()
    const incoming = await IncomingState.create(other.store.files)
    const reader = await openStateSnapshot(node.store)
    for await (const chunk of reader.chunks()) await incoming.write(chunk)
    await reader.close()
    await incoming.complete()
    await other.store.replace(switchToStagedState)
    other.index = other.store.lastApplied
    expect(other.store.restoreInProgress?.nextSeq).to.equal(1)
    const digest = nextDigest(nextDigest('', half), rest)
    for (const replica of [node, other]) {
      await replica.ok({ v: COMMAND_VERSION, type: 'restore.chunk', id: 'r1', seq: 1, pairs: rest })
      await replica.ok({ v: COMMAND_VERSION, type: 'restore.commit', id: 'r1', chunks: 2, digest })
    }
    expect(await dump(other.store)).to.deep.equal(await dump(node.store))
    expect(await getRecord(other.store.reader, tokenSpec, uuid(0xa, 77))).to.equal(undefined)
  })

  it('a crash after the restored state was completed, before the switch, is completed at start', async function () {
    const saved = await archivePairs(node.store)
    await node.ok(token(88))
    const { chunks, digest } = await stage(node, 'r1', saved, 10)
    const commitIndex = node.index + 1
    const restore = node.store.restoreInProgress!
    // What the commit does up to the switch, then the crash.
    await node.store.close()
    const live = await node.store.files.openDb('live')
    const build = await RestoreBuild.open(node.store.files, live, restore)
    await build.complete(live, commitIndex)
    await live.close()
    await finishStateSwitch(node.store.files, 0)
    node.store = await StateStore.open(node.directory)
    expect(node.store.lastApplied).to.equal(commitIndex)
    expect(node.store.restoreInProgress).to.equal(undefined)
    expect(await getRecord(node.store.reader, tokenSpec, uuid(0xa, 88))).to.equal(undefined)
    expect(await getRecord(node.store.reader, tokenSpec, uuid(0xa, 3))).to.include({ ModifyIndex: restore.beginIndex })
    expect(await indexProblems(node.store)).to.deep.equal([])
    expect(chunks.length).to.be.greaterThan(1)
    expect(digest).to.have.length(64)
  })

  it('a build lost or behind (a crash, a snapshot installed half way) is rebuilt from the staged records, alike', async function () {
    const saved = await archivePairs(node.store)
    const reference = await open()
    await seed(reference)
    // The same restore on a node whose build goes missing twice (at a reopen, and mid-way), and on one that keeps it.
    const size = 6
    const chunks: Array<Array<[string, Uint8Array]>> = []
    for (let at = 0; at < saved.length; at += size) chunks.push(saved.slice(at, at + size))
    const records = saved.filter(([key]) => key.startsWith('r\u0000')).length
    for (const replica of [node, reference]) await replica.ok({ v: COMMAND_VERSION, type: 'restore.begin', id: 'r1', chunks: chunks.length, records })
    let digest = ''
    for (const [seq, chunk] of chunks.entries()) {
      if (seq === 1) await node.reopen()
      if (seq === 3) {
        // A crash that lost the build (its directory, as a power loss could leave it).
        await node.store.close()
        await node.store.files.remove('restore')
        node.store = await StateStore.open(node.directory)
      }
      for (const replica of [node, reference]) await replica.ok({ v: COMMAND_VERSION, type: 'restore.chunk', id: 'r1', seq, pairs: chunk })
      digest = nextDigest(digest, chunk)
    }
    for (const replica of [node, reference]) await replica.ok({ v: COMMAND_VERSION, type: 'restore.commit', id: 'r1', chunks: chunks.length, digest })
    const records_ = (entries: Awaited<ReturnType<typeof dump>>): string[] => entries.filter(([key]) => !key.startsWith('r\u0000member')).map(([key, value]) => `${key}=${value.toString('hex')}`)
    expect(records_(await dump(node.store))).to.deep.equal(records_(await dump(reference.store)))
    expect(await indexProblems(node.store)).to.deep.equal([])
  })

  describe('crafted archives (a review\'s findings, each failing before its fix)', function () {
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
})
