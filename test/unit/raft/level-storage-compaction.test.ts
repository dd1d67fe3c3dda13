/**
 * LevelRaftStorage's log compaction: the compacted entries leave LevelDB a chunk at a time with the persists that
 * follow, not in one batch of thousands of deletes (a snapshot every 8,192 entries held a node's Ready loop 7–25 ms
 * while LevelDB took them: docs/benchmarks.md, issue 22, seventeenth session). What a restart sees is the same either
 * way: the log after the compaction point, whatever compacted entries LevelDB still holds, which later persists
 * delete.
 */
import { expect } from 'chai'
import { Level } from 'level'
import { LevelRaftStorage, type RaftDb } from '../../../src/raft/storage/level-storage.js'
import type { Entry } from '../../../src/raft/types.js'
import { useTempDirs } from '../../support/temp-dir.js'

const CONFIGURATION = { voters: ['n1'], learners: [] }

function entries(from: number, to: number, term = 1): Entry[] {
  return Array.from({ length: to - from + 1 }, (_, n) => ({ index: from + n, term, type: 'command' as const, data: new Uint8Array([(from + n) % 256]) }))
}

/** A database whose writes are counted: each batch's deletes and puts, a put as a batch of one. */
function countedDb(directory: string): { db: RaftDb; batches: Array<{ dels: number; puts: number }> } {
  const db = new Level<string, Buffer>(directory, { keyEncoding: 'utf8', valueEncoding: 'buffer' })
  const batches: Array<{ dels: number; puts: number }> = []
  const writes = db as unknown as {
    batch: (ops: Array<{ type: string }>, options?: object) => Promise<void>
    put: (key: string, value: Buffer, options?: object) => Promise<void>
  }
  const batch = writes.batch.bind(db)
  const put = writes.put.bind(db)
  writes.batch = (ops, options) => {
    batches.push({ dels: ops.filter((op) => op.type === 'del').length, puts: ops.filter((op) => op.type === 'put').length })
    return batch(ops, options)
  }
  writes.put = (key, value, options) => {
    batches.push({ dels: 0, puts: 1 })
    return put(key, value, options)
  }
  return { db, batches }
}

/** The indexes of the entries LevelDB holds below `below`. */
async function storedBelow(db: RaftDb, below: number): Promise<number[]> {
  const found: number[] = []
  for await (const key of db.keys({ gte: 'e', lt: 'f' })) {
    const index = parseInt(key.slice(1), 16)
    if (index < below) found.push(index)
  }
  return found
}

