/**
 * A write's CPU, measured for a stage budget (issue 22): token creates at 64 connections to the leader (or a
 * follower) of a three-node cluster started the bench's way (WardenCluster: data dirs on disk, fsync on, direct peer
 * links), with V8's CPU profiler running in every agent over the load window only (cpu-profile-window.mjs, started and
 * stopped by SIGUSR2), and each thread's CPU from /proc/<pid>/task/*\/stat over the same window, by thread name (the
 * main thread, libuv's pool, V8's helpers, LevelDB's compaction thread). Writes into OUT:
 *   CPU.<pid>.cpuprofile   one per node (none with --no-profile)
 *   meta.json              per node: name, role, pid, profile file, CPU seconds of the main thread and of the others
 *                          (by thread name); the load's writes acknowledged (2xx), rate, p50, p99, seconds
 * and, per node and LevelDB database (each directory with a LOG), the bytes its background work wrote during the
 * load (memtable flushes and compactions, from LevelDB's LOG): what says how compaction, which runs on a thread of
 * its own, divides between the Raft log and the state.
 * Then `npx tsx scripts/bench/stage-budget.ts OUT` prints the budget per stage in µs per write.
 *
 *   npx tsx scripts/bench/stage-profile.ts OUT [--seconds S (10)] [--target leader|follower] [--connections N (64)] [--no-profile]
 *     [--interval-us N (500)] [--warmup S (3)] [--perf]
 * With --perf, `perf record -F 999 -g` samples the three agents over the same window instead of V8's profiler
 * (OUT/perf.data, and OUT/perf.txt its samples as `perf script` names them; the agents run with --perf-basic-prof, so
 * their JIT frames have names), and each agent's main thread's samples are written as CPU.<pid>.cpuprofile
 * (perf-profile.ts) for stage-budget.ts. V8's profiler on this machine puts its samples where the thread next enters
 * the kernel; perf does not. For the other threads: `perf report -i OUT/perf.data --sort tid,dso`.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { WardenClient } from '../../src/api/index.js'
import { runCannon } from './cannon.js'
import { perfProfiles } from './perf-profile.js'
import { SECONDS_PER_TICK, threadTicks } from './procfs.js'
import { jsonHeaders } from './context.js'
import { WardenCluster } from './warden.js'
import { benchPolicy } from './workload-writes.js'

/** perf's sampling rate with --perf: about one sample per millisecond of CPU. */
const PERF_HZ = 999
const HOOK = pathToFileURL(join(import.meta.dirname, 'cpu-profile-window.mjs')).href

/** Bytes written by memtable flushes and compactions between two times, from a LevelDB LOG file's lines. */
function leveldbBackgroundBytes(logFile: string, fromMs: number, toMs: number): { flushBytes: number; compactedBytes: number } {
  let flushBytes = 0
  let compactedBytes = 0
  let text = ''
  try {
    text = readFileSync(logFile, 'utf8')
  } catch {
    return { flushBytes, compactedBytes }
  }
  for (const line of text.split('\n')) {
    const when = /^(\d{4})\/(\d\d)\/(\d\d)-(\d\d):(\d\d):(\d\d)\.(\d{6})/.exec(line)
    if (when === null) continue
    const [, y, mo, d, h, mi, sec, micros] = when.map(Number) as number[]
    // LevelDB writes local time; Date's local constructor reads it back the same way.
    const ms = new Date(y ?? 0, (mo ?? 1) - 1, d, h, mi, sec, Math.floor((micros ?? 0) / 1000)).getTime()
    if (ms < fromMs || ms > toMs) continue
    const flushed = /Level-0 table #\d+: (\d+) bytes OK/.exec(line)
    if (flushed !== null) flushBytes += Number(flushed[1])
    const compacted = /Compacted .* => (\d+) bytes/.exec(line)
    if (compacted !== null) compactedBytes += Number(compacted[1])
  }
  return { flushBytes, compactedBytes }
}

/** Directories under `root` that hold a LevelDB LOG file. */
function leveldbDirs(root: string): string[] {
  const found: string[] = []
  const walk = (directory: string): void => {
    let entries: import('node:fs').Dirent[] = []
    try {
      entries = readdirSync(directory, { withFileTypes: true })
    } catch {
      return
    }
    if (entries.some((entry) => entry.isFile() && entry.name === 'LOG')) found.push(directory)
    for (const entry of entries) if (entry.isDirectory()) walk(join(directory, entry.name))
  }
  walk(root)
  return found
}

