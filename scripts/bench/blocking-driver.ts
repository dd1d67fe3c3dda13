/**
 * The blocking-query driver (workload 5), its own process because it holds 10,000 sockets open (autocannon does not
 * hold requests open): the benchmark starts it under `ulimit -n` raised. It parks N blocking queries
 * (GET /v1/acl/policies?index=<current>&wait=5m) on one node through one API client (src/api) with a keep-alive
 * socket for each, waits until the node holds them all (its descriptor count covers them and its CPU has gone
 * quiet), records the node's RSS, sends one write, and measures until every query has answered. The parked queries'
 * answers are read and dropped (discardBody), so the driver's cost per answer is what it was over bare node:http.
 * Prints one JSON line.
 *
 *   node --import tsx scripts/bench/blocking-driver.ts '{"address":"127.0.0.1:P","token":"…","count":10000,"pid":123}'
 *
 * With "baseline": true it drives hold-baseline.ts instead: the same parking of GET requests, released by GET /release.
 */
import { Client } from '../../src/api/index.js'
import { httpCall, keepAliveClients, percentile } from './http-client.js'
import { openFileCount, readProc, rssMb } from './procfs.js'

interface Spec {
  address: string
  token: string
  count: number
  /** The node's pid, for its RSS, CPU and descriptor count. */
  pid: number
  /** Drive the bare-Node yardstick (hold-baseline.ts) instead of warden. */
  baseline?: boolean
}

const BATCH = 500
const SETTLE_TIMEOUT_MS = 120_000
const RELEASE_TIMEOUT_MS = 120_000
/** Longer than the server holds a query (wait=5m plus its jitter) and than the driver's own timeouts add up to. */
const PARKED_TIMEOUT_MS = 10 * 60_000

const specText = process.argv[2]
if (specText === undefined) throw new Error('usage: blocking-driver.ts SPEC_JSON')
const spec = JSON.parse(specText) as Spec

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

interface Parked {
  sent: Promise<void>
  answered: Promise<{ status: number; at: number }>
}

/** One parked query: `sent` once the request is written (or failed), `answered` when its answer has ended (-1: none). */
function park(client: Client, index: number): Parked {
  let markSent: () => void = () => undefined
  const sent = new Promise<void>((resolve) => (markSent = resolve))
  const path = spec.baseline === true ? `/hold?index=${index}` : `/v1/acl/policies?index=${index}&wait=5m`
  // A deadline the driver never reaches (the server answers within wait=5m plus its jitter, and the driver gives up
  // sooner): the driver's own timeouts decide, as they did over bare node:http, which had none.
  const answered = client
    .request('GET', path, { token: spec.token, discardBody: true, timeoutMs: PARKED_TIMEOUT_MS, onSent: () => markSent() })
    .then(
      (answer) => ({ status: answer.status, at: performance.now() }),
      () => {
        markSent()
        return { status: -1, at: performance.now() }
      },
    )
  return { sent, answered }
}

/**
 * Waits until the node holds (nearly) `count` more descriptors than before and has used under 5% CPU for half a
 * second: every request has been written by then, so a quiet node has parsed and parked them all. Nearly: sockets
 * of earlier loads that were still closing when the baseline was taken go away meanwhile.
 */
async function waitUntilParked(baselineFds: number): Promise<void> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS
  let quietWindows = 0
  let previous = readProc(spec.pid)?.cpuTicks ?? 0
  while (Date.now() < deadline) {
    await sleep(250)
    const ticks = readProc(spec.pid)?.cpuTicks ?? 0
    const busy = ticks - previous > 1 // more than 10 ms of CPU in 250 ms
    previous = ticks
    const enough = openFileCount(spec.pid) - baselineFds >= spec.count * 0.99
    quietWindows = enough && !busy ? quietWindows + 1 : 0
    if (quietWindows >= 2) return
  }
  throw new Error(`the node did not settle with ${spec.count} waiting queries within ${SETTLE_TIMEOUT_MS} ms (descriptors: ${openFileCount(spec.pid) - baselineFds})`)
}

const control = keepAliveClients(4)
let index = 1
if (spec.baseline !== true) {
  const list = await httpCall(control, spec.address, 'GET', '/v1/acl/policies', { token: spec.token })
  if (list.status !== 200) throw new Error(`GET /v1/acl/policies: ${list.status} ${list.text}`)
  index = Number(list.headers['x-service-index'])
}
const rssBeforeMb = rssMb(spec.pid)
const baselineFds = openFileCount(spec.pid)
const client = new Client({ address: spec.address, maxSockets: spec.count, maxFreeSockets: spec.count })
const parked: Parked[] = []
// In batches: 10,000 connects at once overflow the listen backlog, and the retried SYNs would cost seconds.
for (let start = 0; start < spec.count; start += BATCH) {
  const batch = Array.from({ length: Math.min(BATCH, spec.count - start) }, () => park(client, index))
  parked.push(...batch)
  await Promise.all(batch.map((query) => query.sent))
}
let early = 0
const answeredList: Array<{ status: number; at: number }> = []
for (const query of parked) {
  void query.answered.then((answer) => {
    early++
    answeredList.push(answer)
  })
}
await waitUntilParked(baselineFds)
const answeredBeforeWrite = early
const rssWaitingMb = rssMb(spec.pid)
let rssPeakMb = rssWaitingMb
const sampler = setInterval(() => (rssPeakMb = Math.max(rssPeakMb, rssMb(spec.pid))), 50)
const writeStartedAt = performance.now()
const write =
  spec.baseline === true
    ? await httpCall(control, spec.address, 'GET', '/release', {})
    : await httpCall(control, spec.address, 'PUT', '/v1/acl/policy', { token: spec.token, body: { Name: `bench-wake-${Date.now()}`, Rules: 'acl = "read"' } })
const writeMs = performance.now() - writeStartedAt
if (write.status !== 200) throw new Error(`the waking write failed: ${write.status} ${write.text}`)
await Promise.race([Promise.all(parked.map((query) => query.answered)), sleep(RELEASE_TIMEOUT_MS)])
clearInterval(sampler)
rssPeakMb = Math.max(rssPeakMb, rssMb(spec.pid))
// Answers that came before the write (a 429, a reset) are not releases; they show in the status counts.
const finished = answeredList.slice(answeredBeforeWrite)
const statuses: Record<string, number> = {}
for (const answer of answeredList) statuses[String(answer.status)] = (statuses[String(answer.status)] ?? 0) + 1
const delays = finished.map((answer) => answer.at - writeStartedAt)
client.close()
control.close()
process.stdout.write(
  `${JSON.stringify({
    queries: spec.count,
    answered: answeredList.length,
    answeredBeforeWrite,
    releasedMs: Math.round(Math.max(0, ...delays)),
    medianAnswerMs: Math.round(percentile(delays, 0.5)),
    statuses,
    rssBeforeMb,
    rssWaitingMb,
    rssPeakMb,
    rssGrowthMb: Math.round((rssPeakMb - rssBeforeMb) * 10) / 10,
    writeMs: Math.round(writeMs),
  })}\n`,
  // The release timeout's timer would hold the process for minutes more.
  () => process.exit(0),
)
