/**
 * Login and logout through auth methods (Consul's /v1/acl/login and /v1/acl/logout). Neither needs an ACL: a login
 * is authorized by the bearer token it presents, a logout by holding the secret it deletes.
 *
 * Login: find the auth method (body Namespace, `?ns`, `X-Service-Namespace` or Consul's `X-Consul-Namespace`, else
 * `default`; the request's own token, if any, plays no part), verify the bearer token with it, bind the identity through its binding and namespace
 * rules, and propose the token. What needs the clock or randomness (AccessorID, SecretID, CreateTime, ExpirationTime
 * from MaxTokenTTL) is decided here; roles by name and the method being unchanged are decided when it is applied.
 * Every refusal is a 403 `permission_denied` that says why (an invalid bearer token, no privilege, a rule that
 * cannot apply); an unknown auth method is 403 `acl_not_found`, as Consul's "ACL not found"; a malformed request is
 * a 400.
 *
 * OIDC (an oidc method, Consul's /v1/acl/oidc/auth-url and /v1/acl/oidc/callback): the first call answers the
 * provider's authorization URL; the second redeems the code the provider sent the browser back with, and the identity
 * in its ID token logs in as above (src/acl/auth/oidc-flow.ts). Neither needs an ACL.
 *
 * Logout: deletes the presented token if login created it; any other token is refused with Consul's "Permission
 * denied: token wasn't created via login". No token, or an unknown or expired one, is 403 `acl_not_found`.
 */
import Router from '@koa/router'
import { AclNotFoundError, InvalidInputError, PermissionDeniedError, WardenError } from '../../lib/errors.js'
import { formatTime, newOrderedUuid, newUuid } from '../../lib/ids.js'
import { loginDescription, planLogin, verifyBearerToken } from '../../acl/auth/login.js'
import type { Identity } from '../../acl/auth/identity.js'
import { oidcAuthUrl, oidcIdentity, openCallbackState } from '../../acl/auth/oidc-flow.js'
import type { TokenCreate } from '../../state/commands.js'
import { nsKey } from '../../state/keys.js'
import { DEFAULT_NAMESPACE, type AclAuthMethod, type AclToken } from '../../state/records.js'
import { authMethodSpec, bindingRuleSpec, getRecord, listByIndex } from '../../state/tables.js'
import type { ApiContext } from '../context.js'
import { ANONYMOUS_BODY, readJsonObject } from '../body.js'
import { LinkNames, renderToken } from '../render.js'
import { queryParam, secretOf } from '../request.js'
import { requestHeader } from '../headers.js'
import { validateBody, type Schema } from '../validate.js'
import { propose } from '../write.js'

/** Meta ends up in the token's Description: bounded like config-entry Meta. */
const META_PAIRS_MAX = 64
const META_KEY_LENGTH_MAX = 128
const META_VALUE_LENGTH_MAX = 512

const loginSchema: Schema = {
  type: 'object',
  properties: {
    AuthMethod: { type: 'string' },
    BearerToken: { type: 'string' },
    Meta: { type: 'object', additionalProperties: { type: 'string' }, maxProperties: META_PAIRS_MAX },
    Namespace: { type: 'string' },
  },
  required: ['AuthMethod', 'BearerToken'],
  additionalProperties: false,
}

interface LoginBody {
  AuthMethod: string
  BearerToken: string
  Meta?: Record<string, string>
  Namespace?: string
}

const NAMESPACE = /^[A-Za-z0-9_-]{1,64}$/

/** The auth method's namespace: the contract's precedence without the token step, since a login carries no token. */
function methodNamespace(ctx: ApiContext, body: { Namespace?: string }): string {
  // The header under the contract's name, else Consul's X-Consul-Namespace (headers.ts); a bad value names the one sent.
  const header = requestHeader(ctx, 'Namespace')
  const sources: Array<[string, string | undefined]> = [
    ['Namespace', body.Namespace],
    ['ns', queryParam(ctx, 'ns')],
    [header?.header ?? 'X-Service-Namespace', header?.value],
  ]
  for (const [field, value] of sources) {
    if (value === undefined || value === '') continue
    if (!NAMESPACE.test(value)) throw new InvalidInputError(field, 'must be 1 to 64 letters, digits, "-" or "_"')
    return value
  }
  return DEFAULT_NAMESPACE
}

function checkMeta(meta: Record<string, string> | undefined): Record<string, string> | undefined {
  for (const [key, value] of Object.entries(meta ?? {})) {
    if (key.length > META_KEY_LENGTH_MAX) throw new InvalidInputError(`Meta.${key.slice(0, 32)}…`, `keys are at most ${META_KEY_LENGTH_MAX} characters`)
    if (value.length > META_VALUE_LENGTH_MAX) throw new InvalidInputError(`Meta.${key}`, `values are at most ${META_VALUE_LENGTH_MAX} characters`)
  }
  return meta
}

