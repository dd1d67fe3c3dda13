/**
 * The cluster as its leader sees it, for the UI's Cluster page and `GET /v1/operator/cluster` (issue 21): every
 * server's role and whether it is alive (the leader's judgement, RaftReplica.memberAlive), its own term, commit,
 * applied and last index (asked of it over its peer link, `raft-state`), and the leader's measures of it (match index,
 * milliseconds since it last answered); plus what the leader's controllers report (ACL replication) as details.
 *
 * Blocking queries. Every answer carries an index, and a query naming the current index waits for the next one. The
 * index moves only when the view changes in a way worth a look, never on a heartbeat:
 * - at once when the leader, the term, the membership, a server's role, liveness or own term, or a detail's change
 *   key changes (the "significant" key);
 * - when an index of any server moves (commit, applied, last, match), at most once per PROGRESS_INTERVAL_MS, so that
 *   a write-heavy cluster wakes its watchers once a second, not once a write;
 * - never for the milliseconds since a server last answered, which change all the time.
 * While queries wait, this node samples the view every SAMPLE_INTERVAL_MS (asking the others for their state, on the
 * leader); nothing is sampled while nobody waits. The index is the node's term times 2^32 plus a count of its moves
 * in that term: each leader counts on its own, and a later leader's term is higher, so an index one leader issued can
 * never stand for another leader's view (a watcher holding the dead leader's index is answered at once by the new one).
 *
 * Followers forward a query to the leader (`cluster-status`); the leader holds a blocking one at most HOLD_MS_MAX and
 * the follower asks again until its own wait ends. Waiting queries of one follower with one index share a single
 * request to the leader, so the leader holds at most one (two around a change) per follower, never one per client.
 */
import { sleep } from '../lib/environment.js'
import { WardenError } from '../lib/errors.js'
import type { RaftReplica } from '../replica/raft-replica.js'
import { TransportError } from '../transport/index.js'

/** A server's own Raft state, as it reports it. */
export interface OwnRaftState {
  role: string
  term: number
  commitIndex: number
  appliedIndex: number
  lastIndex: number
}

export interface ServerStatus {
  id: string
  /** Its cluster address, "" when not known. */
  address: string
  voter: boolean
  leader: boolean
  /** Alive by RaftReplica.memberAlive on the answering node (the leader: a Raft answer within an election timeout). */
  alive: boolean
  /** Its own state; undefined when it did not answer (then `error` says why), and for others in a local view. */
  own?: OwnRaftState
  error?: string
  /** The leader's view of it: how far its log matches the leader's (the leader's own last index for itself). */
  matchIndex?: number
  /** Milliseconds since it last answered the leader (0 for the leader itself); undefined in a local view. */
  lastContactMs?: number
}

export interface ClusterView {
  /** The node whose view this is: the leader, or the node asked with ?stale. */
  answeredBy: string
  leader: string | null
  term: number
  servers: ServerStatus[]
  /** What the answering node's controllers report, by name (`replication`). */
  details: Record<string, unknown>
}

export interface ClusterAnswer {
  index: number
  view: ClusterView
}

export interface ClusterQuery {
  /** Wait while the index is this one (a blocking query); absent or 0: answer at once. */
  index?: number
  waitMs?: number
  /** Answer from this node's own view, without the leader. */
  stale?: boolean
  /** Aborted when the client hung up or the agent stops: the query answers at once with what it has. */
  signal?: AbortSignal
}

/** A detail a controller reports: its value, and the part of it whose change should wake watchers. */
export interface StatusDetail {
  value: unknown
  changeKey: string
}

/**
 * The `replication` detail a secondary's leader reports (controllers/acl-replication.ts): the loop's own state, which
 * only the leader, where it runs, knows. Times are milliseconds since the epoch.
 */
export interface ReplicationDetail {
  running: boolean
  lagSeconds: number
  tokens: boolean
  lastErrorAt?: number
  lastErrorMessage: string
}

/** A view, with the change keys of its details. */
interface Sample {
  view: ClusterView
  detailKeys: string[]
}

export const SAMPLE_INTERVAL_MS = 500
export const PROGRESS_INTERVAL_MS = 1_000
/** How long the leader holds one forwarded blocking query; the follower asks again after. */
export const HOLD_MS_MAX = 10_000
/** How long the leader waits for a server's own state; a server slower than this is shown without it. */
export const ASK_TIMEOUT_MS = 1_000
/** A sample younger than this answers a query that does not block, instead of asking every server again. */
const FRESH_MS = 250
/** The index's share of one term (see the file's comment): terms up to 2^21 keep it a safe integer. */
const TERM_SCALE = 2 ** 32
/** Queries waiting on this node at once, local and forwarded; more are refused (429), as other blocking queries are. */
export const WAITERS_MAX = 4_096

