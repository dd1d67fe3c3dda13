/**
 * Membership changes one server at a time (Thesis §4.1–§4.3): a new server joins as a learner and is promoted once
 * caught up; a configuration is in force from the moment it is in a log; one change at a time; removing a follower;
 * removing the leader, which steps down once the change commits; and removed servers not disrupting the cluster.
 */
import { expect } from 'chai'
import { encodeConfiguration, makeConfiguration } from '../../../src/raft/configuration.js'
import { MemoryStorage } from '../../../src/raft/storage/memory-storage.js'
import type { ConfChange } from '../../../src/raft/configuration.js'
import { entriesWithTerms, newNode, TestNetwork } from './support.js'

function change(network: TestNetwork, leader: string, confChange: ConfChange): void {
  const result = network.node(leader).core.proposeConfChange(confChange)
  if (!result.ok) throw new Error(`refused: ${result.error} (${result.message})`)
  network.settle()
}

/** A cluster a, b, c plus a server d that starts outside it (empty bootstrap configuration). */
function clusterWithJoiner(options = {}): TestNetwork {
  const ids = ['a', 'b', 'c']
  return new TestNetwork([...ids.map((id, i) => newNode(id, ids, options, undefined, i + 1)), newNode('d', [], options, undefined, 4)])
}

describe('raft: membership changes', function () {
  it('a new server joins as a learner: it receives the log but does not count towards commit (Thesis §4.2.1)', function () {
    const network = clusterWithJoiner()
    network.elect('a')
    change(network, 'a', { type: 'addLearner', nodeId: 'd' })
    const learner = network.node('d')
    expect(learner.status.configuration).to.deep.equal(makeConfiguration(['a', 'b', 'c'], ['d']))
    expect(learner.status.lastIndex).to.equal(network.node('a').status.lastIndex)
    network.isolate('b')
    network.isolate('c')
    network.node('a').core.propose([new Uint8Array([1])])
    network.settle()
    expect(network.node('a').status.commitIndex).to.equal(2)
    expect(network.node('d').status.lastIndex).to.equal(3)
  })

  it('a promoted learner is a voter that counts towards commit (Thesis §4.1)', function () {
    const network = clusterWithJoiner()
    network.elect('a')
    change(network, 'a', { type: 'addLearner', nodeId: 'd' })
    change(network, 'a', { type: 'addVoter', nodeId: 'd' })
    expect(network.node('a').status.configuration).to.deep.equal(makeConfiguration(['a', 'b', 'c', 'd']))
    network.isolate('c')
    network.propose('a', 'x')
    // a, b and d are three of four voters: a majority only because d counts.
    expect(network.node('a').status.commitIndex).to.equal(4)
  })

  it('a configuration is in force as soon as it is in a log, before it commits (Thesis §4.1)', function () {
    const network = clusterWithJoiner()
    network.elect('a')
    network.dropIf = (m) => m.type === 'appendEntriesResponse'
    change(network, 'a', { type: 'addLearner', nodeId: 'd' })
    for (const id of ['a', 'b', 'c']) {
      const status = network.node(id).status
      expect(status.configuration.learners, id).to.deep.equal(['d'])
      expect(status.commitIndex, id).to.be.below(status.configurationIndex)
    }
  })

  it('refuses a second change while the first is uncommitted (Thesis §4.1)', function () {
    const network = clusterWithJoiner()
    network.elect('a')
    network.isolate('a')
    expect(network.node('a').core.proposeConfChange({ type: 'addLearner', nodeId: 'd' }).ok).to.equal(true)
    const second = network.node('a').core.proposeConfChange({ type: 'removeServer', nodeId: 'c' })
    expect(second).to.include({ ok: false, error: 'configuration_change_pending' })
  })

  it('refuses a change until the leader has committed an entry of its own term (single-server change fix, 2015)', function () {
    const network = clusterWithJoiner()
    network.dropIf = (m) => m.type === 'appendEntries'
    network.elect('a')
    const result = network.node('a').core.proposeConfChange({ type: 'addLearner', nodeId: 'd' })
    expect(result).to.include({ ok: false, error: 'configuration_change_pending' })
  })

  it('refuses changes that make no sense: adding a voter twice, removing a stranger or the last voter', function () {
    const network = TestNetwork.of(['a'])
    network.elect('a')
    const core = network.node('a').core
    expect(core.proposeConfChange({ type: 'addVoter', nodeId: 'a' })).to.include({ error: 'invalid_request' })
    expect(core.proposeConfChange({ type: 'removeServer', nodeId: 'z' })).to.include({ error: 'invalid_request' })
    expect(core.proposeConfChange({ type: 'removeServer', nodeId: 'a' })).to.include({ error: 'invalid_request' })
  })

  it('after removing a follower, the leader stops replicating to it and commits with the smaller majority (Thesis §4.1)', function () {
    const network = TestNetwork.of(['a', 'b', 'c'])
    network.elect('a')
    change(network, 'a', { type: 'removeServer', nodeId: 'c' })
    expect(Object.keys(network.node('a').status.progress!)).to.deep.equal(['b'])
    const before = network.node('c').status.lastIndex
    network.propose('a', 'x')
    expect(network.node('a').status.commitIndex).to.equal(3)
    expect(network.node('c').status.lastIndex).to.equal(before)
  })

  it('a leader removing itself leads until the change commits, without counting itself, then steps down and hands over (Thesis §4.2.2)', function () {
    const network = TestNetwork.of(['a', 'b', 'c'])
    network.elect('a')
    network.cutLink('a', 'b')
    change(network, 'a', { type: 'removeServer', nodeId: 'a' })
    const leader = network.node('a')
    // Only c holds the change: one of the two voters of the new configuration, not a majority, so a keeps leading.
    expect(leader.status).to.include({ role: 'leader', commitIndex: 1 })
    network.heal()
    network.tickAll(1)
    expect(leader.status.role).to.equal('follower')
    expect(leader.status.commitIndex).to.equal(2)
    // It sent TimeoutNow to an up-to-date voter, which won the next term at once.
    expect(network.leaders()).to.have.length(1)
    expect(['b', 'c']).to.include(network.leaders()[0])
    expect(network.node(network.leaders()[0]!).status.term).to.equal(2)
  })

  it('a follower that loses a configuration entry to a conflict returns to the configuration before it (Thesis §4.1)', function () {
    const storage = new MemoryStorage()
    const [first] = entriesWithTerms([1])
    storage.append([first!, { index: 2, term: 1, type: 'configuration', data: encodeConfiguration(makeConfiguration(['a', 'b', 'c'], ['d'])) }])
    storage.setHardState({ term: 1, votedFor: null, commitIndex: 1 })
    const follower = newNode('b', ['a', 'b', 'c'], {}, storage)
    expect(follower.status.configuration.learners).to.deep.equal(['d'])
    follower.core.step({ type: 'appendEntries', from: 'c', to: 'b', term: 2, prevLogIndex: 1, prevLogTerm: 1, entries: entriesWithTerms([2], 2), leaderCommit: 1 })
    follower.drain()
    expect(follower.status.configuration).to.deep.equal(makeConfiguration(['a', 'b', 'c']))
  })

  it('recovers its configuration from the log after a restart (hashicorp/raft recovers it the same way)', function () {
    const network = clusterWithJoiner()
    network.elect('a')
    change(network, 'a', { type: 'addLearner', nodeId: 'd' })
    const follower = network.node('b')
    follower.restart()
    expect(follower.status.configuration).to.deep.equal(makeConfiguration(['a', 'b', 'c'], ['d']))
  })

  it('a removed server that never learned of its removal cannot disrupt a leader that is heard (Thesis §4.2.3)', function () {
    const network = TestNetwork.of(['a', 'b', 'c'], { checkQuorum: true })
    network.elect('a')
    network.cutLink('a', 'c')
    change(network, 'a', { type: 'removeServer', nodeId: 'c' })
    network.tickAll(60)
    expect(network.node('c').status.term).to.be.greaterThan(1)
    expect(network.leaders()).to.deep.equal(['a'])
    expect(network.node('a').status.term).to.equal(1)
  })
})
