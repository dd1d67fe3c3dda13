/**
 * The Koa application: the error mapper first, then the headers every response carries, the routes (one file per
 * resource), and last the JSON answers for unknown paths (404) and wrong methods (405 with Allow).
 */
import Koa from 'koa'
import { ApiRouter } from './router.js'
import { WardenError } from '../lib/errors.js'
import type { AppServices, ApiContext } from './context.js'
import { errorMiddleware } from './errors.js'
import { auditMiddleware } from './audit.js'
import { LogLimiter } from '../lib/log-limiter.js'
import { consistencyOf, hasParam, isWriteMethod, isWriteRequest, queryParam } from './request.js'
import { setResponseHeader } from './headers.js'
import { tokenRoutes } from './routes/acl-tokens.js'
import { policyRoutes } from './routes/acl-policies.js'
import { authMethodRoutes } from './routes/acl-auth-methods.js'
import { loginRoutes } from './routes/acl-login.js'
import { templatedPolicyRoutes } from './routes/acl-templated-policies.js'
import { statusRoutes } from './routes/status.js'
import { configRoutes } from './routes/config.js'
import { linkRoutes } from './routes/link.js'
import { operatorRoutes } from './routes/operator.js'
import { catalogRoutes } from './routes/catalog.js'
import { authorityStream, forwardsToDatacenter, forwardToDatacenter, forwardToPrimary, requireTokenReplication } from './forward.js'
import { aclReplicationRoutes } from './routes/acl-replication.js'
import { snapshotRoutes } from './routes/snapshot.js'
import { agentRoutes } from './routes/agent.js'
import { uiRoutes } from './routes/ui.js'
import { requestMetricsMiddleware } from './request-metrics.js'

/**
 * Every request but a write first waits until this node has applied the writes it answered before applying them
 * (http/write.ts answerBeforeLocalApply; usually no wait at all), so that what it reads or resolves here holds them.
 *
 * A write is authorized (its token resolved, its auth method and rules read) from this node's state, and that state
 * must hold every write acknowledged before the request came: else a token whose deletion was acknowledged could
 * still write through a follower that had not applied the delete, and a token just created could not. So every
 * write first passes the barrier of a default read: on the leader, under its lease, it waits for the apply of what is
 * committed (no network round); on a follower it asks the leader for a read index (shared by the requests of the
 * turn), which a leader holding its lease answers at once; a leader without a lease (newly elected, before an entry
 * of its term commits, or deposed without knowing it) confirms it with a heartbeat round.
 * Without a leader this fails with no_leader after the leader wait, as the write would. A write with a body passes it
 * again once the body has arrived, and is authorized again then (request.ts authorizeAfterBody), unless the body was
 * whole before this barrier's index was fixed.
 */
function catchUp(ctx: ApiContext): Promise<void> {
  // Any other request waits (usually not at all) until this node has applied the writes it answered before applying
  // them (http/write.ts): its reads, ?stale ones included, and the requests that pass no barrier see them.
  if (!isWriteRequest(ctx)) return ctx.state.app.cluster.readBarrier('stale')
  // A body that was whole when the barrier's index was fixed needs no second barrier, nor a second resolution of the
  // caller (authorizeAfterBody): the index is fixed at the end of the turn (a follower's ReadIndex leaves then, a
  // leader's lease read waits for it: ClusterNode.readBarrier), after a body that came with its headers was parsed.
  return ctx.state.app.cluster.readBarrier('leader', () => {
    if (!ctx.req.complete) return
    ctx.state.barrierAfterBody = true
    // Resolved afresh past the barrier if it was resolved before it (a secondary reads some bodies ahead: forward.ts),
    // so that the caller the route authorizes is one the barrier covers, and needs no second look once the body is in.
    ctx.state.caller = undefined
  })
}

/** Socket and parser errors that a client causes (it hung up, or sent what is not HTTP). */
const CLIENT_ERROR_CODES = /^(?:HPE_|ECONNRESET$|EPIPE$|ECONNABORTED$|ERR_STREAM_PREMATURE_CLOSE$)/

