/**
 * The promises that wait on the log (src/replica/waiters.ts), and the rule of issue 16 (defect 4) they exist for: a
 * write waits for its own entry, known by index AND term. Two proposals at one index (the first of a term that lost
 * the entry, the second of a later term) both keep their waiter: when the later entry applies, the first is told
 * `no_leader` (not applied, safe to retry) at once instead of waiting out its timeout for `outcome_unknown`. A snapshot
 * that skips an index leaves its waiters' outcome unknown; a timeout too, and a settled waiter leaves no timer. Readers
 * waiting for the applied index are bounded.
 *
 * The waiter classes run on a manual clock. The last group drives a real RaftReplica (real Raft storage and state in a
 * temporary directory) through the scenario that puts two of its proposals at one index, with a scripted second voter.
 */
import { expect } from 'chai'
import { join } from 'node:path'
import { pino } from 'pino'
import { realEnvironment, type Environment, type Timer } from '../../../src/lib/environment.js'
import { WardenError } from '../../../src/lib/errors.js'
import type { AppendEntries, Message } from '../../../src/raft/index.js'
import { LevelRaftStorage } from '../../../src/raft/storage/level-storage.js'
import type { PeerLinks } from '../../../src/replica/peer-links.js'
import { RaftReplica, type ProposalOutcome } from '../../../src/replica/raft-replica.js'
import { AppliedWaiters, EntryWaiters } from '../../../src/replica/waiters.js'
import { COMMAND_VERSION } from '../../../src/state/commands.js'
import { encodeCommand, StateStore } from '../../../src/state/store.js'
import { useTempDirs } from '../../support/temp-dir.js'

/** An Environment whose time moves only when the test says; it counts the timers still scheduled. */
class ManualEnvironment implements Environment {
  private time = 0
  private nextId = 0
  private readonly timers = new Map<number, { at: number; callback: () => void }>()

  now(): number {
    return this.time
  }

  wallNow(): number {
    return this.time
  }

  setTimeout(callback: () => void, delayMs: number): Timer {
    const id = this.nextId++
    this.timers.set(id, { at: this.time + delayMs, callback })
    return { cancel: () => this.timers.delete(id) }
  }

  setInterval(): Timer {
    throw new Error('the waiters need no interval')
  }

  defer(callback: () => void): void {
    queueMicrotask(callback)
  }

  randomSeed(): number {
    return 1
  }

  randomId(): string {
    return `id-${this.nextId++}`
  }

  /** Timers scheduled and neither fired nor cancelled. */
  get pendingTimers(): number {
    return this.timers.size
  }

  /** Moves time on by `ms`, firing what falls due in order; then lets the promises they settled run. */
  async advance(ms: number): Promise<void> {
    const until = this.time + ms
    for (;;) {
      const due = [...this.timers].filter(([, timer]) => timer.at <= until).sort(([, a], [, b]) => a.at - b.at)[0]
      if (due === undefined) break
      this.timers.delete(due[0])
      this.time = due[1].at
      due[1].callback()
    }
    this.time = until
    await settled()
  }
}

/** Lets every promise callback queued so far run. */
const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

type Outcome<T> = { state: 'pending' } | { state: 'resolved'; value: T } | { state: 'rejected'; code: string; message: string }

/** Watches a promise, so a test can ask how it settled without awaiting it. */
function watch<T>(promise: Promise<T>): { readonly outcome: Outcome<T> } {
  const watched: { outcome: Outcome<T> } = { outcome: { state: 'pending' } }
  promise.then(
    (value) => {
      watched.outcome = { state: 'resolved', value }
    },
    (error: unknown) => {
      watched.outcome = { state: 'rejected', code: error instanceof WardenError ? error.code : String(error), message: error instanceof Error ? error.message : String(error) }
    },
  )
  return watched
}

