/**
 * Workload `replication` (issue 19; only with --only replication): dc1 (the primary) and dc2 (a secondary) of three
 * nodes each, real processes linked directly (warden.ts WardenFederation).
 *
 * Phase A, initial replication. dc2 is stopped and emptied at once; dc1 is loaded with 10,000 policies (in-process,
 * 64 at a time) and 100,000 global tokens each linking one of them (autocannon, 64 connections); 1,000 and 10,000 with
 * --quick. The indexes of dc1's policy and token lists (X-Service-Index, read on a dc1 follower) are what dc2 must
 * reach. Then dc2's nodes start on empty data dirs, and the clock runs from dc2 having a leader until a dc2 follower
 * reports both indexes replicated (`GET /v1/acl/replication`: ReplicatedIndex, ReplicatedTokenIndex), within a bound
 * (5 min; 3 with --quick), past which the phase is reported as not done, with dc2's last replication error. Counts on
 * that follower with ?stale confirm it; should they fall short of dc1's, they are read again until they do not, and
 * dc2 holds everything only then. Meanwhile 16 connections create local tokens (`"Local": true`) on dc2's leader in
 * a closed loop (from its leader until replication is done, at most LOCAL_WINDOW_MAX_S); once replication is done the
 * same load runs again as long with replication idle, and the p99s are compared. The local tokens of each window are
 * deleted after it (untimed), so that neither the next window nor the lag phase runs on a dc2 swollen by them (the
 * replication reads every token dc2 holds to find its global ones).
 *
 * Phase B, lag. Global writes at a steady 500/s (open loop: each is sent at its scheduled time whether or not the
 * earlier ones were answered) to dc1's leader for 30 s (10 s with --quick); of every ten, five token creates, four
 * deletions of tokens loaded in phase A and one policy create, so that dc1's token table stays about its size (the
 * figure is of phase A's 100,000 tokens, however long the phase runs). Three of every ten are samples (a token
 * create, a token deletion, a policy create): from its acknowledgement by dc1, a blocking read on a dc2 follower
 * (`GET /v1/acl/token/<AccessorID>?stale&index=N`, the policy's likewise) asks until it answers 200 (404 for a
 * deletion); lag = seen − acknowledged. A blocking read returns as soon as the follower applies a change of the record
 * (or, for a record that is missing, of its table), so it sees the write when the follower has it, as polling every
 * few ms would, without its thousands of requests a second (150 samples a second, each outstanding for the lag).
 *
 * Every request of the benchmark's own (not autocannon's) is made from this process through keep-alive clients.
 * dc2's local token creates run in this process as well; they are compared with themselves, so its own cost is on
 * both sides. Warnings and errors the agents logged during the workload, and the elections they won, are read from
 * their log files at the end, with their times and each phase's start, so that a stall can be put in its phase.
 */
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { jsonHeaders, load, sleep, type BenchContext } from './context.js'
import { httpCall, keepAliveClients, percentile, pool, type ClientPool } from './http-client.js'
import { UsageMonitor, type ProcessUsage, type Watched } from './procfs.js'
import type { LagFigures, LatencyWindow, ReplicationSummary, Row } from './results.js'
import type { WardenFederation } from './warden.js'

export const PRIMARY = 'dc1'
export const SECONDARY = 'dc2'
const FULL = { policies: 10_000, tokens: 100_000, loadBoundS: 600, syncTimeoutMs: 5 * 60_000, lagSeconds: 30 }
const QUICK = { policies: 1_000, tokens: 10_000, loadBoundS: 180, syncTimeoutMs: 3 * 60_000, lagSeconds: 10 }
const POLICY_CONCURRENCY = 64
const TOKEN_CONNECTIONS = 64
/** Distinct token bodies autocannon cycles through (each links another policy). */
const TOKEN_BODIES = 1_000
const STATUS_POLL_MS = 100
const LOCAL_CONNECTIONS = 16
/** The local token load during the initial replication stops when it is done, or after this. */
const LOCAL_WINDOW_MAX_S = 120
const DELETE_CONCURRENCY = 64
/**
 * Each window's p99 is also given without its first seconds: the window during the initial replication begins on
 * processes started a second before (their code not compiled yet, their caches empty), the idle one on warm ones.
 */
