/**
 * The pieces of the handshake that need no socket: the proofs (what each side signs, and that a proof for one
 * connection, direction or identity is worthless for any other) and the frame decoder's refusal of anything that is
 * not exactly a frame. The protocol itself is exercised end to end in authentication.test.ts.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { inspect } from 'node:util'
import { decodeFrame, encodeFrame, FrameError, NODE_NAME_CHARS_MAX, type Frame } from '../../../src/transport/frames.js'
import { ClusterKey, type HandshakeTranscript } from '../../../src/transport/handshake.js'
import { Packr } from 'msgpackr'

const KEY = 'unit-test-key'

function transcript(): HandshakeTranscript {
  return {
    dialerNode: 'a',
    acceptorNode: 'b',
    dialerAddress: 'a.cluster.test:8300',
    acceptorAddress: 'b.cluster.test:8300',
    dialerNonce: randomBytes(32),
    acceptorNonce: randomBytes(32),
  }
}

describe('transport: handshake proofs', () => {
  it('verifies the proof made with the same key, transcript and direction', () => {
    const key = new ClusterKey(KEY)
    const t = transcript()
    expect(key.verify('dialer', t, key.proof('dialer', t))).to.equal(true)
    expect(key.verify('acceptor', t, key.proof('acceptor', t))).to.equal(true)
  })

  it('refuses a proof made with another key', () => {
    const t = transcript()
    expect(new ClusterKey(KEY).verify('dialer', t, new ClusterKey('other').proof('dialer', t))).to.equal(false)
  })

  it("refuses the other direction's proof, so a proof cannot be reflected back", () => {
    const key = new ClusterKey(KEY)
    const t = transcript()
    expect(key.verify('dialer', t, key.proof('acceptor', t))).to.equal(false)
  })

  it('refuses a proof for any other transcript: names, addresses, nonces', () => {
    const key = new ClusterKey(KEY)
    const t = transcript()
    const proof = key.proof('dialer', t)
    const variants: HandshakeTranscript[] = [
      { ...t, dialerNode: 'c' },
      { ...t, acceptorNode: 'c' },
      { ...t, dialerAddress: 'elsewhere:1' },
      { ...t, acceptorAddress: 'elsewhere:1' },
      { ...t, dialerNonce: randomBytes(32) },
      { ...t, acceptorNonce: randomBytes(32) },
      // Moving a byte from one field to the next must not give the same input: fields are length-prefixed.
      { ...t, dialerNode: 'ab', acceptorNode: '' },
    ]
    for (const variant of variants) expect(key.verify('dialer', variant, proof), JSON.stringify(variant)).to.equal(false)
  })

  it('refuses a proof of the wrong length without throwing', () => {
    const key = new ClusterKey(KEY)
    expect(key.verify('dialer', transcript(), Buffer.alloc(31))).to.equal(false)
  })

  it('never shows the key when logged, serialised or inspected', () => {
    const key = new ClusterKey(KEY)
    expect(JSON.stringify({ key })).not.to.include(KEY)
    expect(inspect(key)).not.to.include(KEY)
    expect(`${inspect({ nested: { key } })}`).not.to.include(KEY)
  })
})

describe('transport: frames', () => {
  const packr = new Packr({ useRecords: false })

  it('round-trips every frame type', () => {
    const frames: Frame[] = [
      { type: 'hello', version: 1, node: 'a', address: 'a:1', nonce: randomBytes(32) },
      { type: 'challenge', node: 'b', address: 'b:1', nonce: randomBytes(32) },
      { type: 'proof', proof: randomBytes(32) },
      { type: 'welcome', proof: randomBytes(32) },
      { type: 'message', payload: { term: 3, entries: [{ index: 1, data: Buffer.from('x') }] } },
      { type: 'request', id: 7, payload: 'read-index' },
      { type: 'response', id: 7, payload: null },
      { type: 'failure', id: 7, error: { code: 'no_leader', message: 'no leader', field: undefined } },
    ]
    for (const frame of frames) expect(decodeFrame(encodeFrame(frame))).to.deep.equal(frame)
  })

  it('refuses anything that is not exactly a frame', () => {
    const bad: unknown[] = [
      'text',
      {},
      [],
      [99, 'x'],
      [16],
      [16, 'x', 'extra'],
      [1, 1, 'a', 'a:1', randomBytes(31)],
      [1, 1, '', 'a:1', randomBytes(32)],
      [1, 1, 'n'.repeat(NODE_NAME_CHARS_MAX + 1), 'a:1', randomBytes(32)],
      [1, -1, 'a', 'a:1', randomBytes(32)],
      [1, 1.5, 'a', 'a:1', randomBytes(32)],
      [3, 'not bytes'],
      [17, 'id', 'x'],
      [19, 1, { code: 1, message: 'x' }],
      [19, 1, null],
    ]
    for (const value of bad) expect(() => decodeFrame(packr.pack(value)), JSON.stringify(value)).to.throw(FrameError)
    for (const bytes of [Buffer.alloc(0), Buffer.from([0xc1]), Buffer.from([0x92, 0x10]), Buffer.concat([encodeFrame({ type: 'welcome', proof: randomBytes(32) }), Buffer.from([0])])]) {
      expect(() => decodeFrame(bytes), bytes.toString('hex')).to.throw(FrameError)
    }
    // Nesting deep enough to overflow the decoder's stack is a bad frame too, not a crash.
    expect(() => decodeFrame(Buffer.alloc(200_000, 0x91))).to.throw(FrameError)
  })
})