describe('replica/waiters: EntryWaiters', function () {
  let environment: ManualEnvironment
  let waiters: EntryWaiters<string>

  beforeEach(function () {
    environment = new ManualEnvironment()
    waiters = new EntryWaiters<string>(environment, 100)
  })

  afterEach(function () {
    // Whatever a failing test left waiting is settled and its timer cancelled.
    waiters.rejectAll(new WardenError('outcome_unknown', 'test over'))
  })

  it('two waiters at one index with different terms both stay; the entry that applies resolves its own term and tells the other no_leader', async function () {
    const first = watch(waiters.wait(5, 1, 10_000, 'timed out'))
    const second = watch(waiters.wait(5, 2, 10_000, 'timed out'))
    expect(waiters.size).to.equal(2)
    waiters.applied(5, 2, 'applied in term 2')
    await settled()
    expect(second.outcome).to.deep.equal({ state: 'resolved', value: 'applied in term 2' })
    expect(first.outcome).to.include({ state: 'rejected', code: 'no_leader' })
    expect(waiters.size).to.equal(0)
    expect(environment.pendingTimers, 'timers left behind').to.equal(0)
  })

  it('an entry applied at an index concerns only the waiters of that index', async function () {
    const other = watch(waiters.wait(6, 1, 10_000, 'timed out'))
    const mine = watch(waiters.wait(5, 1, 10_000, 'timed out'))
    waiters.applied(5, 1, 'result')
    await settled()
    expect(mine.outcome).to.deep.equal({ state: 'resolved', value: 'result' })
    expect(other.outcome).to.deep.equal({ state: 'pending' })
    expect(waiters.size).to.equal(1)
    expect(environment.pendingTimers).to.equal(1)
  })

  it('skippedTo(index) tells every waiter at or below the index outcome_unknown and keeps those above', async function () {
    const below = watch(waiters.wait(3, 1, 10_000, 'timed out'))
    const at = watch(waiters.wait(5, 1, 10_000, 'timed out'))
    const atOtherTerm = watch(waiters.wait(5, 2, 10_000, 'timed out'))
    const above = watch(waiters.wait(7, 2, 10_000, 'timed out'))
    waiters.skippedTo(5)
    await settled()
    for (const skipped of [below, at, atOtherTerm]) expect(skipped.outcome).to.include({ state: 'rejected', code: 'outcome_unknown' })
    expect(above.outcome).to.deep.equal({ state: 'pending' })
    expect(waiters.size).to.equal(1)
    expect(environment.pendingTimers).to.equal(1)
  })

  it('a waiter that times out is told outcome_unknown with its message and leaves no timer', async function () {
    const waiting = watch(waiters.wait(5, 1, 1_000, 'the write was not committed in time'))
    await environment.advance(999)
    expect(waiting.outcome).to.deep.equal({ state: 'pending' })
    await environment.advance(1)
    expect(waiting.outcome).to.deep.equal({ state: 'rejected', code: 'outcome_unknown', message: 'the write was not committed in time' })
    expect(waiters.size).to.equal(0)
    expect(environment.pendingTimers).to.equal(0)
    // The entry applying later finds nobody to tell.
    waiters.applied(5, 1, 'late')
    expect(waiters.size).to.equal(0)
  })

  it('released(index, term) resolves only the waiters of that entry that accept an early result; applied settles the rest', async function () {
    const early = watch(waiters.wait(5, 2, 10_000, 'timed out', true))
    const late = watch(waiters.wait(5, 2, 10_000, 'timed out'))
    const earlyOtherTerm = watch(waiters.wait(5, 1, 10_000, 'timed out', true))
    expect(waiters.released(5, 2, 'computed')).to.equal(true)
    await settled()
    expect(early.outcome).to.deep.equal({ state: 'resolved', value: 'computed' })
    expect(late.outcome).to.deep.equal({ state: 'pending' })
    expect(earlyOtherTerm.outcome).to.deep.equal({ state: 'pending' })
    expect(waiters.size).to.equal(2)
    expect(environment.pendingTimers).to.equal(2)
    // Nothing left there takes an early result.
    expect(waiters.released(5, 2, 'computed again')).to.equal(false)
    waiters.applied(5, 2, 'written')
    await settled()
    expect(late.outcome).to.deep.equal({ state: 'resolved', value: 'written' })
    expect(earlyOtherTerm.outcome).to.include({ state: 'rejected', code: 'no_leader' })
    expect(waiters.size).to.equal(0)
    expect(environment.pendingTimers).to.equal(0)
  })

  it('is full once countMax waiters wait', function () {
    const bounded = new EntryWaiters<string>(environment, 2)
    const promises = [bounded.wait(1, 1, 1_000, 'timed out'), bounded.wait(2, 1, 1_000, 'timed out')]
    for (const promise of promises) promise.catch(() => undefined)
    expect(bounded.full()).to.equal(true)
    bounded.rejectAll(new WardenError('outcome_unknown', 'test over'))
    expect(bounded.full()).to.equal(false)
    expect(environment.pendingTimers).to.equal(0)
  })
})

