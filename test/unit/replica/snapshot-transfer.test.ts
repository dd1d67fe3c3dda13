/**
 * The receiving side of snapshot streams (src/replica/snapshot-transfer.ts SnapshotTransfer), driven chunk by chunk
 * through a fake SnapshotHost over a real StateStore in a temporary directory. Two rules of issue 16: a snapshot the
 * core refuses is discarded as soon as its last chunk is answered, so no stale staged state waits for the next start
 * (defect 3); and while a snapshot the core took waits to be installed, a new stream cannot start, so nothing
 * recreates the staging directory under the switch (defect 5).
 *
 * A second group delivers the same streams to a real RaftReplica (real RaftCore, Raft storage and state) as peer
 * requests, so the core decides: it refuses a snapshot its own log already covers, and takes one on a new node, whose
 * Ready loop then switches it in while the second stream knocks.
 */
import { expect } from 'chai'
import { join } from 'node:path'
import { pino } from 'pino'
import { realEnvironment } from '../../../src/lib/environment.js'
import { WardenError } from '../../../src/lib/errors.js'
import type { SnapshotMetadata } from '../../../src/raft/index.js'
import { LevelRaftStorage } from '../../../src/raft/storage/level-storage.js'
import type { PeerLinks } from '../../../src/replica/peer-links.js'
import { RaftReplica } from '../../../src/replica/raft-replica.js'
import { SnapshotTransfer, type SnapshotChunk, type SnapshotHost } from '../../../src/replica/snapshot-transfer.js'
import { switchToStagedState } from '../../../src/state/snapshot.js'
import { StateStore } from '../../../src/state/store.js'
import { NO_LINKS } from '../../support/state.js'
import { applyShape, contentsOf, pairsOf, type StateShape } from '../../support/state-shape.js'
import { useTempDirs } from '../../support/temp-dir.js'

/** A node's own state, applied past the leader's snapshot, with a record the snapshot does not have. */
const LIVE: StateShape = { appliedTo: 30, policies: { 'early-policy': 3, 'late-policy': 25 } }
/** The state a leader streams: applied to 20. */
const LEADER: StateShape = { appliedTo: 20, policies: { 'early-policy': 3, 'leader-policy': 12 } }

function metadata(index: number, term = 2): SnapshotMetadata {
  return { index, term, configuration: { voters: ['n1', 'n2'], learners: [] } }
}

