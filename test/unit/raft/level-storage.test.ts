/**
 * LevelRaftStorage's hard state on disk: term and vote are written when they change (a vote must survive a crash),
 * while a change of the commit index alone is held until the next write and goes with it. Each case reopens the
 * directory, which is what a restart after kill -9 sees.
 */
import { expect } from 'chai'
import { LevelRaftStorage } from '../../../src/raft/storage/level-storage.js'
import type { Entry } from '../../../src/raft/types.js'
import { useTempDirs } from '../../support/temp-dir.js'

function entry(index: number, term: number): Entry {
  return { index, term, type: 'command', data: new Uint8Array([index]) }
}

describe('raft/storage: LevelRaftStorage hard state', function () {
  const dirs = useTempDirs()

  /** Closes `storage` (closing it again when the test ends is harmless) and opens its directory anew. */
  async function reopened(directory: string, storage: LevelRaftStorage): Promise<LevelRaftStorage> {
    await storage.close()
    const again = await LevelRaftStorage.open(directory)
    dirs.defer(() => again.close())
    return again
  }

  it('writes a changed term or vote at once, even with no entries', async function () {
    const directory = await dirs.make()
    const storage = await LevelRaftStorage.open(directory)
    dirs.defer(() => storage.close())
    await storage.persist({ entries: [], hardState: { term: 3, votedFor: 'n2', commitIndex: 0 } }, true)
    const again = await reopened(directory, storage)
    expect(again.hardState()).to.deep.equal({ term: 3, votedFor: 'n2', commitIndex: 0 })
  })

  it('holds a commit-only change, then writes the newest commit index with the next entries', async function () {
    const directory = await dirs.make()
    const storage = await LevelRaftStorage.open(directory)
    dirs.defer(() => storage.close())
    await storage.persist({ entries: [entry(1, 1), entry(2, 1)], hardState: { term: 1, votedFor: 'n1', commitIndex: 0 } }, true)
    await storage.persist({ entries: [], hardState: { term: 1, votedFor: 'n1', commitIndex: 1 } }, false)
    await storage.persist({ entries: [], hardState: { term: 1, votedFor: 'n1', commitIndex: 2 } }, false)
    // What a restart now would see: the commit index of the last write (the core restarts from the applied index if
    // that is higher).
    expect(storage.hardState()).to.deep.equal({ term: 1, votedFor: 'n1', commitIndex: 0 })
    await storage.persist({ entries: [entry(3, 1)] }, true)
    const again = await reopened(directory, storage)
    expect(again.hardState()).to.deep.equal({ term: 1, votedFor: 'n1', commitIndex: 2 })
    expect(again.lastIndex()).to.equal(3)
  })

  it('a commit-only change before a crash leaves the stored hard state as it was', async function () {
    const directory = await dirs.make()
    const storage = await LevelRaftStorage.open(directory)
    dirs.defer(() => storage.close())
    await storage.persist({ entries: [entry(1, 2)], hardState: { term: 2, votedFor: null, commitIndex: 0 } }, true)
    await storage.persist({ entries: [], hardState: { term: 2, votedFor: null, commitIndex: 1 } }, false)
    const again = await reopened(directory, storage)
    expect(again.hardState()).to.deep.equal({ term: 2, votedFor: null, commitIndex: 0 })
    expect(again.entries(1, 2).map((stored) => stored.term)).to.deep.equal([2])
  })

  it('a term change carries the commit index held since the last write', async function () {
    const directory = await dirs.make()
    const storage = await LevelRaftStorage.open(directory)
    dirs.defer(() => storage.close())
    await storage.persist({ entries: [entry(1, 1)], hardState: { term: 1, votedFor: null, commitIndex: 0 } }, true)
    await storage.persist({ entries: [], hardState: { term: 1, votedFor: null, commitIndex: 1 } }, false)
    await storage.persist({ entries: [], hardState: { term: 2, votedFor: 'n3', commitIndex: 1 } }, true)
    const again = await reopened(directory, storage)
    expect(again.hardState()).to.deep.equal({ term: 2, votedFor: 'n3', commitIndex: 1 })
  })
})
