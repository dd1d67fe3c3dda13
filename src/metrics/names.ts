/**
 * Every metric warden defines, in one table: its name, type, labels and help. One name gives both spellings, so the
 * two forms of `GET /v1/agent/metrics` can never drift apart: `raft.applied_index` is `warden.raft.applied_index` in
 * the JSON form (Consul's dotted names) and `warden_raft_applied_index` in the Prometheus form; a counter's Prometheus
 * name ends in `_total` and a histogram's in `_seconds` (the JSON form reports histograms in milliseconds, as Consul's
 * timers). The process metrics prom-client collects (`warden_process_*`, `warden_nodejs_*`) are not in this table:
 * their names are prom-client's, with the `warden_` prefix.
 *
 * Every counter here counts events one at a time (a request, a resolution, a leader change), never an amount: the JSON
 * form can then give Consul's Min, Max and Mean of its increments exactly (all 1).
 */

export type MetricKind = 'counter' | 'gauge' | 'histogram'

export interface MetricSpec {
  /** Dotted, without the prefix: `raft.applied_index`. */
  name: string
  kind: MetricKind
  help: string
  labels: readonly string[]
}

export const PROMETHEUS_PREFIX = 'warden_'
export const JSON_PREFIX = 'warden.'

/** The Prometheus spelling of a metric of the table: `warden_raft_applied_index`, `warden_http_requests_total`. */
export function prometheusName(spec: Pick<MetricSpec, 'name' | 'kind'>): string {
  const base = PROMETHEUS_PREFIX + spec.name.replaceAll('.', '_')
  if (spec.kind === 'counter') return `${base}_total`
  if (spec.kind === 'histogram') return `${base}_seconds`
  return base
}

/** The JSON (Consul) spelling of a metric of the table: `warden.raft.applied_index`, `warden.http.requests`. */
export function jsonName(spec: Pick<MetricSpec, 'name'>): string {
  return JSON_PREFIX + spec.name
}

function metric(name: string, kind: MetricKind, help: string, labels: readonly string[] = []): MetricSpec {
  return { name, kind, help, labels }
}

