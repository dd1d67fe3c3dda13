/**
 * Workload `links` (issue 18): what protecting the peer links costs a write, and what HTTPS costs a read.
 *
 * Clusters of three nodes run side by side and differ only in their peer links: sealed frames (the default),
 * mutual TLS 1.3 (frames then not sealed a second time), and frames in clear (`--unsealed-peer-links-for-benchmark`,
 * which exists for this comparison only). Each is loaded in turn with token creates at 64 connections to its leader
 * over plain HTTP, so that the links are the one difference. A fourth cluster, with TLS links too, takes the same
 * writes over HTTPS with a client certificate (the whole TLS set-up, as `cluster up --tls` runs it): a cluster of its
 * own, because every write load grows a cluster's data and every cluster must grow alike. Reads: `?stale` policy
 * reads at 64 connections on one follower of the TLS cluster, which serves plain HTTP and HTTPS side by side, so the
 * listener is the one difference; autocannon keeps its connections open, so this is the steady cost of TLS records,
 * not of handshakes.
 *
 * The cases run interleaved, one load each per round (sealed, TLS, unsealed, TLS + HTTPS, read HTTP, read HTTPS, then
 * again), so that drift of the machine and the data's growth over the run reach every case alike; the row of each
 * case holds the medians over the rounds, and the summary the costs against the unsealed baseline. The clusters that
 * are not being loaded only exchange heartbeats and compact; the CPU they take during each load is measured and
 * reported.
 */
import { readProc } from './procfs.js'
import { load, warmUp, type BenchContext, type LoadSpec } from './context.js'
import { READ_POLICIES, readTargets } from './workload-reads.js'
import { benchPolicy } from './workload-writes.js'
import type { LinksCase, LinksSummary, Row } from './results.js'
import type { WardenCluster } from './warden.js'

const CONNECTIONS = 64

export interface LinksClusters {
  sealed: WardenCluster
  tls: WardenCluster
  unsealed: WardenCluster
  /** TLS links too, loaded over HTTPS. */
  tlsHttps: WardenCluster
}

/** What a case loads, decided when it runs (a leader can change between rounds). */
type Target = Pick<LoadSpec, 'origin' | 'requests' | 'watched'> & Partial<Pick<LoadSpec, 'tls' | 'rotatePaths'>>

interface Case {
  key: string
  name: string
  warden: WardenCluster
  target: () => Target
}

function tokenCreate(warden: WardenCluster, policyId: string): LoadSpec['requests'][number] {
  return {
    method: 'PUT',
    path: '/v1/acl/token',
    headers: { 'X-Service-Token': warden.token, 'Content-Type': 'application/json' },
    body: JSON.stringify({ Description: 'bench token', Policies: [{ ID: policyId }] }),
  }
}

