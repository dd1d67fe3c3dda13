/**
 * `npm run bench`: warden's benchmark (issue 8). Starts its own clusters on loopback (one node; three nodes with data
 * dirs on disk, default settings, fsync on) through cluster/lib.ts, loads them with autocannon run as its own process
 * (and small drivers of its own where autocannon cannot express the load), prints a table, and writes
 * scripts/bench/results/<date>.json and .svg; a full run (no --quick, no --only) also writes latest.json and
 * latest.svg, the two files that are committed. `--compare etcd` runs the same loads against a three-member etcd;
 * its write comparison (issue 22) alternates warden's loads and etcd's round by round (workload-writes-vs-etcd.ts).
 *
 * Phases run one system at a time, so that an idle cluster never takes CPU from the one being measured (except the
 * links workload, whose four clusters run side by side so that its cases can be interleaved, and the write
 * comparison with etcd, whose two clusters run side by side so that their loads can alternate; both report what the
 * idle ones took); every process started is stopped at the end, on failure and on Ctrl-C (children.ts).
 *
 * The replication workload (--only replication, never in the default run) starts a federation of two datacenters of
 * three nodes each (workload-replication.ts).
 *
 *   npm run bench -- [--quick] [--only writes,reads] [--scale [N]] [--compare etcd] [--profile DIR] [--markdown] [--rounds N]
 */
import { execFileSync, spawn } from 'node:child_process'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { cpus, release, tmpdir, totalmem } from 'node:os'
import { join, resolve } from 'node:path'
import { existsSync } from 'node:fs'
import { killEverythingNow, runTracked, stopEverything } from './children.js'
import type { BenchContext } from './context.js'
import { EtcdCluster, findEtcd } from './etcd.js'
import { parseOptions, planFor, selected, USAGE, UsageError, type Options, type Plan } from './options.js'
import { Progress } from './progress.js'
import { computeRatios, evaluateTargets, renderMarkdown, renderSummary, renderSvg, renderTable } from './report.js'
import type { Machine, Results } from './results.js'
import { WardenCluster, WardenFederation, type StartOptions } from './warden.js'
import { wardenAuthorized } from './workload-authorized.js'
import { holdBaseline, RAISE_ULIMIT, wardenBlocking } from './workload-blocking.js'
import { wardenCas } from './workload-cas.js'
import { etcdFailoverTarget, failoverRounds, wardenFailoverTarget } from './workload-failover.js'
import { wardenLinks } from './workload-links.js'
import { wardenMetrics } from './workload-metrics.js'
import { wardenUi } from './workload-ui.js'
import { etcdRanges, koaBaseline, wardenReads } from './workload-reads.js'
import { PRIMARY, SECONDARY, wardenReplication } from './workload-replication.js'
import { wardenScale } from './workload-scale.js'
import { countFsyncs, singleNodeWrites, tokenRecordBytes, wardenWrites } from './workload-writes.js'
import { writesVsEtcd } from './workload-writes-vs-etcd.js'

const REPO_ROOT = resolve(import.meta.dirname, '..', '..')
const RESULTS_DIR = join(import.meta.dirname, 'results')
const AGENT_CLI = join(REPO_ROOT, 'dist', 'cli', 'main.js')
/** A token record's size when no warden cluster was started in this run (about what one with a policy link is). */
const DEFAULT_VALUE_BYTES = 400
/** The agents inherit this process's open-file limit and must hold 10,000 blocking queries (plus their own files). */
const OPEN_FILES_WANTED = 16_384

/**
 * Runs this script again under a raised open-file limit when the current one is too low for the blocking workload:
 * Node cannot raise its own limit, and the agents, started by this process, inherit it.
 */