export function createApp(services: AppServices): Koa {
  const app = new Koa()
  app.proxy = false
  const router = new ApiRouter()
  tokenRoutes(router)
  policyRoutes(router)
  authMethodRoutes(router)
  loginRoutes(router)
  templatedPolicyRoutes(router)
  statusRoutes(router)
  configRoutes(router)
  linkRoutes(router)
  operatorRoutes(router)
  catalogRoutes(router)
  aclReplicationRoutes(router)
  snapshotRoutes(router)
  agentRoutes(router)
  uiRoutes(router)

  // What Koa could not answer (a client that hung up or broke the protocol mid-body, a socket that failed while the
  // answer was written) reaches this listener; without one Koa prints each stack to stderr, outside the JSON log.
  const unanswered = new LogLimiter()
  app.on('error', (error: Error & { code?: unknown; status?: unknown; expose?: unknown }) => {
    const code = typeof error.code === 'string' ? error.code : undefined
    const byClient = error.expose === true || (typeof error.status === 'number' && error.status < 500) || (code !== undefined && CLIENT_ERROR_CODES.test(code))
    if (byClient) return services.log.debug({ err: error.message, code }, 'client connection error')
    unanswered.warn(services.log, error.message, { err: error }, 'a response could not be completed')
  })
  // Outermost: every answer is counted with the status and error code it leaves with (request-metrics.ts).
  if (services.metrics !== undefined) app.use(requestMetricsMiddleware(services.metrics))
  // Outside the error mapper, so it sees the status and code every answer leaves with.
  app.use(auditMiddleware(services))
  app.use(errorMiddleware(services.log))
  // Inside the error mapper (a refusal leaves as the JSON shape with Retry-After) and the audit (it is a refusal
  // line), and before anything else: a refused request reads no body, waits on no barrier, resolves no token.
  const limiter = services.rateLimiter
  if (limiter !== undefined && limiter.settings.mode !== 'disabled') {
    app.use((ctx, next) => {
      limiter.admitRequest(ctx.method, ctx.path, ctx.req.socket.remoteAddress)
      return next()
    })
  }
  // Not async, for the same reason as the error mapper: no suspended frame per held request.
  app.use((ctx, next) => {
    ;(ctx as ApiContext).state.app = services
    setResponseHeader(ctx, 'Default-ACL-Policy', services.settings.defaultPolicy)
    // Contradictory consistency flags are refused on every endpoint, reads and writes alike, before anything runs.
    consistencyOf(ctx as ApiContext)
    const pretty = (): void => {
      if (ctx.body !== undefined && ctx.body !== null && typeof ctx.body === 'object' && !Buffer.isBuffer(ctx.body) && hasParam(ctx as ApiContext, 'pretty')) {
        ctx.body = JSON.stringify(ctx.body, null, 4)
        ctx.type = 'application/json'
      }
    }
    const serveHere = (): Promise<void> =>
      catchUp(ctx as ApiContext)
        .then(() => next())
        .then(pretty)
    // A request for another datacenter is served there (forward.ts), whole: nothing of it runs here. A repeated ?dc
    // counts by its first value, as every parameter does (`?dc=dc2&dc=dc1` is dc2).
    const dc = queryParam(ctx as ApiContext, 'dc')
    if (dc !== undefined && dc !== '' && dc !== services.settings.datacenter && forwardsToDatacenter(ctx.path)) {
      return forwardToDatacenter(ctx as ApiContext, dc)
    }
    // In a secondary, what the primary holds the authority over is written there, and answered once replicated here.
    if (services.settings.datacenter !== services.settings.primaryDatacenter && services.forwarder !== undefined && isWriteMethod(ctx.method)) {
      // Where a write goes is read from this node's state (is the token local?): it must hold the writes this node
      // answered before applying them (http/write.ts), as every other request does (catchUp).
      const caughtUp = services.cluster.readBarrier('stale')
      const guard = services.replication?.status().tokens === false ? caughtUp.then(() => requireTokenReplication(ctx as ApiContext)) : caughtUp
      return guard
        .then(() => authorityStream(ctx as ApiContext))
        .then((stream) => (stream === undefined ? serveHere() : forwardToPrimary(ctx as ApiContext, stream)))
    }
    return serveHere()
  })
  app.use(router.routes())
  app.use(async (ctx) => {
    // No route took the request. If its path exists under other methods, it is a 405 listing them; else a 404.
    const allowed = new Set<string>()
    for (const layer of ctx.matched ?? []) for (const method of layer.methods) if (method !== 'HEAD') allowed.add(method)
    if (allowed.size > 0) {
      if (ctx.method === 'OPTIONS') {
        ctx.set('Allow', ['OPTIONS', ...allowed].join(', '))
        ctx.status = 204
        return
      }
      ctx.set('Allow', ['OPTIONS', ...allowed].join(', '))
      throw new WardenError('method_not_allowed', `method ${ctx.method} is not allowed on ${ctx.path}; allowed: ${[...allowed].join(', ')}`)
    }
    throw new WardenError('not_found', `Invalid URL path: ${ctx.path} is not a recognized HTTP API endpoint`)
  })
  return app
}
