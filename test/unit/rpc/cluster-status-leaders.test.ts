/**
 * The cluster view's index across leaders, and what a waiter that hangs up costs (a review's findings on issue 21, each
 * failing before its fix): an index the old leader issued must not make the new one hold a watcher, and a client that
 * hangs up must not cost a round of peer requests.
 */
import { expect } from 'chai'
import type { Timer } from '../../../src/lib/environment.js'
import type { RaftReplica } from '../../../src/replica/raft-replica.js'
import { ClusterStatusService, type ClusterAnswer, type OwnRaftState } from '../../../src/rpc/cluster-status.js'

class ManualClock {
  nowMs = 0
  private timers: Array<{ at: number; callback: () => void; cancelled: boolean }> = []

  setTimeout(callback: () => void, delayMs: number): Timer {
    const timer = { at: this.nowMs + delayMs, callback, cancelled: false }
    this.timers.push(timer)
    return { cancel: () => (timer.cancelled = true) }
  }

  /** Moves time forward, firing each timer due on the way in order, and letting the promises it settles run. */
  async advance(ms: number): Promise<void> {
    const target = this.nowMs + ms
    for (;;) {
      await settle()
      const due = this.timers.filter((timer) => !timer.cancelled && timer.at <= target).sort((a, b) => a.at - b.at)[0]
      if (due === undefined) break
      this.timers = this.timers.filter((timer) => timer !== due)
      this.nowMs = Math.max(this.nowMs, due.at)
      due.callback()
    }
    this.nowMs = target
    await settle()
  }
}

async function settle(): Promise<void> {
  for (let turn = 0; turn < 10; turn++) await new Promise((resolve) => setImmediate(resolve))
}

interface Peer {
  own: OwnRaftState
  alive: boolean
  lastContactMs: number
}

/** A replica of three servers whose every observable the test sets; `n1` is this node. */
function standIn(clock: ManualClock, leading: boolean, name = 'n1', applied = 10, term = 2) {
  const handlers = new Map<string, (from: string, request: Record<string, unknown>) => Promise<unknown>>()
  const peers = new Map<string, Peer>([
    [name === 'n2' ? 'n1' : 'n2', { own: { role: 'follower', term: 2, commitIndex: applied, appliedIndex: applied, lastIndex: applied }, alive: true, lastContactMs: 5 }],
    ['n3', { own: { role: 'follower', term: 2, commitIndex: applied, appliedIndex: applied, lastIndex: applied }, alive: true, lastContactMs: 5 }],
  ])
  const self: OwnRaftState = { role: leading ? 'leader' : 'follower', term, commitIndex: applied, appliedIndex: applied, lastIndex: applied }
  const requests: Array<{ to: string; message: Record<string, unknown> }> = []
  let leaderAnswer: (message: Record<string, unknown>) => Promise<unknown> = async () => ({})
  const environment = { now: () => clock.nowMs, setTimeout: (callback: () => void, ms: number) => clock.setTimeout(callback, ms) }
  const replica = {
    nodeName: name,
    leaderWaitMs: 5_000,
    environment,
    get leader() {
      return leading ? name : 'n2'
    },
    isLeader: () => leading,
    isStopped: false,
    checkRunning: () => undefined,
    handleRequests: (kind: string, handler: (from: string, request: Record<string, unknown>) => Promise<unknown>) => handlers.set(kind, handler),
    followers: () => [...peers].map(([id, peer]) => ({ id, matchIndex: peer.own.lastIndex, lagEntries: 0, lastContactMs: peer.lastContactMs })),
    membershipChanges: {
      membership: () => ({ index: 1, servers: ['n1', 'n2', 'n3'].map((id) => ({ id, address: `127.0.0.1:${id}`, voter: true })) }),
      linkOpen: (id: string) => peers.get(id)?.alive ?? true,
    },
    memberAlive: (id: string) => peers.get(id)?.alive ?? true,
    pause: (ms: number) => new Promise<void>((resolve) => clock.setTimeout(resolve, ms)),
    links: {
      request: async (to: string, message: Record<string, unknown>) => {
        requests.push({ to, message })
        if (message['kind'] === 'raft-state') return { ...peers.get(to)!.own }
        return leaderAnswer(message)
      },
    },
  }
  const service = new ClusterStatusService(replica as unknown as RaftReplica, () => ({ ...self }))
  return {
    service,
    peers,
    self,
    requests,
    handlers,
    answerAsLeader: (answer: (message: Record<string, unknown>) => Promise<unknown>) => (leaderAnswer = answer),
  }
}


describe('rpc/cluster-status: the index across leaders', () => {
  it('an index issued by the old leader does not make the new leader hold a query whose view has changed', async () => {
    const clock = new ManualClock()
    // Old leader n1: applied 99; two liveness flips move its index past its applied index (index + 1 each).
    const a = standIn(clock, true, 'n1', 99)
    const first = await a.service.status({})
    a.peers.get('n3')!.alive = false
    await clock.advance(300)
    await a.service.status({})
    a.peers.get('n3')!.alive = true
    await clock.advance(300)
    const seen = await a.service.status({})
    expect(seen.index).to.be.greaterThan(first.index)
    expect(seen.view.leader).to.equal('n1')
    // n1 dies; n2 leads in a later term, its servers at the same applied index. The watcher asks it with what it holds.
    const b = standIn(clock, true, 'n2', 101, 3)
    const query = b.service.status({ index: seen.index, waitMs: 10_000 })
    let answered: ClusterAnswer | undefined
    void query.then((answer) => (answered = answer))
    await clock.advance(2_000)
    expect(answered, 'the watcher still waits, showing n1 as leader, though n2 leads').to.not.equal(undefined)
    expect(answered!.view.leader).to.equal('n2')
  })
})

describe('rpc/cluster-status: the peer requests of waiting queries', () => {
  it('a client that hangs up does not cost a round of peer requests', async () => {
    const clock = new ManualClock()
    const { service, requests } = standIn(clock, true)
    const first = await service.status({})
    const before = requests.filter((request) => request.message['kind'] === 'raft-state').length
    // 20 clients, one every 10 ms, each hanging up 5 ms after it asked: 200 ms, less than one sampling interval.
    for (let i = 0; i < 20; i++) {
      const hangUp = new AbortController()
      const query = service.status({ index: first.index, waitMs: 60_000, signal: hangUp.signal })
      await clock.advance(5)
      hangUp.abort()
      await query
      await clock.advance(5)
    }
    const asked = requests.filter((request) => request.message['kind'] === 'raft-state').length - before
    // The sampler alone would ask each of the 2 peers at most once here; a fresh sample (FRESH_MS) serves the rest.
    expect(asked, 'raft-state requests for 20 hung-up clients in 200 ms').to.be.at.most(4)
  })
})
