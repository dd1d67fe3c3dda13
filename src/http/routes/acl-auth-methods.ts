/** Auth methods and binding rules: create, read, update, delete (with its cascade), list. */
import { mapPaced, pacer } from '../../lib/pace.js'
import Router from '@koa/router'
import { InvalidInputError, NotFoundError } from '../../lib/errors.js'
import { formatDuration, parseDuration } from '../../lib/duration.js'
import { newUuid } from '../../lib/ids.js'
import { checkAuthMethodConfig, isAuthMethodType, AUTH_METHOD_TYPES } from '../../acl/auth-method-config.js'
import { isValidIdentityName, isValidRecordName } from '../../acl/names.js'
import { templatedPolicyByName, validateTemplateVariables } from '../../acl/templated-policies.js'
import { FilterSyntaxError, parseFilter, selectorsOf } from '../../filter/index.js'
import { emptyIdentity } from '../../acl/auth/identity.js'
import { interpolate, InterpolationError, isTemplated, PLACEHOLDERS } from '../../acl/auth/binding.js'
import { nsKey, recordKey } from '../../state/keys.js'
import type { AclAuthMethod, AclBindingRule, BindType, NamespaceRule } from '../../state/records.js'
import { authMethodSpec, bindingRuleSpec, getRecord, listByIndex, listInNamespace, listRecords } from '../../state/tables.js'
import type { ApiContext } from '../context.js'
import { readJsonObject } from '../body.js'
import { serveRead, withReadView } from '../read.js'
import { renderAuthMethod, renderBindingRule } from '../render.js'
import { namespaceOf, queryParam, requirePermission } from '../request.js'
import { authMethodSchema, bindingRuleSchema } from '../schemas.js'
import { validateBody } from '../validate.js'
import { propose } from '../write.js'
import { idParam } from './acl-policies.js'

/** A selector is an expression of the filter language; a bad one is a 400 that says where. */
export function checkSelector(field: string, selector: string | undefined): string {
  const text = selector ?? ''
  if (text.trim() === '') return ''
  try {
    parseFilter(text)
  } catch (error) {
    if (error instanceof FilterSyntaxError) throw new InvalidInputError(field, `is not a valid expression: ${error.message}`)
    throw error
  }
  return text
}

interface AuthMethodBody {
  Name?: string
  Type?: string
  DisplayName?: string
  Description?: string
  MaxTokenTTL?: string | number
  TokenLocality?: string
  Config?: Record<string, unknown>
  Namespace?: string
  NamespaceRules?: NamespaceRule[]
}

function maxTokenTtlOf(ctx: ApiContext, value: string | number | undefined, type: string): number {
  const { tokenMinExpirationTtlMs: min, tokenMaxExpirationTtlMs: max } = ctx.state.app.settings
  const ms = value === undefined ? 0 : typeof value === 'number' ? value / 1e6 : parseDuration(value)
  if (ms === undefined) throw new InvalidInputError('MaxTokenTTL', 'must be a duration such as 10m')
  if (ms !== 0 && (ms < min || ms > max)) {
    throw new InvalidInputError('MaxTokenTTL', `must be between ${formatDuration(min)} and ${formatDuration(max)} when set`)
  }
  if (ms === 0 && type === 'oidc') throw new InvalidInputError('MaxTokenTTL', 'must be set (nonzero) for an oidc auth method')
  return ms
}

function namespaceRulesOf(rules: NamespaceRule[] | undefined): NamespaceRule[] {
  return (rules ?? []).map((rule, position) => {
    const field = `NamespaceRules[${position}]`
    if (rule.BindNamespace.trim() === '') throw new InvalidInputError(`${field}.BindNamespace`, 'is required')
    return { Selector: checkSelector(`${field}.Selector`, rule.Selector), BindNamespace: rule.BindNamespace }
  })
}