/**
 * Logins through one auth method that may wait on its identity service at once (JWKS, discovery, TokenReview, an
 * OIDC token endpoint, STS). Logins need no token: without a bound, anyone could keep thousands of requests open to
 * a provider in warden's name, with the method's client secret, until the provider throttled every login.
 */
export const IDENTITY_CALLS_PER_METHOD_MAX = 32

const identityCalls = new WeakMap<object, Map<string, number>>()

async function withIdentityService<T>(ctx: ApiContext, method: AclAuthMethod, call: () => Promise<T>): Promise<T> {
  let counts = identityCalls.get(ctx.state.app.state)
  if (counts === undefined) identityCalls.set(ctx.state.app.state, (counts = new Map()))
  const key = nsKey(method.Namespace, method.Name)
  const inFlight = counts.get(key) ?? 0
  if (inFlight >= IDENTITY_CALLS_PER_METHOD_MAX) {
    throw new WardenError('rate_limited', `too many logins through auth method "${method.Name}" are waiting on its identity service (at most ${IDENTITY_CALLS_PER_METHOD_MAX}); retry later`)
  }
  counts.set(key, inFlight + 1)
  try {
    return await call()
  } finally {
    const left = (counts.get(key) ?? 1) - 1
    if (left === 0) counts.delete(key)
    else counts.set(key, left)
  }
}

/**
 * The auth method a login names, in the namespace the request names; an unknown one is Consul's "ACL not found". The
 * login is counted against the method's rate (limits.login_rate, rate-limit.ts) here, once the method is known to
 * exist (so the buckets are bounded by the methods there are) and before its identity service is called.
 */
async function authMethodOf(ctx: ApiContext, body: { AuthMethod: string; Namespace?: string }): Promise<AclAuthMethod> {
  if (body.AuthMethod === '') throw new InvalidInputError('AuthMethod', 'is required')
  const namespace = methodNamespace(ctx, body)
  const method = await getRecord(ctx.state.app.state.reader, authMethodSpec, nsKey(namespace, body.AuthMethod))
  if (method === undefined) throw new WardenError('acl_not_found', `ACL not found: auth method "${body.AuthMethod}" does not exist in namespace "${namespace}"`)
  ctx.state.app.rateLimiter?.admitLogin(nsKey(method.Namespace, method.Name), method.Name)
  return method
}

async function login(ctx: ApiContext): Promise<void> {
  const body = validateBody<LoginBody>(loginSchema, await readJsonObject(ctx, ANONYMOUS_BODY))
  const method = await authMethodOf(ctx, body)
  if (body.BearerToken === '') throw new InvalidInputError('BearerToken', 'is required')
  const meta = checkMeta(body.Meta)
  const identity = await withIdentityService(ctx, method, () => verifyBearerToken(method, body.BearerToken, ctx.state.app.now()))
  await issueLoginToken(ctx, method, identity, meta)
}

/** Binds a verified identity through the method's rules and creates its token: the end of every kind of login. */
async function issueLoginToken(ctx: ApiContext, method: AclAuthMethod, identity: Identity, meta: Record<string, string> | undefined): Promise<void> {
  const { reader } = ctx.state.app.state
  const { settings, now } = ctx.state.app
  const rules = await listByIndex(reader, bindingRuleSpec, 'authmethod', nsKey(method.Namespace, method.Name))
  const plan = planLogin(method, rules, identity, settings.datacenter)
  // The clock is read after verification, which may have waited on the network: the token's lifetime starts now.
  const nowMs = now()
  const token: TokenCreate = {
    AccessorID: newOrderedUuid(nowMs),
    SecretID: newUuid(),
    Description: loginDescription(meta),
    Policies: [],
    Roles: plan.bindings.RoleNames.map((Name) => ({ Name })),
    TemplatedPolicies: plan.bindings.TemplatedPolicies,
    ServiceIdentities: plan.bindings.ServiceIdentities,
    NodeIdentities: plan.bindings.NodeIdentities,
    Local: method.TokenLocality !== 'global',
    AuthMethod: method.Name,
    ...(method.MaxTokenTTLMs > 0 ? { ExpirationTime: formatTime(nowMs + method.MaxTokenTTLMs) } : {}),
    CreateTime: formatTime(nowMs),
    Namespace: plan.Namespace,
  }
  const created = (await propose(ctx, {
    type: 'acl.login',
    login: { token, authMethodNamespace: method.Namespace, authMethodModifyIndex: method.ModifyIndex },
  })) as AclToken
  ctx.body = await renderToken(created, new LinkNames(reader), true)
}

