/**
 * `propose(command, { leaderOnly: true })` (rpc/cluster.ts): work only the leader does (the ACL replication's
 * batches) is proposed by this node while it leads, or not at all: never forwarded, never waiting for a next leader.
 * A deposed replication leader's batch forwarded to the new leader would be applied after the new leader's newer ones.
 *
 * Method: n1 over real storage in a temporary dir, in a configuration of two voters whose other (n2) never answers,
 * so n1 never leads: a plain propose waits for a leader; a leaderOnly one is refused at once and writes nothing.
 */
import { expect } from 'chai'
import { join } from 'node:path'
import { WardenError } from '../../../src/lib/errors.js'
import { LevelRaftStorage } from '../../../src/raft/storage/level-storage.js'
import { StateStore } from '../../../src/state/store.js'
import { commands, createSingleNode } from '../../support/state.js'
import { useTempDirs } from '../../support/temp-dir.js'

describe('propose with leaderOnly', function () {
  const dirs = useTempDirs()

  it('is refused at once with no_leader on a node that does not lead, where a plain propose waits for a leader', async () => {
    const dir = await dirs.make('warden-leader-only-')
    const storage = await LevelRaftStorage.open(join(dir, 'raft'))
    const state = await StateStore.open(join(dir, 'state'))
    await storage.saveMembershipRecord({ voters: ['n1', 'n2'], voteFromIndex: 0 })
    const fatal: unknown[] = []
    const { replica, cluster } = await createSingleNode('n1', storage, state, (error) => fatal.push(error))
    dirs.defer(async () => {
      await replica.stop({ transferLeadership: false })
      await state.close()
      await storage.close()
    })
    await replica.start()
    const lastIndex = storage.lastIndex()
    let plainSettled = false
    const plain = cluster.propose(commands.noop()).finally(() => (plainSettled = true))
    plain.catch(() => undefined)
    const refusal = await cluster.propose(commands.noop(), { leaderOnly: true }).then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(refusal).to.be.instanceOf(WardenError)
    expect((refusal as WardenError).code).to.equal('no_leader')
    expect(plainSettled, 'the plain propose still waits for a leader').to.equal(false)
    expect(storage.lastIndex()).to.equal(lastIndex)
    expect(fatal).to.deep.equal([])
  })
})
