/**
 * Snapshots and log compaction (§7, Figure 13; Thesis §5): the leader sends InstallSnapshot when a follower needs
 * entries it compacted; a follower installs a snapshot (Ready.snapshot) before acknowledging it, ignores stale ones
 * and keeps its log when it already holds the snapshot's last entry; the driver's report resumes replication; the
 * snapshot carries the configuration, and a restart recovers from snapshot plus log.
 */
import { expect } from 'chai'
import { makeConfiguration } from '../../../src/raft/configuration.js'
import type { InstallSnapshot } from '../../../src/raft/messages.js'
import { MemoryStorage } from '../../../src/raft/storage/memory-storage.js'
import { entriesWithTerms, newNode, sent, storageWithLog, TestNetwork, type TestNode } from './support.js'

/** What a driver does when its state machine has made a snapshot at its applied index. */
function snapshotAndCompact(node: TestNode): number {
  const meta = node.core.snapshotMetadata(node.status.lastApplied)!
  node.storage.saveSnapshot(meta)
  const compactIndex = node.core.snapshotSaved(meta.index)
  node.storage.compact(compactIndex)
  return compactIndex
}

/** a leads a, b and c; entry 2 is a command and entry 3 adds d as a learner, all committed and applied. */
function learnerAddedAt3(): { network: TestNetwork; leader: TestNode; ids: string[] } {
  const ids = ['a', 'b', 'c']
  const network = new TestNetwork([...ids.map((id, i) => newNode(id, ids, {}, undefined, i + 1)), newNode('d', [], {}, undefined, 4)])
  network.elect('a')
  network.propose('a', 'x')
  const leader = network.node('a')
  leader.core.proposeConfChange({ type: 'addLearner', nodeId: 'd' })
  network.settle()
  return { network, leader, ids }
}

function installSnapshot(fields: Pick<InstallSnapshot, 'snapshot'> & Partial<InstallSnapshot>): InstallSnapshot {
  return { type: 'installSnapshot', from: 'a', to: 'b', term: 2, ...fields }
}