async function reexecWithRaisedLimit(): Promise<number | undefined> {
  if (process.env.WARDEN_BENCH_ULIMIT_RAISED === '1') return undefined
  const current = Number(execFileSync('bash', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim())
  if (!(current < OPEN_FILES_WANTED)) return undefined
  const child = spawn('bash', ['-c', `${RAISE_ULIMIT}; exec "$0" "$@"`, process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, WARDEN_BENCH_ULIMIT_RAISED: '1' },
  })
  // The child does the cleaning up; this process only passes signals on and waits for it.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => child.kill(signal))
  return new Promise((resolveCode) => child.once('exit', (code) => resolveCode(code ?? 1)))
}

function machine(): Machine {
  const cpuInfo = existsSync('/proc/cpuinfo') ? execFileSync('cat', ['/proc/cpuinfo'], { encoding: 'utf8' }) : ''
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuInfo)?.[1]?.trim() ?? cpus()[0]?.model ?? 'unknown'
  const etcd = findEtcd()
  return {
    cpu: model,
    cores: cpus().length,
    memoryGb: Math.round(totalmem() / 1024 ** 3),
    node: process.version,
    kernel: release(),
    ...(etcd === undefined ? {} : { etcd: etcd.version }),
  }
}

function commit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim()
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim() !== ''
    return dirty ? `${head} + uncommitted src changes` : head
  } catch {
    return 'unknown'
  }
}

function estimateSteps(options: Options, plan: Plan): number {
  let steps = 0
  if (selected(options, 'resolve')) steps += 1
  if (selected(options, 'writes')) steps += 2 + plan.writeConnections.length * 2 + 1 + 1
  if (selected(options, 'reads')) steps += 7
  if (selected(options, 'authorized')) steps += 3
  if (selected(options, 'cas')) steps += 1
  if (selected(options, 'blocking')) steps += 2
  if (selected(options, 'failover')) steps += plan.failoverRounds + 2
  if (selected(options, 'links')) steps += 4 + 2 + plan.linksRounds * 6
  if (selected(options, 'metrics')) steps += 2 + plan.linksRounds * 2
  if (selected(options, 'ui')) steps += 2
  if (options.scale !== undefined) steps += 6
  if (selected(options, 'replication')) steps += 8
  if (options.compareEtcd && selected(options, 'writes')) steps += 2 + 2 + plan.compareRounds * 6
  if (options.compareEtcd && (selected(options, 'reads') || selected(options, 'failover'))) steps += 1 + 5 + plan.failoverRounds
  return steps + 4 // cluster starts
}

async function startWarden(ctx: BenchContext, label: string, nodes: number, extra: Pick<StartOptions, 'tls' | 'args'> = {}): Promise<WardenCluster> {
  ctx.progress.step(`starting ${label}`)
  const warden = await WardenCluster.start(label, nodes, {
    ...(ctx.options.profileDir === undefined ? {} : { profileDir: ctx.options.profileDir }),
    viaProxy: ctx.options.viaProxy,
    ...extra,
  })
  if (nodes === 3 && ctx.valueBytes === DEFAULT_VALUE_BYTES) ctx.valueBytes = await tokenRecordBytes(warden)
  return warden
}

async function runResolve(ctx: BenchContext): Promise<void> {
  ctx.progress.step(`resolve: token-resolution microbenchmark (${ctx.plan.resolveTokens} tokens)`)
  const tsx = join(REPO_ROOT, 'node_modules', '.bin', 'tsx')
  const { stdout } = await runTracked(tsx, [join(import.meta.dirname, 'token-resolution.ts'), '--tokens', String(ctx.plan.resolveTokens)], { cwd: REPO_ROOT })
  const line = stdout.split('\n').find((candidate) => candidate.startsWith('{'))
  if (line === undefined) throw new Error(`token-resolution.ts printed no JSON: ${stdout}`)
  const parsed = JSON.parse(line) as { tokens: number; checkNsPerCall: number; cachedResolvePlusCheckNs: number }
  ctx.results.tokenResolution = { tokens: parsed.tokens, checkNsPerCall: parsed.checkNsPerCall, cachedResolvePlusCheckNs: parsed.cachedResolvePlusCheckNs }
}

