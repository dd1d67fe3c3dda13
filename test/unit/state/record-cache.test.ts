/**
 * The store's cache of the small tables' records for apply (src/state/record-cache.ts). What must hold is that apply
 * never reads a record other than the one LevelDB holds: a policy renamed, changed or deleted in one batch is seen so
 * by the next batch's token creates; and that it is used: a policy every batch links is read from LevelDB once, not
 * once per batch (each such read of an old key is charged to a level-0 table, and drives LevelDB's seek compaction).
 */
import { expect } from 'chai'
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import type { ApplyResult, PolicyWrite } from '../../../src/state/commands.js'
import { recordKey } from '../../../src/state/keys.js'
import { RecordCache, RECORDS_MAX } from '../../../src/state/record-cache.js'
import { StateStore } from '../../../src/state/store.js'
import { buildTokenCreate, commands, indexProblems, replaceWithCopy } from '../../support/state.js'
import { useTempDirs } from '../../support/temp-dir.js'

const NOW = '2024-05-01T12:00:00Z'
const POLICY_ID = '0000000b-0000-4000-8000-000000000001'

function policy(name: string, rules = 'acl = "read"'): PolicyWrite {
  return { ID: POLICY_ID, Name: name, Description: '', Rules: rules, Datacenters: [], Namespace: 'default' }
}

describe('state/record-cache', function () {
  const dirs = useTempDirs()
  let index = 0

  async function openStore(): Promise<StateStore> {
    const store = await StateStore.open(join(await dirs.make('warden-record-cache-'), 'state'))
    dirs.defer(() => store.close())
    index = 0
    await expectOk(store.apply(commands.init(), ++index))
    return store
  }

  async function expectOk(applied: Promise<ApplyResult>): Promise<unknown> {
    const result = await applied
    expect(result.ok, JSON.stringify(result)).to.equal(true)
    return (result as { value?: unknown }).value
  }

  /** A token create linking the policy by ID, applied in a batch of its own. */
  function createLinked(store: StateStore): Promise<ApplyResult> {
    return store.apply(commands.tokenCreate(buildTokenCreate({ AccessorID: randomUUID(), SecretID: randomUUID(), CreateTime: NOW, Policies: [{ ID: POLICY_ID }] })), ++index)
  }

  it('shows apply a policy as its last batch left it: renamed twice, then deleted', async function () {
    const store = await openStore()
    await expectOk(store.apply(commands.policyCreate(policy('first')), ++index))
    await expectOk(createLinked(store))
    // Each rename reads the policy as it is to drop its old name from the name index: a stale record would leave
    // "second" taken.
    await expectOk(store.apply(commands.policyUpdate(policy('second')), ++index))
    await expectOk(store.apply(commands.policyUpdate(policy('third')), ++index))
    expect(await indexProblems(store)).to.deep.equal([])
    await expectOk(store.apply(commands.policyCreate({ ...policy('second'), ID: '0000000b-0000-4000-8000-000000000002' }), ++index))
    await expectOk(store.apply(commands.policyDelete(POLICY_ID), ++index))
    const linked = await createLinked(store)
    expect(linked.ok, 'a token linking a deleted policy').to.equal(false)
  })

  it('reads a policy that every batch links from LevelDB once', async function () {
    const store = await openStore()
    await expectOk(store.apply(commands.policyCreate(policy('linked')), ++index))
    const db = store.db as unknown as { getSync(key: string): Buffer | undefined }
    const getSync = db.getSync.bind(db)
    let reads = 0
    db.getSync = (key: string) => {
      if (key === recordKey('policy', POLICY_ID)) reads++
      return getSync(key)
    }
    try {
      for (let n = 0; n < 5; n++) await expectOk(createLinked(store))
    } finally {
      db.getSync = getSync
    }
    expect(reads).to.equal(1)
  })

  it('is dropped when the state is replaced: a policy the new state lacks is not found', async function () {
    const store = await openStore()
    await expectOk(store.apply(commands.policyCreate(policy('linked')), ++index))
    await expectOk(createLinked(store))
    // The new state: this one without the policy, switched to as a snapshot install is.
    await replaceWithCopy(store, (key) => key !== recordKey('policy', POLICY_ID))
    const linked = await createLinked(store)
    expect(linked.ok, 'a token linking a policy the state does not hold').to.equal(false)
  })

  describe('RecordCache', function () {
    const base = (values: Map<string, Buffer>) => ({
      get: async (key: string) => values.get(key),
      keys: async () => [],
      values: async () => [],
    })

    it('holds the cached tables\' records only, takes on puts and deletes of the ones it holds, and is bounded', async function () {
      const values = new Map<string, Buffer>()
      const cache = new RecordCache()
      const reader = cache.reader(base(values))
      values.set(recordKey('policy', 'p1'), Buffer.from('one'))
      values.set(recordKey('token', 't1'), Buffer.from('token'))
      expect(String(await reader.get(recordKey('policy', 'p1')))).to.equal('one')
      expect(String(await reader.get(recordKey('token', 't1')))).to.equal('token')
      expect(cache.size).to.equal(1)
      cache.written([{ type: 'put', key: recordKey('policy', 'p1'), value: Buffer.from('two') }])
      values.set(recordKey('policy', 'p1'), Buffer.from('two'))
      expect(String(await reader.get(recordKey('policy', 'p1')))).to.equal('two')
      cache.written([{ type: 'del', key: recordKey('policy', 'p1') }])
      values.delete(recordKey('policy', 'p1'))
      expect(await reader.get(recordKey('policy', 'p1'))).to.equal(undefined)
      expect(cache.size).to.equal(0)
      for (let n = 0; n < RECORDS_MAX + 10; n++) {
        values.set(recordKey('role', `r${n}`), Buffer.from(`role ${n}`))
        await reader.get(recordKey('role', `r${n}`))
      }
      expect(cache.size).to.equal(RECORDS_MAX)
    })
  })
})
