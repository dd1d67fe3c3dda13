/**
 * One apply batch (StateStore.applyCommands). Reads (src/state/reader.ts batchReader): each key is read from LevelDB
 * once per batch, and what the batch's own commands wrote comes before what was read: a policy deleted, or created,
 * earlier in the same batch is seen as such by the commands after it, even after it was read. Table indexes: each
 * changed table's is written once, at the last command of the batch that changed it, and read back so on reopening.
 */
import { expect } from 'chai'
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { COMMAND_VERSION, type ApplyResult, type Command, type PolicyWrite } from '../../../src/state/commands.js'
import { recordKey, tableIndexKey } from '../../../src/state/keys.js'
import { decode } from '../../../src/state/codec.js'
import type { AclToken } from '../../../src/state/records.js'
import { StateStore } from '../../../src/state/store.js'
import { buildTokenCreate, commands } from '../../support/state.js'
import { useTempDirs } from '../../support/temp-dir.js'

const NOW = '2024-05-01T12:00:00Z'

function policy(ID: string): PolicyWrite {
  return { ID, Name: `p-${ID.slice(0, 8)}`, Description: '', Rules: 'acl = "read"', Datacenters: [], Namespace: 'default' }
}

function tokenLinking(policyId: string): Command {
  return commands.tokenCreate(buildTokenCreate({ AccessorID: randomUUID(), SecretID: randomUUID(), CreateTime: NOW, Policies: [{ ID: policyId }] }))
}

function outcome(result: ApplyResult): string {
  return result.ok ? 'ok' : `${result.error.code} ${result.error.field ?? ''}`.trim()
}

describe('state: one apply batch', function () {
  const dirs = useTempDirs()
  let store: StateStore
  let reads: string[]
  let directory: string

  beforeEach(async function () {
    directory = join(await dirs.make('warden-batch-reads-'), 'state')
    store = await StateStore.open(directory)
    dirs.defer(() => store.close())
    reads = []
    const db = store.db as unknown as { getSync: (key: string, options?: unknown) => unknown }
    const getSync = db.getSync.bind(db)
    db.getSync = (key, options) => {
      reads.push(key)
      return getSync(key, options)
    }
  })

  it('reads a policy that every create of the batch links once from LevelDB', async function () {
    const id = randomUUID()
    expect(outcome(await store.apply(commands.policyCreate(policy(id)), 1))).to.equal('ok')
    reads = []
    const results = await store.applyBatch(Array.from({ length: 10 }, (_, n) => ({ command: tokenLinking(id), index: n + 2 })))
    expect(results.map(outcome)).to.deep.equal(Array(10).fill('ok'))
    for (const result of results) expect((result as { value: AclToken }).value.Policies).to.deep.equal([{ ID: id }])
    expect(reads.filter((key) => key === recordKey('policy', id))).to.have.length(1)
  })

  it('sees a policy deleted earlier in the batch as gone, though it was read before the delete', async function () {
    const id = randomUUID()
    expect(outcome(await store.apply(commands.policyCreate(policy(id)), 1))).to.equal('ok')
    const results = await store.applyBatch([
      { command: tokenLinking(id), index: 2 },
      { command: { v: COMMAND_VERSION, type: 'acl.policy.delete', ID: id }, index: 3 },
      { command: tokenLinking(id), index: 4 },
    ])
    expect(results.map(outcome)).to.deep.equal(['ok', 'ok', 'invalid_input Policies[0].ID'])
  })

  it('sees a policy created earlier in the batch, though it was read as missing before', async function () {
    const id = randomUUID()
    const results = await store.applyBatch([
      { command: tokenLinking(id), index: 1 },
      { command: commands.policyCreate(policy(id)), index: 2 },
      { command: tokenLinking(id), index: 3 },
    ])
    expect(results.map(outcome)).to.deep.equal(['invalid_input Policies[0].ID', 'ok', 'ok'])
  })

  it('writes each changed table\'s index at the last command of the batch that changed it', async function () {
    const id = randomUUID()
    const results = await store.applyBatch([
      { command: commands.policyCreate(policy(id)), index: 1 },
      { command: tokenLinking(id), index: 2 },
      { command: tokenLinking(id), index: 3 },
      { command: commands.noop(), index: 4 },
      { command: tokenLinking(randomUUID()), index: 5 },
    ])
    expect(results.map(outcome)).to.deep.equal(['ok', 'ok', 'ok', 'ok', 'invalid_input Policies[0].ID'])
    const onDisk = async (table: 'policy' | 'token' | 'role'): Promise<number | undefined> => {
      const value = await store.db.get(tableIndexKey(table))
      return value === undefined ? undefined : decode<number>(value)
    }
    expect([store.tableIndex('policy'), store.tableIndex('token'), store.tableIndex('role')]).to.deep.equal([1, 3, 0])
    expect([await onDisk('policy'), await onDisk('token'), await onDisk('role')]).to.deep.equal([1, 3, undefined])
    await store.close()
    store = await StateStore.open(directory)
    expect([store.tableIndex('policy'), store.tableIndex('token'), store.tableIndex('role')]).to.deep.equal([1, 3, 0])
  })
})
