/**
 * Checks and normal forms of the fields tokens and roles share: links, service and node identities, templated
 * policies. These are the rules that need no state (names, formats, duplicates); whether a linked record exists is
 * decided when the command is applied.
 */
import { InvalidInputError } from '../lib/errors.js'
import { isUuid } from '../lib/ids.js'
import { isValidIdentityName } from '../acl/names.js'
import { templatedPolicyByName, validateTemplateVariables } from '../acl/templated-policies.js'
import type { LinkInput } from '../state/commands.js'
import type { NodeIdentity, ServiceIdentity, TemplatedPolicyLink } from '../state/records.js'

export function checkLinks(field: string, links: LinkInput[] | undefined): LinkInput[] {
  return (links ?? []).map((link, position) => {
    const hasId = link.ID !== undefined && link.ID !== ''
    if (hasId && !isUuid(link.ID ?? '')) throw new InvalidInputError(`${field}[${position}].ID`, 'must be a UUID')
    if (!hasId && (link.Name === undefined || link.Name === '')) {
      throw new InvalidInputError(`${field}[${position}]`, 'needs an ID or a Name')
    }
    return hasId ? { ID: (link.ID ?? '').toLowerCase() } : { Name: link.Name ?? '' }
  })
}

const DATACENTER = /^[A-Za-z0-9_-]{1,64}$/

function checkDatacenter(field: string, value: string): string {
  if (!DATACENTER.test(value)) throw new InvalidInputError(field, 'must be a datacenter name: 1 to 64 letters, digits, "-" or "_"')
  return value
}

export function checkDatacenters(field: string, values: string[] | undefined): string[] {
  return [...new Set((values ?? []).map((value, position) => checkDatacenter(`${field}[${position}]`, value)))]
}

const NAME_RULE = 'must be 1 to 256 lowercase letters, digits, "-" or "_", starting and ending with a letter or digit'

/** Service identities with the same name merge, their datacenter lists joined and sorted (Consul's dedup). */
export function checkServiceIdentities(identities: ServiceIdentity[] | undefined, local: boolean): ServiceIdentity[] {
  const byName = new Map<string, Set<string>>()
  const unrestricted = new Set<string>()
  for (const [position, identity] of (identities ?? []).entries()) {
    const field = `ServiceIdentities[${position}]`
    if (!isValidIdentityName(identity.ServiceName)) throw new InvalidInputError(`${field}.ServiceName`, NAME_RULE)
    const datacenters = checkDatacenters(`${field}.Datacenters`, identity.Datacenters)
    if (local && datacenters.length > 0) {
      throw new InvalidInputError(`${field}.Datacenters`, `service identity "${identity.ServiceName}" cannot specify a list of datacenters on a local token`)
    }
    const set = byName.get(identity.ServiceName) ?? new Set<string>()
    byName.set(identity.ServiceName, set)
    if (datacenters.length === 0) unrestricted.add(identity.ServiceName)
    for (const datacenter of datacenters) set.add(datacenter)
  }
  return [...byName].map(([name, datacenters]) =>
    // An identity given once without datacenters is valid everywhere, which no list can narrow.
    unrestricted.has(name) || datacenters.size === 0 ? { ServiceName: name } : { ServiceName: name, Datacenters: [...datacenters].sort() },
  )
}

export function checkNodeIdentities(identities: NodeIdentity[] | undefined): NodeIdentity[] {
  const seen = new Set<string>()
  const result: NodeIdentity[] = []
  for (const [position, identity] of (identities ?? []).entries()) {
    const field = `NodeIdentities[${position}]`
    if (!isValidIdentityName(identity.NodeName)) throw new InvalidInputError(`${field}.NodeName`, NAME_RULE)
    checkDatacenter(`${field}.Datacenter`, identity.Datacenter)
    const key = `${identity.NodeName}\u0000${identity.Datacenter}`
    if (seen.has(key)) continue
    seen.add(key)
    result.push({ NodeName: identity.NodeName, Datacenter: identity.Datacenter })
  }
  return result
}

interface TemplatedPolicyInput {
  TemplateName: string
  TemplateVariables?: { name?: unknown }
}

/** Known template names, variables valid against the template's schema, TemplateID filled in, duplicates removed. */
export function checkTemplatedPolicies(links: TemplatedPolicyInput[] | undefined): TemplatedPolicyLink[] {
  const seen = new Set<string>()
  const result: TemplatedPolicyLink[] = []
  for (const [position, link] of (links ?? []).entries()) {
    const field = `TemplatedPolicies[${position}]`
    const template = templatedPolicyByName(link.TemplateName)
    if (template === undefined) throw new InvalidInputError(`${field}.TemplateName`, `no templated policy named "${link.TemplateName}"`)
    const variables = template.Schema === '' ? undefined : link.TemplateVariables
    const problems = validateTemplateVariables(link.TemplateName, variables as Record<string, unknown> | undefined)
    if (problems.length > 0) throw new InvalidInputError(`${field}.TemplateVariables`, problems.join('; '))
    const key = `${template.TemplateName}\u0000${JSON.stringify(variables ?? {})}`
    if (seen.has(key)) continue
    seen.add(key)
    const stored: TemplatedPolicyLink = { TemplateName: template.TemplateName, TemplateID: template.TemplateID }
    if (variables?.name !== undefined) stored.TemplateVariables = { name: String(variables.name) }
    result.push(stored)
  }
  return result
}
