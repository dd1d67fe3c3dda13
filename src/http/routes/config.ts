/**
 * Config entries: apply (PUT /v1/config), get, list by kind (with `filter`) and delete, for the sixteen kinds of the
 * contract. The per-kind rules (names, permissions, Protocol) live in ../config-kinds.ts; the compare-and-set is
 * decided where the command is applied (src/state/config-entries.ts), never here.
 *
 * Keys of the body are matched without regard to case for the fields warden interprets (Kind, Name, Protocol, and
 * the response-only Namespace, CreateIndex, ModifyIndex, Hash, which are accepted and ignored), as Go's JSON decoder
 * matches them for Consul; every other field is stored and returned exactly as given.
 */
import Router from '@koa/router'
import { InvalidInputError, NotFoundError } from '../../lib/errors.js'
import { pacer } from '../../lib/pace.js'
import { evaluateFilter, FILTER_WORK_MAX, FilterBudgetError, FilterSyntaxError, parseFilter, type FilterExpression } from '../../filter/index.js'
import type { ConfigEntryWrite } from '../../state/commands.js'
import { configEntryKey, configEntryPrefix } from '../../state/config-entries.js'
import { recordKey } from '../../state/keys.js'
import type { ConfigEntry } from '../../state/records.js'
import { configSpec, getRecord, listRecords } from '../../state/tables.js'
import type { ApiContext } from '../context.js'
import { readJsonObject } from '../body.js'
import { canRead, checkEntryBounds, checkKind, checkName, checkProtocol, checkWritable, requireRead, requireWrite } from '../config-kinds.js'
import { serveRead } from '../read.js'
import { callerOf, namespaceOf, queryParam } from '../request.js'
import { propose } from '../write.js'

/** Fields warden interprets, by their lowercase spelling. */
const KNOWN_FIELDS = ['Kind', 'Name', 'Protocol', 'Namespace', 'CreateIndex', 'ModifyIndex', 'Hash'] as const
type KnownField = (typeof KNOWN_FIELDS)[number]
const KNOWN_BY_LOWERCASE = new Map<string, KnownField>(KNOWN_FIELDS.map((field) => [field.toLowerCase(), field]))

/** Splits a body into the fields warden interprets (any case; the exact spelling wins) and the rest, kept as given. */
function splitBody(body: Record<string, unknown>): { known: Partial<Record<KnownField, unknown>>; rest: Record<string, unknown> } {
  const known: Partial<Record<KnownField, unknown>> = {}
  const rest: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(body)) {
    const field = KNOWN_BY_LOWERCASE.get(key.toLowerCase())
    if (field === undefined) {
      // Assigned, `__proto__` would set the object's prototype and vanish from the entry; refused as it is nested.
      if (key === '__proto__') throw new InvalidInputError(key, 'is not allowed as a field name')
      rest[key] = value
      continue
    }
    // Go decodes null into an absent field.
    if (value === null || (Object.hasOwn(known, field) && key !== field)) continue
    known[field] = value
  }
  return { known, rest }
}

/** `?dc`: empty or this agent's datacenter, until datacenters are federated (readings.md). */
function checkDatacenter(ctx: ApiContext): void {
  const dc = queryParam(ctx, 'dc')
  if (dc === undefined || dc === '' || dc === ctx.state.app.settings.datacenter) return
  throw new InvalidInputError('dc', `no path to datacenter ${JSON.stringify(dc)}`)
}

/** `?cas`: absent (or empty) means unconditional; otherwise a non-negative integer. */
function casParam(ctx: ApiContext): number | undefined {
  const text = queryParam(ctx, 'cas')
  if (text === undefined || text === '') return undefined
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) throw new InvalidInputError('cas', 'must be a non-negative integer')
  return Number(text)
}

/** The request's filter, parsed (a syntax error is a 400 naming `filter`), or undefined when there is none. */
function parsedFilter(ctx: ApiContext): FilterExpression | undefined {
  const source = queryParam(ctx, 'filter')
  if (source === undefined || source.trim() === '') return undefined
  try {
    return parseFilter(source)
  } catch (error) {
    if (error instanceof FilterSyntaxError) throw new InvalidInputError('filter', error.message)
    throw error
  }
}

