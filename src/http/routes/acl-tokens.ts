/**
 * Tokens: create, read (and expanded read), self, update, clone, delete, list. What needs the clock (CreateTime,
 * expiry bounds) or randomness (AccessorID, SecretID) is decided here and travels in the command; what needs the
 * state (unique IDs, links, immutable fields) is decided when the command is applied.
 */
import { mapPaced, pacer } from '../../lib/pace.js'
import Router from '@koa/router'
import { AclNotFoundError, InvalidInputError, NotFoundError } from '../../lib/errors.js'
import { formatDuration, parseDuration } from '../../lib/duration.js'
import { formatTime, isUuid, newOrderedUuid, newUuid, parseTime } from '../../lib/ids.js'
import { isExpired } from '../../acl/resolver.js'
import { effectivePermissions } from '../../acl/effective-permissions.js'
import { collectTokenRules } from '../../acl/token-authorizer.js'
import { nodeIdentityPolicy, serviceIdentityPolicy, type SyntheticPolicy } from '../../acl/synthetic-policies.js'
import { renderTemplatedPolicy } from '../../acl/templated-policies.js'
import { ANONYMOUS_TOKEN_ID, RESERVED_ID_PREFIX } from '../../state/builtins.js'
import type { LinkInput, TokenCreate } from '../../state/commands.js'
import { nsKey, recordKey } from '../../state/keys.js'
import type { AclRole, AclToken, NodeIdentity, ServiceIdentity, TemplatedPolicyLink } from '../../state/records.js'
import { getRecord, listByIndex, listInNamespace, listLinkedTo, policySpec, roleSpec, tokenSpec } from '../../state/tables.js'
import type { ApiContext } from '../context.js'
import { checkLinks, checkNodeIdentities, checkServiceIdentities, checkTemplatedPolicies } from '../acl-fields.js'
import { serveRead, withReadView } from '../read.js'
import { LinkNames, liveLinkNames, renderPolicy, renderRole, renderToken } from '../render.js'
import { boolParam, callerOf, namespaceOf, queryParam, requirePermission, secretOf } from '../request.js'
import { tokenSchema, tokenCloneSchema } from '../schemas.js'
import { readJsonObject } from '../body.js'
import { validateBody } from '../validate.js'
import { propose } from '../write.js'
import { authorizeRoutes } from './acl-authorize.js'

interface TokenBody {
  AccessorID?: string
  SecretID?: string
  Description?: string
  Policies?: LinkInput[]
  Roles?: LinkInput[]
  TemplatedPolicies?: Array<{ TemplateName: string; TemplateVariables?: { name?: unknown } }>
  ServiceIdentities?: ServiceIdentity[]
  NodeIdentities?: NodeIdentity[]
  Local?: boolean
  AuthMethod?: string
  ExpirationTime?: string
  ExpirationTTL?: string | number
  Namespace?: string
}

export function accessorParam(value: string | undefined, field = 'AccessorID'): string {
  if (value === undefined || !isUuid(value)) throw new InvalidInputError(field, 'must be a UUID')
  return value.toLowerCase()
}

function linkedFields(body: TokenBody, local: boolean) {
  return {
    Policies: checkLinks('Policies', body.Policies),
    Roles: checkLinks('Roles', body.Roles),
    TemplatedPolicies: checkTemplatedPolicies(body.TemplatedPolicies),
    ServiceIdentities: checkServiceIdentities(body.ServiceIdentities, local),
    NodeIdentities: checkNodeIdentities(body.NodeIdentities),
  }
}

/** ExpirationTime from ExpirationTime or ExpirationTTL, within the agent's bounds from now. */
function expirationOf(ctx: ApiContext, body: TokenBody, nowMs: number): string | undefined {
  const { tokenMinExpirationTtlMs: min, tokenMaxExpirationTtlMs: max } = ctx.state.app.settings
  const bounds = `must be between ${formatDuration(min)} and ${formatDuration(max)}`
  const ttlGiven = body.ExpirationTTL !== undefined && body.ExpirationTTL !== '' && body.ExpirationTTL !== 0 && body.ExpirationTTL !== '0s'
  const timeGiven = body.ExpirationTime !== undefined && body.ExpirationTime !== ''
  if (ttlGiven && timeGiven) throw new InvalidInputError('ExpirationTTL', 'cannot be set together with ExpirationTime')
  if (ttlGiven) {
    // A number is nanoseconds, as Go encodes a time.Duration.
    const ttlMs = typeof body.ExpirationTTL === 'number' ? body.ExpirationTTL / 1e6 : parseDuration(body.ExpirationTTL ?? '')
    if (ttlMs === undefined) throw new InvalidInputError('ExpirationTTL', 'must be a duration such as 10m')
    if (ttlMs < min || ttlMs > max) throw new InvalidInputError('ExpirationTTL', bounds)
    return formatTime(nowMs + ttlMs)
  }
  if (timeGiven) {
    const at = parseTime(body.ExpirationTime ?? '')
    if (at === undefined) throw new InvalidInputError('ExpirationTime', 'must be an RFC 3339 time')
    if (at < nowMs + min || at > nowMs + max) throw new InvalidInputError('ExpirationTime', `${bounds} in the future`)
    return formatTime(at)
  }
  return undefined
}

