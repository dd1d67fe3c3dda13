/**
 * Workload 6, scale (only when asked: --scale N, default 1,000,000): N tokens spread over 1,000 policies, loaded
 * through the API at 256 connections to the leader (autocannon cycling through one token create per policy), then:
 * each node's RSS, the latency of listing one policy's tokens (GET /v1/acl/tokens?policy=ID, N/1,000 tokens each),
 * the time a follower takes from its restart to serving (and to having caught up), and the time a follower whose
 * data dir was wiped takes to catch up (by snapshot, the log having been compacted long before), with one write a
 * second going on meanwhile.
 *
 * Bounded in time: the load stops after --scale-minutes (default 20) whatever it reached, and what was loaded is
 * what the rest measures; each later step has its own timeout.
 */
import { rm } from 'node:fs/promises'
import { runTracked } from './children.js'
import { jsonHeaders, load, sleep, type BenchContext } from './context.js'
import { pool, percentile } from './http-client.js'
import { rssFileMb, rssMb } from './procfs.js'
import type { ScaleSummary } from './results.js'
import type { WardenCluster } from './warden.js'

const POLICIES = 1_000
const LOAD_CONNECTIONS = 256
const LIST_SAMPLES = 20
const RESTART_TIMEOUT_MS = 120_000
/** Past the issue's bound (2 minutes) with room to spare, and short enough that a node that never catches up does not hold the run. */
const WIPED_TIMEOUT_MS = 5 * 60_000

