/**
 * The shape of a benchmark run, as written to scripts/bench/results/<date>.json and latest.json. One `Row` per load
 * (what autocannon or a driver measured, with every process's RSS and CPU during it); the workloads that are not a
 * rate (failover, blocking queries, scale, compare-and-set, fsyncs) keep their own figures beside the rows.
 */
import type { ProcessUsage } from './procfs.js'

export type System = 'warden' | 'etcd' | 'koa' | 'node'

/** The name of the Koa row the `?stale` target is judged against: Koa under the same client as warden's reads. */
export const KOA_SAME_CLIENT = 'bare Koa hello world, rotating client'

export interface Row {
  /** The workload's --only name: writes, reads, authorized, cas, etcd ... */
  workload: string
  system: System
  /** What was done: "token create → leader", "policy read ?stale → follower", "put → leader". */
  name: string
  /** "warden ×3", "warden ×1", "etcd ×3". */
  cluster: string
  connections: number
  rps: number
  p50Ms: number
  p99Ms: number
  errors: number
  processes: ProcessUsage[]
  note?: string
}

export interface FailoverRound {
  round: number
  killed: string
  /** ms from SIGKILL of the leader to the first 200 of a write sent after it. */
  firstWriteMs: number
  newLeader: string
}

export interface FailoverSummary {
  system: System
  rounds: FailoverRound[]
  medianMs: number
  maxMs: number
  acknowledged: number
  /** Acknowledged writes absent from a linearizable read at the end (must be 0). */
  lost: number
  /** Writes whose outcome the server could not know (504) or that failed; not counted as acknowledged. */
  failed: number
}

export interface BlockingSummary {
  queries: number
  /** From sending the write to the last blocking query's answer. */
  releasedMs: number
  /** From sending the write to half of the answers. */
  medianAnswerMs: number
  answered: number
  statuses: Record<string, number>
  rssBeforeMb: number
  rssWaitingMb: number
  rssPeakMb: number
  rssGrowthMb: number
  writeMs: number
}

export interface CasSummary {
  writers: number
  successesPerSecond: number
  attemptsPerSecond: number
  falseRate: number
  /** Two writers won with the same cas value: must be 0. */
  duplicateWins: number
  errors: number
}

export interface FsyncSummary {
  writes: number
  /** Per node: fsync + fdatasync calls, and per acknowledged write. */
  nodes: Array<{ node: string; role: string; syncs: number; perWrite: number }>
  note: string
}

export interface ScaleSummary {
  requested: number
  loaded: number
  loadSeconds: number
  loadRate: number
  loadP99Ms: number
  loadErrors: number
  rssMb: Record<string, number>
  listByPolicy: { tokensPerPolicy: number; staleFollowerP50Ms: number; staleFollowerMaxMs: number; defaultLeaderP50Ms: number; defaultLeaderMaxMs: number }
  restartToServingMs: number
  restartCaughtUpMs: number
  wipedCatchUpMs: number | null
  rssAfterRestartMb: Record<string, number>
  /** The file-backed part of rssAfterRestartMb (procfs.ts rssFileMb); absent in results older than it. */
  rssFileAfterRestartMb?: Record<string, number>
  /** Save and restore of the loaded state (issue 20), the scale workload's last step; absent when it did not run. */
  snapshot?: ScaleSnapshot
  notes: string[]
}

/**
 * The scale workload's snapshot step: GET /v1/snapshot from the leader streamed to a file, then writes the restore
 * must undo, then PUT /v1/snapshot of that file to the leader. Failures are in ScaleSummary.notes.
 */
export interface ScaleSnapshot {
  save: {
    node: string
    /** From the request to the archive's last byte on disk. */
    seconds: number
    archiveMb: number
    /** X-Service-Index of the save. */
    index: number
    /** The leader's highest RSS while it streamed the archive (sampled every 100 ms), and its CPU over the save. */
    leaderPeakRssMb: number
    leaderCpuPercent: number
    /** Records per table, as the archive's end record counts them (verified by reading the archive back); null: unreadable. */
    records: Record<string, number> | null
  }
  /** Tokens created between the save and the restore, which the restore must remove. */
  writesAfterSave: number
  restore: {
    node: string
    /** From the request to its 200 (the whole archive sent, the restore committed). */
    seconds: number
    /** X-Service-Index of the restore's answer (NaN when it had none). */
    index: number
    /** Every node's highest RSS from the request to the followers having applied the restore (sampled every 100 ms). */
    peakRssMb: Record<string, number>
    /** ms from the 200 to each follower's applied index reaching the restore's; null: not within the timeout. */
    followerCaughtUpMs: Record<string, number | null>
    /** The slowest of followerCaughtUpMs; null when any follower had not caught up. */
    followersCaughtUpMs: number | null
    /** Whether every node showed the saved state (the later tokens gone, an earlier one there, a policy's count); null: not checked. */
    verified: boolean | null
  } | null
}

