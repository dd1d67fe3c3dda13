/**
 * Workload 4, config entry apply with `?cas` under contention: 16 writers on one service-defaults entry, each in a
 * loop of read (its ModifyIndex, default consistency) then PUT /v1/config?cas=<that index>. Of writers racing with
 * the same index exactly one may win, so the figures are successful increments per second and the share of applies
 * that answered `false`; two wins with the same cas value would be a correctness bug, counted as `duplicateWins`.
 * autocannon cannot read before it writes, hence this driver (in the benchmark's process; it is light next to the
 * servers).
 */
import type { BenchContext } from './context.js'
import { httpCall, keepAliveClients, percentile } from './http-client.js'
import { UsageMonitor } from './procfs.js'
import type { WardenCluster } from './warden.js'

const WRITERS = 16
const ENTRY = { Kind: 'service-defaults', Name: 'bench-cas', Protocol: 'http' }

export async function wardenCas(ctx: BenchContext, warden: WardenCluster): Promise<void> {
  ctx.progress.step(`cas: ${WRITERS} writers, one config entry, ${ctx.plan.casS}s`)
  const node = warden.leader
  const address = warden.address(node)
  const clients = keepAliveClients(WRITERS)
  await warden.json(node, 'PUT', '/v1/config', ENTRY)
  let wins = 0
  let losses = 0
  let errors = 0
  const winningCas = new Map<number, number>()
  const applyMs: number[] = []
  const monitor = new UsageMonitor(warden.watched()).start()
  const startedAt = performance.now()
  const deadline = startedAt + ctx.plan.casS * 1000
  const writer = async (id: number): Promise<void> => {
    while (performance.now() < deadline) {
      try {
        const read = await httpCall(clients, address, 'GET', `/v1/config/${ENTRY.Kind}/${ENTRY.Name}`, { token: warden.token })
        if (read.status !== 200) {
          errors++
          continue
        }
        const cas = (JSON.parse(read.text) as { ModifyIndex: number }).ModifyIndex
        const sentAt = performance.now()
        const apply = await httpCall(clients, address, 'PUT', `/v1/config?cas=${cas}`, { token: warden.token, body: { ...ENTRY, Meta: { writer: String(id) } } })
        applyMs.push(performance.now() - sentAt)
        if (apply.status !== 200) errors++
        else if (apply.text.trim() === 'true') {
          wins++
          winningCas.set(cas, (winningCas.get(cas) ?? 0) + 1)
        } else losses++
      } catch {
        errors++ // A timeout or reset: counted, and the writer carries on.
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: WRITERS }, (_, id) => writer(id)))
  } finally {
    clients.close()
  }
  const seconds = (performance.now() - startedAt) / 1000
  const processes = monitor.stop()
  const duplicateWins = [...winningCas.values()].reduce((sum, count) => sum + Math.max(0, count - 1), 0)
  ctx.results.cas = {
    writers: WRITERS,
    successesPerSecond: Math.round(wins / seconds),
    attemptsPerSecond: Math.round((wins + losses) / seconds),
    falseRate: Math.round((losses / Math.max(1, wins + losses)) * 1000) / 1000,
    duplicateWins,
    errors,
  }
  if (duplicateWins > 0) ctx.progress.note(`  cas: ${duplicateWins} duplicate wins: two writers succeeded with the same cas value`)
  ctx.results.rows.push({
    workload: 'cas',
    system: 'warden',
    name: 'config apply ?cas, successful increments',
    cluster: warden.label,
    connections: WRITERS,
    rps: Math.round(wins / seconds),
    p50Ms: Math.round(percentile(applyMs, 0.5) * 10) / 10,
    p99Ms: Math.round(percentile(applyMs, 0.99) * 10) / 10,
    errors,
    processes,
    note: `read then PUT ?cas on the leader; false rate ${Math.round(ctx.results.cas.falseRate * 100)}%; latency is of the PUT`,
  })
}
