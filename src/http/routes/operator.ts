/**
 * Operator endpoints for the Raft configuration: who the servers are, removing one, handing leadership to another
 * (Consul 1.15+'s transfer-leader), and this datacenter's servers as `members` shows them. Reads need operator:read,
 * changes operator:write.
 */
import Router from '@koa/router'
import { checkClusterAddress } from '../../lib/cluster-address.js'
import { InvalidInputError } from '../../lib/errors.js'
import type { ApiContext } from '../context.js'
import { queryParam, requirePermission } from '../request.js'
import { auditBeforeChange } from '../audit.js'
import { ANONYMOUS_BODY, readJsonObject } from '../body.js'
import { validateBody, type Schema } from '../validate.js'
import type { JoinRequest } from '../../lib/join-proof.js'
import { clusterRoutes } from './operator-cluster.js'

async function configuration(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'operator', 'read')
  const { cluster, state } = ctx.state.app
  const membership = cluster.membership()
  ctx.body = {
    Servers: membership.servers.map((server) => ({
      ID: server.id,
      Node: server.id,
      Address: server.address,
      Leader: server.address === cluster.leaderAddress(),
      Voter: server.voter,
    })),
    Index: Math.max(membership.index, state.lastApplied > 0 ? 1 : 0),
  }
}

async function removePeer(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'operator', 'write')
  const id = queryParam(ctx, 'id')
  const address = queryParam(ctx, 'address')
  if ((id === undefined || id === '') && (address === undefined || address === '')) {
    throw new InvalidInputError('id', 'give the server to remove as ?id= or ?address=')
  }
  await auditBeforeChange(ctx, 'raft.member.delete', { kind: 'raft-server', id: id || address || '' })
  await ctx.state.app.cluster.removeServer({ ...(id ? { id } : {}), ...(address ? { address } : {}) })
  ctx.body = true
}

/**
 * Consul 1.15+'s `POST /v1/operator/raft/transfer-leader?id=NODE`: hands leadership to the voter named, or without `id`
 * to a caught-up voter the leader picks, and answers `{"Success": true}` once the transfer is done and the new leader
 * known. Sent to a follower, it is forwarded to the leader. A bad id is a 400 naming `id`; a transfer that did not
 * complete in time a 504 (it may still complete).
 */
async function transferLeader(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'operator', 'write')
  const id = queryParam(ctx, 'id')
  await auditBeforeChange(ctx, 'operator.transfer-leader', { kind: 'raft-server', id: id ?? '' })
  await ctx.state.app.cluster.transferLeadership(id === undefined || id === '' ? undefined : id)
  ctx.body = { Success: true }
}

/**
 * The servers of this datacenter, sorted by name: `{Name, Datacenter, Address, Role, Voter, Status}`, Address being
 * the cluster address and Role `leader`, `follower` or `non-voter`. Answered from this node's own view, without asking
 * the leader, so that a node cut off from the others still says what it sees (as `consul members` shows the local
 * agent's view): Status is `alive` or `failed` by RaftReplica.memberAlive (the leader: a Raft answer within an election
 * timeout; other nodes: an open peer link). Datacenter is kept per server: federated datacenters' servers join the
 * list later.
 */
async function servers(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'operator', 'read')
  const { cluster, settings } = ctx.state.app
  ctx.body = cluster
    .servers()
    .map((server) => ({
      Name: server.id,
      Datacenter: settings.datacenter,
      Address: server.address,
      Role: server.leader ? 'leader' : server.voter ? 'follower' : 'non-voter',
      Voter: server.voter,
      Status: server.alive ? 'alive' : 'failed',
    }))
    .sort((a, b) => (a.Name < b.Name ? -1 : a.Name > b.Name ? 1 : 0))
}

/** This node's Raft state: role, term, leader, commit and applied index, last contact with the leader. */
async function raftState(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'operator', 'read')
  const state = ctx.state.app.cluster.raftState()
  ctx.body = {
    Node: state.node,
    Role: state.role,
    Term: state.term,
    Leader: state.leader ?? '',
    CommitIndex: state.commitIndex,
    AppliedIndex: state.appliedIndex,
    LastIndex: state.lastIndex,
    LastContactMs: state.lastContactMs,
    ForwardedWrites: state.forwardedWrites,
    ForwardedRequests: state.forwardedRequests,
  }
}

/**
 * A server joining the cluster (`warden agent --join`): it proves the cluster key with an HMAC instead of presenting
 * an ACL token, since a new server has none.
 */
async function join(ctx: ApiContext): Promise<void> {
  const body = validateBody<JoinRequest>(joinSchema, await readJsonObject(ctx, ANONYMOUS_BODY))
  // Every node dials the address once the leader commits it: one that cannot be dialed must not get that far.
  checkClusterAddress('Address', body.Address)
  // The proof is not copied to the audit log: the server is named by its node name alone.
  await auditBeforeChange(ctx, 'raft.member.set', { kind: 'raft-server', id: body.Node })
  const result = await ctx.state.app.cluster.join(body)
  // VoteFromIndex: the log index at which the server was (re-)added; it may not vote before its log reaches it.
  ctx.body = { Members: result.members, VoteFromIndex: result.voteFromIndex }
}

const joinSchema: Schema = {
  type: 'object',
  properties: {
    Node: { type: 'string', minLength: 1, maxLength: 128 },
    // Its length and form are checked by checkClusterAddress, so that every bad address gets the same rule.
    Address: { type: 'string' },
    Time: { type: 'number' },
    Nonce: { type: 'string', maxLength: 64 },
    Proof: { type: 'string', maxLength: 128 },
    Incarnation: { type: 'string', maxLength: 64 },
  },
  required: ['Node', 'Address', 'Time', 'Nonce', 'Proof'],
  additionalProperties: false,
}

export function operatorRoutes(router: Router): void {
  router.post('/v1/operator/raft/join', (ctx) => join(ctx as ApiContext))
  router.get('/v1/operator/raft/state', (ctx) => raftState(ctx as ApiContext))
  router.get('/v1/operator/raft/configuration', (ctx) => configuration(ctx as ApiContext))
  router.delete('/v1/operator/raft/peer', (ctx) => removePeer(ctx as ApiContext))
  router.post('/v1/operator/raft/transfer-leader', (ctx) => transferLeader(ctx as ApiContext))
  router.get('/v1/operator/servers', (ctx) => servers(ctx as ApiContext))
  // Every server as the leader sees it, blocking on change (operator-cluster.ts).
  clusterRoutes(router)
}
