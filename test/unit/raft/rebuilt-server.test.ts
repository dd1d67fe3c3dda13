/**
 * A server rebuilt with an empty data dir forgot its log and its votes, which Raft assumes are never lost (Figure 2,
 * "Persistent state on all servers"; Thesis §3.8). The core's part in rebuilding it safely, driven step by step:
 * - voteFromIndex: until its commit index reaches the index at which the leader re-added it, the server grants neither
 *   votes nor pre-votes and never campaigns, so its vote cannot be a second one in a term it forgot, nor elect a
 *   leader missing entries it had acknowledged and lost (§5.2, §5.4.1, Thesis §9.6);
 * - acknowledgements bounded by the leader's log: a follower acknowledges no more than the entries an AppendEntries
 *   showed it (§5.3), and a leader never counts a follower as holding more than its own log (Leader Append-Only,
 *   Figure 3), so that a broken Leader Completeness cannot make a leader look for entries it never had;
 * - answers marked `rebuilt` while it waits for the answer to its join: a leader that still counts it as a voter keeps
 *   replicating to it, but counts those answers towards no majority, since the server may have forgotten a term it
 *   voted in (a stale leader could otherwise commit with it what a newer leader, elected with its old vote, overwrites).
 */
import { expect } from 'chai'
import type { AppendEntries, RequestVote } from '../../../src/raft/messages.js'
import { VOTE_INDEX_UNKNOWN } from '../../../src/raft/storage/raft-storage.js'
import { bytes, entriesWithTerms, newNode, QueuedNetwork, sent, storageWithLog, TestNetwork, type CoreOptions, type TestNode } from './support.js'

function voteRequest(fields: Partial<RequestVote> & Pick<RequestVote, 'from' | 'to' | 'term'>): RequestVote {
  return { type: 'requestVote', preVote: false, lastLogIndex: 0, lastLogTerm: 0, transfer: false, ...fields }
}

function appendEntries(fields: Partial<AppendEntries> & Pick<AppendEntries, 'term'>): AppendEntries {
  return { type: 'appendEntries', from: 'a', to: 'c', prevLogIndex: 0, prevLogTerm: 0, entries: [], leaderCommit: 0, ...fields }
}

/** Asks `voter` for a vote and a pre-vote of a later term, from a candidate whose log is ahead of any; returns the answers. */
function askForVotes(voter: TestNode, term: number): { vote: boolean | undefined; preVote: boolean | undefined } {
  voter.core.step(voteRequest({ from: 'b', to: voter.id, term, preVote: true, lastLogIndex: 100, lastLogTerm: 100 }))
  const preVote = sent(voter.drain(), 'requestVoteResponse')[0]?.granted
  voter.core.step(voteRequest({ from: 'b', to: voter.id, term, lastLogIndex: 100, lastLogTerm: 100 }))
  const vote = sent(voter.drain(), 'requestVoteResponse')[0]?.granted
  return { vote, preVote }
}

/**
 * Five voters (a review finding): b leads term 1 and appends x, which only d receives; b pauses; a is elected in term
 * 2 by a, c and e; c loses its data; a commits its no-op, removes c and re-adds it as a learner with a, d and e; c
 * hears that its join was answered while its Raft term is still older than 2; b resumes and replicates x to c, and
 * d's acknowledgement of x, sent before d followed a, arrives. Returns a and b.
 */
