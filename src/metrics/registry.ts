/**
 * One agent's metrics: a prom-client Registry of its own (several agents share a process in tests, so never the
 * global default registry), the process metrics prom-client collects into it (RSS, heap, event-loop lag, GC), and
 * warden's metrics (names.ts).
 *
 * Two ways in, both cheap on the request path:
 * - Events the HTTP layer and the Raft driver see (a request answered, a batch persisted or applied) update a
 *   counter or a histogram in place: `recordRequest` and the `raftTimings` histograms.
 * - Everything else is read when scraped, by each metric's collect(): the driver's status, table indexes, the token
 *   resolver's and the transports' counters, replication's status. Those parts keep plain numbers and know nothing of
 *   this module; `MetricSources` is how the agent hands them over. One scrape reads each source once.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import { consulMetrics, type ConsulMetrics, type MetricFamily } from './consul-json.js'
import { LATENCY_BUCKETS_SECONDS, METRICS, PROMETHEUS_PREFIX, prometheusName, type MetricSpec } from './names.js'

export interface RaftView {
  term: number
  commitIndex: number
  appliedIndex: number
  lastIndex: number
  snapshotIndex: number
  isLeader: boolean
  leaderKnown: boolean
  lastContactMs: number
  voters: number
  leaderChanges: number
  becameLeader: number
  snapshotsTaken: number
  snapshotsInstalled: number
  snapshotsSent: number
  appliedShipped: number
  appliedUnshipped: number
  /** On the leader, each other member; empty elsewhere. */
  followers: ReadonlyArray<{ id: string; matchIndex: number; lagEntries: number; lastContactMs: number }>
}

export interface AclView {
  resolutions: number
  cacheHits: number
  remoteLookups: number
  cacheEntries: number
}

export interface LinksView {
  kind: 'raft' | 'wan'
  open: number
  framesDropped: number
  framesRejected: number
  handshakesFailed: number
  /** Per peer, for Raft links only (a WAN transport may hold hundreds of peers). */
  peers: ReadonlyArray<{ peer: string; connected: boolean; queueBytes: number }>
}

export interface ReplicationView {
  running: boolean
  lagSeconds: number
  streams: ReadonlyArray<{ stream: string; index: number; errors: number }>
}

/** What the agent reads when scraped. Each is called at most once a scrape, on the event loop: none may block. */
export interface MetricSources {
  raft(): RaftView
  tableIndexes(): ReadonlyArray<readonly [table: string, index: number]>
  acl(): AclView
  blockingQueries(): number
  bodyBytesInFlight(): number
  links(): readonly LinksView[]
  /** Only in a secondary datacenter. */
  replication?: () => Promise<ReplicationView>
}

export interface MetricsOptions {
  /** Collect prom-client's process metrics (off in unit tests: its GC observer and event-loop monitor stay for the process). */
  processMetrics?: boolean
  /** Wall clock in ms, for the JSON form's Timestamp and rates. */
  now?: () => number
}

/** Before the agent has its parts: every value zero. */
const NO_SOURCES: MetricSources = {
  raft: () => ({ term: 0, commitIndex: 0, appliedIndex: 0, lastIndex: 0, snapshotIndex: 0, isLeader: false, leaderKnown: false, lastContactMs: 0, voters: 0, leaderChanges: 0, becameLeader: 0, snapshotsTaken: 0, snapshotsInstalled: 0, snapshotsSent: 0, appliedShipped: 0, appliedUnshipped: 0, followers: [] }),
  tableIndexes: () => [],
  acl: () => ({ resolutions: 0, cacheHits: 0, remoteLookups: 0, cacheEntries: 0 }),
  blockingQueries: () => 0,
  bodyBytesInFlight: () => 0,
  links: () => [],
}

/** What one scrape read from the sources, so that metrics sharing a source read it once. */
interface ScrapeView {
  raft?: RaftView
  acl?: AclView
  links?: readonly LinksView[]
  replication?: Promise<ReplicationView | undefined>
}

export class AgentMetrics {
  readonly registry = new Registry()
  /** Where the Raft driver reports how long its steps take (RaftReplicaOptions.timings). */
  readonly raftTimings: { append: Histogram; apply: Histogram; snapshot: Histogram }
  private readonly requests: Counter<'method' | 'route' | 'status'>
  private readonly requestDuration: Histogram<'method' | 'route'>
  private readonly denials: Counter<'code'>
  private readonly now: () => number
  private readonly startedAtMs: number
  private view: ScrapeView = {}
  private sources: MetricSources = NO_SOURCES

