/**
 * Counting and timing every answered request (the agent's metrics, src/metrics). The outermost middleware, so it sees
 * the status and the error code every answer leaves with, refusals by the rate limiter and the error mapper included.
 *
 * The route label is the pattern the router matched (`/v1/acl/token/:id`), never the path: a label per token ID would
 * grow without bound. A request no route took (a 404, a 405, or one served in another datacenter) is `unmatched`.
 * A blocking query that waited (`?index=` above 0) is counted but not timed: its time is the wait its client asked
 * for, and would drown the latency of everything else.
 */
import type { Context, Next } from 'koa'
import type { ApiContext, ApiMetrics } from './context.js'

const UNMATCHED_ROUTE = 'unmatched'

function isBlocking(ctx: ApiContext): boolean {
  // Read from what the route parsed (request.ts queryOf): a request whose route never read ?index did not block.
  const index = ctx.state.query?.['index']
  const first = Array.isArray(index) ? index[0] : index
  return first !== undefined && first !== '' && first !== '0'
}

function errorCodeOf(ctx: Context): string | undefined {
  if (ctx.status < 400) return undefined
  const body: unknown = ctx.body
  if (typeof body !== 'object' || body === null || Buffer.isBuffer(body)) return undefined
  const code = (body as { Code?: unknown }).Code
  return typeof code === 'string' ? code : undefined
}

function record(metrics: ApiMetrics, ctx: Context, startedAt: number): void {
  const route = (ctx as Context & { _matchedRoute?: string | RegExp })._matchedRoute
  const seconds = isBlocking(ctx as ApiContext) ? undefined : (performance.now() - startedAt) / 1000
  metrics.recordRequest(ctx.method, typeof route === 'string' ? route : UNMATCHED_ROUTE, ctx.status, seconds, errorCodeOf(ctx))
}

export function requestMetricsMiddleware(metrics: ApiMetrics) {
  // Not async, as the error mapper: no suspended frame per held request.
  return function countRequests(ctx: Context, next: Next): Promise<void> {
    const startedAt = performance.now()
    return next().then(
      () => record(metrics, ctx, startedAt),
      (error: unknown) => {
        record(metrics, ctx, startedAt)
        throw error
      },
    )
  }
}
