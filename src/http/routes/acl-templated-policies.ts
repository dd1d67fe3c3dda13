/** Templated policies (read, preview, list) and the one-time ACL bootstrap. */
import Router from '@koa/router'
import { formatTime, isUuid, newOrderedUuid, newUuid } from '../../lib/ids.js'
import { InvalidInputError, NotFoundError, WardenError } from '../../lib/errors.js'
import {
  BUILTIN_TEMPLATED_POLICIES,
  renderTemplatedPolicy,
  templatedPolicyByName,
  validateTemplateVariables,
  type TemplatedPolicyRecord,
} from '../../acl/templated-policies.js'
import { RESERVED_ID_PREFIX } from '../../state/builtins.js'
import { bareToken } from '../../state/commands.js'
import type { AclToken } from '../../state/records.js'
import type { ApiContext } from '../context.js'
import { ANONYMOUS_BODY, readJsonObject } from '../body.js'
import { liveLinkNames, renderToken } from '../render.js'
import { namespaceOf, requirePermission } from '../request.js'
import { checkRules } from '../rules.js'
import { bootstrapSchema, previewSchema } from '../schemas.js'
import { validateBody } from '../validate.js'
import { propose } from '../write.js'

function renderTemplate(record: TemplatedPolicyRecord): Record<string, unknown> {
  const body: Record<string, unknown> = { TemplateName: record.TemplateName, Schema: record.Schema, Template: record.Template }
  if (record.Description !== undefined) body.Description = record.Description
  return body
}

/** Template names contain a slash (`builtin/service`): the route captures the rest of the path. */
function templateNameOf(ctx: ApiContext): string {
  const raw = ctx.params.name
  return Array.isArray(raw) ? raw.join('/') : String(raw ?? '')
}

function templateOrNotFound(name: string): TemplatedPolicyRecord {
  const record = templatedPolicyByName(name)
  if (record === undefined) throw new NotFoundError(`no templated policy named "${name}"`)
  return record
}

async function readTemplate(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'acl', 'read')
  ctx.body = renderTemplate(templateOrNotFound(templateNameOf(ctx)))
}

async function previewTemplate(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'acl', 'read')
  const name = templateNameOf(ctx)
  templateOrNotFound(name)
  const body = validateBody<{ Name?: string }>(previewSchema, await readJsonObject(ctx))
  await namespaceOf(ctx)
  const variables = body.Name === undefined ? {} : { name: body.Name }
  // The preview body's `Name` is the template's `name` variable: a schema failure names the body field.
  const problems = validateTemplateVariables(name, variables)
  if (problems.length > 0) throw new InvalidInputError('Name', problems.join('; ').replace(/^name: /, ''))
  const policy = renderTemplatedPolicy(name, variables)
  // builtin/workload-identity takes any name, and a backslash or a line break in it makes rules that do not parse
  // (they would grant nothing): refused here, the error's Line and Column pointing into the rendered Rules.
  checkRules(policy.Rules, 'Name')
  ctx.body = policy
}

async function listTemplates(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'acl', 'read')
  const body: Record<string, unknown> = {}
  for (const [name, record] of BUILTIN_TEMPLATED_POLICIES) body[name] = renderTemplate(record)
  ctx.body = body
}

/** PUT /v1/acl/bootstrap: the first management token of a cluster started without one; later calls are refused. */
async function bootstrap(ctx: ApiContext): Promise<void> {
  // A secondary datacenter has the primary's management token by replication, never one of its own (issue 19).
  const { datacenter, primaryDatacenter } = ctx.state.app.settings
  if (datacenter !== primaryDatacenter) {
    throw new WardenError('permission_denied', `bootstrap: ACLs are bootstrapped in the primary datacenter (${primaryDatacenter}); ${datacenter} is a secondary and takes the primary's tokens`, 'bootstrap')
  }
  const body = validateBody<{ BootstrapSecret?: string }>(bootstrapSchema, await readJsonObject(ctx, ANONYMOUS_BODY))
  if (body.BootstrapSecret !== undefined && body.BootstrapSecret !== '') {
    if (!isUuid(body.BootstrapSecret)) throw new InvalidInputError('BootstrapSecret', 'must be a UUID')
    // As for a token's own SecretID: the built-in range is guessable, and a management secret in it would be too.
    if (body.BootstrapSecret.toLowerCase().startsWith(RESERVED_ID_PREFIX)) throw new InvalidInputError('BootstrapSecret', 'is reserved for built-in records')
  }
  const token = await propose(ctx, {
    type: 'acl.bootstrap',
    token: bareToken({
      AccessorID: newOrderedUuid(ctx.state.app.now()),
      SecretID: body.BootstrapSecret ? body.BootstrapSecret.toLowerCase() : newUuid(),
      Description: 'Bootstrap Token (Global Management)',
      CreateTime: formatTime(ctx.state.app.now()),
    }),
  })
  ctx.body = await renderToken(token as AclToken, liveLinkNames(ctx.state.app.state), true)
}

export function templatedPolicyRoutes(router: Router): void {
  router.get('/v1/acl/templated-policy/name/*name', (ctx) => readTemplate(ctx as ApiContext))
  router.post('/v1/acl/templated-policy/preview/*name', (ctx) => previewTemplate(ctx as ApiContext))
  router.get('/v1/acl/templated-policies', (ctx) => listTemplates(ctx as ApiContext))
  router.put('/v1/acl/bootstrap', (ctx) => bootstrap(ctx as ApiContext))
}
