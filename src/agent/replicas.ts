/**
 * Starting this server's Raft replica. There is one path: a server without peers is a Raft group of one voter on the
 * same code as a member of three (as etcd and hashicorp/raft run it). The rest of the agent sees a `Cluster`.
 *
 * Order at start: open the Raft storage (upgrading a single-node data dir of an earlier release first), open the peer
 * links, open the node on its data (rpc/open-node.ts: how it entered its cluster, the snapshot switch, the state, the
 * replica), start the replica, and, for a new server given --join, ask to join.
 */
import { randomUUID } from 'node:crypto'
import { mkdir, rename, rm } from 'node:fs/promises'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { clusterAddressProblem } from '../lib/cluster-address.js'
import { realEnvironment } from '../lib/environment.js'
import { pathExists } from '../lib/files.js'
import { LevelRaftStorage } from '../raft/storage/level-storage.js'
import { LogStore } from '../raft/storage/log-store.js'
import type { PeerLinks } from '../replica/peer-links.js'
import type { RaftReplica, ReplicaTimings } from '../replica/raft-replica.js'
import type { Cluster } from '../rpc/index.js'
import { joinThroughHttp } from '../rpc/join-client.js'
import { openNode } from '../rpc/open-node.js'
import { directoryFiles } from '../state/files.js'
import { StateStore } from '../state/store.js'
import { ClosedLinks, PeerTransport, type TransportOptions, type TransportStats } from '../transport/index.js'
import type { PeerTlsMaterial } from '../transport/tls.js'
import { PeerListener } from '../transport/listener.js'
import { wanName } from '../transport/frames.js'
import { WanMembership } from '../rpc/wan-membership.js'
import { ConfigError, formatAddress, type AgentConfig } from './config.js'

export interface StartedReplica {
  state: StateStore
  cluster: Cluster
  clusterAddress: string
  /** Whether this server is its cluster's only voter (it leads at once, and the agent waits for its first writes). */
  alone: boolean
  /** Calls `listener` whenever this node becomes the leader. */
  onLeadership(listener: () => void): void
  raft: RaftReplica
  /** New certificates for the peer links made from now on; nothing when links do not run over TLS. */
  reloadTls(material: PeerTlsMaterial): void
  /** The datacenters known: this one first, then by round-trip time (WAN membership). */
  datacenters(): string[]
  /** The WAN links and membership, on a server with a cluster key. */
  wan: WanLinks | undefined
  /** The Raft transport's counters and links (none without a cluster key: a server alone has no peer links). */
  raftLinkStats(): TransportStats | undefined
  stop(): Promise<void>
}


/**
 * A data dir of a single server written by a release before one Raft path (`log/` beside `state/`, no `raft/`)
 * becomes a one-voter Raft group's: entries the state had not applied are applied, the state is synced, and the Raft
 * storage starts from a snapshot at the applied index. Built in `raft.upgrading` and renamed into place once durable, so
 * a crash at any point leaves either the old layout, to upgrade again, or the new one.
 */
async function upgradeSingleNodeDataDir(dataDir: string, nodeName: string, log: Logger): Promise<void> {
  const oldLog = join(dataDir, 'log')
  const raft = join(dataDir, 'raft')
  const building = join(dataDir, 'raft.upgrading')
  await rm(building, { recursive: true, force: true })
  if (!(await pathExists(oldLog))) return
  if (await pathExists(raft)) {
    // The upgrade finished but the old log was not removed yet.
    await rm(oldLog, { recursive: true, force: true })
    return
  }
  const logStore = await LogStore.open(oldLog)
  const state = await StateStore.open(join(dataDir, 'state'))
  try {
    await state.applyEntries(await logStore.entries(state.lastApplied + 1, logStore.lastIndex))
    await state.sync()
    const applied = state.lastApplied
    const storage = await LevelRaftStorage.open(building)
    if (applied > 0) {
      await storage.persist({ entries: [], snapshot: { index: applied, term: 1, configuration: { voters: [nodeName], learners: [] } }, hardState: { term: 1, votedFor: nodeName, commitIndex: applied } }, true)
    }
    await storage.saveMembershipRecord({ voters: [nodeName], voteFromIndex: 0 })
    await storage.close()
  } finally {
    await state.close()
    await logStore.close()
  }
  await rename(building, raft)
  await rm(oldLog, { recursive: true, force: true })
  log.info({ dataDir }, 'upgraded a single-node data dir to the Raft layout')
}