export class ClusterStatusService {
  private index = 0
  /** The change keys and the view of the last move of the index: what the index stands for. */
  private published: { significant: string; progress: string; view: ClusterView } | undefined
  private lastBumpAt = Number.NEGATIVE_INFINITY
  private latest: { view: ClusterView; at: number } | undefined
  private sampling: Promise<Sample> | undefined
  private sampler: Promise<void> | undefined
  private readonly waiters = new Set<() => void>()
  private readonly details = new Map<string, () => StatusDetail>()
  /** Forwarded queries under way, by leader and index: waiting queries with one index share one. */
  private readonly forwarded = new Map<string, Promise<ClusterAnswer>>()
  /** Blocking queries of this follower waiting on the leader's answers (bounded as local waiters are). */
  private forwardedWaiters = 0

  constructor(
    private readonly replica: RaftReplica,
    private readonly ownState: () => OwnRaftState,
  ) {
    replica.handleRequests('raft-state', async () => this.ownState())
    replica.handleRequests('cluster-status', async (_from, request) => {
      if (!replica.isLeader()) throw new WardenError('no_leader', 'this node is no longer the leader; retry')
      const index = typeof request['index'] === 'number' && Number.isSafeInteger(request['index']) ? request['index'] : undefined
      const waitMs = typeof request['waitMs'] === 'number' && Number.isFinite(request['waitMs']) ? Math.min(Math.max(0, request['waitMs']), HOLD_MS_MAX) : 0
      return this.local({ ...(index === undefined ? {} : { index }), waitMs })
    })
  }

  /** Adds a detail to every view this node answers; the returned function removes it. */
  addDetail(name: string, provider: () => StatusDetail): () => void {
    this.details.set(name, provider)
    return () => {
      if (this.details.get(name) === provider) this.details.delete(name)
    }
  }

  /** The leader's view (forwarded to it from a follower), or this node's own with `stale`. */
  async status(query: ClusterQuery): Promise<ClusterAnswer> {
    if (query.stale === true) return this.local(query)
    const { environment } = this.replica
    const waitUntil = environment.now() + (query.waitMs ?? 0)
    const deadline = waitUntil + this.replica.leaderWaitMs
    for (;;) {
      this.replica.checkRunning()
      // A retry after a change of leader waits what is left of the client's wait, not all of it again.
      query = query.waitMs === undefined ? query : { ...query, waitMs: Math.max(0, waitUntil - environment.now()) }
      if (this.replica.isLeader()) {
        const answer = await this.local(query)
        // Leadership lost during the wait: the leader's view is another node's now, unless the wait is over.
        if (this.replica.isLeader() || answer.index !== query.index || query.signal?.aborted === true) return answer
        continue
      }
      const leader = this.replica.leader
      if (leader === null) {
        await this.replica.waitForLeader(Math.min(deadline, environment.now() + this.replica.leaderWaitMs))
        continue
      }
      try {
        return await this.fromLeader(leader, query)
      } catch (error) {
        // The leader went away or stepped down mid-request: ask the next one, within the leader wait.
        const retry = error instanceof TransportError || (error instanceof WardenError && error.code === 'no_leader')
        if (!retry || environment.now() >= deadline) throw error instanceof TransportError ? new WardenError('no_leader', `the leader ${leader} did not answer: ${error.message}`) : error
        await this.replica.pause(50)
      }
    }
  }

  /** This node's view, waiting while the index is `query.index`. */
  private async local(query: ClusterQuery): Promise<ClusterAnswer> {
    await this.refresh(false)
    const waitMs = query.waitMs ?? 0
    if (query.index === undefined || query.index === 0 || query.index !== this.index || waitMs <= 0 || query.signal?.aborted === true) return this.answer()
    if (this.waiters.size >= WAITERS_MAX) throw new WardenError('rate_limited', `too many cluster queries are waiting on this node (at most ${WAITERS_MAX}); retry later`)
    const { signal } = query
    await new Promise<void>((resolve) => {
      const finish = (): void => {
        this.waiters.delete(finish)
        timer.cancel()
        signal?.removeEventListener('abort', finish)
        resolve()
      }
      const timer = this.replica.environment.setTimeout(finish, waitMs)
      signal?.addEventListener('abort', finish, { once: true })
      this.waiters.add(finish)
      this.startSampler()
    })
    // A wait that ran out answers what is now: the sampler keeps that under SAMPLE_INTERVAL_MS old. A client that hung
    // up is answered nothing, and costs no round of peer requests.
    if (signal?.aborted !== true) await this.refresh(false)
    return this.answer()
  }