const WARM_UP_S = 2
/** A pause after each deletion of local tokens, before the next measure (the storage compacts what was deleted). */
const SETTLE_MS = 5_000
/** The idle window runs as long as the initial replication did, but not shorter than this. */
const IDLE_MIN_S = 5
const LAG_RATE = 500
/** Write n by n % 10: a token create, a token deletion or a policy create; the sampled ones. */
const LAG_MIX: ReadonlyArray<WriteKind> = ['token', 'delete', 'token', 'delete', 'token', 'policy', 'token', 'delete', 'token', 'delete']
const LAG_SAMPLED = new Set([0, 3, 5])
/** How long after the last scheduled write a sample may still be seen. */
const LAG_GRACE_MS = 30_000
const BLOCKING_WAIT_MS = 10_000
/** The lag's p99 is also given per slice of this many seconds (by acknowledgement): a stall shows apart. */
const LAG_SLICE_S = 5
/** This process, which drives every load but the token load (autocannon): its CPU is shown beside the nodes'. */
const DRIVER: Watched = { label: 'driver', pid: process.pid }

export async function wardenReplication(ctx: BenchContext, federation: WardenFederation): Promise<void> {
  const sizes = ctx.options.quick ? QUICK : FULL
  const notes: string[] = []
  const summary: ReplicationSummary = {
    startedAt: new Date().toISOString(),
    phases: [],
    policies: sizes.policies,
    tokens: sizes.tokens,
    load: { policiesLoaded: 0, policySeconds: 0, policyRate: 0, tokensLoaded: 0, tokenSeconds: 0, tokenRate: 0, errors: 0 },
    initial: {
      indexSeconds: null,
      primaryPolicyIndex: 0,
      primaryTokenIndex: 0,
      primaryPolicies: 0,
      primaryGlobalTokens: 0,
      leaderAfterS: 0,
      seconds: null,
      policiesSeconds: null,
      tokensSeconds: null,
      timeoutS: sizes.syncTimeoutMs / 1000,
      secondaryPolicies: 0,
      secondaryGlobalTokens: 0,
      lastError: '',
    },
    localWrites: { during: emptyWindow(), idle: null, p99Ratio: null },
    lag: null,
    logged: [],
    notes,
  }
  // Whatever phase fails, what was measured until then is kept, with the agents' warnings.
  ctx.results.replication = summary
  // What the agents log from here on (their logs also hold the federation's start).
  const logOffsets = await logSizes(federation)
  try {
    const policyIds = await loadPrimary(ctx, federation, sizes, summary)
    const tokenIds = await initialReplication(ctx, federation, sizes, summary)
    // A deletion is a replication to watch only where dc2 held the token: not where the initial replication failed.
    const { initial } = summary
    const watchDeletions = initial.seconds !== null && initial.secondaryGlobalTokens === initial.primaryGlobalTokens
    if (!watchDeletions) summary.notes.push("lag phase: token deletions not watched (dc2 did not hold dc1's tokens: a 404 there would say nothing)")
    await sleep(SETTLE_MS)
    await lag(ctx, federation, sizes.lagSeconds, policyIds, tokenIds, watchDeletions, summary)
  } finally {
    summary.logged = await loggedProblems(federation, logOffsets, summary).catch(() => [])
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Phase A.

async function loadPrimary(ctx: BenchContext, federation: WardenFederation, sizes: typeof FULL, summary: ReplicationSummary): Promise<string[]> {
  step(ctx, summary, 'load policies', `replication: dc2 emptied; creating ${count(sizes.policies)} policies in dc1`)
  await federation.wipeDatacenter(SECONDARY)
  const leader = await federation.leaderOf(PRIMARY)
  const loadDeadline = performance.now() + sizes.loadBoundS * 1000
  const policyIds: string[] = []
  const latencies: number[] = []
  let errors = 0
  const monitor = new UsageMonitor([...(await federation.watched([PRIMARY])), DRIVER]).start()
  const startedAt = performance.now()
  await pool(sizes.policies, POLICY_CONCURRENCY, async (n) => {
    if (performance.now() > loadDeadline) return
    const sentAt = performance.now()
    const answer = await federation.call(leader, 'PUT', '/v1/acl/policy', { body: { Name: `r${n}`, Rules: `service "s${n}" { policy = "read" }` }, timeoutMs: 30_000 }).catch(() => undefined)
    latencies.push(performance.now() - sentAt)
    if (answer?.status === 200) policyIds.push((JSON.parse(answer.text) as { ID: string }).ID)
    else errors += 1
  })
  const seconds = (performance.now() - startedAt) / 1000
  ctx.results.rows.push(row(federation, `policy create → dc1 leader, loading ${count(sizes.policies)}`, POLICY_CONCURRENCY, latencies, errors, seconds, monitor.stop()))
  Object.assign(summary.load, { policiesLoaded: policyIds.length, policySeconds: round1(seconds), policyRate: Math.round(policyIds.length / seconds), errors })
  if (policyIds.length === 0) throw new Error(`no policy could be created in dc1 (${errors} errors)`)
  if (policyIds.length < sizes.policies) summary.notes.push(`${policyIds.length} of ${sizes.policies} policies created (${errors} errors${performance.now() > loadDeadline ? `, the load's ${sizes.loadBoundS} s bound reached` : ''})`)

  const leftS = Math.max(1, Math.round((loadDeadline - performance.now()) / 1000))
  step(ctx, summary, 'load tokens', `replication: loading ${count(sizes.tokens)} global tokens into dc1 at ${TOKEN_CONNECTIONS} connections (at most ${leftS} s)`)
  const requests = Array.from({ length: Math.min(TOKEN_BODIES, policyIds.length) }, (_, k) => ({
    method: 'PUT',
    path: '/v1/acl/token',
    headers: jsonHeaders(federation.token),
    body: JSON.stringify({ Description: 'r', Policies: [{ ID: policyIds[Math.floor((k * policyIds.length) / Math.min(TOKEN_BODIES, policyIds.length))]! }] }),
  }))
  const loaded = await load(ctx, {
    workload: 'replication',
    system: 'warden',
    name: `global token create → dc1 leader, loading ${count(sizes.tokens)}`,
    cluster: federation.label,
    origin: federation.origin(leader),
    connections: TOKEN_CONNECTIONS,
    requests,
    maxRequests: sizes.tokens,
    durationS: leftS,
    watched: await federation.watched([PRIMARY]),
  })
  Object.assign(summary.load, { tokensLoaded: loaded.ok, tokenSeconds: round1(loaded.durationS), tokenRate: Math.round(loaded.ok / Math.max(0.001, loaded.durationS)), errors: errors + loaded.errors })
  if (loaded.ok < sizes.tokens) summary.notes.push(`${loaded.ok} of ${sizes.tokens} tokens created (${loaded.errors} errors${loaded.durationS >= leftS - 1 ? `, the load's ${sizes.loadBoundS} s bound reached` : ''})`)
  return policyIds
}

/**
 * Phase A's measure; returns the AccessorIDs of the tokens loaded into dc1 (the lag phase deletes some). Global tokens
 * are counted here, not with `?filter=Local == false`: the token list accepts `filter` but does not apply it.
 */
async function initialReplication(ctx: BenchContext, federation: WardenFederation, sizes: typeof FULL, summary: ReplicationSummary): Promise<string[]> {
  const { initial } = summary
  const primaryLeader = await federation.leaderOf(PRIMARY)
  // The primary is idle from here on: the indexes of its lists are what dc2 must reach. Read on a follower (default
  // consistency: the leader's index, the follower's work): building a list of 100,000 tokens holds a node's event
  // loop for a while, long enough on the leader for its followers to elect another.
  const primaryFollower = federation.nodesOf(PRIMARY).find((node) => node !== primaryLeader)!
  const policies = await federation.call(primaryFollower, 'GET', '/v1/acl/policies', { timeoutMs: 120_000 })
  const tokens = await federation.call(primaryFollower, 'GET', '/v1/acl/tokens', { timeoutMs: 120_000 })
  if (policies.status !== 200 || tokens.status !== 200) throw new Error(`dc1's lists: ${policies.status} ${policies.text.slice(0, 200)} / ${tokens.status} ${tokens.text.slice(0, 200)}`)
  initial.primaryPolicyIndex = indexOf(policies.headers)
  initial.primaryTokenIndex = indexOf(tokens.headers)
  initial.primaryPolicies = (JSON.parse(policies.text) as unknown[]).length
  const primaryTokens = globalTokens(tokens.text)
  initial.primaryGlobalTokens = primaryTokens.length
  const loadedTokenIds = primaryTokens.filter((token) => token.Description === 'r').map((token) => token.AccessorID)
  const objects = initial.primaryPolicies + initial.primaryGlobalTokens
  step(ctx, summary, 'initial replication', `replication: initial replication of ${count(objects)} objects into an empty dc2 (at most ${sizes.syncTimeoutMs / 60_000} min)`)

  const nodesStartedAt = performance.now()
  await federation.startDatacenter(SECONDARY)
  const leader = await federation.leaderOf(SECONDARY, 60_000)
  const leaderAt = performance.now()
  initial.leaderAfterS = round1((leaderAt - nodesStartedAt) / 1000)
  const follower = federation.nodesOf(SECONDARY).find((node) => node !== leader)!
  const watched = await federation.watched()

  // dc2's local token creates, from the moment its leader resolves the management token (at dc1 until replicated).
  const tokenReady = await until(() => federation.call(leader, 'GET', '/v1/acl/token/self?stale').then((answer) => answer.status === 200, () => false), 30_000)
  if (!tokenReady) summary.notes.push(`dc2's leader did not resolve the management token within 30 s of its election`)
  const during = closedLoop(federation.address(leader), federation.token, LOCAL_CONNECTIONS, watched)
  let duringResult: Awaited<ReturnType<typeof during.stop>> | undefined

  const deadline = leaderAt + sizes.syncTimeoutMs
  const secondsNow = (): number => round1((performance.now() - leaderAt) / 1000)
  const stopDuring = async (): Promise<void> => {
    if (duringResult !== undefined) return
    duringResult = await during.stop()
    if (performance.now() - leaderAt > LOCAL_WINDOW_MAX_S * 1000) summary.notes.push(`dc2's local token creates ran for the first ${LOCAL_WINDOW_MAX_S} s of the initial replication`)
  }
  let nextReport = leaderAt + 30_000
  for (;;) {
    if (performance.now() - leaderAt > LOCAL_WINDOW_MAX_S * 1000) await stopDuring()
    const status = await replicationStatus(federation, follower)
    const now = performance.now()
    if (status !== undefined) {
      if (initial.policiesSeconds === null && status.ReplicatedIndex >= initial.primaryPolicyIndex) initial.policiesSeconds = secondsNow()
      if (initial.tokensSeconds === null && status.ReplicatedTokenIndex >= initial.primaryTokenIndex) initial.tokensSeconds = secondsNow()
      if (initial.policiesSeconds !== null && initial.tokensSeconds !== null) {
        initial.indexSeconds = Math.max(initial.policiesSeconds, initial.tokensSeconds)
        break
      }
    }
    if (now > deadline) break
    if (now > nextReport) {
      nextReport += 30_000
      const leaderStatus = await replicationStatus(federation, leader)
      ctx.progress.note(
        `  replication: after ${Math.round((now - leaderAt) / 1000)} s dc2 has ReplicatedIndex ${status?.ReplicatedIndex ?? '?'} of ${initial.primaryPolicyIndex}, ` +
          `ReplicatedTokenIndex ${status?.ReplicatedTokenIndex ?? '?'} of ${initial.primaryTokenIndex}${leaderStatus?.LastErrorMessage ? `; last error: ${leaderStatus.LastErrorMessage.slice(0, 200)}` : ''}`,
      )
    }
    await sleep(STATUS_POLL_MS)
  }

  // Confirmed by the counts on the follower: the indexes say what the replication claims, the counts what dc2 holds.
  // Should they disagree, the counts are polled (the token list only while it is short, and every few seconds: it
  // is large) until they agree or the time is up, at least a minute after the claim; dc2 holds everything when they do.
  if (initial.indexSeconds !== null) {
    const countDeadline = Math.max(deadline, performance.now() + 60_000)
    let checkTokens = true
    let missed = false
    for (;;) {
      // A count that agrees dates from when it began: what it counted was there by then.
      const countedFrom = secondsNow()
      await countSecondary(federation, follower, initial, checkTokens)
      checkTokens = initial.secondaryGlobalTokens !== initial.primaryGlobalTokens
      if (initial.secondaryPolicies === initial.primaryPolicies && !checkTokens) {
        initial.seconds = missed ? countedFrom : initial.indexSeconds
        break
      }
      missed = true
      if (performance.now() > countDeadline) break
      await sleep(checkTokens ? 5_000 : 1_000)
    }
    if (missed) {
      summary.notes.push(
        `dc2's follower reported both indexes replicated ${initial.indexSeconds} s after dc2's leader, but held fewer records then; ` +
          (initial.seconds === null ? `still ${initial.secondaryPolicies} policies and ${initial.secondaryGlobalTokens} global tokens of ${initial.primaryPolicies} and ${initial.primaryGlobalTokens} after ${secondsNow()} s` : `it held every one ${initial.seconds} s after`),
      )
    }
  } else {
    await countSecondary(federation, follower, initial, true)
  }
  await stopDuring()
  const duringResult1 = duringResult!
  summary.localWrites.during = duringResult1.window
  ctx.results.rows.push(duringResult1.row(federation, 'local token create → dc2 leader, during initial replication'))
  const leaderAfter = await federation.leaderOf(SECONDARY)
  if (leaderAfter !== leader) summary.notes.push(`dc2's leader changed during the initial replication (${leader} → ${leaderAfter}); the local token creates went on to ${leader}`)
  initial.lastError = await lastError(federation, leaderAfter)
  if (initial.seconds === null) {
    summary.notes.push(`the initial replication had not finished ${sizes.syncTimeoutMs / 60_000} min after dc2 had a leader${initial.lastError === '' ? '' : ` (dc2's last replication error: ${initial.lastError})`}`)
  }

  await deleteLocalTokens(ctx, federation, leaderAfter, duringResult1.created, summary)
  if (initial.seconds === null) {
    summary.notes.push('dc2 local token creates with replication idle: not measured (the initial replication never finished, so replication was never idle)')
    return loadedTokenIds
  }
  const idleS = Math.max(IDLE_MIN_S, duringResult1.window.seconds)
  step(ctx, summary, 'local writes, replication idle', `replication: dc2 local token creates at ${LOCAL_CONNECTIONS} connections, replication idle (${Math.round(idleS)} s)`)
  await sleep(SETTLE_MS)
  // At the leader of now: a leader changed during the initial replication would leave the first at a follower.
  const idleLeader = await federation.leaderOf(SECONDARY)
  const idle = closedLoop(federation.address(idleLeader), federation.token, LOCAL_CONNECTIONS, await federation.watched())
  await sleep(idleS * 1000)
  const idleResult = await idle.stop()
  summary.localWrites.idle = idleResult.window
  ctx.results.rows.push(idleResult.row(federation, 'local token create → dc2 leader, replication idle'))
  summary.localWrites.p99Ratio = Math.round((duringResult1.window.p99Ms / Math.max(0.1, idleResult.window.p99Ms)) * 100) / 100
  await deleteLocalTokens(ctx, federation, idleLeader, idleResult.created, summary)
  return loadedTokenIds
}

/** The policies and (with `tokens`) the global tokens a dc2 node holds, read with ?stale, into `initial`. */
async function countSecondary(federation: WardenFederation, node: string, initial: ReplicationSummary['initial'], tokens: boolean): Promise<void> {
  const policies = await federation.call(node, 'GET', '/v1/acl/policies?stale', { timeoutMs: 120_000 }).catch(() => undefined)
  if (policies?.status === 200) initial.secondaryPolicies = (JSON.parse(policies.text) as unknown[]).length
  if (!tokens) return
  const list = await federation.call(node, 'GET', '/v1/acl/tokens?stale', { timeoutMs: 120_000 }).catch(() => undefined)
  if (list?.status === 200) initial.secondaryGlobalTokens = globalTokens(list.text).length
}

/** The global tokens of a token list's answer (its `Local: false` entries). */
function globalTokens(text: string): Array<{ AccessorID: string; Description: string }> {
  return (JSON.parse(text) as Array<{ AccessorID: string; Description: string; Local?: boolean }>).filter((token) => token.Local !== true)
}

/** Deletes the local tokens a window created on dc2 (untimed: only so that what follows runs on dc2 without them). */
async function deleteLocalTokens(ctx: BenchContext, federation: WardenFederation, leader: string, ids: string[], summary: ReplicationSummary): Promise<void> {
  step(ctx, summary, 'deleting local tokens', `replication: deleting the window's ${count(ids.length)} local tokens in dc2`)
  let failed = 0
  await pool(ids.length, DELETE_CONCURRENCY, async (n) => {
    const answer = await federation.call(leader, 'DELETE', `/v1/acl/token/${ids[n]}`, { timeoutMs: 30_000 }).catch(() => undefined)
    if (answer?.status !== 200) failed += 1
  })
  if (failed > 0) summary.notes.push(`${failed} of ${ids.length} local tokens could not be deleted from dc2 after their window`)
}

interface ReplicationStatusBody {
  ReplicatedIndex: number
  ReplicatedTokenIndex: number
  LastSuccess: string
  LastError: string
  LastErrorMessage: string
  ReplicationLagSeconds?: number
}

async function replicationStatus(federation: WardenFederation, node: string): Promise<ReplicationStatusBody | undefined> {
  const answer = await federation.call(node, 'GET', '/v1/acl/replication', { timeoutMs: 5_000 }).catch(() => undefined)
  return answer?.status === 200 ? (JSON.parse(answer.text) as ReplicationStatusBody) : undefined
}

/** dc2 leader's last replication error when it is newer than its last success, else ''. */
async function lastError(federation: WardenFederation, leader: string): Promise<string> {
  const status = await replicationStatus(federation, leader)
  if (status === undefined || status.LastErrorMessage === '') return ''
  return Date.parse(status.LastError) > Date.parse(status.LastSuccess) ? status.LastErrorMessage.slice(0, 300) : ''
}

/** Local token creates at `connections` connections in a closed loop until stop(); then their window and a Row. */
function closedLoop(address: string, token: string, connections: number, watched: Watched[]): { stop: () => Promise<{ window: LatencyWindow; created: string[]; row: (federation: WardenFederation, name: string) => Row }> } {
  const clients: ClientPool = keepAliveClients(connections)
  const latencies: number[] = []
  /** When each request of `latencies` was sent, in ms from the start. */
  const sentAt: number[] = []
  const created: string[] = []
  let errors = 0
  let stopping = false
  const monitor = new UsageMonitor([...watched, DRIVER]).start()
  const startedAt = performance.now()
  const worker = async (): Promise<void> => {
    while (!stopping) {
      const sent = performance.now()
      const answer = await httpCall(clients, address, 'PUT', '/v1/acl/token', { token, body: { Description: 'local', Local: true }, timeoutMs: 30_000 }).catch(() => undefined)
      if (answer !== undefined) {
        latencies.push(performance.now() - sent)
        sentAt.push(sent - startedAt)
      }
      if (answer?.status === 200) created.push((JSON.parse(answer.text) as { AccessorID: string }).AccessorID)
      else {
        errors += 1
        if (answer === undefined) await sleep(20) // No answer at all: do not spin on a refused connection.
      }
    }
  }
  const workers = Array.from({ length: connections }, worker)
  return {
    async stop() {
      stopping = true
      const seconds = (performance.now() - startedAt) / 1000
      await Promise.all(workers)
      clients.close()
      const processes = monitor.stop()
      const window: LatencyWindow = {
        connections,
        seconds: round1(seconds),
        requests: latencies.length,
        rps: Math.round(latencies.length / Math.max(0.001, seconds)),
        p50Ms: round1(percentile(latencies, 0.5)),
        p99Ms: round1(percentile(latencies, 0.99)),
        p99AfterWarmUpMs: round1(percentile(latencies.filter((_, n) => sentAt[n]! >= WARM_UP_S * 1000), 0.99)),
        errors,
      }
      return { window, created, row: (federation: WardenFederation, name: string): Row => row(federation, name, connections, latencies, errors, seconds, processes) }
    },
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Phase B.

type WriteKind = 'token' | 'delete' | 'policy'

interface Sample {
  kind: WriteKind
  ackAt: number
  seenAt?: number
}

async function lag(ctx: BenchContext, federation: WardenFederation, seconds: number, policyIds: string[], tokenIds: string[], watchDeletions: boolean, summary: ReplicationSummary): Promise<void> {
  step(ctx, summary, 'lag', `replication: lag, ${LAG_RATE} writes/s to dc1 for ${seconds} s, ${LAG_SAMPLED.size} in ${LAG_MIX.length} watched on a dc2 follower`)
  const primaryLeader = await federation.leaderOf(PRIMARY)
  const secondaryLeader = await federation.leaderOf(SECONDARY)
  const follower = federation.nodesOf(SECONDARY).find((node) => node !== secondaryLeader)!
  const writers = keepAliveClients(256)
  // One socket per outstanding sample: each waits in a blocking read.
  const watchers = keepAliveClients(4096)
  const primary = federation.address(primaryLeader)
  const secondary = federation.address(follower)
  const { token } = federation
  const total = LAG_RATE * seconds
  const intervalMs = 1000 / LAG_RATE
  const monitor = new UsageMonitor([...(await federation.watched()), DRIVER]).start()
  const startAt = performance.now() + 20
  const watchDeadline = startAt + seconds * 1000 + LAG_GRACE_MS
  const writeLatencies: number[] = []
  const samples: Sample[] = []
  const pending = new Set<Promise<void>>()
  const watching: Promise<void>[] = []
  const unexpected = new Map<string, number>()
  let acknowledged = 0
  let errors = 0
  let inFlight = 0
  let inFlightMax = 0
  let lastAckAt = startAt

  // dc2 leader's own measure of its lag, once a second while the writes run.
  let sampling = true
  let leaderReportedMaxS = 0
  const leaderSampler = (async () => {
    while (sampling) {
      const status = await replicationStatus(federation, secondaryLeader)
      leaderReportedMaxS = Math.max(leaderReportedMaxS, status?.ReplicationLagSeconds ?? 0)
      await sleep(1_000)
    }
  })()

  // Until the follower answers `seen` (200 for a create, 404 for a deletion), in blocking reads from the index of its
  // last answer.
  const watch = async (sample: Sample, path: string, seen: number): Promise<void> => {
    let index = 0
    while (performance.now() < watchDeadline) {
      const waitMs = Math.max(100, Math.min(BLOCKING_WAIT_MS, Math.round(watchDeadline - performance.now())))
      const query = index === 0 ? '?stale' : `?stale&index=${index}&wait=${waitMs}ms`
      const answer = await httpCall(watchers, secondary, 'GET', `${path}${query}`, { token, timeoutMs: waitMs + 10_000 }).catch(() => undefined)
      if (answer?.status === seen) {
        sample.seenAt = performance.now()
        return
      }
      if (answer === undefined || (answer.status !== 200 && answer.status !== 404)) {
        const key = answer === undefined ? 'no answer' : `${answer.status} ${answer.text.slice(0, 120)}`
        unexpected.set(key, (unexpected.get(key) ?? 0) + 1)
        await sleep(50)
        continue
      }
      index = indexOf(answer.headers) || index
    }
  }

  let deleted = 0
  const send = (n: number, scheduledAt: number): void => {
    const slot = n % LAG_MIX.length
    // A deletion once the loaded tokens are used up (they are not, at these rates) is a create.
    const kind: WriteKind = LAG_MIX[slot] === 'delete' && deleted >= tokenIds.length ? 'token' : LAG_MIX[slot]!
    const victim = kind === 'delete' ? tokenIds[deleted++]! : ''
    const request =
      kind === 'policy'
        ? { method: 'PUT', path: '/v1/acl/policy', body: { Name: `lag-${n}`, Rules: `service "lag-${n}" { policy = "read" }` } }
        : kind === 'token'
          ? { method: 'PUT', path: '/v1/acl/token', body: { Description: 'lag', Policies: [{ ID: policyIds[n % policyIds.length]! }] } }
          : { method: 'DELETE', path: `/v1/acl/token/${victim}`, body: undefined }
    inFlight += 1
    inFlightMax = Math.max(inFlightMax, inFlight)
    const write = httpCall(writers, primary, request.method, request.path, { token, ...(request.body === undefined ? {} : { body: request.body }), timeoutMs: 30_000 }).then(
      (answer) => {
        const ackAt = performance.now()
        writeLatencies.push(ackAt - scheduledAt)
        if (answer.status !== 200) {
          errors += 1
          const key = `write ${answer.status} ${answer.text.slice(0, 120)}`
          unexpected.set(key, (unexpected.get(key) ?? 0) + 1)
          return
        }
        acknowledged += 1
        lastAckAt = ackAt
        if (!LAG_SAMPLED.has(slot) || (kind === 'delete' && !watchDeletions)) return
        const sample: Sample = { kind, ackAt }
        samples.push(sample)
        if (kind === 'delete') {
          watching.push(watch(sample, `/v1/acl/token/${victim}`, 404))
          return
        }
        const created = JSON.parse(answer.text) as { ID?: string; AccessorID?: string }
        watching.push(watch(sample, kind === 'policy' ? `/v1/acl/policy/${created.ID}` : `/v1/acl/token/${created.AccessorID}`, 200))
      },
      () => {
        errors += 1
      },
    )
    const tracked = write.finally(() => {
      inFlight -= 1
      pending.delete(tracked)
    })
    pending.add(tracked)
  }

  // The schedule: write n is due at startAt + n × interval; each tick sends every write due by then.
  let next = 0
  while (next < total) {
    const due = Math.min(total, Math.floor((performance.now() - startAt) / intervalMs) + 1)
    while (next < due) {
      send(next, startAt + next * intervalMs)
      next += 1
    }
    await sleep(1)
  }
  await Promise.all([...pending])
  sampling = false
  await Promise.all(watching)
  await leaderSampler
  writers.close()
  watchers.close()
  const processes = monitor.stop()
  const writeSeconds = (lastAckAt - startAt) / 1000
  const rowOfWrites = row(federation, `token create/delete, policy create (5:4:1) → dc1 leader, open loop ${LAG_RATE}/s`, inFlightMax, writeLatencies, errors, writeSeconds, processes)
  rowOfWrites.note = `open loop at ${LAG_RATE}/s; conn = most writes in flight; latency from each write's scheduled time`
  ctx.results.rows.push(rowOfWrites)
  summary.lag = {
    rate: LAG_RATE,
    seconds,
    writes: total,
    acknowledged,
    errors,
    achievedRate: Math.round(acknowledged / Math.max(0.001, writeSeconds)),
    writeP50Ms: round1(percentile(writeLatencies, 0.5)),
    writeP99Ms: round1(percentile(writeLatencies, 0.99)),
    all: lagFigures(samples),
    tokens: lagFigures(samples.filter((sample) => sample.kind === 'token')),
    deletions: lagFigures(samples.filter((sample) => sample.kind === 'delete')),
    policies: lagFigures(samples.filter((sample) => sample.kind === 'policy')),
    sliceS: LAG_SLICE_S,
    slices: Array.from({ length: Math.ceil(seconds / LAG_SLICE_S) }, (_, k) => {
      const inSlice = samples.filter((sample) => Math.floor((sample.ackAt - startAt) / 1000 / LAG_SLICE_S) === k)
      const figures = lagFigures(inSlice)
      return { fromS: k * LAG_SLICE_S, samples: figures.samples, seen: figures.seen, p99Ms: figures.p99Ms }
    }),
    leaderReportedMaxS,
  }
  for (const [what, times] of unexpected) summary.notes.push(`lag phase: ${times}× ${what}`)
  const unseen = samples.length - summary.lag.all.seen
  if (unseen > 0) summary.notes.push(`${unseen} of ${samples.length} sampled writes were not seen on dc2's follower within ${LAG_GRACE_MS / 1000} s of the last scheduled write`)
}

function lagFigures(samples: Sample[]): LagFigures {
  const lags = samples.filter((sample) => sample.seenAt !== undefined).map((sample) => sample.seenAt! - sample.ackAt)
  return {
    samples: samples.length,
    seen: lags.length,
    p50Ms: round1(percentile(lags, 0.5)),
    p99Ms: round1(percentile(lags, 0.99)),
    maxMs: round1(lags.length === 0 ? 0 : Math.max(...lags)),
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Helpers.

/** The next progress step, and when its phase began (seconds into the workload, for the agents' log lines). */
function step(ctx: BenchContext, summary: ReplicationSummary, phase: string, label: string): void {
  ctx.progress.step(label)
  summary.phases.push({ phase, atS: secondsSince(summary, Date.now()) })
}

function secondsSince(summary: ReplicationSummary, epochMs: number): number {
  return round1((epochMs - Date.parse(summary.startedAt)) / 1000)
}

function row(federation: WardenFederation, name: string, connections: number, latencies: number[], errors: number, seconds: number, processes: ProcessUsage[]): Row {
  return {
    workload: 'replication',
    system: 'warden',
    name,
    cluster: federation.label,
    connections,
    rps: Math.round(latencies.length / Math.max(0.001, seconds)),
    p50Ms: round1(percentile(latencies, 0.5)),
    p99Ms: round1(percentile(latencies, 0.99)),
    errors,
    processes,
  }
}

function emptyWindow(): LatencyWindow {
  return { connections: LOCAL_CONNECTIONS, seconds: 0, requests: 0, rps: 0, p50Ms: 0, p99Ms: 0, p99AfterWarmUpMs: 0, errors: 0 }
}

function indexOf(headers: Record<string, string | string[] | undefined>): number {
  const value = Number(headers['x-service-index'] ?? headers['x-consul-index'] ?? 0)
  return Number.isSafeInteger(value) && value > 0 ? value : 0
}

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs
  while (performance.now() < deadline) {
    if (await check()) return true
    await sleep(50)
  }
  return false
}

function logPath(federation: WardenFederation, node: string): string {
  return join(federation.root, 'logs', `${node}.log`)
}

async function logSizes(federation: WardenFederation): Promise<Map<string, number>> {
  return new Map(await Promise.all(federation.nodes().map(async (node) => [node, await stat(logPath(federation, node)).then((info) => info.size, () => 0)] as const)))
}

/**
 * Warnings (pino level 40) and worse in every agent's log past `offsets`, counted by node, level and message; and the
 * elections each node won (its 'became leader' lines), as level 'info': dc2's first is expected, any other is news.
 */
async function loggedProblems(federation: WardenFederation, offsets: Map<string, number>, summary: ReplicationSummary): Promise<ReplicationSummary['logged']> {
  const levels: Record<number, string> = { 40: 'warn', 50: 'error', 60: 'fatal' }
  const counts = new Map<string, ReplicationSummary['logged'][number]>()
  for (const node of federation.nodes()) {
    const text = await readFile(logPath(federation, node)).then((buffer) => buffer.subarray(offsets.get(node) ?? 0).toString('utf8'), () => '')
    for (const line of text.split('\n')) {
      if (!line.startsWith('{')) continue
      let entry: { level?: number; time?: number | string; msg?: string; err?: unknown }
      try {
        entry = JSON.parse(line) as typeof entry
      } catch {
        continue
      }
      const level = entry.msg === 'became leader' ? 'info' : levels[entry.level ?? 0]
      if (level === undefined) continue
      const detail = typeof entry.err === 'string' ? `: ${entry.err.slice(0, 160)}` : ''
      const msg = `${entry.msg ?? ''}${detail}`
      const key = `${node}\0${level}\0${msg}`
      // The agents write ISO times (agent/logger.ts); pino's default is epoch ms.
      const time = typeof entry.time === 'string' ? Date.parse(entry.time) : (entry.time ?? Number.NaN)
      const atS = Number.isFinite(time) ? secondsSince(summary, time) : 0
      const item = counts.get(key) ?? { node, level, msg, count: 0, firstS: atS, lastS: atS }
      item.count += 1
      item.lastS = atS
      counts.set(key, item)
    }
  }
  const all = [...counts.values()]
  const problems = all.filter((item) => item.level !== 'info').sort((a, b) => b.count - a.count)
  return [...all.filter((item) => item.level === 'info'), ...problems.slice(0, 30)]
}

function count(value: number): string {
  return value.toLocaleString('en-US')
}

function round1(value: number): number {
  return Math.round(value * 10) / 10
}
