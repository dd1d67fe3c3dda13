/**
 * The link flags ACL commands share, as Consul spells them: -policy-id/-policy-name, -role-id/-role-name,
 * -service-identity NAME[:DC1,DC2], -node-identity NAME:DC, -templated-policy NAME with -var name:VALUE. IDs may be
 * given as a unique prefix, as in Consul.
 */
import type { Link, NodeIdentity, ServiceIdentity, TemplatedPolicy, WardenClient } from '../../api/index.js'
import { UsageError, type FlagSpecs } from '../argv.js'
import { CommandError, type CommandContext } from '../command.js'

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const POLICY_LINK_FLAGS: FlagSpecs = {
  'policy-id': { type: 'string', multiple: true, value: 'value', help: 'ID of a policy to link (a unique prefix will do). May be given more than once.' },
  'policy-name': { type: 'string', multiple: true, value: 'value', help: 'Name of a policy to link. May be given more than once.' },
}

export const ROLE_LINK_FLAGS: FlagSpecs = {
  'role-id': { type: 'string', multiple: true, value: 'value', help: 'ID of a role to link (a unique prefix will do). May be given more than once.' },
  'role-name': { type: 'string', multiple: true, value: 'value', help: 'Name of a role to link. May be given more than once.' },
}

export const IDENTITY_FLAGS: FlagSpecs = {
  'service-identity': { type: 'string', multiple: true, value: 'value', help: 'A service identity, SERVICENAME or SERVICENAME:DC1,DC2. May be given more than once.' },
  'node-identity': { type: 'string', multiple: true, value: 'value', help: 'A node identity, NODENAME:DATACENTER. May be given more than once.' },
  'templated-policy': { type: 'string', value: 'value', help: 'A templated policy to link, e.g. builtin/service (with -var name:web).' },
  var: { type: 'string', multiple: true, value: 'value', help: 'A variable of -templated-policy, NAME:VALUE (only `name` today). May be given more than once.' },
}

export function serviceIdentities(values: string[]): ServiceIdentity[] {
  return values.map((value) => {
    const [name, datacenters] = splitOnce(value, ':')
    if (name === '' || (datacenters ?? '').includes(':')) throw new UsageError(`Service identity "${value}" must be of the form SERVICENAME or SERVICENAME:DC1,DC2`)
    const list = datacenters === undefined ? [] : datacenters.split(',').map((item) => item.trim()).filter((item) => item !== '')
    return list.length === 0 ? { ServiceName: name } : { ServiceName: name, Datacenters: list }
  })
}

export function nodeIdentities(values: string[]): NodeIdentity[] {
  return values.map((value) => {
    const [name, datacenter] = splitOnce(value, ':')
    if (name === '' || datacenter === undefined || datacenter === '' || datacenter.includes(':')) throw new UsageError(`Node identity "${value}" must be of the form NODENAME:DATACENTER`)
    return { NodeName: name, Datacenter: datacenter }
  })
}

export function templatedPolicies(context: CommandContext): TemplatedPolicy[] | undefined {
  const name = context.string('templated-policy')
  const variables = context.list('var')
  if (name === undefined) {
    if (variables.length > 0) throw new UsageError('-var needs -templated-policy')
    return undefined
  }
  const policy: TemplatedPolicy = { TemplateName: name }
  for (const variable of variables) {
    const [key, value] = splitOnce(variable, ':')
    if (value === undefined || key === '') throw new UsageError(`-var "${variable}" must be of the form NAME:VALUE`)
    if (key !== 'name') throw new UsageError(`-var "${key}": templated policies take only the variable "name"`)
    policy.TemplateVariables = { name: value }
  }
  return [policy]
}

function splitOnce(value: string, separator: string): [string, string | undefined] {
  const at = value.indexOf(separator)
  return at === -1 ? [value, undefined] : [value.slice(0, at), value.slice(at + 1)]
}

/** Resolves an ID given as a unique prefix among `ids()` (Consul's GetTokenAccessorIDFromPartial and kin). */
export async function fullId(kind: string, given: string, ids: () => Promise<string[]>): Promise<string> {
  if (UUID_PATTERN.test(given)) return given
  // Consul's two names that stand for built-in IDs.
  if (given === 'anonymous' && kind === 'token') return '00000000-0000-0000-0000-000000000002'
  if (given === 'global-management' && kind === 'policy') return '00000000-0000-0000-0000-000000000001'
  const matches = (await ids()).filter((id) => id.startsWith(given.toLowerCase()))
  if (matches.length === 1) return matches[0]!
  throw new CommandError(matches.length === 0 ? `No such ${kind} ID with prefix: ${given}` : `Multiple ${kind} IDs found with prefix: ${given}`)
}

/** A resolver lists the IDs at most once, however many prefixes it is given (`-policy-id a -policy-id b`). */
function idResolver(kind: string, list: () => Promise<Array<{ ID: string }>>): (given: string) => Promise<string> {
  let ids: Promise<string[]> | undefined
  return (given) => fullId(kind, given, () => (ids ??= list().then((items) => items.map((item) => item.ID))))
}

export function policyIdResolver(client: WardenClient, stale: { consistency?: 'stale' }) {
  return idResolver('policy', () => client.acl.policies.list(stale))
}

export function roleIdResolver(client: WardenClient, stale: { consistency?: 'stale' }) {
  return idResolver('role', () => client.acl.roles.list(stale))
}

/** Links by ID (resolving prefixes) and by name, IDs first, as Consul builds them. */
export async function linksOf(ids: string[], names: string[], resolve: (given: string) => Promise<string>): Promise<Link[]> {
  const links: Link[] = []
  for (const id of ids) links.push({ ID: await resolve(id) })
  for (const name of names) links.push({ Name: name })
  return links
}

/** Adds links not already present (by ID or by name). */
export function appendLinks(existing: Link[], added: Link[]): Link[] {
  const result = [...existing]
  for (const link of added) {
    if (!result.some((item) => (link.ID !== undefined && item.ID === link.ID) || (link.Name !== undefined && item.Name === link.Name))) result.push(link)
  }
  return result
}
