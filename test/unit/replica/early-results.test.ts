/**
 * A write whose caller renders its answer from the result alone (ProposeOptions.answerBeforeLocalApply, every write of
 * the HTTP API) is answered once its batch's results are computed, before LevelDB has the batch (issue 22): the answer
 * leaves while the batch is written. What the node serves after that answer waits for the batch, so a read there
 * still sees the write; a batch that changes a policy or a role, whose names answers render from the state, and a
 * write whose caller goes on to read the state (no answerBeforeLocalApply) are answered only once the batch is
 * written. Over a real single-node replica; the state's LevelDB batches are held at a gate to make the order visible.
 */
import { expect } from 'chai'
import { COMMAND_VERSION } from '../../../src/state/commands.js'
import type { StateStore } from '../../../src/state/store.js'
import { getRecord, tokenSpec } from '../../../src/state/tables.js'
import { buildTokenCreate, commands, useReplica } from '../../support/state.js'
import { eventually } from '../../cluster/eventually.js'

const NOT_YET = Symbol('not settled')

/** Gates still held when a test ends, released before its replica is stopped (which waits for the held apply). */
const gates: Array<() => void> = []

/** Holds every LevelDB batch of the state's database until released; released also when the test ends. */
function holdBatches(state: StateStore): { held(): number; release(): void } {
  const db = state.db as unknown as { batch: (...args: unknown[]) => Promise<void> }
  const batch = db.batch.bind(db)
  let held = 0
  let open: Promise<void> | undefined
  let release: (() => void) | undefined
  open = new Promise<void>((resolve) => (release = resolve))
  db.batch = async (...args: unknown[]) => {
    if (open !== undefined) {
      held += 1
      await open
    }
    return batch(...args)
  }
  const gate = {
    held: () => held,
    release(): void {
      open = undefined
      release?.()
    },
  }
  gates.push(() => gate.release())
  return gate
}

/** The promise's value if it settles within `ms`, else NOT_YET. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | typeof NOT_YET> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<typeof NOT_YET>((resolve) => (timer = setTimeout(() => resolve(NOT_YET), ms)))
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

function tokenCreate(n: number) {
  const hex = n.toString(16).padStart(12, '0')
  return commands.tokenCreate(
    buildTokenCreate({ AccessorID: `10000000-0000-4000-8000-${hex}`, SecretID: `20000000-0000-4000-8000-${hex}`, CreateTime: '2026-11-27T00:00:00Z', Description: `token ${n}` }),
  )
}

describe('replica: results given out before their batch is written', function () {
  // Before useReplica's cleanup, which stops the replica: mocha runs afterEach hooks in the order they were added.
  afterEach(() => {
    for (const release of gates.splice(0)) release()
  })
  const node = useReplica('warden-early-')

  // The node writes entries of its own after it starts (its membership): each test begins once they are applied.
  beforeEach(() => node.replica.readBarrier('consistent'))

  it('answers a write that renders from its result before its batch is written, and holds later requests until it is', async function () {
    const gate = holdBatches(node.state)
    const before = node.state.lastApplied
    const answered = await within(node.replica.proposeIndexed(tokenCreate(1), { answerBeforeLocalApply: true }), 2_000)
    if (answered === NOT_YET) expect.fail('the write was not answered while its batch was held')
    expect(answered.result.ok).to.equal(true)
    expect(gate.held()).to.equal(1)
    // The answer came before the state had the write.
    expect(node.state.lastApplied).to.equal(before)
    expect(await getRecord(node.state.reader, tokenSpec, '10000000-0000-4000-8000-000000000001')).to.equal(undefined)

    // Any request served now (a stale read included) waits for the batch.
    const stale = node.replica.readBarrier('stale')
    expect(await within(stale, 100)).to.equal(NOT_YET)
    gate.release()
    await stale
    expect(node.state.lastApplied).to.be.at.least(answered.index)
    expect((await getRecord(node.state.reader, tokenSpec, '10000000-0000-4000-8000-000000000001'))?.Description).to.equal('token 1')
  })

  it('answers only once written: a write without answerBeforeLocalApply, and a batch that changes a policy', async function () {
    const gate = holdBatches(node.state)
    const plain = node.replica.proposeIndexed(tokenCreate(2))
    await eventually(async () => gate.held() === 1, 'the first batch reached LevelDB')
    expect(await within(plain, 100)).to.equal(NOT_YET)
    gate.release()
    const written = await plain
    expect(node.state.lastApplied).to.be.at.least(written.index)

    const again = holdBatches(node.state)
    const policy = { ID: '30000000-0000-4000-8000-000000000001', Name: 'early', Description: '', Rules: 'acl = "read"', Datacenters: [], Namespace: 'default' }
    const policyWrite = node.replica.proposeIndexed({ v: COMMAND_VERSION, type: 'acl.policy.create', policy }, { answerBeforeLocalApply: true })
    await eventually(async () => again.held() === 1, 'the policy batch reached LevelDB')
    expect(await within(policyWrite, 100)).to.equal(NOT_YET)
    again.release()
    const policyWritten = await policyWrite
    expect(policyWritten.result.ok).to.equal(true)
    expect(node.state.lastApplied).to.be.at.least(policyWritten.index)
  })
})