/** Latency buckets in seconds: from a quarter millisecond (an apply of one entry) to ten seconds (a stalled disk). */
export const LATENCY_BUCKETS_SECONDS = [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

export const METRICS = {
  // Raft, from the replica's status when scraped.
  raftTerm: metric('raft.term', 'gauge', 'The current Raft term of this server.'),
  raftCommitIndex: metric('raft.commit_index', 'gauge', 'The highest log index this server knows to be committed.'),
  raftAppliedIndex: metric('raft.applied_index', 'gauge', 'The highest log index applied to this server\'s state.'),
  raftLastIndex: metric('raft.last_index', 'gauge', 'The index of the last entry in this server\'s log.'),
  raftSnapshotIndex: metric('raft.snapshot_index', 'gauge', 'The index of this server\'s latest snapshot (0 without one).'),
  raftIsLeader: metric('raft.is_leader', 'gauge', '1 while this server is the leader, else 0.'),
  raftKnownLeader: metric('raft.known_leader', 'gauge', '1 while this server knows a leader (itself included), else 0.'),
  raftLastContact: metric('raft.last_contact_seconds', 'gauge', 'Seconds since this server last heard from the leader (0 on the leader).'),
  raftVoters: metric('raft.voters', 'gauge', 'Voters in the configuration this server holds.'),
  raftLeaderChanges: metric('raft.leader_changes', 'counter', 'Times this server came to know a leader (itself included) after knowing another or none.'),
  raftBecameLeader: metric('raft.became_leader', 'counter', 'Times this server became the leader.'),
  raftSnapshotsTaken: metric('raft.snapshots_taken', 'counter', 'Snapshots this server took of its own state.'),
  raftSnapshotsInstalled: metric('raft.snapshots_installed', 'counter', 'Snapshots this server installed from the leader.'),
  raftSnapshotsSent: metric('raft.snapshots_sent', 'counter', 'Snapshots this server, as leader, sent to a follower in full.'),
  raftAppliedShipped: metric('raft.applied_shipped', 'counter', 'Commands this server applied, as follower, from the writes its leader shipped.'),
  raftAppliedUnshipped: metric('raft.applied_unshipped', 'counter', 'Commands this server applied, as follower, by running them: membership commands, and those whose shipped writes had not come.'),
  raftAppend: metric('raft.append', 'histogram', 'Time to persist one batch of log entries and hard state (one LevelDB write, synced): the group commit.'),
  raftApply: metric('raft.apply', 'histogram', 'Time to apply one batch of committed entries to the state.'),
  raftSnapshot: metric('raft.snapshot', 'histogram', 'Time to take a snapshot: sync the state, record it, compact the log.'),
  raftFollowerMatchIndex: metric('raft.follower.match_index', 'gauge', 'On the leader: the highest index known to be replicated on each follower.', ['follower']),
  raftFollowerLag: metric('raft.follower.lag_entries', 'gauge', 'On the leader: entries of its log each follower does not hold yet.', ['follower']),
  raftFollowerLastContact: metric('raft.follower.last_contact_seconds', 'gauge', 'On the leader: seconds since each follower last answered.', ['follower']),
  // The state machine.
  stateTableIndex: metric('state.table_index', 'gauge', 'The highest index that changed each table (what X-Service-Index reports).', ['table']),
  // HTTP.
  httpRequests: metric('http.requests', 'counter', 'HTTP requests answered, by method, route pattern and status.', ['method', 'route', 'status']),
  httpRequestDuration: metric('http.request_duration', 'histogram', 'Time to answer an HTTP request, by method and route pattern; blocking queries that waited are left out.', ['method', 'route']),
  httpBlockingQueries: metric('http.blocking_queries', 'gauge', 'Blocking queries waiting on this node.'),
  httpBodyBytesInFlight: metric('http.body_bytes_in_flight', 'gauge', 'Bytes of request bodies being read at once (the body budget in use).'),
  // ACL.
  aclResolutions: metric('acl.resolutions', 'counter', 'Tokens resolved for requests (the anonymous token included).'),
  aclCacheHits: metric('acl.cache_hits', 'counter', 'Token resolutions answered from the authorizer cache.'),
  aclRemoteLookups: metric('acl.remote_lookups', 'counter', 'In a secondary datacenter: tokens looked up at the primary.'),
  aclCacheEntries: metric('acl.cache_entries', 'gauge', 'Authorizers in the resolver\'s cache.'),
  aclDenials: metric('acl.denials', 'counter', 'Requests refused by the ACL system: permission_denied (a token without the permission) or acl_not_found (an unknown, expired or deleted token).', ['code']),
  // Peer links (Raft links between the servers of this datacenter; WAN links between datacenters).
  linksOpen: metric('links.open', 'gauge', 'Peer links open, by kind (raft, wan).', ['kind']),
  linkConnected: metric('links.peer_connected', 'gauge', '1 while the Raft link to each peer is open, else 0.', ['peer']),
  linkQueueBytes: metric('links.peer_queue_bytes', 'gauge', 'Bytes queued to send to each Raft peer.', ['peer']),
  linkFramesDropped: metric('links.frames_dropped', 'counter', 'Frames refused (queue full) or dropped (link lost), by kind.', ['kind']),
  linkFramesRejected: metric('links.frames_rejected', 'counter', 'Sealed frames that failed to open (altered, replayed, reordered), by kind.', ['kind']),
  linkHandshakesFailed: metric('links.handshakes_failed', 'counter', 'Peer handshakes refused by either side, by kind.', ['kind']),
  // Cross-datacenter ACL replication (a secondary datacenter; its leader runs the loop).
  replicationRunning: metric('replication.running', 'gauge', '1 while this server runs ACL replication from the primary (the leader of a secondary), else 0.'),
  replicationIndex: metric('replication.index', 'gauge', 'The primary\'s index each stream has replicated up to.', ['stream']),
  replicationLag: metric('replication.lag_seconds', 'gauge', 'How long the oldest change seen at the primary and not yet applied here has waited (0 when caught up, and on followers).'),
  replicationErrors: metric('replication.errors', 'counter', 'Replication rounds that failed, by stream, on this server.', ['stream']),
} as const satisfies Record<string, MetricSpec>

export type MetricKey = keyof typeof METRICS
