/**
 * The token reaper deletes expired tokens through the log, in bounded batches, and leaves unexpired ones alone. It
 * runs against a real single-node replica (LevelDB log and state in a temp dir) with an injected clock.
 */
import { expect } from 'chai'
import { pino } from 'pino'
import { TokenReaper } from '../../../src/controllers/token-reaper.js'
import type { SingleNodeReplica } from '../../../src/replica/single-node.js'
import type { TokenCreate } from '../../../src/state/commands.js'
import type { StateStore } from '../../../src/state/store.js'
import { getRecord, tokenSpec } from '../../../src/state/tables.js'
import { buildTokenCreate, commands, openReplica } from '../../support/state.js'
import { useTempDirs } from '../../support/temp-dir.js'

function token(accessor: string, expirationTime: string | undefined): TokenCreate {
  return buildTokenCreate({
    AccessorID: accessor,
    SecretID: accessor.replace(/^0/, 'f'),
    CreateTime: '2026-01-01T00:00:00.000Z',
    ...(expirationTime === undefined ? {} : { ExpirationTime: expirationTime }),
  })
}

describe('token reaper', () => {
  const dirs = useTempDirs()
  let state: StateStore
  let replica: SingleNodeReplica

  beforeEach(async () => {
    const fixture = await openReplica(dirs, 'warden-reaper-')
    state = fixture.state
    replica = fixture.replica
  })

  it('deletes tokens whose ExpirationTime has passed, in batches, and keeps the others', async () => {
    const expired = Array.from({ length: 7 }, (_, n) => `0000aaaa-0000-4000-8000-00000000000${n}`)
    for (const accessor of expired) await replica.propose(commands.tokenCreate(token(accessor, '2026-01-01T00:01:00.000Z')))
    const later = '0000bbbb-0000-4000-8000-000000000000'
    const never = '0000cccc-0000-4000-8000-000000000000'
    await replica.propose(commands.tokenCreate(token(later, '2026-01-01T05:00:00.000Z')))
    await replica.propose(commands.tokenCreate(token(never, undefined)))
    const before = state.lastApplied
    const reaper = new TokenReaper(state, replica, {
      intervalMs: 60_000,
      batchSizeMax: 3,
      now: () => Date.parse('2026-01-01T00:02:00.000Z'),
      log: pino({ level: 'silent' }),
    })
    expect(await reaper.pass()).to.equal(7)
    // Seven tokens in batches of at most three: three commands through the log.
    expect(state.lastApplied - before).to.equal(3)
    for (const accessor of expired) expect(await getRecord(state.reader, tokenSpec, accessor)).to.equal(undefined)
    expect(await getRecord(state.reader, tokenSpec, later)).to.not.equal(undefined)
    expect(await getRecord(state.reader, tokenSpec, never)).to.not.equal(undefined)
    expect(await reaper.pass()).to.equal(0)
    await reaper.stop()
  })

  it('deletes in apply only what is expired at the instant the command carries', async () => {
    const accessor = '0000dddd-0000-4000-8000-000000000000'
    await replica.propose(commands.tokenCreate(token(accessor, '2026-01-01T00:05:00.000Z')))
    const result = await replica.propose(commands.tokenDeleteExpired([accessor], '2026-01-01T00:04:00.000Z'))
    expect(result).to.deep.equal({ ok: true, value: 0 })
    expect(await getRecord(state.reader, tokenSpec, accessor)).to.not.equal(undefined)
  })
})