export async function wardenScale(ctx: BenchContext, warden: WardenCluster, tokens: number): Promise<void> {
  const notes: string[] = []
  ctx.progress.step(`scale: creating ${POLICIES} policies`)
  const policyIds: string[] = new Array<string>(POLICIES)
  await pool(POLICIES, 32, async (n) => {
    const policy = await warden.json<{ ID: string }>(warden.leader, 'PUT', '/v1/acl/policy', { Name: `scale-${n}`, Rules: `service "svc-${n}" { policy = "read" }` })
    policyIds[n] = policy.ID
  })
  ctx.progress.step(`scale: loading ${tokens.toLocaleString('en-US')} tokens at ${LOAD_CONNECTIONS} connections (at most ${ctx.options.scaleMinutes} min)`)
  const requests = policyIds.map((id) => ({ method: 'PUT', path: '/v1/acl/token', headers: jsonHeaders(warden.token), body: JSON.stringify({ Description: 'scale', Policies: [{ ID: id }] }) }))
  const loaded = await load(ctx, {
    workload: 'scale',
    system: 'warden',
    name: `token create, loading ${tokens.toLocaleString('en-US')} tokens`,
    cluster: warden.label,
    origin: warden.origin(warden.leader),
    connections: LOAD_CONNECTIONS,
    requests,
    maxRequests: tokens,
    durationS: Math.round(ctx.options.scaleMinutes * 60),
    watched: warden.watched(),
  })
  const loadSeconds = loaded.durationS
  if (loadSeconds >= ctx.options.scaleMinutes * 60 - 1) notes.push(`the load stopped at its ${ctx.options.scaleMinutes}-minute bound with ${loaded.ok} of ${tokens} tokens`)
  if (loaded.errors > 0) notes.push(`${loaded.errors} token creates failed (${Object.entries(loaded.statusCodes).map(([code, count]) => `${code}×${count}`).join(' ')})`)
  await sleep(2_000) // Followers apply the tail of the load.
  const rss = (): Record<string, number> => Object.fromEntries(warden.nodes().map((node) => [node, rssMb(warden.pid(node))]))
  const rssAfterLoad = rss()

  ctx.progress.step('scale: list tokens by policy')
  const follower = warden.followers[0] ?? warden.leader
  const timeList = async (node: string, query: string): Promise<number[]> => {
    const times: number[] = []
    for (let n = 0; n < LIST_SAMPLES; n++) {
      const startedAt = performance.now()
      const answer = await warden.call(node, 'GET', `/v1/acl/tokens?policy=${policyIds[(n * 37) % POLICIES]}${query}`, { timeoutMs: 60_000 })
      if (answer.status !== 200) throw new Error(`list by policy: ${answer.status} ${answer.text.slice(0, 200)}`)
      times.push(performance.now() - startedAt)
    }
    return times
  }
  const stale = await timeList(follower, '&stale')
  const leaderDefault = await timeList(warden.leader, '')

  ctx.progress.step('scale: restart a follower')
  await warden.cluster.kill(follower)
  const restartStartedAt = performance.now()
  await Promise.race([warden.restart(follower), sleep(RESTART_TIMEOUT_MS).then(() => Promise.reject(new Error('restart timed out')))])
  let restartToServingMs = Number.NaN
  while (performance.now() - restartStartedAt < RESTART_TIMEOUT_MS) {
    const answer = await warden.call(follower, 'GET', `/v1/acl/tokens?policy=${policyIds[0]}&stale`, { timeoutMs: 30_000 }).catch(() => undefined)
    if (answer?.status === 200) {
      restartToServingMs = Math.round(performance.now() - restartStartedAt)
      break
    }
    await sleep(50)
  }
  const restartCaughtUpMs = await waitCaughtUp(warden, follower, restartStartedAt, RESTART_TIMEOUT_MS)

  ctx.progress.step('scale: wipe a follower and let it catch up')
  const wiped = warden.followers.find((node) => node !== follower) ?? follower
  const dataDir = warden.cluster.state().nodes[wiped]?.dataDir
  if (dataDir === undefined) throw new Error(`no data dir for ${wiped}`)
  await warden.cluster.kill(wiped)
  await rm(dataDir, { recursive: true, force: true })
  const wipedStartedAt = performance.now()
  await warden.restart(wiped)
  // A write a second while it catches up, as a cluster in use has: on an idle cluster the leader, which believes the
  // follower holds everything it acknowledged before the wipe, may have no reason to send it anything.
  let writing = true
  const writer = (async () => {
    while (writing) {
      await warden.call(warden.leader, 'PUT', '/v1/acl/token', { body: { Description: 'scale catch-up tick' } }).catch(() => undefined)
      await sleep(1_000)
    }
  })()
  const wipedCatchUpMs = await waitCaughtUp(warden, wiped, wipedStartedAt, WIPED_TIMEOUT_MS)
  writing = false
  await writer
  if (wipedCatchUpMs === null) {
    const size = await dataDirKb(dataDir)
    notes.push(`the wiped node had not caught up after ${WIPED_TIMEOUT_MS / 60_000} minutes (its data dir holds ${size} KB)`)
  }

  const summary: ScaleSummary = {
    requested: tokens,
    loaded: loaded.ok,
    loadSeconds: Math.round(loadSeconds),
    loadRate: loadSeconds > 0 ? Math.round(loaded.ok / loadSeconds) : 0,
    loadP99Ms: loaded.p99Ms,
    loadErrors: loaded.errors,
    rssMb: rssAfterLoad,
    listByPolicy: {
      tokensPerPolicy: Math.round(loaded.ok / POLICIES),
      staleFollowerP50Ms: Math.round(percentile(stale, 0.5)),
      staleFollowerMaxMs: Math.round(Math.max(...stale)),
      defaultLeaderP50Ms: Math.round(percentile(leaderDefault, 0.5)),
      defaultLeaderMaxMs: Math.round(Math.max(...leaderDefault)),
    },
    restartToServingMs,
    restartCaughtUpMs: restartCaughtUpMs ?? Number.NaN,
    wipedCatchUpMs,
    rssAfterRestartMb: rss(),
    rssFileAfterRestartMb: Object.fromEntries(warden.nodes().map((node) => [node, rssFileMb(warden.pid(node))])),
    notes,
  }
  ctx.results.scale = summary
}

async function dataDirKb(directory: string): Promise<number> {
  const { stdout } = await runTracked('du', ['-sk', directory]).catch(() => ({ stdout: '0' }))
  return Number(stdout.split(/\s/)[0])
}

/** ms from `startedAt` until `node` has applied what the leader has committed, or null after `timeoutMs`. */
async function waitCaughtUp(warden: WardenCluster, node: string, startedAt: number, timeoutMs: number): Promise<number | null> {
  while (performance.now() - startedAt < timeoutMs) {
    const statuses = await warden.cluster.status().catch(() => [])
    const leader = statuses.find((status) => status.role === 'leader')
    const mine = statuses.find((status) => status.node === node)
    if (leader !== undefined && mine !== undefined && mine.appliedIndex > 0 && mine.appliedIndex >= leader.commitIndex) return Math.round(performance.now() - startedAt)
    await sleep(250)
  }
  return null
}
