/**
 * A token's effective permissions: its policies, its roles' policies, and the synthetic policies of its service
 * identities, node identities and templated policies (its own and its roles'), each kept only where its Datacenters
 * include this datacenter, merged into one authorizer. Parsed rules are cached by the text's hash, since many tokens
 * share a few policies.
 */
import { createHash } from 'node:crypto'
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
  const key = createHash('sha256').update(text).digest('base64')
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

function syntheticRules(source: IdentitySource, datacenter: string): PolicyRules[] {
  const result: PolicyRules[] = []
  for (const identity of source.ServiceIdentities) {
    if (appliesHere(identity.Datacenters, datacenter)) result.push(rulesOf(serviceIdentityPolicy(identity.ServiceName, []).Rules))
  }
  for (const identity of source.NodeIdentities) {
    if (identity.Datacenter === datacenter) result.push(rulesOf(nodeIdentityPolicy(identity.NodeName, identity.Datacenter).Rules))
  }
  for (const link of source.TemplatedPolicies) {
    try {
      result.push(rulesOf(renderTemplatedPolicy(link.TemplateName, link.TemplateVariables).Rules))
    } catch {
      // A template this version no longer knows grants nothing.
    }
  }
  return result
}

export interface TokenAuthorization {
  authorizer: Authorizer
  /** IDs of the policies and roles it was built from: a change to any of them makes it stale. */
  policyIds: Set<string>
  roleIds: Set<string>
}

export async function authorizeToken(reader: Reader, token: AclToken, datacenter: string, defaultPolicy: DefaultPolicy): Promise<TokenAuthorization> {
  const policyIds = new Set<string>()
  const roleIds = new Set<string>()
  const roles: AclRole[] = []
  for (const link of token.Roles) {
    roleIds.add(link.ID)
    const role = await getRecord(reader, roleSpec, link.ID)
    if (role !== undefined) roles.push(role)
  }
  const rules: PolicyRules[] = []
  let management = false
  for (const link of [...token.Policies, ...roles.flatMap((role) => role.Policies)]) {
    if (policyIds.has(link.ID)) continue
    policyIds.add(link.ID)
    const policy = await getRecord(reader, policySpec, link.ID)
    if (policy === undefined || !appliesHere(policy.Datacenters, datacenter)) continue
    if (policy.ID === GLOBAL_MANAGEMENT_POLICY_ID) management = true
    rules.push(rulesOf(policy.Rules))
  }
  if (management) return { authorizer: MANAGEMENT_AUTHORIZER, policyIds, roleIds }
  for (const source of [token, ...roles]) rules.push(...syntheticRules(source, datacenter))
  return { authorizer: buildAuthorizer(rules, defaultPolicy), policyIds, roleIds }
}
