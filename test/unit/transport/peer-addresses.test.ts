/**
 * Peer addresses the transport cannot dial. setPeers is fed from replicated state (the member table a joined server's
 * entry wrote), and a throw there stops every node while it applies the entry, and again on each restart: so a peer
 * with a bad name or address is skipped, with one warning per interval, while the valid peers beside it are dialed as
 * usual and a peer already known keeps its last valid address and its link. The agent's own peers, given at start,
 * are still refused with an error naming the setting.
 */
import { expect } from 'chai'
import { PeerTransport } from '../../../src/transport/index.js'
import { addressOf, captureLog, isConnected, startNode, useCleanup, waitFor, type TestNode } from './harness.js'

const SKIPPED = 'peer skipped: its name or address is not valid'

function warnings(node: TestNode, peer: string): Array<Record<string, unknown>> {
  return node.log.records.filter((record) => record['msg'] === SKIPPED && record['peer'] === peer)
}

describe('transport: peer addresses that cannot be dialed', () => {
  const cleanup = useCleanup()

  it('skips a peer with a bad address, without throwing, and still connects the valid ones', async () => {
    const [a, b] = await Promise.all([startNode(cleanup, 'a'), startNode(cleanup, 'b')])
    const bad = ['not-an-address', 'host:0', 'host:99999', '', 'bad host:1', '999.1.1.1:1', '[:::::]:1', `${'x'.repeat(300)}:1`]
    const peers = new Map([['b', addressOf(b.transport)], ...bad.map((address, n): [string, string] => [`bad-${n}`, address])])
    expect(() => a.transport.setPeers(peers)).to.not.throw()
    b.transport.setPeers(new Map([['a', addressOf(a.transport)]]))
    await waitFor('a and b connected', () => isConnected(a, 'b') && isConnected(b, 'a'))
    expect([...a.transport.stats().peers.keys()]).to.deep.equal(['b'])
    for (const [n, address] of bad.entries()) {
      expect(a.transport.send(`bad-${n}`, 'x'), address).to.equal(false)
      const logged = warnings(a, `bad-${n}`)
      expect(logged, address).to.have.length(1)
      expect(logged[0]!['level']).to.equal(40)
      expect(logged[0]!['problem']).to.be.a('string').and.match(new RegExp(`^address of bad-${n}: `))
    }
    expect(a.transport.send('b', 'still works')).to.equal(true)
  })

  it('warns about a skipped peer once per interval, however often the peer set is applied', async () => {
    const a = await startNode(cleanup, 'a')
    for (let n = 0; n < 50; n += 1) a.transport.setPeers(new Map([['joiner', 'not-an-address']]))
    expect(warnings(a, 'joiner')).to.have.length(1)
  })

  it('skips a peer whose name is not a node name', async () => {
    const a = await startNode(cleanup, 'a')
    expect(() => a.transport.setPeers(new Map([['', '127.0.0.1:1'], ['n'.repeat(200), '127.0.0.1:1']]))).to.not.throw()
    expect(a.transport.stats().peers.size).to.equal(0)
    expect(a.log.records.filter((record) => record['msg'] === SKIPPED)).to.have.length(2)
  })

  it('keeps a known peer at its last valid address, with its link, when it is given a bad one', async () => {
    const [a, b] = await Promise.all([startNode(cleanup, 'a'), startNode(cleanup, 'b')])
    a.transport.setPeers(new Map([['b', addressOf(b.transport)]]))
    b.transport.setPeers(new Map([['a', addressOf(a.transport)]]))
    await waitFor('a and b connected', () => isConnected(a, 'b') && isConnected(b, 'a'))
    a.transport.setPeers(new Map([['b', 'host:0']]))
    expect(a.transport.stats().peers.get('b')).to.include({ address: addressOf(b.transport), connected: true })
    expect(warnings(a, 'b')[0]).to.include({ kept: addressOf(b.transport) })
    // Left out of the set altogether, it is removed as before.
    a.transport.setPeers(new Map())
    expect(a.transport.stats().peers.size).to.equal(0)
  })

  it('refuses to start with a peer it cannot dial, naming the setting', async () => {
    for (const [name, address] of [['b', 'host:0'], ['b', 'not-an-address'], ['', '127.0.0.1:1']] as const) {
      let failure: unknown
      try {
        const transport = await PeerTransport.start({
          nodeName: 'a',
          advertiseAddress: 'a:1',
          datacenter: 'dc1',
          clusterKey: 'test-cluster-key-for-peer-addresses',
          listen: { host: '127.0.0.1', port: 0 },
          peers: new Map([[name, address]]),
          log: captureLog().logger,
        })
        cleanup.defer(() => transport.stop())
      } catch (error) {
        failure = error
      }
      expect(failure, `${name}=${address}`).to.be.instanceOf(Error).with.property('field', 'peers')
      expect((failure as Error).message).to.match(/^peers: /)
    }
  })
})