/** A whole stream `id` of `pairs` from a leader of term 2: the pairs in two chunks, then the closing chunk. */
function stream(id: string, pairs: Array<[string, Uint8Array]>, index: number): SnapshotChunk[] {
  const half = Math.ceil(pairs.length / 2)
  return [
    { kind: 'snapshot', id, seq: 0, pairs: pairs.slice(0, half), done: false },
    { kind: 'snapshot', id, seq: 1, pairs: pairs.slice(half), done: false },
    { kind: 'snapshot', id, seq: 2, pairs: [], done: true, term: 2, snapshot: metadata(index) },
  ]
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (error) {
    return error
  }
  return expect.fail('expected the chunk to be refused')
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

describe('replica/snapshot-transfer: receiving a snapshot', function () {
  const dirs = useTempDirs()
  let state: StateStore
  let transfer: SnapshotTransfer
  /** What offerSnapshot answers: whether the core takes the snapshot. */
  let coreTakes: boolean
  let offers: Array<{ from: string; term: number; index: number }>

  beforeEach(async function () {
    state = await StateStore.open(join(await dirs.make('warden-transfer-'), 'state'))
    dirs.defer(() => state.close())
    coreTakes = true
    offers = []
    const host: SnapshotHost = {
      state,
      links: NO_LINKS,
      environment: realEnvironment,
      log: pino({ level: 'silent' }),
      snapshotMetadata: () => null,
      offerSnapshot: (from, term, snapshot) => {
        offers.push({ from, term, index: snapshot.index })
        return coreTakes
      },
      reportSent: () => undefined,
      leads: () => true,
    }
    transfer = new SnapshotTransfer(host)
    // Runs before the state closes (closers run last registered, first).
    dirs.defer(() => transfer.stop())
  })

  it('a snapshot the core refuses is discarded as soon as its last chunk is answered', async function () {
    // This node has applied past the snapshot: the core refuses it as already covered.
    await applyShape(state, LIVE)
    coreTakes = false
    for (const chunk of stream('a', await pairsOf(dirs, LEADER), LEADER.appliedTo)) {
      expect(await transfer.receive('n2', chunk)).to.deep.equal({ ok: true })
    }
    expect(offers).to.deep.equal([{ from: 'n2', term: 2, index: 20 }])
    expect(await state.files.exists('incoming'), 'the refused snapshot is still staged').to.equal(false)
    expect(transfer.isStaged(20)).to.equal(false)
    expect(await contentsOf(state)).to.deep.equal({ applied: 30, policies: ['early-policy', 'late-policy'] })
  })

  it('while a snapshot the core took waits to be installed, a new stream is refused and the staged state stays whole', async function () {
    // A new node with nothing applied: the core takes the snapshot.
    const pairs = await pairsOf(dirs, LEADER)
    for (const chunk of stream('a', pairs, LEADER.appliedTo)) await transfer.receive('n2', chunk)
    expect(transfer.isStaged(20)).to.equal(true)

    // Another stream (the leader retrying, or a new leader) starts before the Ready loop has switched the first in.
    const [first] = stream('b', pairs, LEADER.appliedTo)
    const refused = await rejection(transfer.receive('n3', first!))
    expect(refused).to.be.instanceOf(WardenError)
    expect((refused as WardenError).code).to.equal('no_leader')
    expect(await state.files.hasMark('incoming', 'COMPLETE'), 'the staged state lost its completion mark').to.equal(true)

    // The switch finds the staged state as the core took it.
    await state.replace(switchToStagedState)
    transfer.installed()
    expect(await contentsOf(state)).to.deep.equal({ applied: 20, policies: ['early-policy', 'leader-policy'] })

    // Once it is installed, streams are taken again.
    for (const chunk of stream('b', pairs, LEADER.appliedTo)) expect(await transfer.receive('n3', chunk)).to.deep.equal({ ok: true })
    expect(offers.map((offer) => offer.from)).to.deep.equal(['n2', 'n3'])
  })
})

describe('replica/snapshot-transfer: receiving a snapshot through RaftReplica', function () {
  const dirs = useTempDirs()
  let storage: LevelRaftStorage
  let state: StateStore
  let replica: RaftReplica
  /** The handler RaftReplica registered for peer requests: where a leader's chunks arrive. */
  let onRequest: (from: string, request: unknown) => Promise<unknown>
  let fatal: unknown[]

  beforeEach(async function () {
    const dir = await dirs.make('warden-transfer-')
    storage = await LevelRaftStorage.open(join(dir, 'raft'))
    dirs.defer(() => storage.close())
    state = await StateStore.open(join(dir, 'state'))
    dirs.defer(() => state.close())
    await storage.saveMembershipRecord({ voters: ['n1', 'n2'], voteFromIndex: 0 })
  })

  /** Starts n1 of {n1, n2} over the stores; it never campaigns during a test (a minute's election timeout). */
  async function start(): Promise<void> {
    const links: PeerLinks = {
      ...NO_LINKS,
      send: () => true,
      onRequest: (handler) => {
        onRequest = handler
      },
    }
    fatal = []
    replica = new RaftReplica({
      nodeName: 'n1',
      dialAddresses: new Map([['n1', ''], ['n2', '']]),
      membership: storage.membershipRecord()!,
      storage,
      state,
      links,
      environment: realEnvironment,
      log: pino({ level: 'silent' }),
      onFatal: (error) => fatal.push(error),
      heartbeatIntervalMs: 50,
      electionTimeoutMs: 60_000,
      snapshotThreshold: 8192,
    })
    await replica.start()
    dirs.defer(() => replica.stop({ transferLeadership: false }))
  }

  it('a snapshot the core refuses (its log already covers it) is discarded as soon as its last chunk is answered', async function () {
    await applyShape(state, LIVE)
    const entries = Array.from({ length: LIVE.appliedTo }, (_, offset) => ({ index: offset + 1, term: 1, type: 'noop' as const, data: new Uint8Array(0) }))
    await storage.persist({ entries, hardState: { term: 1, votedFor: null, commitIndex: LIVE.appliedTo } }, true)
    await storage.saveSnapshot(metadata(LIVE.appliedTo, 1))
    await start()
    for (const chunk of stream('a', await pairsOf(dirs, LEADER), LEADER.appliedTo)) expect(await onRequest('n2', chunk)).to.deep.equal({ ok: true })
    expect(await state.files.exists('incoming'), 'the refused snapshot is still staged').to.equal(false)
    await sleep(100)
    expect(await contentsOf(state)).to.deep.equal({ applied: 30, policies: ['early-policy', 'late-policy'] })
    expect(fatal).to.deep.equal([])
  })

  it('a new stream that starts before the taken snapshot is switched in is refused, and the switch completes', async function () {
    await start()
    const pairs = await pairsOf(dirs, LEADER)
    for (const chunk of stream('a', pairs, LEADER.appliedTo)) await onRequest('n2', chunk)
    // The core took the snapshot; the Ready loop switches it in after this turn, when the next stream already knocks.
    const [first] = stream('b', pairs, LEADER.appliedTo)
    const refused = await rejection(onRequest('n3', first!))
    expect(refused).to.be.instanceOf(WardenError)
    expect((refused as WardenError).code).to.equal('no_leader')
    const deadline = Date.now() + 5_000
    while (state.lastApplied < LEADER.appliedTo && fatal.length === 0 && Date.now() < deadline) await sleep(10)
    expect(fatal.map(String)).to.deep.equal([])
    expect(await contentsOf(state)).to.deep.equal({ applied: 20, policies: ['early-policy', 'leader-policy'] })
  })
})
