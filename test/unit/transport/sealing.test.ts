/**
 * Sealed peer links (issue 18): after the handshake every frame is encrypted and authenticated under keys of that
 * link and direction, with a sequence number, so that nothing on the path can read a frame, alter one, replay,
 * drop or reorder one, or move one to another link or direction; a frame that fails to open closes its link (counted,
 * logged once per interval, never a crash) and the link is redialed. The handshake carries each side's datacenter
 * (a Raft link refuses another datacenter's server) and may use an accepted older key (rotation).
 *
 * Method: two real transports on 127.0.0.1; b dials a through a relay (test/support/relay.ts) that records every
 * byte and can alter, repeat, drop or replace single WebSocket frames; a cannot dial b (it has b at an address where
 * nothing listens), so the relayed link is the only one. The first two binary frames each way are the handshake's
 * (hello and proof from b, challenge and welcome from a); every later one is sealed.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { encodeFrame, PROTOCOL_VERSION } from '../../../src/transport/frames.js'
import { CloseCode } from '../../../src/transport/link.js'
import { asDialerFrame, flipped, payloadOf, startRelay, type Relay, type RelayFrame } from '../../support/relay.js'
import {
  addressOf,
  authenticatedClient,
  CLUSTER_KEY,
  connectAll,
  deadAddress,
  helloAs,
  isConnected,
  logged,
  proofFrame,
  rawClient,
  sleep,
  startNode,
  useCleanup,
  waitFor,
  type TestNode,
} from './harness.js'

/** Shaped like a token's SecretID: what must never cross a peer link readable. */
const SECRET = '3f9c2b7e-51d4-4a8e-b0c6-d2e1f7a94c05'
const KEY_ONE = 'rotation-key-one-1f2e3d4c5b6a7988'
const KEY_TWO = 'rotation-key-two-8a9b0c1d2e3f4051'