async function writeAuthMethod(ctx: ApiContext, mode: 'create' | 'update'): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  const body = validateBody<AuthMethodBody>(authMethodSchema, await readJsonObject(ctx))
  const pathName = mode === 'update' ? (ctx.params.name ?? '') : undefined
  if (pathName !== undefined && body.Name !== undefined && body.Name !== '' && body.Name !== pathName) {
    throw new InvalidInputError('Name', 'must equal the name in the path')
  }
  const name = pathName ?? body.Name ?? ''
  if (name === '') throw new InvalidInputError('Name', 'is required')
  if (!isValidRecordName(name, 'auth-method')) throw new InvalidInputError('Name', 'must be letters, digits, "-" or "_" (at most 128 characters)')
  const namespace = await namespaceOf(ctx, body.Namespace)
  let type = body.Type ?? ''
  if (mode === 'update') {
    const existing = await getRecord(ctx.state.app.state.reader, authMethodSpec, nsKey(namespace, name))
    if (existing === undefined) throw new NotFoundError(`auth method "${name}" does not exist`)
    if (type === '') type = existing.Type
    else if (type !== existing.Type) throw new InvalidInputError('Type', `is immutable and must match the existing value "${existing.Type}"`)
  }
  if (type === '') throw new InvalidInputError('Type', 'is required')
  if (!isAuthMethodType(type)) throw new InvalidInputError('Type', `must be one of ${AUTH_METHOD_TYPES.join(', ')}`)
  if (body.Config === undefined) throw new InvalidInputError('Config', 'is required')
  const problem = checkAuthMethodConfig(type, body.Config)
  if (problem !== undefined) throw new InvalidInputError(problem.field, problem.rule)
  const method = {
    Name: name,
    Type: type,
    DisplayName: body.DisplayName ?? '',
    Description: body.Description ?? '',
    MaxTokenTTLMs: maxTokenTtlOf(ctx, body.MaxTokenTTL, type),
    TokenLocality: body.TokenLocality ?? '',
    Config: body.Config,
    NamespaceRules: namespaceRulesOf(body.NamespaceRules),
    Namespace: namespace,
  }
  if (method.NamespaceRules.length > 0 && namespace !== 'default') {
    throw new InvalidInputError('NamespaceRules', 'assigning namespaces by rules requires the auth method to reside in the default namespace')
  }
  const result = await propose(ctx, mode === 'create' ? { type: 'acl.auth-method.create', method } : { type: 'acl.auth-method.update', method })
  ctx.body = renderAuthMethod(result as AclAuthMethod)
}

async function readAuthMethod(ctx: ApiContext): Promise<void> {
  const name = ctx.params.name ?? ''
  let namespace = ''
  await serveRead(
    ctx,
    {
      table: 'auth-method',
      prepare: async () => {
        namespace = await namespaceOf(ctx)
        return { recordKey: recordKey('auth-method', nsKey(namespace, name)) }
      },
      missing: () => new NotFoundError(`auth method "${name}" does not exist`),
      consistency: 'all',
      blocking: true,
    },
    async () => {
      const caller = await requirePermission(ctx, 'acl', 'read')
      const method = await getRecord(ctx.state.app.state.reader, authMethodSpec, nsKey(namespace, name))
      const showSecrets = caller.permissions.allows('acl', 'write')
      return method === undefined ? { body: undefined } : { body: renderAuthMethod(method, 'full', showSecrets), modifyIndex: method.ModifyIndex }
    },
  )
}

async function deleteAuthMethod(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  ctx.body = await propose(ctx, { type: 'acl.auth-method.delete', Namespace: await namespaceOf(ctx), Name: ctx.params.name ?? '' })
}

async function listAuthMethods(ctx: ApiContext): Promise<void> {
  await serveRead(ctx, { table: 'auth-method', consistency: 'all', blocking: true }, () =>
    withReadView(ctx, async (reader) => {
      await requirePermission(ctx, 'acl', 'read')
      const namespace = await namespaceOf(ctx, undefined, { allowWildcard: true })
      const pace = pacer()
      const methods = await listRecords(reader, authMethodSpec, namespace === '*' ? '' : nsKey(namespace, ''), pace)
      return { body: await mapPaced(methods, pace, (method) => renderAuthMethod(method, 'list')) }
    }),
  )
}

interface BindingRuleBody {
  ID?: string
  Description?: string
  AuthMethod?: string
  Selector?: string
  BindType?: BindType
  BindName?: string
  BindVars?: Record<string, string>
  Namespace?: string
}

