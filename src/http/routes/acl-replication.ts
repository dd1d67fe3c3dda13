/**
 * Consul's ACL replication status, `GET /v1/acl/replication`, with Consul's fields and order
 * (structs.ACLReplicationStatus) and two of warden's.
 *
 * - In the primary (or a datacenter on its own), replication never starts, so every field keeps its zero value, Go's
 *   zero time included, as Consul's primary answers (agent/consul/leader.go returns before initialising it there).
 * - In a secondary: Enabled, the source datacenter, ReplicationType `policies` (global tokens do not replicate yet),
 *   each stream's replicated index and the last success from the replicated state (the same on every node), and the
 *   last error from the replication loop, which runs on the leader: a follower reports none.
 *   `ReplicatedConfigEntryIndex` and `ReplicationLagSeconds` (how long the oldest change seen at the primary and not
 *   yet applied here has waited; 0 when caught up, and on followers) are warden's own.
 *
 * No token is needed (Consul's ACL.ReplicationStatus: the status leaks nothing sensitive and health checks must be
 * able to read it). Consul forces the read to be consistent, forwarding it to the leader: here it passes the
 * consistent read barrier, so without a leader it fails as a consistent read does (503 no_leader).
 */
import Router from '@koa/router'
import { InvalidInputError, NotFoundError } from '../../lib/errors.js'
import { changeFeedOf } from '../../state/change-feed.js'
import { PAGE_ITEMS_DEFAULT, PAGE_ITEMS_MAX, replicationPage, STREAM_TABLES } from '../../state/replication-pages.js'
import { REPLICATED_STREAMS, replicationRecords, type ReplicatedStream } from '../../state/replication.js'
import type { ApiContext, AppServices, ReplicationStatusView } from '../context.js'
import { serveRead } from '../read.js'
import { queryParam, requirePermission } from '../request.js'

/** Go's zero time.Time as encoding/json writes it. */
const GO_ZERO_TIME = '0001-01-01T00:00:00Z'

async function replicationStatus(ctx: ApiContext): Promise<void> {
  const { cluster, settings, replication } = ctx.state.app
  await cluster.readBarrier('consistent')
  if (settings.datacenter === settings.primaryDatacenter || replication === undefined) {
    ctx.body = {
      Enabled: false,
      Running: false,
      SourceDatacenter: '',
      ReplicationType: '',
      ReplicatedIndex: 0,
      ReplicatedRoleIndex: 0,
      ReplicatedTokenIndex: 0,
      LastSuccess: GO_ZERO_TIME,
      LastError: GO_ZERO_TIME,
      LastErrorMessage: '',
    }
    return
  }
  ctx.body = await secondaryReplicationStatus(ctx.state.app, localLoopView(replication.status()))
}

/** What the replication loop reports of itself; only the leader, where it runs, knows (a follower's is not running). */
export interface ReplicationLoopView {
  running: boolean
  lagSeconds: number
  tokens: boolean
  lastError: { at: number; message: string } | undefined
}

/** This node's loop, the most recent error of any stream. */
export function localLoopView(status: ReplicationStatusView): ReplicationLoopView {
  let lastError: { at: number; message: string } | undefined
  for (const stream of status.streams.values()) {
    if (stream.lastErrorAt !== undefined && stream.lastErrorMessage !== '' && (lastError === undefined || stream.lastErrorAt > lastError.at)) lastError = { at: stream.lastErrorAt, message: stream.lastErrorMessage }
  }
  return { running: status.running, lagSeconds: status.lagSeconds, tokens: status.tokens, lastError }
}

/**
 * A secondary's status: the replicated part from the state (the same on every node), the loop's from `loop` (this
 * node's for GET /v1/acl/replication, the leader's for the cluster view).
 */