/** The entries the filter keeps, within its work budget for one run (FILTER_WORK_MAX); beyond it, a 400. */
function filterEntries(entries: ConfigEntry[], expression: FilterExpression): ConfigEntry[] {
  const budget = { remaining: FILTER_WORK_MAX }
  try {
    return entries.filter((entry) => evaluateFilter(expression, entry, budget))
  } catch (error) {
    if (error instanceof FilterBudgetError) throw new InvalidInputError('filter', error.message)
    throw error
  }
}

async function applyEntry(ctx: ApiContext): Promise<void> {
  checkDatacenter(ctx)
  const cas = casParam(ctx)
  const { known, rest } = splitBody(await readJsonObject(ctx))
  const kind = checkKind(known.Kind, 'Kind')
  checkWritable(kind)
  const name = checkName(kind, known.Name)
  // The body's Namespace does not apply to config endpoints (api.md, Namespaces): the request's namespace does.
  const namespace = await namespaceOf(ctx)
  await requireWrite(ctx, kind, name)
  const protocol = checkProtocol(kind, known.Protocol)
  const entry: ConfigEntryWrite = {
    Kind: kind,
    Name: name,
    ...(protocol === undefined ? {} : { Protocol: protocol }),
    ...rest,
    Namespace: namespace,
  }
  checkEntryBounds(entry)
  ctx.body = await propose(ctx, { type: 'config.apply', entry, ...(cas === undefined ? {} : { cas }) })
}

async function getEntry(ctx: ApiContext): Promise<void> {
  const kind = checkKind(ctx.params.kind, 'kind')
  const name = ctx.params.name ?? ''
  checkDatacenter(ctx)
  let key = ''
  await serveRead(
    ctx,
    {
      table: 'config',
      prepare: async () => {
        key = configEntryKey({ Kind: kind, Namespace: await namespaceOf(ctx), Name: name })
        return { recordKey: recordKey('config', key) }
      },
      missing: () => new NotFoundError(`Config entry not found for ${JSON.stringify(kind)} / ${JSON.stringify(name)}`),
      consistency: 'all',
      blocking: true,
    },
    async () => {
      await requireRead(ctx, kind, name)
      const entry = await getRecord(ctx.state.app.state.reader, configSpec, key)
      return entry === undefined ? { body: undefined } : { body: entry, modifyIndex: entry.ModifyIndex }
    },
  )
}

async function listEntries(ctx: ApiContext): Promise<void> {
  const kind = checkKind(ctx.params.kind, 'kind')
  checkDatacenter(ctx)
  const filter = parsedFilter(ctx)
  let prefix = ''
  const prepare = async (): Promise<{ scope: string }> => {
    const namespace = await namespaceOf(ctx, undefined, { allowWildcard: true })
    prefix = configEntryPrefix(kind, namespace === '*' ? undefined : namespace)
    return { scope: namespace }
  }
  await serveRead(ctx, { table: 'config', prepare, consistency: 'all', blocking: true }, async () => {
    const { permissions } = await callerOf(ctx)
    const entries = await listRecords<ConfigEntry>(ctx.state.app.state.reader, configSpec, prefix, pacer())
    // As Consul does, ACLs drop what the caller may not read before the filter sees anything.
    const readable = entries.filter((entry) => canRead(permissions, kind, entry.Name))
    return { body: filter === undefined ? readable : filterEntries(readable, filter), filtered: readable.length < entries.length }
  })
}

async function deleteEntry(ctx: ApiContext): Promise<void> {
  const kind = checkKind(ctx.params.kind, 'kind')
  checkWritable(kind)
  const name = ctx.params.name ?? ''
  checkDatacenter(ctx)
  const cas = casParam(ctx)
  const namespace = await namespaceOf(ctx)
  await requireWrite(ctx, kind, name)
  ctx.body = await propose(ctx, { type: 'config.delete', Kind: kind, Namespace: namespace, Name: name, ...(cas === undefined ? {} : { cas }) })
}

export function configRoutes(router: Router): void {
  router.put('/v1/config', (ctx) => applyEntry(ctx as ApiContext))
  router.get('/v1/config/:kind/:name', (ctx) => getEntry(ctx as ApiContext))
  router.get('/v1/config/:kind', (ctx) => listEntries(ctx as ApiContext))
  router.delete('/v1/config/:kind/:name', (ctx) => deleteEntry(ctx as ApiContext))
}
