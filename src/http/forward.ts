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
import { ANONYMOUS_BODY, parseJson, readBody, readBodyAhead, type BodyLimits } from './body.js'
import { getRecord, tokenSpec } from '../state/tables.js'
import type { ApiContext } from './context.js'
import { blockingOf, secretOf } from './request.js'
import { LOCAL_CONFIG_KINDS, replicationRecords, type ReplicatedStream } from '../state/replication.js'

// The agent's own metrics are this node's, as every /v1/agent endpoint of Consul: `?dc` is ignored there.
const LOCAL_PATHS = new Set(['/v1/acl/token/self', '/v1/catalog/datacenters', '/v1/operator/raft/join', '/v1/agent/metrics'])

/**
 * A path as the router matches it (without regard to case, a trailing slash allowed): what every decision here is
 * made on, so a request cannot be routed by one spelling and served by another.
 */
function routedPath(path: string): string {
  const lower = path.toLowerCase()
  return lower.length > 1 && lower.endsWith('/') ? lower.replace(/\/+$/, '') : lower
}

/** A path segment decoded, or undefined when it is not valid percent-encoding (the route refuses it itself). */
function decodedSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment)
  } catch {
    return undefined
  }
}

/** A field of a JSON body as the routes read it: null is absent, the exact spelling wins over other cases. */
function bodyField(body: unknown, name: string): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined
  const record = body as Record<string, unknown>
  if (Object.hasOwn(record, name) && record[name] !== null) return record[name]
  for (const [key, value] of Object.entries(record)) if (value !== null && key.toLowerCase() === name.toLowerCase()) return value
  return undefined
}

/** The body as the route will parse it; undefined when it will not parse (the route refuses it itself, here). */
async function bodyAhead(ctx: ApiContext): Promise<unknown> {
  const bytes = await readBodyAhead(ctx)
  try {
    return parseJson(bytes)
  } catch {
    return undefined
  }
}
/** What a request that is not a blocking query may take at X, as a local one. */
const REQUEST_WAIT_MS = 60_000

/**
 * Whether a request naming another datacenter is forwarded there (else it is served here, ignoring `dc`). The pages
 * replication reads (GET /v1/internal/acl/replication/:stream) are for servers only: a client's `?dc` never carries
 * it there, so it meets the local route, which answers only requests that came over WAN links.
 */
export function forwardsToDatacenter(path: string): boolean {
  const routed = routedPath(path)
  return routed.startsWith('/v1/') && !LOCAL_PATHS.has(routed) && !routed.startsWith('/v1/internal/acl/replication')
}

/**
 * The request's path and query as sent to `datacenter`, its `dc` parameters naming that datacenter: the server there
 * serves it, and never sends it on. (A secondary's write to the primary of a request that named the secondary itself
 * would otherwise be sent back by the primary, and back again, until every WAN request slot was taken.)
 */
export function pathFor(url: string, datacenter: string): string {
  const question = url.indexOf('?')
  if (question === -1) return url
  const pairs = url
    .slice(question + 1)
    .split('&')
    .map((pair) => {
      const name = pair.split('=', 1)[0] ?? ''
      let decoded = name
      try {
        decoded = decodeURIComponent(name)
      } catch {
        // Not percent-encoded validly: kept as it is (the server there refuses it as here).
      }
      return decoded === 'dc' ? `dc=${encodeURIComponent(datacenter)}` : pair
    })
  return `${url.slice(0, question)}?${pairs.join('&')}`
}

export async function forwardToDatacenter(ctx: ApiContext, datacenter: string): Promise<void> {
  // An archive runs to hundreds of MB, past what a forwarded request or answer carries (rpc/dc-forward.ts).
  if (routedPath(ctx.path) === '/v1/snapshot') {
    throw new WardenError('invalid_input', `dc: snapshots are saved and restored by a server of their own datacenter: send this to a server of ${JSON.stringify(datacenter)}`, 'dc')
  }
  const forwarder = ctx.state.app.forwarder
  if (forwarder === undefined) {
    // No WAN links (a server without a cluster key): it knows no other datacenter.
    throw new WardenError('unknown_datacenter', `dc: unknown datacenter ${JSON.stringify(datacenter)}: this server has no WAN links (it runs without a cluster key)`, 'dc')
  }
  const hasBody = ctx.method !== 'GET' && ctx.method !== 'HEAD'
  const body = hasBody ? await readBody(ctx, bodyLimitsOf(ctx)) : undefined
  const waitMs = blockingOf(ctx)?.waitMs ?? REQUEST_WAIT_MS
  const request = { method: ctx.method, path: pathFor(ctx.originalUrl, datacenter), headers: forwardableHeaders(ctx.req.headers), ...(body === undefined || body.length === 0 ? {} : { body }) }
  const answer = await forwarder.forward(datacenter, request, waitMs)
  ctx.status = answer.status
  for (const [name, value] of Object.entries(forwardableHeaders(answer.headers))) ctx.set(name, value)
  ctx.body = answer.body
}

