/**
 * Reading what a request says beyond its body: the token, the namespace (the contract's precedence table), the
 * consistency mode and the blocking parameters, each validated with a message that names the parameter.
 */
import { assert } from '../lib/assert.js'
import { InvalidInputError } from '../lib/errors.js'
import { parseDuration } from '../lib/duration.js'
import { DEFAULT_NAMESPACE } from '../state/records.js'
import type { Caller } from '../acl/resolver.js'
import { deniedError, type PermissionAccess, type PermissionResource } from '../acl/authorization.js'
import type { ApiContext } from './context.js'
import { requestHeader } from './headers.js'

/**
 * The secret: `?token=`, then `X-Service-Token` (or Consul's `X-Consul-Token` when that is absent: headers.ts), then
 * `Authorization: Bearer <secret>`.
 */
export function secretOf(ctx: ApiContext): string | undefined {
  // A repeated parameter counts by its first value, as every other parameter does.
  const query = queryString(ctx, 'token')
  if (query !== undefined && query !== '') return query
  const header = requestHeader(ctx, 'Token')
  if (header !== undefined) return header.value
  const authorization = ctx.get('Authorization')
  // The whole header: `Bearer <secret> junk` is no bearer token, not the secret with the junk ignored.
  const match = /^bearer\s+(\S+)\s*$/i.exec(authorization)
  return match?.[1]
}

export async function callerOf(ctx: ApiContext): Promise<Caller> {
  if (ctx.state.caller === undefined) {
    const { resolver, now } = ctx.state.app
    ctx.state.caller = await resolver.resolve(secretOf(ctx), now())
  }
  return ctx.state.caller
}

export async function requirePermission(ctx: ApiContext, resource: PermissionResource, access: PermissionAccess, name?: string): Promise<Caller> {
  const caller = await callerOf(ctx)
  if (ctx.state.bodyRead !== true && isWriteMethod(ctx.method)) (ctx.state.checksBeforeBody ??= []).push({ resource, access, name })
  if (!caller.permissions.allows(resource, access, name)) throw deniedError(caller.accessorID, resource, access, name)
  return caller
}

/** Whether a request of this method is a write: it passes the write barrier (app.ts) and may carry a body. */
export function isWriteMethod(method: string): boolean {
  return method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS'
}

/**
 * POSTs that change nothing: they carry their question in a body, and are answered from this node's state as a read
 * is (Consul answers ACLAuthorize from a follower's state), so they pass no write barrier and need no leader.
 */
const READ_ONLY_POSTS = new Set(['/v1/internal/acl/authorize'])

/** Whether a request is one of the POSTs that only ask (matched as the router matches: any case, a trailing slash). */
export function asksOnly(method: string, path: string): boolean {
  return method === 'POST' && READ_ONLY_POSTS.has(path.toLowerCase().replace(/\/+$/, ''))
}

/** Whether a request writes: a write method, but for the POSTs that only ask. */
export function isWriteRequest(ctx: { method: string; path: string }): boolean {
  return isWriteMethod(ctx.method) && !asksOnly(ctx.method, ctx.path)
}

/**
 * Once a write's body has arrived, which may be 30 s after its headers: the caller is resolved again and every
 * permission checked before the body is checked again, past a new barrier. Without this a token deleted, expired or
 * stripped of the permission while the body arrived would still write. The barrier is the write's own (app.ts), taken
 * again: this node's state must hold every write acknowledged before the body's last byte, and on a follower the
 * delete of the token may have been acknowledged by the leader without being applied here yet. Checks made after the
 * body (a config entry's, which depend on its kind and name) resolve the caller afresh by themselves.
 */
export async function authorizeAfterBody(ctx: ApiContext): Promise<void> {
  ctx.state.bodyRead = true
  if (!isWriteRequest(ctx)) {
    // A POST that only asks passes no barrier, but answers for the token as it is once its body is in.
    if (isWriteMethod(ctx.method)) ctx.state.caller = undefined
    return
  }
  // The write's own barrier counts if the body was whole when its index was fixed (app.ts catchUp); the caller was
  // then resolved past it (catchUp drops one resolved before), from a state that already holds every write
  // acknowledged before the body's last byte: the checks made with it stand.
  if (ctx.state.barrierAfterBody === true) return
  await ctx.state.app.cluster.readBarrier('leader')
  ctx.state.caller = undefined
  const caller = await callerOf(ctx)
  for (const { resource, access, name } of ctx.state.checksBeforeBody ?? []) {
    if (!caller.permissions.allows(resource, access, name)) throw deniedError(caller.accessorID, resource, access, name)
  }
}

const NAMESPACE = /^[A-Za-z0-9_-]{1,64}$/

function checkNamespace(value: string, field: string): string {
  if (!NAMESPACE.test(value)) throw new InvalidInputError(field, 'must be 1 to 64 letters, digits, "-" or "_"')
  return value
}

/**
 * Query parameters that can change what a read returns. Identical reads in one turn share a run (coalesce.ts), and
 * "identical" compares exactly these, so a parameter no route reads (`?x=1`, `?x=2`, ...) cannot make every waiting
 * query run and serialize its own copy of a large list.
 */
export const RESULT_PARAMS = ['authmethod', 'authmethod-ns', 'cursor', 'dc', 'expanded', 'filter', 'limit', 'mode', 'ns', 'policy', 'role', 'servicename', 'since'] as const

