/** Policies and roles: create, read by ID and by name, update, delete, list. */
import { mapPaced, pacer } from '../../lib/pace.js'
import Router from '@koa/router'
import { InvalidInputError, NotFoundError } from '../../lib/errors.js'
import { isUuid, newUuid } from '../../lib/ids.js'
import { isValidRecordName, type RecordKind } from '../../acl/names.js'
import type { LinkInput } from '../../state/commands.js'
import { nsKey, recordKey } from '../../state/keys.js'
import type { AclPolicy, AclRole, NodeIdentity, ServiceIdentity } from '../../state/records.js'
import type { Reader } from '../../state/reader.js'
import { getByUnique, getRecord, listInNamespace, listLinkedTo, policySpec, roleSpec, type TableSpec } from '../../state/tables.js'
import type { ApiContext } from '../context.js'
import { checkDatacenters, checkLinks, checkNodeIdentities, checkServiceIdentities, checkTemplatedPolicies } from '../acl-fields.js'
import { readJsonObject } from '../body.js'
import { serveRead, withReadView } from '../read.js'
import { LinkNames, liveLinkNames, renderPolicy, renderRole } from '../render.js'
import { namespaceOf, queryParam, requirePermission } from '../request.js'
import { policySchema, roleSchema } from '../schemas.js'
import { validateBody } from '../validate.js'
import { propose } from '../write.js'
import { checkRules } from '../rules.js'

export function idParam(value: string | undefined, field = 'id'): string {
  if (value === undefined || !isUuid(value)) throw new InvalidInputError(field, 'must be a UUID')
  return value.toLowerCase()
}

export function checkName(value: string, kind: RecordKind): string {
  if (!isValidRecordName(value, kind)) {
    throw new InvalidInputError('Name', `must be letters, digits, "-" or "_" (at most ${kind === 'role' ? 256 : 128} characters)`)
  }
  return value
}

/** On create the ID is new; on update a body ID, when given, must equal the path's. */
function bodyId(body: { ID?: string }, pathId: string | undefined, noun: string): string {
  const given = body.ID === undefined || body.ID === '' ? undefined : body.ID.toLowerCase()
  if (pathId === undefined) {
    if (given !== undefined) throw new InvalidInputError('ID', `cannot be specified when creating a new ${noun}`)
    return newUuid()
  }
  if (given !== undefined && given !== pathId) throw new InvalidInputError('ID', 'must equal the ID in the path')
  return pathId
}

interface PolicyBody {
  ID?: string
  Name: string
  Description?: string
  Rules?: string
  Datacenters?: string[]
  Namespace?: string
}

async function writePolicy(ctx: ApiContext, mode: 'create' | 'update'): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  const pathId = mode === 'update' ? idParam(ctx.params.id) : undefined
  const body = validateBody<PolicyBody>(policySchema, await readJsonObject(ctx))
  const policy = {
    ID: bodyId(body, pathId, 'policy'),
    Name: checkName(body.Name, 'policy'),
    Description: body.Description ?? '',
    Rules: checkRules(body.Rules ?? ''),
    Datacenters: checkDatacenters('Datacenters', body.Datacenters),
    Namespace: await namespaceOf(ctx, body.Namespace),
  }
  if (mode === 'update') {
    const existing = await getRecord(ctx.state.app.state.reader, policySpec, policy.ID)
    if (existing === undefined) throw new NotFoundError(`policy "${policy.ID}" does not exist`)
    if (body.Namespace === undefined || body.Namespace === '') policy.Namespace = existing.Namespace
  }
  const result = await propose(ctx, mode === 'create' ? { type: 'acl.policy.create', policy } : { type: 'acl.policy.update', policy })
  ctx.body = renderPolicy(result as AclPolicy)
}

/**
 * GET of a policy or a role by ID, or by name in the caller's namespace; needs acl:read. A blocking read by ID waits on
 * the record, one by name on the table.
 */
async function readByIdOrName<R extends AclPolicy | AclRole>(
  ctx: ApiContext,
  by: 'id' | 'name',
  spec: TableSpec<R>,
  render: (record: R, reader: Reader) => Promise<Record<string, unknown>> | Record<string, unknown>,
): Promise<void> {
  const id = by === 'id' ? idParam(ctx.params.id) : undefined
  const name = by === 'name' ? (ctx.params.name ?? '') : undefined
  await serveRead(
    ctx,
    {
      table: spec.table,
      ...(id === undefined ? {} : { recordKey: recordKey(spec.table, id) }),
      missing: () => new NotFoundError(`${spec.table} ${id === undefined ? `named "${name}"` : `"${id}"`} does not exist`),
      consistency: 'all',
      blocking: true,
    },
    async () => {
      await requirePermission(ctx, 'acl', 'read')
      const { reader } = ctx.state.app.state
      const record = id !== undefined ? await getRecord(reader, spec, id) : await getByUnique(reader, spec, 'name', nsKey(await namespaceOf(ctx), name ?? ''))
      return record === undefined ? { body: undefined } : { body: await render(record, reader), modifyIndex: record.ModifyIndex }
    },
  )
}

async function readPolicy(ctx: ApiContext, by: 'id' | 'name'): Promise<void> {
  await readByIdOrName(ctx, by, policySpec, (policy) => renderPolicy(policy))
}

