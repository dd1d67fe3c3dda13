/**
 * How a server enters its cluster (src/replica/founding.ts): the plan read from its Raft storage and flags at start,
 * the founding decision from its peers' answers during discovery, and the check of a restart's --peer flags.
 *
 * The storage is the real LevelRaftStorage on a temporary directory, reopened where a case is about a restart, so the
 * membership record is read back from disk as the agent reads it. A data dir written before the record existed is
 * made the way the previous release left one: a term, entries or a snapshot in the same LevelDB layout, no record.
 */
import { expect } from 'chai'
import { join } from 'node:path'
import { LevelRaftStorage } from '../../../src/raft/storage/level-storage.js'
import { VOTE_INDEX_UNKNOWN, type MembershipRecord } from '../../../src/raft/storage/raft-storage.js'
import type { Entry } from '../../../src/raft/types.js'
import { decideFounding, holdsRaftState, peerFlagsProblem, planMembership, type ClusterStateAnswer, type FoundingFlags, type FoundingPlan } from '../../../src/replica/founding.js'
import { useTempDirs } from '../../support/temp-dir.js'

function entry(index: number, term: number): Entry {
  return { index, term, type: 'command', data: new Uint8Array([index]) }
}

function flags(nodeName: string, options: { peers?: string[]; join?: boolean } = {}): FoundingFlags {
  return { nodeName, peerNames: options.peers ?? [], joining: options.join ?? false }
}

/** The plan, which must be ok (a failed plan fails the test with its problem). */
function ok(plan: FoundingPlan): Extract<FoundingPlan, { ok: true }> {
  if (!plan.ok) throw new Error(`expected a plan, got the problem: ${plan.problem}`)
  return plan
}

function answers(entries: Array<[string, boolean]>): Map<string, ClusterStateAnswer> {
  return new Map(entries.map(([peer, existing]) => [peer, { existing }]))
}