export async function wardenLinks(ctx: BenchContext, clusters: LinksClusters): Promise<void> {
  const { sealed, tls, unsealed, tlsHttps } = clusters
  const all = [sealed, tls, unsealed, tlsHttps]
  const policies = new Map<WardenCluster, string>()
  for (const warden of all) policies.set(warden, await benchPolicy(warden))
  const write = (warden: WardenCluster): LoadSpec['requests'] => [tokenCreate(warden, policies.get(warden)!)]
  ctx.progress.step(`links: ${READ_POLICIES} policies to read on ${tls.label}`)
  const policyIds = await readTargets(tls)
  const reader = tls.followers[0] ?? tls.leader
  // The follower must hold the last policy before the load, or the first stale reads would be 404s.
  await tls.call(reader, 'GET', `/v1/acl/policy/${policyIds.at(-1) ?? ''}`)
  const read: LoadSpec['requests'] = [{ method: 'GET', path: `/v1/acl/policy/${policyIds[0] ?? ''}?stale`, headers: { 'X-Service-Token': tls.token } }]
  const readPaths = policyIds.map((id) => `/v1/acl/policy/${id}?stale`)

  const cases: Case[] = [
    { key: 'sealed', name: 'token create → leader, sealed links (default)', warden: sealed, target: () => ({ origin: sealed.origin(sealed.leader), requests: write(sealed), watched: sealed.watched() }) },
    { key: 'tls', name: 'token create → leader, TLS links', warden: tls, target: () => ({ origin: tls.origin(tls.leader), requests: write(tls), watched: tls.watched() }) },
    { key: 'unsealed', name: 'token create → leader, unsealed links', warden: unsealed, target: () => ({ origin: unsealed.origin(unsealed.leader), requests: write(unsealed), watched: unsealed.watched() }) },
    {
      key: 'tlsHttps',
      name: 'token create → leader, TLS links, over HTTPS',
      warden: tlsHttps,
      target: () => ({ origin: tlsHttps.httpsOrigin(tlsHttps.leader), requests: write(tlsHttps), watched: tlsHttps.watched(), tls: tlsHttps.cannonTls() }),
    },
    { key: 'readHttp', name: 'policy read ?stale → follower, HTTP', warden: tls, target: () => ({ origin: tls.origin(reader), requests: read, rotatePaths: readPaths, watched: tls.watched() }) },
    {
      key: 'readHttps',
      name: 'policy read ?stale → follower, HTTPS',
      warden: tls,
      target: () => ({ origin: tls.httpsOrigin(reader), requests: read, rotatePaths: readPaths, watched: tls.watched(), tls: tls.cannonTls() }),
    },
  ]

  ctx.progress.step('links: warm-up')
  for (const warmCase of cases) await warmUp(ctx, { ...warmCase.target(), connections: warmCase.key.startsWith('read') ? CONNECTIONS : 16 })

  const rows = new Map<string, Row[]>(cases.map((linkCase) => [linkCase.key, []]))
  let idleCpuMax = 0
  for (let round = 1; round <= ctx.plan.linksRounds; round++) {
    for (const warden of all) await warden.refreshRoles()
    for (const linkCase of cases) {
      ctx.progress.step(`links: round ${round}/${ctx.plan.linksRounds}, ${linkCase.name}`)
      const idle = all.filter((warden) => warden !== linkCase.warden).flatMap((warden) => warden.nodes().map((node) => warden.pid(node)))
      const idleBefore = cpuTicks(idle)
      const startedAt = performance.now()
      const row = await load(ctx, {
        ...linkCase.target(),
        workload: 'links',
        system: 'warden',
        name: linkCase.name,
        cluster: linkCase.warden.label,
        connections: CONNECTIONS,
        durationS: ctx.plan.linksLoadS,
        record: false,
      })
      idleCpuMax = Math.max(idleCpuMax, ((cpuTicks(idle) - idleBefore) / 100 / ((performance.now() - startedAt) / 1000)) * 100)
      rows.get(linkCase.key)!.push(row)
    }
  }

  const summaries: Record<string, LinksCase> = {}
  for (const linkCase of cases) {
    const caseRows = rows.get(linkCase.key)!
    const medianRow = medianBy(caseRows, (row) => row.rps)
    summaries[linkCase.key] = {
      name: linkCase.name,
      cluster: linkCase.warden.label,
      rounds: caseRows.map((row) => ({ rps: row.rps, p50Ms: row.p50Ms, p99Ms: row.p99Ms, errors: row.errors, cpuUsPerRequest: cpuUsPerRequest(row) })),
      rpsMedian: median(caseRows.map((row) => row.rps)),
      p50MsMedian: median(caseRows.map((row) => row.p50Ms)),
      p99MsMedian: median(caseRows.map((row) => row.p99Ms)),
      cpuUsPerRequestMedian: median(caseRows.map(cpuUsPerRequest)),
    }
    const summary = summaries[linkCase.key]!
    // One row per case: the medians, with the processes of the round whose rate was the median.
    ctx.results.rows.push({
      workload: medianRow.workload,
      system: medianRow.system,
      name: medianRow.name,
      cluster: medianRow.cluster,
      connections: medianRow.connections,
      processes: medianRow.processes,
      rps: summary.rpsMedian,
      p50Ms: summary.p50MsMedian,
      p99Ms: summary.p99MsMedian,
      errors: caseRows.reduce((sum, row) => sum + row.errors, 0),
      note: `median of ${caseRows.length} interleaved rounds of ${ctx.plan.linksLoadS} s (req/s ${caseRows.map((row) => row.rps).join(', ')})`,
    })
  }
  const get = (key: string): LinksCase => summaries[key]!
  const summary: LinksSummary = {
    rounds: ctx.plan.linksRounds,
    loadS: ctx.plan.linksLoadS,
    connections: CONNECTIONS,
    cases: summaries,
    sealingCostPct: slower(get('sealed'), get('unsealed')),
    sealingCpuCostPct: dearer(get('sealed'), get('unsealed')),
    tlsCostPct: slower(get('tls'), get('unsealed')),
    tlsCpuCostPct: dearer(get('tls'), get('unsealed')),
    tlsHttpsCostPct: slower(get('tlsHttps'), get('unsealed')),
    httpsReadCostPct: slower(get('readHttps'), get('readHttp')),
    httpsReadCpuCostPct: dearer(get('readHttps'), get('readHttp')),
    idleClustersCpuPercentMax: Math.round(idleCpuMax * 10) / 10,
  }
  ctx.results.links = summary
}

/** The nodes' CPU time per answered request in µs (the load generator's own CPU left out). */
function cpuUsPerRequest(row: Row): number {
  const nodesPercent = row.processes.filter((usage) => usage.label !== 'autocannon').reduce((sum, usage) => sum + usage.cpuPercent, 0)
  return row.rps > 0 ? Math.round((nodesPercent / 100 / row.rps) * 1e6) : 0
}

function cpuTicks(pids: number[]): number {
  return pids.reduce((sum, pid) => sum + (readProc(pid)?.cpuTicks ?? 0), 0)
}

/** The median of `values` (the mean of the middle two for an even count; 0 for none). */
export function medianOf(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  if (sorted.length === 0) return 0
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** medianOf, to two decimals, as the tables print it. */
export function median(values: number[]): number {
  return Math.round(medianOf(values) * 100) / 100
}

/** The item whose key is the median (the lower middle one for an even count). */
function medianBy<T>(items: T[], key: (item: T) => number): T {
  const sorted = [...items].sort((a, b) => key(a) - key(b))
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}

/** Throughput lost against the baseline, in percent (negative: faster). */
function slower(measured: LinksCase, baseline: LinksCase): number {
  return baseline.rpsMedian > 0 ? Math.round((1 - measured.rpsMedian / baseline.rpsMedian) * 1000) / 10 : 0
}

/** CPU per request added over the baseline, in percent (negative: cheaper). */
function dearer(measured: LinksCase, baseline: LinksCase): number {
  return baseline.cpuUsPerRequestMedian > 0 ? Math.round((measured.cpuUsPerRequestMedian / baseline.cpuUsPerRequestMedian - 1) * 1000) / 10 : 0
}