describe('replica/waiters: AppliedWaiters', function () {
  let environment: ManualEnvironment
  let waiters: AppliedWaiters

  beforeEach(function () {
    environment = new ManualEnvironment()
    waiters = new AppliedWaiters(environment, 2)
  })

  afterEach(function () {
    waiters.rejectAll(new WardenError('no_leader', 'test over'))
  })

  it('past countMax a wait is refused with rate_limited, without a timer', async function () {
    const first = watch(waiters.wait(10, 1_000))
    const second = watch(waiters.wait(11, 1_000))
    const refused = watch(waiters.wait(12, 1_000))
    await settled()
    expect(refused.outcome).to.include({ state: 'rejected', code: 'rate_limited' })
    expect(waiters.size).to.equal(2)
    expect(environment.pendingTimers).to.equal(2)
    // Room again once waiters leave.
    waiters.release(10)
    await settled()
    expect(first.outcome).to.deep.equal({ state: 'resolved', value: undefined })
    expect(second.outcome).to.deep.equal({ state: 'pending' })
    const taken = watch(waiters.wait(12, 1_000))
    await settled()
    expect(taken.outcome).to.deep.equal({ state: 'pending' })
    expect(waiters.size).to.equal(2)
  })

  it('release(applied) wakes the waiters at or below it; a timeout rejects with no_leader; neither leaves a timer', async function () {
    const reached = watch(waiters.wait(10, 1_000))
    const behind = watch(waiters.wait(20, 1_000))
    waiters.release(15)
    await settled()
    expect(reached.outcome).to.deep.equal({ state: 'resolved', value: undefined })
    expect(behind.outcome).to.deep.equal({ state: 'pending' })
    expect(environment.pendingTimers).to.equal(1)
    await environment.advance(1_000)
    expect(behind.outcome).to.include({ state: 'rejected', code: 'no_leader' })
    expect(waiters.size).to.equal(0)
    expect(environment.pendingTimers).to.equal(0)
  })
})

/**
 * The second voter of a two-voter group, played by the test: it grants every vote asked, answers heartbeats, and
 * acknowledges appended entries up to `ackUpTo`. `deliver` steps a message of its own into the replica.
 */
class ScriptedVoter {
  ackUpTo = Number.POSITIVE_INFINITY
  /** The highest index it acknowledged. */
  lastIndex = 0
  /** The highest index the replica has sent it. */
  highestSent = 0
  private handler: ((from: string, message: unknown) => void) | undefined

  readonly links: PeerLinks = {
    send: (to, message) => {
      if (to === 'n2') setImmediate(() => this.receive(message as Message))
      return true
    },
    request: (to) => Promise.reject(new Error(`no requests to ${to} in this test`)),
    onMessage: (handler) => {
      this.handler = handler
    },
    onRequest: () => undefined,
    onPeerState: () => undefined,
    setPeers: () => undefined,
    advertisedAddress: () => undefined,
  }

  deliver(message: Message): void {
    this.handler?.('n2', message)
  }

  private receive(message: Message): void {
    const reply = { from: 'n2', to: 'n1', term: message.term } as const
    switch (message.type) {
      case 'requestVote':
        this.deliver({ ...reply, type: 'requestVoteResponse', preVote: message.preVote, granted: true })
        return
      case 'heartbeat':
        this.deliver({ ...reply, type: 'heartbeatResponse', seq: message.seq, tick: message.tick, lastIndex: this.lastIndex })
        return
      case 'appendEntries': {
        const last = message.prevLogIndex + message.entries.length
        this.highestSent = Math.max(this.highestSent, last)
        if (last > this.ackUpTo) return
        this.lastIndex = Math.max(this.lastIndex, last)
        this.deliver({ ...reply, type: 'appendEntriesResponse', success: true, index: last, conflictIndex: 0, conflictTerm: 0 })
        return
      }
      default:
        return
    }
  }
}