  /**
   * The view the index stands for, so that a client never holds an index older than what it saw (it would be woken
   * for a change it has seen), with each server's milliseconds since it last answered from the latest sample: they
   * never move the index, and a stale figure there would hide a server going quiet.
   */
  private answer(): ClusterAnswer {
    const latest = this.latest
    const published = this.published
    if (latest === undefined || published === undefined) throw new WardenError('internal', 'the cluster view was never sampled')
    const contact = new Map(latest.view.servers.map((server) => [server.id, server.lastContactMs]))
    const servers = published.view.servers.map((server) => {
      const lastContactMs = contact.get(server.id)
      return lastContactMs === undefined ? server : { ...server, lastContactMs }
    })
    return { index: this.index, view: { ...published.view, servers } }
  }

  /** Samples while anyone waits, one sample at a time. */
  private startSampler(): void {
    if (this.sampler !== undefined) return
    this.sampler = (async () => {
      while (this.waiters.size > 0 && !this.replica.isStopped) {
        await this.replica.pause(SAMPLE_INTERVAL_MS)
        if (this.waiters.size === 0) break
        await this.refresh(true).catch(() => undefined)
      }
    })().finally(() => {
      this.sampler = undefined
      // A waiter that came as the loop ended has it started again.
      if (this.waiters.size > 0 && !this.replica.isStopped) this.startSampler()
    })
  }

  /** Takes a sample (or joins the one under way; reuses a fresh one unless `force`) and moves the index if due. */
  private async refresh(force: boolean): Promise<void> {
    if (!force && this.latest !== undefined && this.replica.environment.now() - this.latest.at < FRESH_MS) return
    this.sampling ??= this.sample().finally(() => (this.sampling = undefined))
    this.publish(await this.sampling)
  }

  private publish({ view, detailKeys }: Sample): void {
    const now = this.replica.environment.now()
    this.latest = { view, at: now }
    const keys = changeKeys(view, detailKeys)
    const published = this.published
    const significant = published === undefined || published.significant !== keys.significant
    const progressed = published !== undefined && published.progress !== keys.progress && now - this.lastBumpAt >= PROGRESS_INTERVAL_MS
    if (!significant && !progressed) return
    const base = this.ownState().term * TERM_SCALE
    this.index = Number.isSafeInteger(base + TERM_SCALE) ? Math.max(this.index + 1, base + 1) : this.index + 1
    this.published = { ...keys, view }
    this.lastBumpAt = now
    for (const wake of [...this.waiters]) wake()
  }

  private async sample(): Promise<Sample> {
    const replica = this.replica
    const own = this.ownState()
    const leading = replica.isLeader()
    const followers = new Map(replica.followers().map((follower) => [follower.id, follower]))
    const servers = await Promise.all(
      replica.membershipChanges.membership().servers.map(async (server): Promise<ServerStatus> => {
        const status: ServerStatus = { ...server, leader: server.id === replica.leader, alive: replica.memberAlive(server.id) }
        if (server.id === replica.nodeName) return { ...status, own, ...(leading ? { matchIndex: own.lastIndex, lastContactMs: 0 } : {}) }
        if (!leading) return status
        const follower = followers.get(server.id)
        if (follower !== undefined) Object.assign(status, { matchIndex: follower.matchIndex, lastContactMs: follower.lastContactMs })
        return { ...status, ...(await this.ask(server.id)) }
      }),
    )
    const details: Record<string, unknown> = {}
    const detailKeys: string[] = []
    for (const [name, provider] of this.details) {
      const detail = provider()
      details[name] = detail.value
      detailKeys.push(name, detail.changeKey)
    }
    return { view: { answeredBy: replica.nodeName, leader: replica.leader, term: own.term, servers, details }, detailKeys }
  }

