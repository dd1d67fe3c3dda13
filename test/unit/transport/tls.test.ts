/**
 * Peer links over TLS 1.3 (issue 18): with certificates, links run over mutual TLS against one CA, each side's
 * certificate must name `server.<its datacenter>.warden`, the cluster key is still proved inside (bound to the TLS
 * connection), and frames are not sealed a second time. Real transports on 127.0.0.1 with certificates made by
 * `warden tls`'s own generator.
 */
import { expect } from 'chai'
import { connect, type Socket } from 'node:net'
import { createCa, createCert, type Ca } from '../../../src/cli/tls/generate.js'
import type { PeerTlsMaterial } from '../../../src/transport/tls.js'
import { ClusterKey, type HandshakeTranscript } from '../../../src/transport/handshake.js'
import { addressOf, CLUSTER_KEY, connectAll, isConnected, logged, sleep, startNode, startProxy, useCleanup, waitFor, type TestNode } from './harness.js'

const SECRET = '6d0e4c1a-2f7b-4b9e-8a35-c1d2e3f40516'

async function material(ca: Ca, kind: 'server' | 'client' = 'server', dc = 'dc1', trusted: string[] = [ca.cert]): Promise<PeerTlsMaterial> {
  const cert = await createCert({ ca: ca.cert, caKey: ca.key, kind, dc })
  return { ca: Buffer.from(trusted.join('\n')), cert: Buffer.from(cert.cert), key: Buffer.from(cert.key) }
}

