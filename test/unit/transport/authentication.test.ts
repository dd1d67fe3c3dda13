/**
 * Authentication and hostile input on the peer endpoint: nothing is delivered from a connection that has not
 * proven the cluster key, a wrong key or an unknown node name is refused and logged (never the key itself), and
 * bad frames (malformed, oversized, out of place) close the one connection, never the process.
 *
 * Method: a real transport on 127.0.0.1, approached either by another real transport or by a raw WebSocket client
 * that speaks the handshake by hand (handshake.ts documents it), so each rule can be broken one at a time.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { Packr } from 'msgpackr'
import { WebSocketServer } from 'ws'
import { PEER_PATH } from '../../../src/transport/index.js'
import { CloseCode } from '../../../src/transport/link.js'
import { decodeFrame, encodeFrame, PROTOCOL_VERSION, type Frame } from '../../../src/transport/frames.js'
import { startRelay } from '../../support/relay.js'
import { ClusterKey, type HandshakeTranscript } from '../../../src/transport/handshake.js'
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
  type SealedClient,
  type TestNode,
} from './harness.js'

const OTHER_KEY = 'a-different-key-9e8d7c6b-also-not-for-production'

describe('transport: authentication and hostile peers', () => {
  const cleanup = useCleanup()

  /**
   * Node a, with b as its only peer at an address where nothing listens (so raw clients can claim to be b), and a
   * request handler that records what reaches it.
   */
  async function nodeA(options: Parameters<typeof startNode>[2] = {}): Promise<TestNode & { requests: unknown[] }> {
    const a = Object.assign(await startNode(cleanup, 'a', options), { requests: [] as unknown[] })
    a.transport.setPeers(new Map([['b', await deadAddress()]]))
    a.transport.onRequest(async (from, message) => {
      a.requests.push({ from, message })
      return 'answered'
    })
    return a
  }

  /** A raw client that completes the handshake as b with the real key. */
  function authenticated(a: TestNode): Promise<SealedClient> {
    return authenticatedClient(cleanup, a.transport)
  }

  it('refuses a peer with the wrong key: nothing delivered either way, the failure logged, the key never logged', async () => {
    const a = await startNode(cleanup, 'a')
    const b = await startNode(cleanup, 'b', { clusterKey: OTHER_KEY })
    let requestsServed = 0
    b.transport.onRequest(async () => (requestsServed += 1))
    connectAll([a, b])
    const answer = a.transport.request('b', 'write', 300).catch((error: unknown) => error)
    for (let attempt = 0; attempt < 20; attempt += 1) {
      a.transport.send('b', 'from a')
      b.transport.send('a', 'from b')
      await sleep(10)
    }
    await waitFor('failed handshakes on both sides', () => a.transport.stats().handshakesFailed > 0 && b.transport.stats().handshakesFailed > 0)
    expect(await answer).to.have.property('name', 'TransportError')
    expect(a.inbox).to.deep.equal([])
    expect(b.inbox).to.deep.equal([])
    expect(requestsServed).to.equal(0)
    expect(a.peerEvents).to.deep.equal([])
    expect(isConnected(a, 'b') || isConnected(b, 'a')).to.equal(false)
    // Each side refuses the other's dial when the dialer's proof does not verify.
    expect(logged(a.log, 'peer handshake refused', { peer: 'b', reason: 'peer did not prove the cluster key' })).to.equal(true)
    expect(logged(b.log, 'peer handshake refused', { peer: 'a', reason: 'peer did not prove the cluster key' })).to.equal(true)
    for (const line of [...a.log.raw, ...b.log.raw]) {
      expect(line).not.to.include(CLUSTER_KEY)
      expect(line).not.to.include(OTHER_KEY)
    }
  })

  it('refuses a node that has the key but is not in the peer set, before proving anything to it', async () => {
    const a = await nodeA()
    const c = await startNode(cleanup, 'c', { peers: new Map([['a', addressOf(a.transport)]]) })
    for (let attempt = 0; attempt < 10; attempt += 1) {
      c.transport.send('a', 'from c')
      await sleep(10)
    }
    await waitFor('a refuses c', () => logged(a.log, 'peer handshake refused', { peer: 'c', reason: 'not a node of the peer set' }))
    await waitFor('c sees the refusal', () => logged(c.log, 'peer refused the handshake', { peer: 'a' }))
    expect(a.inbox).to.deep.equal([])
    expect(isConnected(c, 'a')).to.equal(false)
    // a answered c's hello with a close, not a challenge: c never saw a proof it could study.
    expect(c.log.records.some((record) => record['reason'] === 'peer did not prove the cluster key')).to.equal(false)
  })

  it('delivers nothing from a connection whose first frame is not a hello', async () => {
    const a = await nodeA()
    for (const frame of [
      encodeFrame({ type: 'message', payload: 'sneaky' }),
      encodeFrame({ type: 'request', id: 1, payload: 'sneaky' }),
      encodeFrame({ type: 'welcome', proof: randomBytes(32) }),
    ]) {
      const client = await rawClient(cleanup, a.transport)
      client.send(frame)
      expect(await client.closedWith()).to.equal(CloseCode.refused)
      expect(client.received).to.deep.equal([])
    }
    await sleep(50)
    expect(a.inbox).to.deep.equal([])
    expect(a.requests).to.deep.equal([])
    expect(a.transport.stats().handshakesFailed).to.equal(3)
  })

  it('delivers nothing from a client that names a known peer but does not prove the key', async () => {
    const a = await nodeA()
    const attempts: Array<(transcript: HandshakeTranscript) => Buffer> = [
      // Skips the proof and sends a message instead.
      () => encodeFrame({ type: 'message', payload: 'sneaky' }),
      () => encodeFrame({ type: 'proof', datacenter: 'dc1', kind: 'raft', proof: randomBytes(32) }),
      (transcript) => proofFrame(OTHER_KEY, transcript),
      // A proof made with the key, but in the acceptor's role (one a node made when it accepted): the direction
      // label makes it worthless as a dialer's.
      (transcript) => proofFrame(CLUSTER_KEY, transcript, 'acceptor'),
    ]
    for (const attempt of attempts) {
      const client = await rawClient(cleanup, a.transport)
      const { challenge, transcript } = await helloAs(client, 'b')
      expect(challenge.node).to.equal('a')
      client.send(attempt(transcript))
      client.send(encodeFrame({ type: 'message', payload: 'after the proof' }))
      expect(await client.closedWith()).to.equal(CloseCode.refused)
      // Nothing came back after the challenge: no welcome, so no proof of the key either.
      expect(client.received).to.deep.equal([])
    }
    await sleep(50)
    expect(a.inbox).to.deep.equal([])
    expect(a.peerEvents).to.deep.equal([])
    // Every refusal is counted; the warning for one reason is logged once per 10 s (anyone can cause them).
    expect(a.transport.stats().handshakesFailed).to.equal(4)
    expect(a.log.records.filter((record) => record['reason'] === 'peer did not prove the cluster key')).to.have.length(1)
  })

  it('proves nothing keyed to a stranger that dials it and names a peer: the challenge carries no proof', async () => {
    const a = await nodeA()
    const client = await rawClient(cleanup, a.transport)
    client.send(encodeFrame({ type: 'hello', version: PROTOCOL_VERSION, node: 'b', address: 'b.cluster.test:8300', nonce: randomBytes(32) }))
    // The frame as sent, before our decoder: [tag, node, address, datacenter, kind, nonce] and nothing else.
    const fields = new Packr({ useRecords: false }).unpack(await client.nextFrame()) as unknown[]
    expect(fields).to.have.length(6)
    expect(fields.slice(1, 5)).to.deep.equal(['a', 'a.cluster.test:8300', 'dc1', 'raft'])
    expect(Buffer.from(fields[5] as Uint8Array)).to.have.length(32)
    // Without a proof of our own, the acceptor answers nothing more and drops the connection.
    client.send(encodeFrame({ type: 'proof', datacenter: 'dc1', kind: 'raft', proof: randomBytes(32) }))
    expect(await client.closedWith()).to.equal(CloseCode.refused)
    expect(client.received).to.deep.equal([])
  })

  it('as the dialer, refuses an acceptor whose welcome does not prove the key, and sends it nothing', async () => {
    // A fake b that answers the handshake by the protocol but cannot prove the key in its welcome.
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0, path: PEER_PATH })
    await new Promise<void>((resolve) => server.once('listening', () => resolve()))
    cleanup.defer(async () => {
      for (const socket of server.clients) socket.terminate()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    })
    const seen: Frame[] = []
    let dialerProofValid: boolean | undefined
    server.on('connection', (socket) => {
      const nonce = randomBytes(32)
      let transcript: HandshakeTranscript | undefined
      socket.on('message', (data) => {
        const frame = decodeFrame(data as Buffer)
        seen.push(frame)
        if (frame.type === 'hello') {
          transcript = {
            kind: 'raft',
            dialerNode: frame.node,
            acceptorNode: 'b',
            dialerAddress: frame.address,
            acceptorAddress: 'b.cluster.test:8300',
            dialerDatacenter: 'dc1',
            acceptorDatacenter: 'dc1',
            dialerNonce: frame.nonce,
            acceptorNonce: nonce,
          }
          socket.send(encodeFrame({ type: 'challenge', node: 'b', address: 'b.cluster.test:8300', datacenter: 'dc1', kind: 'raft', nonce }))
        } else if (frame.type === 'proof' && transcript !== undefined) {
          dialerProofValid = new ClusterKey(CLUSTER_KEY).verify('dialer', transcript, frame.proof)
          socket.send(encodeFrame({ type: 'welcome', proof: new ClusterKey(OTHER_KEY).proof('acceptor', transcript) }))
        }
      })
    })
    const a = await startNode(cleanup, 'a', { peers: new Map([['b', `127.0.0.1:${(server.address() as { port: number }).port}`]]) })
    a.transport.send('b', 'for b only once it proved the key')
    await waitFor('a refuses the welcome', () => logged(a.log, 'peer handshake refused', { peer: 'b', reason: 'peer did not prove the cluster key' }))
    // a proved itself (it dialed the address it was given for b), then refused b's proof and sent nothing else.
    expect(dialerProofValid).to.equal(true)
    await sleep(100)
    expect(seen.filter((frame) => frame.type !== 'hello' && frame.type !== 'proof')).to.deep.equal([])
    expect(isConnected(a, 'b')).to.equal(false)
    expect(a.peerEvents).to.deep.equal([])
  })

  it('accepts a client that follows the documented handshake with the key, naming it as it proved', async () => {
    const a = await nodeA()
    const client = await authenticated(a)
    client.send({ type: 'message', payload: { hello: 'from b' } })
    await waitFor('the message', () => a.inbox.length === 1)
    expect(a.inbox[0]).to.deep.equal({ from: 'b', message: { hello: 'from b' } })
    expect(a.transport.stats().peers.get('b')).to.include({ connected: true, linkRole: 'acceptor', advertiseAddress: 'b.cluster.test:8300' })
    expect(a.transport.send('b', 'to b')).to.equal(true)
    expect(await client.next()).to.deep.equal({ type: 'message', payload: 'to b' })
  })

  it('closes an authenticated link that sends a malformed or out-of-place frame, and keeps serving others', async () => {
    const a = await nodeA()
    // Sealed as they should be, so they open; what is inside is wrong.
    const hello = encodeFrame({ type: 'hello', version: PROTOCOL_VERSION, node: 'b', address: '', nonce: randomBytes(32) })
    for (const bad of [Buffer.from([0xc1, 0xff, 0x00]), hello, Buffer.from([0x93, 0x63]), Buffer.concat([encodeFrame({ type: 'message', payload: 'x' }), Buffer.from([0])])]) {
      const client = await authenticated(a)
      client.sendPlaintext(bad)
      client.send({ type: 'message', payload: 'after the bad frame' })
      expect(await client.raw.closedWith()).to.equal(CloseCode.badFrame)
    }
    const text = await authenticated(a)
    text.raw.send('a text frame')
    expect(await text.raw.closedWith()).to.equal(CloseCode.badFrame)
    // A frame in clear after the handshake does not open.
    const clear = await authenticated(a)
    clear.raw.send(encodeFrame({ type: 'message', payload: 'in clear' }))
    expect(await clear.raw.closedWith()).to.equal(CloseCode.notAuthentic)
    const good = await authenticated(a)
    good.send({ type: 'message', payload: 'still here' })
    await waitFor('the message', () => a.inbox.length === 1)
    expect(a.inbox).to.deep.equal([{ from: 'b', message: 'still here' }])
  })

  it('closes a connection that sends a frame above frameBytesMax, authenticated or not, without crashing', async () => {
    const a = await nodeA({ frameBytesMax: 64 * 1024, sendQueueBytesMax: 64 * 1024 })
    const stranger = await rawClient(cleanup, a.transport)
    stranger.send(Buffer.alloc(100 * 1024))
    // Refused by ws's maxPayload, or before the frame is whole, since the stranger has not proven the key.
    expect(await stranger.closedWith()).to.be.oneOf([CloseCode.tooLarge, 1006])
    // Below maxPayload but far above any handshake frame: refused before it is even decoded.
    const chatty = await rawClient(cleanup, a.transport)
    chatty.send(encodeFrame({ type: 'message', payload: Buffer.alloc(4096) }))
    expect(await chatty.closedWith()).to.equal(CloseCode.badFrame)
    const peer = await authenticated(a)
    peer.send({ type: 'message', payload: Buffer.alloc(100 * 1024) })
    expect(await peer.raw.closedWith()).to.equal(CloseCode.tooLarge)
    expect(logged(a.log, 'peer socket error', { code: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' })).to.equal(true)
    expect(a.inbox).to.deep.equal([])
    // The process and the transport carry on.
    const again = await authenticated(a)
    again.send({ type: 'message', payload: Buffer.alloc(60 * 1024) })
    await waitFor('a frame just under the bound', () => a.inbox.length === 1)
  })

  it('closes a connection that sends more than a few handshake frames before its proof, before ws holds a whole frame', async () => {
    const a = await nodeA()
    const stranger = await rawClient(cleanup, a.transport)
    // A frame header announcing 8 MiB, then 64 KiB of it: ws alone would wait for (and hold) the rest.
    const header = Buffer.from([0x82, 0xff, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xf0, 1, 2, 3, 4])
    stranger.sendRaw(Buffer.concat([header, Buffer.alloc(64 * 1024)]))
    expect(await stranger.closedWith()).to.equal(1006)
    expect(logged(a.log, 'a peer connection sent too much before proving the cluster key; closed')).to.equal(true)
    const peer = await authenticated(a)
    peer.send({ type: 'message', payload: Buffer.alloc(100 * 1024) })
    await waitFor('a large frame after the proof', () => a.inbox.length === 1)
  })

  it('drops a connection that does not finish the handshake in time', async () => {
    const a = await nodeA({ handshakeTimeoutMs: 300 })
    const client = await rawClient(cleanup, a.transport)
    const startedMs = Date.now()
    expect(await client.closedWith()).to.equal(CloseCode.handshakeTimeout)
    expect(Date.now() - startedMs).to.be.within(250, 1500)
    expect(logged(a.log, 'peer handshake refused', { reason: 'handshake timed out' })).to.equal(true)
  })

  it('logs one warning per kind of refusal per interval, whatever names and versions the other side makes up', async () => {
    const a = await nodeA()
    for (let n = 0; n < 6; n++) {
      const client = await rawClient(cleanup, a.transport)
      // A new unknown name each time, then a new unsupported version each time.
      const frame = n < 3
        ? { type: 'hello' as const, version: PROTOCOL_VERSION, node: `stranger-${n}`, address: 'x.test:1', nonce: randomBytes(32) }
        : { type: 'hello' as const, version: PROTOCOL_VERSION + 1 + n, node: 'b', address: 'x.test:1', nonce: randomBytes(32) }
      client.send(encodeFrame(frame))
      expect(await client.closedWith()).to.equal(CloseCode.refused)
    }
    expect(a.transport.stats().handshakesFailed).to.equal(6)
    const refused = a.log.records.filter((record) => record['msg'] === 'peer handshake refused')
    expect(refused.map((record) => record['reason'])).to.deep.equal([
      'not a node of the peer set',
      `unsupported protocol version ${PROTOCOL_VERSION + 4}: this node speaks ${PROTOCOL_VERSION} (sealed links) and there is no mixed mode; run one release on every node`,
    ])
  })

  it('bounds the connections waiting in their handshake, dropping the oldest of the address holding the most', async () => {
    const a = await nodeA({ handshakesPendingMax: 2 })
    const waiting = [await rawClient(cleanup, a.transport), await rawClient(cleanup, a.transport)]
    const newest = await rawClient(cleanup, a.transport)
    // All from 127.0.0.1, so the oldest of them goes (pending.ts; test/unit/transport/pending.test.ts for addresses).
    expect(await waiting[0]!.closedWith()).to.be.a('number')
    expect(logged(a.log, 'too many pending peer handshakes, dropping the oldest of the busiest address')).to.equal(true)
    expect(a.transport.stats().handshakesPending).to.equal(2)
    for (const client of [waiting[1]!, newest]) expect(client.closeCode).to.equal(undefined)
  })

  /**
   * Idle TCP connections to a's peer port from 127.0.0.1, `count` of them, each reopened `reopenMs` after the
   * transport drops it: a flood that churns the bound on unauthenticated connections as fast as it is applied.
   */
  async function flood(a: TestNode, count: number, reopenMs: number): Promise<void> {
    const { connect } = await import('node:net')
    const [host, port] = addressOf(a.transport).split(':')
    let flooding = true
    const sockets = new Set<import('node:net').Socket>()
    const open = (): void => {
      if (!flooding) return
      const socket = connect({ host: host!, port: Number(port) })
      sockets.add(socket)
      socket.on('error', () => undefined)
      socket.on('close', () => {
        sockets.delete(socket)
        setTimeout(open, reopenMs)
      })
    }
    cleanup.defer(() => {
      flooding = false
      for (const socket of sockets) socket.destroy()
    })
    for (let n = 0; n < count; n++) open()
    await sleep(200)
  }

  it('lets a real peer in while others hold idle connections to the peer port', async () => {
    const a = await nodeA({ handshakesPendingMax: 2 })
    // More than the bound on unauthenticated connections (2 pending + slack), reopened as they drop.
    await flood(a, 40, 5)
    const b = await startNode(cleanup, 'b', { peers: new Map([['a', addressOf(a.transport)]]) })
    a.transport.setPeers(new Map([['b', addressOf(b.transport)]]))
    b.transport.send('a', 'through the flood')
    await waitFor('b reaches a', () => a.inbox.some((entry) => entry.message === 'through the flood'), 5_000)
    expect(isConnected(a, 'b')).to.equal(true)
  })

  it('lets a slow real peer from another address in while a flood churns the pending-handshake bound (review finding)', async () => {
    // a cannot dial b (b is at a dead address in a's set): the only way in is b's dial, through the flood.
    const a = await nodeA()
    await flood(a, 120, 0)
    // b is another machine (127.0.0.2) 20 ms away: its handshake takes several round trips, during which the flood
    // opens far more connections than the bound holds. Dropping the oldest would drop b's every time.
    const relay = await startRelay((closer) => cleanup.defer(closer), addressOf(a.transport), { localAddress: '127.0.0.2', delayMs: 20 })
    const b = await startNode(cleanup, 'b', { peers: new Map([['a', relay.address]]) })
    const startedMs = Date.now()
    b.transport.send('a', 'through the flood')
    await waitFor('b reaches a', () => a.inbox.some((entry) => entry.message === 'through the flood'), 1_500)
    expect(Date.now() - startedMs).to.be.below(1_500)
    expect(logged(a.log, 'too many pending peer handshakes, dropping the oldest of the busiest address')).to.equal(true)
  })
})
