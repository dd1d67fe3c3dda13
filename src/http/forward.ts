/**
 * `?dc=X` for another datacenter (issue 19): the request goes, whole, to a server of X over a WAN link
 * (rpc/dc-forward.ts), which serves it as if it had been sent there; its status, headers and body are this answer.
 * The body is read here first, under the same limits as any request's (anonymous bodies against their own budget),
 * so nothing larger or slower than a local request crosses.
 *
 * Served here whatever `dc` says: token self (the caller's own token, as Consul), the datacenter list, and a
 * server's join (internal to a datacenter).
 */
import { WardenError } from '../lib/errors.js'
import { forwardableHeaders } from '../rpc/dc-forward.js'
import { ANONYMOUS_BODY, readBody } from './body.js'
import type { ApiContext } from './context.js'
import { blockingOf, secretOf } from './request.js'

const LOCAL_PATHS = new Set(['/v1/acl/token/self', '/v1/catalog/datacenters', '/v1/operator/raft/join'])
/** What a request that is not a blocking query may take at X, as a local one. */
const REQUEST_WAIT_MS = 60_000

/** Whether a request naming another datacenter is forwarded there (else it is served here, ignoring `dc`). */
export function forwardsToDatacenter(path: string): boolean {
  return path.startsWith('/v1/') && !LOCAL_PATHS.has(path)
}

export async function forwardToDatacenter(ctx: ApiContext, datacenter: string): Promise<void> {
  const forwarder = ctx.state.app.forwarder
  if (forwarder === undefined) {
    // No WAN links (a server without a cluster key): it knows no other datacenter.
    throw new WardenError('unknown_datacenter', `dc: unknown datacenter ${JSON.stringify(datacenter)}: this server has no WAN links (it runs without a cluster key)`, 'dc')
  }
  const hasBody = ctx.method !== 'GET' && ctx.method !== 'HEAD'
  const body = hasBody ? await readBody(ctx, secretOf(ctx) === undefined ? ANONYMOUS_BODY : {}) : undefined
  const waitMs = blockingOf(ctx)?.waitMs ?? REQUEST_WAIT_MS
  const request = { method: ctx.method, path: ctx.originalUrl, headers: forwardableHeaders(ctx.req.headers), ...(body === undefined || body.length === 0 ? {} : { body }) }
  const answer = await forwarder.forward(datacenter, request, waitMs)
  ctx.status = answer.status
  for (const [name, value] of Object.entries(forwardableHeaders(answer.headers))) ctx.set(name, value)
  ctx.body = answer.body
}