describe('transport: links over TLS', function () {
  this.timeout(20_000)
  const cleanup = useCleanup()
  let ca: Ca
  let otherCa: Ca

  before(async () => {
    ca = await createCa()
    otherCa = await createCa()
  })

  async function tlsNode(name: string, tls: PeerTlsMaterial | undefined): Promise<TestNode> {
    return startNode(cleanup, name, tls === undefined ? {} : { tls })
  }

  /** Gives each node the other as a peer and waits long enough for several dials and refusals. */
  async function refusedFor(a: TestNode, b: TestNode): Promise<void> {
    connectAll([a, b])
    await waitFor('refused handshakes', () => a.transport.stats().handshakesFailed + b.transport.stats().handshakesFailed >= 2)
    await sleep(200)
    expect(isConnected(a, 'b') || isConnected(b, 'a')).to.equal(false)
  }

  it('links two nodes whose certificates one CA signed: messages and requests both ways, nothing readable on the wire', async () => {
    const a = await tlsNode('a', await material(ca))
    const proxy = await startProxy(cleanup, addressOf(a.transport))
    const b = await tlsNode('b', await material(ca))
    // Only b dials (through the proxy that records every byte); a has b at a dead address.
    b.transport.setPeers(new Map([['a', proxy.address]]))
    a.transport.setPeers(new Map([['b', '127.0.0.1:1']]))
    await waitFor('the link over TLS', () => isConnected(a, 'b') && isConnected(b, 'a'))
    a.transport.onRequest(async () => ({ SecretID: SECRET }))
    b.transport.send('a', { SecretID: SECRET })
    expect(await b.transport.request('a', { token: SECRET }, 2000)).to.deep.equal({ SecretID: SECRET })
    await waitFor('the message', () => a.inbox.length === 1)
    expect(a.inbox).to.deep.equal([{ from: 'b', message: { SecretID: SECRET } }])
    expect(logged(a.log, 'peer transport listening (links over TLS 1.3)')).to.equal(true)
    const wire = proxy.captured()
    expect(wire.length).to.be.greaterThan(1000)
    // Under TLS even the handshake's names travel encrypted (a plain link shows them, sealing.test.ts).
    expect(wire.includes('a.cluster.test:8300')).to.equal(false)
    for (const form of [Buffer.from(SECRET), Buffer.from(SECRET.replaceAll('-', ''), 'hex'), Buffer.from(Buffer.from(SECRET).toString('base64').slice(0, 40))]) {
      expect(wire.includes(form)).to.equal(false)
    }
    for (const line of [...a.log.raw, ...b.log.raw]) expect(line).not.to.include(CLUSTER_KEY)
  })

  it('refuses a node whose certificate another CA signed, both ways', async () => {
    const a = await tlsNode('a', await material(ca))
    const b = await tlsNode('b', await material(otherCa))
    await refusedFor(a, b)
    expect(logged(a.log, 'peer TLS handshake refused') || logged(b.log, 'peer TLS handshake refused')).to.equal(true)
  })

  it('refuses a client certificate acting as a server, signed by the same CA', async () => {
    const a = await tlsNode('a', await material(ca))
    const b = await tlsNode('b', await material(ca, 'client'))
    await refusedFor(a, b)
  })

  it("refuses a certificate naming another datacenter's server on a Raft link, on both sides, before any proof", async () => {
    const a = await tlsNode('a', await material(ca))
    const b = await tlsNode('b', await material(ca, 'server', 'dc2'))
    await refusedFor(a, b)
    const refusedForName = (node: TestNode): boolean =>
      node.log.records.some((record) => record['msg'] === 'peer handshake refused' && String(record['reason']).includes('does not name server.dc1.warden'))
    // a refuses b's certificate whichever side dials; b, whose own certificate is the wrong one, accepts a's.
    expect(refusedForName(a)).to.equal(true)
  })

  it('refuses a plain node: a TLS node and a sealed node cannot link', async () => {
    const a = await tlsNode('a', await material(ca))
    const b = await tlsNode('b', undefined)
    connectAll([a, b])
    await waitFor('a refused handshake', () => a.transport.stats().handshakesFailed >= 1)
    await sleep(300)
    expect(isConnected(a, 'b') || isConnected(b, 'a')).to.equal(false)
  })

  it('reloadTls: a node given a bundle with a new CA links with a node of that CA, without a restart', async () => {
    const a = await tlsNode('a', await material(ca))
    // b's certificate is from the new CA; b trusts both.
    const b = await tlsNode('b', await material(otherCa, 'server', 'dc1', [ca.cert, otherCa.cert]))
    await refusedFor(a, b)
    a.transport.reloadTls(await material(ca, 'server', 'dc1', [ca.cert, otherCa.cert]))
    await waitFor('the link after the reload', () => isConnected(a, 'b') && isConnected(b, 'a'), 8000)
  })

  it('a flood of idle connections to the peer port evicts its own, never the TCP connection under an open TLS link', async () => {
    const a = await startNode(cleanup, 'a', { tls: await material(ca), handshakesPendingMax: 4 })
    const b = await tlsNode('b', await material(ca))
    b.transport.setPeers(new Map([['a', addressOf(a.transport)]]))
    a.transport.setPeers(new Map([['b', '127.0.0.1:1']]))
    await waitFor('the link over TLS', () => isConnected(a, 'b') && isConnected(b, 'a'))
    const flood: Socket[] = []
    cleanup.defer(() => flood.forEach((socket) => socket.destroy()))
    for (let count = 0; count < 40; count += 1) {
      const socket = connect(a.transport.address.port, '127.0.0.1')
      socket.on('error', () => undefined)
      flood.push(socket)
    }
    await waitFor('the flood evicted', () => flood.filter((socket) => socket.destroyed).length >= 10)
    await sleep(300)
    expect(b.peerEvents.filter((event) => !event.connected), 'the link was never lost').to.deep.equal([])
    expect(isConnected(a, 'b') && isConnected(b, 'a')).to.equal(true)
  })

  it('binds the proofs to the TLS connection: the same transcript with another channel binding gives another proof', () => {
    const key = new ClusterKey(CLUSTER_KEY)
    const transcript: HandshakeTranscript = {
      kind: 'raft',
      dialerNode: 'a',
      acceptorNode: 'b',
      dialerAddress: 'a:1',
      acceptorAddress: 'b:1',
      dialerDatacenter: 'dc1',
      acceptorDatacenter: 'dc1',
      dialerNonce: Buffer.alloc(32, 1),
      acceptorNonce: Buffer.alloc(32, 2),
    }
    const plain = key.proof('dialer', transcript)
    const one = key.proof('dialer', { ...transcript, channelBinding: Buffer.alloc(32, 3) })
    const other = key.proof('dialer', { ...transcript, channelBinding: Buffer.alloc(32, 4) })
    expect(one.equals(plain)).to.equal(false)
    expect(one.equals(other)).to.equal(false)
    expect(key.verify('dialer', { ...transcript, channelBinding: Buffer.alloc(32, 3) }, one)).to.equal(true)
    expect(key.verify('dialer', { ...transcript, channelBinding: Buffer.alloc(32, 4) }, one)).to.equal(false)
  })
})
