/**
 * A server alone is a one-voter Raft group (issue 16, defect 7: the old single node wrote its own log and never
 * compacted it, so the log grew without bound). Over real Raft storage and state in a temporary data dir, with a small
 * snapshot threshold: after enough writes the node has taken a snapshot and compacted its log behind it, and a restart
 * on the same data dir (opened as the agent opens it) comes back with every record and goes on writing.
 */
import { expect } from 'chai'
import { join } from 'node:path'
import { LevelRaftStorage } from '../../../src/raft/storage/level-storage.js'
import type { RaftReplica } from '../../../src/replica/raft-replica.js'
import type { ClusterNode } from '../../../src/rpc/cluster-node.js'
import { COMMAND_VERSION, type Command } from '../../../src/state/commands.js'
import { directoryFiles } from '../../../src/state/files.js'
import { finishStateSwitch } from '../../../src/state/snapshot.js'
import { StateStore } from '../../../src/state/store.js'
import { listRecords, policySpec } from '../../../src/state/tables.js'
import { createSingleNode } from '../../support/state.js'
import { useTempDirs, type TempDirs } from '../../support/temp-dir.js'

const SNAPSHOT_THRESHOLD = 20
const WRITES = 100

function policyCreate(n: number): Command {
  const id = `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`
  return { v: COMMAND_VERSION, type: 'acl.policy.create', policy: { ID: id, Name: `policy-${n}`, Description: '', Rules: 'acl = "read"', Datacenters: [], Namespace: 'default' } }
}

interface Node {
  storage: LevelRaftStorage
  state: StateStore
  replica: RaftReplica
  cluster: ClusterNode
  /** Stops the replica, then closes the state and the log (also run at cleanup if the test did not). */
  stop(): Promise<void>
}

/**
 * Opens the data dir as the agent does (Raft storage, the state switch, the state) and starts a one-voter group on it
 * with test/support/state.ts createSingleNode, with a small snapshot threshold; resolves once it leads.
 */
async function startAlone(
  dirs: TempDirs,
  dataDir: string,
  fatal: unknown[],
  bytes: { snapshotBytesThreshold?: number; trailingBytesMax?: number; applyQueueEntriesMax?: number } = {},
): Promise<Node> {
  const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
  let state: StateStore | undefined
  let replica: RaftReplica | undefined
  let stopped: Promise<void> | undefined
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      await replica?.stop()
      await state?.close()
      await storage.close()
    })())
  dirs.defer(stop)
  const files = directoryFiles(join(dataDir, 'state'))
  await finishStateSwitch(files, storage.snapshot()?.index ?? 0)
  state = await StateStore.openFiles(files)
  const created = await createSingleNode('n1', storage, state, (error) => fatal.push(error), { snapshotThreshold: SNAPSHOT_THRESHOLD, ...bytes })
  replica = created.replica
  const cluster = created.cluster
  await replica.start()
  await cluster.readBarrier('consistent')
  return { storage, state, replica, cluster, stop }
}

/**
 * Holds the first apply of an entry after the index given to `holdAfter` until `release`. Released also at cleanup,
 * so that a failed assertion does not leave the cleanup's stop waiting on the apply.
 */
function holdApplies(dirs: TempDirs, node: Node): { holdAfter(index: number): void; holding(): boolean; release(): void } {
  let after = Number.MAX_SAFE_INTEGER
  let release: (() => void) | undefined
  const apply = node.state.applyEntries.bind(node.state)
  Object.assign(node.state, {
    applyEntries: async (...args: Parameters<StateStore['applyEntries']>) => {
      if (release === undefined && args[0].some((entry) => entry.index > after)) await new Promise<void>((resolve) => (release = resolve))
      return apply(...args)
    },
  })
  const gate = {
    holdAfter(index: number): void {
      after = index
      release = undefined
    },
    holding: (): boolean => release !== undefined,
    release(): void {
      after = Number.MAX_SAFE_INTEGER
      release?.()
    },
  }
  // Also an apply not reached yet when an assertion failed: the cleanup's stop waits for the queued applies.
  dirs.defer(async () => gate.release())
  return gate
}

