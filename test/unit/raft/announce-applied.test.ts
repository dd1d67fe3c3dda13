/**
 * announceAppliedCommit: a leader tells its followers no more of its commit index than it has applied, so that the
 * writes its apply produced can travel with that commit index (RaftReplica's shipped writes). Driven Ready by Ready:
 * the Ready that hands the leader a newly committed entry to apply must not already tell a follower that it committed.
 */
import { expect } from 'chai'
import type { Message } from '../../../src/raft/messages.js'
import type { Ready } from '../../../src/raft/ready.js'
import { bytes, sent, TestNetwork, type CoreOptions, type TestNode } from './support.js'

/** Takes one Ready from `node`, persists it, and returns it without advancing (the test advances). */
function takeReady(node: TestNode): Ready {
  const ready = node.core.ready()
  if (ready === null) throw new Error(`${node.id} has no Ready`)
  node.persist(ready)
  return ready
}

/** Proposes `items` on `a`, persists and sends them, and delivers b's and c's answers: they commit. Their last index. */
function proposeAcknowledged(net: TestNetwork, a: TestNode, items: string[]): number {
  a.core.propose(items.map(bytes))
  const first = takeReady(a)
  a.core.advance(first)
  for (const message of first.messages) net.deliver(message)
  for (const id of ['b', 'c']) for (const message of net.node(id).drain()) net.deliver(message)
  return first.entries.at(-1)!.index
}

/** Takes `a`'s next Ready and checks that it tells both followers `index` committed, in AppendEntries. */
function expectBothTold(a: TestNode, index: number): void {
  const next = takeReady(a)
  const told = sent(next.messages, 'appendEntries')
  expect(told.map((m) => m.to).sort()).to.deep.equal(['b', 'c'])
  expect(told.every((m) => m.leaderCommit === index)).to.equal(true)
  a.core.advance(next)
}

function commitsTold(messages: readonly Message[]): number[] {
  return [...sent(messages, 'appendEntries').map((m) => m.leaderCommit), ...sent(messages, 'heartbeat').map((m) => m.leaderCommit)]
}

/** Three voters, a leading; x proposed and acknowledged by b and c. Returns the Ready that commits x on a, unadvanced. */
function commitX(announceAppliedCommit: boolean, beatFirst = false, options: CoreOptions = {}): { net: TestNetwork; a: TestNode; ready: Ready; xIndex: number } {
  const net = TestNetwork.of(['a', 'b', 'c'], { announceAppliedCommit, ...options })
  net.elect('a')
  const a = net.node('a')
  const xIndex = proposeAcknowledged(net, a, ['x'])
  // A heartbeat round falls due in the same Ready that commits x.
  if (beatFirst) a.tick(BEAT_TICKS)
  const ready = takeReady(a)
  expect(ready.committedEntries.map((entry) => entry.index)).to.include(xIndex)
  return { net, a, ready, xIndex }
}