/** One case of the links workload over its rounds. */
export interface LinksCase {
  name: string
  cluster: string
  rounds: Array<{ rps: number; p50Ms: number; p99Ms: number; errors: number; cpuUsPerRequest: number }>
  rpsMedian: number
  p50MsMedian: number
  p99MsMedian: number
  /** CPU of the cluster's three nodes per answered request, in µs (their CPU time over the load's requests). */
  cpuUsPerRequestMedian: number
}

/**
 * The links workload (issue 18): token creates at 64 connections to the leader of three clusters that differ only in
 * their peer links, and `?stale` reads on one follower over HTTP and HTTPS, interleaved round by round. Costs are
 * medians against the baseline: (1 − case / baseline) × 100 for throughput (positive: slower), (case / baseline − 1)
 * × 100 for CPU per request (positive: dearer).
 */
export interface LinksSummary {
  rounds: number
  loadS: number
  connections: number
  /** Keyed sealed, tls, unsealed, tlsHttps (writes) and readHttp, readHttps (reads). */
  cases: Record<string, LinksCase>
  /** Sealed links vs unsealed. */
  sealingCostPct: number
  sealingCpuCostPct: number
  /** TLS links vs unsealed (writes over plain HTTP on both). */
  tlsCostPct: number
  tlsCpuCostPct: number
  /** TLS links with the writes over HTTPS vs unsealed links with the writes over HTTP. */
  tlsHttpsCostPct: number
  /** HTTPS vs HTTP reads on the same follower of the TLS cluster. */
  httpsReadCostPct: number
  httpsReadCpuCostPct: number
  /** The most CPU the idle clusters used together during any load, in percent of one core. */
  idleClustersCpuPercentMax: number
}

/** What one system did in one case of one round of the write comparison. */
export interface WriteFigures {
  /** Acknowledged (2xx) writes over the load's seconds. */
  writesPerS: number
  /** Latency of the acknowledged writes in µs, as the load generator timed them (cannon.ts latencyUs). */
  p50Us: number
  p99Us: number
  /** The three nodes' CPU time over the load per acknowledged write, in µs (the load generator's left out). */
  cpuUsPerWrite: number
  acknowledged: number
  errors: number
}

/** One system in one case of the write comparison: every round, and each figure's median over them. */
export interface WriteComparisonSide {
  /** "token create → leader", "put → follower". */
  name: string
  cluster: string
  rounds: WriteFigures[]
  /** Each figure's own median, so they may come from different rounds. */
  median: Omit<WriteFigures, 'acknowledged' | 'errors'>
}

export interface WriteComparisonCase {
  key: 'leader64' | 'follower64' | 'leader1'
  target: 'leader' | 'follower'
  connections: number
  warden: WriteComparisonSide
  etcd: WriteComparisonSide
  /** warden / etcd of each median. */
  ratio: Omit<WriteFigures, 'acknowledged' | 'errors'>
}

/**
 * Issue 22's write comparison (workload-writes-vs-etcd.ts): token creates on warden ×3 and puts on etcd ×3 of the
 * same value size, at the same connections, alternated round by round in one run.
 */
export interface WriteComparison {
  rounds: number
  loadS: number
  /** etcd's value size: a token record's as warden returns it. */
  valueBytes: number
  cases: WriteComparisonCase[]
  /** The most CPU the cluster not being loaded took during any load, in percent of one core. */
  idleClusterCpuPercentMax: number
}

/** One window of closed-loop requests (the replication workload's local token creates on the secondary). */
export interface LatencyWindow {
  connections: number
  seconds: number
  requests: number
  rps: number
  p50Ms: number
  p99Ms: number
  /** The p99 of the requests sent after the window's first seconds (workload-replication.ts WARM_UP_S). */
  p99AfterWarmUpMs: number
  errors: number
}

/** Replication lag of sampled writes: from the primary's acknowledgement to their effect on a secondary's follower. */
export interface LagFigures {
  samples: number
  /** Samples seen on the secondary before the wait ran out; the percentiles are over these. */
  seen: number
  p50Ms: number
  p99Ms: number
  maxMs: number
}

/**
 * The replication workload (issue 19): dc1 (primary) and dc2 (secondary) of three nodes each. Phase A: dc1 loaded,
 * then dc2 started empty and timed until its follower reports every object replicated, with local token creates on
 * dc2's leader meanwhile and again once replication is idle. Phase B: replication lag under a steady write rate.
 */