/**
 * Runs one workload; a failure is reported and recorded, and the run goes on with the next workload (a long run
 * should not lose every figure to one). Cluster start failures are not guarded: nothing could run on them.
 */
async function guard(ctx: BenchContext, name: string, run: () => Promise<void>): Promise<void> {
  try {
    await run()
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    ctx.results.skipped.push(`${name} failed: ${message.split('\n')[0] ?? ''}`)
    ctx.progress.note(`${name} failed: ${error instanceof Error ? (error.stack ?? message) : message}`)
  }
}

async function runPhases(ctx: BenchContext): Promise<void> {
  const { options } = ctx
  if (selected(options, 'resolve')) await guard(ctx, 'resolve', () => runResolve(ctx))
  if (selected(options, 'reads')) await guard(ctx, 'koa baseline', () => koaBaseline(ctx))

  if (['writes', 'reads', 'authorized', 'cas'].some((name) => selected(options, name as 'writes')) || options.compareEtcd) {
    const three = await startWarden(ctx, 'warden ×3', 3)
    if (selected(options, 'writes')) await guard(ctx, 'writes', () => wardenWrites(ctx, three))
    if (selected(options, 'reads')) await guard(ctx, 'reads', () => wardenReads(ctx, three))
    if (selected(options, 'authorized')) await guard(ctx, 'authorized', () => wardenAuthorized(ctx, three))
    if (selected(options, 'cas')) await guard(ctx, 'cas', () => wardenCas(ctx, three))
    // Last on this cluster: strace slows the nodes, and they keep nothing of it once detached, but nothing should
    // follow a disturbance in the same processes.
    if (selected(options, 'writes')) await guard(ctx, 'fsyncs per write', () => countFsyncs(ctx, three))
    await three.stop()
  }

  if (selected(options, 'writes') || selected(options, 'blocking')) {
    const one = await startWarden(ctx, 'warden ×1', 1)
    if (selected(options, 'writes')) await guard(ctx, 'writes (single node)', () => singleNodeWrites(ctx, one))
    if (selected(options, 'blocking')) await guard(ctx, 'blocking', () => wardenBlocking(ctx, one))
    await one.stop()
    // After warden's cluster has stopped, so that it takes no CPU from the yardstick.
    if (selected(options, 'blocking')) await guard(ctx, 'blocking (bare node:http)', () => holdBaseline(ctx, 'http'))
    if (selected(options, 'blocking')) await guard(ctx, 'blocking (bare Koa)', () => holdBaseline(ctx, 'koa'))
  }

  if (selected(options, 'failover')) {
    const fresh = await startWarden(ctx, 'warden ×3 (failover)', 3)
    await guard(ctx, 'failover', () => failoverRounds(ctx, wardenFailoverTarget(fresh), ctx.plan.failoverRounds))
    await fresh.stop()
  }

  if (selected(options, 'links')) {
    // Four clusters at once, loaded in turn (workload-links.ts): the idle ones only exchange heartbeats and compact.
    const sealed = await startWarden(ctx, 'warden ×3 sealed links', 3)
    const tls = await startWarden(ctx, 'warden ×3 TLS links', 3, { tls: true })
    const unsealed = await startWarden(ctx, 'warden ×3 unsealed links', 3, { args: ['--unsealed-peer-links-for-benchmark'] })
    const tlsHttps = await startWarden(ctx, 'warden ×3 TLS links, HTTPS', 3, { tls: true })
    await guard(ctx, 'links', () => wardenLinks(ctx, { sealed, tls, unsealed, tlsHttps }))
    for (const warden of [sealed, tls, unsealed, tlsHttps]) await warden.stop()
  }

  if (selected(options, 'metrics')) {
    // Writes with every node scraped each second against none, interleaved (workload-metrics.ts).
    const scraped = await startWarden(ctx, 'warden ×3 (metrics)', 3)
    await guard(ctx, 'metrics', () => wardenMetrics(ctx, scraped))
    await scraped.stop()
  }

  if (selected(options, 'ui')) {
    // The web UI in Chromium (workload-ui.ts); skipped with a note where there is none.
    const ui = await startWarden(ctx, 'warden ×3 (ui)', 3)
    await guard(ctx, 'ui', () => wardenUi(ctx, ui))
    await ui.stop()
  }

  const scale = options.scale
  if (scale !== undefined && selected(options, 'scale')) {
    const fresh = await startWarden(ctx, 'warden ×3 (scale)', 3)
    await guard(ctx, 'scale', () => wardenScale(ctx, fresh, scale))
    await fresh.stop()
  }

  if (selected(options, 'replication')) {
    ctx.progress.step(`starting warden ${PRIMARY}+${SECONDARY} (replication)`)
    const federation = await WardenFederation.start(`warden ${PRIMARY}+${SECONDARY} ×3`, [PRIMARY, SECONDARY], 3, {
      ...(options.profileDir === undefined ? {} : { profileDir: options.profileDir }),
      viaProxy: options.viaProxy,
    })
    await guard(ctx, 'replication', () => wardenReplication(ctx, federation))
    await federation.stop()
  }

  if (options.compareEtcd) {
    const etcdBinary = findEtcd()
    if (etcdBinary === undefined) {
      ctx.results.skipped.push('--compare etcd: etcd is not installed (Debian: apt-get install etcd-server)')
      ctx.progress.note('etcd is not installed: skipping the comparison (Debian: apt-get install etcd-server)')
      return
    }
    if (selected(options, 'writes')) await compareWrites(ctx, etcdBinary.path)
    if (!selected(options, 'reads') && !selected(options, 'failover')) return
    ctx.progress.step('starting etcd ×3')
    const etcd = await EtcdCluster.start(etcdBinary.path, 3)
    if (selected(options, 'reads')) await guard(ctx, 'etcd ranges', () => etcdRanges(ctx, etcd))
    if (selected(options, 'failover')) await guard(ctx, 'etcd failover', () => failoverRounds(ctx, etcdFailoverTarget(etcd, ctx.valueBytes), ctx.plan.failoverRounds))
    await etcd.stop()
  }
}

