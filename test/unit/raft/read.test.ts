/**
 * Linearizable reads without writing to the log: ReadIndex (Thesis §6.4) and the leader lease (Thesis §6.4.1).
 * ReadIndex is checked message by message; the lease is checked against the one thing that makes it safe: no other
 * server can be elected before it expires.
 */
import { expect } from 'chai'
import { validateRaftConfig } from '../../../src/raft/raft-core.js'
import { BASE_CONFIG, newNode, TestNetwork } from './support.js'

describe('raft: reads', function () {
  describe('ReadIndex (Thesis §6.4)', function () {
    it('a leader answers with its commit index once a heartbeat round is acknowledged by a majority', function () {
      const network = TestNetwork.of(['a', 'b', 'c'])
      network.elect('a')
      const leader = network.node('a')
      expect(leader.core.readIndex('r1').ok).to.equal(true)
      const heartbeats = leader.drain().filter((m) => m.type === 'heartbeat')
      expect(heartbeats.map((m) => m.to)).to.deep.equal(['b', 'c'])
      expect(leader.readStates).to.deep.equal([])
      network.inFlight.push(...heartbeats)
      network.settle()
      expect(leader.readStates).to.deep.equal([{ index: 1, context: 'r1' }])
    })

    it('waits until the leader has committed an entry of its own term (step 1)', function () {
      const network = TestNetwork.of(['a', 'b', 'c'])
      network.dropIf = (m) => m.type === 'appendEntries'
      network.elect('a')
      const leader = network.node('a')
      expect(leader.status).to.include({ role: 'leader', commitIndex: 0 })
      leader.core.readIndex('r1')
      network.tickAll(3)
      expect(leader.readStates).to.deep.equal([])
      network.dropIf = () => false
      network.tickAll(1)
      expect(leader.readStates).to.deep.equal([{ index: 1, context: 'r1' }])
    })

    it('a follower forwards the request to its leader and gets the read index back', function () {
      const network = TestNetwork.of(['a', 'b', 'c'])
      network.elect('a')
      network.propose('a', 'x')
      const follower = network.node('b')
      expect(follower.core.readIndex('r2').ok).to.equal(true)
      network.settle()
      expect(follower.readStates).to.deep.equal([{ index: 2, context: 'r2' }])
    })

    it('a follower that knows no leader refuses at once, so the caller need not wait', function () {
      const node = newNode('b', ['a', 'b', 'c'])
      const result = node.core.readIndex('r')
      expect(result).to.include({ ok: false, error: 'not_leader' })
    })

    it('a leader cut off from the majority cannot confirm a read', function () {
      const network = TestNetwork.of(['a', 'b', 'c'])
      network.elect('a')
      network.isolate('a')
      network.node('a').core.readIndex('r3')
      network.tickAll(5)
      expect(network.node('a').readStates).to.deep.equal([])
    })
  })

  describe('the leader lease (Thesis §6.4.1)', function () {
    const options = { checkQuorum: true, electionTimeoutTicks: 10, leaseTicks: 8 }

    it('holds for leaseTicks from the send tick of the last heartbeat a majority acknowledged', function () {
      const network = TestNetwork.of(['a', 'b', 'c'], options)
      network.elect('a')
      const leader = network.node('a')
      expect(leader.core.leaseRead()).to.equal(null)
      network.tickAll(1) // heartbeat sent at tick 1, acknowledged by both followers
      expect(leader.core.leaseValidUntilTick()).to.equal(9)
      expect(leader.core.leaseRead()).to.equal(1)
      network.isolate('a')
      leader.tick(7)
      expect(leader.core.isLeaseValid()).to.equal(true)
      leader.tick(1)
      expect(leader.status.tick).to.equal(9)
      expect(leader.core.isLeaseValid()).to.equal(false)
      expect(leader.core.leaseRead()).to.equal(null)
    })

    it('expires before any other server can be elected, even one campaigning at every tick', function () {
      const network = TestNetwork.of(['a', 'b', 'c'], options)
      network.elect('a')
      network.tickAll(1)
      network.isolate('a')
      const leader = network.node('a')
      const leaseExpiryTick = leader.core.leaseValidUntilTick()
      expect(leaseExpiryTick).to.equal(9)
      let electedAtTick = -1
      for (let tick = 2; tick <= 40 && electedAtTick === -1; tick += 1) {
        for (const node of network.nodes.values()) node.core.tick()
        network.node('b').core.campaign()
        network.settle()
        if (network.node('b').status.role === 'leader') electedAtTick = tick
      }
      // b and c ignore votes until an election timeout after the heartbeat of tick 1 reached them.
      expect(electedAtTick).to.equal(11)
      expect(electedAtTick).to.be.at.least(leaseExpiryTick)
    })

    it("runs on the driver's clock: a leader stopped past its lease wakes without one, though no tick has passed", function () {
      let now = 0
      const network = TestNetwork.of(['a', 'b', 'c'], { ...options, clock: () => now })
      network.elect('a')
      now = 1
      network.tickAll(1) // heartbeat sent at clock 1, acknowledged by both followers
      const leader = network.node('a')
      expect(leader.core.leaseValidUntilTick()).to.equal(9)
      expect(leader.core.leaseRead()).to.not.equal(null)
      const ticks = leader.status.tick
      // SIGSTOP for twenty ticks' time: the timer that ticks the core fires once when the process wakes, not twenty
      // times, but the clock has moved on. The other servers may have elected a leader by then.
      now = 21
      expect(leader.status.tick).to.equal(ticks)
      expect(leader.core.isLeaseValid()).to.equal(false)
      expect(leader.core.leaseRead()).to.equal(null)
    })

    it("answers a follower's read that accepts the lease at once, without a heartbeat round (issue 22)", function () {
      const network = TestNetwork.of(['a', 'b', 'c'], options)
      network.elect('a')
      network.propose('a', 'x')
      network.settle()
      network.tickAll(1)
      const leader = network.node('a')
      const follower = network.node('b')
      expect(leader.core.isLeaseValid()).to.equal(true)
      expect(follower.core.readIndex('lease-read', { lease: true }).ok).to.equal(true)
      const [request, ...others] = follower.drain()
      expect(others).to.deep.equal([])
      expect(request).to.include({ type: 'readIndex', to: 'a', lease: true })
      leader.core.step(request!)
      const answer = leader.drain()
      expect(answer.map((m) => m.type), 'no heartbeat round').to.deep.equal(['readIndexResponse'])
      expect(answer[0]).to.include({ to: 'b', index: leader.status.commitIndex, context: 'lease-read' })
      follower.core.step(answer[0]!)
      follower.drain()
      expect(follower.readStates).to.deep.equal([{ index: leader.status.commitIndex, context: 'lease-read' }])
    })

    it('confirms with a heartbeat round a read that does not accept the lease (?consistent), or when the lease lapsed', function () {
      const network = TestNetwork.of(['a', 'b', 'c'], options)
      network.elect('a')
      network.tickAll(1)
      const leader = network.node('a')
      const follower = network.node('b')
      expect(leader.core.isLeaseValid()).to.equal(true)
      follower.core.readIndex('consistent')
      const [consistent] = follower.drain()
      expect(consistent).to.not.have.property('lease')
      leader.core.step(consistent!)
      expect(leader.drain().map((m) => m.type)).to.have.members(['heartbeat', 'heartbeat'])
      // The lease lapses (the leader hears nothing for leaseTicks): a read that accepts it waits for a round too.
      network.isolate('a')
      leader.tick(8)
      expect(leader.core.isLeaseValid()).to.equal(false)
      leader.drain()
      leader.core.step({ type: 'readIndex', from: 'b', to: 'a', term: leader.status.term, context: 'late', lease: true })
      const sentAfter = leader.drain()
      expect(sentAfter.filter((m) => m.type === 'readIndexResponse')).to.deep.equal([])
      expect(sentAfter.some((m) => m.type === 'heartbeat')).to.equal(true)
    })

    it('is void once the leader sent TimeoutNow, whose election ignores leases (Thesis §3.10)', function () {
      const network = TestNetwork.of(['a', 'b', 'c'], options)
      network.elect('a')
      network.tickAll(1)
      const leader = network.node('a')
      expect(leader.core.leaseRead()).to.not.equal(null)
      leader.core.transferLeadership('b')
      expect(leader.core.leaseRead()).to.equal(null)
    })

    it('keeps a tick of margin below the election timeout, by default and when configured', function () {
      // A voter's window may close electionTimeoutTicks - 1 ticks after the heartbeat reached it.
      expect(validateRaftConfig({ ...BASE_CONFIG, id: 'a', voters: ['a'], electionTimeoutTicks: 10, leaseTicks: 9 })).to.have.length(1)
      expect(validateRaftConfig({ ...BASE_CONFIG, id: 'a', voters: ['a'], electionTimeoutTicks: 10, leaseTicks: 8 })).to.deep.equal([])
      for (const electionTimeoutTicks of [3, 4, 5, 10, 20]) {
        const network = TestNetwork.of(['a', 'b', 'c'], { checkQuorum: true, electionTimeoutTicks })
        network.elect('a')
        const sentAt = network.node('a').status.tick
        network.tickAll(1)
        expect(network.node('a').core.leaseValidUntilTick() - (sentAt + 1), `electionTimeoutTicks ${electionTimeoutTicks}`).to.be.at.most(electionTimeoutTicks - 2)
      }
    })

    it('needs CheckQuorum: without it no lease is held', function () {
      const network = TestNetwork.of(['a', 'b', 'c'], { ...options, checkQuorum: false })
      network.elect('a')
      network.tickAll(1)
      expect(network.node('a').core.leaseValidUntilTick()).to.equal(0)
    })

    it('is not used before the leader has committed an entry of its term (its commit index may lag)', function () {
      const network = TestNetwork.of(['a', 'b', 'c'], options)
      network.dropIf = (m) => m.type === 'appendEntries'
      network.elect('a')
      network.tickAll(1)
      const leader = network.node('a')
      expect(leader.core.isLeaseValid()).to.equal(true)
      expect(leader.core.leaseRead()).to.equal(null)
    })
  })
})
