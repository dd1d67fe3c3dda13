/**
 * A token create's CPU by stage (issue 22), from V8 CPU profiles of the agents' main threads and their CPU time:
 * every sample is given to one stage, found by walking its stack from the leaf towards the root to the first frame
 * that names one (warden's files, Koa, ws, node:http); library frames that serve every stage (msgpackr, LevelDB's
 * bindings, node:crypto, node:net and streams, src/lib) give their time to the warden frame that called them, and
 * msgpackr and LevelDB frames below that frame mark the sample as their part of the stage ("apply: LevelDB"). Each
 * stage's µs per write is the main thread's CPU seconds over the writes acknowledged, times the stage's share of the
 * busy (not idle) samples; the node's other threads (libuv's pool running LevelDB writes and fsyncs, LevelDB's
 * compaction, V8's helpers) come from /proc and are one row, since a V8 profile does not see them.
 *
 *   npx tsx scripts/bench/stage-budget.ts DIR            (DIR from stage-profile.ts: meta.json and the profiles)
 *   npx tsx scripts/bench/stage-budget.ts FILE.cpuprofile --cpu-s S --writes N [--other-cpu-s S]
 *   options: --weight samples|time (default samples: a preempted thread's long delta counts once)
 *            --explain STAGE (the leaf frames and the deciding frame of that stage's samples) --markdown
 *            --cpu-from DIR (CPU per write from an unprofiled run of stage-profile.ts --no-profile: the profiler's own
 *              cost, some 10% of a main thread here, then stays out of the µs; nodes matched by role, followers in order)
 *            --merge (one column per role over all DIRs: shares and CPU per write averaged)
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { frameFile, frameName, profileTree, readProfile, sampledWeights, type CallFrame } from './cpuprofile.js'

/** The stages, in the order of a write's path; a rule gives a frame's stage, undefined for a frame that serves all. */
const STAGES = [
  'HTTP parse, socket reads (node:http)',
  'Koa, router, middleware',
  'body read, JSON parse, validation',
  'authorization (token resolution, ACL check)',
  'token create handler (ids, times)',
  'command check, encoding, propose',
  'forwarding (follower → leader)',
  'Raft core and driver',
  'Raft log append: storage (JS)',
  'Raft log append: LevelDB batch',
  'Raft log append: msgpack',
  'peer links: ws, frames, sealing',
  'peer links: msgpack',
  'peer links: socket writes (writev)',
  'apply: entry decode and check',
  'apply: dispatch, record build, checks',
  'apply: msgpack',
  'apply: LevelDB batch write',
  'records and indexes (tables, txn)',
  'records and indexes: msgpack',
  'records and indexes: LevelDB point gets',
  'hashing',
  'watches, change feed',
  'response rendering (Koa respond, render, headers)',
  'response: LevelDB gets, msgpack (link names)',
  'response: socket write (writev)',
  'metrics, audit, logging',
  'garbage collector',
  '(program): native, not JS',
  'event loop, timers, promises (unattributed)',
  'other',
] as const
type Stage = (typeof STAGES)[number]

/** A stage's parts for LevelDB, msgpack and socket-write frames that lie below the frame that decided it. */
const VARIANTS: Partial<Record<Stage, { level?: Stage; msgpack?: Stage; writev?: Stage }>> = {
  'Raft log append: storage (JS)': { level: 'Raft log append: LevelDB batch', msgpack: 'Raft log append: msgpack' },
  'peer links: ws, frames, sealing': { msgpack: 'peer links: msgpack', writev: 'peer links: socket writes (writev)' },
  'apply: dispatch, record build, checks': { level: 'apply: LevelDB batch write', msgpack: 'apply: msgpack' },
  'apply: entry decode and check': { msgpack: 'apply: entry decode and check' },
  'records and indexes (tables, txn)': { level: 'records and indexes: LevelDB point gets', msgpack: 'records and indexes: msgpack' },
  'response rendering (Koa respond, render, headers)': {
    level: 'response: LevelDB gets, msgpack (link names)',
    msgpack: 'response: LevelDB gets, msgpack (link names)',
    writev: 'response: socket write (writev)',
  },
}

const LEVEL = /^node_modules\/(classic-level|abstract-level|level|level-transcoder|module-error|maybe-combine-errors)\//
const MSGPACK = /^node_modules\/msgpackr\//
/** Native socket writes (no script URL): what a loopback send costs, including waking the receiver. */
const SOCKET_WRITES = new Set(['writev', 'writeBuffer', 'writeUtf8String', 'writeLatin1String', 'writevGeneric', 'writeGeneric'])

