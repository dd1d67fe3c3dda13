/**
 * Leader election, driven step by step: the rules of §5.2 and §5.4.1 of the Raft paper, durability of votes
 * (Thesis §3.8), PreVote (Thesis §9.6), the "ignore votes while a leader is heard" rule (Thesis §4.2.3) and CheckQuorum
 * (Thesis §6.2). Each test builds the smallest cluster that shows its rule, delivers messages by hand or through
 * TestNetwork, and checks roles, terms and the messages sent, the way etcd-io/raft `raft_paper_test.go` does.
 */
import { expect } from 'chai'
import type { RequestVote } from '../../../src/raft/messages.js'
import { newNode, sent, storageWithLog, TestNetwork } from './support.js'

function voteRequest(fields: Partial<RequestVote> & Pick<RequestVote, 'from' | 'to' | 'term'>): RequestVote {
  return { type: 'requestVote', preVote: false, lastLogIndex: 0, lastLogTerm: 0, transfer: false, ...fields }
}

describe('raft: leader election', function () {
  it('a follower that hears from no leader within its election timeout becomes a candidate, increments its term and votes for itself (§5.2)', function () {
    const node = newNode('a', ['a', 'b', 'c'])
    node.tick(9)
    expect(node.status.role).to.equal('follower')
    node.tick(11)
    const status = node.status
    expect(status.role).to.equal('candidate')
    expect(status.term).to.equal(1)
    expect(status.votedFor).to.equal('a')
    const requests = sent(node.drain(), 'requestVote')
    expect(requests.map((m) => m.to)).to.deep.equal(['b', 'c'])
    expect(requests.every((m) => m.term === 1 && !m.preVote)).to.equal(true)
  })

  it('draws each election timeout at random in [electionTimeoutTicks, 2 * electionTimeoutTicks) (§5.2)', function () {
    const seen = new Set<number>()
    for (let seed = 1; seed <= 200; seed += 1) {
      const node = newNode('a', ['a', 'b', 'c'], {}, undefined, seed)
      let ticks = 0
      while (node.status.role === 'follower') {
        node.tick()
        ticks += 1
      }
      expect(ticks).to.be.within(10, 19)
      seen.add(ticks)
    }
    expect(seen.size).to.be.greaterThan(5)
  })

  it('a candidate that wins votes from a majority becomes leader and appends a no-op entry of its term (§5.2, §5.4.2)', function () {
    const network = TestNetwork.of(['a', 'b', 'c'])
    network.elect('a')
    expect(network.leaders()).to.deep.equal(['a'])
    const leader = network.node('a')
    expect(leader.status.term).to.equal(1)
    const noop = leader.storage.entries(1, 2)[0]!
    expect(noop.type).to.equal('noop')
    expect(noop.term).to.equal(1)
    expect(leader.status.commitIndex).to.equal(1)
    for (const id of ['b', 'c']) expect(network.node(id).status.leader).to.equal('a')
  })

  it('grants at most one vote per term, first come first served (§5.2)', function () {
    const voter = newNode('c', ['a', 'b', 'c'])
    voter.core.step(voteRequest({ from: 'a', to: 'c', term: 1 }))
    voter.core.step(voteRequest({ from: 'b', to: 'c', term: 1 }))
    voter.core.step(voteRequest({ from: 'a', to: 'c', term: 1 }))
    const answers = sent(voter.drain(), 'requestVoteResponse')
    expect(answers.map((m) => [m.to, m.granted])).to.deep.equal([
      ['a', true],
      ['b', false],
      ['a', true],
    ])
    expect(voter.status.votedFor).to.equal('a')
  })

  it('rejects a vote for a candidate whose last log term is lower than its own (§5.4.1)', function () {
    const voter = newNode('c', ['a', 'b', 'c'], {}, storageWithLog([1, 2]))
    voter.core.step(voteRequest({ from: 'a', to: 'c', term: 3, lastLogIndex: 5, lastLogTerm: 1 }))
    const [answer] = sent(voter.drain(), 'requestVoteResponse')
    expect(answer?.granted).to.equal(false)
    expect(voter.status.term).to.equal(3)
    expect(voter.status.votedFor).to.equal(null)
  })

  it('rejects a vote for a candidate whose log has the same last term but is shorter (§5.4.1)', function () {
    const voter = newNode('c', ['a', 'b', 'c'], {}, storageWithLog([1, 2, 2]))
    voter.core.step(voteRequest({ from: 'a', to: 'c', term: 3, lastLogIndex: 2, lastLogTerm: 2 }))
    expect(sent(voter.drain(), 'requestVoteResponse')[0]?.granted).to.equal(false)
    voter.core.step(voteRequest({ from: 'b', to: 'c', term: 3, lastLogIndex: 3, lastLogTerm: 2 }))
    expect(sent(voter.drain(), 'requestVoteResponse')[0]?.granted).to.equal(true)
  })

  it('persists its term and vote before the answer leaves: they share one synced Ready (Thesis §3.8)', function () {
    const voter = newNode('c', ['a', 'b', 'c'], {}, storageWithLog([1], { term: 1 }))
    voter.core.step(voteRequest({ from: 'a', to: 'c', term: 1, lastLogIndex: 1, lastLogTerm: 1 }))
    const ready = voter.core.ready()!
    expect(ready.hardState).to.include({ term: 1, votedFor: 'a' })
    expect(ready.mustSync).to.equal(true)
    expect(sent(ready.messages, 'requestVoteResponse')[0]?.granted).to.equal(true)
  })

  it('remembers its vote across a restart and does not vote twice in one term (Thesis §3.8)', function () {
    const voter = newNode('c', ['a', 'b', 'c'])
    voter.core.step(voteRequest({ from: 'a', to: 'c', term: 1 }))
    voter.drain()
    voter.restart()
    voter.core.step(voteRequest({ from: 'b', to: 'c', term: 1 }))
    expect(sent(voter.drain(), 'requestVoteResponse')[0]?.granted).to.equal(false)
    expect(voter.status.votedFor).to.equal('a')
  })

  it('a candidate returns to follower when it hears from a leader of its term (§5.2)', function () {
    const candidate = newNode('a', ['a', 'b', 'c'])
    candidate.core.campaign()
    candidate.drain()
    candidate.core.step({ type: 'heartbeat', from: 'b', to: 'a', term: 1, leaderCommit: 0, seq: 1, tick: 0 })
    expect(candidate.status).to.include({ role: 'follower', leader: 'b', term: 1 })
  })

  it('any server seeing a higher term adopts it and becomes a follower (§5.1)', function () {
    const network = TestNetwork.of(['a', 'b', 'c'])
    network.elect('a')
    const leader = network.node('a')
    leader.core.step({ type: 'appendEntriesResponse', from: 'b', to: 'a', term: 7, success: false, index: 0, conflictIndex: 0, conflictTerm: 0 })
    expect(leader.status).to.include({ role: 'follower', term: 7, votedFor: null })
  })

  it('answers a RequestVote of an older term with its own term, so the candidate catches up (§5.1, Figure 2)', function () {
    const voter = newNode('c', ['a', 'b', 'c'], {}, storageWithLog([], { term: 5 }))
    voter.core.step(voteRequest({ from: 'a', to: 'c', term: 3 }))
    const [answer] = sent(voter.drain(), 'requestVoteResponse')
    expect(answer).to.include({ granted: false, term: 5 })
  })

  it('a single-voter cluster elects itself and commits on its own durable write', function () {
    const node = newNode('a', ['a'])
    node.tick(20)
    expect(node.status.role).to.equal('leader')
    node.drain()
    expect(node.status.commitIndex).to.equal(1)
  })

  it('a learner never campaigns (Thesis §4.2.1)', function () {
    const learner = newNode('d', ['a', 'b', 'c'], { learners: ['d'] })
    learner.tick(100)
    expect(learner.status.role).to.equal('follower')
    expect(learner.drain()).to.deep.equal([])
  })

  describe('PreVote (Thesis §9.6)', function () {
    it('a pre-candidate keeps its term and records no vote until it wins the pre-election', function () {
      const node = newNode('a', ['a', 'b', 'c'], { preVote: true })
      node.tick(20)
      expect(node.status).to.include({ role: 'preCandidate', term: 0, votedFor: null })
      const requests = sent(node.drain(), 'requestVote')
      expect(requests.every((m) => m.preVote && m.term === 1)).to.equal(true)
      node.core.step({ type: 'requestVoteResponse', from: 'b', to: 'a', term: 1, preVote: true, granted: true })
      expect(node.status).to.include({ role: 'candidate', term: 1, votedFor: 'a' })
    })

    it('a server that rejoins after a partition does not disrupt a healthy leader', function () {
      const network = TestNetwork.of(['a', 'b', 'c'], { preVote: true, checkQuorum: true })
      network.elect('a')
      network.isolate('c')
      network.tickAll(100)
      expect(network.node('c').status.term).to.equal(1)
      network.heal()
      network.tickAll(30)
      expect(network.leaders()).to.deep.equal(['a'])
      expect(network.node('a').status.term).to.equal(1)
    })

    it('without PreVote, the same rejoining server forces a new election (the problem PreVote solves)', function () {
      const network = TestNetwork.of(['a', 'b', 'c'])
      network.elect('a')
      network.isolate('c')
      network.tickAll(100)
      expect(network.node('c').status.term).to.be.greaterThan(1)
      network.heal()
      network.tickAll(30)
      expect(network.node('a').status.term).to.be.greaterThan(1)
    })
  })

  describe('the leader is heard: votes are ignored (Thesis §4.2.3)', function () {
    it('ignores a RequestVote of a higher term within an election timeout of hearing from its leader', function () {
      const network = TestNetwork.of(['a', 'b', 'c'], { checkQuorum: true })
      network.elect('a')
      const voter = network.node('c')
      voter.core.step(voteRequest({ from: 'b', to: 'c', term: 2, lastLogIndex: 10, lastLogTerm: 1 }))
      expect(voter.drain()).to.deep.equal([])
      expect(voter.status).to.include({ term: 1, leader: 'a' })
    })

    it('votes again once an election timeout passed without the leader', function () {
      const network = TestNetwork.of(['a', 'b', 'c'], { checkQuorum: true })
      network.elect('a')
      const voter = network.node('c')
      voter.tick(10)
      voter.core.step(voteRequest({ from: 'b', to: 'c', term: 2, lastLogIndex: 10, lastLogTerm: 1 }))
      expect(sent(voter.drain(), 'requestVoteResponse')[0]).to.include({ granted: true, term: 2 })
    })

    it('a restarted server waits an election timeout before voting, since it may have acknowledged a lease', function () {
      // c is a learner here so that it does not campaign itself while the ticks pass.
      const voter = newNode('c', ['a', 'b'], { checkQuorum: true, learners: ['c'] }, storageWithLog([1], { term: 1 }))
      voter.core.step(voteRequest({ from: 'b', to: 'c', term: 2, lastLogIndex: 1, lastLogTerm: 1 }))
      expect(voter.drain()).to.deep.equal([])
      voter.tick(10)
      voter.core.step(voteRequest({ from: 'b', to: 'c', term: 2, lastLogIndex: 1, lastLogTerm: 1 }))
      expect(sent(voter.drain(), 'requestVoteResponse')[0]?.granted).to.equal(true)
    })

    it('a server that never saw a term has acknowledged no lease and votes at once', function () {
      const voter = newNode('c', ['a', 'b', 'c'], { checkQuorum: true })
      voter.core.step(voteRequest({ from: 'b', to: 'c', term: 1 }))
      expect(sent(voter.drain(), 'requestVoteResponse')[0]?.granted).to.equal(true)
    })
  })

  describe('CheckQuorum (Thesis §6.2)', function () {
    it('a leader that hears from no majority steps down after exactly one election timeout', function () {
      const network = TestNetwork.of(['a', 'b', 'c'], { checkQuorum: true })
      network.elect('a')
      network.isolate('a')
      const leader = network.node('a')
      leader.tick(9)
      expect(leader.status.role).to.equal('leader')
      leader.tick(1)
      expect(leader.status).to.include({ role: 'follower', leader: null, term: 1 })
    })

    it('a leader that keeps hearing from a majority stays leader', function () {
      const network = TestNetwork.of(['a', 'b', 'c'], { checkQuorum: true })
      network.elect('a')
      network.isolate('c')
      network.tickAll(100)
      expect(network.leaders()).to.include('a')
      expect(network.node('a').status.term).to.equal(1)
    })
  })
})
