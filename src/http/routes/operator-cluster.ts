/**
 * `GET /v1/operator/cluster` (issue 21, warden's own): the cluster page in one request, answered by any server. Every
 * server of this datacenter as the leader sees it (rpc/cluster-status.ts: name, address, role, alive or failed, its
 * own term, commit, applied and last index, the leader's match index and milliseconds since it last answered), the
 * leader, the datacenters this server knows, and in a secondary the ACL replication status with the loop's part from
 * the leader (as GET /v1/acl/replication answers it), and the cloud link's status. Needs operator:read.
 *
 * A blocking query (`?index=N&wait=D`): X-Service-Index moves when a server's role, liveness or term, the leader, the
 * membership or the replication loop's state changes, and at most once a second when an index moves; never for a
 * heartbeat. `?stale` answers this server's own view (its own state, no other server asked, no leader needed), for a
 * server cut off from the leader.
 */
import Router from '@koa/router'
import { LINK_NAME, LINK_STATUS_KEY, linkSpec } from '../../state/link.js'
import { getRecord } from '../../state/tables.js'
import type { ClusterView, ReplicationDetail, ServerStatus } from '../../rpc/index.js'
import type { ApiContext } from '../context.js'
import { setResponseHeader } from '../headers.js'
import { blockingOf, consistencyOf, requirePermission } from '../request.js'
import { localLoopView, secondaryReplicationStatus, type ReplicationLoopView } from './acl-replication.js'

async function clusterStatus(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'operator', 'read')
  const app = ctx.state.app
  const blocking = blockingOf(ctx)
  const stale = consistencyOf(ctx).mode === 'stale'
  // Stops the wait when the client hangs up or the agent stops.
  const hangUp = new AbortController()
  const onClose = (): void => hangUp.abort()
  ctx.res.once('close', onClose)
  // A client that hung up while the token was resolved has emitted 'close' already.
  if (ctx.res.destroyed) hangUp.abort()
  let answer
  try {
    answer = await app.cluster.clusterStatus({
      ...(blocking === undefined ? {} : { index: blocking.index, waitMs: blocking.waitMs }),
      stale,
      signal: AbortSignal.any([hangUp.signal, app.closing]),
    })
  } finally {
    ctx.res.off('close', onClose)
  }
  if (blocking !== undefined) {
    // As every blocking query: a token revoked during the wait is refused.
    ctx.state.caller = undefined
    await requirePermission(ctx, 'operator', 'read')
  }
  const { view } = answer
  const body = {
    Datacenter: app.settings.datacenter,
    PrimaryDatacenter: app.settings.primaryDatacenter,
    Datacenters: app.datacenters?.() ?? [app.settings.datacenter],
    AnsweredBy: view.answeredBy,
    Leader: view.leader ?? '',
    LeaderAddress: view.servers.find((server) => server.id === view.leader)?.address ?? '',
    Term: view.term,
    Servers: view.servers.map(renderServer).sort((a, b) => (a.Name < b.Name ? -1 : a.Name > b.Name ? 1 : 0)),
    Replication: await replicationOf(ctx, view),
    CloudLink: await cloudLinkOf(ctx),
  }
  setResponseHeader(ctx, 'Index', String(answer.index))
  setResponseHeader(ctx, 'KnownLeader', String(view.leader !== null))
  setResponseHeader(ctx, 'LastContact', String(app.cluster.lastContactMs()))
  setResponseHeader(ctx, 'Effective-Consistency', stale ? 'stale' : 'leader')
  ctx.body = body
}

function renderServer(server: ServerStatus): Record<string, unknown> & { Name: string } {
  return {
    Name: server.id,
    Address: server.address,
    Role: server.leader ? 'leader' : server.voter ? 'follower' : 'non-voter',
    Voter: server.voter,
    Leader: server.leader,
    Status: server.alive ? 'alive' : 'failed',
    // Its own report; null when it did not answer (Error says why) or in a ?stale view of another server.
    Term: server.own?.term ?? null,
    CommitIndex: server.own?.commitIndex ?? null,
    AppliedIndex: server.own?.appliedIndex ?? null,
    LastIndex: server.own?.lastIndex ?? null,
    // The leader's measures of it.
    MatchIndex: server.matchIndex ?? null,
    LastContactMs: server.lastContactMs ?? null,
    ...(server.error === undefined ? {} : { Error: server.error }),
  }
}

/** In a secondary, GET /v1/acl/replication's answer with the loop's part from the view's node; null in the primary. */
async function replicationOf(ctx: ApiContext, view: ClusterView): Promise<Record<string, unknown> | null> {
  const app = ctx.state.app
  if (app.settings.datacenter === app.settings.primaryDatacenter || app.replication === undefined) return null
  const reported = view.details['replication'] as Partial<ReplicationDetail> | undefined
  const loop: ReplicationLoopView =
    typeof reported?.running === 'boolean' && typeof reported.lagSeconds === 'number'
      ? {
          running: reported.running,
          lagSeconds: reported.lagSeconds,
          tokens: reported.tokens === true,
          lastError: typeof reported.lastErrorAt === 'number' ? { at: reported.lastErrorAt, message: String(reported.lastErrorMessage ?? '') } : undefined,
        }
      : localLoopView(app.replication.status())
  return secondaryReplicationStatus(app, loop)
}

/** The link's resource and the status the link controller recorded; null when the cluster is not linked. */
async function cloudLinkOf(ctx: ApiContext): Promise<Record<string, unknown> | null> {
  const link = await getRecord(ctx.state.app.state.reader, linkSpec, LINK_NAME)
  if (link === undefined) return null
  const linked = link.status?.conditions.find((condition) => condition.type === 'linked')
  return {
    ResourceID: link.data.resourceId,
    // True or false once the controller has tried these credentials; null before.
    Linked: linked === undefined || link.status?.observedGeneration !== link.generation ? null : linked.state === 'STATE_TRUE',
    Status: link.status === undefined ? null : { [LINK_STATUS_KEY]: link.status },
  }
}

export function clusterRoutes(router: Router): void {
  router.get('/v1/operator/cluster', (ctx) => clusterStatus(ctx as ApiContext))
}
