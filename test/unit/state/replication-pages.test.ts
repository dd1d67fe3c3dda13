/**
 * What a primary serves to the secondaries replicating from it (issue 19): the change feed of the replicated tables
 * (state/change-feed.ts) and the pages built on it (state/replication-pages.ts), over a real LevelDB in a temporary
 * directory. A full walk pages a stream in key order and skips local tokens and exported-services; records come
 * whole only when changed after `since`; a delta names what changed and what was deleted, or gives way to the walk
 * when the feed does not reach back or the change is too large.
 */
import { expect } from 'chai'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ChangeFeed } from '../../../src/state/change-feed.js'
import { type Command, type PolicyWrite } from '../../../src/state/commands.js'
import { configContentHash, deltaPage, walkPage, type StreamPage } from '../../../src/state/replication-pages.js'
import { configDeleteKey } from '../../../src/state/replication.js'
import { StateStore } from '../../../src/state/store.js'
import { buildTokenCreate, commands } from '../../support/state.js'

const NOW = '2026-11-26T00:00:00.000Z'
const uuid = (kind: number, n: number): string => `${kind.toString(16).repeat(8)}-0000-4000-8000-${n.toString(16).padStart(12, '0')}`
const policy = (n: number, fields: Partial<PolicyWrite> = {}): PolicyWrite => ({ ID: uuid(0xb, n), Name: `policy-${n}`, Description: '', Rules: '', Datacenters: [], Namespace: 'default', ...fields })