  /** Made before the agent's parts (the driver takes `raftTimings`); `readFrom` names them once they exist. */
  constructor(options: MetricsOptions = {}) {
    this.now = options.now ?? Date.now
    this.startedAtMs = this.now()
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: PROMETHEUS_PREFIX })
    this.requests = this.counter(METRICS.httpRequests)
    this.requestDuration = this.histogram(METRICS.httpRequestDuration)
    this.denials = this.counter(METRICS.aclDenials)
    // Both series from the start, so that a dashboard's rate() has a zero to start from.
    this.denials.inc({ code: 'permission_denied' }, 0)
    this.denials.inc({ code: 'acl_not_found' }, 0)
    this.raftTimings = { append: this.histogram(METRICS.raftAppend), apply: this.histogram(METRICS.raftApply), snapshot: this.histogram(METRICS.raftSnapshot) }
    this.registerRaft()
    this.registerHttpAndAcl()
    this.registerLinks()
    this.registerReplication()
  }

  /** Where scrapes read the agent's state from, from now on. */
  readFrom(sources: MetricSources): void {
    this.sources = sources
  }

  /**
   * One answered request: counted by method, route pattern and status, timed unless `seconds` is undefined (a
   * blocking query that waited: its time is the client's wait), and counted as a denial when the ACL system refused it.
   */
  recordRequest(method: string, route: string, status: number, seconds: number | undefined, errorCode: string | undefined): void {
    this.requests.inc({ method, route, status })
    if (seconds !== undefined) this.requestDuration.observe({ method, route }, seconds)
    if (errorCode === 'permission_denied' || errorCode === 'acl_not_found') this.denials.inc({ code: errorCode })
  }

  /** The text exposition format. */
  async prometheus(): Promise<{ contentType: string; text: string }> {
    this.view = {}
    return { contentType: this.registry.contentType, text: await this.registry.metrics() }
  }

  /** Consul's JSON form (`GET /v1/agent/metrics`). */
  async consul(): Promise<ConsulMetrics> {
    this.view = {}
    // prom-client's typings declare `type` as a numeric enum; at run time it is the string ('counter', 'gauge', ...).
    const families = (await this.registry.getMetricsAsJSON()) as unknown as MetricFamily[]
    const nowMs = this.now()
    return consulMetrics(families, { nowMs, uptimeSeconds: Math.max(1, (nowMs - this.startedAtMs) / 1000) })
  }

  // ---------------------------------------------------------------------------------------------------------------

  private raft(): RaftView {
    return (this.view.raft ??= this.sources.raft())
  }

  private acl(): AclView {
    return (this.view.acl ??= this.sources.acl())
  }

  private links(): readonly LinksView[] {
    return (this.view.links ??= this.sources.links())
  }

  private replication(): Promise<ReplicationView | undefined> {
    return (this.view.replication ??= this.sources.replication?.() ?? Promise.resolve(undefined))
  }

  private counter<L extends string>(spec: MetricSpec, collect?: (counter: Counter<L>) => void | Promise<void>): Counter<L> {
    return new Counter<L>({
      name: prometheusName(spec),
      help: spec.help,
      labelNames: spec.labels as L[],
      registers: [this.registry],
      ...(collect === undefined
        ? {}
        : {
            collect(this: Counter<L>) {
              // A total kept elsewhere, copied in: a counter cannot be set, so it is zeroed and raised to it.
              this.reset()
              return collect(this)
            },
          }),
    })
  }

  private gauge<L extends string>(spec: MetricSpec, collect: (gauge: Gauge<L>) => void | Promise<void>): Gauge<L> {
    return new Gauge<L>({
      name: prometheusName(spec),
      help: spec.help,
      labelNames: spec.labels as L[],
      registers: [this.registry],
      collect(this: Gauge<L>) {
        // Labelled series come and go (a follower removed, a stream not run): only those read now are reported.
        if (spec.labels.length > 0) this.reset()
        return collect(this)
      },
    })
  }

  private histogram<L extends string>(spec: MetricSpec): Histogram<L> {
    return new Histogram<L>({ name: prometheusName(spec), help: spec.help, labelNames: spec.labels as L[], buckets: LATENCY_BUCKETS_SECONDS, registers: [this.registry] })
  }

  private registerRaft(): void {
    this.gauge(METRICS.raftTerm, (gauge) => gauge.set(this.raft().term))
    this.gauge(METRICS.raftCommitIndex, (gauge) => gauge.set(this.raft().commitIndex))
    this.gauge(METRICS.raftAppliedIndex, (gauge) => gauge.set(this.raft().appliedIndex))
    this.gauge(METRICS.raftLastIndex, (gauge) => gauge.set(this.raft().lastIndex))
    this.gauge(METRICS.raftSnapshotIndex, (gauge) => gauge.set(this.raft().snapshotIndex))
    this.gauge(METRICS.raftIsLeader, (gauge) => gauge.set(this.raft().isLeader ? 1 : 0))
    this.gauge(METRICS.raftKnownLeader, (gauge) => gauge.set(this.raft().leaderKnown ? 1 : 0))
    this.gauge(METRICS.raftLastContact, (gauge) => gauge.set(this.raft().lastContactMs / 1000))
    this.gauge(METRICS.raftVoters, (gauge) => gauge.set(this.raft().voters))
    this.counter(METRICS.raftLeaderChanges, (counter) => counter.inc(this.raft().leaderChanges))
    this.counter(METRICS.raftBecameLeader, (counter) => counter.inc(this.raft().becameLeader))
    this.counter(METRICS.raftSnapshotsTaken, (counter) => counter.inc(this.raft().snapshotsTaken))
    this.counter(METRICS.raftSnapshotsInstalled, (counter) => counter.inc(this.raft().snapshotsInstalled))
    this.counter(METRICS.raftSnapshotsSent, (counter) => counter.inc(this.raft().snapshotsSent))
    this.counter(METRICS.raftAppliedShipped, (counter) => counter.inc(this.raft().appliedShipped))
    this.counter(METRICS.raftAppliedUnshipped, (counter) => counter.inc(this.raft().appliedUnshipped))
    this.gauge<'follower'>(METRICS.raftFollowerMatchIndex, (gauge) => {
      for (const follower of this.raft().followers) gauge.set({ follower: follower.id }, follower.matchIndex)
    })
    this.gauge<'follower'>(METRICS.raftFollowerLag, (gauge) => {
      for (const follower of this.raft().followers) gauge.set({ follower: follower.id }, follower.lagEntries)
    })
    this.gauge<'follower'>(METRICS.raftFollowerLastContact, (gauge) => {
      for (const follower of this.raft().followers) gauge.set({ follower: follower.id }, follower.lastContactMs / 1000)
    })
    this.gauge<'table'>(METRICS.stateTableIndex, (gauge) => {
      for (const [table, index] of this.sources.tableIndexes()) gauge.set({ table }, index)
    })
  }

  private registerHttpAndAcl(): void {
    this.gauge(METRICS.httpBlockingQueries, (gauge) => gauge.set(this.sources.blockingQueries()))
    this.gauge(METRICS.httpBodyBytesInFlight, (gauge) => gauge.set(this.sources.bodyBytesInFlight()))
    this.counter(METRICS.aclResolutions, (counter) => counter.inc(this.acl().resolutions))
    this.counter(METRICS.aclCacheHits, (counter) => counter.inc(this.acl().cacheHits))
    this.counter(METRICS.aclRemoteLookups, (counter) => counter.inc(this.acl().remoteLookups))
    this.gauge(METRICS.aclCacheEntries, (gauge) => gauge.set(this.acl().cacheEntries))
  }

  private registerLinks(): void {
    this.gauge<'kind'>(METRICS.linksOpen, (gauge) => {
      for (const links of this.links()) gauge.set({ kind: links.kind }, links.open)
    })
    this.gauge<'peer'>(METRICS.linkConnected, (gauge) => {
      for (const links of this.links()) for (const peer of links.peers) gauge.set({ peer: peer.peer }, peer.connected ? 1 : 0)
    })
    this.gauge<'peer'>(METRICS.linkQueueBytes, (gauge) => {
      for (const links of this.links()) for (const peer of links.peers) gauge.set({ peer: peer.peer }, peer.queueBytes)
    })
    this.counter<'kind'>(METRICS.linkFramesDropped, (counter) => {
      for (const links of this.links()) counter.inc({ kind: links.kind }, links.framesDropped)
    })
    this.counter<'kind'>(METRICS.linkFramesRejected, (counter) => {
      for (const links of this.links()) counter.inc({ kind: links.kind }, links.framesRejected)
    })
    this.counter<'kind'>(METRICS.linkHandshakesFailed, (counter) => {
      for (const links of this.links()) counter.inc({ kind: links.kind }, links.handshakesFailed)
    })
  }

  private registerReplication(): void {
    this.gauge(METRICS.replicationRunning, async (gauge) => gauge.set((await this.replication())?.running === true ? 1 : 0))
    this.gauge(METRICS.replicationLag, async (gauge) => gauge.set((await this.replication())?.lagSeconds ?? 0))
    this.gauge<'stream'>(METRICS.replicationIndex, async (gauge) => {
      for (const stream of (await this.replication())?.streams ?? []) gauge.set({ stream: stream.stream }, stream.index)
    })
    this.counter<'stream'>(METRICS.replicationErrors, async (counter) => {
      for (const stream of (await this.replication())?.streams ?? []) counter.inc({ stream: stream.stream }, stream.errors)
    })
  }
}