/**
 * Issue 22's write comparison on clusters of its own, started empty side by side and kept through every round
 * (workload-writes-vs-etcd.ts says why), so that neither carries what other workloads wrote.
 */
async function compareWrites(ctx: BenchContext, etcdBinary: string): Promise<void> {
  const warden = await startWarden(ctx, 'warden ×3 (vs etcd)', 3)
  ctx.progress.step('starting etcd ×3')
  const etcd = await EtcdCluster.start(etcdBinary, 3)
  await guard(ctx, 'writes vs etcd', () => writesVsEtcd(ctx, warden, etcd))
  await etcd.stop()
  await warden.stop()
}

/** Rows grouped by workload in the order the workloads are listed, warden before etcd within each. */
function sortRows(results: Results): void {
  const order = ['writes', 'reads', 'authorized', 'cas', 'blocking', 'links', 'metrics', 'scale', 'replication']
  const systemOrder = ['warden', 'etcd', 'koa', 'node']
  results.rows = results.rows
    .map((row, position) => ({ row, position }))
    .sort((a, b) => order.indexOf(a.row.workload) - order.indexOf(b.row.workload) || systemOrder.indexOf(a.row.system) - systemOrder.indexOf(b.row.system) || a.position - b.position)
    .map(({ row }) => row)
}

async function writeResults(results: Results, options: Options): Promise<string[]> {
  await mkdir(RESULTS_DIR, { recursive: true })
  const stamp = results.date.replace(/[:.]/g, '-')
  const json = `${JSON.stringify(results, null, 2)}\n`
  const svg = renderSvg(results)
  const written = [join(RESULTS_DIR, `${stamp}.json`), join(RESULTS_DIR, `${stamp}.svg`)]
  await writeFile(written[0]!, json)
  await writeFile(written[1]!, svg)
  // Only a full run replaces the committed figures: a smoke run or a single workload would overwrite them with less.
  if (!options.quick && options.only === undefined) {
    await writeFile(join(RESULTS_DIR, 'latest.json'), json)
    await writeFile(join(RESULTS_DIR, 'latest.svg'), svg)
    written.push(join(RESULTS_DIR, 'latest.json'), join(RESULTS_DIR, 'latest.svg'))
  }
  return written
}