function checkOwnIds(body: TokenBody): void {
  for (const field of ['AccessorID', 'SecretID'] as const) {
    const value = body[field]
    if (value === undefined || value === '') continue
    if (!isUuid(value)) throw new InvalidInputError(field, 'must be a UUID')
    if (value.toLowerCase().startsWith(RESERVED_ID_PREFIX)) throw new InvalidInputError(field, 'is reserved for built-in records')
  }
}

async function showSecrets(ctx: ApiContext): Promise<boolean> {
  return (await callerOf(ctx)).permissions.allows('acl', 'write')
}

/** A token that exists and has not expired, or a 404. */
async function liveToken(ctx: ApiContext, accessorID: string): Promise<AclToken> {
  const token = await getRecord(ctx.state.app.state.reader, tokenSpec, accessorID)
  if (token === undefined || isExpired(token, ctx.state.app.now())) throw new NotFoundError(`token "${accessorID}" does not exist`)
  return token
}

async function respondToken(ctx: ApiContext, token: AclToken): Promise<void> {
  ctx.body = await renderToken(token, liveLinkNames(ctx.state.app.state), true)
}

async function createToken(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  const body = validateBody<TokenBody>(tokenSchema, await readJsonObject(ctx))
  checkOwnIds(body)
  if (body.AuthMethod !== undefined && body.AuthMethod !== '') {
    throw new InvalidInputError('AuthMethod', 'may only be set by a login through an auth method')
  }
  const nowMs = ctx.state.app.now()
  const local = body.Local ?? false
  const expiration = expirationOf(ctx, body, nowMs)
  const token: TokenCreate = {
    AccessorID: body.AccessorID ? body.AccessorID.toLowerCase() : newOrderedUuid(nowMs),
    SecretID: body.SecretID ? body.SecretID.toLowerCase() : newUuid(),
    Description: body.Description ?? '',
    ...linkedFields(body, local),
    Local: local,
    AuthMethod: '',
    ...(expiration === undefined ? {} : { ExpirationTime: expiration }),
    CreateTime: formatTime(nowMs),
    Namespace: await namespaceOf(ctx, body.Namespace),
  }
  await respondToken(ctx, (await propose(ctx, { type: 'acl.token.create', token })) as AclToken)
}

async function updateToken(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  const accessorID = accessorParam(ctx.params.id)
  const body = validateBody<TokenBody>(tokenSchema, await readJsonObject(ctx))
  if (body.AccessorID !== undefined && body.AccessorID !== '' && body.AccessorID.toLowerCase() !== accessorID) {
    throw new InvalidInputError('AccessorID', 'must equal the AccessorID in the path')
  }
  if (body.ExpirationTTL !== undefined && body.ExpirationTTL !== '' && body.ExpirationTTL !== 0 && body.ExpirationTTL !== '0s') {
    throw new InvalidInputError('ExpirationTTL', 'can only be set when the token is created')
  }
  const existing = await liveToken(ctx, accessorID)
  let expirationTime: string | undefined
  if (body.ExpirationTime !== undefined && body.ExpirationTime !== '') {
    const at = parseTime(body.ExpirationTime)
    if (at === undefined) throw new InvalidInputError('ExpirationTime', 'must be an RFC 3339 time')
    expirationTime = formatTime(at)
  }
  const local = body.Local ?? false
  const namespace = body.Namespace !== undefined && body.Namespace !== '' ? await namespaceOf(ctx, body.Namespace) : existing.Namespace
  const result = await propose(ctx, {
    type: 'acl.token.update',
    token: {
      AccessorID: accessorID,
      ...(body.SecretID !== undefined && body.SecretID !== '' ? { SecretID: body.SecretID.toLowerCase() } : {}),
      ...(body.AuthMethod !== undefined && body.AuthMethod !== '' ? { AuthMethod: body.AuthMethod } : {}),
      ...(expirationTime === undefined ? {} : { ExpirationTime: expirationTime }),
      Description: body.Description ?? '',
      ...linkedFields(body, local),
      Local: local,
      Namespace: namespace,
    },
  })
  await respondToken(ctx, result as AclToken)
}