const args = process.argv.slice(2)
let out: string | undefined
let seconds = 10
let target: 'leader' | 'follower' = 'leader'
let profile = true
let intervalUs = 500
let perf = false
let warmupS = 3
let connections = 64
for (let n = 0; n < args.length; n++) {
  const arg = args[n]
  if (arg === '--seconds') seconds = Number(args[++n])
  else if (arg === '--target') target = args[++n] === 'follower' ? 'follower' : 'leader'
  else if (arg === '--no-profile') profile = false
  else if (arg === '--interval-us') intervalUs = Number(args[++n])
  else if (arg === '--perf') {
    perf = true
    profile = false
  }
  else if (arg === '--warmup') warmupS = Number(args[++n])
  else if (arg === '--connections') connections = Number(args[++n])
  else out = arg
}
if (out === undefined || !(seconds > 0)) {
  process.stderr.write('usage: stage-profile.ts OUT [--seconds S] [--target leader|follower] [--no-profile] [--interval-us N]\n')
  process.exit(2)
}
// A reader that goes away (`| head`) must not end this script before it stops its cluster (the finally below): an
// EPIPE on stdout would otherwise throw from a write and leave three agents running.
process.stdout.on('error', () => undefined)
const outDir = resolve(out)
mkdirSync(outDir, { recursive: true })

// NODE_OPTIONS reaches the agents LocalCluster spawns while it is set (cannon.ts drops it for autocannon).
const previousOptions = process.env.NODE_OPTIONS
/** The JIT maps --perf-basic-prof leaves in the temporary directory, to remove those of this run's processes after. */
const jitMaps = (): string[] => readdirSync(tmpdir()).filter((name) => /^perf-\d+\.map$/.test(name))
const jitMapsBefore = new Set(jitMaps())
if (perf) process.env.NODE_OPTIONS = `${previousOptions ?? ''} --perf-basic-prof`.trim()
if (profile) {
  process.env.NODE_OPTIONS = `${previousOptions ?? ''} --import ${HOOK}`.trim()
  process.env.WARDEN_STAGE_PROFILE_DIR = outDir
  process.env.WARDEN_STAGE_PROFILE_INTERVAL_US = String(intervalUs)
}
/** The loaded node's count of forwarded writes and of the requests that carried them (operator raft state). */
async function forwardedBy(origin: string, token: string): Promise<{ writes: number; requests: number }> {
  const state = await new WardenClient({ address: origin, token }).operator.raft.state()
  return { writes: state.ForwardedWrites, requests: state.ForwardedRequests }
}