describe('replication pages and the change feed', function () {
  let dir: string
  let store: StateStore
  let feed: ChangeFeed
  let index = 0

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'warden-pages-'))
    store = await StateStore.open(dir)
    feed = new ChangeFeed(store, 10)
    index = 0
  })

  afterEach(async () => {
    await store.close()
    await rm(dir, { recursive: true, force: true })
  })

  async function apply(command: Command): Promise<number> {
    index += 1
    const result = await store.apply(command, index)
    expect(result.ok, JSON.stringify(result)).to.equal(true)
    return index
  }

  async function walkAll(stream: 'policies' | 'tokens' | 'config', since: number, limit: number): Promise<StreamPage[]> {
    const pages: StreamPage[] = []
    let cursor = ''
    for (;;) {
      const page = await walkPage(store.db, stream, since, cursor, limit)
      pages.push(page)
      if (page.Next === '') return pages
      cursor = page.Next
    }
  }

  it('walks a stream in pages from a cursor, each record once, whole only when changed after since', async () => {
    for (let n = 1; n <= 7; n++) await apply(commands.policyCreate(policy(n)))
    const pages = await walkAll('policies', 4, 3)
    expect(pages.length).to.be.greaterThan(2)
    const items = pages.flatMap((page) => page.Records)
    expect(items.map((item) => item.ID)).to.deep.equal([1, 2, 3, 4, 5, 6, 7].map((n) => uuid(0xb, n)))
    // Policies 1..4 were written at indexes 1..4: listed by ID and Hash; 5..7 come whole.
    expect(items.filter((item) => item.Record !== undefined).map((item) => item.Record?.['Name'])).to.deep.equal(['policy-5', 'policy-6', 'policy-7'])
    for (const item of items) expect(item.Hash).to.be.a('string').and.not.equal('')
    expect(pages.every((page) => page.Mode === 'full' && page.Deleted.length === 0)).to.equal(true)
  })

  it("never lists a local token or an exported-services entry, and names a config entry by kind, namespace and name", async () => {
    await apply(commands.tokenCreate(buildTokenCreate({ AccessorID: uuid(0xa, 1), SecretID: uuid(5, 1), CreateTime: NOW })))
    for (let n = 2; n <= 9; n++) await apply(commands.tokenCreate(buildTokenCreate({ AccessorID: uuid(0xa, n), SecretID: uuid(5, n), CreateTime: NOW, Local: true })))
    const tokens = (await walkAll('tokens', 0, 1)).flatMap((page) => page.Records)
    expect(tokens.map((item) => item.ID)).to.deep.equal([uuid(0xa, 1)])
    expect(tokens[0]?.Record?.['SecretID']).to.equal(uuid(5, 1))
    await apply(commands.configApply({ Kind: 'exported-services', Name: 'default', Namespace: 'default', Services: [] } as never))
    await apply(commands.configApply({ Kind: 'service-defaults', Name: 'web', Namespace: 'default', Protocol: 'http' } as never))
    const config = (await walkAll('config', 0, 100)).flatMap((page) => page.Records)
    expect(config.map((item) => item.ID)).to.deep.equal([configDeleteKey({ Kind: 'service-defaults', Namespace: 'default', Name: 'web' })])
    // The hash of an entry's fields but its indexes: the same entry written again at another index hashes the same.
    const { CreateIndex: _c, ModifyIndex: _m, ...fields } = config[0]!.Record as Record<string, unknown>
    expect(config[0]?.Hash).to.equal(configContentHash({ ...fields, CreateIndex: 99, ModifyIndex: 100 }))
  })

  it('answers a delta of what changed after an index, deletions included, from the feed', async () => {
    await apply(commands.policyCreate(policy(1)))
    const since = await apply(commands.policyCreate(policy(2)))
    await apply(commands.policyUpdate(policy(1, { Description: 'changed' })))
    await apply(commands.policyDelete(uuid(0xb, 2)))
    await apply(commands.policyCreate(policy(3)))
    const delta = deltaPage(store.db, feed, 'policies', since)
    expect(delta?.Mode).to.equal('delta')
    expect(delta?.Records.map((item) => [item.ID, item.Record?.['Description']])).to.deep.equal([
      [uuid(0xb, 1), 'changed'],
      [uuid(0xb, 3), ''],
    ])
    expect(delta?.Deleted).to.deep.equal([uuid(0xb, 2)])
    // Nothing changed after the last index: an empty delta, not a walk.
    expect(deltaPage(store.db, feed, 'policies', index)).to.deep.equal({ Mode: 'delta', Records: [], Deleted: [], Next: '' })
    // Another stream's changes are not this one's.
    expect(deltaPage(store.db, feed, 'roles', since)?.Records).to.deep.equal([])
  })

  it("keeps a quiet table's changes within reach while a busy one's overflow the feed", async () => {
    const quiet = await apply(commands.policyCreate(policy(1)))
    for (let n = 1; n <= 25; n++) await apply(commands.tokenCreate(buildTokenCreate({ AccessorID: uuid(0xa, n), SecretID: uuid(5, n), CreateTime: NOW })))
    // Ten changes kept, 26 made: the policy's change and fifteen token changes were forgotten.
    expect(feed.from('token')).to.be.greaterThan(quiet)
    expect(deltaPage(store.db, feed, 'tokens', quiet)).to.equal(undefined)
    // The policy table's last forgotten change is the one at `quiet`: everything after it is known, nothing happened.
    expect(feed.from('policy')).to.equal(quiet)
    expect(deltaPage(store.db, feed, 'policies', quiet)).to.deep.equal({ Mode: 'delta', Records: [], Deleted: [], Next: '' })
    expect(deltaPage(store.db, feed, 'policies', quiet - 1)).to.equal(undefined)
  })

  it('gives way to the walk when the feed does not reach back: before it started, beyond what it keeps, after a restore', async () => {
    const before = await apply(commands.policyCreate(policy(1)))
    const late = new ChangeFeed(store, 4)
    expect(deltaPage(store.db, late, 'policies', before - 1)).to.equal(undefined)
    expect(deltaPage(store.db, late, 'policies', before)?.Records).to.deep.equal([])
    for (let n = 2; n <= 6; n++) await apply(commands.policyCreate(policy(n)))
    // Five changes, four kept: the oldest one's index is where the feed now starts.
    expect(late.from()).to.equal(before + 1)
    expect(deltaPage(store.db, late, 'policies', before)).to.equal(undefined)
    expect(deltaPage(store.db, late, 'policies', before + 1)?.Records.map((item) => item.Record?.['Name'])).to.deep.equal(['policy-3', 'policy-4', 'policy-5', 'policy-6'])
    // Forgetting policy changes does not put roles out of reach: none of theirs was forgotten.
    expect(late.from('role')).to.equal(before)
    // A restored state is all new: the feed starts again at its applied index.
    for (const listener of store.resetListeners) listener()
    expect(late.from()).to.equal(store.lastApplied)
    expect(deltaPage(store.db, late, 'policies', before + 1)).to.equal(undefined)
  })
})