async function cloneToken(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  const accessorID = accessorParam(ctx.params.id)
  const body = validateBody<{ Description?: string; Namespace?: string }>(tokenCloneSchema, await readJsonObject(ctx))
  const source = await liveToken(ctx, accessorID)
  const result = await propose(ctx, {
    type: 'acl.token.clone',
    sourceAccessorID: accessorID,
    token: { AccessorID: newOrderedUuid(ctx.state.app.now()), SecretID: newUuid(), Description: body.Description ?? '', CreateTime: formatTime(ctx.state.app.now()), Namespace: source.Namespace },
  })
  await respondToken(ctx, result as AclToken)
}

async function deleteToken(ctx: ApiContext): Promise<void> {
  const caller = await requirePermission(ctx, 'acl', 'write')
  const accessorID = accessorParam(ctx.params.id)
  if (accessorID === caller.token.AccessorID) {
    throw new InvalidInputError('AccessorID', "deletion of the request's own token is not permitted")
  }
  if (accessorID === ANONYMOUS_TOKEN_ID) throw new InvalidInputError('AccessorID', 'delete operation not permitted on the anonymous token')
  ctx.body = await propose(ctx, { type: 'acl.token.delete', AccessorID: accessorID })
}

async function readToken(ctx: ApiContext): Promise<void> {
  const accessorID = accessorParam(ctx.params.id)
  const key = recordKey('token', accessorID)
  await serveRead(
    ctx,
    { table: 'token', recordKey: key, missing: () => new NotFoundError(`token "${accessorID}" does not exist`), consistency: 'all', blocking: true },
    async () => {
      await requirePermission(ctx, 'acl', 'read')
      const { reader } = ctx.state.app.state
      const token = await getRecord(reader, tokenSpec, accessorID)
      if (token === undefined || isExpired(token, ctx.state.app.now())) return { body: undefined }
      const names = new LinkNames(reader)
      const body = await renderToken(token, names, await showSecrets(ctx))
      if (boolParam(ctx, 'expanded')) Object.assign(body, await expansion(ctx, token, names))
      return { body, modifyIndex: token.ModifyIndex }
    },
  )
}

/** The expanded read: every policy and role that affects the token, and the agent settings that complete them. */
async function expansion(ctx: ApiContext, token: AclToken, names: LinkNames): Promise<Record<string, unknown>> {
  const { settings } = ctx.state.app
  const roles: AclRole[] = []
  for (const link of token.Roles) {
    const role = await names.role(link.ID)
    if (role !== undefined) roles.push(role)
  }
  const policies: Array<Record<string, unknown>> = []
  const seen = new Set<string>()
  const addPolicy = (policy: Record<string, unknown>): void => {
    const id = String(policy.ID)
    if (seen.has(id)) return
    seen.add(id)
    policies.push(policy)
  }
  for (const link of [...token.Policies, ...roles.flatMap((role) => role.Policies)]) {
    const policy = await names.policy(link.ID)
    if (policy !== undefined) addPolicy(renderPolicy(policy))
  }
  const synthetic: SyntheticPolicy[] = []
  const identitySources = [token, ...roles]
  for (const source of identitySources) {
    for (const identity of source.ServiceIdentities) synthetic.push(serviceIdentityPolicy(identity.ServiceName, identity.Datacenters ?? []))
    for (const identity of source.NodeIdentities) synthetic.push(nodeIdentityPolicy(identity.NodeName, identity.Datacenter))
    for (const link of source.TemplatedPolicies) {
      const rendered = renderTemplate(link)
      if (rendered !== undefined) synthetic.push(rendered)
    }
  }
  for (const policy of synthetic) addPolicy({ ...policy, Namespace: token.Namespace })
  return {
    ExpandedPolicies: policies,
    ExpandedRoles: await Promise.all(roles.map((role) => renderRole(role, names))),
    NamespaceDefaultPolicies: [],
    NamespaceDefaultRoles: [],
    AgentACLDefaultPolicy: settings.defaultPolicy,
    AgentACLDownPolicy: settings.downPolicy,
    ResolvedByAgent: settings.nodeName,
  }
}

function renderTemplate(link: TemplatedPolicyLink): SyntheticPolicy | undefined {
  try {
    return renderTemplatedPolicy(link.TemplateName, link.TemplateVariables)
  } catch {
    // A template this version no longer knows grants nothing, so it expands to nothing (as the authorizer treats it).
    return undefined
  }
}

/**
 * `GET /v1/acl/token/:AccessorID/permissions` (issue 21): what the token may do in this datacenter, per resource, each
 * rule with the sources that decided it (acl/effective-permissions.ts, built from the rules the authorizer checks).
 * Needs acl:read, as reading the token; a missing or expired token is a 404. Not a blocking query: the answer
 * depends on the token, its roles and its policies, and an index of one table would miss changes to the others.
 */