const warden = await WardenCluster.start('stage-profile', 3)
if (previousOptions === undefined) delete process.env.NODE_OPTIONS
else process.env.NODE_OPTIONS = previousOptions
const workDir = mkdtempSync(join(tmpdir(), 'warden-stage-profile-'))
try {
  const policyId = await benchPolicy(warden)
  const request = { method: 'PUT', path: '/v1/acl/token', headers: jsonHeaders(warden.token), body: JSON.stringify({ Description: 'bench token', Policies: [{ ID: policyId }] }) }
  const node = target === 'leader' ? warden.leader : (warden.followers[0] ?? warden.leader)
  // Warm-up, as thread-cpu.ts: the JIT and LevelDB's first memtables.
  await runCannon({ origin: warden.origin(node), connections: 16, durationS: warmupS, requests: [request], workDir }, [])
  const names = warden.nodes()
  const signalAll = (): void => {
    if (profile) for (const name of names) process.kill(warden.pid(name), 'SIGUSR2')
  }
  let perfChild: ChildProcess | undefined
  if (perf) {
    perfChild = spawn('perf', ['record', '-F', String(PERF_HZ), '-g', '-o', join(outDir, 'perf.data'), '-p', names.map((name) => warden.pid(name)).join(',')], { stdio: 'ignore' })
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
  const forwardedBefore = await forwardedBy(warden.origin(node), warden.token)
  const before = new Map(names.map((name) => [name, threadTicks(warden.pid(name))]))
  const windowStartMs = Date.now()
  signalAll()
  const { result, usage } = await runCannon({ origin: warden.origin(node), connections, durationS: seconds, requests: [request], workDir }, warden.watched())
  // Read before the profiler stops: its sampling thread (v8:ProfEvntProc) ends with it, and is reported apart.
  const after = new Map(names.map((name) => [name, threadTicks(warden.pid(name))]))
  const windowEndMs = Date.now()
  signalAll()
  const forwardedAfter = await forwardedBy(warden.origin(node), warden.token)
  if (perfChild !== undefined) {
    const exited = new Promise((resolve) => perfChild?.once('exit', resolve))
    perfChild.kill('SIGINT')
    await exited
  }
  const nodes = names.map((name) => {
    const pid = warden.pid(name)
    const dataDir = warden.cluster.state().nodes[name]?.dataDir ?? ''
    let mainTicks = 0
    const otherTicks: Record<string, number> = {}
    for (const [tid, thread] of after.get(name) ?? []) {
      const spent = thread.ticks - (before.get(name)?.get(tid)?.ticks ?? 0)
      if (tid === pid) mainTicks += spent
      else otherTicks[thread.name] = (otherTicks[thread.name] ?? 0) + spent
    }
    return {
      name,
      role: name === warden.leader ? 'leader' : 'follower',
      loaded: name === node,
      pid,
      profile: profile || perf ? `CPU.${pid}.cpuprofile` : undefined,
      mainCpuS: mainTicks * SECONDS_PER_TICK,
      otherCpuS: Object.fromEntries(Object.entries(otherTicks).map(([threadName, ticks]) => [threadName, ticks * SECONDS_PER_TICK])),
      leveldb: Object.fromEntries(
        leveldbDirs(dataDir).map((directory) => [relative(dataDir, directory), leveldbBackgroundBytes(join(directory, 'LOG'), windowStartMs, windowEndMs + 2_000)]),
      ),
    }
  })
  const load = usage.find((entry) => entry.label === 'autocannon')
  const meta = {
    when: new Date().toISOString(),
    loadavg: readFileSync('/proc/loadavg', 'utf8').trim(),
    target,
    connections,
    seconds: result.durationS,
    warmupS,
    writes: result.ok,
    rps: result.rps,
    p50Ms: result.p50Ms,
    p99Ms: result.p99Ms,
    errors: result.errors,
    loadCpuPercent: load?.cpuPercent,
    // Writes a follower forwarded to the leader over the window, and in how many requests (its batches per turn).
    forwarded: { writes: forwardedAfter.writes - forwardedBefore.writes, requests: forwardedAfter.requests - forwardedBefore.requests },
    profiled: profile || perf,
    profiler: perf ? 'perf' : profile ? 'v8' : undefined,
    intervalUs: profile ? intervalUs : undefined,
    nodes,
  }
  writeFileSync(join(outDir, 'meta.json'), `${JSON.stringify(meta, null, 2)}\n`)
  if (perf) {
    // Read while the agents' JIT maps (/tmp/perf-PID.map) are there; they are removed after.
    const script = execFileSync('perf', ['script', '-F', 'pid,tid,ip,sym', '-i', join(outDir, 'perf.data')], { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] }).toString()
    // Kept as text too: with the maps gone, perf.data alone no longer names the JIT frames.
    writeFileSync(join(outDir, 'perf.txt'), script)
    const profiles = perfProfiles(script, PERF_HZ)
    for (const entry of nodes) {
      const sampled = profiles.get(entry.pid)
      if (sampled !== undefined) writeFileSync(join(outDir, entry.profile ?? ''), JSON.stringify(sampled))
    }
    // The agents' and those of the processes that started the cluster (each some 500 KB).
    for (const name of jitMaps()) if (!jitMapsBefore.has(name)) rmSync(join(tmpdir(), name), { force: true })
  }
  if (profile) {
    // The agents write their profiles as they handle the second signal.
    const deadline = Date.now() + 10_000
    while (!nodes.every((entry) => existsSync(join(outDir, entry.profile ?? ''))) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  process.stdout.write(`token create → ${target}, ${connections} conn, ${result.durationS} s: ${result.ok} writes, ${result.rps}/s, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, errors ${result.errors}; load ${meta.loadavg}\n`)
  for (const entry of nodes) {
    const other = Object.values(entry.otherCpuS).reduce((sum, value) => sum + value, 0)
    const perWrite = (cpuS: number): number => Math.round((cpuS / Math.max(1, result.ok)) * 1e6)
    process.stdout.write(`${entry.name} (${entry.role}${entry.loaded ? ', loaded' : ''}): main ${perWrite(entry.mainCpuS)} µs/write, other threads ${perWrite(other)} µs/write (${Object.entries(entry.otherCpuS).map(([threadName, cpuS]) => `${threadName} ${perWrite(cpuS)}`).join(', ')})\n`)
    const perWriteBytes = (bytes: number): number => Math.round(bytes / Math.max(1, result.ok))
    process.stdout.write(`  LevelDB background writes per write: ${Object.entries(entry.leveldb).map(([db, bytes]) => `${db} flushed ${perWriteBytes(bytes.flushBytes)} B, compacted ${perWriteBytes(bytes.compactedBytes)} B`).join('; ')}\n`)
  }
  if (meta.forwarded.requests > 0) process.stdout.write(`${node} forwarded ${meta.forwarded.writes} writes in ${meta.forwarded.requests} requests (${(meta.forwarded.writes / meta.forwarded.requests).toFixed(1)} per request)\n`)
  process.stdout.write(`written: ${outDir}\n`)
} finally {
  await warden.stop()
  rmSync(workDir, { recursive: true, force: true })
}
