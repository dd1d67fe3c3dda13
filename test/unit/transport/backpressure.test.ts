/**
 * Backpressure and bounds on the sending side: a peer that stops reading makes the socket buffer fill, then the
 * bounded queue, then send() return false; nothing grows past the configured bounds however long the sender
 * keeps trying, and every frame that was accepted arrives, in order, once the peer reads again.
 *
 * Method: a dials b through a TCP proxy that can stop reading from a's side, which is what a slow or stalled peer
 * looks like from a: the kernel buffers fill and ws's bufferedAmount grows.
 */
import { expect } from 'chai'
import { setImmediate as turn } from 'node:timers/promises'
import { deadAddress, isConnected, logged, startNode, startProxy, startSilentServer, useCleanup, waitFor } from './harness.js'

describe('transport: backpressure and bounds', () => {
  const cleanup = useCleanup()

  it('queues while the socket is busy, refuses once the queue is full, and delivers what it accepted', async () => {
    const bounds = { sendQueueFramesMax: 8, sendQueueBytesMax: 512 * 1024, socketBufferedBytesMax: 64 * 1024, frameBytesMax: 256 * 1024 }
    // Keepalive well above the stall, so that b does not close a link that goes quiet while the proxy is paused.
    const [a, b] = await Promise.all([startNode(cleanup, 'a', { ...bounds, keepaliveIntervalMs: 2000 }), startNode(cleanup, 'b', { keepaliveIntervalMs: 2000 })])
    const proxy = await startProxy(cleanup, `127.0.0.1:${b.transport.address.port}`)
    b.transport.setPeers(new Map([['a', await deadAddress()]]))
    a.transport.setPeers(new Map([['b', proxy.address]]))
    await waitFor('a connected to b', () => isConnected(a, 'b') && isConnected(b, 'a'))

    proxy.pause()
    const payload = Buffer.alloc(100 * 1024, 7)
    let accepted = 0
    let refused = 0
    let bufferedMax = 0
    // Keep sending, yielding to the event loop so the sockets really fill (not only the queue), until 30 turns in a
    // row accept nothing more: however long the sender keeps trying from then on, nothing more is held.
    const deadline = Date.now() + 8000
    for (let turnsWithoutProgress = 0; turnsWithoutProgress < 30; ) {
      expect(Date.now(), 'the stalled peer still takes frames after 8 s').to.be.below(deadline)
      const acceptedBefore = accepted
      for (let burst = 0; burst < 20; burst += 1) {
        if (a.transport.send('b', { sequence: accepted, payload })) accepted += 1
        else refused += 1
      }
      const stats = a.transport.stats().peers.get('b')!
      expect(stats.queueFrames).to.be.at.most(bounds.sendQueueFramesMax)
      expect(stats.queueBytes).to.be.at.most(bounds.sendQueueBytesMax)
      bufferedMax = Math.max(bufferedMax, stats.socketBufferedBytes)
      turnsWithoutProgress = accepted === acceptedBefore ? turnsWithoutProgress + 1 : 0
      await turn()
    }
    expect(refused).to.be.at.least(600)
    // What was accepted is bounded by the kernel's socket buffers plus our bounds.
    expect(accepted).to.be.lessThan(400)
    expect(bufferedMax).to.be.at.most(bounds.socketBufferedBytesMax + bounds.frameBytesMax)
    expect(a.transport.stats().peers.get('b')!.framesDropped).to.equal(refused)
    expect(logged(a.log, 'peer send queue full, refusing frames')).to.equal(true)

    proxy.resume()
    await waitFor(`all ${accepted} accepted frames delivered`, () => b.inbox.length === accepted)
    expect(b.inbox.map(({ message }) => (message as { sequence: number }).sequence)).to.deep.equal([...Array(accepted).keys()])
    expect(a.transport.stats().peers.get('b')).to.include({ queueFrames: 0, queueBytes: 0 })
    // Accepting again once drained.
    expect(a.transport.send('b', { sequence: accepted, payload })).to.equal(true)
  })

  it('bounds the queue of a peer that is not connected, and drops it when the dial fails', async () => {
    // A listener that accepts TCP and never answers the upgrade: the dial hangs until the handshake timeout.
    const silent = await startSilentServer(cleanup)
    const a = await startNode(cleanup, 'a', { sendQueueFramesMax: 16, handshakeTimeoutMs: 300, peers: new Map([['b', await deadAddress()]]) })
    a.transport.setPeers(new Map([['b', silent.address]]))
    const results = Array.from({ length: 100 }, (_, sequence) => a.transport.send('b', sequence))
    expect(results.filter(Boolean)).to.have.length(16)
    expect(a.transport.stats().peers.get('b')).to.include({ queueFrames: 16, framesDropped: 84 })
    await waitFor('the queued frames dropped after the failed dial', () => a.transport.stats().peers.get('b')!.queueFrames === 0, 3000)
    expect(a.transport.stats().peers.get('b')!.framesDropped).to.equal(100)
  })

  it('refuses a message larger than frameBytesMax rather than have the peer close the link', async () => {
    const a = await startNode(cleanup, 'a', { frameBytesMax: 64 * 1024, sendQueueBytesMax: 64 * 1024, peers: new Map([['b', await deadAddress()]]) })
    expect(a.transport.send('b', Buffer.alloc(65 * 1024))).to.equal(false)
    expect(a.transport.send('nobody', 'x')).to.equal(false)
    expect(a.transport.stats().framesOversized).to.equal(1)
  })
})