async function until(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

describe('replica/waiters: RaftReplica proposals that share an index', function () {
  this.timeout(15_000)
  const dirs = useTempDirs()

  it('a proposal whose index a later term reused is told no_leader when that entry applies, not left to time out', async function () {
    const dir = await dirs.make('warden-waiters-')
    const storage = await LevelRaftStorage.open(join(dir, 'raft'))
    dirs.defer(() => storage.close())
    const state = await StateStore.open(join(dir, 'state'))
    dirs.defer(() => state.close())
    const membership = { voters: ['n1', 'n2'], voteFromIndex: 0 }
    await storage.saveMembershipRecord(membership)
    const n2 = new ScriptedVoter()
    const fatal: unknown[] = []
    const replica = new RaftReplica({
      nodeName: 'n1',
      // No addresses: nobody is dialed, and a new leader has no address to record in the log.
      dialAddresses: new Map([['n1', ''], ['n2', '']]),
      membership,
      storage,
      state,
      links: n2.links,
      environment: realEnvironment,
      log: pino({ level: 'silent' }),
      onFatal: (error) => fatal.push(error),
      heartbeatIntervalMs: 50,
      electionTimeoutMs: 200,
      snapshotThreshold: 8192,
      // Long enough that an answer by timeout cannot be mistaken for the answer the apply gives.
      applyWaitMs: 3_000,
    })
    dirs.defer(() => replica.stop({ transferLeadership: false }))
    const propose = (name: string): { readonly outcome: Outcome<ProposalOutcome> } =>
      watch(replica.proposeLocally(encodeCommand({ v: COMMAND_VERSION, type: 'config.delete', Kind: 'service-defaults', Namespace: 'default', Name: name })))

    // Term 1: n1 leads with n2's votes; n2 acknowledges the leader's first entry only.
    n2.ackUpTo = 1
    await replica.start()
    await until(() => replica.isLeader() && replica.status().term === 1 && state.lastApplied === 1, 'n1 leads term 1 and applied its first entry')
    const a = propose('a')
    const b = propose('b')
    const c = propose('c')
    await until(() => n2.highestSent === 4, 'the leader sent entries 2..4')
    expect(replica.status().lastIndex).to.equal(4)

    // Term 2: n2 leads and replaces n1's uncommitted entries 2..4 with its own entry 2, committed.
    const leaderEntry: AppendEntries = {
      type: 'appendEntries',
      from: 'n2',
      to: 'n1',
      term: 2,
      prevLogIndex: 1,
      prevLogTerm: 1,
      entries: [{ index: 2, term: 2, type: 'noop', data: new Uint8Array(0) }],
      leaderCommit: 2,
    }
    n2.ackUpTo = Number.POSITIVE_INFINITY
    n2.lastIndex = 2
    n2.deliver(leaderEntry)
    await until(() => state.lastApplied === 2, 'n1 applied the entry of term 2')
    await settled()
    expect(a.outcome, 'the proposal whose index term 2 took').to.include({ state: 'rejected', code: 'no_leader' })

    // Term 3: n2 falls silent; n1 campaigns, leads again, and its first entry takes index 3.
    await until(() => replica.isLeader() && replica.status().term === 3 && state.lastApplied === 3, 'n1 leads term 3 and applied its first entry')
    await settled()
    expect(b.outcome, 'the proposal whose index the term-3 leader entry took').to.include({ state: 'rejected', code: 'no_leader' })
    expect(c.outcome).to.deep.equal({ state: 'pending' })

    // A new proposal lands at index 4, where c waits: both wait, and when it applies, c is told it was not applied.
    const d = propose('d')
    await until(() => d.outcome.state !== 'pending', 'the new proposal was answered')
    expect(d.outcome).to.deep.include({ state: 'resolved' })
    expect((d.outcome as { value: ProposalOutcome }).value.index).to.equal(4)
    await until(() => c.outcome.state !== 'pending', 'the earlier proposal at index 4 was answered', 5_000)
    expect(c.outcome, 'the term-1 proposal at index 4').to.include({ state: 'rejected', code: 'no_leader' })
    expect(fatal).to.deep.equal([])
  })
})