describe('raft: a leader announces only what it applied (announceAppliedCommit)', function () {
  it('without the setting, the Ready that commits an entry already tells the followers', function () {
    const { ready, xIndex } = commitX(false)
    expect(Math.max(...commitsTold(ready.messages))).to.equal(xIndex)
  })

  it('with it, the followers are told once the leader applied the entry, in the next Ready', function () {
    const { a, ready, xIndex } = commitX(true)
    expect(commitsTold(ready.messages).every((commit) => commit < xIndex)).to.equal(true)
    a.core.advance(ready)
    expectBothTold(a, xIndex)
  })

  it('heartbeats tell no more than the leader applied', function () {
    for (const announce of [false, true]) {
      const { ready, xIndex } = commitX(announce, true)
      const beats = sent(ready.messages, 'heartbeat')
      expect(beats.map((m) => m.to).sort()).to.deep.equal(['b', 'c'])
      // Without the setting the round already says x committed (the followers hold it); with it, not yet.
      expect(beats.every((m) => (announce ? m.leaderCommit < xIndex : m.leaderCommit === xIndex))).to.equal(true)
    }
  })

  it('a leader with more left to apply than one Ready holds tells its whole commit index', function () {
    const net = TestNetwork.of(['a', 'b', 'c'], { announceAppliedCommit: true, maxCommittedEntriesPerReady: 2 })
    net.elect('a')
    const a = net.node('a')
    const last = proposeAcknowledged(net, a, ['p', 'q', 'r', 's', 't'])
    a.tick(BEAT_TICKS)
    const ready = takeReady(a)
    expect(ready.committedEntries).to.have.length(2)
    expect(a.status.commitIndex).to.equal(last)
    expect(sent(ready.messages, 'heartbeat').every((m) => m.leaderCommit === last)).to.equal(true)
  })

  it('with reportsApplied, the followers are told once the driver says it applied the entry, not at advance', function () {
    const { a, ready, xIndex } = commitX(true, false, { reportsApplied: true })
    a.core.advance(ready)
    // Handed out, not applied yet (the driver applies while its loop goes on): nothing more to tell.
    expect(a.status.lastApplied).to.be.below(xIndex)
    const meanwhile = a.core.ready()
    if (meanwhile !== null) {
      expect(commitsTold(meanwhile.messages).every((commit) => commit < xIndex)).to.equal(true)
      a.persist(meanwhile)
      a.core.advance(meanwhile)
    }
    a.core.appliedTo(xIndex)
    expect(a.status.lastApplied).to.equal(xIndex)
    expectBothTold(a, xIndex)
  })

  it('with reportsApplied, the driver cannot report applied what it was not handed out', function () {
    const { a, ready, xIndex } = commitX(true, false, { reportsApplied: true })
    expect(() => a.core.appliedTo(xIndex + 1)).to.throw(/beyond what was handed out/)
    a.core.advance(ready)
    expect(() => a.core.appliedTo(xIndex + 1)).to.throw(/beyond what was handed out/)
    const { a: plain } = commitX(true)
    expect(() => plain.core.appliedTo(1)).to.throw(/reportsApplied/)
  })

  it('with reportsApplied, entries handed out and not yet applied do not count as a backlog that tells all', function () {
    const net = TestNetwork.of(['a', 'b', 'c'], { announceAppliedCommit: true, reportsApplied: true, maxCommittedEntriesPerReady: 2 })
    net.elect('a')
    const a = net.node('a')
    const appliedBefore = a.status.lastApplied
    const last = proposeAcknowledged(net, a, ['p', 'q', 'r'])
    // Every committed entry is handed out, none applied: more than maxCommittedEntriesPerReady behind what was
    // applied, nothing behind what was handed out. (When the commit came, nothing of it was handed out: the messages
    // of that moment tell all of it, a backlog.)
    let handed = 0
    for (let ready = a.core.ready(); ready !== null; ready = a.core.ready()) {
      a.persist(ready)
      handed += ready.committedEntries.length
      a.core.advance(ready)
    }
    expect(handed).to.equal(3)
    expect(a.status.commitIndex).to.equal(last)
    // The scenario: more than maxCommittedEntriesPerReady (2) committed and not applied.
    expect(last - a.status.lastApplied).to.be.above(2)
    expect(a.status.lastApplied).to.equal(appliedBefore)
    a.tick(BEAT_TICKS)
    const beat = takeReady(a)
    const told = commitsTold(beat.messages)
    expect(told.length).to.be.above(0)
    expect(told.every((commit) => commit <= appliedBefore), `told ${JSON.stringify(told)}, applied ${appliedBefore}, last ${last}`).to.equal(true)
    a.core.advance(beat)
  })

  it('followers still commit everything: a settled cluster agrees on the commit index', function () {
    const net = TestNetwork.of(['a', 'b', 'c'], { announceAppliedCommit: true })
    net.elect('a')
    net.propose('a', 'x', 'y')
    net.propose('a', 'z')
    const commits = ['a', 'b', 'c'].map((id) => net.node(id).status.commitIndex)
    expect(new Set(commits).size).to.equal(1)
    expect(net.node('b').appliedCommands()).to.deep.equal(['x', 'y', 'z'])
  })
})

const BEAT_TICKS = 2