export interface ReplicationSummary {
  /** When the workload began (after the federation's start); the times below are seconds from it. */
  startedAt: string
  /** Each phase's start. */
  phases: Array<{ phase: string; atS: number }>
  /** Objects asked for in the primary before the secondary starts. */
  policies: number
  tokens: number
  load: { policiesLoaded: number; policySeconds: number; policyRate: number; tokensLoaded: number; tokenSeconds: number; tokenRate: number; errors: number }
  initial: {
    /** The indexes of the primary's policy and token lists (X-Service-Index) the secondary must reach. */
    primaryPolicyIndex: number
    primaryTokenIndex: number
    primaryPolicies: number
    primaryGlobalTokens: number
    /** From dc2's nodes started to a leader named by a majority of them. */
    leaderAfterS: number
    /** From dc2 having a leader to its follower reporting both indexes replicated; null: not within timeoutS. */
    indexSeconds: number | null
    /**
     * From dc2 having a leader to its follower holding everything: the indexes reported and the counts equal to dc1's
     * (later than indexSeconds only when the indexes claimed more than the follower held); null: not within timeoutS.
     */
    seconds: number | null
    policiesSeconds: number | null
    tokensSeconds: number | null
    timeoutS: number
    /** Counted on a dc2 follower with ?stale once it was done (or had given up). */
    secondaryPolicies: number
    secondaryGlobalTokens: number
    /** dc2 leader's LastErrorMessage at the end of the phase, when newer than its LastSuccess. */
    lastError: string
  }
  /** Local token creates on dc2's leader: during the initial replication, then as long with replication idle. */
  localWrites: { during: LatencyWindow; idle: LatencyWindow | null; p99Ratio: number | null }
  lag: {
    /** Writes a second asked for (open loop, paced by a schedule), and for how long. */
    rate: number
    seconds: number
    writes: number
    acknowledged: number
    errors: number
    achievedRate: number
    /** Latency of the writes measured from their scheduled time. */
    writeP50Ms: number
    writeP99Ms: number
    all: LagFigures
    /** Token creates (seen: 200), token deletions (seen: 404), policy creates. */
    tokens: LagFigures
    deletions: LagFigures
    policies: LagFigures
    /** p99 of the samples acknowledged in each slice of `sliceS` seconds of the phase (from `fromS` s into it). */
    sliceS: number
    slices: Array<{ fromS: number; samples: number; seen: number; p99Ms: number }>
    /** The most ReplicationLagSeconds dc2's leader reported while the writes ran (its own measure). */
    leaderReportedMaxS: number
  } | null
  /** Warnings and errors the six agents logged during the workload, by message, and the elections they won ('info'). */
  logged: Array<{ node: string; level: string; msg: string; count: number; firstS: number; lastS: number }>
  notes: string[]
}

export interface TokenResolution {
  tokens: number
  checkNsPerCall: number
  cachedResolvePlusCheckNs: number
}

export interface Ratio {
  what: string
  warden: number
  etcd: number
  /** warden / etcd. */
  ratio: number
  unit: string
}

export interface Target {
  target: string
  measured: string
  met: boolean | null
}

export interface Machine {
  cpu: string
  cores: number
  memoryGb: number
  node: string
  kernel: string
  etcd?: string
}

export interface Results {
  date: string
  machine: Machine
  commit: string
  options: Record<string, unknown>
  elapsedS: number
  rows: Row[]
  cas?: CasSummary
  blocking?: BlockingSummary
  /** The same driver against a bare node:http server holding as many requests (hold-baseline.ts). */
  blockingBaseline?: BlockingSummary
  /** The same driver against a bare Koa app with one @koa/router route holding as many requests. */
  blockingKoaBaseline?: BlockingSummary
  failover: FailoverSummary[]
  scale?: ScaleSummary
  tokenResolution?: TokenResolution
  fsync?: FsyncSummary
  links?: LinksSummary
  writeComparison?: WriteComparison
  replication?: ReplicationSummary
  ui?: UiSummary
  ratios: Ratio[]
  targets: Target[]
  skipped: string[]
}

/** The web UI in Chromium (workload-ui.ts): the bundle as served, and times to a usable token list, over `samples`. */
export interface UiSummary {
  /** Tokens the agent held (the list's length). */
  tokens: number
  samples: number
  bundleBytes: number
  bundleGzipBytes: number
  /** From a cold navigation to /ui/ through the sign-in form (typing included) to a usable token list. */
  coldToUsable: { p50Ms: number; maxMs: number }
  /** From a navigation to /ui/tokens in a signed-in tab to a usable list. */
  signedInToUsable: { p50Ms: number; maxMs: number }
  /** From a token create's answer to its row in an open list (no reload). */
  liveUpdate: { p50Ms: number; maxMs: number }
}
