/**
 * The identities and templated policies a token or role links, edited as text, one per line:
 *   service identities  `web` or `web dc1 dc2` (the datacenters it is valid in; none: all)
 *   node identities     `node-1 dc1`
 *   templated policies  `builtin/service name=web` (variables as name=value)
 * Parsing throws an Error naming the line, shown under the field.
 */
import type { NodeIdentity, ServiceIdentity, TemplatedPolicyLink } from './types.js'

function lines(text: string): Array<{ words: string[]; number: number }> {
  return text
    .split('\n')
    .map((line, i) => ({ words: line.trim().split(/\s+/).filter((word) => word !== ''), number: i + 1 }))
    .filter((line) => line.words.length > 0)
}

export function serviceIdentitiesText(list: ServiceIdentity[] | undefined): string {
  return (list ?? []).map((item) => [item.ServiceName, ...(item.Datacenters ?? [])].join(' ')).join('\n')
}

export function parseServiceIdentities(text: string): ServiceIdentity[] {
  return lines(text).map(({ words: [name, ...datacenters] }) => ({ ServiceName: name!, ...(datacenters.length > 0 ? { Datacenters: datacenters } : {}) }))
}

export function nodeIdentitiesText(list: NodeIdentity[] | undefined): string {
  return (list ?? []).map((item) => `${item.NodeName} ${item.Datacenter}`).join('\n')
}

export function parseNodeIdentities(text: string): NodeIdentity[] {
  return lines(text).map(({ words, number }) => {
    if (words.length !== 2) throw new Error(`line ${number}: write a node name and its datacenter, as "node-1 dc1"`)
    return { NodeName: words[0]!, Datacenter: words[1]! }
  })
}

export function templatedPoliciesText(list: TemplatedPolicyLink[] | undefined): string {
  return (list ?? [])
    .map((item) => [item.TemplateName, ...Object.entries(item.TemplateVariables ?? {}).map(([name, value]) => `${name}=${value}`)].join(' '))
    .join('\n')
}

export function parseTemplatedPolicies(text: string): TemplatedPolicyLink[] {
  return lines(text).map(({ words: [name, ...variables], number }) => {
    const values: Record<string, string> = {}
    for (const variable of variables) {
      const equals = variable.indexOf('=')
      if (equals < 1) throw new Error(`line ${number}: write variables as name=value, as "builtin/service name=web"`)
      values[variable.slice(0, equals)] = variable.slice(equals + 1)
    }
    return { TemplateName: name!, ...(variables.length > 0 ? { TemplateVariables: values } : {}) }
  })
}

/** One line per identity, for a record's page. */
export function describeServiceIdentity(item: ServiceIdentity): string {
  return item.Datacenters === undefined || item.Datacenters.length === 0 ? item.ServiceName : `${item.ServiceName} (in ${item.Datacenters.join(', ')})`
}

export function describeTemplatedPolicy(item: TemplatedPolicyLink): string {
  const variables = Object.entries(item.TemplateVariables ?? {}).map(([name, value]) => `${name}=${value}`)
  return variables.length === 0 ? item.TemplateName : `${item.TemplateName} (${variables.join(', ')})`
}