/** A request's body limits: anonymous bodies against their own budget, as every route reads them. */
function bodyLimitsOf(ctx: ApiContext): BodyLimits {
  return secretOf(ctx) === undefined ? ANONYMOUS_BODY : {}
}

/** Writes a secondary sends to the primary, which holds the authority over them (issue 19): policies and roles. */
const AUTHORITY_WRITES: Array<{ pattern: RegExp; stream: ReplicatedStream }> = [
  { pattern: /^\/v1\/acl\/policy(\/[^/]+)?$/, stream: 'policies' },
  { pattern: /^\/v1\/acl\/role(\/[^/]+)?$/, stream: 'roles' },
]
const TOKEN_CREATE = /^\/v1\/acl\/token$/
const CONFIG_ENTRY = /^\/v1\/config\/([^/]+)\/[^/]+$/
/** Update, delete, clone of one token (not self, which the caller's own token answers wherever it is). */
const TOKEN_BY_ID = /^\/v1\/acl\/token\/([^/]+)(\/clone)?$/
/** How long a write forwarded to the primary waits to be replicated here before it answers anyway (marked lagging). */
export const READ_YOUR_WRITES_WAIT_MS = 5_000
const REPLICATION_POLL_MS = 25

const AUTH_METHOD_WRITE = /^\/v1\/acl\/(auth-method|binding-rule)(\/[^/]+)?$/
const LOGIN = /^\/v1\/acl\/(login|oidc\/auth-url|oidc\/callback)$/

/**
 * In a secondary without token replication (acl.enable_token_replication false), what would make or use local
 * tokens: a local token's create, auth-method and binding-rule writes, logins. Consul: "Token replication is required
 * for auth methods to function". Throws token_replication_required; anything else passes.
 */
export async function requireTokenReplication(ctx: ApiContext): Promise<void> {
  const method = ctx.method
  const path = routedPath(ctx.path)
  const what = LOGIN.test(path) && method === 'POST'
    ? 'a login'
    : AUTH_METHOD_WRITE.test(path) && method !== 'GET'
      ? 'auth methods and binding rules'
      : (TOKEN_CREATE.test(path) && method === 'PUT' && (await asksForLocalToken(ctx))) || (await clonesLocalToken(ctx, method, path))
        ? 'a local token'
        : undefined
  if (what === undefined) return
  const { datacenter, primaryDatacenter } = ctx.state.app.settings
  throw new WardenError('token_replication_required', `acl.enable_token_replication: ${what} needs token replication, which is off in ${datacenter} (a secondary of ${primaryDatacenter}); turn it on, or use the primary`)
}

/**
 * The replicated stream a write belongs to, when a secondary must send it to the primary: policies and roles always;
 * tokens when global (a create whose body is not `Local: true`; an update, delete or clone of a token this
 * datacenter holds as global, or does not hold at all, as Consul forwards a delete it cannot find).
 */
export async function authorityStream(ctx: ApiContext): Promise<ReplicatedStream | undefined> {
  const method = ctx.method
  const path = routedPath(ctx.path)
  if (method !== 'PUT' && method !== 'POST' && method !== 'DELETE') return undefined
  const stream = AUTHORITY_WRITES.find((write) => write.pattern.test(path))?.stream
  if (stream !== undefined) return stream
  if (TOKEN_CREATE.test(path) && method === 'PUT') return (await createsLocalToken(ctx)) ? undefined : 'tokens'
  // Config entries: every kind but those each datacenter writes on its own (exported-services).
  if (path === '/v1/config' && method === 'PUT') return LOCAL_CONFIG_KINDS.has(await bodyKind(ctx)) ? undefined : 'config'
  const entry = CONFIG_ENTRY.exec(path)
  if (entry !== null && method === 'DELETE') return LOCAL_CONFIG_KINDS.has(decodedSegment(entry[1] ?? '') ?? '') ? undefined : 'config'
  const byId = TOKEN_BY_ID.exec(path)
  if (byId === null || byId[1] === 'self') return undefined
  const accessor = decodedSegment(byId[1] ?? '')
  // Not decodable: the route refuses it here. AccessorIDs are UUIDs, held in lower case (the path was lowered).
  if (accessor === undefined) return undefined
  const held = await getRecord(ctx.state.app.state.reader, tokenSpec, accessor)
  return held?.Local === true ? undefined : 'tokens'
}

