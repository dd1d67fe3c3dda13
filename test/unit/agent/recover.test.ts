/**
 * `warden recover`'s rewrite of a survivor's data dir (src/agent/recover.ts), on real LevelDB stores built the way the
 * replica leaves them: the state has applied everything in the log (committed or not), the Raft storage
 * holds one snapshot at that index whose configuration names this node alone, no entry, a hard state with no vote and
 * everything committed, and the membership record keeps its founders but lets the node vote. The cases are the ones a
 * crash or the log's age leaves: a log with entries the state had not applied, an already-compacted log, a snapshot
 * switch a crash interrupted, a server that holds only a term; and each rewritten dir is started as a one-voter
 * replica that must lead and take a write. The refusals leave the data dir as it was. The command's flags and its
 * confirmation are run in-process with a fake terminal; test/cluster/recover.test.ts runs the real command.
 */
import { expect } from 'chai'
import { access, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { PendingRecovery, recoverDataDir, RecoveryRefused, runRecover, type RecoverIo } from '../../../src/agent/recover.js'
import { encodeConfiguration } from '../../../src/raft/configuration.js'
import { LevelRaftStorage } from '../../../src/raft/storage/level-storage.js'
import type { MembershipRecord } from '../../../src/raft/storage/raft-storage.js'
import type { Entry, HardState } from '../../../src/raft/types.js'
import type { Command, PolicyWrite } from '../../../src/state/commands.js'
import { directoryFiles } from '../../../src/state/files.js'
import { IncomingState } from '../../../src/state/snapshot.js'
import { encodeCommand, StateStore } from '../../../src/state/store.js'
import { listRecords, policySpec } from '../../../src/state/tables.js'
import { commands, dump, openStores, startSingleNode } from '../../support/state.js'
import { useTempDirs, type TempDirs } from '../../support/temp-dir.js'

/** The error `promise` rejects with; a promise that resolves fails the test. */
async function thrown(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error('expected a rejection')
}

const FOUNDERS: MembershipRecord = { voters: ['n1', 'n2', 'n3'], voteFromIndex: 0 }

function policy(n: number): PolicyWrite {
  return { ID: `bbbbbbbb-0000-4000-8000-${n.toString(16).padStart(12, '0')}`, Name: `policy-${n}`, Description: '', Rules: '', Datacenters: [], Namespace: 'default' }
}

function command(index: number, term: number, body: Command): Entry {
  return { index, term, type: 'command', data: encodeCommand(body) }
}

function noop(index: number, term: number): Entry {
  return { index, term, type: 'noop', data: new Uint8Array(0) }
}

function configuration(index: number, term: number, voters: string[], learners: string[] = []): Entry {
  return { index, term, type: 'configuration', data: encodeConfiguration({ voters, learners }) }
}

/**
 * The log of these tests: a leader's noop, the built-ins, policy-1 and -2 in term 1; a configuration adding n4 as a
 * learner, policy-3 in term 2; a noop and policy-4 in term 3.
 */
function theLog(): Entry[] {
  return [
    noop(1, 1),
    command(2, 1, commands.init()),
    command(3, 1, commands.policyCreate(policy(1))),
    command(4, 1, commands.policyCreate(policy(2))),
    configuration(5, 2, ['n1', 'n2', 'n3'], ['n4']),
    command(6, 2, commands.policyCreate(policy(3))),
    noop(7, 3),
    command(8, 3, commands.policyCreate(policy(4))),
  ]
}

interface Layout {
  /** Entries in the Raft log (before any compaction). */
  entries: Entry[]
  hardState: HardState
  /** How many of the entries the state applied. */
  applied: number
  /** A snapshot recorded at this index, and the log compacted to it (the replica's maybeSnapshot). */
  compactedTo?: number
  membership?: MembershipRecord | null
}

/** Builds a data dir as the replica would have left it, and closes it (recover opens it as the command does). */
async function buildDataDir(dirs: TempDirs, layout: Layout): Promise<string> {
  const dataDir = await dirs.make('warden-recover-')
  const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
  const state = await StateStore.open(join(dataDir, 'state'))
  try {
    if (layout.entries.length > 0) await storage.persist({ entries: layout.entries, hardState: layout.hardState }, true)
    else await storage.persist({ entries: [], hardState: layout.hardState }, true)
    await state.applyEntries(layout.entries.slice(0, layout.applied))
    await state.sync()
    if (layout.compactedTo !== undefined) {
      await storage.saveSnapshot({ index: layout.compactedTo, term: storage.term(layout.compactedTo)!, configuration: { voters: ['n1', 'n2', 'n3'], learners: [] } })
      await storage.compact(layout.compactedTo)
    }
    const membership = layout.membership === undefined ? FOUNDERS : layout.membership
    if (membership !== null) await storage.saveMembershipRecord(membership)
  } finally {
    await state.close()
    await storage.close()
  }
  return dataDir
}

/** Everything the Raft storage shows, for "nothing changed" and "what it became". */
async function raftContents(dataDir: string): Promise<unknown> {
  const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
  try {
    const first = storage.firstIndex()
    const last = storage.lastIndex()
    return {
      hardState: storage.hardState(),
      snapshot: storage.snapshot(),
      firstIndex: first,
      lastIndex: last,
      termBeforeFirst: storage.term(first - 1),
      entries: storage.entries(first, last + 1).map((entry) => ({ index: entry.index, term: entry.term, type: entry.type })),
      membership: storage.membershipRecord(),
    }
  } finally {
    await storage.close()
  }
}

async function policyNames(state: StateStore): Promise<string[]> {
  return (await listRecords(state.reader, policySpec)).map((record) => record.Name).filter((name) => name.startsWith('policy-')).sort()
}

/** Starts the rewritten dir as the agent would (a replica over its stores), expects it to lead and take a write. */
async function expectLeadsAlone(dirs: TempDirs, dataDir: string, expectedPolicies: string[]): Promise<void> {
  const { storage, state } = await openStores(dirs, dataDir)
  expect(await policyNames(state)).to.deep.equal(expectedPolicies)
  const failures: unknown[] = []
  const { replica, cluster } = await startSingleNode('n1', storage, state, (error) => failures.push(error))
  dirs.defer(() => replica.stop())
  expect(replica.status().configuration).to.deep.equal({ voters: ['n1'], learners: [] })
  const written = await cluster.propose(commands.policyCreate(policy(99)))
  expect(written.ok, JSON.stringify(written)).to.equal(true)
  expect(await policyNames(state)).to.deep.equal([...expectedPolicies, 'policy-99'].sort())
  expect(failures).to.deep.equal([])
}

describe('agent: warden recover rewrites a survivor data dir into a cluster of one', function () {
  this.timeout(20_000)
  const dirs = useTempDirs()

  it('applies the entries the state had not applied, then starts from a snapshot at the last index with this node alone', async function () {
    const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 4, votedFor: 'n2', commitIndex: 3 }, applied: 3 })
    const result = await recoverDataDir(dataDir, 'n1')
    expect(result).to.deep.equal({ index: 8, term: 3, appliedNow: 5 })
    expect(await raftContents(dataDir)).to.deep.equal({
      hardState: { term: 4, votedFor: null, commitIndex: 8 },
      snapshot: { index: 8, term: 3, configuration: { voters: ['n1'], learners: [] } },
      firstIndex: 9,
      lastIndex: 8,
      termBeforeFirst: 3,
      entries: [],
      membership: { voters: ['n1', 'n2', 'n3'], voteFromIndex: 0 },
    })
    await expectLeadsAlone(dirs, dataDir, ['policy-1', 'policy-2', 'policy-3', 'policy-4'])
  })

  it('recovers an already-compacted log: applies the entries after the old snapshot, replaces the snapshot', async function () {
    const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 3, votedFor: 'n1', commitIndex: 6 }, applied: 6, compactedTo: 6 })
    expect(await raftContents(dataDir)).to.deep.include({ firstIndex: 7, lastIndex: 8 })
    expect(await recoverDataDir(dataDir, 'n1')).to.deep.equal({ index: 8, term: 3, appliedNow: 2 })
    expect(await raftContents(dataDir)).to.deep.include({
      hardState: { term: 3, votedFor: null, commitIndex: 8 },
      snapshot: { index: 8, term: 3, configuration: { voters: ['n1'], learners: [] } },
      firstIndex: 9,
      lastIndex: 8,
    })
    await expectLeadsAlone(dirs, dataDir, ['policy-1', 'policy-2', 'policy-3', 'policy-4'])
  })

  it('recovers a log compacted up to the applied index, with no entry left: the term comes from the compacted entry', async function () {
    const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 5, votedFor: 'n3', commitIndex: 8 }, applied: 8, compactedTo: 8 })
    expect(await raftContents(dataDir)).to.deep.include({ firstIndex: 9, lastIndex: 8 })
    expect(await recoverDataDir(dataDir, 'n1')).to.deep.equal({ index: 8, term: 3, appliedNow: 0 })
    expect(await raftContents(dataDir)).to.deep.include({
      hardState: { term: 5, votedFor: null, commitIndex: 8 },
      snapshot: { index: 8, term: 3, configuration: { voters: ['n1'], learners: [] } },
    })
    await expectLeadsAlone(dirs, dataDir, ['policy-1', 'policy-2', 'policy-3', 'policy-4'])
  })

  it('finishes a snapshot switch a crash interrupted before it applies the rest of the log', async function () {
    // A follower received the state at index 6 from its leader and recorded the snapshot in its log (the install's
    // persist step), then crashed before switching the staged state in; its live state is still at 2.
    const log = theLog()
    const dataDir = await dirs.make('warden-recover-switch-')
    const source = await StateStore.open(join(await dirs.make('warden-recover-source-'), 'state'))
    dirs.defer(() => source.close())
    await source.applyEntries(log.slice(0, 6))
    const staged = await IncomingState.create(directoryFiles(join(dataDir, 'state')))
    await staged.write(await dump(source))
    expect(await staged.complete()).to.equal(6)
    const live = await StateStore.open(join(dataDir, 'state'))
    await live.applyEntries(log.slice(0, 2))
    await live.close()
    const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
    await storage.persist({ entries: [], snapshot: { index: 6, term: 2, configuration: { voters: ['n1', 'n2', 'n3'], learners: ['n4'] } }, hardState: { term: 3, votedFor: null, commitIndex: 6 } }, true)
    await storage.persist({ entries: log.slice(6) }, true)
    await storage.saveMembershipRecord(FOUNDERS)
    await storage.close()

    expect(await recoverDataDir(dataDir, 'n1')).to.deep.equal({ index: 8, term: 3, appliedNow: 2 })
    await expectLeadsAlone(dirs, dataDir, ['policy-1', 'policy-2', 'policy-3', 'policy-4'])
  })

  it('recovers a server that holds only a term (no entry): a snapshot at index 0, term 0, naming it alone', async function () {
    const dataDir = await buildDataDir(dirs, { entries: [], hardState: { term: 3, votedFor: 'n2', commitIndex: 0 }, applied: 0 })
    expect(await recoverDataDir(dataDir, 'n1')).to.deep.equal({ index: 0, term: 0, appliedNow: 0 })
    expect(await raftContents(dataDir)).to.deep.include({
      hardState: { term: 3, votedFor: null, commitIndex: 0 },
      snapshot: { index: 0, term: 0, configuration: { voters: ['n1'], learners: [] } },
    })
    await expectLeadsAlone(dirs, dataDir, [])
  })

  it('leaves a data dir without a membership record without one (the agent records its flags at the next start)', async function () {
    const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 3, votedFor: 'n1', commitIndex: 8 }, applied: 8, membership: null })
    await recoverDataDir(dataDir, 'n1')
    expect(await raftContents(dataDir)).to.deep.include({ membership: null })
  })

  it('keeps the founders of a server that was still waiting to rejoin, and lets it vote', async function () {
    const dataDir = await buildDataDir(dirs, {
      entries: theLog(),
      hardState: { term: 3, votedFor: null, commitIndex: 8 },
      applied: 8,
      membership: { voters: ['n1', 'n2', 'n3'], voteFromIndex: Number.MAX_SAFE_INTEGER },
    })
    await recoverDataDir(dataDir, 'n1')
    expect(await raftContents(dataDir)).to.deep.include({ membership: { voters: ['n1', 'n2', 'n3'], voteFromIndex: 0 } })
  })

  it('lets a learner of the last configuration recover, and gives the same data dir when run again', async function () {
    const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 3, votedFor: null, commitIndex: 8 }, applied: 8, membership: { voters: [], voteFromIndex: 5 } })
    await recoverDataDir(dataDir, 'n4')
    const once = await raftContents(dataDir)
    expect(once).to.deep.include({ snapshot: { index: 8, term: 3, configuration: { voters: ['n4'], learners: [] } }, membership: { voters: [], voteFromIndex: 0 } })
    expect(await recoverDataDir(dataDir, 'n4')).to.deep.equal({ index: 8, term: 3, appliedNow: 0 })
    expect(await raftContents(dataDir)).to.deep.equal(once)
  })

  describe('refusals leave the data dir as it was', function () {
    it('refuses a data dir with no Raft storage, and creates none', async function () {
      const dataDir = await dirs.make('warden-recover-empty-')
      const error = await thrown(recoverDataDir(dataDir, 'n1'))
      expect(error).to.be.instanceOf(RecoveryRefused)
      expect((error as Error).message).to.match(/holds no Raft state/)
      expect(await access(join(dataDir, 'raft')).then(() => true, () => false)).to.equal(false)
      expect(await access(join(dataDir, 'state')).then(() => true, () => false)).to.equal(false)
    })

    it('refuses a Raft storage that holds nothing (no term, entry or snapshot)', async function () {
      const dataDir = await dirs.make('warden-recover-blank-')
      await (await LevelRaftStorage.open(join(dataDir, 'raft'))).close()
      const error = await thrown(recoverDataDir(dataDir, 'n1'))
      expect((error as Error).message).to.match(/holds no Raft state/)
    })

    it('refuses a node name that is not a member of the last configuration', async function () {
      const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 3, votedFor: null, commitIndex: 3 }, applied: 3 })
      const before = await raftContents(dataDir)
      const error = await thrown(recoverDataDir(dataDir, 'some-host'))
      expect(error).to.be.instanceOf(RecoveryRefused)
      expect((error as Error).message).to.include('some-host is not a member').and.include('n1, n2, n3, n4')
      expect(await raftContents(dataDir)).to.deep.equal(before)
    })

    it('refuses a data dir whose agent is running (its LevelDB is locked)', async function () {
      const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 3, votedFor: null, commitIndex: 3 }, applied: 3 })
      const held = await LevelRaftStorage.open(join(dataDir, 'raft'))
      dirs.defer(() => held.close())
      const error = await thrown(recoverDataDir(dataDir, 'n1'))
      expect(error).to.be.instanceOf(RecoveryRefused)
      expect((error as Error).message).to.match(/in use .*stop the agent/)
    })

    it('refuses a state that is behind the log\'s snapshot (the entries between are gone)', async function () {
      const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 3, votedFor: null, commitIndex: 8 }, applied: 3, compactedTo: 6 })
      const before = await raftContents(dataDir)
      const error = await thrown(recoverDataDir(dataDir, 'n1'))
      expect(error).to.be.instanceOf(RecoveryRefused)
      expect((error as Error).message).to.match(/applied up to index 3, but the log starts after 6/)
      expect(await raftContents(dataDir)).to.deep.equal(before)
    })

    it('refuses a data dir whose state is missing while its log starts from a snapshot, and creates no state', async function () {
      const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 3, votedFor: null, commitIndex: 8 }, applied: 8, compactedTo: 6 })
      await rm(join(dataDir, 'state'), { recursive: true })
      const before = await raftContents(dataDir)
      const error = await thrown(recoverDataDir(dataDir, 'n1'))
      expect(error).to.be.instanceOf(RecoveryRefused)
      expect((error as Error).message).to.match(/has no state/)
      expect(await raftContents(dataDir)).to.deep.equal(before)
      expect(await access(join(dataDir, 'state')).then(() => true, () => false)).to.equal(false)
    })
  })

  describe('the command', function () {
    /** A fake terminal: what the command wrote, and the answer it gets if it asks (undefined: no terminal). */
    function fakeIo(answer?: string): RecoverIo & { stdout: string[]; stderr: string[]; asked: string[] } {
      const io = {
        stdout: [] as string[],
        stderr: [] as string[],
        asked: [] as string[],
        out: (line: string) => void io.stdout.push(line),
        err: (text: string) => void io.stderr.push(text),
        ask:
          answer === undefined
            ? undefined
            : async (question: string) => {
                io.asked.push(question)
                return answer
              },
      }
      return io
    }

    it('without --yes and without a terminal: prints the warning, exits 2, changes nothing', async function () {
      const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 3, votedFor: null, commitIndex: 3 }, applied: 3 })
      const before = await raftContents(dataDir)
      const io = fakeIo()
      expect(await runRecover(['--data-dir', dataDir, '--node-name', 'n1'], io)).to.equal(2)
      const stderr = io.stderr.join('')
      expect(stderr).to.include('WARNING').and.include('LOST').and.include('n2, n3, n4 leave the cluster').and.include('pass --yes')
      expect(io.stdout).to.deep.equal([])
      expect(await raftContents(dataDir)).to.deep.equal(before)
    })

    it('asks on a terminal: anything but y changes nothing (exit 2); y recovers (exit 0, one line)', async function () {
      const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 3, votedFor: null, commitIndex: 3 }, applied: 3 })
      const before = await raftContents(dataDir)
      const no = fakeIo('n')
      expect(await runRecover(['--data-dir', dataDir, '--node-name', 'n1'], no)).to.equal(2)
      expect(no.asked).to.have.length(1)
      expect(await raftContents(dataDir)).to.deep.equal(before)
      const yes = fakeIo('y')
      expect(await runRecover(['--data-dir', dataDir, '--node-name', 'n1'], yes)).to.equal(0)
      expect(yes.stdout).to.have.length(1)
      expect(yes.stdout[0]).to.include('n1 now forms a cluster of one').and.include('--peer').and.include('--join')
      expect(await raftContents(dataDir)).to.deep.include({ snapshot: { index: 8, term: 3, configuration: { voters: ['n1'], learners: [] } } })
    })

    it('exits 2 for a bad flag, a missing --data-dir or a bad node name; 1 with one line for a refusal', async function () {
      const empty = await dirs.make('warden-recover-cli-')
      for (const argv of [['--data-dir', empty, '--bogus'], ['--node-name', 'n1'], ['--data-dir', empty, '--node-name', 'bad name'], ['positional']]) {
        const io = fakeIo()
        expect(await runRecover(argv, io), argv.join(' ')).to.equal(2)
        expect(io.stderr.join('')).to.match(/^warden recover: /)
      }
      const io = fakeIo()
      expect(await runRecover(['--data-dir', empty, '--node-name', 'n1', '--yes'], io)).to.equal(1)
      expect(io.stderr.join('').trimEnd().split('\n')).to.have.length(1)
    })

    it('holds the data dir open while it asks, so an agent cannot start on it meanwhile', async function () {
      const dataDir = await buildDataDir(dirs, { entries: theLog(), hardState: { term: 3, votedFor: null, commitIndex: 3 }, applied: 3 })
      const pending = await PendingRecovery.open(dataDir, 'n1')
      dirs.defer(() => pending.close())
      const error = await thrown(LevelRaftStorage.open(join(dataDir, 'raft')))
      expect((error as { cause?: { code?: string } }).cause?.code).to.equal('LEVEL_LOCKED')
    })
  })
})
