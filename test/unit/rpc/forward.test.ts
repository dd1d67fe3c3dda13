/**
 * What a follower tells the callers of writes it forwarded to the leader: each its own outcome from the leader's
 * answer, in order; `no_leader` (not applied, retry) only when the leader surely has none of them; `internal` (not
 * applied) when the leader refused a command as malformed; `outcome_unknown` for everything else, including an answer
 * in a form this build does not know. Every caller settles.
 */
import { expect } from 'chai'
import { WardenError } from '../../../src/lib/errors.js'
import { commandBytes, forwardFailure, settleForwarded, type ForwardBatch, type ReplicaResponse } from '../../../src/rpc/forward.js'
import { TransportError } from '../../../src/transport/index.js'

type Settled = { ok: true; value: ReplicaResponse } | { ok: false; error: WardenError }

/** `count` waiting callers, and what each was told. */
function callers(count: number): { items: ForwardBatch['items']; settled: Array<Settled | undefined> } {
  const settled: Array<Settled | undefined> = Array.from({ length: count }, () => undefined)
  const items: ForwardBatch['items'] = Array.from({ length: count }, (_, n) => ({
    data: new Uint8Array([n + 1]),
    resolve: (value) => (settled[n] = { ok: true, value }),
    reject: (error) => (settled[n] = { ok: false, error: error as WardenError }),
  }))
  return { items, settled }
}

const applied = (index: number): ReplicaResponse => ({ result: { ok: true, value: index }, index })

describe('rpc/forward: outcomes of forwarded writes', () => {
  it('gives each caller its own outcome, in order, and rebuilds a refused write as its own error', () => {
    const { items, settled } = callers(3)
    const refused = new WardenError('rate_limited', 'too many writes are waiting to commit; retry later').toWire()
    settleForwarded('n1', items, { outcomes: [applied(7), { error: refused }, applied(8)] })
    expect(settled[0]).to.deep.equal({ ok: true, value: applied(7) })
    expect(settled[2]).to.deep.equal({ ok: true, value: applied(8) })
    expect(settled[1]?.ok).to.equal(false)
    const error = (settled[1] as { error: WardenError }).error
    expect(error).to.be.instanceOf(WardenError)
    expect([error.code, error.message]).to.deep.equal(['rate_limited', refused.message])
  })

  for (const [what, answer] of [
    ['an answer without outcomes (a leader answering one command)', applied(9)],
    ['fewer outcomes than commands', { outcomes: [applied(9)] }],
    ['outcomes that are not objects', { outcomes: [1, null] }],
    ['no answer body at all', undefined],
  ] as const) {
    it(`settles every caller as outcome_unknown on ${what}`, () => {
      const { items, settled } = callers(2)
      settleForwarded('n1', items, answer)
      expect(settled.map((outcome) => (outcome?.ok === false ? outcome.error.code : outcome))).to.deep.equal(['outcome_unknown', 'outcome_unknown'])
    })
  }

  it('an outcome in an unknown form leaves only its own caller unknown', () => {
    const { items, settled } = callers(2)
    settleForwarded('n1', items, { outcomes: [applied(9), { result: { ok: true, value: 1 } }] })
    expect(settled[0]).to.deep.equal({ ok: true, value: applied(9) })
    expect(settled[1]?.ok === false && settled[1].error.code).to.equal('outcome_unknown')
  })

  it('a command the leader refused as malformed is an internal error that was not applied, never invalid_input or unknown', () => {
    // Invalid input of the peer protocol, not of the client: this node built the command from a request it accepted.
    const refused = new WardenError('invalid_input', 'the forwarded command is malformed: token.SecretID: must be a string; it was not applied', 'token.SecretID')
    const { items, settled } = callers(2)
    settleForwarded('n1', items, { outcomes: [applied(9), { error: refused.toWire() }] })
    expect(settled[0]).to.deep.equal({ ok: true, value: applied(9) })
    const batchError = (settled[1] as { error: WardenError }).error
    const single = forwardFailure('n1', refused)
    for (const error of [batchError, single]) {
      expect([error.code, error.field]).to.deep.equal(['internal', undefined])
      expect(error.message).to.equal(`the leader n1 refused the write: ${refused.message}`)
    }
  })

  it('reports no_leader only when the leader surely has none of the writes', () => {
    const notSent = new TransportError('queue_full', 'n1', 'no', 'send queue full')
    const maybeSent = new TransportError('timeout', 'n1', 'maybe', 'no answer')
    const cases: Array<[unknown, string]> = [
      [new WardenError('no_leader', 'this node is no longer the leader; retry'), 'no_leader'],
      [new WardenError('rate_limited', 'busy'), 'rate_limited'],
      [notSent, 'no_leader'],
      [maybeSent, 'outcome_unknown'],
      // The leader's answer was too large to send back: the writes had committed.
      [new WardenError('internal', 'answer larger than frameBytesMax'), 'outcome_unknown'],
      [new Error('anything else'), 'outcome_unknown'],
    ]
    for (const [error, code] of cases) expect(forwardFailure('n1', error).code, String(error)).to.equal(code)
  })

  it('the leader refuses a forwarded command that is empty or not bytes, so it never enters the log', () => {
    for (const data of [new Uint8Array(0), undefined, 'text', [1, 2]]) {
      expect(() => commandBytes(data), String(data)).to.throw(WardenError).with.property('code', 'invalid_input')
    }
    expect([...commandBytes(Buffer.from([1, 2, 3]))]).to.deep.equal([1, 2, 3])
  })
})
