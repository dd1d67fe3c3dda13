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
import { replicationRecords } from '../../state/replication.js'
import type { ApiContext } from '../context.js'

/** Go's zero time.Time as encoding/json writes it. */
const GO_ZERO_TIME = '0001-01-01T00:00:00Z'

async function replicationStatus(ctx: ApiContext): Promise<void> {
  const { cluster, settings, replication, state } = ctx.state.app
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
  const records = await replicationRecords(state.reader)
  const status = replication.status()
  const successes = [...records.values()].map((record) => record.LastSuccess).sort()
  let lastError: { at: number; message: string } | undefined
  for (const stream of status.streams.values()) {
    if (stream.lastErrorAt !== undefined && stream.lastErrorMessage !== '' && (lastError === undefined || stream.lastErrorAt > lastError.at)) lastError = { at: stream.lastErrorAt, message: stream.lastErrorMessage }
  }
  ctx.body = {
    Enabled: true,
    Running: status.running,
    SourceDatacenter: settings.primaryDatacenter,
    ReplicationType: status.tokens ? 'tokens' : 'policies',
    ReplicatedIndex: records.get('policies')?.RemoteIndex ?? 0,
    ReplicatedRoleIndex: records.get('roles')?.RemoteIndex ?? 0,
    ReplicatedTokenIndex: records.get('tokens')?.RemoteIndex ?? 0,
    LastSuccess: successes.at(-1) ?? GO_ZERO_TIME,
    LastError: lastError === undefined ? GO_ZERO_TIME : new Date(lastError.at).toISOString(),
    LastErrorMessage: lastError?.message ?? '',
    ReplicatedConfigEntryIndex: records.get('config')?.RemoteIndex ?? 0,
    // The leader's measure (the loop runs there); a follower, which cannot tell, reports 0.
    ReplicationLagSeconds: status.running ? Math.round(status.lagSeconds * 1000) / 1000 : 0,
  }
}

export function aclReplicationRoutes(router: Router): void {
  router.get('/v1/acl/replication', (ctx) => replicationStatus(ctx as ApiContext))
}
