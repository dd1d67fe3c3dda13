/**
 * Starting this server's Raft replica. There is one path: a server without peers is a Raft group of one voter on the
 * same code as a member of three (as etcd and hashicorp/raft run it). The rest of the agent sees a `Cluster`.
 *
 * Order at start: open the Raft storage (upgrading a single-node data dir of an earlier release first), finish or
 * discard a snapshot switch a crash interrupted, open the state, decide or read how this server entered its cluster
 * (founding.ts), open the peer links, start the replica, and, for a new server given --join, ask to join.
 */
import { randomUUID } from 'node:crypto'
import { mkdir, rename, rm } from 'node:fs/promises'
import { pathExists } from '../lib/files.js'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { realEnvironment } from '../lib/environment.js'
import { LevelRaftStorage } from '../raft/storage/level-storage.js'
import { LogStore } from '../raft/storage/log-store.js'
import { peerFlagsProblem, planMembership } from '../replica/founding.js'
import type { PeerLinks } from '../replica/peer-links.js'
import { RaftReplica } from '../replica/raft-replica.js'
import { ClusterNode, type Cluster } from '../rpc/index.js'
import { joinThroughHttp } from '../rpc/join-client.js'
import { directoryFiles } from '../state/files.js'
import { finishStateSwitch } from '../state/snapshot.js'
import { StateStore } from '../state/store.js'
import { clusterAddressProblem } from '../lib/cluster-address.js'
import { ClosedLinks, PeerTransport } from '../transport/index.js'
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

/** The real transport as the driver's PeerLinks. */
function transportLinks(transport: PeerTransport): PeerLinks {
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

export async function startReplica(config: AgentConfig, dataDir: string, log: Logger, onFatal: (error: unknown) => void): Promise<StartedReplica> {
  const peers = Object.entries(config.peers).filter(([name]) => name !== config.nodeName)
  if ((peers.length > 0 || config.join.length > 0) && config.clusterKey === undefined) {
    throw new ConfigError('--cluster-key: a cluster of several nodes needs a cluster key (--cluster-key, --cluster-key-file or WARDEN_CLUSTER_KEY)')
  }
  await mkdir(dataDir, { recursive: true, mode: 0o700 })
  await upgradeSingleNodeDataDir(dataDir, config.nodeName, log)
  const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
  const flags = { nodeName: config.nodeName, peerNames: peers.map(([name]) => name), joining: config.join.length > 0, incarnation: randomUUID() }
  const plan = planMembership(storage, flags)
  if (!plan.ok) {
    await storage.close()
    throw new ConfigError(plan.problem)
  }
  if (plan.save) await storage.saveMembershipRecord(plan.record)
  const files = directoryFiles(join(dataDir, 'state'))
  // A snapshot install that a crash interrupted is finished (or discarded) before the state is opened.
  await finishStateSwitch(files, storage.snapshot()?.index ?? 0)
  const state = await StateStore.openFiles(files)
  let links: PeerLinks
  let stopLinks: () => Promise<void>
  let port: number
  if (config.clusterKey === undefined) {
    const closed = await ClosedLinks.start(config.clusterAddr.host, config.clusterAddr.port)
    links = closed
    stopLinks = () => closed.stop()
    port = closed.address.port
  } else {
    const transport = await PeerTransport.start({
      nodeName: config.nodeName,
      advertiseAddress: formatAddress(config.clusterAddr),
      clusterKey: config.clusterKey,
      listen: config.clusterAddr,
      peers: new Map(peers),
      log: log.child({ module: 'transport' }),
    })
    links = transportLinks(transport)
    stopLinks = () => transport.stop()
    port = transport.address.port
  }
  const clusterAddress = formatAddress({ host: config.clusterAddr.host, port })
  const replica = new RaftReplica({
    nodeName: config.nodeName,
    dialAddresses: new Map([[config.nodeName, clusterAddress], ...peers]),
    membership: storage.membershipRecord() ?? plan.record,
    storage,
    state,
    links,
    environment: realEnvironment,
    log: log.child({ module: 'raft' }),
    onFatal,
    heartbeatIntervalMs: config.raft.heartbeatIntervalMs,
    electionTimeoutMs: config.raft.electionTimeoutMs,
    snapshotThreshold: config.raft.snapshotThreshold,
    leaderWaitMs: config.raft.leaderWaitMs,
  })
  replica.membershipChanges.addressCheck = (address) => clusterAddressProblem(address)
  const configuration = replica.status().configuration
  const flagsProblem = plan.save ? undefined : peerFlagsProblem(plan.record, [...configuration.voters, ...configuration.learners], flags)
  if (flagsProblem !== undefined) {
    await stopLinks()
    await state.close()
    await storage.close()
    throw new ConfigError(flagsProblem)
  }
  const cluster = new ClusterNode(replica, config.clusterKey)
  const voters = configuration.voters
  const alone = voters.length === 1 && voters[0] === config.nodeName
  await replica.start()
  let joining: Promise<void> | undefined
  // A new server asks a running member to add it; one that joined before knows its cluster from its own storage.
  if (plan.next === 'join' && config.clusterKey !== undefined) joining = joinThroughHttp(replica, config.join, config.clusterKey, clusterAddress)
  return {
    state,
    cluster,
    clusterAddress,
    alone,
    onLeadership: (listener) => replica.onLeadership(listener),
    raft: replica,
    async stop() {
      await replica.stop()
      await joining
      await stopLinks()
      await storage.close()
    },
  }
}
