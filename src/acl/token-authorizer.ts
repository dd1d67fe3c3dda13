/**
 * A token's effective permissions: its policies, its roles' policies, and the synthetic policies of its service
 * identities, node identities and templated policies (its own and its roles'), each kept only where its Datacenters
 * include this datacenter, merged into one authorizer. Parsed rules are cached by the text's hash, since many tokens
 * share a few policies.
 */
import { hash } from 'node:crypto'
import { GLOBAL_MANAGEMENT_POLICY_ID } from '../state/builtins.js'
import type { Reader } from '../state/reader.js'
import type { AclRole, AclToken, NodeIdentity, ServiceIdentity, TemplatedPolicyLink } from '../state/records.js'
import { getRecord, policySpec, roleSpec } from '../state/tables.js'
import { buildAuthorizer, MANAGEMENT_AUTHORIZER, type Authorizer, type DefaultPolicy } from './authorizer.js'
import { parseRules, type PolicyRules } from './rules/index.js'
import { nodeIdentityPolicy, serviceIdentityPolicy } from './synthetic-policies.js'
import { renderTemplatedPolicy } from './templated-policies.js'

const PARSED_MAX = 4096
const parsed = new Map<string, PolicyRules>()

/** Rules are validated when a policy is written, so a parse failure here means the stored text predates a rule. */
function rulesOf(text: string): PolicyRules {
  const key = hash('sha256', text, 'base64')
  let rules = parsed.get(key)
  if (rules === undefined) {
    try {
      rules = parseRules(text)
    } catch {
      // Fail closed: rules that no longer parse grant nothing.
      rules = parseRules('')
    }
    if (parsed.size >= PARSED_MAX) parsed.delete(parsed.keys().next().value as string)
    parsed.set(key, rules)
  }
  return rules
}

function appliesHere(datacenters: readonly string[] | undefined, datacenter: string): boolean {
  return datacenters === undefined || datacenters.length === 0 || datacenters.includes(datacenter)
}

interface IdentitySource {
  ServiceIdentities: ServiceIdentity[]
  NodeIdentities: NodeIdentity[]
  TemplatedPolicies: TemplatedPolicyLink[]
}

/** What a set of rules the authorizer merges comes from. */
export type RulesOrigin =
  | { readonly kind: 'policy'; readonly id: string; readonly name: string }
  | { readonly kind: 'service-identity'; readonly serviceName: string; readonly datacenters: readonly string[] }
  | { readonly kind: 'node-identity'; readonly nodeName: string; readonly datacenter: string }
  | { readonly kind: 'templated-policy'; readonly templateName: string; readonly variables: Readonly<Record<string, unknown>> | undefined }

/** Who links a source to the token: the token itself or one of its roles. */
export type RulesLink = { readonly kind: 'token' } | { readonly kind: 'role'; readonly id: string; readonly name: string }

/** One set of rules of a token, with where it comes from and whether it counts in this datacenter. */
export interface RulesSource {
  readonly origin: RulesOrigin
  /** The token and the roles that link it, in link order. A policy linked by several is merged once. */
  readonly via: RulesLink[]
  /** False for a policy or identity whose datacenters leave this one out: it is not merged here. */
  readonly appliesHere: boolean
  readonly rules: PolicyRules
}

export interface TokenRules {
  /** Every source in the order the authorizer meets them: policies (the token's, then its roles'), then identities and templates. */
  sources: RulesSource[]
  /** Whether global-management applies here: the token may do everything, and no other source is collected. */
  management: boolean
  /** IDs of the policies and roles it was built from: a change to any of them makes it stale. */
  policyIds: Set<string>
  roleIds: Set<string>
}

