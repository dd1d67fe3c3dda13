/**
 * Login and logout through auth methods (Consul's /v1/acl/login and /v1/acl/logout). Neither needs an ACL: a login
 * is authorized by the bearer token it presents, a logout by holding the secret it deletes.
 *
 * Login: find the auth method (body Namespace, `?ns`, `X-Service-Namespace`, else `default`; the request's own token,
 * if any, plays no part), verify the bearer token with it, bind the identity through its binding and namespace
 * rules, and propose the token. What needs the clock or randomness (AccessorID, SecretID, CreateTime, ExpirationTime
 * from MaxTokenTTL) is decided here; roles by name and the method being unchanged are decided when it is applied.
 * Every refusal is a 403 `permission_denied` that says why (an invalid bearer token, no privilege, a rule that
 * cannot apply); an unknown auth method is 403 `acl_not_found`, as Consul's "ACL not found"; a malformed request is
 * a 400.
 *
 * Logout: deletes the presented token if login created it; any other token is refused with Consul's "Permission
 * denied: token wasn't created via login". No token, or an unknown or expired one, is 403 `acl_not_found`.
 */
import Router from '@koa/router'
import { AclNotFoundError, InvalidInputError, PermissionDeniedError, WardenError } from '../../lib/errors.js'
import { formatTime, newUuid } from '../../lib/ids.js'
import { loginDescription, planLogin, verifyBearerToken } from '../../acl/auth/login.js'
import type { TokenCreate } from '../../state/commands.js'
import { nsKey } from '../../state/keys.js'
import { DEFAULT_NAMESPACE, type AclToken } from '../../state/records.js'
import { authMethodSpec, bindingRuleSpec, getRecord, listByIndex } from '../../state/tables.js'
import type { ApiContext } from '../context.js'
import { readJsonObject } from '../body.js'
import { LinkNames, renderToken } from '../render.js'
import { queryParam, secretOf } from '../request.js'
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
function methodNamespace(ctx: ApiContext, body: LoginBody): string {
  const sources: Array<[string, string | undefined]> = [
    ['Namespace', body.Namespace],
    ['ns', queryParam(ctx, 'ns')],
    ['X-Service-Namespace', ctx.get('X-Service-Namespace')],
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

async function login(ctx: ApiContext): Promise<void> {
  const body = validateBody<LoginBody>(loginSchema, await readJsonObject(ctx))
  if (body.AuthMethod === '') throw new InvalidInputError('AuthMethod', 'is required')
  if (body.BearerToken === '') throw new InvalidInputError('BearerToken', 'is required')
  const meta = checkMeta(body.Meta)
  const { reader } = ctx.state.app.state
  const { settings, now } = ctx.state.app
  const namespace = methodNamespace(ctx, body)
  const method = await getRecord(reader, authMethodSpec, nsKey(namespace, body.AuthMethod))
  if (method === undefined) throw new WardenError('acl_not_found', `ACL not found: auth method "${body.AuthMethod}" does not exist in namespace "${namespace}"`)
  const identity = await verifyBearerToken(method, body.BearerToken, now())
  const rules = await listByIndex(reader, bindingRuleSpec, 'authmethod', nsKey(method.Namespace, method.Name))
  const plan = planLogin(method, rules, identity, settings.datacenter)
  // The clock is read after verification, which may have waited on the network: the token's lifetime starts now.
  const nowMs = now()
  const token: TokenCreate = {
    AccessorID: newUuid(),
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

async function logout(ctx: ApiContext): Promise<void> {
  const secret = secretOf(ctx)
  if (secret === undefined || secret === '') throw new AclNotFoundError()
  const token = await ctx.state.app.resolver.tokenBySecret(secret, ctx.state.app.now())
  if (token === undefined) throw new AclNotFoundError()
  if (token.AuthMethod === '') throw new PermissionDeniedError("Permission denied: token wasn't created via login")
  ctx.body = await propose(ctx, { type: 'acl.token.delete', AccessorID: token.AccessorID })
}

export function loginRoutes(router: Router): void {
  router.post('/v1/acl/login', (ctx) => login(ctx as ApiContext))
  router.post('/v1/acl/logout', (ctx) => logout(ctx as ApiContext))
}
