/**
 * Workload `metrics` (issue 20): what metrics cost the write path. The same three-node cluster takes token creates
 * at 64 connections to its leader, in two cases: with a scraper that fetches `GET /v1/agent/metrics?format=prometheus`
 * from every node once a second (as a Prometheus server with a 1 s interval would: far more often than the usual
 * 15 s), and with no scraper. Counters and histograms are updated whether anyone scrapes or not, so the "none" case
 * already pays for them; what the comparison shows is the cost of rendering, and that the in-place updates leave
 * nothing to see at the write's rates.
 *
 * The cases run interleaved on one cluster, as the links workload's do (workload-links.ts), alternating which goes
 * first in a round, so that drift of the machine and the data's growth reach both alike; each case's row holds the
 * medians over the rounds, and the note of the scraped case its cost against none. Rounds and load lengths are the
 * links workload's (`--rounds`, default 5 of 5 s; 3 of 2 s with --quick). Every scrape must answer 200 with the
 * applied index in it, or the workload fails: a scraper that silently failed would measure nothing.
 */
import { load, type BenchContext, type LoadSpec } from './context.js'
import type { Row } from './results.js'
import type { WardenCluster } from './warden.js'
import { median } from './workload-links.js'
import { benchPolicy } from './workload-writes.js'

const CONNECTIONS = 64
const SCRAPE_INTERVAL_MS = 1_000
const SCRAPE_PATH = '/v1/agent/metrics?format=prometheus'

/** Scrapes every node once a second until stopped; counts scrapes and keeps the first failure. */
class Scraper {
  scrapes = 0
  bytes = 0
  failure: string | undefined
  private readonly timer: NodeJS.Timeout
  private inFlight: Promise<void> = Promise.resolve()

  constructor(private readonly warden: WardenCluster) {
    this.timer = setInterval(() => {
      this.inFlight = Promise.all(this.warden.nodes().map((node) => this.scrape(node))).then(() => undefined)
    }, SCRAPE_INTERVAL_MS)
  }

  private async scrape(node: string): Promise<void> {
    try {
      const answer = await this.warden.call(node, 'GET', SCRAPE_PATH, { timeoutMs: 10_000 })
      if (answer.status !== 200 || !answer.text.includes('\nwarden_raft_applied_index ')) {
        this.failure ??= `${node}: ${answer.status} ${answer.text.slice(0, 200)}`
        return
      }
      this.scrapes += 1
      this.bytes += answer.text.length
    } catch (error) {
      this.failure ??= `${node}: ${(error as Error).message}`
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer)
    await this.inFlight
  }
}

interface Case {
  key: 'none' | 'scraped'
  name: string
}

const CASES: readonly Case[] = [
  { key: 'none', name: 'token create → leader, no metrics scrape' },
  { key: 'scraped', name: 'token create → leader, every node scraped each second' },
]

export async function wardenMetrics(ctx: BenchContext, warden: WardenCluster): Promise<void> {
  const policyId = await benchPolicy(warden)
  const target = (): Pick<LoadSpec, 'origin' | 'requests' | 'watched'> => ({
    origin: warden.origin(warden.leader),
    requests: [
      {
        method: 'PUT',
        path: '/v1/acl/token',
        headers: { 'X-Service-Token': warden.token, 'Content-Type': 'application/json' },
        body: JSON.stringify({ Description: 'bench token', Policies: [{ ID: policyId }] }),
      },
    ],
    watched: warden.watched(),
  })
  // A warm-up of one load's length even under --quick (whose warm-ups are none): the first round starts with the
  // unscraped case, which would otherwise pay alone for the JIT and LevelDB's first compactions.
  ctx.progress.step('metrics: warm-up')
  await load(ctx, { ...target(), workload: 'metrics', system: 'warden', name: 'warm-up', cluster: warden.label, connections: CONNECTIONS, durationS: ctx.plan.linksLoadS, record: false })

  const rows = new Map<Case['key'], Row[]>([
    ['none', []],
    ['scraped', []],
  ])
  let scrapes = 0
  let scrapeBytes = 0
  for (let round = 1; round <= ctx.plan.linksRounds; round++) {
    await warden.refreshRoles()
    // Alternate which case goes first, so neither always runs on the larger state or the warmer machine.
    const order = round % 2 === 1 ? CASES : [...CASES].reverse()
    for (const metricsCase of order) {
      ctx.progress.step(`metrics: round ${round}/${ctx.plan.linksRounds}, ${metricsCase.name}`)
      const scraper = metricsCase.key === 'scraped' ? new Scraper(warden) : undefined
      try {
        const row = await load(ctx, {
          ...target(),
          workload: 'metrics',
          system: 'warden',
          name: metricsCase.name,
          cluster: warden.label,
          connections: CONNECTIONS,
          durationS: ctx.plan.linksLoadS,
          record: false,
        })
        rows.get(metricsCase.key)!.push(row)
      } finally {
        await scraper?.stop()
      }
      if (scraper !== undefined) {
        if (scraper.failure !== undefined) throw new Error(`metrics: a scrape failed: ${scraper.failure}`)
        scrapes += scraper.scrapes
        scrapeBytes += scraper.bytes
      }
    }
  }

  const none = rows.get('none')!
  const scraped = rows.get('scraped')!
  const rpsNone = median(none.map((row) => row.rps))
  const rpsScraped = median(scraped.map((row) => row.rps))
  const costPct = rpsNone > 0 ? Math.round((1 - rpsScraped / rpsNone) * 1000) / 10 : 0
  const p99None = median(none.map((row) => row.p99Ms))
  const p99Scraped = median(scraped.map((row) => row.p99Ms))
  for (const metricsCase of CASES) {
    const caseRows = rows.get(metricsCase.key)!
    const medianRow = [...caseRows].sort((a, b) => a.rps - b.rps)[Math.floor((caseRows.length - 1) / 2)]!
    const scrapedNote =
      metricsCase.key === 'scraped'
        ? `; ${scrapes} scrapes of ${Math.round(scrapeBytes / Math.max(1, scrapes))} bytes; throughput ${costPct >= 0 ? `${costPct}% below` : `${-costPct}% above`} no scrape, p99 ${p99Scraped} ms against ${p99None} ms`
        : ''
    ctx.results.rows.push({
      workload: medianRow.workload,
      system: medianRow.system,
      name: medianRow.name,
      cluster: medianRow.cluster,
      connections: medianRow.connections,
      processes: medianRow.processes,
      rps: median(caseRows.map((row) => row.rps)),
      p50Ms: median(caseRows.map((row) => row.p50Ms)),
      p99Ms: median(caseRows.map((row) => row.p99Ms)),
      errors: caseRows.reduce((sum, row) => sum + row.errors, 0),
      note: `median of ${caseRows.length} interleaved rounds of ${ctx.plan.linksLoadS} s (req/s ${caseRows.map((row) => row.rps).join(', ')})${scrapedNote}`,
    })
  }
  ctx.progress.note(`metrics: writes scraped each second ${rpsScraped} req/s against ${rpsNone} without (${costPct}% cost; p99 ${p99Scraped} ms against ${p99None} ms), ${scrapes} scrapes`)
}
