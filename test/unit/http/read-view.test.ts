/**
 * Paced lists read a fixed view of the state (StateStore.view, a LevelDB snapshot) and run again when a snapshot
 * install replaced the state under them (acrossReplacements in src/http/read.ts). Both from a review: a paced list
 * yields to the event loop between its point reads, so without the view it showed part of one atomic apply, and a
 * follower installing a snapshot meanwhile failed it with a closed database.
 */
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { expect } from 'chai'
import { acrossReplacements } from '../../../src/http/read.js'
import type { Pacer } from '../../../src/lib/pace.js'
import { COMMAND_VERSION, type Command } from '../../../src/state/commands.js'
import { StateStore } from '../../../src/state/store.js'
import { listByIndex, tokenSpec } from '../../../src/state/tables.js'
import { buildTokenCreate } from '../../support/state.js'
import { useTempDirs } from '../../support/temp-dir.js'

const TOKENS = 600

/**
 * A pacer that yields at every item, and at the `at`-th holds the list until the test calls `release`: what the test
 * does in between (an apply, a snapshot install) lands at that point of the list, however long it takes.
 */
function holdingPacer(at: number): { pace: Pacer; reached: Promise<void>; release: () => void } {
  let calls = 0
  let signal: () => void = () => undefined
  let release: () => void = () => undefined
  const reached = new Promise<void>((resolve) => (signal = resolve))
  const released = new Promise<void>((resolve) => (release = resolve))
  const pace: Pacer = () => {
    calls += 1
    if (calls !== at) return new Promise((resolve) => setImmediate(resolve))
    signal()
    return released
  }
  return { pace, reached, release }
}

describe('paced lists: a fixed view of the state, and a run again across a snapshot install', function () {
  const dirs = useTempDirs()
  let store: StateStore
  let ids: string[]

  beforeEach(async function () {
    store = await StateStore.open(join(await dirs.make('warden-view-'), 'state'))
    dirs.defer(() => store.close())
    ids = Array.from({ length: TOKENS }, () => randomUUID())
    const token = (AccessorID: string): Command => ({ v: COMMAND_VERSION, type: 'acl.token.create', token: buildTokenCreate({ AccessorID, SecretID: randomUUID(), CreateTime: '2026-01-01T00:00:00Z' }) })
    await store.applyBatch(ids.map((AccessorID, i) => ({ command: token(AccessorID), index: i + 1 })))
  })

  /** Deletes every token in one batch: the state has either all of them or none. */
  function deleteAll(): Promise<unknown> {
    return store.applyBatch(ids.map((AccessorID, i) => ({ command: { v: COMMAND_VERSION, type: 'acl.token.delete', AccessorID } as Command, index: TOKENS + 1 + i })))
  }

  it('a list read through a view shows the state it began at, whatever applies while it yields', async function () {
    const { pace, reached, release } = holdingPacer(TOKENS / 3)
    const view = store.view()
    try {
      const listing = listByIndex(view.reader, tokenSpec, 'ns', 'default', pace)
      await reached
      await deleteAll()
      release()
      const listed = await listing
      expect(listed.map((token) => token.AccessorID).filter((id) => ids.includes(id))).to.have.length(TOKENS)
    } finally {
      await view.close()
    }
    // The live reader sees the delete.
    expect((await listByIndex(store.reader, tokenSpec, 'ns', 'default')).filter((token) => ids.includes(token.AccessorID))).to.have.length(0)
  })

  it('without the view, the same list shows part of the batch (what the view is for)', async function () {
    const { pace, reached, release } = holdingPacer(TOKENS / 3)
    const listing = listByIndex(store.reader, tokenSpec, 'ns', 'default', pace)
    await reached
    await deleteAll()
    release()
    const listed = (await listing).filter((token) => ids.includes(token.AccessorID)).length
    expect(listed).to.be.greaterThan(0).and.lessThan(TOKENS)
  })

  it('a list whose database a snapshot install closed runs again on the new state', async function () {
    const { pace, reached, release } = holdingPacer(TOKENS / 3)
    let runs = 0
    const listing = acrossReplacements(store, async () => {
      runs += 1
      const view = store.view()
      try {
        return await listByIndex(view.reader, tokenSpec, 'ns', 'default', runs === 1 ? pace : undefined)
      } finally {
        await view.close().catch(() => undefined)
      }
    })
    await reached
    await store.replace(async () => {})
    release()
    const listed = await listing
    expect(runs).to.equal(2)
    expect(listed.filter((token) => ids.includes(token.AccessorID))).to.have.length(TOKENS)
  })

  it('a read that starts while an install has the database closed waits for the new one (review finding)', async function () {
    let finishSwitch: () => void = () => undefined
    let switching: () => void = () => undefined
    const inSwitch = new Promise<void>((resolve) => (switching = resolve))
    // The switch of directories (and the reopen after it) takes a while, as it does for a large snapshot.
    const installing = store.replace(() => {
      switching()
      return new Promise<void>((resolve) => (finishSwitch = resolve))
    })
    await inSwitch
    let runs = 0
    const listing = acrossReplacements(store, async () => {
      runs += 1
      const view = store.view()
      try {
        return await listByIndex(view.reader, tokenSpec, 'ns', 'default')
      } finally {
        await view.close().catch(() => undefined)
      }
    })
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(runs).to.equal(0)
    finishSwitch()
    await installing
    const listed = await listing
    expect(runs).to.equal(1)
    expect(listed.filter((token) => ids.includes(token.AccessorID))).to.have.length(TOKENS)
  })

  it('a failure that is not a replacement is not run again', async function () {
    let runs = 0
    const failing = acrossReplacements(store, async () => {
      runs += 1
      throw new Error('not a replacement')
    })
    const error = await failing.then(
      () => undefined,
      (thrown: unknown) => thrown,
    )
    expect(error).to.be.an.instanceOf(Error).with.property('message', 'not a replacement')
    expect(runs).to.equal(1)
  })
})
