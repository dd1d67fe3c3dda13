/**
 * Workload 6, scale (only when asked: --scale N, default 1,000,000): N tokens spread over 1,000 policies, loaded
 * through the API at 256 connections to the leader (autocannon cycling through one token create per policy), then:
 * each node's RSS, the latency of listing one policy's tokens (GET /v1/acl/tokens?policy=ID, N/1,000 tokens each),
 * the time a follower takes from its restart to serving (and to having caught up), and the time a follower whose
 * data dir was wiped takes to catch up (by snapshot, the log having been compacted long before), with one write a
 * second going on meanwhile. Last, since a restore replaces the state the other steps measure: a snapshot of the
 * state saved from the leader, 100 tokens created, and the snapshot restored (issue 20), with the time, size and
 * peak RSS of each, and a check on every node that the state is the saved one again.
 *
 * Bounded in time: the load stops after --scale-minutes (default 20) whatever it reached, and what was loaded is
 * what the rest measures; each later step has its own timeout. A snapshot step that fails leaves a note, and the
 * figures before it stand.
 */
import { once } from 'node:events'
import { createReadStream, createWriteStream } from 'node:fs'
import { rm, stat } from 'node:fs/promises'
import { ApiError, Client } from '../../src/api/index.js'
import { join } from 'node:path'
import { inspectArchive } from '../../src/cli/commands/snapshot.js'
import { runTracked } from './children.js'
import { jsonHeaders, load, sleep, type BenchContext } from './context.js'
import { pool, percentile } from './http-client.js'
import { rssFileMb, rssMb, UsageMonitor, type ProcessUsage } from './procfs.js'
import type { ScaleSnapshot, ScaleSummary } from './results.js'
import type { WardenCluster } from './warden.js'

const POLICIES = 1_000
const LOAD_CONNECTIONS = 256
const LIST_SAMPLES = 20
const RESTART_TIMEOUT_MS = 120_000
/** Past the issue's bound (2 minutes) with room to spare, and short enough that a node that never catches up does not hold the run. */
const WIPED_TIMEOUT_MS = 5 * 60_000
/** A save or a restore of 1,000,000 tokens takes minutes on this machine; one still running after this has hung. */
const SNAPSHOT_TIMEOUT_MS = 30 * 60_000
/** Peak RSS is the figure of a save or a restore, and a spike of a few hundred ms would slip between 250 ms samples. */
const SNAPSHOT_SAMPLE_MS = 100
/** Tokens created between the save and the restore: the restore must remove every one of them, on every node. */
const WRITES_AFTER_SAVE = 100
/** From the restore's 200 to every follower having applied it: as long as the wiped follower's catch-up may take. */
const RESTORE_APPLIED_TIMEOUT_MS = WIPED_TIMEOUT_MS
/** One check call of the restored state; each is a single record or one policy's N/1,000 tokens. */
const CHECK_TIMEOUT_MS = 30_000

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
  // Recorded before the snapshot step: whatever becomes of it, the figures above stand.
  ctx.results.scale = summary
  const snapshot = await snapshotSaveRestore(ctx, warden, policyIds[0]!, notes)
  if (snapshot !== undefined) summary.snapshot = snapshot
}

interface PolicyTokens {
  count: number
  accessors: string[]
}

/** The tokens linked to one policy, as `node` lists them (`query` '&stale' for its own state). */
async function tokensOfPolicy(warden: WardenCluster, node: string, policyId: string, query: string): Promise<PolicyTokens> {
  const answer = await warden.call(node, 'GET', `/v1/acl/tokens?policy=${policyId}${query}`, { timeoutMs: CHECK_TIMEOUT_MS })
  if (answer.status !== 200) throw new Error(`list tokens of a policy on ${node}: ${answer.status} ${answer.text.slice(0, 200)}`)
  const tokens = JSON.parse(answer.text) as Array<{ AccessorID: string }>
  return { count: tokens.length, accessors: tokens.map((token) => token.AccessorID) }
}

/**
 * Save, writes, restore, check (see the file's comment). Answers what it measured, undefined when the save itself
 * failed; every failure and every mismatch of the restored state is a note.
 */