async function deleteById(ctx: ApiContext, type: 'acl.policy.delete' | 'acl.role.delete'): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  ctx.body = await propose(ctx, { type, ID: idParam(ctx.params.id) })
}

async function listPolicies(ctx: ApiContext): Promise<void> {
  await serveRead(ctx, { table: 'policy', consistency: 'all', blocking: true }, () =>
    withReadView(ctx, async (reader) => {
      await requirePermission(ctx, 'acl', 'read')
      const namespace = await namespaceOf(ctx, undefined, { allowWildcard: true })
      const pace = pacer()
      const policies = await listInNamespace(reader, policySpec, namespace, pace)
      return { body: await mapPaced(policies, pace, (policy) => renderPolicy(policy, 'list')) }
    }),
  )
}

interface RoleBody {
  ID?: string
  Name: string
  Description?: string
  Policies?: LinkInput[]
  TemplatedPolicies?: Array<{ TemplateName: string; TemplateVariables?: { name?: unknown } }>
  ServiceIdentities?: ServiceIdentity[]
  NodeIdentities?: NodeIdentity[]
  Namespace?: string
}

async function writeRole(ctx: ApiContext, mode: 'create' | 'update'): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  const pathId = mode === 'update' ? idParam(ctx.params.id) : undefined
  const body = validateBody<RoleBody>(roleSchema, await readJsonObject(ctx))
  const role = {
    ID: bodyId(body, pathId, 'role'),
    Name: checkName(body.Name, 'role'),
    Description: body.Description ?? '',
    Policies: checkLinks('Policies', body.Policies),
    TemplatedPolicies: checkTemplatedPolicies(body.TemplatedPolicies),
    ServiceIdentities: checkServiceIdentities(body.ServiceIdentities, false),
    NodeIdentities: checkNodeIdentities(body.NodeIdentities),
    Namespace: await namespaceOf(ctx, body.Namespace),
  }
  if (mode === 'update') {
    const existing = await getRecord(ctx.state.app.state.reader, roleSpec, role.ID)
    if (existing === undefined) throw new NotFoundError(`role "${role.ID}" does not exist`)
    if (body.Namespace === undefined || body.Namespace === '') role.Namespace = existing.Namespace
  }
  const result = await propose(ctx, mode === 'create' ? { type: 'acl.role.create', role } : { type: 'acl.role.update', role })
  ctx.body = await renderRole(result as AclRole, liveLinkNames(ctx.state.app.state))
}

async function readRole(ctx: ApiContext, by: 'id' | 'name'): Promise<void> {
  await readByIdOrName(ctx, by, roleSpec, (role, reader) => renderRole(role, new LinkNames(reader)))
}

async function listRoles(ctx: ApiContext): Promise<void> {
  await serveRead(ctx, { table: 'role', consistency: 'all', blocking: true }, () =>
    withReadView(ctx, async (reader) => {
      await requirePermission(ctx, 'acl', 'read')
      const namespace = await namespaceOf(ctx, undefined, { allowWildcard: true })
      const policy = queryParam(ctx, 'policy')
      const pace = pacer()
      let roles: AclRole[]
      if (policy) roles = (await listLinkedTo(reader, roleSpec, 'policy', policySpec, idParam(policy, 'policy'), pace)).filter((role) => namespace === '*' || role.Namespace === namespace)
      else roles = await listInNamespace(reader, roleSpec, namespace, pace)
      const names = new LinkNames(reader)
      return { body: await mapPaced(roles, pace, (role) => renderRole(role, names)) }
    }),
  )
}

function missingName(what: 'policy' | 'role'): never {
  throw new InvalidInputError('name', `is required: the path names the ${what} to read, /v1/acl/${what}/name/<name>`)
}

export function policyRoutes(router: Router): void {
  router.put('/v1/acl/policy', (ctx) => writePolicy(ctx as ApiContext, 'create'))
  router.get('/v1/acl/policy/name/:name', (ctx) => readPolicy(ctx as ApiContext, 'name'))
  // `/policy/name/` with the name left out would otherwise reach `/policy/:id` and be refused as an ID.
  router.get('/v1/acl/policy/name', () => missingName('policy'))
  router.get('/v1/acl/policy/:id', (ctx) => readPolicy(ctx as ApiContext, 'id'))
  router.put('/v1/acl/policy/:id', (ctx) => writePolicy(ctx as ApiContext, 'update'))
  router.delete('/v1/acl/policy/:id', (ctx) => deleteById(ctx as ApiContext, 'acl.policy.delete'))
  router.get('/v1/acl/policies', (ctx) => listPolicies(ctx as ApiContext))
  router.put('/v1/acl/role', (ctx) => writeRole(ctx as ApiContext, 'create'))
  router.get('/v1/acl/role/name/:name', (ctx) => readRole(ctx as ApiContext, 'name'))
  router.get('/v1/acl/role/name', () => missingName('role'))
  router.get('/v1/acl/role/:id', (ctx) => readRole(ctx as ApiContext, 'id'))
  router.put('/v1/acl/role/:id', (ctx) => writeRole(ctx as ApiContext, 'update'))
  router.delete('/v1/acl/role/:id', (ctx) => deleteById(ctx as ApiContext, 'acl.role.delete'))
  router.get('/v1/acl/roles', (ctx) => listRoles(ctx as ApiContext))
}