/**
 * The Kind a config entry body names, read as the route reads it; an exported-services (served here) when the body
 * will not parse or names no kind, so that the route refuses it here with its own message.
 */
async function bodyKind(ctx: ApiContext): Promise<string> {
  const kind = bodyField(await bodyAhead(ctx), 'Kind')
  return typeof kind === 'string' ? kind : 'exported-services'
}

/** A create whose body says `Local: true` as the route reads it (a body that will not parse is the route's to refuse). */
async function asksForLocalToken(ctx: ApiContext): Promise<boolean> {
  const body = await bodyAhead(ctx)
  return body !== undefined && bodyField(body, 'Local') === true
}

/** A clone of a token held here as local: the clone would be a local token too. */
async function clonesLocalToken(ctx: ApiContext, method: string, path: string): Promise<boolean> {
  const clone = TOKEN_BY_ID.exec(path)
  if (method !== 'PUT' || clone === null || clone[2] === undefined) return false
  const accessor = decodedSegment(clone[1] ?? '')
  if (accessor === undefined) return false
  return (await getRecord(ctx.state.app.state.reader, tokenSpec, accessor))?.Local === true
}

/**
 * Whether a token create asks for a local token (`Local: true`, read as the route reads it). A body that will not
 * parse counts as local: the route refuses it here, with its own message.
 */
async function createsLocalToken(ctx: ApiContext): Promise<boolean> {
  const body = await bodyAhead(ctx)
  return body === undefined || bodyField(body, 'Local') === true
}

/**
 * A secondary's write of what the primary holds the authority over: sent there with the caller's token, answered
 * with the primary's answer, once this datacenter has replicated it (read your writes across datacenters), waiting
 * at most READ_YOUR_WRITES_WAIT_MS; past that the answer carries `X-Service-Replication-Lagging: true`.
 */
export async function forwardToPrimary(ctx: ApiContext, stream: ReplicatedStream): Promise<void> {
  const { settings, forwarder, state } = ctx.state.app
  if (forwarder === undefined) throw new WardenError('no_path_to_datacenter', `dc: no path to datacenter ${JSON.stringify(settings.primaryDatacenter)}, the primary: this server has no WAN links`, 'dc')
  await forwardToDatacenter(ctx, settings.primaryDatacenter)
  if (ctx.status !== 200) return
  // Global tokens do not replicate here when token replication is off: nothing to wait for.
  if (stream === 'tokens' && ctx.state.app.replication?.status().tokens === false) return
  // The primary's index the write reached: a record's ModifyIndex, or (a deletion answers `true`) the list's index.
  let reached = modifyIndexOf(ctx.body)
  if (reached === undefined) {
    // The list's index only: a filter that matches nothing keeps the records (and any secret) at the primary.
    const lists = { policies: '/v1/acl/policies', roles: '/v1/acl/roles', tokens: '/v1/acl/tokens', config: '/v1/config/proxy-defaults' }
    const path = `${lists[stream]}?filter=${encodeURIComponent('Namespace == "-"')}`
    try {
      const list = await forwarder.forward(settings.primaryDatacenter, { method: 'GET', path, headers: forwardableHeaders(ctx.req.headers) }, REQUEST_WAIT_MS)
      reached = Number(list.headers['x-service-index'] ?? '0')
    } catch {
      // The write succeeded there: its answer stands, only the wait for it here cannot be measured.
      markLagging(ctx)
      return
    }
  }
  const deadline = Date.now() + (settings.replicationReadYourWritesWaitMs ?? READ_YOUR_WRITES_WAIT_MS)
  const replicated = async (): Promise<number> => (await replicationRecords(state.reader)).get(stream)?.RemoteIndex ?? 0
  while ((await replicated()) < reached) {
    if (Date.now() >= deadline) {
      markLagging(ctx)
      return
    }
    await new Promise((resolve) => setTimeout(resolve, REPLICATION_POLL_MS))
  }
}

function markLagging(ctx: ApiContext): void {
  ctx.set('X-Service-Replication-Lagging', 'true')
  ctx.set('X-Consul-Replication-Lagging', 'true')
}

function modifyIndexOf(body: unknown): number | undefined {
  if (!Buffer.isBuffer(body)) return undefined
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { ModifyIndex?: unknown }
    return typeof parsed.ModifyIndex === 'number' ? parsed.ModifyIndex : undefined
  } catch {
    return undefined
  }
}
