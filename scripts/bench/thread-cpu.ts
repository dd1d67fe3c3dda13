/**
 * Where a write's CPU goes, per node and per kind of thread: token creates at 64 connections for a fixed time, then
 * each node's CPU split into its main (JavaScript) thread and its other threads (libuv's pool running LevelDB writes
 * and syncs, LevelDB's compaction thread, V8's helpers), and the CPU each node spent per write. Reads
 * /proc/<pid>/task/<tid>/stat before and after the load, so it adds nothing to the processes it measures.
 *
 *   npx tsx scripts/bench/thread-cpu.ts [SECONDS (default 12)] [leader|follower (default leader)]
 */
import { mkdtemp, rm } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { runCannon } from './cannon.js'
import { jsonHeaders } from './context.js'
import { SECONDS_PER_TICK, threadTicks } from './procfs.js'
import { WardenCluster } from './warden.js'
import { benchPolicy } from './workload-writes.js'

const seconds = Number(process.argv[2] ?? 12)
const target = process.argv[3] ?? 'leader'
if (!(seconds > 0) || (target !== 'leader' && target !== 'follower')) {
  process.stderr.write('usage: thread-cpu.ts [SECONDS] [leader|follower]\n')
  process.exit(2)
}
const warden = await WardenCluster.start('thread-cpu', 3)
const workDir = await promisify(mkdtemp)(join(tmpdir(), 'warden-thread-cpu-'))
try {
  const policyId = await benchPolicy(warden)
  const request = { method: 'PUT', path: '/v1/acl/token', headers: jsonHeaders(warden.token), body: JSON.stringify({ Description: 'bench token', Policies: [{ ID: policyId }] }) }
  const node = target === 'leader' ? warden.leader : (warden.followers[0] ?? warden.leader)
  await runCannon({ origin: warden.origin(node), connections: 16, durationS: 3, requests: [request], workDir }, [])
  const before = new Map(warden.nodes().map((name) => [name, threadTicks(warden.pid(name))]))
  const { result, usage } = await runCannon({ origin: warden.origin(node), connections: 64, durationS: seconds, requests: [request], workDir }, warden.watched())
  const after = new Map(warden.nodes().map((name) => [name, threadTicks(warden.pid(name))]))
  process.stdout.write(`token create → ${target}, 64 conn, ${seconds} s: ${result.rps}/s, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, errors ${result.errors}\n`)
  const load = usage.find((entry) => entry.label === 'autocannon' || entry.label === 'load')
  if (load !== undefined) process.stdout.write(`load generator: ${load.cpuPercent}% of a core\n`)
  for (const name of warden.nodes()) {
    const pid = warden.pid(name)
    let main = 0
    let other = 0
    for (const [tid, thread] of after.get(name) ?? []) {
      const spent = thread.ticks - (before.get(name)?.get(tid)?.ticks ?? 0)
      if (tid === pid) main += spent
      else other += spent
    }
    const percent = (spent: number): number => Math.round((spent * SECONDS_PER_TICK / seconds) * 100)
    const perWriteUs = Math.round((((main + other) * SECONDS_PER_TICK) / (result.rps * seconds)) * 1e6)
    process.stdout.write(`${name}${name === warden.leader ? ' (leader)' : ''}: main thread ${percent(main)}%, other threads ${percent(other)}%, ${perWriteUs} µs per write\n`)
  }
} finally {
  await warden.stop()
  await promisify(rm)(workDir, { recursive: true, force: true })
}