function stageOf(frame: CallFrame): Stage | undefined {
  const file = frameFile(frame).replace(/^(src|dist)\//, 'W/')
  const fn = frame.functionName
  if (file === '') {
    if (fn === '(garbage collector)') return 'garbage collector'
    if (fn === '(program)') return '(program): native, not JS'
    return undefined
  }
  if (/^W\/state\/hash\./.test(file)) return 'hashing'
  if (/^W\/state\/(tables|txn|keys)\./.test(file)) return 'records and indexes (tables, txn)'
  if (/^W\/state\/(watch|change-feed)\./.test(file) || /^W\/http\/coalesce\./.test(file)) return 'watches, change feed'
  // The caller decides: the leader's check and encoding before propose, or apply; a get for apply or for rendering.
  if (/^W\/state\/(validate|codec|reader)\./.test(file)) return undefined
  if (/^W\/state\/store\./.test(file) && fn === 'encodeCommand') return undefined
  if (/^W\/state\/store\./.test(file) && /^decode(Entries|Command)$/.test(fn)) return 'apply: entry decode and check'
  if (/^W\/state\//.test(file)) return 'apply: dispatch, record build, checks'
  if (/^W\/raft\/storage\//.test(file)) return 'Raft log append: storage (JS)'
  if (/^W\/raft\//.test(file) || /^W\/replica\/(raft-replica|waiters|membership)\./.test(file)) return 'Raft core and driver'
  if (/^W\/(transport\/|replica\/peer-links)/.test(file) || /^node_modules\/ws\//.test(file)) return 'peer links: ws, frames, sealing'
  if (/^W\/rpc\/cluster-node\./.test(file)) return /serveBatch|forward|flush/i.test(fn) ? 'forwarding (follower → leader)' : 'command check, encoding, propose'
  if (/^W\/(rpc\/forward|http\/forward)\./.test(file)) return 'forwarding (follower → leader)'
  if (/^W\/http\/write\./.test(file)) return 'command check, encoding, propose'
  if (/^W\/acl\//.test(file) || /^W\/http\/rules\./.test(file) || (/^W\/http\/request\./.test(file) && /^(callerOf|requirePermission|secretOf)$/.test(fn))) return 'authorization (token resolution, ACL check)'
  if (/^W\/http\/(body|validate|schemas|acl-fields)\./.test(file)) return 'body read, JSON parse, validation'
  if (/^W\/http\/routes\/acl-tokens\./.test(file)) return /render|respond/i.test(fn) ? 'response rendering (Koa respond, render, headers)' : 'token create handler (ids, times)'
  if (/^W\/http\/render\./.test(file)) return 'response rendering (Koa respond, render, headers)'
  if (/^W\/(metrics\/|http\/(audit|audit-log|request-metrics)\.)/.test(file) || /^node_modules\/(pino|sonic-boom|thread-stream)\//.test(file)) return 'metrics, audit, logging'
  if (/^node_modules\/koa\/lib\/application\./.test(file) && fn === 'respond') return 'response rendering (Koa respond, render, headers)'
  if (/^node_modules\/koa\/lib\/response\./.test(file)) return 'response rendering (Koa respond, render, headers)'
  if (/^W\/http\//.test(file) || /^node_modules\/(koa|koa-compose|@koa|delegates|statuses|on-finished|vary|accepts|type-is|mime-types|content-type|fresh|http-errors|encodeurl|cookies|only|destroy|ee-first)\//.test(file)) return 'Koa, router, middleware'
  if (file === 'node:_http_outgoing' || (file === 'node:_http_server' && /write|end|Response|finish/i.test(fn))) return 'response rendering (Koa respond, render, headers)'
  if (/^node:_http_(common|server|incoming)$/.test(file)) return 'HTTP parse, socket reads (node:http)'
  if (/^W\//.test(file) && !/^W\/lib\//.test(file)) return 'other'
  return undefined
}

interface NodeMeta {
  name: string
  role: string
  loaded: boolean
  profile?: string
  mainCpuS: number
  otherCpuS: Record<string, number>
}

interface Budget {
  label: string
  key: string
  writes: number
  mainCpuS: number
  otherCpuS: number
  busyShare: number
  shares: Map<Stage, number>
  explain: Map<string, number>
}

function budget(label: string, key: string, file: string, mainCpuS: number, otherCpuS: number, writes: number, weight: 'samples' | 'time', explainStage?: string): Budget {
  const profile = readProfile(file)
  const { byId, parent } = profileTree(profile)
  const weights = sampledWeights(profile, weight)
  const byStage = new Map<Stage, number>()
  const explain = new Map<string, number>()
  let idle = 0
  let total = 0
  for (const [id, w] of weights) {
    const leaf = byId.get(id)
    if (leaf === undefined) continue
    total += w
    if (leaf.callFrame.functionName === '(idle)') {
      idle += w
      continue
    }
    let stage: Stage | undefined
    let decider: CallFrame | undefined
    let level = false
    let msgpack = false
    const writev = SOCKET_WRITES.has(leaf.callFrame.functionName) && frameFile(leaf.callFrame) === ''
    for (let current: number | undefined = id; current !== undefined; current = parent.get(current)) {
      const frame = byId.get(current)?.callFrame
      if (frame === undefined) break
      stage = stageOf(frame)
      if (stage !== undefined) {
        decider = frame
        break
      }
      const where = frameFile(frame)
      if (LEVEL.test(where)) level = true
      if (MSGPACK.test(where)) msgpack = true
    }
    if (stage === undefined) {
      const roots = ['(root)', '']
      stage = roots.includes(leaf.callFrame.functionName) ? 'other' : 'event loop, timers, promises (unattributed)'
    }
    const variants = VARIANTS[stage]
    if (variants !== undefined) stage = (writev ? variants.writev : undefined) ?? (level ? variants.level : undefined) ?? (msgpack ? variants.msgpack : undefined) ?? stage
    byStage.set(stage, (byStage.get(stage) ?? 0) + w)
    if (explainStage !== undefined && stage.startsWith(explainStage)) {
      const key = `${frameName(leaf.callFrame)}  ←  ${decider === undefined ? '(none)' : frameName(decider)}`
      explain.set(key, (explain.get(key) ?? 0) + w)
    }
  }
  const busy = Math.max(1, total - idle)
  return {
    label,
    key,
    writes,
    mainCpuS,
    otherCpuS,
    busyShare: busy / Math.max(1, total),
    shares: new Map([...byStage].map(([stage, w]) => [stage, w / busy])),
    explain,
  }
}

const args = process.argv.slice(2)
let weight: 'samples' | 'time' = 'samples'
let explainStage: string | undefined
let markdown = false
let cpuS: number | undefined
let otherS = 0
let writes: number | undefined
let cpuFrom: string | undefined
let merge = false
const inputs: string[] = []
for (let n = 0; n < args.length; n++) {
  const arg = args[n] ?? ''
  if (arg === '--weight') weight = args[++n] === 'time' ? 'time' : 'samples'
  else if (arg === '--explain') explainStage = args[++n]
  else if (arg === '--markdown') markdown = true
  else if (arg === '--cpu-s') cpuS = Number(args[++n])
  else if (arg === '--other-cpu-s') otherS = Number(args[++n])
  else if (arg === '--writes') writes = Number(args[++n])
  else if (arg === '--cpu-from') cpuFrom = args[++n]
  else if (arg === '--merge') merge = true
  else inputs.push(arg)
}
const budgets: Budget[] = []
let heading = ''
for (const input of inputs) {
  if (input.endsWith('.cpuprofile')) {
    if (cpuS === undefined || writes === undefined) throw new Error('a .cpuprofile needs --cpu-s and --writes')
    budgets.push(budget(input, input, input, cpuS, otherS, writes, weight, explainStage))
    continue
  }
  const meta = readMeta(input)
  heading += `${input}: token create → ${meta.target}, 64 conn, ${meta.seconds} s at ${meta.when}: ${meta.writes} writes (${meta.rps}/s, p99 ${meta.p99Ms} ms); loadavg ${meta.loadavg}\n`
  const unprofiled = cpuFrom === undefined ? undefined : readMeta(cpuFrom)
  if (unprofiled !== undefined && unprofiled.target !== meta.target) throw new Error(`--cpu-from ${cpuFrom} loaded the ${unprofiled.target}, ${input} the ${meta.target}`)
  for (const node of meta.nodes) {
    if (node.profile === undefined) continue
    const key = roleKey(meta.nodes, node)
    const source = unprofiled === undefined ? node : unprofiled.nodes.find((entry) => roleKey(unprofiled.nodes, entry) === key)
    if (source === undefined) throw new Error(`no ${key} in ${cpuFrom}`)
    const writesOf = unprofiled ?? meta
    // CPU per write of the source run, expressed over this run's writes.
    const scale = meta.writes / writesOf.writes
    budgets.push(budget(`${node.name} ${key}`, key, join(input, node.profile), source.mainCpuS * scale, otherThreads(source) * scale, meta.writes, weight, explainStage))
  }
}
if (merge) {
  const merged: Budget[] = []
  for (const key of [...new Set(budgets.map((b) => b.key))]) {
    const group = budgets.filter((b) => b.key === key)
    const mean = (value: (b: Budget) => number): number => group.reduce((sum, b) => sum + value(b), 0) / group.length
    const stages = new Set(group.flatMap((b) => [...b.shares.keys()]))
    merged.push({
      label: `${key} (mean of ${group.length})`,
      key,
      writes: 1,
      mainCpuS: mean((b) => b.mainCpuS / b.writes),
      otherCpuS: mean((b) => b.otherCpuS / b.writes),
      busyShare: mean((b) => b.busyShare),
      shares: new Map([...stages].map((stage) => [stage, mean((b) => b.shares.get(stage) ?? 0)])),
      explain: new Map(),
    })
  }
  budgets.splice(0, budgets.length, ...merged)
}
if (budgets.length === 0) {
  process.stderr.write('usage: stage-budget.ts DIR... | FILE.cpuprofile --cpu-s S --writes N [--other-cpu-s S] [--weight samples|time] [--explain STAGE] [--markdown] [--cpu-from DIR] [--merge]\n')
  process.exit(2)
}

function readMeta(directory: string): { target: string; writes: number; rps: number; p99Ms: number; seconds: number; when: string; loadavg: string; nodes: NodeMeta[] } {
  return JSON.parse(readFileSync(join(directory, 'meta.json'), 'utf8')) as ReturnType<typeof readMeta>
}

/** leader, loaded follower, follower 1, follower 2: what matches a node across runs (names and leaders change). */
function roleKey(nodes: NodeMeta[], node: NodeMeta): string {
  if (node.role === 'leader') return node.loaded ? 'leader (loaded)' : 'leader'
  if (node.loaded) return 'follower (loaded)'
  const others = nodes.filter((entry) => entry.role !== 'leader' && !entry.loaded)
  return `follower ${others.indexOf(node) + 1}`
}

function otherThreads(node: NodeMeta): number {
  return Object.entries(node.otherCpuS).filter(([name]) => !name.startsWith('v8:ProfEvnt')).reduce((sum, [, value]) => sum + value, 0)
}

const us = (b: Budget, share: number): number => (b.mainCpuS * 1e6 * share) / Math.max(1, b.writes)
const cell = (b: Budget, stage: Stage): string => {
  const share = b.shares.get(stage) ?? 0
  return share === 0 ? '–' : `${us(b, share).toFixed(1)} (${(share * 100).toFixed(1)}%)`
}
const rows: string[][] = []
for (const stage of STAGES) if (budgets.some((b) => (b.shares.get(stage) ?? 0) > 0)) rows.push([stage, ...budgets.map((b) => cell(b, stage))])
rows.push(['main thread, all stages', ...budgets.map((b) => `${us(b, 1).toFixed(0)} (busy ${(b.busyShare * 100).toFixed(0)}% of the window)`)])
rows.push(['other threads (libuv pool: LevelDB writes, fsync; compaction; V8 helpers)', ...budgets.map((b) => `${((b.otherCpuS * 1e6) / Math.max(1, b.writes)).toFixed(0)}`)])
rows.push(['node total', ...budgets.map((b) => `${(((b.mainCpuS + b.otherCpuS) * 1e6) / Math.max(1, b.writes)).toFixed(0)}`)])
process.stdout.write(heading)
process.stdout.write(`µs of CPU per acknowledged write (share of the main thread's busy samples, weighted by ${weight})\n`)
const header = ['stage', ...budgets.map((b) => b.label)]
if (markdown) {
  process.stdout.write(`| ${header.join(' | ')} |\n|---|${budgets.map(() => '--:|').join('')}\n`)
  for (const row of rows) process.stdout.write(`| ${row.join(' | ')} |\n`)
} else {
  const widths = header.map((_, column) => Math.max(...[header, ...rows].map((row) => (row[column] ?? '').length)))
  for (const row of [header, ...rows]) process.stdout.write(`${row.map((text, column) => (column === 0 ? text.padEnd(widths[column] ?? 0) : text.padStart(widths[column] ?? 0))).join('  ')}\n`)
}
if (explainStage !== undefined) {
  for (const b of budgets) {
    process.stdout.write(`\n${b.label}: "${explainStage}" by leaf frame ← deciding frame\n`)
    const total = [...b.explain.values()].reduce((sum, value) => sum + value, 0)
    for (const [key, w] of [...b.explain].sort((x, y) => y[1] - x[1]).slice(0, 25)) process.stdout.write(`  ${((w / Math.max(1, total)) * 100).toFixed(1).padStart(5)}%  ${key}\n`)
  }
}
