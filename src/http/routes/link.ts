/**
 * The cloud link, `/api/cloud/v2/link/global` (no /v1): PUT writes its data, GET reads the envelope with the status
 * the link controller recorded, DELETE unlinks. Reads need operator:read; writes and deletes need operator:write and
 * acl:write. `clientSecret` reads as `<hidden>` to callers without acl:write (readings.md).
 *
 * `?version=N` on PUT (and DELETE) is a compare-and-set against the envelope's version, decided where the command is
 * applied: a mismatch is a 409 `conflict`, and a missing link has version 0.
 */
import Router from '@koa/router'
import { InvalidInputError, NotFoundError } from '../../lib/errors.js'
import { newUlid, newUuid } from '../../lib/ids.js'
import { recordKey } from '../../state/keys.js'
import { LINK_NAME, LINK_STATUS_KEY, linkSpec, parseResourceId } from '../../state/link.js'
import type { CloudLink } from '../../state/records.js'
import { getRecord } from '../../state/tables.js'
import type { ApiContext } from '../context.js'
import { readJsonObject } from '../body.js'
import { serveRead } from '../read.js'
import { HIDDEN } from '../render.js'
import { callerOf, queryParam, requirePermission } from '../request.js'
import { propose } from '../write.js'

export const LINK_PATH = '/api/cloud/v2/link/global'

/**
 * The link's envelope. A read carries `status`; a write's answer does not (the contract lists data, generation, id
 * and version): the status stored then is still the previous generation's, and a client reading "linked" there
 * would take it for the new credentials' verdict.
 */
export function renderLink(link: CloudLink, showSecret: boolean, withStatus = true): Record<string, unknown> {
  const body: Record<string, unknown> = {
    data: { ...link.data, clientSecret: showSecret ? link.data.clientSecret : HIDDEN },
    generation: link.generation,
    id: {
      name: LINK_NAME,
      tenancy: { peerName: 'local' },
      type: { group: 'cloud', groupVersion: 'v2', kind: 'Link' },
      uid: link.uid,
    },
    version: String(link.ModifyIndex),
  }
  if (withStatus && link.status !== undefined) body.status = { [LINK_STATUS_KEY]: link.status }
  return body
}

/** Top-level fields a read-modify-write client may send back; only `data` (and a `global` id.name) is used. */
const ENVELOPE_FIELDS = new Set(['data', 'id', 'generation', 'version', 'status', 'metadata', 'owner'])
/** The writable data fields, with the proto field names that protobuf JSON also accepts. */
const DATA_FIELDS: Record<string, 'resourceId' | 'clientId' | 'clientSecret'> = {
  resourceId: 'resourceId',
  resource_id: 'resourceId',
  clientId: 'clientId',
  client_id: 'clientId',
  clientSecret: 'clientSecret',
  client_secret: 'clientSecret',
}
/** Read-only data fields, accepted and ignored: the controller sets them. */
const READ_ONLY_DATA_FIELDS = new Set(['accessLevel', 'access_level', 'cloudClusterUrl', 'cloud_cluster_url', '@type'])

interface LinkBody {
  resourceId: string
  clientId: string
  clientSecret: string
}

export function checkLinkBody(body: Record<string, unknown>): LinkBody {
  for (const key of Object.keys(body)) if (!ENVELOPE_FIELDS.has(key)) throw new InvalidInputError(key, 'is not a known field')
  const id = body.id
  if (id !== undefined && id !== null) {
    const name = typeof id === 'object' ? (id as Record<string, unknown>).name : undefined
    if (name !== undefined && name !== LINK_NAME) {
      throw new InvalidInputError('id.name', 'only a single Link resource is allowed and it must be named global')
    }
  }
  const data = body.data
  if (data === undefined || data === null) throw new InvalidInputError('data', 'is required: an object with resourceId, clientId and clientSecret')
  if (typeof data !== 'object' || Array.isArray(data)) throw new InvalidInputError('data', 'must be an object')
  const fields: Partial<LinkBody> = {}
  for (const [key, value] of Object.entries(data as Record<string, unknown>)) {
    const field = DATA_FIELDS[key]
    if (field === undefined) {
      if (READ_ONLY_DATA_FIELDS.has(key)) continue
      throw new InvalidInputError(`data.${key}`, 'is not a known field')
    }
    if (value === null) continue
    if (typeof value !== 'string') throw new InvalidInputError(`data.${field}`, 'must be a string')
    fields[field] = value
  }
  for (const field of ['resourceId', 'clientId', 'clientSecret'] as const) {
    if (fields[field] === undefined || fields[field] === '') throw new InvalidInputError(`data.${field}`, 'is required')
  }
  const parsed = parseResourceId(fields.resourceId ?? '')
  if (!parsed.ok) throw new InvalidInputError('data.resourceId', parsed.message)
  return fields as LinkBody
}

/** `?version`: absent (or empty) means unconditional. */
function versionParam(ctx: ApiContext): number | undefined {
  const text = queryParam(ctx, 'version')
  if (text === undefined || text === '') return undefined
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) throw new InvalidInputError('version', 'must be a non-negative integer (a version read from the link)')
  return Number(text)
}

async function requireLinkWrite(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'operator', 'write')
  await requirePermission(ctx, 'acl', 'write')
}

async function writeLink(ctx: ApiContext): Promise<void> {
  await requireLinkWrite(ctx)
  const version = versionParam(ctx)
  const fields = checkLinkBody(await readJsonObject(ctx))
  const link = { ...fields, uid: newUuid(), generation: newUlid(ctx.state.app.now()), source: 'api' as const }
  const result = await propose(ctx, { type: 'link.set', link, ...(version === undefined ? {} : { version }) })
  ctx.body = renderLink(result as CloudLink, true, false)
}

async function readLink(ctx: ApiContext): Promise<void> {
  await serveRead(
    ctx,
    {
      table: 'link',
      recordKey: recordKey('link', LINK_NAME),
      missing: () => new NotFoundError('the cluster is not linked: no Link resource named global'),
      consistency: 'all',
      blocking: false,
    },
    async () => {
      await requirePermission(ctx, 'operator', 'read')
      const showSecret = (await callerOf(ctx)).permissions.allows('acl', 'write')
      const link = await getRecord(ctx.state.app.state.reader, linkSpec, LINK_NAME)
      return link === undefined ? { body: undefined } : { body: renderLink(link, showSecret), modifyIndex: link.ModifyIndex }
    },
  )
}

async function deleteLink(ctx: ApiContext): Promise<void> {
  await requireLinkWrite(ctx)
  const version = versionParam(ctx)
  await propose(ctx, { type: 'link.delete', ...(version === undefined ? {} : { version }) })
  ctx.body = {}
}

export function linkRoutes(router: Router): void {
  router.put(LINK_PATH, (ctx) => writeLink(ctx as ApiContext))
  router.get(LINK_PATH, (ctx) => readLink(ctx as ApiContext))
  router.delete(LINK_PATH, (ctx) => deleteLink(ctx as ApiContext))
}