/** The real transport as the driver's PeerLinks (exported for tests that drive a replica over real links). */
export function transportLinks(transport: PeerTransport): PeerLinks {
  return {
    send: (to, message) => transport.send(to, message),
    request: (to, message, timeoutMs) => transport.request(to, message, timeoutMs),
    onMessage: (handler) => transport.onMessage(handler),
    onRequest: (handler) => transport.onRequest(handler),
    onPeerState: (handler) => transport.onPeerState(handler),
    setPeers: (peers) => transport.setPeers(peers),
    advertisedAddress: (peer) => transport.stats().peers.get(peer)?.advertiseAddress,
  }
}

export async function startReplica(
  config: AgentConfig,
  dataDir: string,
  log: Logger,
  onFatal: (error: unknown) => void,
  tls?: PeerTlsMaterial,
  timings?: ReplicaTimings,
): Promise<StartedReplica> {
  const peers = Object.entries(config.peers).filter(([name]) => name !== config.nodeName)
  if ((peers.length > 0 || config.join.length > 0) && config.clusterKey === undefined) {
    throw new ConfigError('--cluster-key: a cluster of several nodes needs a cluster key (--cluster-key, --cluster-key-file or WARDEN_CLUSTER_KEY)')
  }
  await mkdir(dataDir, { recursive: true, mode: 0o700 })
  await upgradeSingleNodeDataDir(dataDir, config.nodeName, log)
  const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
  const flags = { nodeName: config.nodeName, peerNames: peers.map(([name]) => name), joining: config.join.length > 0, incarnation: randomUUID() }
  let links: PeerLinks
  let stopLinks: () => Promise<void>
  let reloadTls: (material: PeerTlsMaterial) => void = () => undefined
  let wan: WanLinks | undefined
  let raftLinkStats: () => TransportStats | undefined = () => undefined
  let port: number
  if (config.clusterKey === undefined) {
    const closed = await ClosedLinks.start(config.clusterAddr.host, config.clusterAddr.port)
    links = closed
    stopLinks = () => closed.stop()
    port = closed.address.port
  } else {
    // One cluster port for Raft links and WAN links (listener.ts): only it needs to be open between datacenters.
    const transportLog = log.child({ module: 'transport' })
    const listener = await PeerListener.start({
      listen: config.clusterAddr,
      ...(tls === undefined ? {} : { tls: { ca: tls.ca, cert: tls.cert, key: tls.key } }),
      handshakeTimeoutMs: PEER_HANDSHAKE_TIMEOUT_MS,
      handshakesPendingMax: PEER_HANDSHAKES_PENDING_MAX,
      log: transportLog,
    })
    // The port bound (port 0 picks one), so that what peers dial is where this node listens.
    const advertiseAddress = formatAddress({ host: config.clusterAddr.host, port: listener.address.port })
    const common = {
      advertiseAddress,
      datacenter: config.datacenter,
      clusterKey: config.clusterKey,
      acceptKeys: config.clusterKeysAccepted ?? [],
      listener,
      handshakeTimeoutMs: PEER_HANDSHAKE_TIMEOUT_MS,
      handshakesPendingMax: PEER_HANDSHAKES_PENDING_MAX,
      unsealedForBenchmark: config.unsealedPeerLinks,
    }
    let transport: PeerTransport | undefined
    try {
      transport = await PeerTransport.start({ ...common, nodeName: config.nodeName, peers: new Map(peers), log: transportLog })
      wan = await startWan(config, common, log)
    } catch (error) {
      await transport?.stop()
      await listener.stop()
      throw error
    }
    const raftTransport = transport
    const wanLinks = wan
    if (tls !== undefined) reloadTls = (material) => listener.reloadTls({ ca: material.ca, cert: material.cert, key: material.key })
    links = transportLinks(raftTransport)
    raftLinkStats = () => raftTransport.stats()
    stopLinks = async () => {
      wanLinks.membership.stop()
      await wanLinks.transport.stop()
      await raftTransport.stop()
      await listener.stop()
    }
    port = listener.address.port
  }
  const wanAtStart = wan
  const clusterAddress = formatAddress({ host: config.clusterAddr.host, port })
  const opened = await openNode({
    storage,
    files: directoryFiles(join(dataDir, 'state')),
    flags,
    links,
    dialAddresses: new Map([[config.nodeName, clusterAddress], ...peers]),
    clusterKey: config.clusterKey,
    settings: {
      environment: realEnvironment,
      log: log.child({ module: 'raft' }),
      onFatal,
      heartbeatIntervalMs: config.raft.heartbeatIntervalMs,
      electionTimeoutMs: config.raft.electionTimeoutMs,
      snapshotThreshold: config.raft.snapshotThreshold,
      leaderWaitMs: config.raft.leaderWaitMs,
      shipWrites: config.raft.shipWrites,
      addressCheck: clusterAddressProblem,
      ...(timings === undefined ? {} : { timings }),
    },
  })
  if (!opened.ok) {
    await stopLinks()
    await storage.close()
    throw new ConfigError(opened.problem)
  }
  const { state, replica, cluster } = opened
  const configuration = replica.status().configuration
  const voters = configuration.voters
  const alone = voters.length === 1 && voters[0] === config.nodeName
  await replica.start()
  let joining: Promise<void> | undefined
  // A new server asks a running member to add it; one that joined before knows its cluster from its own storage.
  if (opened.next === 'join' && config.clusterKey !== undefined) joining = joinThroughHttp(replica, config.join, config.clusterKey, clusterAddress, tls === undefined ? undefined : { ca: tls.ca, cert: tls.cert, key: tls.key, datacenter: config.datacenter })
  return {
    state,
    cluster,
    clusterAddress,
    alone,
    onLeadership: (listener) => replica.onLeadership(listener),
    raft: replica,
    reloadTls,
    datacenters: wanAtStart === undefined ? () => [config.datacenter] : () => wanAtStart.membership.datacenters(),
    wan: wanAtStart,
    raftLinkStats: () => raftLinkStats(),
    async stop() {
      await replica.stop()
      await joining
      await stopLinks()
      await storage.close()
    },
  }
}

/** The transports' defaults (peer-transport.ts), named here because the shared listener must use the same. */
const PEER_HANDSHAKE_TIMEOUT_MS = 5_000
const PEER_HANDSHAKES_PENDING_MAX = 32

export interface WanLinks {
  transport: PeerTransport
  membership: WanMembership
}

/**
 * The WAN transport and membership of a server with a cluster key: always started, so that servers of other
 * datacenters can join through this one, and dialing its --join-wan addresses until one answers.
 */
async function startWan(
  config: AgentConfig,
  common: Omit<TransportOptions, 'nodeName' | 'peers' | 'log' | 'linkKind'> & { advertiseAddress: string },
  log: Logger,
): Promise<WanLinks> {
  const name = wanName(config.nodeName, config.datacenter)
  const wanLog = log.child({ module: 'wan' })
  const transport = await PeerTransport.start({ ...common, nodeName: name, linkKind: 'wan', peers: new Map(), log: wanLog })
  const membership = new WanMembership({
    transport,
    self: { name, datacenter: config.datacenter, address: common.advertiseAddress, since: Date.now() },
    join: config.joinWan,
    log: wanLog,
  })
  membership.start()
  return { transport, membership }
}
