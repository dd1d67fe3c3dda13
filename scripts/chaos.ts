/**
 * `npm run chaos -- --duration 60s --seed N [--out FILE] [--nodes 3] [--clients 8] [--keep]`: a seeded chaos run
 * against a fresh local cluster (scripts/chaos/run.ts does the work). With `--datacenters 2`, against a fresh
 * two-datacenter federation instead (scripts/chaos/federation.ts, docs/chaos-datacenters.md). Prints what it checked and the failover
 * figures, writes the whole result with the history as JSON (default scripts/chaos/results/<date>.json), and exits
 * 0 only when every check passed: 1 when a check failed or the run broke, 2 on a usage error, 130 when interrupted.
 *
 * Ctrl-C stops the run, stops the cluster and still writes the result; a second Ctrl-C kills the cluster's
 * processes at once. Whatever way this process exits, no node it started outlives it.
 */
import { randomInt } from 'node:crypto'
import { mkdir, writeFile } from 'node:fs/promises'
import { dirname, join, relative, resolve } from 'node:path'
import { parseDuration } from '../src/lib/duration.js'
import { killClusterSync } from './chaos/cleanup.js'
import { runFederationChaos, type FederationResult } from './chaos/federation.js'
import { runChaos, type ChaosChecks, type ChaosResult } from './chaos/run.js'

const USAGE = `usage: npm run chaos -- --duration 60s --seed N [--out FILE] [--nodes 3] [--clients 8] [--keep] [--datacenters 2]
  --duration DUR   how long the workload and the faults run (Go duration: 60s, 2m)
  --seed N         the seed of every choice (decimal or 0x hex, below 2^32); a random one when absent
  --out FILE       the JSON result (default scripts/chaos/results/<date>.json)
  --nodes N        cluster size, 3 to 9 (default 3); at most a minority is ever broken at once
  --clients N      concurrent clients (default 8)
  --keep           keep the cluster's data and logs even when every check passes
  --datacenters 2  run against a federation instead: dc1 primary, dc2 secondary, --nodes each (default 3),
                   --clients per datacenter (default 4); WAN partitions besides the faults in each datacenter`

class UsageError extends Error {}

interface Arguments {
  durationMs: number
  seed: number
  out: string
  nodes: number
  clients: number
  keep: boolean
  /** 1: one cluster (today's run); 2: a federation. */
  datacenters: number
}

function parseArguments(argv: string[]): Arguments {
  const parsed: Partial<Arguments> = { nodes: 3, keep: false, datacenters: 1 }
  for (let position = 0; position < argv.length; position += 1) {
    const argument = argv[position]!
    const value = (): string => {
      const next = argv[position + 1]
      if (next === undefined) throw new UsageError(`${argument}: needs a value`)
      position += 1
      return next
    }
    switch (argument) {
      case '--duration': {
        const text = value()
        const ms = parseDuration(text)
        if (ms === undefined || ms < 1_000) throw new UsageError(`--duration: a Go duration of at least 1s, not ${JSON.stringify(text)}`)
        parsed.durationMs = ms
        break
      }
      case '--seed': {
        const text = value()
        const seed = /^0x[0-9a-f]+$/i.test(text) ? Number.parseInt(text.slice(2), 16) : /^\d+$/.test(text) ? Number(text) : NaN
        if (!Number.isSafeInteger(seed) || seed >= 2 ** 32) throw new UsageError(`--seed: an integer from 0 to 2^32-1, not ${JSON.stringify(text)}`)
        parsed.seed = seed
        break
      }
      case '--out':
        parsed.out = resolve(value())
        break
      case '--nodes':
        parsed.nodes = integer(argument, value(), 3, 9)
        break
      case '--clients':
        parsed.clients = integer(argument, value(), 1, 64)
        break
      case '--keep':
        parsed.keep = true
        break
      case '--datacenters':
        parsed.datacenters = integer(argument, value(), 1, 2)
        break
      default:
        throw new UsageError(`unknown argument ${argument}`)
    }
  }
  if (parsed.durationMs === undefined) throw new UsageError('--duration is required')
  const stamp = new Date().toISOString().replace(/:/g, '-').replace(/\.\d+Z$/, 'Z')
  return {
    durationMs: parsed.durationMs,
    seed: parsed.seed ?? randomInt(0, 2 ** 32),
    out: parsed.out ?? resolve(import.meta.dirname, 'chaos', 'results', `${stamp}.json`),
    nodes: parsed.nodes!,
    clients: parsed.clients ?? (parsed.datacenters === 2 ? 4 : 8),
    keep: parsed.keep!,
    datacenters: parsed.datacenters!,
  }
}

function integer(flag: string, text: string, low: number, high: number): number {
  const value = Number(text)
  if (!/^\d+$/.test(text) || value < low || value > high) throw new UsageError(`${flag}: an integer from ${low} to ${high}, not ${JSON.stringify(text)}`)
  return value
}

