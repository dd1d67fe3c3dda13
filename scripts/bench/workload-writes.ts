/**
 * Workload 1, token create: PUT /v1/acl/token linking one policy, a Raft write that touches the token table and its
 * secret, policy and accessor indexes. At 1, 16, 64 and 256 connections, to the leader and to a follower (which
 * forwards it), and at 64 to a single node (the same write without replication, for what Raft costs). etcd's
 * counterpart, a put of a value of the same size as warden's token record, is measured against warden's in rounds
 * that alternate the two (workload-writes-vs-etcd.ts).
 *
 * fsyncs per write: strace (where installed) counts fsync and fdatasync on every node during a fixed number of
 * writes. strace slows the traced processes, which can make group commits larger than they would be untraced, so
 * the count is a lower bound of what an untraced run does at the same concurrency, not a throughput figure.
 */
import { execFileSync } from 'node:child_process'
import { load, jsonHeaders, warmUp, sleep, type BenchContext } from './context.js'
import { runCannon } from './cannon.js'
import { spawnTracked, stopChild } from './children.js'
import type { WardenCluster } from './warden.js'

/** A policy tokens can link to; created once per cluster. */
export async function benchPolicy(warden: WardenCluster, name = 'bench-write'): Promise<string> {
  const existing = await warden.call(warden.leader, 'GET', `/v1/acl/policy/name/${name}`)
  if (existing.status === 200) return (JSON.parse(existing.text) as { ID: string }).ID
  const policy = await warden.json<{ ID: string }>(warden.leader, 'PUT', '/v1/acl/policy', { Name: name, Rules: 'acl = "read"' })
  return policy.ID
}

export function tokenCreate(token: string, policyId: string): { method: string; path: string; headers: Record<string, string>; body: string } {
  return { method: 'PUT', path: '/v1/acl/token', headers: jsonHeaders(token), body: JSON.stringify({ Description: 'bench token', Policies: [{ ID: policyId }] }) }
}

/** The size of a token record as warden stores and returns it, for etcd's values. */
export async function tokenRecordBytes(warden: WardenCluster): Promise<number> {
  const policyId = await benchPolicy(warden)
  const created = await warden.call(warden.leader, 'PUT', '/v1/acl/token', { body: { Description: 'bench token', Policies: [{ ID: policyId }] } })
  return Buffer.byteLength(created.text)
}

export async function wardenWrites(ctx: BenchContext, warden: WardenCluster): Promise<void> {
  const policyId = await benchPolicy(warden)
  const request = tokenCreate(warden.token, policyId)
  ctx.progress.step('writes: warm-up')
  await warmUp(ctx, { origin: warden.origin(warden.leader), connections: 16, requests: [request], watched: [] })
  for (const connections of ctx.plan.writeConnections) {
    for (const target of ['leader', 'follower'] as const) {
      const node = target === 'leader' ? warden.leader : (warden.followers[0] ?? warden.leader)
      ctx.progress.step(`writes: token create → ${target}, ${connections} conn`)
      await load(ctx, {
        workload: 'writes',
        system: 'warden',
        name: `token create → ${target}`,
        cluster: warden.label,
        origin: warden.origin(node),
        connections,
        requests: [request],
        watched: warden.watched(),
      })
    }
  }
}

export async function singleNodeWrites(ctx: BenchContext, warden: WardenCluster): Promise<void> {
  const policyId = await benchPolicy(warden)
  const request = tokenCreate(warden.token, policyId)
  ctx.progress.step('writes: token create → single node, 64 conn')
  await warmUp(ctx, { origin: warden.origin(warden.leader), connections: 16, requests: [request], watched: [] })
  await load(ctx, {
    workload: 'writes',
    system: 'warden',
    name: 'token create → single node',
    cluster: warden.label,
    origin: warden.origin(warden.leader),
    connections: 64,
    requests: [request],
    watched: warden.watched(),
  })
}

export function straceAvailable(): boolean {
  try {
    execFileSync('sh', ['-c', 'command -v strace'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** Counts fsync + fdatasync on each node while `writes` token creates go to the leader at 64 connections. */
export async function countFsyncs(ctx: BenchContext, warden: WardenCluster): Promise<void> {
  ctx.progress.step(`writes: fsyncs per write (strace, ${ctx.plan.fsyncWrites} writes)`)
  if (!straceAvailable()) {
    ctx.results.skipped.push('fsyncs per write: strace is not installed')
    return
  }
  const policyId = await benchPolicy(warden)
  // -f with -p attaches every thread of the process: LevelDB syncs on libuv's worker threads, not the main one.
  const tracers = warden.nodes().map((node) => {
    const pid = String(warden.pid(node))
    const child = spawnTracked('strace', ['-f', '-c', '-e', 'trace=fsync,fdatasync', '-p', pid], { stdio: ['ignore', 'ignore', 'pipe'] }, pid)
    let summary = ''
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (summary += chunk))
    const closed = new Promise<void>((resolve) => child.once('close', () => resolve()))
    return { node, child, summary: () => summary, closed }
  })
  try {
    await sleep(1_000) // strace attaches thread by thread; writes sent before it has all of them would go uncounted.
    const { result } = await runCannon(
      { origin: warden.origin(warden.leader), connections: 64, durationS: 600, maxRequests: ctx.plan.fsyncWrites, requests: [tokenCreate(warden.token, policyId)], workDir: ctx.workDir },
      [],
    )
    await sleep(500) // Followers sync the last entries after the leader answered.
    for (const tracer of tracers) tracer.child.kill('SIGINT') // strace prints its summary when it detaches on SIGINT.
    await Promise.all(tracers.map((tracer) => Promise.race([tracer.closed, sleep(5_000)])))
    const nodes = tracers.map((tracer) => {
      const syncs = [...tracer.summary().matchAll(/^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync)\s*$/gm)].reduce((sum, match) => sum + Number(match[1]), 0)
      return { node: tracer.node, role: tracer.node === warden.leader ? 'leader' : 'follower', syncs, perWrite: Math.round((syncs / Math.max(1, result.ok)) * 1000) / 1000 }
    })
    ctx.results.fsync = { writes: result.ok, nodes, note: 'token create at 64 connections to the leader, under strace -f -c (which slows the nodes)' }
  } finally {
    await Promise.all(tracers.map((tracer) => stopChild(tracer.child)))
  }
}