describe('replica/founding', function () {
  const dirs = useTempDirs()

  /** A Raft storage on a fresh directory, closed after the test. */
  async function freshStorage(): Promise<{ directory: string; storage: LevelRaftStorage }> {
    const directory = join(await dirs.make('warden-founding-'), 'raft')
    const storage = await LevelRaftStorage.open(directory)
    dirs.defer(() => storage.close())
    return { directory, storage }
  }

  /** Closes `storage` and opens its directory again, as a restart does (closing twice at cleanup is harmless). */
  async function reopen(directory: string, storage: LevelRaftStorage): Promise<LevelRaftStorage> {
    await storage.close()
    const again = await LevelRaftStorage.open(directory)
    dirs.defer(() => again.close())
    return again
  }

  /** Saves the plan's record when the plan says so, as the agent does, then reopens the storage. */
  async function startedWith(directory: string, storage: LevelRaftStorage, plan: FoundingPlan): Promise<LevelRaftStorage> {
    const planned = ok(plan)
    if (planned.save) await storage.saveMembershipRecord(planned.record)
    return reopen(directory, storage)
  }

  describe('planMembership: an empty data dir', function () {
    it('without --peer or --join founds a cluster of one at once', async function () {
      const { storage } = await freshStorage()
      expect(holdsRaftState(storage)).to.equal(false)
      expect(planMembership(storage, flags('n1'))).to.deep.equal({ ok: true, record: { voters: ['n1'], voteFromIndex: 0 }, save: true, next: 'run' })
    })

    it('--peer naming only this node is still a cluster of one', async function () {
      const { storage } = await freshStorage()
      expect(ok(planMembership(storage, flags('n1', { peers: ['n1'] })))).to.deep.include({ record: { voters: ['n1'], voteFromIndex: 0 }, next: 'run' })
    })

    it('with --join is a joiner with no voters, waiting for the index it may vote from', async function () {
      const { storage } = await freshStorage()
      expect(planMembership(storage, flags('n4', { join: true }))).to.deep.equal({
        ok: true,
        record: { voters: [], voteFromIndex: VOTE_INDEX_UNKNOWN },
        save: true,
        next: 'join',
      })
    })

    it('with --join and --peer is still a joiner (it cannot tell whether the founders exist yet)', async function () {
      const { storage } = await freshStorage()
      expect(ok(planMembership(storage, flags('n4', { join: true, peers: ['n1', 'n2'] })))).to.deep.include({
        record: { voters: [], voteFromIndex: VOTE_INDEX_UNKNOWN },
        next: 'join',
      })
    })

    it('with --peer is a founder in discovery: the founders sorted, itself included once, its vote index unknown', async function () {
      const { storage } = await freshStorage()
      expect(planMembership(storage, flags('n2', { peers: ['n3', 'n1'] }))).to.deep.equal({
        ok: true,
        record: { voters: ['n1', 'n2', 'n3'], voteFromIndex: VOTE_INDEX_UNKNOWN },
        save: true,
        next: 'discover',
      })
      expect(ok(planMembership(storage, flags('n2', { peers: ['n1', 'n2', 'n3', 'n3'] }))).record.voters).to.deep.equal(['n1', 'n2', 'n3'])
    })
  })

  describe('planMembership: a data dir written before the record existed (an upgrade)', function () {
    /** Storage holding what the previous release wrote: a term and a vote, entries, no record. */
    async function oldDataDir(): Promise<{ directory: string; storage: LevelRaftStorage }> {
      const { directory, storage } = await freshStorage()
      await storage.persist({ entries: [entry(1, 1), entry(2, 1), entry(3, 2)], hardState: { term: 2, votedFor: 'n1', commitIndex: 3 } }, true)
      return { directory, storage: await reopen(directory, storage) }
    }

    it('with --peer: a founder of the cluster the flags name, voting at once, saved once', async function () {
      const { storage } = await oldDataDir()
      expect(storage.membershipRecord()).to.equal(null)
      expect(planMembership(storage, flags('n2', { peers: ['n1', 'n3'] }))).to.deep.equal({
        ok: true,
        record: { voters: ['n1', 'n2', 'n3'], voteFromIndex: 0 },
        save: true,
        next: 'run',
      })
    })

    it('with --join and no --peer: a server that joined, with no founders and voting at once', async function () {
      const { storage } = await oldDataDir()
      expect(planMembership(storage, flags('n4', { join: true }))).to.deep.equal({
        ok: true,
        record: { voters: [], voteFromIndex: 0 },
        save: true,
        next: 'run',
      })
    })

    it('with --join and --peer: a founder, as the previous release ran it from its log with the flags as its peers', async function () {
      const { storage } = await oldDataDir()
      expect(ok(planMembership(storage, flags('n4', { join: true, peers: ['n1'] })))).to.deep.include({
        record: { voters: ['n1', 'n4'], voteFromIndex: 0 },
        next: 'run',
      })
    })

    it('without flags: a cluster of one', async function () {
      const { storage } = await oldDataDir()
      expect(ok(planMembership(storage, flags('n1'))).record).to.deep.equal({ voters: ['n1'], voteFromIndex: 0 })
    })

    it('counts a term alone (a vote cast, no entries) and a snapshot alone (a compacted log) as Raft state', async function () {
      const voted = await freshStorage()
      await voted.storage.persist({ entries: [], hardState: { term: 1, votedFor: 'n2', commitIndex: 0 } }, true)
      const votedAgain = await reopen(voted.directory, voted.storage)
      expect(holdsRaftState(votedAgain)).to.equal(true)
      expect(ok(planMembership(votedAgain, flags('n1', { peers: ['n2', 'n3'] })))).to.deep.include({ next: 'run', save: true })

      const compacted = await freshStorage()
      await compacted.storage.persist({ entries: [], snapshot: { index: 40, term: 3, configuration: { voters: ['n1', 'n2', 'n3'], learners: [] } } }, true)
      const compactedAgain = await reopen(compacted.directory, compacted.storage)
      expect(compactedAgain.lastIndex()).to.equal(40)
      expect(holdsRaftState(compactedAgain)).to.equal(true)
      expect(ok(planMembership(compactedAgain, flags('n4', { join: true }))).record).to.deep.equal({ voters: [], voteFromIndex: 0 })
    })

    it('is saved once: the next start reads the record and no longer looks at the flags', async function () {
      const { directory, storage } = await oldDataDir()
      const restarted = await startedWith(directory, storage, planMembership(storage, flags('n4', { join: true })))
      expect(restarted.membershipRecord()).to.deep.equal({ voters: [], voteFromIndex: 0 })
      // The operator now gives --peer flags: the record says it joined, and stays so.
      expect(planMembership(restarted, flags('n4', { peers: ['n1', 'n2', 'n3'] }))).to.deep.equal({
        ok: true,
        record: { voters: [], voteFromIndex: 0 },
        save: false,
        next: 'run',
      })
    })
  })

  describe('planMembership: a record present', function () {
    async function withRecord(record: MembershipRecord, options: { raftState?: boolean } = {}): Promise<LevelRaftStorage> {
      const { directory, storage } = await freshStorage()
      if (options.raftState === true) await storage.persist({ entries: [entry(1, 1)], hardState: { term: 1, votedFor: null, commitIndex: 1 } }, true)
      await storage.saveMembershipRecord(record)
      return reopen(directory, storage)
    }

    it('a founder that founded runs from the record, whatever the flags say now', async function () {
      const storage = await withRecord({ voters: ['n1', 'n2', 'n3'], voteFromIndex: 0 }, { raftState: true })
      for (const given of [flags('n1'), flags('n1', { join: true }), flags('n1', { peers: ['n5', 'n6'] }), flags('n1', { peers: ['n2', 'n3'] })]) {
        expect(planMembership(storage, given), JSON.stringify(given)).to.deep.equal({
          ok: true,
          record: { voters: ['n1', 'n2', 'n3'], voteFromIndex: 0 },
          save: false,
          next: 'run',
        })
      }
    })

    it('a server that joined runs from its record, even with --peer flags now', async function () {
      const storage = await withRecord({ voters: [], voteFromIndex: 17 }, { raftState: true })
      expect(planMembership(storage, flags('n4', { peers: ['n1', 'n2', 'n3'] }))).to.deep.equal({
        ok: true,
        record: { voters: [], voteFromIndex: 17 },
        save: false,
        next: 'run',
      })
    })

    it('a founder stopped before its discovery ended asks its peers again (not the flags)', async function () {
      const storage = await withRecord({ voters: ['n1', 'n2', 'n3'], voteFromIndex: VOTE_INDEX_UNKNOWN })
      expect(planMembership(storage, flags('n1'))).to.deep.equal({
        ok: true,
        record: { voters: ['n1', 'n2', 'n3'], voteFromIndex: VOTE_INDEX_UNKNOWN },
        save: false,
        next: 'discover',
      })
    })

    it('a joiner stopped before its join was answered asks to join again, even without --join now', async function () {
      const storage = await withRecord({ voters: [], voteFromIndex: VOTE_INDEX_UNKNOWN })
      expect(planMembership(storage, flags('n4', { peers: ['n1', 'n2'] }))).to.deep.equal({
        ok: true,
        record: { voters: [], voteFromIndex: VOTE_INDEX_UNKNOWN },
        save: false,
        next: 'join',
      })
    })

    it('is what a first start saved: a fresh founder with different flags at the next start still discovers its founders', async function () {
      const { directory, storage } = await freshStorage()
      const restarted = await startedWith(directory, storage, planMembership(storage, flags('n1', { peers: ['n2', 'n3'] })))
      expect(ok(planMembership(restarted, flags('n1')))).to.deep.equal({
        ok: true,
        record: { voters: ['n1', 'n2', 'n3'], voteFromIndex: VOTE_INDEX_UNKNOWN },
        save: false,
        next: 'discover',
      })
    })
  })

  describe('planMembership: the incarnation (a random identifier made with the data dir)', function () {
    const incarnation = 'b1946ac9-2b1f-4c1e-9d1a-0f6e3c2a7d55'
    const other = '5d41402a-bc4b-4a76-b971-9d911017c592'

    it('goes into every record made now: founder, joiner, founder in discovery, upgraded data dir', async function () {
      const alone = await freshStorage()
      expect(ok(planMembership(alone.storage, { ...flags('n1'), incarnation })).record).to.deep.equal({ voters: ['n1'], voteFromIndex: 0, incarnation })
      const joiner = await freshStorage()
      expect(ok(planMembership(joiner.storage, { ...flags('n4', { join: true }), incarnation })).record).to.deep.equal({
        voters: [],
        voteFromIndex: VOTE_INDEX_UNKNOWN,
        incarnation,
      })
      const founder = await freshStorage()
      expect(ok(planMembership(founder.storage, { ...flags('n1', { peers: ['n2', 'n3'] }), incarnation })).record).to.deep.equal({
        voters: ['n1', 'n2', 'n3'],
        voteFromIndex: VOTE_INDEX_UNKNOWN,
        incarnation,
      })
      const upgraded = await freshStorage()
      await upgraded.storage.persist({ entries: [entry(1, 1)], hardState: { term: 1, votedFor: 'n1', commitIndex: 1 } }, true)
      expect(ok(planMembership(upgraded.storage, { ...flags('n1', { peers: ['n2', 'n3'] }), incarnation }))).to.deep.include({
        record: { voters: ['n1', 'n2', 'n3'], voteFromIndex: 0, incarnation },
        save: true,
      })
    })

    it('is kept once recorded: a restart offering another one changes nothing', async function () {
      const { directory, storage } = await freshStorage()
      const restarted = await startedWith(directory, storage, planMembership(storage, { ...flags('n4', { join: true }), incarnation }))
      expect(restarted.membershipRecord()).to.deep.equal({ voters: [], voteFromIndex: VOTE_INDEX_UNKNOWN, incarnation })
      expect(planMembership(restarted, { ...flags('n4', { join: true }), incarnation: other })).to.deep.equal({
        ok: true,
        record: { voters: [], voteFromIndex: VOTE_INDEX_UNKNOWN, incarnation },
        save: false,
        next: 'join',
      })
    })

    it('is added to a record written before records had one, and only that changes (saved)', async function () {
      const { directory, storage } = await freshStorage()
      await storage.persist({ entries: [entry(1, 1)], hardState: { term: 1, votedFor: 'n1', commitIndex: 1 } }, true)
      await storage.saveMembershipRecord({ voters: ['n1', 'n2', 'n3'], voteFromIndex: 0 })
      const restarted = await reopen(directory, storage)
      expect(planMembership(restarted, { ...flags('n1', { peers: ['n5'] }), incarnation })).to.deep.equal({
        ok: true,
        record: { voters: ['n1', 'n2', 'n3'], voteFromIndex: 0, incarnation },
        save: true,
        next: 'run',
      })
    })
  })

  describe('decideFounding', function () {
    const three = ['n1', 'n2', 'n3']
    const five = ['n1', 'n2', 'n3', 'n4', 'n5']

    it('rejoins as soon as any peer holds Raft state, whatever the others answered and in any order', function () {
      expect(decideFounding(three, answers([['n2', true]]))).to.equal('rejoin')
      expect(decideFounding(three, answers([['n2', false], ['n3', true]]))).to.equal('rejoin')
      expect(decideFounding(three, answers([['n3', true], ['n2', false]]))).to.equal('rejoin')
      expect(decideFounding(five, answers([['n2', false], ['n3', false], ['n4', false], ['n5', true]]))).to.equal('rejoin')
    })

    it('founds once every other founder answered that it holds none', function () {
      expect(decideFounding(three, answers([['n2', false], ['n3', false]]))).to.equal('found')
      expect(decideFounding(five, answers([['n2', false], ['n3', false], ['n4', false], ['n5', false]]))).to.equal('found')
      expect(decideFounding(['n1'], answers([]))).to.equal('found')
    })

    it('waits while any founder has not answered: a silent one may hold the cluster (a majority is not enough)', function () {
      expect(decideFounding(three, answers([]))).to.equal('wait')
      expect(decideFounding(three, answers([['n2', false]]))).to.equal('wait')
      expect(decideFounding(five, answers([['n2', false], ['n4', false]]))).to.equal('wait')
      expect(decideFounding(['n1', 'n2'], answers([]))).to.equal('wait')
      expect(decideFounding(['n1', 'n2', 'n3', 'n4'], answers([['n2', false], ['n3', false]]))).to.equal('wait')
    })
  })

  describe('peerFlagsProblem', function () {
    const founded: MembershipRecord = { voters: ['n1', 'n2', 'n3'], voteFromIndex: 0 }
    const joined: MembershipRecord = { voters: [], voteFromIndex: 12 }

    it('accepts no --peer flags at all', function () {
      expect(peerFlagsProblem(founded, ['n1', 'n2', 'n3', 'n4'], flags('n1'))).to.equal(undefined)
      expect(peerFlagsProblem(joined, [], flags('n4', { join: true }))).to.equal(undefined)
    })

    it('accepts the founding set, in any order, with or without this node', function () {
      expect(peerFlagsProblem(founded, ['n1', 'n2', 'n3', 'n4'], flags('n1', { peers: ['n3', 'n2'] }))).to.equal(undefined)
      expect(peerFlagsProblem(founded, ['n1', 'n2', 'n3', 'n4'], flags('n1', { peers: ['n1', 'n2', 'n3'] }))).to.equal(undefined)
    })

    it('accepts the current members (flags updated after a membership change)', function () {
      expect(peerFlagsProblem(founded, ['n1', 'n2', 'n3', 'n4'], flags('n1', { peers: ['n2', 'n3', 'n4'] }))).to.equal(undefined)
      expect(peerFlagsProblem(founded, ['n4', 'n2', 'n1'], flags('n1', { peers: ['n2', 'n4'] }))).to.equal(undefined)
      expect(peerFlagsProblem(joined, ['n1', 'n2', 'n3', 'n4'], flags('n4', { peers: ['n1', 'n2', 'n3'] }))).to.equal(undefined)
    })

    it('refuses any other set, naming the founders, the current members and what the flags name', function () {
      const problem = peerFlagsProblem(founded, ['n1', 'n2', 'n3', 'n4'], flags('n1', { peers: ['n2', 'n5'] }))
      expect(problem).to.be.a('string')
      expect(problem).to.include('was founded with n1, n2, n3')
      expect(problem).to.include('has the members n1, n2, n3, n4')
      expect(problem).to.include('the flags name n1, n2, n5')
      expect(problem).to.match(/^--peer: /)
      // A subset of the founders is another set too.
      expect(peerFlagsProblem(founded, ['n1', 'n2', 'n3'], flags('n1', { peers: ['n2'] }))).to.include('the flags name n1, n2')
    })

    it('for a server that joined, names the members only (it has no founders)', function () {
      const problem = peerFlagsProblem(joined, ['n3', 'n1', 'n4'], flags('n4', { peers: ['n1', 'n2'] }))
      expect(problem).to.include("this server's cluster has the members n1, n3, n4")
      expect(problem).to.include('the flags name n1, n2, n4')
      expect(problem).not.to.include('founded')
    })

    it('says when no member is known yet', function () {
      const problem = peerFlagsProblem(joined, [], flags('n4', { peers: ['n1'] }))
      expect(problem).to.include('has the members (none known yet)')
    })
  })
})