/** A BindName with `${...}` or `{{ ... }}` is checked for well-formed placeholders; a plain one must be a valid result already. */
function checkBindName(type: BindType, name: string, vars: Record<string, string> | undefined): void {
  if (name.trim() === '') throw new InvalidInputError('BindName', 'is required')
  const templated = isTemplated(name)
  for (const match of name.matchAll(PLACEHOLDERS)) {
    if (!/^\s*[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*\s*$/.test(match[1] ?? match[2] ?? '')) {
      throw new InvalidInputError('BindName', `has an invalid placeholder "${match[0]}"`)
    }
  }
  if (templated && isTemplated(name.replace(PLACEHOLDERS, ''))) throw new InvalidInputError('BindName', 'has an unterminated "${" or "{{" placeholder')
  if (type === 'templated-policy') {
    const template = templatedPolicyByName(name)
    if (template === undefined) throw new InvalidInputError('BindName', `no templated policy named "${name}"`)
    const interpolated = Object.values(vars ?? {}).some(isTemplated)
    if (!interpolated && template.Schema !== '') {
      const problems = validateTemplateVariables(name, vars)
      if (problems.length > 0) throw new InvalidInputError('BindVars', problems.join('; '))
    }
    return
  }
  if (vars !== undefined && Object.keys(vars).length > 0) throw new InvalidInputError('BindVars', 'applies only to BindType templated-policy')
  if (templated) return
  const valid = type === 'role' ? isValidRecordName(name, 'role') : isValidIdentityName(name)
  if (!valid) throw new InvalidInputError('BindName', `is not a valid ${type} name`)
}

/** Whether `path` names a field of `value`: object keys by name, any index into a list. */
function hasField(value: unknown, path: readonly string[]): boolean {
  let current = value
  for (const part of path) {
    if (Array.isArray(current)) return /^\d+$/.test(part)
    if (typeof current !== 'object' || current === null || !Object.hasOwn(current, part)) return false
    current = (current as Record<string, unknown>)[part]
  }
  return true
}

function fieldNames(value: unknown, prefix = ''): string[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [prefix]
  return Object.entries(value as Record<string, unknown>).flatMap(([key, item]) => fieldNames(item, prefix === '' ? key : `${prefix}.${key}`))
}

/**
 * A rule may only name what its method's identity provides (Consul's IsValidBindingRule): every selector field, and
 * every `${...}` in BindName and BindVars, which must also give a valid name once filled in.
 */
function checkAgainstIdentity(method: AclAuthMethod, body: BindingRuleBody): void {
  const identity = emptyIdentity(method.Type, method.Config)
  if (identity === undefined) return
  const known = fieldNames(identity.selectable).filter((name) => name !== '')
  const selector = body.Selector ?? ''
  if (selector.trim() !== '') {
    for (const path of selectorsOf(parseFilter(selector))) {
      if (!hasField(identity.selectable, path)) {
        throw new InvalidInputError(
          'Selector',
          `names "${path.join('.')}", which a ${method.Type} auth method does not provide (it provides ${known.length === 0 ? 'nothing' : known.join(', ')})`,
        )
      }
    }
  }
  // Filled in with a sample value, the name must come out valid, as it will at login.
  const sample = Object.fromEntries(Object.keys(identity.variables).map((name) => [name, 'a']))
  const fill = (field: string, template: string): string => {
    try {
      return interpolate(template, sample)
    } catch (error) {
      if (error instanceof InterpolationError) throw new InvalidInputError(field, error.message)
      throw error
    }
  }
  const bindName = fill('BindName', body.BindName ?? '')
  for (const [name, value] of Object.entries(body.BindVars ?? {})) fill(`BindVars.${name}`, value)
  if (isTemplated(body.BindName ?? '') && body.BindType !== undefined && body.BindType !== 'templated-policy') {
    const valid = body.BindType === 'role' ? isValidRecordName(bindName, 'role') : isValidIdentityName(bindName)
    if (!valid) throw new InvalidInputError('BindName', `does not give a valid ${body.BindType} name once filled in`)
  }
}

async function writeBindingRule(ctx: ApiContext, mode: 'create' | 'update'): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  const pathId = mode === 'update' ? idParam(ctx.params.id) : undefined
  const body = validateBody<BindingRuleBody>(bindingRuleSchema, await readJsonObject(ctx))
  const givenId = body.ID === undefined || body.ID === '' ? undefined : body.ID.toLowerCase()
  if (pathId === undefined && givenId !== undefined) throw new InvalidInputError('ID', 'cannot be specified when creating a new binding rule')
  if (pathId !== undefined && givenId !== undefined && givenId !== pathId) throw new InvalidInputError('ID', 'must equal the ID in the path')
  const namespace = await namespaceOf(ctx, body.Namespace)
  let authMethod = body.AuthMethod ?? ''
  let ruleNamespace = namespace
  if (pathId !== undefined) {
    const existing = await getRecord(ctx.state.app.state.reader, bindingRuleSpec, pathId)
    if (existing === undefined) throw new NotFoundError(`binding rule "${pathId}" does not exist`)
    if (authMethod === '') authMethod = existing.AuthMethod
    else if (authMethod !== existing.AuthMethod) throw new InvalidInputError('AuthMethod', `is immutable and must match the existing value "${existing.AuthMethod}"`)
    if (body.Namespace === undefined || body.Namespace === '') ruleNamespace = existing.Namespace
  }
  if (authMethod === '') throw new InvalidInputError('AuthMethod', 'is required')
  if (body.BindType === undefined) throw new InvalidInputError('BindType', 'is required')
  checkBindName(body.BindType, body.BindName ?? '', body.BindVars)
  const rule = {
    ID: pathId ?? newUuid(),
    Description: body.Description ?? '',
    AuthMethod: authMethod,
    Selector: checkSelector('Selector', body.Selector),
    BindType: body.BindType,
    BindName: body.BindName ?? '',
    ...(body.BindVars === undefined || Object.keys(body.BindVars).length === 0 ? {} : { BindVars: body.BindVars }),
    Namespace: ruleNamespace,
  }
  const method = await getRecord(ctx.state.app.state.reader, authMethodSpec, nsKey(ruleNamespace, authMethod))
  if (method !== undefined) checkAgainstIdentity(method, body)
  const result = await propose(ctx, mode === 'create' ? { type: 'acl.binding-rule.create', rule } : { type: 'acl.binding-rule.update', rule })
  ctx.body = renderBindingRule(result as AclBindingRule)
}

