/**
 * The live state's key filter (src/state/key-filter.ts): a Bloom filter over token IDs that lets a token create's
 * uniqueness check of its AccessorID skip LevelDB when the key is certainly absent (the secret's check never reaches
 * LevelDB: that index is held in memory, src/state/secret-index.ts). What must hold is that it never
 * says "absent" for a key the database has: keys from before it was made (its fill), keys written after (the store
 * adds them before each batch), keys of a state that replaced the database (a new filter), across its growth in
 * layers. And that it is used: a create with fresh IDs reads neither key from LevelDB once the filter is ready.
 */
import { expect } from 'chai'
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { FILTERED_PREFIXES, KeyFilter } from '../../../src/state/key-filter.js'
import { openStateDb } from '../../../src/state/reader.js'
import { recordKey, uniqueKey } from '../../../src/state/keys.js'
import { StateStore } from '../../../src/state/store.js'
import { secretDigest } from '../../../src/state/tables.js'
import type { ApplyResult } from '../../../src/state/commands.js'
import { buildTokenCreate, commands } from '../../support/state.js'
import { useTempDirs } from '../../support/temp-dir.js'

const NOW = '2024-05-01T12:00:00Z'

/** The keys a token create looks up, expecting to find none. */
function tokenKeys(accessor: string, secret: string): string[] {
  return [recordKey('token', accessor), uniqueKey('token', 'secret', secretDigest(secret))]
}

function create(accessor: string, secret: string) {
  return commands.tokenCreate(buildTokenCreate({ AccessorID: accessor, SecretID: secret, CreateTime: NOW }))
}

function refusedField(result: ApplyResult): string | undefined {
  return result.ok ? undefined : result.error.field
}

