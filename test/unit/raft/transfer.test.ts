/**
 * Leadership transfer (Thesis §3.10): the leader brings the target's log up to date, sends TimeoutNow, and the target
 * wins the next term at once; proposals wait meanwhile, and a transfer that does not finish is abandoned.
 */
import { expect } from 'chai'
import { bytes, sent, TestNetwork } from './support.js'

describe('raft: leadership transfer (Thesis §3.10)', function () {
  it('brings the target up to date, sends it TimeoutNow, and the target wins the next term', function () {
    const network = TestNetwork.of(['a', 'b', 'c'])
    network.elect('a')
    network.cutLink('a', 'c')
    network.propose('a', 'x', 'y')
    network.heal()
    expect(network.node('a').core.transferLeadership('c').ok).to.equal(true)
    network.settle()
    expect(network.leaders()).to.deep.equal(['c'])
    expect(network.node('c').status.term).to.equal(2)
    const timeoutNow = network.delivered.filter((m) => m.type === 'timeoutNow')
    expect(timeoutNow.map((m) => [m.from, m.to])).to.deep.equal([['a', 'c']])
    // The target was sent the missing entries before TimeoutNow.
    const lastAppendToC = network.delivered.findLastIndex((m) => m.type === 'appendEntries' && m.to === 'c')
    expect(lastAppendToC).to.be.below(network.delivered.indexOf(timeoutNow[0]!))
  })

  it('the target’s election ignores the leader lease that voters otherwise respect (Thesis §3.10, §4.2.3)', function () {
    const network = TestNetwork.of(['a', 'b', 'c'], { checkQuorum: true, preVote: true })
    network.elect('a')
    network.tickAll(1)
    network.node('a').core.transferLeadership('b')
    network.settle()
    expect(network.leaders()).to.deep.equal(['b'])
    const requests = network.delivered.filter((m) => m.type === 'requestVote' && m.from === 'b')
    expect(requests.every((m) => m.type === 'requestVote' && m.transfer && !m.preVote)).to.equal(true)
  })

  it('refuses proposals while the transfer is under way', function () {
    const network = TestNetwork.of(['a', 'b', 'c'])
    network.elect('a')
    network.isolate('c')
    network.node('a').core.transferLeadership('c')
    expect(network.node('a').core.propose([bytes('x')])).to.include({ ok: false, error: 'transfer_in_progress' })
  })

  it('abandons a transfer that did not finish within an election timeout, and takes proposals again', function () {
    const network = TestNetwork.of(['a', 'b', 'c'])
    network.elect('a')
    network.isolate('c')
    const leader = network.node('a')
    leader.core.transferLeadership('c')
    leader.tick(9)
    expect(leader.status.leadTransferee).to.equal('c')
    leader.tick(1)
    expect(leader.status.leadTransferee).to.equal(null)
    expect(leader.core.propose([bytes('x')]).ok).to.equal(true)
  })

  it('refuses to transfer to a learner or a stranger', function () {
    const network = TestNetwork.of(['a', 'b'], { learners: ['c'] })
    network.elect('a')
    expect(network.node('a').core.transferLeadership('c')).to.include({ ok: false, error: 'invalid_request' })
    expect(network.node('a').core.transferLeadership('z')).to.include({ ok: false, error: 'invalid_request' })
    expect(sent(network.node('a').drain(), 'timeoutNow')).to.deep.equal([])
  })
})
