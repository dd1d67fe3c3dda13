/**
 * Two variants of one build, side by side: a cluster for each, started with its own environment (a toggle a
 * throwaway build reads, or NODE_OPTIONS such as a V8 flag), loaded in turn with token creates in short windows, A
 * then B, then B then A, for several rounds. On this machine the speed moves by a fifth between runs a minute apart
 * (docs/benchmarks.md, issue 22), which hides a change of a few percent between two runs of stage-profile.ts; windows
 * that alternate every few seconds see the same machine, and the paired differences show what each variant costs.
 *
 *   npx tsx scripts/bench/ab.ts --a 'NAME=VALUE ...' --b 'NAME=VALUE ...' [--target leader|follower] [--rounds N (8,
 *     even)] [--seconds S (6)] [--warmup S (15)] [--connections N (64)]
 *
 * Per window: writes/s, and the CPU µs per acknowledged write of the loaded node's main thread and of the cluster
 * (every thread of the three agents, from /proc). The summary gives each variant's median and, per round, B against
 * A: the median ratio of writes/s, the median difference in µs per write, and how many rounds B won.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { runCannon, type CannonRequest } from './cannon.js'
import { killEverythingNow, stopEverything } from './children.js'
import { jsonHeaders } from './context.js'
import { SECONDS_PER_TICK, threadTicks } from './procfs.js'
import { WardenCluster } from './warden.js'
import { medianOf as median } from './workload-links.js'
import { benchPolicy } from './workload-writes.js'

const { values } = parseArgs({
  options: {
    a: { type: 'string', default: '' },
    b: { type: 'string', default: '' },
    target: { type: 'string', default: 'leader' },
    rounds: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '6' },
    warmup: { type: 'string', default: '15' },
    connections: { type: 'string', default: '64' },
  },
})
const rounds = Number(values.rounds)
const seconds = Number(values.seconds)
const warmupS = Number(values.warmup)
const connections = Number(values.connections)
const target = values.target === 'follower' ? 'follower' : 'leader'
const USAGE = "usage: ab.ts --a 'NAME=VALUE ...' --b 'NAME=VALUE ...' [--target leader|follower] [--rounds N (even)] [--seconds S] [--warmup S] [--connections N]\n"
// An even number of rounds: as many with A first as with B first.
if (!(rounds > 0 && rounds % 2 === 0 && seconds > 0 && warmupS >= 0 && connections > 0)) {
  process.stderr.write(USAGE)
  process.exit(2)
}

/**
 * `NAME=VALUE NAME=VALUE`; a value runs to the next ` NAME=` (so NODE_OPTIONS may hold spaces). Anything else is
 * refused: `--b '--max-semi-space-size=64'` would otherwise read as a variable named `size`, and make the run A/A.
 */
function parseEnvironment(text: string): Record<string, string> {
  const result: Record<string, string> = {}
  const pair = /^\s*([A-Za-z_][A-Za-z0-9_]*)=(.*?)(?=\s+[A-Za-z_][A-Za-z0-9_]*=|\s*$)/
  let rest = text
  while (rest.trim() !== '') {
    const match = pair.exec(rest)
    if (match === null) {
      process.stderr.write(`ab.ts: cannot read "${rest.trim()}" as NAME=VALUE\n${USAGE}`)
      process.exit(2)
    }
    result[match[1] as string] = match[2] as string
    rest = rest.slice(match[0].length)
  }
  return result
}

interface Variant {
  label: 'A' | 'B'
  environment: Record<string, string>
  cluster: WardenCluster
  node: string
  request: CannonRequest
}

interface Window {
  writesPerS: number
  mainUs: number
  clusterUs: number
}

async function startVariant(label: 'A' | 'B', environment: Record<string, string>): Promise<Variant> {
  // The agents inherit this process's environment when they are spawned, and only then.
  const saved = new Map(Object.keys(environment).map((name) => [name, process.env[name]]))
  Object.assign(process.env, environment)
  let cluster: WardenCluster
  try {
    cluster = await WardenCluster.start(`ab-${label.toLowerCase()}`, 3)
  } finally {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name]
      else process.env[name] = value
    }
  }
  const policyId = await benchPolicy(cluster)
  const request = { method: 'PUT', path: '/v1/acl/token', headers: jsonHeaders(cluster.token), body: JSON.stringify({ Description: 'bench token', Policies: [{ ID: policyId }] }) }
  const node = target === 'leader' ? cluster.leader : (cluster.followers[0] ?? cluster.leader)
  return { label, environment, cluster, node, request }
}