describe('raft: snapshots and log compaction (§7)', function () {
  it('sends InstallSnapshot to a follower that needs compacted entries, and pauses replication to it', function () {
    const network = TestNetwork.of(['a', 'b', 'c'], { trailingEntries: 0 })
    network.elect('a')
    network.isolate('c')
    for (const command of ['1', '2', '3', '4', '5']) network.propose('a', command)
    const leader = network.node('a')
    expect(snapshotAndCompact(leader)).to.equal(6)
    network.heal()
    const snapshots: InstallSnapshot[] = []
    network.dropIf = (m) => m.type === 'installSnapshot' && snapshots.push(m) > 0
    // The heartbeat's answer tells the leader that c is back; c needs entry 2 on, which is gone.
    network.tickAll(1)
    expect(snapshots.map((m) => [m.to, m.snapshot.index, m.snapshot.term])).to.deep.equal([['c', 6, 1]])
    expect(leader.status.progress!['c']).to.include({ state: 'snapshot', pendingSnapshotIndex: 6 })
  })

  it('a follower installs the snapshot before it acknowledges it, and its log restarts after it (Figure 13)', function () {
    const follower = newNode('b', ['a', 'b', 'c'], {}, storageWithLog([1, 1]))
    const snapshot = { index: 10, term: 2, configuration: makeConfiguration(['a', 'b', 'c']) }
    follower.core.step(installSnapshot({ snapshot }))
    const ready = follower.core.ready()!
    expect(ready.snapshot).to.deep.equal(snapshot)
    expect(ready.mustSync).to.equal(true)
    expect(ready.committedEntries).to.deep.equal([])
    expect(sent(ready.messages, 'appendEntriesResponse')[0]).to.include({ success: true, index: 10 })
    follower.persist(ready)
    follower.core.advance(ready)
    expect(follower.status).to.include({ commitIndex: 10, lastApplied: 10, firstIndex: 11, lastIndex: 10 })
    follower.core.step({ type: 'appendEntries', from: 'a', to: 'b', term: 2, prevLogIndex: 10, prevLogTerm: 2, entries: entriesWithTerms([2], 11), leaderCommit: 11 })
    follower.drain()
    expect(follower.applied.map((entry) => entry.index)).to.deep.equal([11])
  })

  it('offers no snapshot metadata while a received snapshot waits to be installed (it replaces the state anyway)', function () {
    const follower = newNode('b', ['a', 'b', 'c'], {}, storageWithLog([1, 1], { commitIndex: 2 }))
    follower.drain()
    follower.core.step(installSnapshot({ snapshot: { index: 10, term: 2, configuration: makeConfiguration(['a', 'b', 'c']) } }))
    expect(follower.core.snapshotMetadata(2)).to.equal(null)
    follower.drain()
    expect(follower.core.snapshotMetadata(10)).to.deep.include({ index: 10, term: 2 })
  })

  it('ignores a snapshot that does not go past its commit index (Figure 13)', function () {
    const follower = newNode('b', ['a', 'b', 'c'], {}, storageWithLog([1, 1, 1], { commitIndex: 3 }))
    follower.core.step(installSnapshot({ snapshot: { index: 2, term: 1, configuration: makeConfiguration(['a', 'b', 'c']) } }))
    const ready = follower.core.ready()!
    expect(ready.snapshot).to.equal(undefined)
    expect(sent(ready.messages, 'appendEntriesResponse')[0]).to.include({ success: true, index: 3 })
  })

  it('keeps its log after a snapshot whose last entry it already holds (Figure 13, step 6)', function () {
    const follower = newNode('b', ['a', 'b', 'c'], {}, storageWithLog([1, 1, 1, 1]))
    follower.core.step(installSnapshot({ term: 1, snapshot: { index: 2, term: 1, configuration: makeConfiguration(['a', 'b', 'c']) } }))
    follower.drain()
    expect(follower.status).to.include({ commitIndex: 2, lastIndex: 4 })
    expect(follower.storage.snapshot()).to.equal(null)
  })

  it('replication resumes after the driver reports the snapshot sent, and restarts from probing after a failure', function () {
    const network = TestNetwork.of(['a', 'b', 'c'], { trailingEntries: 0 })
    network.elect('a')
    network.isolate('c')
    for (const command of ['1', '2', '3']) network.propose('a', command)
    const leader = network.node('a')
    snapshotAndCompact(leader)
    network.heal()
    network.node('c').drain()
    // The stream fails: the leader probes again and, the entries being gone, asks for a snapshot once more.
    network.dropIf = (m) => m.type === 'installSnapshot'
    network.tickAll(1)
    leader.core.reportSnapshot('c', false)
    expect(leader.status.progress!['c']).to.include({ state: 'probe', pendingSnapshotIndex: 0 })
    network.tickAll(1)
    expect(leader.status.progress!['c']?.state).to.equal('snapshot')
    // This time it arrives (the network hands InstallSnapshot to the core, as the driver does once streamed).
    network.dropIf = () => false
    leader.core.reportSnapshot('c', true)
    network.tickAll(2)
    network.propose('a', 'after')
    expect(network.node('c').status.commitIndex).to.equal(leader.status.commitIndex)
    expect(leader.status.progress!['c']?.state).to.equal('replicate')
  })

  it('returns a compaction index that keeps trailingEntries behind the snapshot (hashicorp/raft TrailingLogs)', function () {
    const network = TestNetwork.of(['a'], { trailingEntries: 3 })
    network.elect('a')
    for (const command of ['1', '2', '3', '4', '5', '6', '7', '8', '9']) network.propose('a', command)
    const leader = network.node('a')
    expect(leader.status.lastApplied).to.equal(10)
    expect(snapshotAndCompact(leader)).to.equal(7)
    expect(leader.status.firstIndex).to.equal(8)
  })

  it('snapshot metadata carries the term and the configuration in force at its index (Thesis §5.1)', function () {
    const { leader, ids } = learnerAddedAt3()
    expect(leader.core.snapshotMetadata(2)).to.deep.equal({ index: 2, term: 1, configuration: makeConfiguration(ids) })
    expect(leader.core.snapshotMetadata(3)).to.deep.equal({ index: 3, term: 1, configuration: makeConfiguration(ids, ['d']) })
  })

  it('offers no snapshot metadata below a saved snapshot whose configurations it forgot, rather than a wrong one', function () {
    // A leader's snapshot send reads the state at one index, and may ask for that index's metadata after a snapshot
    // of its own was saved at a later one (the send holds off compaction, not the forgetting of configurations).
    const { network, leader, ids } = learnerAddedAt3()
    network.propose('a', 'y')
    network.settle()
    const meta = leader.core.snapshotMetadata(4)!
    expect(meta.configuration).to.deep.equal(makeConfiguration(ids, ['d']))
    leader.storage.saveSnapshot(meta)
    leader.core.snapshotSaved(4)
    expect(leader.core.snapshotMetadata(2), 'the configuration at 2 is no longer known').to.equal(null)
    // At the configuration's own index and after it, it is still known.
    expect(leader.core.snapshotMetadata(3)).to.deep.equal({ index: 3, term: 1, configuration: makeConfiguration(ids, ['d']) })
    expect(leader.core.snapshotMetadata(4)).to.deep.equal(meta)
  })

  it('restarts from a snapshot and the log after it, with the snapshot’s configuration', function () {
    const storage = new MemoryStorage()
    storage.installSnapshot({ index: 5, term: 2, configuration: makeConfiguration(['a', 'b', 'c', 'd']) })
    storage.append(entriesWithTerms([2, 3], 6))
    storage.setHardState({ term: 3, votedFor: null, commitIndex: 6 })
    const node = newNode('b', [], { appliedIndex: 5 }, storage)
    expect(node.status).to.include({ firstIndex: 6, lastIndex: 7, commitIndex: 6, lastApplied: 5, term: 3 })
    expect(node.status.configuration).to.deep.equal(makeConfiguration(['a', 'b', 'c', 'd']))
    node.drain()
    expect(node.applied.map((entry) => entry.index)).to.deep.equal([6])
  })

  it('probes again a follower whose storage was wiped, which reports a last index below its matchIndex, and sends it a snapshot', function () {
    const network = TestNetwork.of(['a', 'b', 'c'], { trailingEntries: 0 })
    network.elect('a')
    for (const command of ['1', '2', '3']) network.propose('a', command)
    network.settle()
    const leader = network.node('a')
    const matched = leader.status.progress!['c']!.matchIndex
    expect(matched).to.be.above(3)
    snapshotAndCompact(leader)
    // c loses everything and restarts empty, as an operator rebuilding a node would leave it.
    const wiped = newNode('c', ['a', 'b', 'c'], { trailingEntries: 0 }, new MemoryStorage(), 7)
    network.nodes.set('c', wiped)
    const snapshots: InstallSnapshot[] = []
    network.dropIf = (m) => m.type === 'installSnapshot' && snapshots.push(m) > 0
    network.tickAll(2)
    network.settle()
    expect(snapshots.map((m) => m.to)).to.include('c')
    expect(leader.status.progress!['c']!.state).to.equal('snapshot')
  })
})
