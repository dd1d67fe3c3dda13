/**
 * Workload 2, policy read by ID at 64 connections: `?stale` on a follower (its own state), the default (the leader's
 * view: on a follower a ReadIndex round through the leader), and `?consistent` (always a ReadIndex round), on a
 * follower and on the leader. The yardstick for `?stale` is a bare Koa hello-world route on the same machine; etcd's
 * counterparts are a serializable range (stale) and a linearizable range (default and consistent).
 *
 * Each request reads the next of READ_POLICIES policies: warden shares one run among identical reads that arrive in
 * the same turn of its event loop (src/http/coalesce.ts), and 64 connections sending one identical request would
 * measure that sharing rather than the cost of a read.
 */
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { TSX_LOADER } from './cannon.js'
import { load, warmUp, type BenchContext } from './context.js'
import { reportedPort, spawnTracked, stopChild } from './children.js'
import { base64, type EtcdCluster } from './etcd.js'
import { pool } from './http-client.js'
import type { WardenCluster } from './warden.js'
import { KOA_SAME_CLIENT } from './results.js'

const READ_CONNECTIONS = 64
export const READ_POLICIES = 1_000

/** READ_POLICIES policies to read (created once per cluster), so that concurrent reads are not all identical. */
export async function readTargets(warden: WardenCluster): Promise<string[]> {
  const ids = new Array<string>(READ_POLICIES)
  await pool(READ_POLICIES, 32, async (n) => {
    const name = `bench-read-${n}`
    const existing = await warden.call(warden.leader, 'GET', `/v1/acl/policy/name/${name}`)
    ids[n] =
      existing.status === 200
        ? (JSON.parse(existing.text) as { ID: string }).ID
        : (await warden.json<{ ID: string }>(warden.leader, 'PUT', '/v1/acl/policy', { Name: name, Rules: `service "svc-${n}" { policy = "read" }` })).ID
  })
  return ids
}

export async function wardenReads(ctx: BenchContext, warden: WardenCluster): Promise<void> {
  const policyIds = await readTargets(warden)
  const follower = warden.followers[0] ?? warden.leader
  // The followers must hold the last policy before the load, or the first stale reads would be 404s.
  await warden.call(follower, 'GET', `/v1/acl/policy/${policyIds.at(-1) ?? ''}`)
  const read = (query: string) => ({ method: 'GET', path: `/v1/acl/policy/${policyIds[0] ?? ''}${query}`, headers: { 'X-Service-Token': warden.token } })
  const paths = (query: string): string[] => policyIds.map((id) => `/v1/acl/policy/${id}${query}`)
  ctx.progress.step('reads: warm-up')
  await warmUp(ctx, { origin: warden.origin(follower), connections: READ_CONNECTIONS, requests: [read('')], watched: [] })
  const cases = [
    { mode: '?stale', query: '?stale', node: follower, target: 'follower' },
    { mode: 'default', query: '', node: follower, target: 'follower' },
    { mode: '?consistent', query: '?consistent', node: follower, target: 'follower' },
    { mode: 'default', query: '', node: warden.leader, target: 'leader' },
    { mode: '?consistent', query: '?consistent', node: warden.leader, target: 'leader' },
  ]
  for (const readCase of cases) {
    ctx.progress.step(`reads: policy read ${readCase.mode} → ${readCase.target}`)
    await load(ctx, {
      workload: 'reads',
      system: 'warden',
      name: `policy read ${readCase.mode} → ${readCase.target}`,
      cluster: warden.label,
      origin: warden.origin(readCase.node),
      connections: READ_CONNECTIONS,
      requests: [read(readCase.query)],
      rotatePaths: paths(readCase.query),
      watched: warden.watched(),
    })
  }
  // What warden's middleware chain and router cost before any read: a route that answers a constant (the leader's
  // address), under the same client and on the same follower, next to the Koa yardsticks.
  ctx.progress.step('reads: trivial route /v1/status/leader → follower')
  const statusPaths = policyIds.map(() => '/v1/status/leader')
  await load(ctx, {
    workload: 'reads',
    system: 'warden',
    name: 'trivial route /v1/status/leader → follower',
    cluster: warden.label,
    origin: warden.origin(follower),
    connections: READ_CONNECTIONS,
    requests: [{ method: 'GET', path: '/v1/status/leader', headers: { 'X-Service-Token': warden.token } }],
    rotatePaths: statusPaths,
    watched: warden.watched(),
  })
}