/** Kills, pauses and partitions (and how many hit the leader), then the fault actions that failed. */
function faultLine(events: ChaosResult['faults']): string {
  const faults = events.filter((event) => ['kill', 'pause', 'partition'].includes(event.action))
  const describe = (action: string): string => {
    const matching = faults.filter((event) => event.action === action)
    return `${matching.length} ${action} (${matching.filter((event) => event.wasLeader === true).length} of the leader)`
  }
  return `${['kill', 'pause', 'partition'].map(describe).join(', ')}; failed actions: ${events.filter((event) => event.error !== undefined).length}`
}

function summary(result: ChaosResult): string[] {
  const lines: string[] = []
  const { byKind, byMode, total } = result.operations
  lines.push(`seed ${result.seed}, ${result.nodes} nodes, ${result.clients} clients, ${(result.durationMs / 1000).toFixed(0)} s; ${total} operations`)
  for (const [kind, counts] of Object.entries(byKind)) lines.push(`  ${kind.padEnd(14)} ok ${counts.ok}, failed ${counts.failed}, unknown ${counts.unknown}`)
  lines.push(`  reads answered by mode: ${Object.entries(byMode).map(([mode, count]) => `${mode} ${count}`).join(', ')}`)
  lines.push(`faults: ${faultLine(result.faults)}`)
  const failover = result.failover
  lines.push(
    failover.samplesMs.length === 0
      ? `failover: no leader kill or pause was followed by a write (${failover.faults} leader faults)`
      : `failover (leader kill or pause to the next acknowledged write, ${failover.samplesMs.length} of ${failover.faults}): min ${failover.minMs} ms, median ${failover.medianMs} ms, max ${failover.maxMs} ms`,
  )
  const checks = result.checks
  if (checks !== undefined) {
    lines.push(`checks:`)
    lines.push(...checkLines(checks, '  '))
  }
  if (result.error !== undefined) lines.push(`run error: ${result.error}`)
  if (result.root !== undefined) lines.push(`cluster data and node logs kept in ${result.root}`)
  lines.push(result.interrupted ? 'INTERRUPTED' : result.passed ? 'PASSED' : `FAILED; replay: ${result.replay}`)
  return lines
}

const mark = (passed: boolean): string => (passed ? 'pass' : 'FAIL')

function checkLines(checks: ChaosChecks, indent: string): string[] {
  const lines: string[] = []
  {
    lines.push(`  ${mark(checks.acknowledgedWrites.passed)}  acknowledged writes present at the end (${checks.acknowledgedWrites.keys} keys)`)
    const linearizable = checks.linearizable
    lines.push(
      `  ${mark(linearizable.passed)}  linearizable per key: ${linearizable.outcome} (${linearizable.partitions} keys: ${linearizable.byOutcome.ok} ok, ${linearizable.byOutcome.illegal} illegal, ${linearizable.byOutcome.unknown} unknown; ${linearizable.operations} operations in ${linearizable.elapsedMs} ms)`,
    )
    lines.push(`  ${mark(checks.staleReads.passed)}  stale reads show only written values (${checks.staleReads.checked} stale reads)`)
    lines.push(`  ${mark(checks.versions.passed)}  config versions agree across nodes and modes (${checks.versions.versions} versions)`)
    lines.push(`  ${mark(checks.convergence.passed)}  every node converges once healed (${checks.convergence.elapsedMs} ms)`)
    lines.push(`  ${mark(checks.faults.passed)}  every fault took effect (${checks.faults.faults} faults; partitioned nodes cut off)`)
    for (const check of Object.values(checks)) for (const problem of check.problems) lines.push(problem.replace(/^/gm, '    '))
  }
  // Written for the single run's indent of two; a datacenter's checks go further in.
  const extra = indent.slice(2)
  return extra === '' ? lines : lines.map((line) => line.replace(/^/gm, extra))
}

