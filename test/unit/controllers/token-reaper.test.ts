/**
 * The token reaper deletes expired tokens through the log, in bounded batches, and leaves unexpired ones alone. It
 * runs against a real single-node replica (LevelDB log and state in a temp dir) with an injected clock.
 */
import { expect } from 'chai'
import { pino } from 'pino'
import { TokenReaper } from '../../../src/controllers/token-reaper.js'
import type { TokenCreate } from '../../../src/state/commands.js'
import { getRecord, tokenSpec } from '../../../src/state/tables.js'
import { buildTokenCreate, commands, useReplica } from '../../support/state.js'

function token(accessor: string, expirationTime: string | undefined): TokenCreate {
  return buildTokenCreate({
    AccessorID: accessor,
    SecretID: accessor.replace(/^0/, 'f'),
    CreateTime: '2026-01-01T00:00:00.000Z',
    ...(expirationTime === undefined ? {} : { ExpirationTime: expirationTime }),
  })
}

describe('token reaper', () => {
  const node = useReplica('warden-reaper-')

  it('deletes tokens whose ExpirationTime has passed, in batches, and keeps the others', async () => {
    const expired = Array.from({ length: 7 }, (_, n) => `0000aaaa-0000-4000-8000-00000000000${n}`)
    for (const accessor of expired) await node.replica.propose(commands.tokenCreate(token(accessor, '2026-01-01T00:01:00.000Z')))
    const later = '0000bbbb-0000-4000-8000-000000000000'
    const never = '0000cccc-0000-4000-8000-000000000000'
    await node.replica.propose(commands.tokenCreate(token(later, '2026-01-01T05:00:00.000Z')))
    await node.replica.propose(commands.tokenCreate(token(never, undefined)))
    const before = node.state.lastApplied
    const reaper = new TokenReaper(node.state, node.replica, {
      intervalMs: 60_000,
      batchSizeMax: 3,
      now: () => Date.parse('2026-01-01T00:02:00.000Z'),
      log: pino({ level: 'silent' }),
    })
    expect(await reaper.pass()).to.equal(7)
    // Seven tokens in batches of at most three: three commands through the log.
    expect(node.state.lastApplied - before).to.equal(3)
    for (const accessor of expired) expect(await getRecord(node.state.reader, tokenSpec, accessor)).to.equal(undefined)
    expect(await getRecord(node.state.reader, tokenSpec, later)).to.not.equal(undefined)
    expect(await getRecord(node.state.reader, tokenSpec, never)).to.not.equal(undefined)
    expect(await reaper.pass()).to.equal(0)
    await reaper.stop()
  })

  it('deletes in apply only what is expired at the instant the command carries', async () => {
    const accessor = '0000dddd-0000-4000-8000-000000000000'
    await node.replica.propose(commands.tokenCreate(token(accessor, '2026-01-01T00:05:00.000Z')))
    const result = await node.replica.propose(commands.tokenDeleteExpired([accessor], '2026-01-01T00:04:00.000Z'))
    expect(result).to.deep.equal({ ok: true, value: 0 })
    expect(await getRecord(node.state.reader, tokenSpec, accessor)).to.not.equal(undefined)
  })
})
