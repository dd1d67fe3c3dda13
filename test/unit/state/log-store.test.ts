/**
 * The durable log (src/raft/storage/log-store.ts) over a real LevelDB in a temporary directory: entries appended in
 * order come back with their index, term and bytes, also after the store is closed and reopened, and `lastIndex` /
 * `firstIndex` describe what is stored. An append that would leave a gap or rewrite an index is refused as a bug
 * (AssertionError) and writes nothing. Since one Raft path, this is the log of the previous release's single server
 * (`<data-dir>/log`), read once by the agent when it upgrades such a data dir (src/agent/replicas.ts; the upgrade
 * itself: test/unit/agent/upgrade.test.ts), so the old entries must still come back as that release wrote them.
 */
import { expect } from 'chai'
import { AssertionError } from '../../../src/lib/assert.js'
import { LogStore, type LogEntry } from '../../../src/raft/storage/log-store.js'
import { useTempDirs } from '../../support/temp-dir.js'

function entry(index: number, term = 1, text = `command ${index}`): LogEntry {
  return { index, term, data: Buffer.from(text, 'utf8') }
}

function entries(from: number, to: number, term = 1): LogEntry[] {
  return Array.from({ length: to - from + 1 }, (_, offset) => entry(from + offset, term))
}

/** Entries as plain values, so deep equality compares bytes. */
function plain(list: readonly LogEntry[]): Array<{ index: number; term: number; data: string }> {
  return list.map((item) => ({ index: item.index, term: item.term, data: Buffer.from(item.data).toString('hex') }))
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (error) {
    return error
  }
  expect.fail('expected the promise to reject')
}

describe('raft/storage: LogStore', function () {
  const dirs = useTempDirs()
  let directory: string
  let log: LogStore

  async function reopen(): Promise<void> {
    await log.close()
    log = await LogStore.open(directory)
  }

  beforeEach(async function () {
    directory = await dirs.make('warden-log-')
    log = await LogStore.open(directory)
    // Closed at cleanup whichever store the test left open; closing a closed LevelDB is harmless.
    dirs.defer(() => log.close())
  })

  it('an empty log has lastIndex 0, firstIndex 1 and no entries', async function () {
    expect(log.lastIndex).to.equal(0)
    expect(log.firstIndex).to.equal(1)
    expect(await log.entries(1, 10)).to.deep.equal([])
    await reopen()
    expect(log.lastIndex).to.equal(0)
    expect(log.firstIndex).to.equal(1)
  })

  it('returns appended entries with their index, term and bytes, in order', async function () {
    await log.append([entry(1, 1), entry(2, 1)], { sync: true })
    await log.append([entry(3, 2, 'binary \u0000\u00ff')], { sync: false })
    expect(log.lastIndex).to.equal(3)
    expect(log.firstIndex).to.equal(1)
    expect(plain(await log.entries(1, 3))).to.deep.equal(plain([entry(1, 1), entry(2, 1), entry(3, 2, 'binary \u0000\u00ff')]))
    const [third] = await log.entries(3, 3)
    expect(Buffer.isBuffer(third?.data)).to.equal(true)
  })

  it('entries(lo, hi) is inclusive, clipped to what exists, and empty when hi < lo', async function () {
    await log.append(entries(1, 5), { sync: true })
    expect((await log.entries(2, 4)).map((item) => item.index)).to.deep.equal([2, 3, 4])
    expect((await log.entries(4, 99)).map((item) => item.index)).to.deep.equal([4, 5])
    expect(await log.entries(6, 9)).to.deep.equal([])
    expect(await log.entries(3, 2)).to.deep.equal([])
  })

  it('keeps entries, lastIndex and firstIndex across close and reopen, and appending continues after them', async function () {
    await log.append(entries(1, 4, 3), { sync: true })
    await reopen()
    expect(log.lastIndex).to.equal(4)
    expect(log.firstIndex).to.equal(1)
    expect(plain(await log.entries(1, 4))).to.deep.equal(plain(entries(1, 4, 3)))
    await log.append([entry(5, 4)], { sync: true })
    await reopen()
    expect(log.lastIndex).to.equal(5)
    expect(plain(await log.entries(1, 5))).to.deep.equal(plain([...entries(1, 4, 3), entry(5, 4)]))
  })

  it('orders indexes numerically past every hexadecimal digit boundary (15/16, 255/256, 4095/4096)', async function () {
    for (let from = 1; from <= 4200; from += 600) await log.append(entries(from, Math.min(from + 599, 4200)), { sync: false })
    await reopen()
    expect(log.lastIndex).to.equal(4200)
    const all = await log.entries(1, 4200)
    expect(all).to.have.length(4200)
    expect(all.every((item, position) => item.index === position + 1)).to.equal(true)
    expect((await log.entries(15, 17)).map((item) => item.index)).to.deep.equal([15, 16, 17])
    expect((await log.entries(4095, 4096)).map((item) => Buffer.from(item.data).toString())).to.deep.equal(['command 4095', 'command 4096'])
  })

  it('refuses an append that leaves a gap, and writes nothing', async function () {
    await log.append(entries(1, 3), { sync: true })
    expect(await rejection(log.append([entry(5)], { sync: true }))).to.be.instanceOf(AssertionError).with.property('message').that.contains('got 5, expected 4')
    expect(log.lastIndex).to.equal(3)
    await reopen()
    expect(log.lastIndex).to.equal(3)
    expect(await log.entries(4, 10)).to.deep.equal([])
  })

  it('refuses an append that rewrites an existing index, and keeps the stored entry', async function () {
    await log.append(entries(1, 3), { sync: true })
    expect(await rejection(log.append([entry(3, 9, 'overwrite')], { sync: true }))).to.be.instanceOf(AssertionError)
    expect(await rejection(log.append([entry(1, 9, 'overwrite')], { sync: true }))).to.be.instanceOf(AssertionError)
    await reopen()
    expect(plain(await log.entries(1, 3))).to.deep.equal(plain(entries(1, 3)))
  })

  it('refuses a batch that is out of order inside, and writes none of it', async function () {
    await log.append(entries(1, 2), { sync: true })
    expect(await rejection(log.append([entry(3), entry(5), entry(4)], { sync: true }))).to.be.instanceOf(AssertionError)
    expect(await rejection(log.append([entry(3), entry(3)], { sync: true }))).to.be.instanceOf(AssertionError)
    expect(log.lastIndex).to.equal(2)
    await reopen()
    expect(log.lastIndex).to.equal(2)
    expect(await log.entries(3, 5)).to.deep.equal([])
  })

  it('an empty append is a no-op', async function () {
    await log.append([], { sync: true })
    expect(log.lastIndex).to.equal(0)
    await log.append(entries(1, 1), { sync: true })
    await log.append([], { sync: true })
    expect(log.lastIndex).to.equal(1)
  })

  it('the first append must be index 1', async function () {
    expect(await rejection(log.append([entry(2)], { sync: true }))).to.be.instanceOf(AssertionError)
    expect(await rejection(log.append([entry(0)], { sync: true }))).to.be.instanceOf(AssertionError)
    expect(log.lastIndex).to.equal(0)
  })
})