describe('transport: sealed links', () => {
  const cleanup = useCleanup()

  /** a, and b dialing it through a relay; resolves once the relayed link is open. */
  async function relayedPair(): Promise<{ a: TestNode; b: TestNode; relay: Relay }> {
    const a = await startNode(cleanup, 'a')
    const relay = await startRelay((closer) => cleanup.defer(closer), addressOf(a.transport))
    a.transport.setPeers(new Map([['b', await deadAddress()]]))
    const b = await startNode(cleanup, 'b', { peers: new Map([['a', relay.address]]) })
    await waitFor('the relayed link', () => isConnected(a, 'b') && isConnected(b, 'a'))
    return { a, b, relay }
  }

  const sealed = (frame: RelayFrame, direction: RelayFrame['direction'], connection = 1): boolean =>
    frame.connection === connection && frame.direction === direction && frame.binaryIndex !== undefined && frame.binaryIndex >= 3

  it('carries messages and requests both ways over a sealed link', async () => {
    const { a, b } = await relayedPair()
    a.transport.onRequest(async (from, message) => ({ from, echo: message }))
    b.transport.onRequest(async (from, message) => ({ from, echo: message }))
    expect(b.transport.send('a', { n: 1 })).to.equal(true)
    expect(a.transport.send('b', { n: 2 })).to.equal(true)
    await waitFor('both messages', () => a.inbox.length === 1 && b.inbox.length === 1)
    expect(a.inbox).to.deep.equal([{ from: 'b', message: { n: 1 } }])
    expect(b.inbox).to.deep.equal([{ from: 'a', message: { n: 2 } }])
    expect(await b.transport.request('a', 'ping', 2000)).to.deep.equal({ from: 'b', echo: 'ping' })
    expect(await a.transport.request('b', 'pong', 2000)).to.deep.equal({ from: 'a', echo: 'pong' })
    expect(a.transport.stats().framesRejected).to.equal(0)
  })

  it('puts nothing readable on the wire: a SecretID sent both ways never appears in the bytes, as text, hex or base64', async () => {
    const { a, b, relay } = await relayedPair()
    a.transport.onRequest(async () => ({ SecretID: SECRET }))
    b.transport.send('a', { type: 'append', entries: [{ data: Buffer.from(JSON.stringify({ SecretID: SECRET })) }], SecretID: SECRET })
    a.transport.send('b', SECRET)
    expect(await b.transport.request('a', { token: SECRET }, 2000)).to.deep.equal({ SecretID: SECRET })
    await waitFor('the messages', () => a.inbox.length === 1 && b.inbox.length === 1)
    // The bytes as captured, and every frame's payload unmasked (a dialer masks what it sends, which hides nothing
    // from anyone on the path but would hide text from a plain search of the capture).
    const wire = Buffer.concat([relay.captured(), ...relay.frames.map((frame) => payloadOf(frame.raw))])
    // The capture is real: the handshake's names and advertised addresses travel in clear, both ways.
    expect(wire.includes('a.cluster.test:8300') && wire.includes('b.cluster.test:8300')).to.equal(true)
    const forms = [
      Buffer.from(SECRET, 'utf8'),
      Buffer.from(SECRET.replaceAll('-', ''), 'hex'),
      Buffer.from(Buffer.from(SECRET).toString('hex')),
      Buffer.from(Buffer.from(SECRET).toString('base64').slice(0, 40)),
      Buffer.from(SECRET, 'utf16le'),
    ]
    for (const form of forms) expect(wire.includes(form), form.toString('hex')).to.equal(false)
    for (const line of [...a.log.raw, ...b.log.raw]) {
      expect(line).not.to.include(SECRET)
      expect(line).not.to.include(CLUSTER_KEY)
    }
  })

  it('closes the link on a frame altered in transit, either way: not delivered, counted, one warning per interval', async () => {
    const { a, b, relay } = await relayedPair()
    // Each connection's first sealed frame toward a is altered; the link is redialed and altered again.
    relay.tamper = (frame) => (sealed(frame, 'toAcceptor', frame.connection) && frame.binaryIndex === 3 && frame.connection <= 3 ? [flipped(frame.raw)] : [frame.raw])
    for (let round = 1; round <= 3; round += 1) {
      b.transport.send('a', `altered ${round}`)
      await waitFor(`a refuses the altered frame ${round}`, () => a.transport.stats().framesRejected === round)
      await waitFor('b redials', () => relay.connections === round + 1 && isConnected(a, 'b') && isConnected(b, 'a'))
    }
    expect(a.inbox).to.deep.equal([])
    expect(a.transport.stats().peers.get('b')?.framesRejected).to.equal(3)
    expect(a.log.records.filter((record) => record['reason'] === 'sealed frame failed to open')).to.have.length(1)
    expect(logged(a.log, 'closing peer link after a bad frame', { peer: 'b', reason: 'sealed frame failed to open' })).to.equal(true)
    // The fourth link is left alone and carries messages.
    b.transport.send('a', 'intact')
    await waitFor('the intact message', () => a.inbox.length === 1)
    expect(a.inbox).to.deep.equal([{ from: 'b', message: 'intact' }])
    // The other direction: b refuses what a sealed once it is altered.
    relay.tamper = (frame) => (sealed(frame, 'toDialer', 4) ? [flipped(frame.raw, 0.9)] : [frame.raw])
    a.transport.send('b', 'altered toward b')
    await waitFor('b refuses it', () => b.transport.stats().framesRejected === 1)
    expect(b.inbox).to.deep.equal([])
  })

  it('closes the link on a replayed frame: the original is delivered once, the copy refused', async () => {
    const { a, b, relay } = await relayedPair()
    let replayed = false
    relay.tamper = (frame) => {
      if (replayed || !sealed(frame, 'toAcceptor')) return [frame.raw]
      replayed = true
      return [frame.raw, frame.raw]
    }
    b.transport.send('a', 'once')
    await waitFor('the copy refused', () => a.transport.stats().framesRejected === 1)
    expect(a.inbox).to.deep.equal([{ from: 'b', message: 'once' }])
    await sleep(50)
    expect(a.inbox).to.have.length(1)
  })

  it('closes the link when a frame is dropped or two are swapped: the next one does not open', async () => {
    const { a, b, relay } = await relayedPair()
    let held: Buffer | undefined
    relay.tamper = (frame) => {
      if (!sealed(frame, 'toAcceptor', frame.connection)) return [frame.raw]
      // Connection 1: the first sealed frame is dropped. Connection 2: the first two are swapped.
      if (frame.connection === 1 && frame.binaryIndex === 3) return []
      if (frame.connection === 2 && frame.binaryIndex === 3) return ((held = frame.raw), [])
      if (frame.connection === 2 && frame.binaryIndex === 4) return [frame.raw, held!]
      return [frame.raw]
    }
    b.transport.send('a', 'dropped')
    b.transport.send('a', 'after the dropped one')
    await waitFor('refused after the drop', () => a.transport.stats().framesRejected === 1)
    await waitFor('b redials', () => relay.connections === 2 && isConnected(a, 'b') && isConnected(b, 'a'))
    b.transport.send('a', 'first')
    b.transport.send('a', 'second')
    await waitFor('refused after the swap', () => a.transport.stats().framesRejected === 2)
    expect(a.inbox).to.deep.equal([])
  })

  it("refuses a frame moved from another link, or from the other direction of the same link", async () => {
    const { a, b, relay } = await relayedPair()
    b.transport.send('a', 'on the first link')
    await waitFor('the first message', () => a.inbox.length === 1)
    const fromFirstLink = relay.frames.find((frame) => sealed(frame, 'toAcceptor', 1))!.raw
    relay.cutAll()
    await waitFor('b redials', () => relay.connections === 2 && isConnected(a, 'b') && isConnected(b, 'a'))
    // The second link's first sealed frame is replaced by the first link's, which had the same sequence number.
    relay.tamper = (frame) => (sealed(frame, 'toAcceptor', 2) && frame.binaryIndex === 3 ? [fromFirstLink] : [frame.raw])
    b.transport.send('a', 'on the second link')
    await waitFor('refused', () => a.transport.stats().framesRejected === 1)
    expect(a.inbox.map((entry) => entry.message)).to.deep.equal(['on the first link'])
    await waitFor('b redials', () => relay.connections === 3 && isConnected(a, 'b') && isConnected(b, 'a'))
    // a's own first sealed frame to b, handed back to a as if b had sealed it.
    relay.tamper = (frame) => (sealed(frame, 'toDialer', 3) ? [] : [frame.raw])
    a.transport.send('b', 'reflected')
    await waitFor("a's frame on the wire", () => relay.frames.some((frame) => sealed(frame, 'toDialer', 3)))
    const reflected = asDialerFrame(relay.frames.find((frame) => sealed(frame, 'toDialer', 3))!.raw)
    relay.tamper = (frame) => (sealed(frame, 'toAcceptor', 3) && frame.binaryIndex === 3 ? [reflected] : [frame.raw])
    b.transport.send('a', 'replaced by the reflection')
    await waitFor('refused', () => a.transport.stats().framesRejected === 2)
    expect(a.inbox.map((entry) => entry.message)).to.deep.equal(['on the first link'])
  })

  it('refuses a server of another datacenter on a Raft link, on both sides, before any proof', async () => {
    const a = await startNode(cleanup, 'a', { datacenter: 'dc1' })
    const b = await startNode(cleanup, 'b', { datacenter: 'dc2' })
    connectAll([a, b])
    await waitFor('both refuse', () => a.transport.stats().handshakesFailed > 0 && b.transport.stats().handshakesFailed > 0)
    // Each dialer refuses the other's challenge, which names the acceptor's datacenter.
    expect(logged(a.log, 'peer handshake refused', { peer: 'b', reason: 'peer is in datacenter dc2; a raft link joins servers of datacenter dc1 only' })).to.equal(true)
    expect(logged(b.log, 'peer handshake refused', { peer: 'a', reason: 'peer is in datacenter dc1; a raft link joins servers of datacenter dc2 only' })).to.equal(true)
    // The acceptor refuses a dialer stating another datacenter in its proof, with the right key or not.
    const client = await rawClient(cleanup, a.transport)
    a.transport.setPeers(new Map([['b', await deadAddress()]]))
    const { transcript } = await helloAs(client, 'b', 'dc2')
    client.send(proofFrame(CLUSTER_KEY, transcript))
    expect(await client.closedWith()).to.equal(CloseCode.refused)
    expect(client.received).to.deep.equal([])
    await sleep(100)
    expect(isConnected(a, 'b') || isConnected(b, 'a')).to.equal(false)
    expect(a.inbox).to.deep.equal([])
  })

  it('refuses a peer of the previous protocol version with a line naming both versions', async () => {
    const a = await startNode(cleanup, 'a')
    a.transport.setPeers(new Map([['b', await deadAddress()]]))
    const client = await rawClient(cleanup, a.transport)
    // A version 2 hello: the same shape as ours.
    client.send(encodeFrame({ type: 'hello', version: 2, node: 'b', address: 'b.cluster.test:8300', nonce: randomBytes(32) }))
    expect(await client.closedWith()).to.equal(CloseCode.refused)
    expect(client.received).to.deep.equal([])
    const reason = `unsupported protocol version 2: this node speaks ${PROTOCOL_VERSION} (sealed links) and there is no mixed mode; run one release on every node`
    expect(logged(a.log, 'peer handshake refused', { reason })).to.equal(true)
  })

  it('rotation: a node proving with a new key and accepting the old one links with a node on the old key; an unknown key is refused', async () => {
    const a = await startNode(cleanup, 'a', { clusterKey: KEY_TWO, acceptKeys: [KEY_ONE] })
    const b = await startNode(cleanup, 'b', { clusterKey: KEY_ONE })
    connectAll([a, b])
    // b's dial (proved with the old key) is accepted; a's (the new key) is refused by b, which does not know it.
    await waitFor('the link', () => isConnected(a, 'b') && isConnected(b, 'a'))
    expect(a.transport.stats().peers.get('b')?.linkRole).to.equal('acceptor')
    b.transport.send('a', 'old to new')
    a.transport.send('b', 'new to old')
    await waitFor('both messages', () => a.inbox.length === 1 && b.inbox.length === 1)
    expect([a.inbox, b.inbox]).to.deep.equal([[{ from: 'b', message: 'old to new' }], [{ from: 'a', message: 'new to old' }]])
    // The link is sealed under the key the dialer proved with: a client holding only the old key opens what a sends.
    const c = await startNode(cleanup, 'c', { clusterKey: 'an-unknown-key-0a1b2c3d4e5f6a7b' })
    a.transport.setPeers(new Map([['b', addressOf(b.transport)], ['c', addressOf(c.transport)]]))
    c.transport.setPeers(new Map([['a', addressOf(a.transport)]]))
    const client = await authenticatedClient(cleanup, a.transport, 'c', KEY_ONE)
    a.transport.send('c', 'sealed under the old key')
    expect(await client.next()).to.deep.equal({ type: 'message', payload: 'sealed under the old key' })
    client.raw.ws.terminate()
    // c itself, on a key a neither proves with nor accepts, is refused both ways.
    await waitFor('c refused', () => logged(a.log, 'peer handshake refused', { peer: 'c', reason: 'peer did not prove the cluster key' }))
    await sleep(200)
    expect(isConnected(c, 'a')).to.equal(false)
    for (const line of [...a.log.raw, ...b.log.raw, ...c.log.raw]) for (const key of [KEY_ONE, KEY_TWO]) expect(line).not.to.include(key)
  })

  it('the benchmark-only unsealed mode links only with nodes as unsealed: a sealed node refuses its proof', async () => {
    const a = await startNode(cleanup, 'a', { unsealedForBenchmark: true })
    const b = await startNode(cleanup, 'b', { unsealedForBenchmark: true })
    connectAll([a, b])
    await waitFor('the unsealed link', () => isConnected(a, 'b') && isConnected(b, 'a'))
    b.transport.send('a', { n: 1 })
    await waitFor('the message', () => a.inbox.length === 1)
    expect(logged(a.log, 'peer transport listening with UNSEALED links: anyone on the path can read and forge frames; for benchmarks only')).to.equal(true)
    const c = await startNode(cleanup, 'c')
    connectAll([a, c])
    await waitFor('a refused handshake', () => a.transport.stats().handshakesFailed + c.transport.stats().handshakesFailed >= 2)
    await sleep(200)
    expect(isConnected(a, 'c') || isConnected(c, 'a')).to.equal(false)
  })

  it('rotation: two nodes that each accept the key the other proves with link both ways', async () => {
    const a = await startNode(cleanup, 'a', { clusterKey: KEY_TWO, acceptKeys: [KEY_ONE] })
    const b = await startNode(cleanup, 'b', { clusterKey: KEY_ONE, acceptKeys: [KEY_TWO] })
    connectAll([a, b])
    await waitFor('the link', () => isConnected(a, 'b') && isConnected(b, 'a'))
    await sleep(200)
    expect(a.transport.stats().handshakesFailed + b.transport.stats().handshakesFailed).to.equal(0)
  })
})
