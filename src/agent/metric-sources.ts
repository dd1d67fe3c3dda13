/**
 * Where the agent's metrics (src/metrics) read its state when scraped: the Raft driver's status and counts, the
 * state's table indexes, the token resolver's counts, the HTTP layer's held queries and body budget, the peer
 * transports' counters, and ACL replication in a secondary datacenter. Each part keeps plain numbers of its own and
 * knows nothing of metrics; this file is the only place that knows both.
 */
import type { TokenResolver } from '../acl/resolver.js'
import type { AclReplicator } from '../controllers/acl-replication.js'
import { bodiesInFlight } from '../http/body.js'
import { waitingQueryCount } from '../http/read.js'
import type { LinksView, MetricSources, RaftView, ReplicationView } from '../metrics/registry.js'
import { TABLES } from '../state/keys.js'
import { REPLICATED_STREAMS, replicationRecords } from '../state/replication.js'
import type { StateStore } from '../state/store.js'
import type { TransportStats } from '../transport/index.js'
import type { StartedReplica } from './replicas.js'

export interface MetricParts {
  started: StartedReplica
  state: StateStore
  resolver: TokenResolver
  replicator: AclReplicator | undefined
}

function raftView(started: StartedReplica): RaftView {
  const raft = started.raft
  const status = raft.status()
  return {
    term: status.term,
    commitIndex: status.commitIndex,
    appliedIndex: status.lastApplied,
    lastIndex: status.lastIndex,
    snapshotIndex: raft.storage.snapshot()?.index ?? 0,
    isLeader: raft.isLeader(),
    leaderKnown: raft.leader !== null,
    lastContactMs: raft.lastContactMs(),
    voters: status.configuration.voters.length,
    ...raft.counts,
    followers: raft.followers(),
  }
}

function linksView(kind: 'raft' | 'wan', stats: TransportStats, perPeer: boolean): LinksView {
  let framesDropped = 0
  const peers: Array<{ peer: string; connected: boolean; queueBytes: number }> = []
  for (const [peer, peerStats] of stats.peers) {
    framesDropped += peerStats.framesDropped
    if (perPeer) peers.push({ peer, connected: peerStats.connected, queueBytes: peerStats.queueBytes })
  }
  return { kind, open: stats.linksOpen, framesDropped, framesRejected: stats.framesRejected, handshakesFailed: stats.handshakesFailed, peers }
}

async function replicationView(state: StateStore, replicator: AclReplicator): Promise<ReplicationView> {
  const records = await replicationRecords(state.reader)
  const status = replicator.status()
  const failures = replicator.failedRounds()
  const streams = REPLICATED_STREAMS.filter((stream) => stream !== 'tokens' || status.tokens).map((stream) => ({
    stream,
    index: records.get(stream)?.RemoteIndex ?? 0,
    errors: failures.get(stream) ?? 0,
  }))
  // The lag is the leader's measure (the loop runs there), as GET /v1/acl/replication reports it.
  return { running: status.running, lagSeconds: status.running ? status.lagSeconds : 0, streams }
}

export function agentMetricSources(parts: MetricParts): MetricSources {
  const { started, state, resolver, replicator } = parts
  return {
    raft: () => raftView(started),
    tableIndexes: () => TABLES.map((table) => [table, state.tableIndex(table)] as const),
    acl: () => ({ ...resolver.counts, cacheEntries: resolver.cacheEntries }),
    // Both are counted per process (http/read.ts, http/body.ts): one agent a process outside tests.
    blockingQueries: waitingQueryCount,
    bodyBytesInFlight: bodiesInFlight,
    links: () => {
      const views: LinksView[] = []
      const raftStats = started.raftLinkStats()
      if (raftStats !== undefined) views.push(linksView('raft', raftStats, true))
      if (started.wan !== undefined) views.push(linksView('wan', started.wan.transport.stats(), false))
      return views
    },
    ...(replicator === undefined ? {} : { replication: () => replicationView(state, replicator) }),
  }
}