async function snapshotSaveRestore(ctx: BenchContext, warden: WardenCluster, policyId: string, notes: string[]): Promise<ScaleSnapshot | undefined> {
  const file = join(ctx.workDir, 'scale.snapshot')
  const failed = (what: string, error: unknown): void => void notes.push(`snapshot: ${what} failed: ${error instanceof Error ? error.message : String(error)}`)
  try {
    await warden.refreshRoles()
    const leader = warden.leader
    // What the restore must bring back, read before the save (nothing writes between the two): one policy's token
    // count, on every node after the restore, and one of its tokens, which must still resolve.
    let before: PolicyTokens
    try {
      before = await tokensOfPolicy(warden, leader, policyId, '')
    } catch (error) {
      failed('reading the state before the save', error)
      return undefined
    }

    ctx.progress.step(`scale: snapshot save from ${leader}`)
    let save: ScaleSnapshot['save']
    try {
      const saved = await saveArchive(warden, leader, file)
      save = {
        node: leader,
        seconds: round1(saved.seconds),
        archiveMb: round1(saved.bytes / 1024 / 1024),
        index: saved.index,
        leaderPeakRssMb: saved.usage?.rssMb ?? Number.NaN,
        leaderCpuPercent: saved.usage?.cpuPercent ?? Number.NaN,
        records: null,
      }
    } catch (error) {
      failed(`GET /v1/snapshot on ${leader}`, error)
      return undefined
    }
    // Read back as an operator's `warden snapshot inspect` would: the archive must be whole, and its counts say what
    // was saved (the restore is checked against the state, so a damaged archive is a note, not the end of the step).
    try {
      const { meta, end } = await inspectArchive(file)
      save.records = end.Records
      if (meta.Index !== save.index) notes.push(`snapshot: the archive's index ${meta.Index} differs from the save's X-Service-Index ${save.index}`)
    } catch (error) {
      failed('reading the saved archive back', error)
    }

    ctx.progress.step(`scale: ${WRITES_AFTER_SAVE} token creates after the save`)
    const created: string[] = []
    try {
      await pool(WRITES_AFTER_SAVE, 16, async (n) => {
        const token = await warden.json<{ AccessorID: string }>(leader, 'PUT', '/v1/acl/token', { Description: `scale after the snapshot ${n}`, Policies: [{ ID: policyId }] })
        created.push(token.AccessorID)
      })
      const grown = await tokensOfPolicy(warden, leader, policyId, '')
      // Else the check after the restore would prove nothing.
      if (grown.count !== before.count + WRITES_AFTER_SAVE) notes.push(`snapshot: after ${WRITES_AFTER_SAVE} creates the policy lists ${grown.count} tokens, expected ${before.count + WRITES_AFTER_SAVE}`)
    } catch (error) {
      failed(`creating tokens after the save (${created.length} created)`, error)
    }
    const result: ScaleSnapshot = { save, writesAfterSave: created.length, restore: null }

    ctx.progress.step(`scale: snapshot restore on ${leader}`)
    // Every node from the request on: the leader reads and installs the archive, the followers take it afterwards.
    const monitor = new UsageMonitor(warden.watched(), SNAPSHOT_SAMPLE_MS).start()
    let usage: ProcessUsage[] = []
    let restored: { status: number; index: number; text: string } | undefined
    let restoreSeconds = Number.NaN
    let caughtUp: Record<string, number | null> = {}
    const followers = warden.nodes().filter((node) => node !== leader)
    const restoreStartedAt = performance.now()
    const elections = watchLeadership(warden, restoreStartedAt)
    try {
      const startedAt = restoreStartedAt
      restored = await putArchive(warden.address(leader), warden.token, file, SNAPSHOT_TIMEOUT_MS)
      const answeredAt = performance.now()
      restoreSeconds = round1((answeredAt - startedAt) / 1000)
      if (restored.status !== 200) {
        notes.push(`snapshot: PUT /v1/snapshot on ${leader} answered ${restored.status} after ${restoreSeconds} s: ${restored.text.slice(0, 300)}`)
      } else {
        if (restored.text !== '') notes.push(`snapshot: PUT /v1/snapshot answered 200 with a body (expected none): ${restored.text.slice(0, 200)}`)
        let index = restored.index
        if (!Number.isFinite(index)) {
          // Without the header there is no index to wait for: the leader's own applied index after the 200 is the
          // nearest stand-in (it holds the restore, and whatever came after it).
          const statuses = await warden.cluster.status().catch(() => [])
          index = statuses.find((status) => status.node === leader)?.appliedIndex ?? Number.NaN
          notes.push(`snapshot: PUT /v1/snapshot answered 200 without X-Service-Index; waited for the leader's applied index ${index}`)
        } else if (index <= save.index) {
          notes.push(`snapshot: the restore's index ${index} is not above the save's ${save.index}`)
        }
        if (Number.isFinite(index)) caughtUp = await waitApplied(warden, followers, index, answeredAt, RESTORE_APPLIED_TIMEOUT_MS)
      }
    } catch (error) {
      failed(`PUT /v1/snapshot on ${leader}`, error)
    } finally {
      usage = monitor.stop()
    }
    if (restored === undefined || restored.status !== 200) {
      noteElections(await elections.stop(), leader, notes)
      return result
    }

    const slowest = followers.map((node) => caughtUp[node] ?? null)
    const behind = followers.filter((node) => (caughtUp[node] ?? null) === null)
    if (behind.length > 0) notes.push(`snapshot: ${behind.join(', ')} had not applied the restore's index ${restored.index} ${RESTORE_APPLIED_TIMEOUT_MS / 60_000} minutes after its 200`)
    result.restore = {
      node: leader,
      seconds: restoreSeconds,
      index: restored.index,
      peakRssMb: Object.fromEntries(usage.filter((item) => item.label !== 'proxy').map((item) => [item.label, item.rssMb])),
      followerCaughtUpMs: Object.fromEntries(followers.map((node) => [node, caughtUp[node] ?? null])),
      followersCaughtUpMs: slowest.some((ms) => ms === null) ? null : Math.max(0, ...(slowest as number[])),
      verified: null,
    }

    ctx.progress.step('scale: check the restored state on every node')
    try {
      result.restore.verified = await checkRestored(warden, { policyId, before, created, notes })
    } catch (error) {
      failed('checking the restored state', error)
    }
    noteElections(await elections.stop(), leader, notes)
    return result
  } catch (error) {
    // Whatever the steps above did not expect (no leader to be found, say): a note like theirs, not a lost workload.
    failed('the save and restore', error)
    return undefined
  } finally {
    // Hundreds of MB at 1,000,000 tokens, in the run's scratch directory: not kept until the run ends.
    await rm(file, { force: true })
  }
}

