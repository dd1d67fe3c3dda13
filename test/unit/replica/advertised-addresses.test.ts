/**
 * The address a node reports for a peer is the one the peer advertised in its handshake (--cluster-addr), not the one
 * this node dials (which may be a proxy in front of it): /v1/status/peers, /v1/status/leader,
 * /v1/operator/raft/configuration and /v1/operator/servers all read Membership.addressOf.
 *
 * The agent starts its transport, and so dials its --peer servers, before it opens the node on its data and starts the
 * replica (src/agent/replicas.ts): a link may be open before the replica listens to the links' events. Such a link
 * must count as much as one that opens later. Driven here the agent's way (openNode, the agent's own transportLinks)
 * over two real transports on loopback, the peer advertising an address other than the one dialed; the link is open
 * before the replica starts.
 */
import { expect } from 'chai'
import { join } from 'node:path'
import { pino } from 'pino'
import { transportLinks } from '../../../src/agent/replicas.js'
import { realEnvironment } from '../../../src/lib/environment.js'
import { LevelRaftStorage } from '../../../src/raft/storage/level-storage.js'
import { openNode } from '../../../src/rpc/open-node.js'
import { directoryFiles } from '../../../src/state/files.js'
import { PeerTransport } from '../../../src/transport/index.js'
import { useTempDirs } from '../../support/temp-dir.js'

const CLUSTER_KEY = 'test-cluster-key-advertised-addresses-not-for-production'
const N2_ADVERTISED = 'n2.advertised.test:8300'

async function until(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

function startTransport(nodeName: string, advertiseAddress: string, peers: Map<string, string>): Promise<PeerTransport> {
  return PeerTransport.start({
    nodeName,
    advertiseAddress,
    datacenter: 'dc1',
    clusterKey: CLUSTER_KEY,
    listen: { host: '127.0.0.1', port: 0 },
    peers,
    keepaliveIntervalMs: 100,
    backoff: { initialMs: 20, maxMs: 200, jitter: 0.5 },
    log: pino({ level: 'silent' }),
  })
}

describe('replica/membership: peer addresses as advertised', function () {
  this.timeout(15_000)
  const dirs = useTempDirs()

  it('reports the address a peer advertised when its link opened before the replica started, and keeps it once the link is lost', async function () {
    // n2 is only a transport: it proves its name and advertises an address that is not the one n1 dials.
    const n2 = await startTransport('n2', N2_ADVERTISED, new Map())
    dirs.defer(() => n2.stop())
    const dialed = `127.0.0.1:${n2.address.port}`
    const transport = await startTransport('n1', 'n1.advertised.test:8300', new Map([['n2', dialed]]))
    dirs.defer(() => transport.stop())
    const n1Address = `127.0.0.1:${transport.address.port}`
    n2.setPeers(new Map([['n1', n1Address]]))
    await until(() => transport.stats().peers.get('n2')?.connected === true, 'n1 has a link to n2')
    expect(transport.stats().peers.get('n2')?.advertiseAddress).to.equal(N2_ADVERTISED)

    // n1 opens its data and starts its replica as the agent does, its link to n2 already open.
    const dir = await dirs.make('warden-advertised-')
    const storage = await LevelRaftStorage.open(join(dir, 'raft'))
    dirs.defer(() => storage.close())
    // A founder that founded before: no discovery round, so n2 (no replica behind it) is never asked anything.
    await storage.saveMembershipRecord({ voters: ['n1', 'n2'], voteFromIndex: 0 })
    const fatal: unknown[] = []
    const opened = await openNode({
      storage,
      files: directoryFiles(join(dir, 'state')),
      flags: { nodeName: 'n1', peerNames: ['n2'], joining: false },
      links: transportLinks(transport),
      dialAddresses: new Map([['n1', n1Address], ['n2', dialed]]),
      clusterKey: CLUSTER_KEY,
      settings: {
        environment: realEnvironment,
        log: pino({ level: 'silent' }),
        onFatal: (error) => fatal.push(error),
        heartbeatIntervalMs: 50,
        electionTimeoutMs: 500,
        snapshotThreshold: 8192,
      },
    })
    if (!opened.ok) throw new Error(opened.problem)
    const { state, replica, cluster } = opened
    dirs.defer(() => state.close())
    dirs.defer(() => replica.stop({ transferLeadership: false }))
    await replica.start()

    const n2View = (): { address: string; alive: boolean } | undefined => cluster.servers().find((server) => server.id === 'n2')
    expect(cluster.membership().servers.find((server) => server.id === 'n2')?.address, '/v1/operator/raft/configuration').to.equal(N2_ADVERTISED)
    expect(cluster.peerAddresses(), '/v1/status/peers').to.include(N2_ADVERTISED).and.not.include(dialed)
    expect(n2View(), '/v1/operator/servers').to.include({ address: N2_ADVERTISED, alive: true })

    // The link lost (n2 stops): n2 is failed, and still listed at the address it advertised, not the one dialed.
    await n2.stop()
    await until(() => transport.stats().peers.get('n2')?.connected === false, 'n1 has lost its link to n2')
    expect(n2View(), '/v1/operator/servers after the link was lost').to.include({ address: N2_ADVERTISED, alive: false })
    expect(fatal).to.deep.equal([])
  })
})