/**
 * The yardsticks, each a bare Koa app in its own process (koa-hello.ts): the hello world under the autocannon CLI, as
 * the issue measured it; the same under the client the reads use (cannon-rotating.ts, which costs more CPU per
 * request on the same two cores), walking as many paths of the same shape with a token header of the same size; and
 * one @koa/router route under that client, which shows what routing adds to Koa.
 */
export async function koaBaseline(ctx: BenchContext): Promise<void> {
  const rotated = Array.from({ length: READ_POLICIES }, () => `/v1/acl/policy/${randomUUID()}?stale`)
  const headers = { 'X-Service-Token': randomUUID() }
  const cases = [
    { mode: 'plain', name: 'bare Koa hello world', rotate: false },
    { mode: 'plain', name: KOA_SAME_CLIENT, rotate: true },
    { mode: 'router', name: 'Koa + @koa/router, one route, rotating client', rotate: true },
  ]
  for (const koaCase of cases) {
    ctx.progress.step(`reads: ${koaCase.name} (yardstick)`)
    await koaLoad(ctx, koaCase.mode, koaCase.name, koaCase.rotate ? { rotatePaths: rotated, headers } : undefined)
  }
}

async function koaLoad(ctx: BenchContext, mode: string, name: string, rotation: { rotatePaths: string[]; headers: Record<string, string> } | undefined): Promise<void> {
  const script = join(import.meta.dirname, 'koa-hello.ts')
  const env = { ...process.env }
  delete env.NODE_OPTIONS
  const child = spawnTracked(process.execPath, ['--import', TSX_LOADER, script, mode], { stdio: ['ignore', 'pipe', 'inherit'], env }, script)
  try {
    const port = await reportedPort(child, 'koa-hello')
    const request = { method: 'GET', path: rotation?.rotatePaths[0] ?? '/', headers: rotation?.headers ?? {} }
    await warmUp(ctx, { origin: `http://127.0.0.1:${port}`, connections: READ_CONNECTIONS, requests: [request], watched: [] })
    await load(ctx, {
      workload: 'reads',
      system: 'koa',
      name,
      cluster: 'koa ×1',
      origin: `http://127.0.0.1:${port}`,
      connections: READ_CONNECTIONS,
      requests: [request],
      ...(rotation === undefined ? {} : { rotatePaths: rotation.rotatePaths }),
      watched: [{ label: 'koa', pid: child.pid ?? 0 }],
    })
  } finally {
    await stopChild(child)
  }
}

export async function etcdRanges(ctx: BenchContext, etcd: EtcdCluster): Promise<void> {
  const leader = await etcd.leader()
  const follower = etcd.nodes().find((name) => name !== leader) ?? leader
  const key = base64('bench/read')
  await etcd.post(leader, '/v3/kv/put', { key, value: base64('v'.repeat(ctx.valueBytes)) })
  const range = (serializable: boolean) => ({
    method: 'POST',
    path: '/v3/kv/range',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(serializable ? { key, serializable: true } : { key }),
  })
  ctx.progress.step('etcd: range warm-up')
  await warmUp(ctx, { origin: etcd.origin(follower), connections: READ_CONNECTIONS, requests: [range(false)], watched: [] })
  const cases = [
    { name: 'range serializable → follower', serializable: true, node: follower },
    { name: 'range linearizable → follower', serializable: false, node: follower },
    { name: 'range linearizable → leader', serializable: false, node: leader },
  ]
  for (const rangeCase of cases) {
    ctx.progress.step(`etcd: ${rangeCase.name}`)
    await load(ctx, {
      workload: 'reads',
      system: 'etcd',
      name: rangeCase.name,
      cluster: etcd.label,
      origin: etcd.origin(rangeCase.node),
      connections: READ_CONNECTIONS,
      requests: [range(rangeCase.serializable)],
      watched: etcd.watched(leader),
      note: `${ctx.valueBytes}-byte value`,
    })
  }
}
