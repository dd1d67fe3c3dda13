/**
 * Starting the replica the configuration asks for: a single node (no peers) on the local durable log, or a Raft
 * member over authenticated peer links. Either way the rest of the agent sees a `Cluster`, plus the bootstrap writes a
 * new cluster needs (the built-ins, the configured management token), done by whichever node leads.
 */
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer } from 'node:net'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { LogStore } from '../raft/storage/log-store.js'
import { LevelRaftStorage } from '../raft/storage/level-storage.js'
import { SingleNodeReplica } from '../replica/single-node.js'
import { RaftReplica } from '../replica/raft-replica.js'
import type { Cluster } from '../replica/cluster.js'
import { PeerTransport } from '../transport/index.js'
import { StateStore } from '../state/store.js'
import { finishStateSwitch } from '../state/snapshot.js'
import { ConfigError, formatAddress, type AgentConfig } from './config.js'

export interface StartedReplica {
  state: StateStore
  cluster: Cluster
  clusterAddress: string
  /** Whether this is a new cluster whose log is empty (single node only: Raft nodes learn it from the state). */
  singleNodeLogEmpty: boolean
  /** Calls `listener` whenever this node becomes the leader. */
  onLeadership(listener: () => void): void
  raft?: RaftReplica
  stop(): Promise<void>
}

function listen(server: TcpServer, host: string, port: number): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve(server.address() as AddressInfo)
    })
  })
}

export async function startReplica(config: AgentConfig, dataDir: string, log: Logger, onFatal: (error: unknown) => void): Promise<StartedReplica> {
  const peers = Object.entries(config.peers).filter(([name]) => name !== config.nodeName)
  const stateDirectory = join(dataDir, 'state')
  if (peers.length === 0 && config.join.length === 0) return startSingleNode(config, dataDir, await StateStore.open(stateDirectory), onFatal)
  if (config.clusterKey === undefined) {
    throw new ConfigError('--cluster-key: a cluster of several nodes needs a cluster key (--cluster-key, --cluster-key-file or WARDEN_CLUSTER_KEY)')
  }
  const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
  // A snapshot install that a crash interrupted is finished (or discarded) before the state is opened.
  await finishStateSwitch(stateDirectory, storage.snapshot()?.index ?? 0)
  const state = await StateStore.open(stateDirectory)
  const joining = config.join.length > 0 && storage.lastIndex() === 0 && storage.snapshot() === null
  const transport = await PeerTransport.start({
    nodeName: config.nodeName,
    advertiseAddress: formatAddress(config.clusterAddr),
    clusterKey: config.clusterKey,
    listen: config.clusterAddr,
    peers: new Map(peers),
    log: log.child({ module: 'transport' }),
  })
  const clusterAddress = formatAddress({ host: config.clusterAddr.host, port: transport.address.port })
  const replica = new RaftReplica({
    nodeName: config.nodeName,
    members: new Map([[config.nodeName, clusterAddress], ...peers]),
    storage,
    state,
    transport,
    log: log.child({ module: 'raft' }),
    onFatal,
    heartbeatIntervalMs: config.raft.heartbeatIntervalMs,
    electionTimeoutMs: config.raft.electionTimeoutMs,
    snapshotThreshold: config.raft.snapshotThreshold,
    leaderWaitMs: config.raft.leaderWaitMs,
    stateDirectory,
    clusterKey: config.clusterKey,
    joining,
  })
  await replica.start()
  // A new server joins through a running member; one that joined before knows the cluster from its own log.
  if (joining) void replica.joinThrough(config.join, clusterAddress)
  return {
    state,
    cluster: replica,
    clusterAddress,
    singleNodeLogEmpty: false,
    onLeadership: (listener) => replica.onLeadership(listener),
    raft: replica,
    async stop() {
      await replica.stop()
      await transport.stop()
      await storage.close()
    },
  }
}

async function startSingleNode(config: AgentConfig, dataDir: string, state: StateStore, onFatal: (error: unknown) => void): Promise<StartedReplica> {
  const logStore = await LogStore.open(join(dataDir, 'log'))
  // No peer may join a single node: the cluster port accepts and closes every connection.
  const server = createTcpServer((socket) => socket.destroy())
  const bound = await listen(server, config.clusterAddr.host, config.clusterAddr.port)
  const clusterAddress = formatAddress({ host: config.clusterAddr.host, port: bound.port })
  const replica = new SingleNodeReplica(logStore, state, config.nodeName, clusterAddress, onFatal)
  await replica.recover()
  return {
    state,
    cluster: replica,
    clusterAddress,
    singleNodeLogEmpty: replica.logIsEmpty,
    onLeadership: () => undefined,
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await replica.stop()
      await logStore.close()
    },
  }
}
