/**
 * Output as Consul's CLI prints it: aligned `Field:   value` text (the `pretty` formatters of its command/acl packages),
 * or with `-format=json` the API's JSON indented by four spaces (Go's json.MarshalIndent). `-meta` adds the hash
 * and the Raft indexes, as in Consul.
 */
import type { AuthMethod, BindingRule, NamedLink, NodeIdentity, Policy, Role, ServiceIdentity, TemplatedPolicy, TemplatedPolicyRecord, Token } from '../api/index.js'

export type Format = 'pretty' | 'json'

/**
 * Lists print in a stable order, whatever order the server keeps them in (by ID, which is random): by name where
 * records have one, else by creation. Consul prints the server's order.
 */
export function byName<T extends { Name: string }>(list: T[]): T[] {
  return [...list].sort((a, b) => a.Name.localeCompare(b.Name))
}

export function byCreation<T extends { CreateIndex: number }>(list: T[]): T[] {
  return [...list].sort((a, b) => a.CreateIndex - b.CreateIndex)
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 4)
}

/**
 * RFC 3339 as Go's `%v` prints a time.Time: `2020-05-22 18:52:31.479026 +0000 UTC`, in UTC (the fraction as given,
 * trailing zeros dropped, as Go does).
 */
export function goTime(rfc3339: string | undefined): string {
  if (rfc3339 === undefined || rfc3339 === '') return ''
  const date = new Date(rfc3339)
  if (Number.isNaN(date.getTime())) return rfc3339
  const fraction = /\.(\d+)/.exec(rfc3339)?.[1]
  const iso = date.toISOString() // always UTC, milliseconds
  // An offset is whole minutes, so the fraction as written is already UTC's: kept whole, not cut to milliseconds.
  const trimmed = (fraction ?? '').replace(/0+$/, '')
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${trimmed === '' ? '' : `.${trimmed}`} +0000 UTC`
}

/** Go's `%x` of a []byte: the hash (base64 on the wire) as hex. */
function hex(base64: string): string {
  return Buffer.from(base64, 'base64').toString('hex')
}

function links(title: string, list: NamedLink[] | undefined, indent: string): string {
  if (list === undefined || list.length === 0) return ''
  return `${indent}${title}:\n${list.map((link) => `${indent}   ${link.ID} - ${link.Name}\n`).join('')}`
}

function serviceIdentities(list: ServiceIdentity[] | undefined, indent: string): string {
  if (list === undefined || list.length === 0) return ''
  const lines = list.map((identity) => `${indent}   ${identity.ServiceName} (Datacenters: ${identity.Datacenters?.length ? identity.Datacenters.join(', ') : 'all'})\n`)
  return `${indent}Service Identities:\n${lines.join('')}`
}

function nodeIdentities(list: NodeIdentity[] | undefined, indent: string): string {
  if (list === undefined || list.length === 0) return ''
  return `${indent}Node Identities:\n${list.map((identity) => `${indent}   ${identity.NodeName} (Datacenter: ${identity.Datacenter})\n`).join('')}`
}

function templatedPolicies(list: TemplatedPolicy[] | undefined, indent: string): string {
  if (list === undefined || list.length === 0) return ''
  const lines = list.map((policy) => {
    let text = `${indent}   ${policy.TemplateName}\n`
    if (policy.TemplateVariables?.name) text += `${indent}      Name: ${policy.TemplateVariables.name}\n`
    const datacenters = (policy as { Datacenters?: string[] }).Datacenters
    text += `${indent}      Datacenters: ${datacenters?.length ? datacenters.join(', ') : 'all'}\n`
    return text
  })
  return `${indent}Templated Policies:\n${lines.join('')}`
}

export function formatToken(token: Token, meta: boolean): string {
  let text = `AccessorID:       ${token.AccessorID}\nSecretID:         ${token.SecretID}\n`
  if (token.Namespace) text += `Namespace:        ${token.Namespace}\n`
  text += `Description:      ${token.Description}\nLocal:            ${token.Local}\n`
  if (token.AuthMethod) text += `Auth Method:      ${token.AuthMethod} (Namespace: ${token.AuthMethodNamespace ?? token.Namespace ?? ''})\n`
  text += `Create Time:      ${goTime(token.CreateTime)}\n`
  if (token.ExpirationTime) text += `Expiration Time:  ${goTime(token.ExpirationTime)}\n`
  if (meta) text += `Hash:             ${hex(token.Hash)}\nCreate Index:     ${token.CreateIndex}\nModify Index:     ${token.ModifyIndex}\n`
  text += links('Policies', token.Policies, '')
  text += links('Roles', token.Roles, '')
  text += serviceIdentities(token.ServiceIdentities, '')
  text += nodeIdentities(token.NodeIdentities, '')
  text += templatedPolicies(token.TemplatedPolicies, '')
  return text
}

export function formatTokenList(tokens: Token[], meta: boolean): string {
  return tokens.map((token) => formatToken(token, meta)).join('\n')
}

export function formatPolicy(policy: Policy, meta: boolean): string {
  let text = `ID:           ${policy.ID}\nName:         ${policy.Name}\n`
  if (policy.Namespace) text += `Namespace:    ${policy.Namespace}\n`
  text += `Description:  ${policy.Description}\nDatacenters:  ${(policy.Datacenters ?? []).join(', ')}\n`
  if (meta) text += `Hash:         ${hex(policy.Hash)}\nCreate Index: ${policy.CreateIndex}\nModify Index: ${policy.ModifyIndex}\n`
  return `${text}Rules:\n${policy.Rules ?? ''}`
}

export function formatPolicyList(policies: Policy[], meta: boolean): string {
  return policies
    .map((policy) => {
      let text = `${policy.Name}:\n   ID:           ${policy.ID}\n`
      if (policy.Namespace) text += `   Namespace:    ${policy.Namespace}\n`
      text += `   Description:  ${policy.Description}\n   Datacenters:  ${(policy.Datacenters ?? []).join(', ')}\n`
      if (meta) text += `   Hash:         ${hex(policy.Hash)}\n   Create Index: ${policy.CreateIndex}\n   Modify Index: ${policy.ModifyIndex}\n`
      return text
    })
    .join('')
}

function roleBody(role: Role, meta: boolean, indent: string): string {
  let text = ''
  if (role.Namespace) text += `${indent}Namespace:    ${role.Namespace}\n`
  text += `${indent}Description:  ${role.Description}\n`
  if (meta) text += `${indent}Hash:         ${hex(role.Hash)}\n${indent}Create Index: ${role.CreateIndex}\n${indent}Modify Index: ${role.ModifyIndex}\n`
  text += links('Policies', role.Policies, indent)
  text += serviceIdentities(role.ServiceIdentities, indent)
  text += nodeIdentities(role.NodeIdentities, indent)
  text += templatedPolicies(role.TemplatedPolicies, indent)
  return text
}

export function formatRole(role: Role, meta: boolean): string {
  return `ID:           ${role.ID}\nName:         ${role.Name}\n${roleBody(role, meta, '')}`
}

export function formatRoleList(roles: Role[], meta: boolean): string {
  return roles.map((role) => `${role.Name}:\n   ID:           ${role.ID}\n${roleBody(role, meta, '   ')}`).join('')
}

function authMethodBody(method: AuthMethod, meta: boolean, indent: string): string {
  let text = `${indent}Type:          ${method.Type}\n`
  if (method.Namespace) text += `${indent}Namespace:     ${method.Namespace}\n`
  if (method.DisplayName) text += `${indent}DisplayName:   ${method.DisplayName}\n`
  text += `${indent}Description:   ${method.Description ?? ''}\n`
  if (method.MaxTokenTTL && method.MaxTokenTTL !== '0s') text += `${indent}MaxTokenTTL:   ${method.MaxTokenTTL}\n`
  if (method.TokenLocality) text += `${indent}TokenLocality: ${method.TokenLocality}\n`
  if (method.NamespaceRules?.length) {
    text += `${indent}NamespaceRules:\n`
    for (const rule of method.NamespaceRules) text += `${indent}   Selector:      ${rule.Selector}\n${indent}   BindNamespace: ${rule.BindNamespace}\n`
  }
  if (meta) text += `${indent}Create Index:  ${method.CreateIndex}\n${indent}Modify Index:  ${method.ModifyIndex}\n`
  return text
}

export function formatAuthMethod(method: AuthMethod, meta: boolean): string {
  const config = method.Config === undefined ? '' : `Config:\n${JSON.stringify(method.Config, null, 2)}\n`
  return `Name:          ${method.Name}\n${authMethodBody(method, meta, '')}${config}`
}

export function formatAuthMethodList(methods: AuthMethod[], meta: boolean): string {
  return methods.map((method) => `${method.Name}:\n${authMethodBody(method, meta, '   ')}`).join('')
}

function bindingRuleBody(rule: BindingRule, meta: boolean, indent: string): string {
  let text = ''
  if (rule.Namespace) text += `${indent}Namespace:    ${rule.Namespace}\n`
  text += `${indent}AuthMethod:   ${rule.AuthMethod}\n${indent}Description:  ${rule.Description}\n${indent}BindType:     ${rule.BindType}\n`
  text += `${indent}BindName:     ${rule.BindName}\n`
  if (rule.BindVars && Object.keys(rule.BindVars).length > 0) text += `${indent}BindVars:     ${Object.entries(rule.BindVars).map(([key, value]) => `${key}=${value}`).join(', ')}\n`
  text += `${indent}Selector:     ${rule.Selector}\n`
  if (meta) text += `${indent}Create Index: ${rule.CreateIndex}\n${indent}Modify Index: ${rule.ModifyIndex}\n`
  return text
}

export function formatBindingRule(rule: BindingRule, meta: boolean): string {
  return `ID:           ${rule.ID}\n${bindingRuleBody(rule, meta, '')}`
}

export function formatBindingRuleList(rules: BindingRule[], meta: boolean): string {
  return rules.map((rule) => `${rule.ID}:\n${bindingRuleBody(rule, meta, '   ')}`).join('')
}

export function formatTemplatedPolicy(record: TemplatedPolicyRecord): string {
  let text = `Name:            ${record.TemplateName}\n`
  if (record.Description) text += `Description:     ${record.Description}\n`
  text += `Input variables: ${record.Schema === '' ? 'None' : ''}\n`
  if (record.Schema !== '') text += `${record.Schema.trimEnd()}\n`
  return `${text}Raw Template:\n${record.Template.trimEnd()}\n`
}

export function formatTemplatedPolicyList(records: Record<string, TemplatedPolicyRecord>): string {
  return Object.keys(records)
    .sort()
    .map((name) => `${name}\n`)
    .join('')
}
