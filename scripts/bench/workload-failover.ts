/**
 * Workload 7, failover: 16 writers keep a three-node cluster busy; the leader is killed with SIGKILL; the figure is
 * the time from the kill to the first successful write sent after it. Writers spread over every node; at the kill they
 * drop the dead node from their list at once (as a client with the member list would after its first refused
 * connection), so the figure is the servers' failover, not a client's retry policy. For the same reason a probe sends
 * a fresh write every 20 ms from the kill on, each on its own connection: writers stuck in requests the dead leader
 * will never answer (a follower holds a forwarded write until its own timeout) would otherwise send nothing new, and
 * the figure would be that timeout. Between rounds the killed node is started again on its data dir and the next
 * round waits until it has caught up.
 *
 * Every write carries a key of its own (a token's AccessorID; an etcd key). At the end every acknowledged key must be
 * present in a linearizable read (`?consistent` list on warden, a linearizable range on etcd): a missing one is a
 * lost acknowledged write, which must never happen. Writes that failed or whose outcome is unknown (504) are not
 * acknowledged and may or may not be present.
 */
import { randomUUID } from 'node:crypto'
import { isOurs, signalIfOurs } from './children.js'
import { sleep, type BenchContext } from './context.js'
import { base64, type EtcdCluster } from './etcd.js'
import { freshConnections, httpCall, keepAliveClients, percentile } from './http-client.js'
import type { FailoverRound, FailoverSummary, System } from './results.js'
import type { WardenCluster } from './warden.js'

const WRITERS = 16
const BEFORE_KILL_MS = 1_500
const AFTER_FIRST_WRITE_MS = 500
const ROUND_TIMEOUT_MS = 30_000
const PROBE_INTERVAL_MS = 20
const CATCH_UP_TIMEOUT_MS = 60_000

/** What the rounds need from a cluster, warden's or etcd's. */
interface FailoverTarget {
  system: System
  nodes(): string[]
  leader(): Promise<string>
  /** SIGKILL, sent before the returned promise exists (so the caller's clock starts after it), then the exit. */
  kill(node: string): Promise<void>
  restart(node: string): Promise<void>
  /** Whether `node` has applied everything the leader has committed. */
  caughtUp(node: string, leader: string): Promise<boolean>
  /**
   * One write of `key`: true when acknowledged; false when refused or unknown; throws on a network error. `fresh`
   * asks for a connection of its own (the probe), not one from the writers' keep-alive pool.
   */
  write(node: string, key: string, fresh?: boolean): Promise<boolean>
  /** The keys of `acknowledged` that a linearizable read does not find. */
  missing(acknowledged: string[], leader: string): Promise<number>
  /** Closes the writers' connections. */
  close(): void
}

export async function failoverRounds(ctx: BenchContext, target: FailoverTarget, rounds: number): Promise<void> {
  try {
    await runRounds(ctx, target, rounds)
  } finally {
    target.close()
  }
}

async function runRounds(ctx: BenchContext, target: FailoverTarget, rounds: number): Promise<void> {
  const agentTargets = { list: target.nodes() }
  const acknowledged: string[] = []
  let failed = 0
  const results: FailoverRound[] = []
  for (let round = 1; round <= rounds; round++) {
    ctx.progress.step(`failover: ${target.system} round ${round}/${rounds}`)
    const leader = await target.leader()
    agentTargets.list = target.nodes()
    let stop = false
    let killedAt = Number.POSITIVE_INFINITY
    let firstWriteAt = Number.POSITIVE_INFINITY
    let next = 0
    const writer = async (): Promise<void> => {
      while (!stop) {
        const list = agentTargets.list
        const node = list[next++ % list.length] ?? leader
        const key = randomUUID()
        const sentAt = performance.now()
        try {
          if (await target.write(node, key)) {
            acknowledged.push(key)
            if (sentAt >= killedAt && firstWriteAt === Number.POSITIVE_INFINITY) firstWriteAt = performance.now()
          } else failed++
        } catch {
          failed++ // Refused, reset or timed out: not acknowledged.
          await sleep(5) // A dead node refuses at once; without a pause the loop would spin.
        }
      }
    }
    const probe = async (): Promise<void> => {
      const list = agentTargets.list
      const node = list[next++ % list.length] ?? leader
      const key = randomUUID()
      try {
        if (await target.write(node, key, true)) {
          acknowledged.push(key)
          if (firstWriteAt === Number.POSITIVE_INFINITY) firstWriteAt = performance.now()
        } else failed++
      } catch {
        failed++
      }
    }
    const writers = Array.from({ length: WRITERS }, () => writer())
    await sleep(BEFORE_KILL_MS)
    agentTargets.list = target.nodes().filter((node) => node !== leader)
    const killing = target.kill(leader)
    // After the signal: a write sent before it could still have been served by the old leader.
    killedAt = performance.now()
    const probes: Array<Promise<void>> = []
    const deadline = killedAt + ROUND_TIMEOUT_MS
    while (firstWriteAt === Number.POSITIVE_INFINITY && performance.now() < deadline) {
      probes.push(probe())
      await sleep(PROBE_INTERVAL_MS)
    }
    await killing
    await sleep(AFTER_FIRST_WRITE_MS)
    stop = true
    await Promise.all([...writers, ...probes])
    const newLeader = await target.leader().catch(() => '')
    results.push({ round, killed: leader, firstWriteMs: Math.round(firstWriteAt - killedAt), newLeader })
    if (firstWriteAt === Number.POSITIVE_INFINITY) ctx.progress.note(`  failover ${target.system} round ${round}: no successful write within ${ROUND_TIMEOUT_MS} ms`)
    await target.restart(leader)
    const caughtUpBy = Date.now() + CATCH_UP_TIMEOUT_MS
    while (!(await target.caughtUp(leader, await target.leader()).catch(() => false))) {
      if (Date.now() > caughtUpBy) throw new Error(`failover: ${leader} did not catch up within ${CATCH_UP_TIMEOUT_MS} ms after its restart`)
      await sleep(100)
    }
  }
  ctx.progress.step(`failover: ${target.system} checking ${acknowledged.length} acknowledged writes`)
  const lost = await target.missing(acknowledged, await target.leader())
  const times = results.map((round) => round.firstWriteMs).filter((ms) => Number.isFinite(ms))
  const summary: FailoverSummary = {
    system: target.system,
    rounds: results,
    medianMs: Math.round(percentile(times, 0.5)),
    maxMs: times.length === results.length ? Math.max(...times) : Number.POSITIVE_INFINITY,
    acknowledged: acknowledged.length,
    lost,
    failed,
  }
  ctx.results.failover.push(summary)
  if (lost > 0) ctx.progress.note(`  failover ${target.system}: ${lost} ACKNOWLEDGED WRITES LOST`)
}