async function measure(variant: Variant, workDir: string): Promise<Window> {
  const { cluster, node } = variant
  const pids = cluster.nodes().map((name) => cluster.pid(name))
  const loaded = cluster.pid(node)
  const before = pids.map((pid) => threadTicks(pid))
  const { result } = await runCannon({ origin: cluster.origin(node), connections, durationS: seconds, requests: [variant.request], workDir }, [])
  const after = pids.map((pid) => threadTicks(pid))
  let main = 0
  let all = 0
  for (const [n, threads] of after.entries()) {
    for (const [tid, thread] of threads) {
      const spent = thread.ticks - (before[n]?.get(tid)?.ticks ?? 0)
      all += spent
      // A process's main thread has its pid for a thread ID.
      if (tid === loaded) main += spent
    }
  }
  const writes = Math.max(1, result.ok)
  return { writesPerS: result.ok / result.durationS, mainUs: (main * SECONDS_PER_TICK * 1e6) / writes, clusterUs: (all * SECONDS_PER_TICK * 1e6) / writes }
}

const workDir = mkdtempSync(join(tmpdir(), 'warden-ab-'))
const variants: Variant[] = []
// Every cluster registers its stop with children.ts as it starts: a failure, Ctrl-C or an exit stops them all.
let stopping = false
const onSignal = (signal: NodeJS.Signals): void => {
  if (stopping) return
  stopping = true
  process.stderr.write(`ab.ts: ${signal}: stopping both clusters\n`)
  void stopEverything()
    .catch((error: unknown) => process.stderr.write(`ab.ts: ${error instanceof Error ? error.message : String(error)}\n`))
    .finally(() => {
      rmSync(workDir, { recursive: true, force: true })
      process.exit(130)
    })
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, onSignal)
process.on('exit', killEverythingNow)
try {
  variants.push(await startVariant('A', parseEnvironment(values.a ?? '')))
  variants.push(await startVariant('B', parseEnvironment(values.b ?? '')))
  for (const variant of variants) {
    process.stdout.write(`${variant.label}: ${JSON.stringify(variant.environment)}, token create → ${target} ${variant.node}, warm-up ${warmupS} s\n`)
    if (warmupS > 0) await runCannon({ origin: variant.cluster.origin(variant.node), connections: 16, durationS: warmupS, requests: [variant.request], workDir }, [])
  }
  const windows: Record<'A' | 'B', Window[]> = { A: [], B: [] }
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? variants : [...variants].reverse()
    const line: string[] = []
    for (const variant of order) {
      const window = await measure(variant, workDir)
      windows[variant.label].push(window)
      line.push(`${variant.label} ${Math.round(window.writesPerS)}/s main ${Math.round(window.mainUs)} cluster ${Math.round(window.clusterUs)} µs/write`)
    }
    process.stdout.write(`round ${round + 1}: ${line.join(' | ')}\n`)
  }
  const pick = (label: 'A' | 'B', field: keyof Window): number[] => windows[label].map((window) => window[field])
  for (const label of ['A', 'B'] as const) {
    process.stdout.write(`${label} medians: ${Math.round(median(pick(label, 'writesPerS')))} writes/s, main ${Math.round(median(pick(label, 'mainUs')))} µs/write, cluster ${Math.round(median(pick(label, 'clusterUs')))} µs/write\n`)
  }
  const ratios = windows.B.map((window, n) => window.writesPerS / (windows.A[n]?.writesPerS ?? Number.NaN))
  const mainDiff = windows.B.map((window, n) => window.mainUs - (windows.A[n]?.mainUs ?? Number.NaN))
  const clusterDiff = windows.B.map((window, n) => window.clusterUs - (windows.A[n]?.clusterUs ?? Number.NaN))
  const wins = ratios.filter((ratio) => ratio > 1).length
  process.stdout.write(
    `B against A, per round: writes/s ratio median ${median(ratios).toFixed(3)} (B faster in ${wins} of ${rounds}), main ${median(mainDiff).toFixed(1)} µs/write, cluster ${median(clusterDiff).toFixed(1)} µs/write (medians of the differences)\n`,
  )
} finally {
  await stopEverything()
  rmSync(workDir, { recursive: true, force: true })
}
