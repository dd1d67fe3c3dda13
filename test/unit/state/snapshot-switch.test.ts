/**
 * The state switch at start (src/state/snapshot.ts finishStateSwitch) over real LevelDB directories: a staged state
 * (a snapshot received from a leader, beside the live state) is switched in only when the Raft log depends on it — it
 * is complete, the Raft snapshot was recorded at exactly its applied index, and it is newer than the live state — and
 * is discarded otherwise, so that a start never replaces live state with older state (issue 16, defect 3: a snapshot
 * the core refused stayed staged, and the next start switched it in over newer live state). A crash between the two
 * renames of a switch is recovered, and an incomplete staging is discarded.
 *
 * Each test builds the live state and the staged state by applying commands to real stores (a policy per record, noops
 * in between), then runs finishStateSwitch as the agent does before it opens the state, and reopens the live state.
 */
import { expect } from 'chai'
import { join } from 'node:path'
import { directoryFiles, type StateFiles } from '../../../src/state/files.js'
import { finishStateSwitch, IncomingState } from '../../../src/state/snapshot.js'
import { pairsOf, stateContents, writeState, type StateShape } from '../../support/state-shape.js'
import { useTempDirs, type TempDirs } from '../../support/temp-dir.js'

/** Stages a state of `shape` beside the live one: fully received and marked complete, as a finished stream leaves it. */
async function stageComplete(dirs: TempDirs, files: StateFiles, shape: StateShape): Promise<void> {
  const pairs = await pairsOf(dirs, shape)
  const incoming = await IncomingState.create(files)
  dirs.defer(() => incoming.abort().catch(() => undefined))
  await incoming.write(pairs)
  expect(await incoming.complete()).to.equal(shape.appliedTo)
}

/** Stages part of a state of `shape` without the completion mark, as a stream cut short by a crash leaves it. */
async function stageIncomplete(dirs: TempDirs, files: StateFiles, shape: StateShape): Promise<void> {
  const pairs = await pairsOf(dirs, shape)
  const db = await files.openDb('incoming')
  dirs.defer(() => db.close())
  await db.batch(pairs.map(([key, value]) => ({ type: 'put' as const, key, value: Buffer.from(value) })))
  await db.close()
}

describe('state/snapshot: finishStateSwitch at start', function () {
  const dirs = useTempDirs()
  let directory: string
  let files: StateFiles

  /** The live state: applied to 30, with a policy from before the stale snapshot and one from after it. */
  const LIVE: StateShape = { appliedTo: 30, policies: { 'early-policy': 3, 'late-policy': 25 } }
  /** A snapshot the core refused, older than the live state, that only it has a record of. */
  const STALE: StateShape = { appliedTo: 10, policies: { 'early-policy': 3, 'stale-only-policy': 7 } }

  beforeEach(async function () {
    directory = join(await dirs.make('warden-switch-'), 'state')
    files = directoryFiles(directory)
  })

  async function expectOnlyLive(): Promise<void> {
    expect(await files.exists('incoming'), 'the staging directory is left').to.equal(false)
    expect(await files.exists('old'), 'the retired state is left').to.equal(false)
  }

  it('a complete staged state older than the live state is discarded when the node has snapshotted past it', async function () {
    await writeState(dirs, directory, LIVE)
    await stageComplete(dirs, files, STALE)
    // The node took its own snapshot at the live state's applied index after refusing the staged one.
    await finishStateSwitch(files, LIVE.appliedTo)
    expect(await stateContents(dirs, directory)).to.deep.equal({ applied: 30, policies: ['early-policy', 'late-policy'] })
    await expectOnlyLive()
  })

  it('a complete staged state older than the live state is discarded whatever Raft snapshot index at or above its own is recorded', async function () {
    for (const raftSnapshotIndex of [STALE.appliedTo + 5, LIVE.appliedTo + 10]) {
      await writeState(dirs, directory, LIVE)
      await stageComplete(dirs, files, STALE)
      await finishStateSwitch(files, raftSnapshotIndex)
      expect(await stateContents(dirs, directory), `Raft snapshot index ${raftSnapshotIndex}`).to.deep.equal({ applied: 30, policies: ['early-policy', 'late-policy'] })
      await expectOnlyLive()
      await files.remove('live')
    }
  })

  it('a staged state at exactly the Raft snapshot index is still discarded when the live state has applied past it', async function () {
    await writeState(dirs, directory, LIVE)
    await stageComplete(dirs, files, STALE)
    await finishStateSwitch(files, STALE.appliedTo)
    expect(await stateContents(dirs, directory)).to.deep.equal({ applied: 30, policies: ['early-policy', 'late-policy'] })
    await expectOnlyLive()
  })

  it('a complete staged state at the Raft snapshot index and newer than the live state is switched in (crash after persist, before the switch)', async function () {
    await writeState(dirs, directory, { appliedTo: 10, policies: { 'early-policy': 3 } })
    await stageComplete(dirs, files, { appliedTo: 40, policies: { 'early-policy': 3, 'leader-policy': 33 } })
    await finishStateSwitch(files, 40)
    expect(await stateContents(dirs, directory)).to.deep.equal({ applied: 40, policies: ['early-policy', 'leader-policy'] })
    await expectOnlyLive()
  })

  it('a crash between the two renames of a switch (live missing, old present) completes the switch to the staged state', async function () {
    await writeState(dirs, directory, { appliedTo: 10, policies: { 'early-policy': 3 } })
    await stageComplete(dirs, files, { appliedTo: 40, policies: { 'early-policy': 3, 'leader-policy': 33 } })
    // switchToStagedState got as far as live → old.
    await files.rename('live', 'old')
    await finishStateSwitch(files, 40)
    expect(await stateContents(dirs, directory)).to.deep.equal({ applied: 40, policies: ['early-policy', 'leader-policy'] })
    await expectOnlyLive()
  })

  it('a live state missing beside an old one is taken back from old when nothing staged may be installed', async function () {
    await writeState(dirs, directory, LIVE)
    await stageComplete(dirs, files, { appliedTo: 40, policies: { 'leader-policy': 33 } })
    await files.rename('live', 'old')
    // No Raft snapshot records the staged state: it is not installed, and the old state is live again.
    await finishStateSwitch(files, 0)
    expect(await stateContents(dirs, directory)).to.deep.equal({ applied: 30, policies: ['early-policy', 'late-policy'] })
    await expectOnlyLive()
  })

  it('a complete staged state the Raft log does not record (the install never persisted) is discarded', async function () {
    await writeState(dirs, directory, LIVE)
    await stageComplete(dirs, files, { appliedTo: 40, policies: { 'leader-policy': 33 } })
    await finishStateSwitch(files, 0)
    expect(await stateContents(dirs, directory)).to.deep.equal({ applied: 30, policies: ['early-policy', 'late-policy'] })
    await expectOnlyLive()
  })

  it('an incomplete staged state (a stream cut short) is discarded and the live state kept', async function () {
    await writeState(dirs, directory, { appliedTo: 10, policies: { 'early-policy': 3 } })
    await stageIncomplete(dirs, files, { appliedTo: 40, policies: { 'early-policy': 3, 'leader-policy': 33 } })
    await finishStateSwitch(files, 40)
    expect(await stateContents(dirs, directory)).to.deep.equal({ applied: 10, policies: ['early-policy'] })
    await expectOnlyLive()
  })
})
