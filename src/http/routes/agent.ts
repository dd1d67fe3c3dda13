/**
 * `GET /v1/agent/metrics`: this node's metrics (src/metrics), as Consul's agent serves them. Without `format`, Consul's
 * JSON (go-metrics' summary: Timestamp, Gauges, Points, Counters, Samples); with `?format=prometheus`, the Prometheus
 * text exposition format. Both need `agent:read` on this node's name, as Consul's endpoint does. The metrics are this
 * node's own: no barrier, no leader, and `?dc` is ignored (forward.ts LOCAL_PATHS), as on every Consul agent endpoint.
 */
import Router from '@koa/router'
import { InvalidInputError, NotFoundError } from '../../lib/errors.js'
import type { ApiContext } from '../context.js'
import { queryParam, requirePermission } from '../request.js'

async function agentMetrics(ctx: ApiContext): Promise<void> {
  const { metrics, settings } = ctx.state.app
  await requirePermission(ctx, 'agent', 'read', settings.nodeName)
  if (metrics === undefined) throw new NotFoundError('metrics are not collected on this agent')
  const format = queryParam(ctx, 'format')
  if (format === 'prometheus') {
    const { contentType, text } = await metrics.prometheus()
    ctx.body = text
    ctx.type = contentType
    return
  }
  if (format !== undefined && format !== '') throw new InvalidInputError('format', `must be prometheus, or absent for JSON, not ${JSON.stringify(format.slice(0, 64))}`)
  ctx.body = await metrics.consul()
}

export function agentRoutes(router: Router): void {
  router.get('/v1/agent/metrics', (ctx) => agentMetrics(ctx as ApiContext))
}