/**
 * GET /v1/snapshot from `node` into `file` as it arrives (the answer waits while the disk catches up, so the bench
 * holds one chunk at a time), with `node`'s peak RSS and CPU sampled meanwhile.
 */
async function saveArchive(warden: WardenCluster, node: string, file: string): Promise<{ seconds: number; bytes: number; index: number; usage: ProcessUsage | undefined }> {
  const out = createWriteStream(file, { mode: 0o600 })
  await once(out, 'open')
  const monitor = new UsageMonitor(
    warden.watched().filter((item) => item.label === node),
    SNAPSHOT_SAMPLE_MS,
  ).start()
  let bytes = 0
  let usage: ProcessUsage[] = []
  try {
    const startedAt = performance.now()
    const meta = await warden.clients.for(warden.address(node)).download(
      '/v1/snapshot',
      async (chunk) => {
        bytes += chunk.length
        if (!out.write(chunk)) await once(out, 'drain')
      },
      { token: warden.token, timeoutMs: SNAPSHOT_TIMEOUT_MS },
    )
    out.end()
    await once(out, 'close')
    const seconds = (performance.now() - startedAt) / 1000
    usage = monitor.stop()
    return { seconds, bytes, index: meta.index, usage: usage[0] }
  } finally {
    monitor.stop()
    out.destroy()
  }
}

/**
 * PUT /v1/snapshot with `file` as the body, streamed from disk by the API client (never held whole). Answers the
 * status, X-Service-Index (NaN when absent) and an error's message.
 */
async function putArchive(address: string, token: string, file: string, timeoutMs: number): Promise<{ status: number; index: number; text: string }> {
  const { size } = await stat(file)
  const client = new Client({ address, token, timeoutMs })
  try {
    const meta = await client.upload('/v1/snapshot', createReadStream(file) as AsyncIterable<Buffer>, { bytes: size, timeoutMs })
    return { status: 200, index: meta.index, text: '' }
  } catch (error) {
    if (error instanceof ApiError) return { status: error.status, index: Number.NaN, text: error.message }
    throw new Error(`PUT /v1/snapshot on ${address}: ${(error as Error).message}`)
  } finally {
    client.close()
  }
}

