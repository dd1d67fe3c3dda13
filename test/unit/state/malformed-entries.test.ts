/**
 * Applying a committed entry never throws for bytes a peer could have sent (issue 18). Leaders check every command
 * before proposing it (src/rpc/cluster-node.ts), but a log may still hold a malformed entry written by a leader that
 * did not (an older build). StateStore.applyEntries applies such an entry as a no-op whose result is an invalid_input
 * error: nothing is written but the applied index, on every replica alike. An entry of a version or type this build
 * does not know still stops the node (UnknownCommandError: upgrade it), after the entries before it.
 *
 * Method: the same log entries, well-formed and malformed mixed, applied to two fresh stores over real LevelDB: the
 * results, the listeners' notices and the stores' contents byte for byte must agree, and equal those of a third store
 * that applied a noop in place of each malformed entry.
 */
import { expect } from 'chai'
import { encode } from '../../../src/state/codec.js'
import { COMMAND_VERSION, type ApplyResult } from '../../../src/state/commands.js'
import { StateStore, UnknownCommandError, type LogEntry } from '../../../src/state/store.js'
import { buildTokenCreate, commands, dump, expectSameContents } from '../../support/state.js'
import { useTempDirs, type TempDirs } from '../../support/temp-dir.js'

const token = (n: number) =>
  buildTokenCreate({
    AccessorID: `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`,
    SecretID: `00000000-0000-4000-9000-${n.toString(16).padStart(12, '0')}`,
    CreateTime: '2026-01-01T00:00:00Z',
  })

/** Well-formed entries at 1, 3 and 6; malformed ones at 2, 4 and 5, each of a kind that made apply throw before. */
const ENTRIES: LogEntry[] = [
  { index: 1, type: 'command', data: encode(commands.init()) },
  { index: 2, type: 'command', data: Buffer.from([0x81, 0xa1]) },
  { index: 3, type: 'command', data: encode(commands.tokenCreate(token(1))) },
  { index: 4, type: 'command', data: encode({ v: COMMAND_VERSION, type: 'acl.token.create', token: { ...token(2), SecretID: 7 } }) },
  { index: 5, type: 'command', data: encode(null) },
  { index: 6, type: 'command', data: encode(commands.tokenCreate(token(3))) },
]

async function open(dirs: TempDirs): Promise<StateStore> {
  const store = await StateStore.open(await dirs.make('warden-malformed-'))
  dirs.defer(() => store.close())
  return store
}

async function applyAll(store: StateStore, entries: readonly LogEntry[]): Promise<{ results: Array<[number, ApplyResult]>; noticed: Array<[number, string]> }> {
  const results: Array<[number, ApplyResult]> = []
  const noticed: Array<[number, string]> = []
  store.malformedListeners.add((index, problem) => noticed.push([index, problem]))
  await store.applyEntries(entries, (entry, _command, result) => results.push([entry.index, result]))
  return { results, noticed }
}

describe('state/store: malformed committed entries', () => {
  const dirs = useTempDirs()

  it('are applied as no-ops whose result is invalid_input, the same on every store, and never throw', async () => {
    const [a, b, reference] = [await open(dirs), await open(dirs), await open(dirs)]
    const first = await applyAll(a, ENTRIES)
    const second = await applyAll(b, ENTRIES)

    expect(first.results.map(([index, result]) => [index, result.ok ? 'ok' : result.error.code])).to.deep.equal([
      [1, 'ok'],
      [2, 'invalid_input'],
      [3, 'ok'],
      [4, 'invalid_input'],
      [5, 'invalid_input'],
      [6, 'ok'],
    ])
    const refusal = first.results[3]![1] as Extract<ApplyResult, { ok: false }>
    expect(refusal.error.message).to.equal('the command at log index 4 is malformed and was not applied: token.SecretID: must be a string, not the number 7')
    expect(first.noticed.map(([index]) => index)).to.deep.equal([2, 4, 5])
    expect(first.noticed[1]![1]).to.equal('token.SecretID: must be a string, not the number 7')
    expect(second).to.deep.equal(first)
    expect(a.lastApplied).to.equal(6)
    expectSameContents(await dump(a), await dump(b))

    // Each malformed entry applied exactly as a noop at its index would have been: byte-identical contents.
    const noops = ENTRIES.map((entry) => ([2, 4, 5].includes(entry.index) ? { ...entry, data: encode(commands.noop()) } : entry))
    await reference.applyEntries(noops)
    expectSameContents(await dump(a), await dump(reference))
  })

  it('an unknown version after a malformed entry still stops the node there, after applying what came before', async () => {
    const store = await open(dirs)
    const entries: LogEntry[] = [...ENTRIES.slice(0, 2), { index: 3, type: 'command', data: encode({ v: COMMAND_VERSION + 1, type: 'acl.token.create' }) }, ENTRIES[2]!]
    const applied: number[] = []
    let thrown: unknown
    try {
      await store.applyEntries(entries, (entry) => applied.push(entry.index))
    } catch (error) {
      thrown = error
    }
    expect(thrown).to.be.instanceOf(UnknownCommandError)
    expect((thrown as Error).message).to.contain('log index 3').and.contain(`version ${COMMAND_VERSION + 1}`).and.match(/upgrade/)
    expect(applied).to.deep.equal([1, 2])
    expect(store.lastApplied).to.equal(2)
  })
})
