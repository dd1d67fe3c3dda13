/**
 * The peer transport between real transports on 127.0.0.1: messages both ways between two and three nodes, one
 * connection per pair (both ends keep the same link when both dial at once), reconnection after a peer restarts,
 * identity by name through a proxy, membership changes, and a stop() that leaves nothing running.
 *
 * Method: every node starts with no peers on port 0, then all are given each other's addresses at once, so each
 * pair dials both ways simultaneously: the case the duplicate rule exists for.
 */
import { expect } from 'chai'
import { PeerTransport } from '../../../src/transport/index.js'
import { addressOf, captureLog, connectAll, deadAddress, isConnected, sleep, startNode, startProxy, trackResources, useCleanup, waitFor, type TestNode } from './harness.js'

describe('transport: peer links', () => {
  const cleanup = useCleanup()

  async function cluster(names: string[]): Promise<TestNode[]> {
    const nodes = await Promise.all(names.map((name) => startNode(cleanup, name)))
    connectAll(nodes)
    for (const node of nodes) {
      for (const other of nodes) if (other !== node) await waitFor(`${node.name} connected to ${other.name}`, () => isConnected(node, other.name))
    }
    return nodes
  }

  it('delivers messages both ways between two nodes, with the sender named by its proven node name', async () => {
    const [a, b] = (await cluster(['a', 'b'])) as [TestNode, TestNode]
    expect(a.transport.send('b', { type: 'append', entries: [1, 2, 3], data: Buffer.from([0, 255]) })).to.equal(true)
    expect(b.transport.send('a', { type: 'append-response', success: true })).to.equal(true)
    await waitFor('both messages', () => a.inbox.length === 1 && b.inbox.length === 1)
    expect(b.inbox[0]).to.deep.equal({ from: 'a', message: { type: 'append', entries: [1, 2, 3], data: Buffer.from([0, 255]) } })
    expect(a.inbox[0]).to.deep.equal({ from: 'b', message: { type: 'append-response', success: true } })
    expect(a.peerEvents).to.deep.equal([{ peer: 'b', connected: true }])
    expect(b.peerEvents).to.deep.equal([{ peer: 'a', connected: true }])
  })

  it('keeps message order per peer', async () => {
    const [a, b] = (await cluster(['a', 'b'])) as [TestNode, TestNode]
    for (let sequence = 0; sequence < 500; sequence += 1) expect(a.transport.send('b', { sequence })).to.equal(true)
    await waitFor('500 messages', () => b.inbox.length === 500)
    expect(b.inbox.map(({ message }) => (message as { sequence: number }).sequence)).to.deep.equal([...Array(500).keys()])
  })

  it('connects three nodes pairwise, one link per pair, the one dialed by the lower name at both ends', async () => {
    const nodes = await cluster(['a', 'b', 'c'])
    for (const node of nodes) for (const other of nodes) if (other !== node) node.transport.send(other.name, `${node.name}->${other.name}`)
    await waitFor('six messages', () => nodes.every((node) => node.inbox.length === 2))
    for (const node of nodes) {
      const expected = nodes.filter((other) => other !== node).map((other) => ({ from: other.name, message: `${other.name}->${node.name}` }))
      expect(node.inbox).to.have.deep.members(expected)
    }
    // Both dials of each pair succeed; whichever completes first, both ends must settle on the same link, with no
    // flapping afterwards. Long enough for several keepalives and past the handshake timeout of the HTTP server.
    await sleep(600)
    for (const node of nodes) {
      expect(node.transport.stats().linksOpen).to.equal(2)
      for (const other of nodes) {
        if (other === node) continue
        const role = node.transport.stats().peers.get(other.name)?.linkRole
        expect(role, `${node.name}'s link to ${other.name}`).to.equal(node.name < other.name ? 'dialer' : 'acceptor')
      }
      expect(node.peerEvents.filter((event) => event.connected).length, `${node.name} peer events`).to.equal(2)
      expect(node.peerEvents.filter((event) => !event.connected)).to.deep.equal([])
    }
  })

  it('loses no message while both ends of a pair resolve a simultaneous dial', async () => {
    for (let round = 0; round < 10; round += 1) {
      const [a, b] = await Promise.all([startNode(cleanup, 'a'), startNode(cleanup, 'b')])
      connectAll([a, b])
      // Sent before any link is up, then while the duplicate is being resolved.
      for (let sequence = 0; sequence < 20; sequence += 1) {
        a.transport.send('b', sequence)
        b.transport.send('a', sequence)
        if (sequence % 5 === 4) await sleep(1)
      }
      await waitFor(`round ${round}: all messages`, () => a.inbox.length === 20 && b.inbox.length === 20)
      // Frames still draining on a replaced link may interleave with the new link's: order is per link only.
      expect(a.inbox.map(({ message }) => message)).to.have.members([...Array(20).keys()])
      expect(b.inbox.map(({ message }) => message)).to.have.members([...Array(20).keys()])
      await Promise.all([a.transport.stop(), b.transport.stop()])
    }
  })

  it('reconnects after a peer restarts on the same address, and reports the loss and the return', async () => {
    const [a, b] = (await cluster(['a', 'b'])) as [TestNode, TestNode]
    const port = b.transport.address.port
    await b.transport.stop()
    await waitFor('a notices b is gone', () => !isConnected(a, 'b'))
    expect(a.peerEvents).to.deep.equal([
      { peer: 'b', connected: true },
      { peer: 'b', connected: false },
    ])
    // Sends while b is down are queued and dropped when a dial fails: never an error, never unbounded.
    expect(a.transport.send('b', 'while down')).to.equal(true)
    await sleep(100)
    const restarted = await startNode(cleanup, 'b', { listen: { host: '127.0.0.1', port }, peers: new Map([['a', addressOf(a.transport)]]) })
    await waitFor('a reconnected to b', () => isConnected(a, 'b') && isConnected(restarted, 'a'))
    a.transport.send('b', 'after restart')
    restarted.transport.send('a', 'hello again')
    await waitFor('messages after the restart', () => restarted.inbox.length === 1 && a.inbox.length === 1)
    expect(restarted.inbox[0]).to.deep.equal({ from: 'a', message: 'after restart' })
    expect(a.inbox[0]).to.deep.equal({ from: 'b', message: 'hello again' })
    expect(a.peerEvents.at(-1)).to.deep.equal({ peer: 'b', connected: true })
  })

  it('reports to a handler set later only the changes after it: a link already open shows in stats(), its loss is reported', async () => {
    const [a, b] = (await cluster(['a', 'b'])) as [TestNode, TestNode]
    // As the agent does: the transport dialed at start, the replica's handler comes later (PeerLinks.onPeerState).
    const later: Array<{ peer: string; connected: boolean }> = []
    a.transport.onPeerState((peer, connected) => later.push({ peer, connected }))
    await sleep(50)
    expect(later).to.deep.equal([])
    expect(a.transport.stats().peers.get('b')).to.include({ connected: true, advertiseAddress: 'b.cluster.test:8300' })
    await b.transport.stop()
    await waitFor('a told of the loss', () => later.length === 1)
    expect(later).to.deep.equal([{ peer: 'b', connected: false }])
  })

  it('identifies a peer dialed through a proxy by its node name, not by the address dialed', async () => {
    const [a, b] = await Promise.all([startNode(cleanup, 'a'), startNode(cleanup, 'b')])
    const proxy = await startProxy(cleanup, addressOf(b.transport))
    // b cannot reach a, so the only link is a's, through the proxy.
    b.transport.setPeers(new Map([['a', await deadAddress()]]))
    a.transport.setPeers(new Map([['b', proxy.address]]))
    await waitFor('a connected to b through the proxy', () => isConnected(a, 'b') && isConnected(b, 'a'))
    a.transport.send('b', 'via proxy')
    b.transport.send('a', 'back')
    await waitFor('messages through the proxy', () => a.inbox.length === 1 && b.inbox.length === 1)
    expect(b.inbox[0]).to.deep.equal({ from: 'a', message: 'via proxy' })
    expect(a.inbox[0]).to.deep.equal({ from: 'b', message: 'back' })
    expect(proxy.connections).to.be.greaterThan(0)
    expect(a.transport.stats().peers.get('b')).to.include({ address: proxy.address, linkRole: 'dialer', advertiseAddress: 'b.cluster.test:8300' })
    expect(b.transport.stats().peers.get('a')).to.include({ linkRole: 'acceptor', advertiseAddress: 'a.cluster.test:8300' })
  })

  it('drops a removed peer: closes its link, refuses sends to it, and refuses its connections', async () => {
    const [a, b] = (await cluster(['a', 'b'])) as [TestNode, TestNode]
    a.transport.setPeers(new Map())
    expect(a.transport.send('b', 'gone')).to.equal(false)
    expect(a.peerEvents.at(-1)).to.deep.equal({ peer: 'b', connected: false })
    await waitFor('b notices the link closed', () => !isConnected(b, 'a'))
    // b keeps dialing a, and a refuses it: it is no longer in a's peer set.
    await waitFor('a refuses b', () => a.transport.stats().handshakesFailed > 0)
    expect(isConnected(b, 'a')).to.equal(false)
    a.transport.setPeers(new Map([['b', addressOf(b.transport)]]))
    await waitFor('b added back', () => isConnected(a, 'b') && isConnected(b, 'a'))
  })

  it('refuses to run with peers but no cluster key, naming the setting', async () => {
    const log = captureLog().logger
    let failure: unknown
    try {
      await PeerTransport.start({
        nodeName: 'a',
        advertiseAddress: 'a:1',
        datacenter: 'dc1',
        clusterKey: undefined,
        listen: { host: '127.0.0.1', port: 0 },
        peers: new Map([['b', '127.0.0.1:1']]),
        log,
      })
    } catch (error) {
      failure = error
    }
    expect(failure).to.be.instanceOf(Error).with.property('field', 'clusterKey')
  })

  it('stop() closes every socket, server and timer, even with dials and requests under way', async () => {
    const resources = trackResources()
    cleanup.defer(() => resources.disable())
    const [a, b] = (await cluster(['a', 'b'])) as [TestNode, TestNode]
    b.transport.onRequest(() => new Promise(() => {}))
    const waiting = a.transport.request('b', 'never answered', 10_000).catch((error: unknown) => error)
    a.transport.setPeers(new Map([['b', addressOf(b.transport)], ['c', await deadAddress()]]))
    await sleep(50)
    await Promise.all([a.transport.stop(), b.transport.stop()])
    expect(await waiting).to.have.property('code', 'stopped')
    expect(a.transport.send('b', 'after stop')).to.equal(false)
    // Closed handles are released over the next turns of the event loop.
    await waitFor('no handles left', () => resources.live().length === 0, 2000).catch(() => {
      throw new Error(`left after stop():\n${resources.live().join('\n')}`)
    })
  })

})
