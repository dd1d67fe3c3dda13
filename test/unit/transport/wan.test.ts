/**
 * WAN links (issue 19, step 2): servers of every datacenter link with each other on the cluster port they already
 * have for Raft (its own path), named NODE.DC. The WAN peer set is open: a server that proves the cluster key (and
 * under TLS a server certificate of the datacenter its name says) is adopted as a peer while there is room, and
 * `introduce(address)` dials an address without knowing whom it will reach (`--join-wan`).
 *
 * Method: real transports on 127.0.0.1, Raft and WAN transports of a node sharing one PeerListener.
 */
import { expect } from 'chai'
import { createCa, createCert, type Ca } from '../../../src/cli/tls/generate.js'
import { PeerListener } from '../../../src/transport/listener.js'
import { PeerTransport, type TransportOptions } from '../../../src/transport/index.js'
import type { PeerTlsMaterial } from '../../../src/transport/tls.js'
import { addressOf, captureLog, CLUSTER_KEY, deadAddress, isConnected, sleep, useCleanup, waitFor, type TestNode } from './harness.js'

describe('transport: WAN links', function () {
  this.timeout(20_000)
  const cleanup = useCleanup()

  async function listenerFor(tls?: PeerTlsMaterial): Promise<PeerListener> {
    const listener = await PeerListener.start({ listen: { host: '127.0.0.1', port: 0 }, handshakeTimeoutMs: 2000, handshakesPendingMax: 32, log: captureLog().logger, ...(tls === undefined ? {} : { tls }) })
    cleanup.defer(() => listener.stop())
    return listener
  }

  async function transport(kind: 'raft' | 'wan', node: string, datacenter: string, listener: PeerListener, options: Partial<TransportOptions> = {}): Promise<TestNode> {
    const log = captureLog()
    const name = kind === 'wan' ? `${node}.${datacenter}` : node
    const started = await PeerTransport.start({
      nodeName: name,
      advertiseAddress: `127.0.0.1:${listener.address.port}`,
      datacenter,
      linkKind: kind,
      clusterKey: CLUSTER_KEY,
      listener,
      peers: new Map(),
      handshakeTimeoutMs: 2000,
      keepaliveIntervalMs: 200,
      backoff: { initialMs: 20, maxMs: 200, jitter: 0.5 },
      log: log.logger,
      ...options,
    })
    cleanup.defer(() => started.stop())
    const testNode: TestNode = { name, transport: started, log, inbox: [], peerEvents: [] }
    started.onMessage((from, message) => testNode.inbox.push({ from, message }))
    started.onPeerState((peer, connected) => testNode.peerEvents.push({ peer, connected }))
    return testNode
  }

  it('Raft and WAN links share one cluster port: each kind links with its own peers', async () => {
    const [one, two] = [await listenerFor(), await listenerFor()]
    const raftOne = await transport('raft', 'n1', 'dc1', one)
    const raftTwo = await transport('raft', 'n2', 'dc1', two)
    const wanOne = await transport('wan', 'n1', 'dc1', one)
    const wanTwo = await transport('wan', 'n2', 'dc1', two)
    expect(raftOne.transport.address).to.deep.equal(wanOne.transport.address)
    raftOne.transport.setPeers(new Map([['n2', addressOf(raftTwo.transport)]]))
    raftTwo.transport.setPeers(new Map([['n1', addressOf(raftOne.transport)]]))
    wanOne.transport.setPeers(new Map([['n2.dc1', addressOf(wanTwo.transport)]]))
    await waitFor('both kinds linked', () => isConnected(raftOne, 'n2') && isConnected(raftTwo, 'n1') && isConnected(wanOne, 'n2.dc1') && isConnected(wanTwo, 'n1.dc1'))
    raftOne.transport.send('n2', 'raft')
    wanOne.transport.send('n2.dc1', 'wan')
    await waitFor('both messages', () => raftTwo.inbox.length === 1 && wanTwo.inbox.length === 1)
    expect(raftTwo.inbox).to.deep.equal([{ from: 'n1', message: 'raft' }])
    expect(wanTwo.inbox).to.deep.equal([{ from: 'n1.dc1', message: 'wan' }])
  })

  it('introduce: a dial by address learns whom it reached; the other side adopts the dialer; both ways work', async () => {
    const one = await transport('wan', 'n1', 'dc1', await listenerFor())
    const two = await transport('wan', 'a', 'dc2', await listenerFor())
    const name = await one.transport.introduce(addressOf(two.transport))
    expect(name).to.equal('a.dc2')
    await waitFor('both sides linked', () => isConnected(one, 'a.dc2') && isConnected(two, 'n1.dc1'))
    expect(two.peerEvents).to.deep.include({ peer: 'n1.dc1', connected: true })
    two.transport.onRequest(async (from, message) => ({ from, message }))
    expect(await one.transport.request('a.dc2', 'hello', 2000)).to.deep.equal({ from: 'n1.dc1', message: 'hello' })
    // Introduced again: the link it has already.
    expect(await one.transport.introduce(addressOf(two.transport))).to.equal('a.dc2')
  })

  it('introduce rejects when nothing answers, and a Raft transport cannot be asked to', async () => {
    const one = await transport('wan', 'n1', 'dc1', await listenerFor())
    const error = await one.transport.introduce(await deadAddress()).then(
      () => undefined,
      (failure: unknown) => failure,
    )
    expect(error).to.be.instanceOf(Error)
    const raft = await transport('raft', 'n1', 'dc1', await listenerFor())
    expect(() => raft.transport.introduce('127.0.0.1:1')).to.throw(/not wan links/)
  })

  it('refuses a WAN name whose datacenter is not the one its server states, and a Raft link refuses another datacenter', async () => {
    // A dc2 server naming itself as if it were in dc1 cannot be built; a hand-made mismatch is refused on the wire.
    expect(await PeerTransport.start({ nodeName: 'x.dc1', advertiseAddress: 'x:1', datacenter: 'dc2', linkKind: 'wan', clusterKey: CLUSTER_KEY, listen: { host: '127.0.0.1', port: 0 }, peers: new Map(), log: captureLog().logger }).then(
      () => 'started',
      (error: Error) => error.message,
    )).to.match(/NODE\.dc2/)
    const raftOne = await transport('raft', 'n1', 'dc1', await listenerFor())
    const raftTwo = await transport('raft', 'n2', 'dc2', await listenerFor())
    raftOne.transport.setPeers(new Map([['n2', addressOf(raftTwo.transport)]]))
    raftTwo.transport.setPeers(new Map([['n1', addressOf(raftOne.transport)]]))
    await waitFor('refusals', () => raftOne.transport.stats().handshakesFailed + raftTwo.transport.stats().handshakesFailed >= 2)
    expect(isConnected(raftOne, 'n2') || isConnected(raftTwo, 'n1')).to.equal(false)
  })

  it('adopts WAN servers only while there is room (peersMax)', async () => {
    const hub = await transport('wan', 'hub', 'dc1', await listenerFor(), { peersMax: 1 })
    const first = await transport('wan', 'a', 'dc2', await listenerFor())
    const second = await transport('wan', 'b', 'dc3', await listenerFor())
    expect(await first.transport.introduce(addressOf(hub.transport))).to.equal('hub.dc1')
    const refused = await second.transport.introduce(addressOf(hub.transport)).then(
      () => 'linked',
      () => 'refused',
    )
    expect(refused).to.equal('refused')
    await sleep(100)
    expect([...hub.transport.stats().peers.keys()]).to.deep.equal(['a.dc2'])
  })

  describe('under TLS', () => {
    let ca: Ca
    before(async () => {
      ca = await createCa()
    })
    const material = async (dc: string): Promise<PeerTlsMaterial> => {
      const cert = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'server', dc })
      return { ca: Buffer.from(ca.cert), cert: Buffer.from(cert.cert), key: Buffer.from(cert.key) }
    }

    it("links servers of two datacenters, each checking the other's certificate names the datacenter it states", async () => {
      const one = await transport('wan', 'n1', 'dc1', await listenerFor(await material('dc1')))
      const two = await transport('wan', 'n1', 'dc2', await listenerFor(await material('dc2')))
      expect(await one.transport.introduce(addressOf(two.transport))).to.equal('n1.dc2')
      await waitFor('both sides linked', () => isConnected(one, 'n1.dc2') && isConnected(two, 'n1.dc1'))
    })

    it('refuses a server of dc2 holding a certificate of dc1', async () => {
      const one = await transport('wan', 'n1', 'dc1', await listenerFor(await material('dc1')))
      const impostor = await transport('wan', 'x', 'dc2', await listenerFor(await material('dc1')))
      const outcome = await impostor.transport.introduce(addressOf(one.transport)).then(
        () => 'linked',
        () => 'refused',
      )
      expect(outcome).to.equal('refused')
      const refusedForName = one.log.records.some((record) => record['msg'] === 'peer handshake refused' && String(record['reason']).includes('does not name server.dc2.warden'))
      expect(refusedForName).to.equal(true)
      expect(isConnected(one, 'x.dc2')).to.equal(false)
    })
  })
})