describe('raft/storage: LevelRaftStorage compaction', function () {
  const dirs = useTempDirs()

  it('writes only its marker when compacting, and leaves the compacted entries to the next persists, a chunk each', async function () {
    const directory = await dirs.make()
    const { db, batches } = countedDb(directory)
    const storage = await LevelRaftStorage.openDb(db)
    dirs.defer(() => storage.close())
    await storage.persist({ entries: entries(1, 100), hardState: { term: 1, votedFor: 'n1', commitIndex: 0 } }, true)
    for (let from = 101; from <= 2000; from += 100) await storage.persist({ entries: entries(from, from + 99) }, true)
    await storage.saveSnapshot({ index: 1900, term: 1, configuration: CONFIGURATION })
    batches.length = 0
    await storage.compact(1900)
    expect(batches).to.deep.equal([{ dels: 0, puts: 1 }])
    expect(storage.firstIndex()).to.equal(1901)
    expect(storage.entries(1901, 2001).map((entry) => entry.index)).to.deep.equal(entries(1901, 2000).map((entry) => entry.index))
    expect(await storedBelow(db, 1901)).to.have.length(1900)
    // Each persist takes at least 256 of them, or twice as many as it appends.
    batches.length = 0
    await storage.persist({ entries: entries(2001, 2010) }, true)
    await storage.persist({ entries: entries(2011, 2210) }, true)
    expect(batches.map((batch) => batch.dels)).to.deep.equal([256, 400])
    // Each such batch writes the compaction marker again beside its entries (10 and 200).
    expect(batches.map((batch) => batch.puts)).to.deep.equal([11, 201])
    expect(await storedBelow(db, 1901)).to.have.length(1900 - 656)
    let next = 2211
    while ((await storedBelow(db, 1901)).length > 0) {
      expect(next, 'the compacted entries are all deleted within a few persists').to.be.below(2211 + 10 * 6)
      await storage.persist({ entries: entries(next, next + 9) }, true)
      next += 10
    }
    expect(next).to.equal(2211 + 10 * 5)
    batches.length = 0
    await storage.persist({ entries: entries(next, next + 1) }, true)
    expect(batches.map((batch) => batch.dels)).to.deep.equal([0])
    expect(storage.entries(1901, 1903).map((entry) => entry.index)).to.deep.equal([1901, 1902])
  })

  it('after a restart, loads only the log past the compaction point and deletes what LevelDB still holds before it', async function () {
    const directory = await dirs.make()
    const storage = await LevelRaftStorage.open(directory)
    await storage.persist({ entries: entries(1, 600), hardState: { term: 1, votedFor: 'n1', commitIndex: 600 } }, true)
    await storage.saveSnapshot({ index: 500, term: 1, configuration: CONFIGURATION })
    await storage.compact(500)
    await storage.close()
    const { db, batches } = countedDb(directory)
    const again = await LevelRaftStorage.openDb(db)
    dirs.defer(() => again.close())
    expect(again.firstIndex()).to.equal(501)
    expect(again.lastIndex()).to.equal(600)
    expect(again.snapshot()?.index).to.equal(500)
    expect(await storedBelow(db, 501)).to.have.length(500)
    await again.persist({ entries: entries(601, 610) }, true)
    await again.persist({ entries: entries(611, 620) }, true)
    expect(batches.map((batch) => batch.dels)).to.deep.equal([256, 244])
    expect(await storedBelow(db, 501)).to.deep.equal([])
    expect(again.entries(501, 621).map((entry) => entry.index)).to.deep.equal(entries(501, 620).map((entry) => entry.index))
  })

  it("a snapshot from the leader takes every compacted entry LevelDB still holds, and the next compaction's are deleted as before", async function () {
    const directory = await dirs.make()
    const { db, batches } = countedDb(directory)
    const storage = await LevelRaftStorage.openDb(db)
    dirs.defer(() => storage.close())
    await storage.persist({ entries: entries(1, 600), hardState: { term: 1, votedFor: 'n1', commitIndex: 600 } }, true)
    await storage.saveSnapshot({ index: 500, term: 1, configuration: CONFIGURATION })
    await storage.compact(500)
    // Far ahead, as a follower that was down for long gets it.
    await storage.persist({ entries: [], snapshot: { index: 100_000, term: 2, configuration: CONFIGURATION }, hardState: { term: 2, votedFor: null, commitIndex: 100_000 } }, true)
    expect(await storedBelow(db, 100_001)).to.deep.equal([])
    expect(storage.firstIndex()).to.equal(100_001)
    await storage.persist({ entries: entries(100_001, 100_600, 2) }, true)
    await storage.saveSnapshot({ index: 100_500, term: 2, configuration: CONFIGURATION })
    await storage.compact(100_500)
    batches.length = 0
    await storage.persist({ entries: entries(100_601, 100_610, 2) }, true)
    await storage.persist({ entries: entries(100_611, 100_620, 2) }, true)
    expect(batches.map((batch) => batch.dels)).to.deep.equal([256, 244])
    expect(await storedBelow(db, 100_501)).to.deep.equal([])
    await storage.close()
    const again = await LevelRaftStorage.open(directory)
    dirs.defer(() => again.close())
    expect([again.firstIndex(), again.lastIndex()]).to.deep.equal([100_501, 100_620])
  })
})