export async function secondaryReplicationStatus(app: AppServices, loop: ReplicationLoopView): Promise<Record<string, unknown>> {
  const records = await replicationRecords(app.state.reader)
  const successes = [...records.values()].map((record) => record.LastSuccess).sort()
  return {
    Enabled: true,
    Running: loop.running,
    SourceDatacenter: app.settings.primaryDatacenter,
    ReplicationType: loop.tokens ? 'tokens' : 'policies',
    ReplicatedIndex: records.get('policies')?.RemoteIndex ?? 0,
    ReplicatedRoleIndex: records.get('roles')?.RemoteIndex ?? 0,
    ReplicatedTokenIndex: records.get('tokens')?.RemoteIndex ?? 0,
    LastSuccess: successes.at(-1) ?? GO_ZERO_TIME,
    LastError: loop.lastError === undefined ? GO_ZERO_TIME : new Date(loop.lastError.at).toISOString(),
    LastErrorMessage: loop.lastError?.message ?? '',
    ReplicatedConfigEntryIndex: records.get('config')?.RemoteIndex ?? 0,
    // The leader's measure (the loop runs there); a follower, which cannot tell, reports 0.
    ReplicationLagSeconds: loop.running ? Math.round(loop.lagSeconds * 1000) / 1000 : 0,
  }
}

/**
 * `GET /v1/internal/acl/replication/:stream` (warden's own, not the contract's): what a secondary's replication
 * loop reads here, in pages (state/replication-pages.ts). Served only to requests forwarded from another datacenter
 * over the WAN links (in-process, so their remote address is `wan:<server>`): to anything else it does not exist.
 *
 * Parameters: `since` (the index the secondary holds everything up to; records changed after it come whole),
 * `mode=delta` (what changed since, as one delta, when this server's feed has it and it is small enough; a walk page
 * otherwise), `cursor` (where a full walk goes on), `limit` (records a
 * page, at most PAGE_ITEMS_MAX), and the blocking `index`/`wait`. Consistent as any default read (the leader's
 * view). Policies and roles need acl:read, as their lists; tokens (their SecretIDs come along) and config entries
 * (of every kind) need acl:write, which can mint a token that reads them anyway.
 */
async function replicationStream(ctx: ApiContext): Promise<void> {
  if (!String(ctx.req.socket.remoteAddress ?? '').startsWith('wan:')) throw new NotFoundError(`${ctx.path}: no such endpoint (it serves servers of other datacenters, over the WAN links only)`)
  const stream = ctx.params['stream'] as ReplicatedStream
  if (!REPLICATED_STREAMS.includes(stream)) throw new InvalidInputError('stream', `must be one of ${REPLICATED_STREAMS.join(', ')}`)
  const since = integerParam(ctx, 'since', 0, Number.MAX_SAFE_INTEGER, 0)
  const limit = integerParam(ctx, 'limit', 1, PAGE_ITEMS_MAX, PAGE_ITEMS_DEFAULT)
  const cursor = queryParam(ctx, 'cursor') ?? ''
  const mode = queryParam(ctx, 'mode') ?? 'walk'
  if (mode !== 'walk' && mode !== 'delta') throw new InvalidInputError('mode', 'must be walk or delta')
  if (!/^[A-Za-z0-9_-]{0,2048}$/.test(cursor)) throw new InvalidInputError('cursor', 'must be the Next of an earlier page')
  const { state } = ctx.state.app
  const feed = changeFeedOf(state)
  await serveRead(ctx, { table: STREAM_TABLES[stream], consistency: 'none', blocking: true }, async () => {
    await requirePermission(ctx, 'acl', stream === 'policies' || stream === 'roles' ? 'read' : 'write')
    return { body: await replicationPage(state.db, feed, stream, { since, cursor, limit, delta: mode === 'delta' }) }
  })
}

function integerParam(ctx: ApiContext, name: string, min: number, max: number, fallback: number): number {
  const text = queryParam(ctx, name)
  if (text === undefined || text === '') return fallback
  const value = Number(text)
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value) || value < min || value > max) throw new InvalidInputError(name, `must be an integer from ${min} to ${max}`)
  return value
}

export function aclReplicationRoutes(router: Router): void {
  router.get('/v1/acl/replication', (ctx) => replicationStatus(ctx as ApiContext))
  router.get('/v1/internal/acl/replication/:stream', (ctx) => replicationStream(ctx as ApiContext))
}