function federationSummary(result: FederationResult): string[] {
  const lines: string[] = []
  lines.push(
    `seed ${result.seed}, ${result.datacenters.join(' + ')} (${result.nodes} nodes, ${result.clients} clients each), ${(result.durationMs / 1000).toFixed(0)} s; ${result.operations.total} operations`,
  )
  for (const report of Object.values(result.perDatacenter)) {
    lines.push(`${report.datacenter}: ${report.operations.total} operations; ${report.foreignLocalReads} lookups of the other datacenter's local tokens`)
    for (const [kind, counts] of Object.entries(report.operations.byKind)) lines.push(`  ${kind.padEnd(14)} ok ${counts.ok}, failed ${counts.failed}, unknown ${counts.unknown}`)
    lines.push(`  faults: ${faultLine(report.faults)}`)
    const failover = report.failover
    if (failover.samplesMs.length > 0) lines.push(`  failover (${failover.samplesMs.length} of ${failover.faults}): min ${failover.minMs} ms, median ${failover.medianMs} ms, max ${failover.maxMs} ms`)
    if (report.checks !== undefined) {
      lines.push(`  checks:`)
      lines.push(...checkLines(report.checks, '    '))
    }
  }
  lines.push(`WAN: ${result.wan.filter((event) => event.action === 'partition-dc').length} partitions of dc2; failed actions: ${result.wan.filter((event) => event.error !== undefined).length}`)
  const checks = result.checks
  if (checks !== undefined) {
    lines.push('federation checks:')
    lines.push(`  ${mark(checks.settled.passed)}  dc2 settled to dc1's state after the faults (${checks.settled.elapsedMs} ms)`)
    lines.push(`  ${mark(checks.noLostWrites.passed)}  no acknowledged write lost (${checks.noLostWrites.checked} presences: global ones in dc1 and dc2, local ones at home)`)
    lines.push(
      `  ${mark(checks.secondaryEqualsPrimary.passed)}  dc2 equals dc1 (${checks.secondaryEqualsPrimary.policies} policies, ${checks.secondaryEqualsPrimary.tokens} global tokens, ${checks.secondaryEqualsPrimary.configEntries} config entries)`,
    )
    lines.push(`  ${mark(checks.localTokensStayHome.passed)}  no local token seen outside its datacenter (${checks.localTokensStayHome.checked} looks)`)
    lines.push(`  ${mark(checks.globalTokenDuringWanPartition.passed)}  a replicated global token works in dc2 while the primary is cut off`)
    for (const attempt of checks.globalTokenDuringWanPartition.attempts) lines.push(`        ${attempt}`)
    lines.push(`  ${mark(checks.wanFaults.passed)}  every WAN partition and heal took effect at the proxies (${checks.wanFaults.faults} partitions)`)
    for (const check of Object.values(checks)) for (const problem of check.problems) lines.push(problem.replace(/^/gm, '    '))
  }
  if (result.error !== undefined) lines.push(`run error: ${result.error}`)
  if (result.root !== undefined) lines.push(`cluster data and node logs kept in ${result.root}`)
  lines.push(result.interrupted ? 'INTERRUPTED' : result.passed ? 'PASSED' : `FAILED; replay: ${result.replay}`)
  return lines
}

async function main(): Promise<number> {
  let options: Arguments
  try {
    options = parseArguments(process.argv.slice(2))
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    process.stderr.write(`chaos: ${error.message}\n${USAGE}\n`)
    return 2
  }
  const controller = new AbortController()
  let root: string | undefined
  let finished = false
  const onSignal = (): void => {
    if (!controller.signal.aborted) {
      process.stderr.write('chaos: stopping (Ctrl-C again to kill the cluster at once)\n')
      controller.abort()
      return
    }
    if (root !== undefined) killClusterSync(root)
    process.exit(130)
  }
  // Whatever ends this process before the run has stopped its cluster (an uncaught error, process.exit), the
  // cluster's processes must not outlive it.
  const onExit = (): void => {
    if (!finished && root !== undefined) killClusterSync(root)
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  process.on('exit', onExit)
  const common = {
    seed: options.seed,
    durationMs: options.durationMs,
    nodes: options.nodes,
    clients: options.clients,
    keep: options.keep,
    signal: controller.signal,
    log: (line: string) => process.stdout.write(`chaos: ${line}\n`),
    onRoot: (path: string) => {
      root = path
    },
  }
  if (options.datacenters === 2) {
    const federated = await runFederationChaos(common)
    finished = true
    await mkdir(dirname(options.out), { recursive: true })
    await writeFile(options.out, `${JSON.stringify(federated, null, 1)}\n`)
    for (const line of federationSummary(federated)) process.stdout.write(`${line}\n`)
    process.stdout.write(`result: ${relative(process.cwd(), options.out) || join('.', options.out)}\n`)
    if (federated.interrupted) return 130
    return federated.passed ? 0 : 1
  }
  const result = await runChaos({
    seed: options.seed,
    durationMs: options.durationMs,
    nodes: options.nodes,
    clients: options.clients,
    keep: options.keep,
    signal: controller.signal,
    log: (line) => process.stdout.write(`chaos: ${line}\n`),
    onRoot: (path) => {
      root = path
    },
  })
  finished = true
  await mkdir(dirname(options.out), { recursive: true })
  await writeFile(options.out, `${JSON.stringify(result, null, 1)}\n`)
  for (const line of summary(result)) process.stdout.write(`${line}\n`)
  process.stdout.write(`result: ${relative(process.cwd(), options.out) || join('.', options.out)}\n`)
  if (result.interrupted) return 130
  return result.passed ? 0 : 1
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`chaos: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exit(1)
  },
)