function staleLeaderAndRejoinedVoter(options: CoreOptions): { a: TestNode; b: TestNode } {
  const ids = ['a', 'b', 'c', 'd', 'e']
  const net = QueuedNetwork.of(ids, options)
  const node = (id: string): TestNode => net.node(id)
  // 1. b leads term 1; everyone holds b's noop (index 1), committed.
  node('b').core.campaign()
  net.stabilize(ids)
  node('b').tick(1)
  net.stabilize(ids)
  expect(node('b').status).to.include({ role: 'leader', term: 1, commitIndex: 1 })
  // 2. b appends x at index 2; only d gets it. d's acknowledgement is held in the network.
  node('b').core.propose([bytes('x')])
  net.collect('b')
  net.deliver((m) => m.from === 'b' && m.to === 'd')
  net.take((m) => m.from === 'b')
  const dAck = net.collect('d').filter((m) => m.to === 'b')
  net.take((m) => m.from === 'd')
  expect(dAck.map((m) => m.type)).to.include('appendEntriesResponse')
  // 3. b is paused (no ticks, nothing sent). a, c and e stop hearing from it; a campaigns in term 2 (pre-vote first
  // when on); c and e vote for it (b and d hear nothing).
  if (options.checkQuorum === true) for (let i = 0; i < 12; i += 1) for (const id of ['a', 'c', 'e']) node(id).tick(1)
  net.take(() => true)
  node('a').core.campaign()
  for (let round = 0; round < (options.preVote === true ? 2 : 1); round += 1) {
    net.collect('a')
    net.take((m) => m.to === 'b' || m.to === 'd')
    net.deliver((m) => m.from === 'a')
    net.collect('c')
    net.collect('e')
    net.deliver((m) => m.to === 'a')
  }
  expect(node('a').status).to.include({ role: 'leader', term: 2 })
  // 4. c loses its data and waits for its join's answer.
  net.nodes.set('c', newNode('c', ids, { ...options, voteFromIndex: VOTE_INDEX_UNKNOWN }, undefined, 103))
  net.take((m) => m.to === 'c' || m.from === 'c')
  // 5. a commits its noop, removes c and re-adds it as a learner, with a, d and e (b still leads term 1, cut off).
  net.stabilize(['a', 'd', 'e'])
  expect(node('a').status.commitIndex).to.equal(2)
  expect(node('a').core.proposeConfChange({ type: 'removeServer', nodeId: 'c' }).ok).to.equal(true)
  net.stabilize(['a', 'd', 'e'])
  const readd = node('a').core.proposeConfChange({ type: 'addLearner', nodeId: 'c' })
  expect(readd.ok).to.equal(true)
  net.stabilize(['a', 'd', 'e'])
  net.take((m) => m.to === 'c' || m.to === 'b')
  const R = (readd as { index: number }).index
  expect(node('a').status.commitIndex).to.be.at.least(R)
  // 6. The join is answered (over the peer links, not Raft): c may vote from R. Its Raft term is still 0.
  node('c').core.setVoteFromIndex(R)
  // 7. b, still leader of term 1, replicates x to c.
  expect(node('b').status).to.include({ role: 'leader', term: 1 })
  node('b').tick(1)
  net.stabilize(['b', 'c'])
  // 8. d's acknowledgement of x, sent before d followed a, arrives.
  for (const m of dAck) node('b').core.step(m)
  net.collect('b')
  return { a: node('a'), b: node('b') }
}