async function readBindingRule(ctx: ApiContext): Promise<void> {
  const id = idParam(ctx.params.id)
  await serveRead(
    ctx,
    {
      table: 'binding-rule',
      recordKey: recordKey('binding-rule', id),
      missing: () => new NotFoundError(`binding rule "${id}" does not exist`),
      consistency: 'all',
      blocking: true,
    },
    async () => {
      await requirePermission(ctx, 'acl', 'read')
      const rule = await getRecord(ctx.state.app.state.reader, bindingRuleSpec, id)
      return rule === undefined ? { body: undefined } : { body: renderBindingRule(rule), modifyIndex: rule.ModifyIndex }
    },
  )
}

async function deleteBindingRule(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  ctx.body = await propose(ctx, { type: 'acl.binding-rule.delete', ID: idParam(ctx.params.id) })
}

async function listBindingRules(ctx: ApiContext): Promise<void> {
  await serveRead(ctx, { table: 'binding-rule', consistency: 'all', blocking: true }, () =>
    withReadView(ctx, async (reader) => {
      await requirePermission(ctx, 'acl', 'read')
      const namespace = await namespaceOf(ctx, undefined, { allowWildcard: true })
      const authMethod = queryParam(ctx, 'authmethod')
      const pace = pacer()
      let rules: AclBindingRule[]
      if (authMethod) {
        rules = await listByIndex(reader, bindingRuleSpec, 'authmethod', nsKey(namespace === '*' ? 'default' : namespace, authMethod), pace)
      } else {
        rules = await listInNamespace(reader, bindingRuleSpec, namespace, pace)
      }
      return { body: await mapPaced(rules, pace, (rule) => renderBindingRule(rule, 'list')) }
    }),
  )
}

export function authMethodRoutes(router: Router): void {
  router.put('/v1/acl/auth-method', (ctx) => writeAuthMethod(ctx as ApiContext, 'create'))
  router.get('/v1/acl/auth-method/:name', (ctx) => readAuthMethod(ctx as ApiContext))
  router.put('/v1/acl/auth-method/:name', (ctx) => writeAuthMethod(ctx as ApiContext, 'update'))
  router.delete('/v1/acl/auth-method/:name', (ctx) => deleteAuthMethod(ctx as ApiContext))
  router.get('/v1/acl/auth-methods', (ctx) => listAuthMethods(ctx as ApiContext))
  router.put('/v1/acl/binding-rule', (ctx) => writeBindingRule(ctx as ApiContext, 'create'))
  router.get('/v1/acl/binding-rule/:id', (ctx) => readBindingRule(ctx as ApiContext))
  router.put('/v1/acl/binding-rule/:id', (ctx) => writeBindingRule(ctx as ApiContext, 'update'))
  router.delete('/v1/acl/binding-rule/:id', (ctx) => deleteBindingRule(ctx as ApiContext))
  router.get('/v1/acl/binding-rules', (ctx) => listBindingRules(ctx as ApiContext))
}
