/**
 * Consul's ACL replication status, `GET /v1/acl/replication`. Replication runs only in a secondary datacenter, from
 * the primary; datacenters are not federated yet, so every warden cluster is a primary and answers as Consul's primary
 * does: its replication status is never initialised there (hashicorp/consul agent/consul/leader.go,
 * startACLReplication returns at once in the primary), so every field keeps its zero value, Go's zero time included.
 * Field names and order are Consul's structs.ACLReplicationStatus.
 *
 * No token is needed (Consul's ACL.ReplicationStatus: the status leaks nothing sensitive and health checks must be
 * able to read it). Consul forces the read to be consistent, forwarding it to the leader: here it passes the
 * consistent read barrier, so without a leader it fails as a consistent read does (503 no_leader).
 */
import Router from '@koa/router'
import type { ApiContext } from '../context.js'

/** Go's zero time.Time as encoding/json writes it. */
const GO_ZERO_TIME = '0001-01-01T00:00:00Z'

async function replicationStatus(ctx: ApiContext): Promise<void> {
  await ctx.state.app.cluster.readBarrier('consistent')
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
}

export function aclReplicationRoutes(router: Router): void {
  router.get('/v1/acl/replication', (ctx) => replicationStatus(ctx as ApiContext))
}
