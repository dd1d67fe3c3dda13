/**
 * Workload 5, blocking queries: 10,000 waiting on one node, then one write; how long until all have answered, and
 * how much the node's RSS grew for them. The driver (blocking-driver.ts) runs in its own process started through
 * bash with `ulimit -n` raised, since it holds one socket per query; the node inherits this process's limit, which
 * main.ts raises the same way before it starts anything.
 */
import { join } from 'node:path'
import { TSX_LOADER } from './cannon.js'
import { reportedPort, runTracked, spawnTracked, stopChild } from './children.js'
import type { BenchContext } from './context.js'
import { UsageMonitor } from './procfs.js'
import type { BlockingSummary, System } from './results.js'
import type { WardenCluster } from './warden.js'

/** Raise the soft limit to 65536, or as far as the hard limit allows when that is lower. */
export const RAISE_ULIMIT = 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"'

export async function wardenBlocking(ctx: BenchContext, warden: WardenCluster): Promise<void> {
  const count = ctx.plan.blockingQueries
  ctx.progress.step(`blocking: ${count} queries waiting on one node, then a write`)
  const node = warden.leader
  const { summary, processes } = await runDriver(ctx, { address: warden.address(node), token: warden.token, count, pid: warden.pid(node) }, warden.watched())
  ctx.results.blocking = summary
  pushRow(ctx, summary, processes, 'warden', warden.label, `${count} blocking queries released by one write`, 'the waiting queries')
}

/**
 * The yardsticks: a server holding the same number of requests (hold-baseline.ts), released at once. Bare node:http
 * is what Node alone costs per held request, below which no server on Node can go; Koa with one @koa/router route is
 * the floor under a server built as warden is.
 */
export async function holdBaseline(ctx: BenchContext, kind: 'http' | 'koa'): Promise<void> {
  const count = ctx.plan.blockingQueries
  const label = kind === 'http' ? 'bare node:http' : 'bare Koa + @koa/router'
  ctx.progress.step(`blocking: ${label} holding ${count} requests (yardstick)`)
  const env = { ...process.env }
  delete env.NODE_OPTIONS
  const script = join(import.meta.dirname, 'hold-baseline.ts')
  const child = spawnTracked(
    'bash',
    ['-c', `${RAISE_ULIMIT}; exec "$0" "$@"`, process.execPath, '--import', TSX_LOADER, script, kind],
    { stdio: ['ignore', 'pipe', 'inherit'], env },
    script,
  )
  try {
    const port = await reportedPort(child, 'hold-baseline')
    const pid = child.pid ?? 0
    const system = kind === 'http' ? 'node' : 'koa'
    const { summary, processes } = await runDriver(ctx, { address: `127.0.0.1:${port}`, token: '', count, pid, baseline: true }, [{ label: system, pid }])
    if (kind === 'http') ctx.results.blockingBaseline = summary
    else ctx.results.blockingKoaBaseline = summary
    const cluster = kind === 'http' ? 'node:http ×1' : 'koa ×1'
    pushRow(ctx, summary, processes, system, cluster, `${label} holding ${count} requests, released at once`, 'the held requests')
  } finally {
    await stopChild(child)
  }
}

interface DriverSpec {
  address: string
  token: string
  count: number
  pid: number
  baseline?: boolean
}

type Usage = ReturnType<UsageMonitor['stop']>

async function runDriver(ctx: BenchContext, spec: DriverSpec, watched: Array<{ label: string; pid: number }>): Promise<{ summary: BlockingSummary; processes: Usage }> {
  const script = join(import.meta.dirname, 'blocking-driver.ts')
  const env = { ...process.env }
  delete env.NODE_OPTIONS
  const monitor = new UsageMonitor(watched).start()
  let output: string
  try {
    const run = await runTracked(
      'bash',
      ['-c', `${RAISE_ULIMIT}; exec "$0" "$@"`, process.execPath, '--import', TSX_LOADER, script, JSON.stringify(spec)],
      { env },
      (pid) => monitor.add({ label: 'driver', pid }),
    )
    output = run.stdout
  } catch (error) {
    monitor.stop()
    throw error
  }
  const processes = monitor.stop()
  const summary = JSON.parse(output.trim().split('\n').at(-1) ?? '{}') as BlockingSummary & { answeredBeforeWrite: number }
  if (summary.answeredBeforeWrite > 0) ctx.progress.note(`  blocking: ${summary.answeredBeforeWrite} queries answered before the write (statuses ${JSON.stringify(summary.statuses)})`)
  return { summary, processes }
}

function pushRow(ctx: BenchContext, summary: BlockingSummary, processes: Usage, system: System, cluster: string, name: string, what: string): void {
  ctx.results.rows.push({
    workload: 'blocking',
    system,
    name,
    cluster,
    connections: summary.queries,
    rps: summary.releasedMs > 0 ? Math.round((summary.answered / summary.releasedMs) * 1000) : 0,
    p50Ms: summary.medianAnswerMs,
    p99Ms: summary.releasedMs,
    errors: summary.queries - (summary.statuses['200'] ?? 0),
    processes,
    note: `answers/s while releasing; p99 column is the last answer; RSS +${summary.rssGrowthMb} MB for ${what}`,
  })
}