/** Meta of an OIDC login travels in its sealed state, through the provider and the browser's address bar. */
const OIDC_META_BYTES_MAX = 2048

const authUrlSchema: Schema = {
  type: 'object',
  properties: {
    AuthMethod: { type: 'string' },
    RedirectURI: { type: 'string', maxLength: 2048 },
    ClientNonce: { type: 'string', maxLength: 256 },
    Meta: { type: 'object', additionalProperties: { type: 'string' }, maxProperties: META_PAIRS_MAX },
    Namespace: { type: 'string' },
  },
  required: ['AuthMethod', 'RedirectURI'],
  additionalProperties: false,
}

const callbackSchema: Schema = {
  type: 'object',
  properties: {
    AuthMethod: { type: 'string' },
    State: { type: 'string' },
    Code: { type: 'string', maxLength: 4096 },
    ClientNonce: { type: 'string', maxLength: 256 },
    Namespace: { type: 'string' },
  },
  required: ['AuthMethod', 'State', 'Code'],
  additionalProperties: false,
}

function requireOidc(method: AclAuthMethod): void {
  if (method.Type !== 'oidc') {
    throw new InvalidInputError('AuthMethod', `auth method "${method.Name}" is of type ${method.Type}; only oidc methods log in through the browser (use /v1/acl/login)`)
  }
}

/** POST /v1/acl/oidc/auth-url: where to send the user's browser to log in at the method's provider. No ACL needed. */
async function oidcAuthUrlRoute(ctx: ApiContext): Promise<void> {
  const body = validateBody<{ AuthMethod: string; RedirectURI: string; ClientNonce?: string; Meta?: Record<string, string>; Namespace?: string }>(
    authUrlSchema,
    await readJsonObject(ctx, ANONYMOUS_BODY),
  )
  const method = await authMethodOf(ctx, body)
  requireOidc(method)
  if (body.RedirectURI === '') throw new InvalidInputError('RedirectURI', 'is required')
  const meta = checkMeta(body.Meta)
  if (meta !== undefined && Buffer.byteLength(JSON.stringify(meta), 'utf8') > OIDC_META_BYTES_MAX) {
    throw new InvalidInputError('Meta', `is at most ${OIDC_META_BYTES_MAX} bytes as JSON in an OIDC login (it travels in the state)`)
  }
  const { now, oidcStates } = ctx.state.app
  const request = { redirectUri: body.RedirectURI, clientNonce: body.ClientNonce ?? '', ...(meta === undefined ? {} : { meta }) }
  ctx.body = { AuthURL: await withIdentityService(ctx, method, () => oidcAuthUrl(method, request, oidcStates, now())) }
}

/** POST /v1/acl/oidc/callback: the provider's state and code, redeemed for a token, as a login. No ACL needed. */
async function oidcCallbackRoute(ctx: ApiContext): Promise<void> {
  const body = validateBody<{ AuthMethod: string; State: string; Code: string; ClientNonce?: string; Namespace?: string }>(callbackSchema, await readJsonObject(ctx, ANONYMOUS_BODY))
  const method = await authMethodOf(ctx, body)
  requireOidc(method)
  if (body.Code === '') throw new InvalidInputError('Code', 'is required')
  const { now, oidcStates } = ctx.state.app
  const state = openCallbackState(method, body.State, body.ClientNonce ?? '', oidcStates, now())
  const identity = await withIdentityService(ctx, method, () => oidcIdentity(method, state, body.Code, now()))
  await issueLoginToken(ctx, method, identity, state.meta)
}

async function logout(ctx: ApiContext): Promise<void> {
  const secret = secretOf(ctx)
  if (secret === undefined || secret === '') throw new AclNotFoundError()
  const token = await ctx.state.app.resolver.tokenBySecret(secret, ctx.state.app.now())
  if (token === undefined) throw new AclNotFoundError()
  // The caller is the token it deletes: named in the audit log by its AccessorID, never by the secret it sent.
  ctx.state.auditAccessorID = token.AccessorID
  if (token.AuthMethod === '') throw new PermissionDeniedError("Permission denied: token wasn't created via login")
  ctx.body = await propose(ctx, { type: 'acl.token.delete', AccessorID: token.AccessorID })
}

export function loginRoutes(router: Router): void {
  router.post('/v1/acl/login', (ctx) => login(ctx as ApiContext))
  router.post('/v1/acl/logout', (ctx) => logout(ctx as ApiContext))
  router.post('/v1/acl/oidc/auth-url', (ctx) => oidcAuthUrlRoute(ctx as ApiContext))
  router.post('/v1/acl/oidc/callback', (ctx) => oidcCallbackRoute(ctx as ApiContext))
}
