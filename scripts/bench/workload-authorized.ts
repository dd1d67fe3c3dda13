/**
 * Workload 3, what token resolution costs: 10,000 distinct tokens, each linking two policies and a role (whose own
 * policy adds a third), each request with the next token, reading a policy with `?stale` on a follower (so that the
 * read itself is as cheap as it gets and the token is most of the work). The same load with the management token on
 * every request, sent by the same runner, is the baseline: the difference is resolution (a cache miss the first time
 * a node sees a token, then a SHA-256 of the secret and a cache hit). Both read the next of the reads workload's
 * policies on each request, so that the baseline's identical requests do not share runs (src/http/coalesce.ts).
 */
import { randomUUID } from 'node:crypto'
import { load, type BenchContext } from './context.js'
import { pool } from './http-client.js'
import type { WardenCluster } from './warden.js'
import { readTargets } from './workload-reads.js'

const CONNECTIONS = 64

export async function wardenAuthorized(ctx: BenchContext, warden: WardenCluster): Promise<void> {
  const count = ctx.plan.authorizedTokens
  ctx.progress.step(`authorized: creating ${count} tokens (two policies and a role each)`)
  const leader = warden.leader
  const policy = async (name: string, rules: string): Promise<string> => (await warden.json<{ ID: string }>(leader, 'PUT', '/v1/acl/policy', { Name: name, Rules: rules })).ID
  const readPolicy = await policy('bench-auth-acl-read', 'acl = "read"')
  const servicePolicy = await policy('bench-auth-service-read', 'service_prefix "" { policy = "read" }')
  const rolePolicy = await policy('bench-auth-node-read', 'node_prefix "" { policy = "read" }')
  const role = await warden.json<{ ID: string }>(leader, 'PUT', '/v1/acl/role', { Name: 'bench-auth-role', Policies: [{ ID: rolePolicy }] })
  const secrets = Array.from({ length: count }, () => randomUUID())
  // Secrets chosen here (the API takes a given SecretID) so that the load can present them; 64 writers keep the
  // leader's group commit busy.
  await pool(count, 64, async (n) => {
    const body = { SecretID: secrets[n], Description: `bench auth ${n}`, Policies: [{ ID: readPolicy }, { ID: servicePolicy }], Roles: [{ ID: role.ID }] }
    const answer = await warden.call(leader, 'PUT', '/v1/acl/token', { body, timeoutMs: 30_000 })
    if (answer.status !== 200) throw new Error(`token create: ${answer.status} ${answer.text.slice(0, 200)}`)
  })
  const follower = warden.followers[0] ?? leader
  // The follower must have applied the last token before the load, or the first reads would be 403s.
  const last = secrets.at(-1) ?? ''
  for (let attempt = 0; attempt < 100; attempt++) {
    if ((await warden.call(follower, 'GET', '/v1/acl/token/self?stale', { token: last })).status === 200) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const targets = await readTargets(warden)
  await warden.call(follower, 'GET', `/v1/acl/policy/${targets.at(-1) ?? ''}`)
  const paths = targets.map((id) => `/v1/acl/policy/${id}?stale`)
  const request = { method: 'GET', path: `/v1/acl/policy/${readPolicy}?stale`, headers: {} }
  for (const [name, tokens] of [
    ['policy read ?stale → follower, management token', [warden.token]],
    [`policy read ?stale → follower, ${count} tokens`, secrets],
  ] as const) {
    ctx.progress.step(`authorized: ${name}`)
    await load(ctx, {
      workload: 'authorized',
      system: 'warden',
      name,
      cluster: warden.label,
      origin: warden.origin(follower),
      connections: CONNECTIONS,
      requests: [request],
      rotateTokens: [...tokens],
      rotatePaths: paths,
      watched: warden.watched(),
      note: 'autocannon API runner, token and policy rotated per request',
    })
  }
}