  /** A server's own state, or why it is missing. */
  private async ask(id: string): Promise<{ own?: OwnRaftState; error?: string }> {
    if (!this.replica.membershipChanges.linkOpen(id)) return { error: 'no open link to it' }
    try {
      const answer = (await this.replica.links.request(id, { kind: 'raft-state' }, ASK_TIMEOUT_MS)) as Partial<OwnRaftState> | undefined
      if (typeof answer?.term !== 'number' || typeof answer.appliedIndex !== 'number') return { error: 'it answered in a form this node does not know' }
      return { own: { role: String(answer.role), term: answer.term, commitIndex: Number(answer.commitIndex), appliedIndex: answer.appliedIndex, lastIndex: Number(answer.lastIndex) } }
    } catch (error) {
      // An older build refuses the request kind; a slow or cut-off server times out. Either way the view goes on.
      return { error: error instanceof WardenError && error.code === 'invalid_input' ? 'it does not report its state (an older version)' : `it did not answer: ${(error as Error).message}` }
    }
  }

  /**
   * The leader's answer. A blocking query asks with its index, for at most HOLD_MS_MAX a request, until the index
   * moves or its own wait ends; queries with the same index share the request under way.
   */
  private async fromLeader(leader: string, query: ClusterQuery): Promise<ClusterAnswer> {
    const environment = this.replica.environment
    const blocking = query.index !== undefined && query.index !== 0 && (query.waitMs ?? 0) > 0
    if (!blocking) return this.forward(leader, undefined)
    if (this.forwardedWaiters >= WAITERS_MAX) throw new WardenError('rate_limited', `too many cluster queries are waiting on this node (at most ${WAITERS_MAX}); retry later`)
    this.forwardedWaiters += 1
    try {
      const deadline = environment.now() + (query.waitMs ?? 0)
      for (;;) {
        const remaining = deadline - environment.now()
        if (remaining <= 0 || query.signal?.aborted === true) return await this.forward(leader, undefined)
        const shared = this.forward(leader, query.index)
        const outcome = await Promise.race([shared, sleep(environment, remaining, query.signal).then(() => undefined)])
        if (outcome === undefined) return await this.forward(leader, undefined)
        if (outcome.index !== query.index || this.replica.leader !== leader) return outcome
      }
    } finally {
      this.forwardedWaiters -= 1
    }
  }

  private forward(leader: string, index: number | undefined): Promise<ClusterAnswer> {
    const key = `${leader}\u0000${index ?? 'now'}`
    let running = this.forwarded.get(key)
    if (running === undefined) {
      const waitMs = index === undefined ? 0 : HOLD_MS_MAX
      const request = { kind: 'cluster-status', ...(index === undefined ? {} : { index, waitMs }) }
      running = this.replica.links
        .request(leader, request, waitMs + ASK_TIMEOUT_MS * 2 + 2_000)
        .then(
          (answer) => checkedAnswer(leader, answer),
          (error: unknown) => {
            // A leader of an older version does not know the request: say so, rather than blame the caller's input.
            if (error instanceof WardenError && error.code === 'invalid_input') throw new WardenError('internal', `the leader ${leader} does not serve the cluster status (an older version?); ask with ?stale for this node's view`)
            throw error
          },
        )
        .finally(() => this.forwarded.delete(key))
      this.forwarded.set(key, running)
    }
    return running
  }
}

/** What moves the index at once, and what moves it at most once per PROGRESS_INTERVAL_MS. */
function changeKeys(view: ClusterView, detailKeys: readonly string[]): { significant: string; progress: string } {
  const significant = JSON.stringify([
    view.answeredBy,
    view.leader,
    view.term,
    view.servers.map((server) => [server.id, server.address, server.voter, server.leader, server.alive, server.own?.role, server.own?.term, server.error === undefined]),
    detailKeys,
  ])
  const progress = JSON.stringify(view.servers.map((server) => [server.own?.commitIndex, server.own?.appliedIndex, server.own?.lastIndex, server.matchIndex]))
  return { significant, progress }
}

/** A leader's answer as it crossed the wire; anything else is a leader this node does not understand. */
function checkedAnswer(leader: string, answer: unknown): ClusterAnswer {
  const candidate = answer as Partial<ClusterAnswer> | undefined
  if (typeof candidate?.index !== 'number' || typeof candidate.view !== 'object' || candidate.view === null || !Array.isArray(candidate.view.servers)) {
    throw new WardenError('internal', `the leader ${leader} answered the cluster status in a form this node does not know (an older version?)`)
  }
  return candidate as ClusterAnswer
}
