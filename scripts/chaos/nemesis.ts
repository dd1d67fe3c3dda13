/**
 * The fault schedule: every few seconds (seeded) the nemesis either breaks one more node or mends one, never having
 * more than a minority broken at once, so a majority can always elect and commit. A fault is a kill -9 (mended by a
 * restart on the same data dir), a pause (SIGSTOP; mended by SIGCONT) or a partition at the link proxies (mended by
 * a heal). Half the faults aim at whichever node leads at that moment, since leader faults are the ones that test
 * failover. Every action is recorded with its time, so failover times can be read off the history afterwards.
 */
import type { SeededRng } from '../../src/lib/rng.js'

export type FaultKind = 'kill' | 'pause' | 'partition'
export type NemesisAction = FaultKind | 'restart' | 'resume' | 'heal'

export interface NemesisEvent {
  /** ms on the workload clock, just before the action was taken. */
  at: number
  /** When the action had taken effect (the process gone or stopped, the links cut). */
  done?: number
  action: NemesisAction
  node: string
  /** For faults: whether the node led the cluster when it was hit. */
  wasLeader?: boolean
  /**
   * For partitions: whether the node was cut off a few election timeouts later (it neither leads nor hears from a
   * leader, and no other node follows it). False means the fault never happened, whatever the history says.
   */
  isolated?: boolean
  /** How the nodes looked when `isolated` was decided. */
  observed?: string
  error?: string
}

export interface NodeView {
  node: string
  role: string
  /** The node this one follows ('' for none); absent when the cluster tool does not say. */
  leader?: string
  lastContactMs: number
}

/** The part of cluster/lib.ts LocalCluster the nemesis uses. */
export interface FaultTarget {
  leader(timeoutMs?: number): Promise<string>
  kill(node: string): Promise<void>
  restart(node: string): Promise<void>
  pause(node: string): Promise<void>
  resume(node: string): Promise<void>
  partition(node: string): Promise<void>
  heal(): Promise<void>
  status(): Promise<NodeView[]>
}

export interface NemesisOptions {
  nodes: string[]
  now: () => number
  /** No new fault after this time (workload clock); everything is mended before `run` returns. */
  faultsUntil: number
  intervalMsMin: number
  intervalMsMax: number
  /** How long after a partition to look whether it isolated the node: a few election timeouts. */
  isolationCheckMs: number
  signal: AbortSignal
}

const MEND: Record<FaultKind, NemesisAction> = { kill: 'restart', pause: 'resume', partition: 'heal' }

export class Nemesis {
  readonly events: NemesisEvent[] = []
  /** Broken nodes and how. */
  private readonly broken = new Map<string, FaultKind>()

  constructor(
    private readonly cluster: FaultTarget,
    private readonly rng: SeededRng,
    private readonly options: NemesisOptions,
  ) {}

  /** Breaks and mends nodes until `faultsUntil` (or abort), then mends everything. */
  async run(): Promise<void> {
    const { nodes, now, faultsUntil, signal } = this.options
    const minority = Math.floor((nodes.length - 1) / 2)
    try {
      for (;;) {
        const pauseMs = this.rng.between(this.options.intervalMsMin, this.options.intervalMsMax)
        if (now() + pauseMs >= faultsUntil) break
        if (!(await sleep(pauseMs, signal))) break
        const breakOne = this.broken.size < minority && (this.broken.size === 0 || this.rng.chance(0.5))
        if (breakOne) await this.injectFault()
        else await this.mendOne()
      }
    } finally {
      await this.mendAll()
    }
  }

  private async injectFault(): Promise<void> {
    const kind = (['kill', 'pause', 'partition'] as const)[this.rng.nextInt(3)]!
    const aimAtLeader = this.rng.chance(0.5)
    const healthy = this.options.nodes.filter((node) => !this.broken.has(node))
    const fallback = healthy[this.rng.nextInt(healthy.length)]!
    // With a minority broken a leader is elected within an election timeout or two. If none is found the fault falls
    // on the node drawn above, so the schedule's draws stay the same whatever the timing.
    const leader = await this.cluster.leader(3_000).catch(() => undefined)
    const node = aimAtLeader && leader !== undefined && healthy.includes(leader) ? leader : fallback
    const event = await this.act(kind, node, node === leader)
    this.broken.set(node, kind)
    if (kind === 'partition' && event.error === undefined && (await sleep(this.options.isolationCheckMs, this.options.signal))) {
      await this.observeIsolation(event)
    }
  }

  /** Whether a partitioned node is really cut off: not leading, not following anyone it still hears, not followed. */
  private async observeIsolation(event: NemesisEvent): Promise<void> {
    const views = await this.cluster.status().catch(() => undefined)
    if (views === undefined) return
    const target = views.find((view) => view.node === event.node)
    if (target === undefined) return
    const CONTACT_MS = 1_000
    const hearsLeader = target.role === 'leader' || (target.leader !== undefined && target.leader !== '' && target.lastContactMs < CONTACT_MS)
    const followed = views.some((view) => view.node !== event.node && view.leader === event.node && view.lastContactMs < CONTACT_MS)
    event.isolated = !hearsLeader && !followed
    event.observed = views.map((view) => `${view.node} ${view.role}${view.leader ? ` following ${view.leader}` : ''} contact ${view.lastContactMs} ms`).join('; ')
  }

  private async mendOne(): Promise<void> {
    const brokenNodes = [...this.broken.keys()]
    const node = brokenNodes[this.rng.nextInt(brokenNodes.length)]
    if (node === undefined) return
    await this.mend(node)
  }

  private async mend(node: string): Promise<void> {
    const kind = this.broken.get(node)
    if (kind === undefined) return
    await this.act(MEND[kind], node)
    if (kind === 'partition') {
      // A heal reopens every link: every partitioned node is mended at once.
      for (const [other, otherKind] of this.broken) if (otherKind === 'partition') this.broken.delete(other)
    }
    this.broken.delete(node)
  }

  async mendAll(): Promise<void> {
    for (const node of [...this.broken.keys()]) await this.mend(node)
  }

  private async act(action: NemesisAction, node: string, wasLeader?: boolean): Promise<NemesisEvent> {
    const event: NemesisEvent = { at: this.options.now(), action, node, ...(wasLeader === undefined ? {} : { wasLeader }) }
    this.events.push(event)
    try {
      switch (action) {
        case 'kill':
          await this.cluster.kill(node)
          break
        case 'restart':
          await this.cluster.restart(node)
          break
        case 'pause':
          await this.cluster.pause(node)
          break
        case 'resume':
          await this.cluster.resume(node)
          break
        case 'partition':
          await this.cluster.partition(node)
          break
        case 'heal':
          await this.cluster.heal()
          break
      }
    } catch (error) {
      // Recorded, not thrown: a failed fault is a finding about the tool, and the run must still mend and check.
      event.error = error instanceof Error ? error.message : String(error)
    }
    event.done = this.options.now()
    return event
  }
}

/** Resolves true after `ms`, or false at once when `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false)
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer)
      resolve(false)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve(true)
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