async function main(): Promise<number> {
  let options: Options
  try {
    options = parseOptions(process.argv.slice(2))
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`bench: ${error.message}\n${USAGE}\n`)
      return 2
    }
    throw error
  }
  if (!existsSync(AGENT_CLI)) {
    process.stderr.write(`bench: ${AGENT_CLI} is missing: run npm run build first\n`)
    return 1
  }
  if (options.profileDir !== undefined) {
    options.profileDir = resolve(options.profileDir)
    await mkdir(options.profileDir, { recursive: true })
  }
  const plan = planFor(options)
  const progress = new Progress(estimateSteps(options, plan))
  const results: Results = {
    date: new Date().toISOString(),
    machine: machine(),
    commit: commit(),
    options: { ...options, only: options.only === undefined ? undefined : [...options.only], plan },
    elapsedS: 0,
    rows: [],
    failover: [],
    ratios: [],
    targets: [],
    skipped: [],
  }
  const workDir = await mkdtemp(join(tmpdir(), 'warden-bench-work-'))
  const ctx: BenchContext = { options, plan, results, progress, workDir, valueBytes: DEFAULT_VALUE_BYTES }
  const startedAt = performance.now()
  let stopping = false
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) return // A second Ctrl-C while stopping: the exit hook kills whatever is left.
    stopping = true
    progress.finish()
    process.stderr.write(`bench: ${signal}: stopping every process it started…\n`)
    stopEverything()
      .catch((error: unknown) => process.stderr.write(`bench: ${error instanceof Error ? error.message : String(error)}\n`))
      .finally(() => {
        void rm(workDir, { recursive: true, force: true }).finally(() => process.exit(130))
      })
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  process.on('SIGHUP', onSignal)
  process.on('exit', killEverythingNow)
  try {
    await runPhases(ctx)
  } catch (error) {
    progress.finish()
    process.stderr.write(`bench: failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    await stopEverything().catch((stopError: unknown) => process.stderr.write(`bench: ${String(stopError)}\n`))
    await rm(workDir, { recursive: true, force: true })
    return 1
  }
  progress.finish()
  await stopEverything()
  await rm(workDir, { recursive: true, force: true })
  results.elapsedS = Math.round((performance.now() - startedAt) / 1000)
  sortRows(results)
  results.ratios = computeRatios(results)
  results.targets = evaluateTargets(results)
  const written = await writeResults(results, options)
  const { machine: host } = results
  process.stdout.write(`\nwarden benchmark, ${results.date}, commit ${results.commit}\n${host.cpu}, ${host.cores} cores, ${host.memoryGb} GB, Node ${host.node}, Linux ${host.kernel}${host.etcd === undefined ? '' : `, etcd ${host.etcd}`}; ${results.elapsedS} s\n\n`)
  process.stdout.write(`${renderTable(results)}\n\n${renderSummary(results)}\n\n`)
  if (options.markdown) process.stdout.write(`${renderMarkdown(results)}\n\n`)
  process.stdout.write(`written: ${written.map((path) => path.slice(REPO_ROOT.length + 1)).join(', ')}\n`)
  if (options.profileDir !== undefined) process.stdout.write(`profiles: ${options.profileDir} (summarize: npx tsx scripts/bench/profile-top.ts ${options.profileDir}/*.cpuprofile)\n`)
  return 0
}

const reexecuted = await reexecWithRaisedLimit()
// process.exit: keep-alive sockets and the like must not hold the process; every child is stopped by now.
process.exit(reexecuted ?? (await main()))