function syntheticSources(source: IdentitySource, link: RulesLink, datacenter: string): RulesSource[] {
  const result: RulesSource[] = []
  for (const identity of source.ServiceIdentities) {
    const datacenters = identity.Datacenters ?? []
    result.push({
      origin: { kind: 'service-identity', serviceName: identity.ServiceName, datacenters },
      via: [link],
      appliesHere: appliesHere(identity.Datacenters, datacenter),
      rules: rulesOf(serviceIdentityPolicy(identity.ServiceName, []).Rules),
    })
  }
  for (const identity of source.NodeIdentities) {
    result.push({
      origin: { kind: 'node-identity', nodeName: identity.NodeName, datacenter: identity.Datacenter },
      via: [link],
      appliesHere: identity.Datacenter === datacenter,
      rules: rulesOf(nodeIdentityPolicy(identity.NodeName, identity.Datacenter).Rules),
    })
  }
  for (const templated of source.TemplatedPolicies) {
    let rules: PolicyRules
    try {
      rules = rulesOf(renderTemplatedPolicy(templated.TemplateName, templated.TemplateVariables).Rules)
    } catch {
      // A template this version no longer knows grants nothing.
      rules = rulesOf('')
    }
    result.push({ origin: { kind: 'templated-policy', templateName: templated.TemplateName, variables: templated.TemplateVariables }, via: [link], appliesHere: true, rules })
  }
  return result
}

/**
 * Everything a token's permissions are merged from, as the authorizer merges it (authorizeToken builds from exactly
 * this), each with its origin: what the permissions view (effective-permissions.ts) attributes each rule to.
 */
export async function collectTokenRules(reader: Reader, token: AclToken, datacenter: string): Promise<TokenRules> {
  const policyIds = new Set<string>()
  const roleIds = new Set<string>()
  const roles: AclRole[] = []
  for (const link of token.Roles) {
    roleIds.add(link.ID)
    const role = await getRecord(reader, roleSpec, link.ID)
    if (role !== undefined) roles.push(role)
  }
  const sources: RulesSource[] = []
  const byPolicy = new Map<string, RulesSource>()
  let management = false
  const links: Array<{ policyId: string; link: RulesLink }> = [
    ...token.Policies.map((policy) => ({ policyId: policy.ID, link: { kind: 'token' } as const })),
    ...roles.flatMap((role) => role.Policies.map((policy) => ({ policyId: policy.ID, link: { kind: 'role', id: role.ID, name: role.Name } as const }))),
  ]
  for (const { policyId, link } of links) {
    const seen = byPolicy.get(policyId)
    if (seen !== undefined) {
      if (!seen.via.some((other) => sameLink(other, link))) seen.via.push(link)
      continue
    }
    if (policyIds.has(policyId)) continue
    policyIds.add(policyId)
    const policy = await getRecord(reader, policySpec, policyId)
    if (policy === undefined) continue
    const here = appliesHere(policy.Datacenters, datacenter)
    if (here && policy.ID === GLOBAL_MANAGEMENT_POLICY_ID) management = true
    const source: RulesSource = { origin: { kind: 'policy', id: policy.ID, name: policy.Name }, via: [link], appliesHere: here, rules: rulesOf(policy.Rules) }
    byPolicy.set(policyId, source)
    sources.push(source)
  }
  if (!management) {
    sources.push(...syntheticSources(token, { kind: 'token' }, datacenter))
    for (const role of roles) sources.push(...syntheticSources(role, { kind: 'role', id: role.ID, name: role.Name }, datacenter))
  }
  return { sources, management, policyIds, roleIds }
}

function sameLink(a: RulesLink, b: RulesLink): boolean {
  return a.kind === 'token' ? b.kind === 'token' : b.kind === 'role' && a.id === b.id
}

export interface TokenAuthorization {
  authorizer: Authorizer
  /** IDs of the policies and roles it was built from: a change to any of them makes it stale. */
  policyIds: Set<string>
  roleIds: Set<string>
}

export async function authorizeToken(reader: Reader, token: AclToken, datacenter: string, defaultPolicy: DefaultPolicy): Promise<TokenAuthorization> {
  const collected = await collectTokenRules(reader, token, datacenter)
  return { authorizer: authorizerOf(collected, defaultPolicy), policyIds: collected.policyIds, roleIds: collected.roleIds }
}

/** The authorizer of what collectTokenRules found: the sources that apply here, merged, or the management authorizer. */
export function authorizerOf(collected: TokenRules, defaultPolicy: DefaultPolicy): Authorizer {
  if (collected.management) return MANAGEMENT_AUTHORIZER
  return buildAuthorizer(applicableRules(collected), defaultPolicy)
}

/** The rules the authorizer merges: those of every source that applies in this datacenter. */
export function applicableRules(collected: TokenRules): PolicyRules[] {
  return collected.sources.filter((source) => source.appliesHere).map((source) => source.rules)
}