describe('state/key-filter', function () {
  const dirs = useTempDirs()

  describe('KeyFilter', function () {
    /** A filter started over an empty database, which takes adds from then on. */
    async function startedFilter(): Promise<KeyFilter> {
      const db = await openStateDb(join(await dirs.make('warden-filter-'), 'db'))
      dirs.defer(() => db.close())
      const filter = new KeyFilter()
      await filter.fill(db)
      return filter
    }

    it('holds every key it took across its layers, and says "absent" for nearly every other', async function () {
      const filter = await startedFilter()
      const held: string[] = []
      // Past the first layer's 65,536 keys and the second's 131,072: three layers.
      for (let n = 0; n < 250_000; n++) {
        const key = recordKey('token', randomUUID())
        held.push(key)
        filter.add(key)
      }
      expect(filter.size.layers).to.equal(3)
      // A key the filter answers "maybe" for already is not taken again: a few of them, at its false "maybe" rate.
      expect(filter.size.keys).to.be.within(247_500, 250_000)
      const missed = held.filter((key) => !filter.mightHold(key))
      expect(missed, 'keys taken but reported absent').to.deep.equal([])
      let maybe = 0
      const probes = 100_000
      for (let n = 0; n < probes; n++) if (filter.mightHold(uniqueKey('token', 'secret', secretDigest(randomUUID())))) maybe++
      // About 0.3% per full layer; three layers, the last not full.
      expect(maybe / probes).to.be.below(0.02)
    })

    it('covers token records only', function () {
      const filter = new KeyFilter()
      expect(FILTERED_PREFIXES).to.have.length(1)
      expect(filter.covers(recordKey('token', randomUUID()))).to.equal(true)
      expect(filter.covers(uniqueKey('token', 'secret', secretDigest(randomUUID())))).to.equal(false)
      expect(filter.covers(recordKey('policy', randomUUID()))).to.equal(false)
      expect(filter.covers(uniqueKey('policy', 'name', 'default\u0000p'))).to.equal(false)
      expect(filter.covers(uniqueKey('token', 'secretive', 'x'))).to.equal(false)
    })

    it('is ready only once filled from its database, and never after it is closed', async function () {
      const db = await openStateDb(join(await dirs.make('warden-filter-'), 'db'))
      dirs.defer(() => db.close())
      const keys = [recordKey('token', randomUUID()), recordKey('token', randomUUID())]
      await db.batch(keys.map((key) => ({ type: 'put' as const, key, value: Buffer.alloc(1) })))
      const filter = new KeyFilter()
      expect(filter.ready).to.equal(false)
      await filter.fill(db)
      expect(filter.ready).to.equal(true)
      for (const key of keys) expect(filter.mightHold(key), key).to.equal(true)

      // Closed as it starts, a fill stops at LevelDB's first batch of keys rather than read them all.
      const many = Array.from({ length: 5_000 }, () => recordKey('token', randomUUID()))
      await db.batch(many.map((key) => ({ type: 'put' as const, key, value: Buffer.alloc(1) })))
      const closed = new KeyFilter()
      const filling = closed.fill(db)
      closed.close()
      await filling
      expect(closed.ready).to.equal(false)
      expect(closed.size.keys).to.be.below(many.length)
    })

    it('does not take a key it may already hold again: a rewritten token does not grow it', async function () {
      const filter = await startedFilter()
      const key = recordKey('token', randomUUID())
      for (let n = 0; n < 1_000; n++) filter.add(key)
      expect(filter.size.keys).to.equal(1)
    })

    it('hashes a key with a lone surrogate as LevelDB gives it back', async function () {
      const db = await openStateDb(join(await dirs.make('warden-filter-'), 'db'))
      dirs.defer(() => db.close())
      const key = recordKey('token', 'x\ud800y')
      await db.put(key, Buffer.alloc(1))
      const filter = new KeyFilter()
      await filter.fill(db)
      expect(filter.mightHold(key)).to.equal(true)
    })

    it('is filled again once deleted keys are half of what it holds, keeping every key added meanwhile', async function () {
      const db = await openStateDb(join(await dirs.make('warden-filter-'), 'db'))
      dirs.defer(() => db.close())
      const live = Array.from({ length: 10 }, () => recordKey('token', randomUUID()))
      await db.batch(live.map((key) => ({ type: 'put' as const, key, value: Buffer.alloc(1) })))
      const filter = new KeyFilter()
      await filter.fill(db)
      expect(filter.size.keys).to.equal(10)
      expect(filter.refillIfOvergrown(db), 'not overgrown yet').to.equal(undefined)
      // A growing state is no reason to fill it again.
      for (let n = 0; n < 140_000; n++) filter.add(recordKey('token', randomUUID()))
      expect(filter.refillIfOvergrown(db), 'grown, nothing deleted').to.equal(undefined)
      // Keys deleted since, past half of what it holds.
      const deletes = (count: number) => Array.from({ length: count }, () => ({ type: 'del' as const, key: recordKey('token', randomUUID()) }))
      filter.beforeWrite(deletes(60_000))
      expect(filter.refillIfOvergrown(db), 'not enough deleted yet').to.equal(undefined)
      // Deletes of keys it does not cover do not count.
      filter.beforeWrite(Array.from({ length: 20_000 }, () => ({ type: 'del' as const, key: recordKey('policy', randomUUID()) })))
      expect(filter.refillIfOvergrown(db), 'policy deletes counted').to.equal(undefined)
      filter.beforeWrite(deletes(20_000))
      const refilled = filter.refillIfOvergrown(db)
      expect(refilled).to.be.instanceOf(Promise)
      const during = recordKey('token', randomUUID())
      filter.beforeWrite([{ type: 'put', key: during }])
      await refilled
      expect(filter.size.keys).to.equal(11)
      for (const key of [...live, during]) expect(filter.mightHold(key), key).to.equal(true)
      expect(filter.ready).to.equal(true)
    })
  })

  describe('in the state store', function () {
    /** Starts a store's filter as a leader's applies do: a create's lookups ask for it, the next batch starts it. */
    async function startFilter(store: StateStore, index: number): Promise<number> {
      expect(await store.keyFilterReady(), 'started before any lookup asked').to.equal(false)
      expect((await store.apply(create(randomUUID(), randomUUID()), index)).ok).to.equal(true)
      expect((await store.apply(commands.noop(), index + 1)).ok).to.equal(true)
      expect(await store.keyFilterReady(), 'filled once a create asked and a batch began').to.equal(true)
      return index + 2
    }

    it('starts only once an apply looked a token key up: reads and other commands leave it idle', async function () {
      const store = await StateStore.open(join(await dirs.make('warden-filter-'), 'state'))
      dirs.defer(() => store.close())
      expect((await store.apply(commands.noop(), 1)).ok).to.equal(true)
      expect(await store.reader.get(recordKey('token', randomUUID()))).to.equal(undefined)
      expect((await store.apply(commands.noop(), 2)).ok).to.equal(true)
      expect(await store.keyFilterReady()).to.equal(false)
      await startFilter(store, 3)
    })

    it('refuses a token whose AccessorID or secret an earlier run of the store wrote (the fill)', async function () {
      const directory = join(await dirs.make('warden-filter-'), 'state')
      const [accessor, secret] = [randomUUID(), randomUUID()]
      const first = await StateStore.open(directory)
      expect((await first.apply(create(accessor, secret), 1)).ok).to.equal(true)
      await first.close()

      const store = await StateStore.open(directory)
      dirs.defer(() => store.close())
      const index = await startFilter(store, 2)
      expect(refusedField(await store.apply(create(accessor, randomUUID()), index))).to.equal('AccessorID')
      expect(refusedField(await store.apply(create(randomUUID(), secret), index + 1))).to.equal('SecretID')
    })

    it('refuses tokens written before and while its fill runs', async function () {
      const directory = join(await dirs.make('warden-filter-'), 'state')
      const first = await StateStore.open(directory)
      const before: Array<[string, string]> = Array.from({ length: 3_000 }, () => [randomUUID(), randomUUID()])
      await first.applyBatch(before.map(([accessor, secret], n) => ({ command: create(accessor, secret), index: n + 1 })))
      await first.close()

      const store = await StateStore.open(directory)
      dirs.defer(() => store.close())
      // The first create asks for the filter, the second's batch starts it, and the rest are applied while the fill
      // reads the 3,000 tokens' keys.
      const during: Array<[string, string]> = Array.from({ length: 50 }, () => [randomUUID(), randomUUID()])
      let index = before.length
      for (const [accessor, secret] of during) expect((await store.apply(create(accessor, secret), ++index)).ok).to.equal(true)
      expect(await store.keyFilterReady()).to.equal(true)
      for (const [accessor, secret] of [...before.slice(0, 200), ...during]) {
        expect(refusedField(await store.apply(create(accessor, randomUUID()), ++index))).to.equal('AccessorID')
        expect(refusedField(await store.apply(create(randomUUID(), secret), ++index))).to.equal('SecretID')
      }
    })

    it('refuses a token whose AccessorID or secret a batch wrote after the filter was filled (the adds)', async function () {
      const store = await StateStore.open(join(await dirs.make('warden-filter-'), 'state'))
      dirs.defer(() => store.close())
      const index = await startFilter(store, 1)
      const [accessor, secret] = [randomUUID(), randomUUID()]
      // Two creates in one batch, and a later batch: the second of the batch reads the first's pending writes, the
      // later one reads LevelDB through the filter.
      const results = await store.applyBatch([
        { command: create(accessor, secret), index },
        { command: create(accessor, randomUUID()), index: index + 1 },
      ])
      expect(results.map(refusedField)).to.deep.equal([undefined, 'AccessorID'])
      expect(refusedField(await store.apply(create(accessor, randomUUID()), index + 2))).to.equal('AccessorID')
      expect(refusedField(await store.apply(create(randomUUID(), secret), index + 3))).to.equal('SecretID')
    })

    it('refuses a token of a state that replaced the database (a snapshot install makes a new filter)', async function () {
      const root = await dirs.make('warden-filter-')
      const directory = join(root, 'state')
      const store = await StateStore.open(directory)
      dirs.defer(() => store.close())
      await startFilter(store, 1)

      // The state to install: another store's, with a token this store's filter never saw, at a later index.
      const [accessor, secret] = [randomUUID(), randomUUID()]
      const other = await StateStore.open(`${directory}.incoming`)
      for (let index = 1; index < 5; index++) await other.apply(commands.noop(), index)
      expect((await other.apply(create(accessor, secret), 5)).ok).to.equal(true)
      await other.close()
      await store.replace(async (files) => {
        await files.remove('live')
        await files.rename('incoming', 'live')
      })

      const index = await startFilter(store, 6)
      expect(refusedField(await store.apply(create(accessor, randomUUID()), index))).to.equal('AccessorID')
      expect(refusedField(await store.apply(create(randomUUID(), secret), index + 1))).to.equal('SecretID')
    })

    it('reads neither of a new token\'s keys from LevelDB once the filter is ready', async function () {
      const store = await StateStore.open(join(await dirs.make('warden-filter-'), 'state'))
      dirs.defer(() => store.close())
      const read: string[] = []
      const db = store.db as unknown as { getSync: (key: string, options?: unknown) => unknown }
      const getSync = db.getSync.bind(db)
      db.getSync = (key, options) => {
        read.push(key)
        return getSync(key, options)
      }
      const index = await startFilter(store, 1)
      const [accessor, secret] = [randomUUID(), randomUUID()]
      expect((await store.apply(create(accessor, secret), index)).ok).to.equal(true)
      const keys = tokenKeys(accessor, secret)
      expect(read.filter((key) => keys.includes(key)), 'keys read from LevelDB').to.deep.equal([])
      // A key the filter holds is read from LevelDB: a duplicate is found there.
      expect(refusedField(await store.apply(create(accessor, randomUUID()), index + 1))).to.equal('AccessorID')
      expect(read).to.include(keys[0])
    })
  })
})