describe('raft: a rebuilt server (empty data dir)', function () {
  describe('voteFromIndex: no vote and no campaign before the commit index reaches it', function () {
    it('grants neither a vote nor a pre-vote while its commit index is below voteFromIndex (§5.2, §5.4.1, Thesis §9.6)', function () {
      const voter = newNode('c', ['a', 'b', 'c'], { preVote: true, voteFromIndex: 3 })
      expect(voter.core.mayVote()).to.equal(false)
      // The candidate's log is ahead of the empty one: only voteFromIndex stands between it and both grants.
      expect(askForVotes(voter, 1)).to.deep.equal({ vote: false, preVote: false })
      expect(voter.status.votedFor).to.equal(null)
    })

    it('does not campaign on an election timeout, nor when asked to, nor on TimeoutNow, while below voteFromIndex (§5.2, Thesis §3.10)', function () {
      for (const preVote of [false, true]) {
        const node = newNode('c', ['a', 'b', 'c'], { preVote, voteFromIndex: 3 })
        node.tick(100)
        node.core.campaign()
        node.core.step({ type: 'timeoutNow', from: 'a', to: 'c', term: 0 })
        expect(node.status, `preVote ${preVote}`).to.include({ role: 'follower', term: 0, votedFor: null })
        expect(sent(node.drain(), 'requestVote'), `preVote ${preVote}`).to.deep.equal([])
      }
    })

    it('votes, pre-votes and campaigns once the leader’s entries bring its commit index to voteFromIndex (§5.2)', function () {
      const voter = newNode('c', ['a', 'b', 'c'], { preVote: true, voteFromIndex: 3 })
      voter.core.step(appendEntries({ term: 1, entries: entriesWithTerms([1, 1, 1]), leaderCommit: 2 }))
      voter.drain()
      expect(voter.status.commitIndex).to.equal(2)
      expect(voter.core.mayVote()).to.equal(false)
      expect(askForVotes(voter, 2)).to.deep.equal({ vote: false, preVote: false })
      voter.core.step(appendEntries({ term: 2, prevLogIndex: 3, prevLogTerm: 1, leaderCommit: 3 }))
      voter.drain()
      expect(voter.status.commitIndex).to.equal(3)
      expect(voter.core.mayVote()).to.equal(true)
      expect(askForVotes(voter, 3)).to.deep.equal({ vote: true, preVote: true })
      // And it campaigns on its own timeout: a pre-election first, for the term after the one it voted in.
      voter.tick(20)
      expect(voter.status.role).to.equal('preCandidate')
      const requests = sent(voter.drain(), 'requestVote')
      expect(requests.map((m) => [m.to, m.term, m.preVote])).to.deep.equal([
        ['a', 4, true],
        ['b', 4, true],
      ])
    })

    it('setVoteFromIndex moves the bar at once: the unknown index stops voting, an index at or below the commit index allows it', function () {
      const node = newNode('c', ['a', 'b', 'c'], {}, storageWithLog([1, 1], { term: 1, commitIndex: 2 }))
      expect(node.core.mayVote()).to.equal(true)
      // A server whose discovery has not been answered yet knows no index: it waits.
      node.core.setVoteFromIndex(VOTE_INDEX_UNKNOWN)
      expect(askForVotes(node, 2)).to.deep.equal({ vote: false, preVote: false })
      node.tick(100)
      expect(node.status.role).to.equal('follower')
      // The leader answered the rejoin with an index this server has already committed.
      node.core.setVoteFromIndex(2)
      expect(askForVotes(node, 3)).to.deep.equal({ vote: true, preVote: true })
      node.tick(20)
      expect(node.status).to.include({ role: 'candidate', term: 4, votedFor: 'c' })
    })

    it('a restart with voteFromIndex at or below the durable commit index votes at once', function () {
      const node = newNode('c', ['a', 'b', 'c'], { voteFromIndex: 2 }, storageWithLog([1, 1], { term: 1, commitIndex: 2 }))
      expect(node.core.mayVote()).to.equal(true)
      expect(askForVotes(node, 2)).to.deep.equal({ vote: true, preVote: true })
    })
  })

  it('a follower whose commit index is beyond a probe’s prevLogIndex acknowledges no more than prevLogIndex + entries.length (§5.3)', function () {
    const follower = newNode('c', ['a', 'b', 'c'], {}, storageWithLog([1, 1, 1, 1, 1], { term: 1, commitIndex: 5 }))
    follower.core.step(appendEntries({ term: 2, prevLogIndex: 1, prevLogTerm: 1 }))
    follower.core.step(appendEntries({ term: 2, prevLogIndex: 1, prevLogTerm: 1, entries: entriesWithTerms([1, 1], 2) }))
    // Past its commit index the entries are not taken (the leader sends them again from there): its commit index at most.
    follower.core.step(appendEntries({ term: 2, prevLogIndex: 4, prevLogTerm: 1, entries: entriesWithTerms([1, 1], 5) }))
    const answers = sent(follower.drain(), 'appendEntriesResponse')
    expect(answers.map((m) => [m.success, m.index])).to.deep.equal([
      [true, 1],
      [true, 3],
      [true, 5],
    ])
    expect(follower.status.commitIndex).to.equal(5)
  })

  describe('a leader never counts a follower as holding more than its own log (Figure 3, Leader Append-Only)', function () {
    it('clamps an acknowledgement beyond its last index to that index, and goes on replicating to that follower', function () {
      const network = TestNetwork.of(['a', 'b', 'c'])
      network.elect('a')
      const leader = network.node('a')
      expect(leader.status.lastIndex).to.equal(1)
      leader.core.step({ type: 'appendEntriesResponse', from: 'b', to: 'a', term: 1, success: true, index: 10, conflictIndex: 0, conflictTerm: 0 })
      // Looking for entry 10 it never had would have asked for a snapshot that does not exist.
      expect(() => network.settle()).to.not.throw()
      expect(leader.status.progress!['b']!.matchIndex).to.equal(1)
      expect(leader.status.progress!['b']!.nextIndex).to.equal(2)
      expect(leader.status.commitIndex).to.equal(1)
      network.propose('a', 'x')
      expect(leader.status.progress!['b']!.matchIndex).to.equal(2)
      expect(leader.status.commitIndex).to.equal(2)
      expect(network.node('b').appliedCommands()).to.deep.equal(['x'])
    })

    it('a leader elected by two voters rebuilt without being re-added does not crash on the third, whose commit index is past its log', function () {
      // The unsafe rebuild this guards against: a and b lost their data and vote at once (voteFromIndex 0); c
      // committed 5 entries. Leader Completeness is broken; the leader must still not look for entries it never had.
      const ids = ['a', 'b', 'c']
      const network = new TestNetwork([
        newNode('a', ids, {}, undefined, 1),
        newNode('b', ids, {}, undefined, 2),
        newNode('c', ids, {}, storageWithLog([1, 1, 1, 1, 1], { term: 1, commitIndex: 5 }), 3),
      ])
      expect(() => network.elect('a')).to.not.throw()
      const leader = network.node('a')
      expect(leader.status).to.include({ role: 'leader', term: 1, lastIndex: 1 })
      expect(leader.status.progress!['c']!.matchIndex).to.be.at.most(leader.status.lastIndex)
      expect(() => network.tickAll(3)).to.not.throw()
    })
  })

  describe('a server awaiting the answer to its join: its answers count towards no majority', function () {
    const ids = ['a', 'b', 'c']
    const options: CoreOptions = { checkQuorum: true, electionTimeoutTicks: 10, leaseTicks: 8 }

    /** a leads with b cut off, and c lost its data and waits for the answer to its join: a still counts c as a voter. */
    function leaderWithRebuiltVoter(): { network: TestNetwork; leader: TestNode; rebuilt: TestNode } {
      const network = TestNetwork.of(ids, options)
      network.elect('a')
      network.tickAll(1)
      network.isolate('b')
      const rebuilt = newNode('c', ids, { ...options, voteFromIndex: VOTE_INDEX_UNKNOWN }, undefined, 103)
      network.nodes.set('c', rebuilt)
      return { network, leader: network.node('a'), rebuilt }
    }

    it('says so in its answers to AppendEntries and heartbeats until its commit index reaches the index of its re-add', function () {
      const node = newNode('c', ids, { voteFromIndex: VOTE_INDEX_UNKNOWN })
      node.core.step(appendEntries({ term: 1, entries: entriesWithTerms([1, 1]) }))
      node.core.step({ type: 'heartbeat', from: 'a', to: 'c', term: 1, leaderCommit: 1, seq: 1, tick: 1 })
      const before = node.drain()
      expect(sent(before, 'appendEntriesResponse').map((m) => m.rebuilt)).to.deep.equal([true])
      expect(sent(before, 'heartbeatResponse').map((m) => m.rebuilt)).to.deep.equal([true])
      // Its join is answered (re-added at 2), but its commit index is 1: it may still hold an older term than that.
      node.core.setVoteFromIndex(2)
      node.core.step({ type: 'heartbeat', from: 'a', to: 'c', term: 1, leaderCommit: 1, seq: 2, tick: 2 })
      expect(sent(node.drain(), 'heartbeatResponse').map((m) => m.rebuilt)).to.deep.equal([true])
      node.core.step({ type: 'heartbeat', from: 'a', to: 'c', term: 1, leaderCommit: 2, seq: 3, tick: 3 })
      expect(sent(node.drain(), 'heartbeatResponse').map((m) => m.rebuilt)).to.deep.equal([undefined])
    })

    it('a leader replicates to it but does not commit with its acknowledgements; they count once it stops saying so', function () {
      const { network, leader, rebuilt } = leaderWithRebuiltVoter()
      network.propose('a', 'x')
      // Its heartbeat answer shows the leader that c lost what it had acknowledged: the leader probes it from there.
      network.tickAll(1)
      // c holds x durably and the leader knows it, but a and c are a majority only if c's answer vouches for c.
      expect(rebuilt.status.lastIndex).to.equal(2)
      expect(leader.status.progress!['c']!.matchIndex).to.equal(2)
      expect(leader.status.commitIndex).to.equal(1)
      // Told it was re-added at 2, which it holds but cannot know committed: still rebuilt.
      rebuilt.core.setVoteFromIndex(2)
      network.tickAll(2)
      expect(leader.status.commitIndex).to.equal(1)
      // At an index its commit index has reached, it vouches again.
      rebuilt.core.setVoteFromIndex(1)
      network.tickAll(1)
      expect(leader.status.commitIndex).to.equal(2)
      expect(rebuilt.appliedCommands()).to.deep.equal(['x'])
    })

    it('a leader confirms neither a ReadIndex nor its lease with its heartbeat answers, which still keep it leading (CheckQuorum)', function () {
      const { network, leader } = leaderWithRebuiltVoter()
      leader.core.readIndex('r1')
      network.tickAll(1)
      expect(leader.readStates).to.deep.equal([])
      network.tickAll(8)
      expect(leader.core.isLeaseValid()).to.equal(false)
      expect(leader.core.leaseRead()).to.equal(null)
      // A leader that stays can remove and re-add the rebuilt voter, a removal that commits without it.
      network.tickAll(12)
      expect(leader.status.role).to.equal('leader')
      expect(leader.readStates).to.deep.equal([])
    })

    it('a late answer from before the wipe does not make the rebuilt acknowledgements count (review finding)', function () {
      // Found by review: the leader once kept one flag per follower, set by whichever answer came last, so a delayed
      // heartbeat answer from c's previous incarnation made c's rebuilt acknowledgement of x count, and b committed x.
      const net = QueuedNetwork.of(ids)
      const node = (id: string): TestNode => net.node(id)
      const deliverTo = (id: string): number => net.deliver((m) => m.to === id)
      node('b').core.campaign()
      net.stabilize(ids)
      // b heartbeats; c's answer (term 1, from before its wipe) is held back in the network.
      node('b').tick(1)
      net.collect('b')
      deliverTo('a')
      deliverTo('c')
      net.collect('a')
      net.collect('c')
      const held = net.take((m) => m.from === 'c' && m.to === 'b')
      expect(held.map((m) => m.type)).to.include('heartbeatResponse')
      deliverTo('b')
      // a campaigns for term 2, c votes for it (b hears nothing of it), then c loses its data.
      node('a').core.campaign()
      net.collect('a')
      net.take((m) => m.to === 'b')
      deliverTo('c')
      net.collect('c')
      net.nodes.set('c', newNode('c', ids, { voteFromIndex: VOTE_INDEX_UNKNOWN }, undefined, 103))
      net.take((m) => m.to === 'c')
      // b appends x; the rebuilt c acknowledges it, which does not count.
      node('b').core.propose([bytes('x')])
      node('b').tick(1)
      net.stabilize(['b', 'c'])
      expect(node('c').status.lastIndex).to.equal(2)
      expect(node('b').status.commitIndex).to.equal(1)
      // The held answer arrives: it vouches for what c held then, not for what the rebuilt c acknowledged since.
      for (const message of held) node('b').core.step(message)
      net.collect('b')
      expect(node('b').status.commitIndex).to.equal(1)
      expect(node('b').appliedCommands()).to.deep.equal([])
      // a, elected with the vote c gave before its wipe, replaces x; b follows it.
      deliverTo('a')
      net.collect('a')
      net.stabilize(ids)
      expect(node('a').status).to.include({ role: 'leader', term: 2 })
      expect(node('b').appliedCommands()).to.deep.equal([])
      expect(node('b').storage.term(2)).to.equal(2)
    })

    for (const options of [{}, { checkQuorum: true, preVote: true }] as CoreOptions[]) {
      it(`with five voters, a stale leader cannot commit through a rejoined server whose term is still older (${JSON.stringify(options)})`, function () {
        const { a, b } = staleLeaderAndRejoinedVoter(options)
        // a committed its term-2 no-op at index 2; b must not commit x (term 1) there with b, c and d.
        expect(a.status.commitIndex).to.be.at.least(2)
        expect(a.storage.term(2)).to.equal(2)
        expect(b.status.commitIndex).to.equal(1)
        expect(b.appliedCommands()).to.deep.equal([])
      })
    }
  })
})