/** `promise`, with its rejection observed: a test that fails before awaiting it leaves no unhandled rejection. */
function observed<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined)
  return promise
}

/** Waits until the node has applied all it holds and has written nothing new for 300 ms (its own first entries). */
async function settled(node: Node): Promise<void> {
  let last = -1
  let since = Date.now()
  await until(() => {
    const index = node.storage.lastIndex()
    if (index !== last || node.state.lastApplied !== index) {
      last = index
      since = Date.now()
    }
    return Date.now() - since >= 300
  }, 'the node never settled after its start')
}

/** Polls `condition` every few ms for up to 5 s; fails with `message` when it never holds. */
async function until(condition: () => boolean, message: string): Promise<void> {
  const deadline = Date.now() + 5_000
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(message)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

async function policyNames(state: StateStore): Promise<string[]> {
  return (await listRecords(state.reader, policySpec)).map((policy) => policy.Name).sort()
}

describe('replica: a server alone is a one-voter Raft group', function () {
  const dirs = useTempDirs()

  it('compacts its Raft log behind a snapshot every snapshotThreshold entries, and restarts with every record', async function () {
    const dataDir = await dirs.make('warden-alone-')
    const fatal: unknown[] = []
    const expected = Array.from({ length: WRITES }, (_, n) => `policy-${n + 1}`).sort()

    const first = await startAlone(dirs, dataDir, fatal)
    for (let n = 1; n <= WRITES; n += 1) {
      const result = await first.cluster.propose(policyCreate(n))
      expect(result.ok, JSON.stringify(result)).to.equal(true)
    }
    const applied = first.state.lastApplied
    expect(applied).to.be.at.least(WRITES)
    expect(first.storage.snapshot()?.index ?? 0, 'no snapshot was taken').to.be.at.least(applied - SNAPSHOT_THRESHOLD)
    expect(first.storage.firstIndex(), 'the Raft log was never compacted').to.be.above(1)
    expect(first.storage.lastIndex()).to.equal(applied)
    await first.stop()

    const second = await startAlone(dirs, dataDir, fatal)
    expect(second.storage.firstIndex(), 'the compaction did not survive the restart').to.be.above(1)
    expect(second.state.lastApplied).to.be.at.least(applied)
    expect(await policyNames(second.state)).to.deep.equal(expected)
    // It goes on writing after the restart.
    const result = await second.cluster.propose(policyCreate(WRITES + 1))
    expect(result.ok, JSON.stringify(result)).to.equal(true)
    expect(await policyNames(second.state)).to.include(`policy-${WRITES + 1}`)
    await second.stop()
    expect(fatal).to.deep.equal([])
  })

  it('snapshots by bytes too, and keeps at most trailingBytesMax behind: large entries never pile up in memory', async function () {
    const dataDir = await dirs.make('warden-alone-bytes-')
    const fatal: unknown[] = []
    const MiB = 1024 * 1024
    // Fewer entries than the count threshold, each about 320 KB: only the byte bounds can compact them.
    const node = await startAlone(dirs, dataDir, fatal, { snapshotBytesThreshold: 4 * MiB, trailingBytesMax: 1 * MiB })
    const description = 'd'.repeat(320 * 1024)
    for (let n = 1; n <= 16; n += 1) {
      const command = policyCreate(n) as Extract<Command, { type: 'acl.policy.create' }>
      const result = await node.cluster.propose({ ...command, policy: { ...command.policy, Description: description } })
      expect(result.ok, JSON.stringify(result).slice(0, 200)).to.equal(true)
    }
    expect(node.state.lastApplied, 'the count threshold was not reached').to.be.below(SNAPSHOT_THRESHOLD)
    expect(node.storage.snapshot()?.index ?? 0, 'no snapshot was taken by bytes').to.be.above(0)
    expect(node.storage.firstIndex(), 'the log was not compacted').to.be.above(1)
    // Behind the snapshot, at most the trailing bytes (the count alone would keep all of them: 1,024 entries).
    const snapshotIndex = node.storage.snapshot()!.index
    let behind = 0
    for (const entry of node.storage.entries(node.storage.firstIndex(), snapshotIndex + 1)) behind += entry.data.length
    expect(behind).to.be.at.most(1 * MiB)
    expect(node.storage.firstIndex()).to.be.above(2)
    await node.stop()
    expect(fatal).to.deep.equal([])
  })
  it('persists and commits what comes next while an apply runs, applies in order, and stops only once it is done', async function () {
    const dataDir = await dirs.make('warden-alone-overlap-')
    const fatal: unknown[] = []
    const node = await startAlone(dirs, dataDir, fatal)
    const gate = holdApplies(dirs, node)
    await settled(node)
    const before = node.storage.lastIndex()
    gate.holdAfter(before)
    const first = observed(node.cluster.propose(policyCreate(1)))
    await until(() => gate.holding(), 'the first write was never handed out to apply')
    const second = observed(node.cluster.propose(policyCreate(2)))
    // The loop goes on while the first apply is held: the second entry is persisted and committed.
    await until(() => node.storage.lastIndex() >= before + 2, 'the second write was not persisted while an apply ran')
    await until(() => node.replica.status().commitIndex >= before + 2, 'the second write did not commit while an apply ran')
    expect(node.state.lastApplied).to.equal(before)
    gate.release()
    const results = await Promise.all([first, second])
    expect(results.map((result) => result.ok)).to.deep.equal([true, true])
    expect(node.state.lastApplied).to.be.at.least(before + 2)
    expect(await policyNames(node.state)).to.deep.equal(['policy-1', 'policy-2'])

    // A stop waits for the apply under way: the state is not closed under it.
    gate.holdAfter(node.state.lastApplied)
    const third = node.cluster.propose(policyCreate(3)).catch((error: unknown) => error)
    await until(() => gate.holding(), 'the third write was never handed out to apply')
    let stopped = false
    const stopping = node.stop().then(() => (stopped = true))
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(stopped, 'the replica stopped with an apply under way').to.equal(false)
    gate.release()
    await stopping
    await third
    expect(node.state.lastApplied).to.be.at.least(before + 3)
    expect(fatal).to.deep.equal([])
  })

  it('waits for the apply once applyQueueEntriesMax entries wait for it: a slow apply holds no more than that', async function () {
    const dataDir = await dirs.make('warden-alone-bound-')
    const fatal: unknown[] = []
    const node = await startAlone(dirs, dataDir, fatal, { applyQueueEntriesMax: 2 })
    const gate = holdApplies(dirs, node)
    await settled(node)
    const before = node.storage.lastIndex()
    gate.holdAfter(before)
    // One write at a time: 1 is held in its apply and 2 waits behind it (two entries waiting). Handing out 3 would make
    // three, so the loop waits there: neither 4 nor 5 commits (4 may have been persisted by the Ready that waits).
    const writes = [observed(node.cluster.propose(policyCreate(1)))]
    await until(() => gate.holding(), 'the first write was never handed out to apply')
    for (const n of [2, 3]) {
      writes.push(observed(node.cluster.propose(policyCreate(n))))
      await until(() => node.replica.status().commitIndex >= before + n, `write ${n} did not commit while the apply was held`)
    }
    writes.push(observed(node.cluster.propose(policyCreate(4))), observed(node.cluster.propose(policyCreate(5))))
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(node.replica.status().commitIndex, 'the loop went on past the bound').to.equal(before + 3)
    expect(node.storage.lastIndex(), 'the loop went on past the bound').to.be.below(before + 5)
    gate.release()
    const results = await Promise.all(writes)
    expect(results.map((result) => result.ok)).to.deep.equal([true, true, true, true, true])
    expect(await policyNames(node.state)).to.deep.equal(['policy-1', 'policy-2', 'policy-3', 'policy-4', 'policy-5'])
    await node.stop()
    expect(fatal).to.deep.equal([])
  })
})
