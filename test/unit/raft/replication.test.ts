/**
 * Log replication, driven step by step: the AppendEntries receiver rules and Log Matching (§5.3), the leader repairing
 * the follower logs of Figure 7 with fast back-tracking, commitment only through an entry of the current term (§5.4.2,
 * the Figure 8 scenario), flow control (pipelining up to maxInflightMessages), batching of proposals (group commit)
 * and the Ready contract (a follower acknowledges only what it persisted; entries are applied once, in order).
 */
import { expect } from 'chai'
import type { AppendEntries } from '../../../src/raft/messages.js'
import type { Entry } from '../../../src/raft/types.js'
import { bytes, entriesWithTerms, newNode, sent, storageWithLog, TestNetwork } from './support.js'

function appendEntries(fields: Partial<AppendEntries> & Pick<AppendEntries, 'term'>): AppendEntries {
  return { type: 'appendEntries', from: 'a', to: 'b', prevLogIndex: 0, prevLogTerm: 0, entries: [], leaderCommit: 0, ...fields }
}

function termsOf(entries: readonly Entry[]): number[] {
  return entries.map((entry) => entry.term)
}

describe('raft: log replication', function () {
  describe('the AppendEntries receiver (§5.3)', function () {
    it('rejects AppendEntries whose previous entry it does not hold with the same term (§5.3)', function () {
      const follower = newNode('b', ['a', 'b', 'c'], {}, storageWithLog([1, 1, 2]))
      follower.core.step(appendEntries({ term: 3, prevLogIndex: 3, prevLogTerm: 3, entries: entriesWithTerms([3], 4) }))
      const [answer] = sent(follower.drain(), 'appendEntriesResponse')
      expect(answer).to.include({ success: false, index: 3 })
      expect(follower.storage.lastIndex()).to.equal(3)
    })

    it('deletes a conflicting suffix and appends the leader’s entries (§5.3)', function () {
      const follower = newNode('b', ['a', 'b', 'c'], {}, storageWithLog([1, 1, 2, 2]))
      follower.core.step(appendEntries({ term: 3, prevLogIndex: 2, prevLogTerm: 1, entries: entriesWithTerms([3], 3) }))
      const [answer] = sent(follower.drain(), 'appendEntriesResponse')
      expect(answer).to.include({ success: true, index: 3 })
      expect(termsOf(follower.storage.entries(1, follower.storage.lastIndex() + 1))).to.deep.equal([1, 1, 3])
    })

    it('keeps entries after a matching stale AppendEntries: only a conflict truncates (§5.3)', function () {
      const follower = newNode('b', ['a', 'b', 'c'], {}, storageWithLog([1, 1, 1]))
      follower.core.step(appendEntries({ term: 1, prevLogIndex: 0, prevLogTerm: 0, entries: entriesWithTerms([1]) }))
      const [answer] = sent(follower.drain(), 'appendEntriesResponse')
      expect(answer).to.include({ success: true, index: 1 })
      expect(follower.storage.lastIndex()).to.equal(3)
    })

    it('commits up to min(leaderCommit, index of the last new entry) (§5.3, Figure 2)', function () {
      const follower = newNode('b', ['a', 'b', 'c'], {}, storageWithLog([1, 1, 1, 1]))
      follower.core.step(appendEntries({ term: 1, prevLogIndex: 1, prevLogTerm: 1, entries: entriesWithTerms([1], 2), leaderCommit: 4 }))
      follower.drain()
      expect(follower.status.commitIndex).to.equal(2)
      expect(follower.applied.map((entry) => entry.index)).to.deep.equal([1, 2])
    })

    it('acknowledges entries in the Ready that persists them, with mustSync: sent only after they are durable (Ready contract)', function () {
      const follower = newNode('b', ['a', 'b', 'c'])
      follower.core.step(appendEntries({ term: 1, entries: entriesWithTerms([1, 1]) }))
      const ready = follower.core.ready()!
      expect(ready.entries.map((entry) => entry.index)).to.deep.equal([1, 2])
      expect(ready.mustSync).to.equal(true)
      expect(sent(ready.messages, 'appendEntriesResponse')[0]).to.include({ success: true, index: 2 })
    })

    it('answers a rejection with the last index that may match: fast back-tracking hint (§5.3)', function () {
      // Follower log of Figure 7 (f); the leader probes at index 10 with term 6.
      const follower = newNode('b', ['a', 'b', 'c'], {}, storageWithLog([1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3]))
      follower.core.step(appendEntries({ term: 8, prevLogIndex: 10, prevLogTerm: 6 }))
      const [answer] = sent(follower.drain(), 'appendEntriesResponse')
      expect(answer).to.include({ success: false, index: 10, conflictIndex: 10, conflictTerm: 3 })
    })
  })

  describe('the leader brings every follower log of Figure 7 to its own (§5.3)', function () {
    const leaderTerms = [1, 1, 1, 4, 4, 5, 5, 6, 6, 6]
    const cases: Record<string, number[]> = {
      a: [1, 1, 1, 4, 4, 5, 5, 6, 6],
      b: [1, 1, 1, 4],
      c: [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 6],
      d: [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 7, 7],
      e: [1, 1, 1, 4, 4, 4, 4],
      f: [1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3],
    }
    for (const [name, followerTerms] of Object.entries(cases)) {
      it(`follower (${name}) ends with the leader’s log, within two rejections (fast back-tracking)`, function () {
        const ids = ['leader', 'follower', 'voter']
        const network = new TestNetwork([
          newNode('leader', ids, {}, storageWithLog(leaderTerms, { term: 7 }), 1),
          newNode('follower', ids, {}, storageWithLog(followerTerms, { term: Math.max(...followerTerms) }), 2),
          newNode('voter', ids, {}, undefined, 3),
        ])
        network.elect('leader')
        expect(network.leaders()).to.deep.equal(['leader'])
        const leader = network.node('leader').storage
        const follower = network.node('follower').storage
        expect(termsOf(follower.entries(1, follower.lastIndex() + 1))).to.deep.equal(termsOf(leader.entries(1, leader.lastIndex() + 1)))
        expect(termsOf(leader.entries(1, leader.lastIndex() + 1))).to.deep.equal([...leaderTerms, 8])
        const rejections = network.delivered.filter((m) => m.type === 'appendEntriesResponse' && m.from === 'follower' && !m.success)
        expect(rejections.length).to.be.at.most(2)
      })
    }
  })

  it('never commits an entry of an earlier term by counting replicas, only through one of its own term: Figure 8 (§5.4.2)', function () {
    // Figure 8 (c): S1 leads term 4; its entry 2 (term 2) reaches a majority, but S5 ([1, 3]) could still be
    // elected and overwrite it, so it must stay uncommitted until S1's own entry 3 (term 4) is on a majority.
    const ids = ['s1', 's2', 's3', 's4', 's5']
    const options = { maxEntriesPerMessage: 1 }
    const network = new TestNetwork([
      newNode('s1', ids, options, storageWithLog([1, 2], { term: 3, commitIndex: 1 }), 1),
      newNode('s2', ids, options, storageWithLog([1, 2], { term: 3, commitIndex: 1 }), 2),
      newNode('s3', ids, options, storageWithLog([1], { term: 3, commitIndex: 1 }), 3),
      newNode('s4', ids, options, storageWithLog([1], { term: 3, commitIndex: 1 }), 4),
      newNode('s5', ids, options, storageWithLog([1, 3], { term: 3, commitIndex: 1 }), 5),
    ])
    // Entry 3 (s1's no-op of term 4) does not reach anyone who already holds entry 2; probes and entry 2 do.
    network.dropIf = (message) =>
      message.type === 'appendEntries' && message.entries.some((entry) => entry.index === 3) && network.node(message.to).storage.lastIndex() >= 2
    network.elect('s1')
    const s1 = network.node('s1')
    expect(s1.status).to.include({ role: 'leader', term: 4 })
    const matchIndexes = Object.values(s1.status.progress!).map((progress) => progress.matchIndex)
    expect(matchIndexes.filter((index) => index >= 2).length).to.be.at.least(2) // with s1 itself: a majority
    expect(s1.status.commitIndex).to.equal(1)
    network.dropIf = () => false
    network.tickAll(1)
    expect(s1.status.commitIndex).to.equal(3)
    for (const id of ids) expect(termsOf(network.node(id).storage.entries(1, 4))).to.deep.equal([1, 2, 4])
  })

  it('a leader counts its own entries towards commit only once they are durable (Ready contract)', function () {
    const node = newNode('a', ['a'])
    node.core.campaign()
    node.drain()
    node.core.propose([bytes('x')])
    const ready = node.core.ready()!
    expect(ready.entries.map((entry) => entry.index)).to.deep.equal([2])
    expect(node.status.commitIndex).to.equal(1)
    node.persist(ready)
    node.core.advance(ready)
    expect(node.status.commitIndex).to.equal(2)
  })

  it('batches proposals waiting for the next Ready into one write and one AppendEntries per follower (group commit)', function () {
    const network = TestNetwork.of(['a', 'b', 'c'])
    network.elect('a')
    const leader = network.node('a')
    for (const command of ['x', 'y', 'z']) leader.core.propose([bytes(command)])
    const ready = leader.core.ready()!
    expect(ready.entries.map((entry) => entry.index)).to.deep.equal([2, 3, 4])
    const appends = sent(ready.messages, 'appendEntries')
    expect(appends.map((m) => [m.to, m.entries.map((entry) => entry.index)])).to.deep.equal([
      ['b', [2, 3, 4]],
      ['c', [2, 3, 4]],
    ])
  })

  it('pipelines AppendEntries: at most maxInflightMessages unanswered per follower, more as answers come', function () {
    const network = TestNetwork.of(['a', 'b', 'c'], { maxInflightMessages: 2, maxEntriesPerMessage: 1 })
    network.elect('a')
    const leader = network.node('a')
    leader.core.propose(['1', '2', '3', '4', '5'].map(bytes))
    const toB = sent(leader.drain(), 'appendEntries').filter((m) => m.to === 'b')
    expect(toB.map((m) => m.entries.map((entry) => entry.index))).to.deep.equal([[2], [3]])
    const follower = network.node('b')
    follower.core.step(toB[0]!)
    const [answer] = sent(follower.drain(), 'appendEntriesResponse')
    leader.core.step(answer!)
    const next = sent(leader.drain(), 'appendEntries').filter((m) => m.to === 'b')
    expect(next.map((m) => m.entries.map((entry) => entry.index))).to.deep.equal([[4]])
  })

  it('splits a batch by maxEntriesPerMessage and maxBytesPerMessage', function () {
    const network = TestNetwork.of(['a', 'b'], { maxEntriesPerMessage: 3, maxBytesPerMessage: 100 })
    network.elect('a')
    const leader = network.node('a')
    leader.core.propose(['1', '2', '3', '4'].map((n) => bytes(n.repeat(10))))
    leader.core.propose([bytes('x'.repeat(500))])
    const toB = sent(leader.drain(), 'appendEntries').filter((m) => m.to === 'b')
    // 10-byte commands cost 34 bytes each: two fit in 100 bytes, and a 500-byte one goes alone.
    expect(toB.map((m) => m.entries.map((entry) => entry.index))).to.deep.equal([[2, 3], [4, 5], [6]])
  })

  it('applies committed entries in order, once, and not again after a restart at its applied index', function () {
    const network = TestNetwork.of(['a', 'b', 'c'])
    network.elect('a')
    network.propose('a', 'x')
    network.propose('a', 'y')
    network.tickAll(1)
    const follower = network.node('b')
    expect(follower.appliedCommands()).to.deep.equal(['x', 'y'])
    expect(follower.applied.map((entry) => entry.index)).to.deep.equal([1, 2, 3])
    follower.restart()
    follower.drain()
    network.tickAll(2)
    expect(follower.appliedCommands()).to.deep.equal(['x', 'y'])
  })
})