async function readPermissions(ctx: ApiContext): Promise<void> {
  const accessorID = accessorParam(ctx.params.id)
  const key = recordKey('token', accessorID)
  await serveRead(
    ctx,
    { table: 'token', recordKey: key, missing: () => new NotFoundError(`token "${accessorID}" does not exist`), consistency: 'all', blocking: false },
    async () => {
      await requirePermission(ctx, 'acl', 'read')
      const { state, settings, now } = ctx.state.app
      const token = await getRecord(state.reader, tokenSpec, accessorID)
      if (token === undefined || isExpired(token, now())) return { body: undefined }
      const collected = await collectTokenRules(state.reader, token, settings.datacenter)
      return { body: effectivePermissions(token.AccessorID, collected, settings.datacenter, settings.defaultPolicy), modifyIndex: token.ModifyIndex }
    },
  )
}

async function readSelf(ctx: ApiContext): Promise<void> {
  await serveRead(ctx, { table: 'token', consistency: 'all', blocking: true }, async () => {
    // The caller holds the secret: no permission is needed, and the real SecretID is shown. Without a secret there is
    // no token to show (Consul answers "ACL not found" too).
    if (secretOf(ctx) === undefined) throw new AclNotFoundError()
    const caller = await callerOf(ctx)
    const body = await renderToken(caller.token, liveLinkNames(ctx.state.app.state), true)
    return { body, modifyIndex: caller.token.ModifyIndex }
  })
}

async function listTokens(ctx: ApiContext): Promise<void> {
  await serveRead(ctx, { table: 'token', consistency: 'all', blocking: true }, () =>
    withReadView(ctx, async (reader) => {
      await requirePermission(ctx, 'acl', 'read')
      const namespace = await namespaceOf(ctx, undefined, { allowWildcard: true })
      const policy = queryParam(ctx, 'policy')
      const role = queryParam(ctx, 'role')
      const service = queryParam(ctx, 'servicename')
      const authMethod = queryParam(ctx, 'authmethod')
      const pace = pacer()
      let tokens: AclToken[]
      // Each filter is a lookup in its index; the namespace test and any further filter apply to what it found.
      if (policy) tokens = await listLinkedTo(reader, tokenSpec, 'policy', policySpec, accessorParam(policy, 'policy'), pace)
      else if (role) tokens = await listLinkedTo(reader, tokenSpec, 'role', roleSpec, accessorParam(role, 'role'), pace)
      else if (service) tokens = await listByIndex(reader, tokenSpec, 'service', service, pace)
      else if (authMethod) {
        const methodNamespace = queryParam(ctx, 'authmethod-ns') || (namespace === '*' ? 'default' : namespace)
        tokens = await listByIndex(reader, tokenSpec, 'authmethod', nsKey(methodNamespace, authMethod), pace)
      } else tokens = await listInNamespace(reader, tokenSpec, namespace, pace)
      const nowMs = ctx.state.app.now()
      const matches = (token: AclToken): boolean =>
        (namespace === '*' || token.Namespace === namespace) &&
        !isExpired(token, nowMs) &&
        (!policy || token.Policies.some((link) => link.ID === policy.toLowerCase())) &&
        (!role || token.Roles.some((link) => link.ID === role.toLowerCase())) &&
        (!service || token.ServiceIdentities.some((identity) => identity.ServiceName === service)) &&
        (!authMethod || token.AuthMethod === authMethod)
      const show = await showSecrets(ctx)
      const names = new LinkNames(reader)
      return { body: await mapPaced(tokens.filter(matches), pace, (token) => renderToken(token, names, show)) }
    }),
  )
}

export function tokenRoutes(router: Router): void {
  router.put('/v1/acl/token', (ctx) => createToken(ctx as ApiContext))
  router.get('/v1/acl/token/self', (ctx) => readSelf(ctx as ApiContext))
  router.get('/v1/acl/token/:id', (ctx) => readToken(ctx as ApiContext))
  router.get('/v1/acl/token/:id/permissions', (ctx) => readPermissions(ctx as ApiContext))
  router.put('/v1/acl/token/:id', (ctx) => updateToken(ctx as ApiContext))
  router.put('/v1/acl/token/:id/clone', (ctx) => cloneToken(ctx as ApiContext))
  router.delete('/v1/acl/token/:id', (ctx) => deleteToken(ctx as ApiContext))
  router.get('/v1/acl/tokens', (ctx) => listTokens(ctx as ApiContext))
  // The caller's own token's checks: registered with the token routes, which they are about.
  authorizeRoutes(router)
}
