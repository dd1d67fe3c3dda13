/**
 * The pieces of the handshake that need no socket: the proofs (what each side signs, and that a proof for one
 * connection, direction or identity is worthless for any other) and the frame decoder's refusal of anything that is
 * not exactly a frame. The protocol itself is exercised end to end in authentication.test.ts.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { inspect } from 'node:util'
import { decodeFrame, encodeFrame, FrameError, NODE_NAME_CHARS_MAX, PROTOCOL_VERSION, ProtocolVersionError, type Frame } from '../../../src/transport/frames.js'
import { ClusterKey, ClusterKeys, type HandshakeTranscript } from '../../../src/transport/handshake.js'
import { Packr } from 'msgpackr'

const KEY = 'unit-test-key'

function transcript(): HandshakeTranscript {
  return {
    kind: 'raft',
    dialerNode: 'a',
    acceptorNode: 'b',
    dialerAddress: 'a.cluster.test:8300',
    acceptorAddress: 'b.cluster.test:8300',
    dialerDatacenter: 'dc1',
    acceptorDatacenter: 'dc1',
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

  it('refuses a proof for any other transcript: kind, names, addresses, datacenters, nonces', () => {
    const key = new ClusterKey(KEY)
    const t = transcript()
    const proof = key.proof('dialer', t)
    const variants: HandshakeTranscript[] = [
      { ...t, kind: 'wan' },
      { ...t, dialerDatacenter: 'dc2' },
      { ...t, acceptorDatacenter: 'dc2' },
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

  it('never shows the key when logged, serialised or inspected, nor the sealing keys derived from it', () => {
    const key = new ClusterKey(KEY)
    expect(JSON.stringify({ key })).not.to.include(KEY)
    expect(inspect(key)).not.to.include(KEY)
    expect(`${inspect({ nested: { key } })}`).not.to.include(KEY)
    const keys = new ClusterKeys(KEY, ['accepted-key-0123456789'])
    expect(JSON.stringify({ keys }) + inspect(keys)).not.to.match(/unit-test-key|accepted-key/)
    const sealing = key.sealingKeys(transcript())
    const secret = sealing.dialerToAcceptor.export().toString('hex')
    for (const shown of [JSON.stringify(sealing), inspect(sealing, { depth: 5 })]) expect(shown).not.to.include(secret)
  })

  it('identifies which accepted key made a proof, the proving key first, and none for an unknown key (rotation)', () => {
    const t = transcript()
    const keys = new ClusterKeys('key-two', ['key-one', 'key-two'])
    const byOne = keys.verifying('dialer', t, new ClusterKey('key-one').proof('dialer', t))
    expect(byOne?.proof('acceptor', t)).to.deep.equal(new ClusterKey('key-one').proof('acceptor', t))
    expect(keys.verifying('dialer', t, new ClusterKey('key-two').proof('dialer', t))).to.equal(keys.proving)
    expect(keys.verifying('dialer', t, new ClusterKey('key-three').proof('dialer', t))).to.equal(undefined)
  })

  it('derives two different sealing keys per link, the same at both ends, and new ones for new nonces or another key', () => {
    const key = new ClusterKey(KEY)
    const t = transcript()
    const hex = (keys: ReturnType<ClusterKey['sealingKeys']>): string[] => [keys.dialerToAcceptor.export().toString('hex'), keys.acceptorToDialer.export().toString('hex')]
    const [toAcceptor, toDialer] = hex(key.sealingKeys(t))
    expect(toAcceptor).not.to.equal(toDialer)
    expect(hex(key.sealingKeys({ ...t }))).to.deep.equal([toAcceptor, toDialer])
    for (const other of [hex(key.sealingKeys({ ...t, acceptorNonce: randomBytes(32) })), hex(key.sealingKeys({ ...t, dialerDatacenter: 'dc2' })), hex(new ClusterKey('other').sealingKeys(t))]) {
      expect(other).not.to.include(toAcceptor)
      expect(other).not.to.include(toDialer)
    }
  })
})

describe('transport: frames', () => {
  const packr = new Packr({ useRecords: false })

  it('round-trips every frame type', () => {
    const frames: Frame[] = [
      { type: 'hello', version: PROTOCOL_VERSION, node: 'a', address: 'a:1', nonce: randomBytes(32) },
      { type: 'challenge', node: 'b', address: 'b:1', datacenter: 'dc1', kind: 'raft', nonce: randomBytes(32) },
      { type: 'proof', datacenter: 'dc1', kind: 'raft', proof: randomBytes(32) },
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
      [1, PROTOCOL_VERSION, 'a', 'a:1', randomBytes(31)],
      [1, PROTOCOL_VERSION, '', 'a:1', randomBytes(32)],
      [1, PROTOCOL_VERSION, 'n'.repeat(NODE_NAME_CHARS_MAX + 1), 'a:1', randomBytes(32)],
      [1, -1, 'a', 'a:1', randomBytes(32)],
      [1, 1.5, 'a', 'a:1', randomBytes(32)],
      [2, 'b', 'b:1', '', 'raft', randomBytes(32)],
      [2, 'b', 'b:1', 'd'.repeat(65), 'raft', randomBytes(32)],
      [2, 'b', 'b:1', 'dc1', '', randomBytes(32)],
      [2, 'b', 'b:1', randomBytes(32)],
      [3, 'not bytes'],
      [3, 'dc1', 'raft', 'not bytes'],
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

  it('refuses a hello of another version as such, whatever shape the rest has (no mixed mode)', () => {
    for (const value of [[1, 2, 'a', 'a:1', randomBytes(32)], [1, PROTOCOL_VERSION + 1], [1, 1, 'a', 'a:1', randomBytes(32), 'dc1', 'extra']]) {
      const thrown = (() => {
        try {
          decodeFrame(packr.pack(value))
        } catch (error) {
          return error
        }
        return undefined
      })()
      expect(thrown, JSON.stringify(value)).to.be.instanceOf(ProtocolVersionError)
      expect((thrown as ProtocolVersionError).version).to.equal(value[1])
    }
  })

  it('never puts what it decoded into the error of a frame with trailing bytes (it may be a secret)', () => {
    const secret = 'b7c2a1e0-5f4d-4c3b-9a8e-secret-id-000'
    const bytes = Buffer.concat([encodeFrame({ type: 'message', payload: { SecretID: secret } }), Buffer.from([0])])
    expect(() => decodeFrame(bytes)).to.throw(FrameError, 'trailing bytes')
    try {
      decodeFrame(bytes)
    } catch (error) {
      expect(String(error)).not.to.include(secret)
    }
  })
})