interface LeadershipChange {
  /** ms from the restore's request. */
  atMs: number
  leader: string
  term: number
}

/**
 * The leader and term every 250 ms from the restore's request to the end of its checks, as the nodes report them: a
 * restore that holds a leader's event loop past the election timeout costs it its leadership, and when that happened
 * (during the upload, after the 200) says which part did.
 */
function watchLeadership(warden: WardenCluster, startedAt: number): { stop(): Promise<LeadershipChange[]> } {
  const changes: LeadershipChange[] = []
  let running = true
  const loop = (async () => {
    let last = ''
    while (running) {
      const statuses = await warden.cluster.status().catch(() => [])
      const leader = statuses.find((status) => status.role === 'leader')
      if (leader !== undefined && `${leader.node}/${leader.term}` !== last) {
        last = `${leader.node}/${leader.term}`
        changes.push({ atMs: Math.round(performance.now() - startedAt), leader: leader.node, term: leader.term })
      }
      if (running) await sleep(250)
    }
  })()
  return {
    async stop() {
      running = false
      await loop
      return changes
    },
  }
}

/** A note for every change of leader or term after the first reading (which is the leader the restore was sent to). */
function noteElections(changes: LeadershipChange[], leader: string, notes: string[]): void {
  const first = changes[0]
  if (first !== undefined && first.leader !== leader) notes.push(`snapshot: ${first.leader} led (term ${first.term}) when the restore was sent to ${leader}`)
  for (const change of changes.slice(1)) notes.push(`snapshot: ${change.leader} became leader (term ${change.term}) ${change.atMs} ms after the restore's request`)
}

/** ms from `startedAt` until each of `nodes` has applied `index` (cluster status), null for those that had not by `timeoutMs`. */
async function waitApplied(warden: WardenCluster, nodes: string[], index: number, startedAt: number, timeoutMs: number): Promise<Record<string, number | null>> {
  const reached = new Map<string, number>()
  while (reached.size < nodes.length && performance.now() - startedAt < timeoutMs) {
    const statuses = await warden.cluster.status().catch(() => [])
    for (const status of statuses) {
      if (nodes.includes(status.node) && !reached.has(status.node) && status.appliedIndex >= index) reached.set(status.node, Math.round(performance.now() - startedAt))
    }
    if (reached.size < nodes.length) await sleep(100)
  }
  return Object.fromEntries(nodes.map((node) => [node, reached.get(node) ?? null]))
}

/**
 * On every node, from its own state (?stale, each having applied the restore): none of the tokens created after the
 * save, one token from before it, and the policy's count as it was. Mismatches become notes; answers whether there
 * were none.
 */
async function checkRestored(warden: WardenCluster, check: { policyId: string; before: PolicyTokens; created: string[]; notes: string[] }): Promise<boolean> {
  const { policyId, before, created, notes } = check
  let clean = true
  const earlier = before.accessors[0]
  for (const node of warden.nodes()) {
    const statuses = new Map<number, number>()
    await pool(created.length, 16, async (n) => {
      const answer = await warden.call(node, 'GET', `/v1/acl/token/${created[n]}?stale`, { timeoutMs: CHECK_TIMEOUT_MS })
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1)
    })
    const gone = statuses.get(404) ?? 0
    if (gone !== created.length) {
      clean = false
      notes.push(`snapshot: on ${node}, ${created.length - gone} of the ${created.length} tokens created after the save were not gone after the restore (statuses ${[...statuses].map(([status, count]) => `${status}×${count}`).join(' ')})`)
    }
    if (earlier !== undefined) {
      const answer = await warden.call(node, 'GET', `/v1/acl/token/${earlier}?stale`, { timeoutMs: CHECK_TIMEOUT_MS })
      if (answer.status !== 200) {
        clean = false
        notes.push(`snapshot: on ${node}, a token from before the save answered ${answer.status} after the restore`)
      }
    }
    const after = await tokensOfPolicy(warden, node, policyId, '&stale')
    if (after.count !== before.count) {
      clean = false
      notes.push(`snapshot: on ${node}, the policy lists ${after.count} tokens after the restore, ${before.count} when saved`)
    }
  }
  return clean
}

function round1(value: number): number {
  return Math.round(value * 10) / 10
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
