/**
 * The cluster view's index (src/rpc/cluster-status.ts), driven over a stand-in replica and a clock the test moves by
 * hand: the rules a watcher relies on. The index never moves for the milliseconds since a server answered (every
 * heartbeat changes them); it moves at once when a server's liveness or role or the leader changes; when indexes move
 * it moves at most once per PROGRESS_INTERVAL_MS however often they move; and on a follower, blocking queries with one
 * index share one request to the leader; an index one leader issued never holds a watcher at the next; a client that
 * hangs up costs no round of peer requests.
 */
import { expect } from 'chai'
import type { Timer } from '../../../src/lib/environment.js'
import type { RaftReplica } from '../../../src/replica/raft-replica.js'
import { ClusterStatusService, PROGRESS_INTERVAL_MS, type ClusterAnswer, type OwnRaftState } from '../../../src/rpc/cluster-status.js'

/** A clock and timers that move only when the test says so. */
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

/** A replica of three servers whose every observable the test sets; `name` (n1) is this node, at `applied` in `term`. */
function standIn(clock: ManualClock, leading: boolean, { name = 'n1', applied = 10, term = 2 }: { name?: string; applied?: number; term?: number } = {}) {
  const handlers = new Map<string, (from: string, request: Record<string, unknown>) => Promise<unknown>>()
  const own = (): OwnRaftState => ({ role: 'follower', term, commitIndex: applied, appliedIndex: applied, lastIndex: applied })
  const peers = new Map<string, Peer>([
    [name === 'n2' ? 'n1' : 'n2', { own: own(), alive: true, lastContactMs: 5 }],
    ['n3', { own: own(), alive: true, lastContactMs: 5 }],
  ])
  const self: OwnRaftState = { ...own(), role: leading ? 'leader' : 'follower' }
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

/** Starts a blocking query and reports whether it has answered, without awaiting it. */
function waiting(promise: Promise<ClusterAnswer>): { done: () => boolean; answer: Promise<ClusterAnswer> } {
  let done = false
  const answer = promise.finally(() => (done = true))
  return { done: () => done, answer }
}

describe('cluster view index', () => {
  it('does not move while only the milliseconds since servers answered change', async () => {
    const clock = new ManualClock()
    const { service, peers } = standIn(clock, true)
    const first = await service.status({})
    const query = waiting(service.status({ index: first.index, waitMs: 10_000 }))
    for (let step = 0; step < 9; step++) {
      for (const peer of peers.values()) peer.lastContactMs = 10 + step * 37
      await clock.advance(1_000)
      expect(query.done(), `woken after ${step + 1} s by a heartbeat`).to.equal(false)
    }
    await clock.advance(1_000)
    const answer = await query.answer
    expect(answer.index).to.equal(first.index)
    // The figure itself is fresh even so.
    expect(answer.view.servers.find((server) => server.id === 'n2')?.lastContactMs).to.equal(10 + 8 * 37)
  })

  it('moves at once when a server fails', async () => {
    const clock = new ManualClock()
    const { service, peers } = standIn(clock, true)
    const first = await service.status({})
    const query = waiting(service.status({ index: first.index, waitMs: 10_000 }))
    await clock.advance(100)
    peers.get('n3')!.alive = false
    await clock.advance(600)
    expect(query.done()).to.equal(true)
    const answer = await query.answer
    expect(answer.index).to.be.greaterThan(first.index)
    expect(answer.view.servers.find((server) => server.id === 'n3')).to.include({ alive: false, error: 'no open link to it' })
  })

  it('moves at most once a second while indexes move at every sample, and never below the applied index', async () => {
    const clock = new ManualClock()
    const { service, peers, self } = standIn(clock, true)
    let answer = await service.status({})
    let wakes = 0
    const startedAt = clock.nowMs
    const stopAt = startedAt + 5_000
    // One watcher re-asking with each index it gets, while every server applies a new entry every 100 ms.
    const writer = (async () => {
      while (clock.nowMs < stopAt) {
        self.appliedIndex += 1
        self.commitIndex = self.lastIndex = self.appliedIndex
        for (const peer of peers.values()) peer.own = { ...peer.own, appliedIndex: self.appliedIndex, commitIndex: self.appliedIndex, lastIndex: self.appliedIndex }
        await clock.advance(100)
      }
    })()
    const watcher = (async () => {
      while (clock.nowMs < stopAt) {
        const next = await service.status({ index: answer.index, waitMs: 60_000 })
        if (next.index !== answer.index) wakes += 1
        expect(next.index).to.be.at.least(next.view.servers.find((server) => server.id === 'n1')!.own!.appliedIndex)
        answer = next
      }
    })()
    await writer
    await clock.advance(2_000)
    await watcher
    expect(wakes).to.be.at.least(3)
    expect(wakes).to.be.at.most(Math.ceil(5_000 / PROGRESS_INTERVAL_MS) + 2)
  })

  it('answers at once an index other than the current one, higher or lower', async () => {
    const clock = new ManualClock()
    const { service } = standIn(clock, true)
    const first = await service.status({})
    expect((await service.status({ index: first.index + 1_000, waitMs: 10_000 })).index).to.equal(first.index)
    expect((await service.status({ index: 1, waitMs: 10_000 })).index).to.equal(first.index)
  })

  it("on a follower, blocking queries with one index share one request to the leader, held there", async () => {
    const clock = new ManualClock()
    const { service, requests, answerAsLeader } = standIn(clock, false)
    let release: (answer: unknown) => void = () => undefined
    answerAsLeader(async (message) => (message['index'] === undefined ? { index: 7, view: { servers: [] } } : new Promise((resolve) => (release = resolve))))
    const first = await service.status({})
    expect(first.index).to.equal(7)
    const queries = Array.from({ length: 5 }, () => waiting(service.status({ index: 7, waitMs: 60_000 })))
    await clock.advance(10)
    const held = requests.filter((request) => request.message['kind'] === 'cluster-status' && request.message['index'] === 7)
    expect(held).to.have.length(1)
    expect(held[0]).to.deep.include({ to: 'n2' })
    release({ index: 8, view: { servers: [] } })
    for (const query of queries) expect((await query.answer).index).to.equal(8)
  })
})

describe('rpc/cluster-status: the index across leaders', () => {
  it('an index issued by the old leader does not make the new leader hold a query whose view has changed', async () => {
    const clock = new ManualClock()
    // Old leader n1: applied 99; two liveness flips move its index past its applied index (index + 1 each).
    const a = standIn(clock, true, { name: 'n1', applied: 99 })
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
    const b = standIn(clock, true, { name: 'n2', applied: 101, term: 3 })
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