/** The others: when and how a read is served, the token (part of the key on its own), and write-only parameters. */
const OTHER_PARAMS = ['index', 'wait', 'stale', 'consistent', 'max_stale', 'pretty', 'token', 'cas', 'version', 'id', 'address', 'format'] as const

const KNOWN_PARAMS = new Set<string>([...RESULT_PARAMS, ...OTHER_PARAMS])

function queryString(ctx: ApiContext, name: string): string | undefined {
  // A parameter read here but missing from both lists could change a read's answer without being in its key.
  assert(KNOWN_PARAMS.has(name), `query parameter ${name} is not declared in RESULT_PARAMS or OTHER_PARAMS (src/http/request.ts)`)
  const value = queryOf(ctx)[name]
  if (Array.isArray(value)) return value[0]
  return value
}

/** The request's query parameters as Koa parses them, read from Koa once per request. */
export function queryOf(ctx: ApiContext): Record<string, string | string[] | undefined> {
  ctx.state.query ??= ctx.query
  return ctx.state.query
}

/**
 * The namespace of a request, by the contract's precedence: body `Namespace` (create and update only), then `?ns`,
 * then the `X-Service-Namespace` header (or Consul's `X-Consul-Namespace` when that is absent: headers.ts), then the
 * namespace of the request's token, then `default`.
 */
export async function namespaceOf(ctx: ApiContext, bodyNamespace?: string, options: { allowWildcard?: boolean } = {}): Promise<string> {
  if (bodyNamespace !== undefined && bodyNamespace !== '') return checkNamespace(bodyNamespace, 'Namespace')
  const query = queryString(ctx, 'ns')
  if (query !== undefined && query !== '') return query === '*' && options.allowWildcard === true ? '*' : checkNamespace(query, 'ns')
  const header = requestHeader(ctx, 'Namespace')
  if (header !== undefined) return header.value === '*' && options.allowWildcard === true ? '*' : checkNamespace(header.value, header.header)
  const caller = await callerOf(ctx)
  return caller.token.Namespace || DEFAULT_NAMESPACE
}

export type Consistency = 'leader' | 'stale' | 'consistent'

export function hasParam(ctx: ApiContext, name: string): boolean {
  return Object.hasOwn(queryOf(ctx), name)
}

/** The consistency mode asked for. Both ?stale and ?consistent at once contradict each other on every endpoint. */
export function consistencyOf(ctx: ApiContext): { mode: Consistency; maxStaleMs?: number } {
  ctx.state.consistency ??= parseConsistency(ctx)
  return ctx.state.consistency
}

function parseConsistency(ctx: ApiContext): { mode: Consistency; maxStaleMs?: number } {
  const stale = hasParam(ctx, 'stale')
  const consistent = hasParam(ctx, 'consistent')
  const maxStaleText = queryString(ctx, 'max_stale')
  if (consistent && (stale || maxStaleText !== undefined)) {
    throw new InvalidInputError('consistent', 'cannot be combined with stale or max_stale: their semantics conflict')
  }
  if (consistent) return { mode: 'consistent' }
  if (maxStaleText !== undefined) {
    const maxStaleMs = parseDuration(maxStaleText)
    if (maxStaleMs === undefined || maxStaleMs < 0) throw new InvalidInputError('max_stale', 'must be a duration such as 5s')
    return { mode: 'stale', maxStaleMs }
  }
  return { mode: stale ? 'stale' : 'leader' }
}

export const WAIT_DEFAULT_MS = 5 * 60_000
export const WAIT_MAX_MS = 10 * 60_000

/** `?index=N&wait=D`; index 0 or absent means a plain read. */
export function blockingOf(ctx: ApiContext): { index: number; waitMs: number } | undefined {
  const indexText = queryString(ctx, 'index')
  const waitText = queryString(ctx, 'wait')
  let waitMs = WAIT_DEFAULT_MS
  if (waitText !== undefined) {
    const parsed = parseDuration(waitText)
    if (parsed === undefined || parsed < 0) throw new InvalidInputError('wait', 'must be a duration such as 30s')
    waitMs = Math.min(parsed, WAIT_MAX_MS)
  }
  if (indexText === undefined || indexText === '') return undefined
  if (!/^\d+$/.test(indexText) || !Number.isSafeInteger(Number(indexText))) {
    throw new InvalidInputError('index', 'must be a non-negative integer')
  }
  const index = Number(indexText)
  if (index === 0) return undefined
  return { index, waitMs }
}

export function queryParam(ctx: ApiContext, name: string): string | undefined {
  return queryString(ctx, name)
}

/** Go's strconv.ParseBool spellings, which Consul's clients may send. */
const TRUE_WORDS = new Set(['1', 't', 'T', 'TRUE', 'true', 'True'])
const FALSE_WORDS = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False'])

/** A boolean parameter: present without a value is true; a value is read as Go's strconv.ParseBool reads it. */
export function boolParam(ctx: ApiContext, name: string): boolean {
  const value = queryString(ctx, name)
  if (value === undefined) return false
  if (value === '' || TRUE_WORDS.has(value)) return true
  if (FALSE_WORDS.has(value)) return false
  throw new InvalidInputError(name, 'must be true or false (or 1, t, T, TRUE, True, 0, f, F, FALSE, False)')
}
