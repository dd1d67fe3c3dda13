/**
 * Workload 5, blocking queries: 10,000 waiting on one node, then one write; how long until all have answered, and
 * how much the node's RSS grew for them. The driver (blocking-driver.ts) runs in its own process started through
 * bash with `ulimit -n` raised, since it holds one socket per query; the node inherits this process's limit, which
 * main.ts raises the same way before it starts anything.
 */
import { join } from 'node:path'
import { TSX_LOADER } from './cannon.js'
import { runTracked } from './children.js'
import type { BenchContext } from './context.js'
import { UsageMonitor } from './procfs.js'
import type { BlockingSummary } from './results.js'
import type { WardenCluster } from './warden.js'

/** Raise the soft limit to 65536, or as far as the hard limit allows when that is lower. */
export const RAISE_ULIMIT = 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"'

export async function wardenBlocking(ctx: BenchContext, warden: WardenCluster): Promise<void> {
  const count = ctx.plan.blockingQueries
  ctx.progress.step(`blocking: ${count} queries waiting on one node, then a write`)
  const node = warden.leader
  const spec = { address: warden.address(node), token: warden.token, count, pid: warden.pid(node) }
  const script = join(import.meta.dirname, 'blocking-driver.ts')
  const env = { ...process.env }
  delete env.NODE_OPTIONS
  const monitor = new UsageMonitor(warden.watched()).start()
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
  ctx.results.blocking = summary
  if (summary.answeredBeforeWrite > 0) ctx.progress.note(`  blocking: ${summary.answeredBeforeWrite} queries answered before the write (statuses ${JSON.stringify(summary.statuses)})`)
  ctx.results.rows.push({
    workload: 'blocking',
    system: 'warden',
    name: `${count} blocking queries released by one write`,
    cluster: warden.label,
    connections: count,
    rps: summary.releasedMs > 0 ? Math.round((summary.answered / summary.releasedMs) * 1000) : 0,
    p50Ms: summary.medianAnswerMs,
    p99Ms: summary.releasedMs,
    errors: summary.queries - (summary.statuses['200'] ?? 0),
    processes,
    note: `answers/s while releasing; p99 column is the last answer; RSS +${summary.rssGrowthMb} MB for the waiting queries`,
  })
}