export function wardenFailoverTarget(warden: WardenCluster): FailoverTarget {
  const clients = keepAliveClients(WRITERS * 2)
  const ownConnections = freshConnections()
  return {
    system: 'warden',
    nodes: () => warden.nodes(),
    leader: async () => {
      await warden.refreshRoles()
      return warden.leader
    },
    kill: (node) => {
      const pid = warden.pid(node)
      const dataDir = warden.cluster.state().nodes[node]?.dataDir ?? '\0'
      if (!signalIfOurs(pid, dataDir, 'SIGKILL')) return Promise.reject(new Error(`${node} is not running`))
      // LocalCluster learns of the death by itself: restart() finds the pid gone and starts the node again.
      return (async () => {
        while (isOurs(pid, dataDir)) await sleep(5)
      })()
    },
    restart: (node) => warden.restart(node),
    caughtUp: async (node, leader) => {
      const statuses = await warden.cluster.status()
      const leaderStatus = statuses.find((status) => status.node === leader)
      const nodeStatus = statuses.find((status) => status.node === node)
      return leaderStatus !== undefined && nodeStatus !== undefined && nodeStatus.appliedIndex > 0 && nodeStatus.appliedIndex >= leaderStatus.commitIndex
    },
    write: async (node, key, fresh) => {
      const answer = await httpCall(fresh === true ? ownConnections : clients, warden.address(node), 'PUT', '/v1/acl/token', {
        token: warden.token,
        body: { AccessorID: key, Description: 'failover' },
        timeoutMs: 15_000,
      })
      return answer.status === 200
    },
    missing: async (acknowledged, leader) => {
      const list = await warden.call(leader, 'GET', '/v1/acl/tokens?consistent', { timeoutMs: 120_000 })
      if (list.status !== 200) throw new Error(`failover check: GET /v1/acl/tokens?consistent: ${list.status}`)
      const present = new Set((JSON.parse(list.text) as Array<{ AccessorID: string }>).map((token) => token.AccessorID))
      return acknowledged.filter((key) => !present.has(key)).length
    },
    close: () => {
      clients.close()
      ownConnections.close()
    },
  }
}

export function etcdFailoverTarget(etcd: EtcdCluster, valueBytes: number): FailoverTarget {
  const clients = keepAliveClients(WRITERS * 2)
  const ownConnections = freshConnections()
  const value = base64('v'.repeat(valueBytes))
  return {
    system: 'etcd',
    nodes: () => etcd.nodes(),
    leader: () => etcd.leader(),
    kill: (node) => etcd.kill(node),
    restart: (node) => etcd.restart(node),
    caughtUp: async (node, leader) => {
      const [mine, theirs] = await Promise.all([etcd.indexes(node), etcd.indexes(leader)])
      return mine.applied >= theirs.applied
    },
    write: async (node, key, fresh) => {
      const answer = await httpCall(fresh === true ? ownConnections : clients, etcd.address(node), 'POST', '/v3/kv/put', { body: { key: base64(`failover/${key}`), value }, timeoutMs: 15_000 })
      // The gateway answers errors (no leader, timeouts) as non-200 with an "error" field.
      return answer.status === 200 && !answer.text.includes('"error"')
    },
    missing: async (acknowledged, leader) => {
      const range = await etcd.post<{ kvs?: Array<{ key: string }> }>(
        leader,
        '/v3/kv/range',
        { key: base64('failover/'), range_end: base64('failover0'), keys_only: true },
        120_000,
      )
      const present = new Set((range.kvs ?? []).map((kv) => Buffer.from(kv.key, 'base64').toString().slice('failover/'.length)))
      return acknowledged.filter((key) => !present.has(key)).length
    },
    close: () => {
      clients.close()
      ownConnections.close()
    },
  }
}
