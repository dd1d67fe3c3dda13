/**
 * What a token may do, per resource, and why (issue 21: `GET /v1/acl/token/:AccessorID/permissions`). It is built from
 * the very rules the authorizer checks: the sources token-authorizer.ts collects, merged by `mergePolicies`, compiled
 * by `compileRules` (mesh and peering falling back to operator, intentions read from service rules). Nothing here
 * decides precedence: every rule listed is one the authorizer consults, its level the merged one, what it grants
 * `levelAllows`. The only thing added is attribution: which sources set the rule at the merged level (they decided it)
 * and which set it weaker (they were overridden), found by comparing each source's own rule with the merged one.
 *
 * Fields are the API's (PascalCase), as records are from HTTP down.
 */
import type { DefaultPolicy, LabelledMatch, MatchedRule, MergedRules, Resource } from './authorizer.js'
import { compileRules, levelAllows, mergePolicies } from './authorizer.js'
import { RESOURCE_ACCESSES } from './enforce.js'
import { LABELLED_FIELDS, type LabelledField, type LabelledKeyword, type Level, type PlainKeyword, type PolicyRules, type ServiceRule } from './rules/index.js'
import type { RulesLink, RulesSource, TokenRules } from './token-authorizer.js'

/** Where a rule comes from. `Via` names the token and the roles that link it; the default policy has none. */
export interface PermissionSource {
  Type: 'policy' | 'service-identity' | 'node-identity' | 'templated-policy' | 'default-policy'
  /** The policy's ID (policies only). */
  ID?: string
  /** The policy's name, the service or node name, the template's name, or `allow`/`deny` for the default policy. */
  Name: string
  /** A service identity's datacenters (absent: all of them). */
  Datacenters?: string[]
  /** A node identity's datacenter. */
  Datacenter?: string
  /** A templated policy's variables. */
  TemplateVariables?: Record<string, unknown>
  Via?: Array<{ Type: 'token' } | { Type: 'role'; ID: string; Name: string }>
}

export interface PermissionRule {
  /** The name or prefix the rule is written for; absent for resources without names. */
  Segment?: string
  Match?: 'exact' | 'prefix'
  /** The rule's keyword as written: `service_prefix`, or `operator` where mesh or peering fall back to it. */
  Keyword: string
  /** `intentions` where the rule's intentions setting decides (the intention resource); absent for `policy`. */
  Attribute?: 'intentions'
  /** Intentions no source set: the level is derived from the merged policy (read or write give read, deny deny). */
  Derived?: true
  /** The merged level. */
  Access: Level
  /** The accesses of this resource the level grants. */
  Grants: string[]
  /** The sources whose own rule has the merged level: they decided it (several when they agree). */
  DecidedBy: PermissionSource[]
  /** Sources with a rule here at another level, which the merge (deny > write > list > read) overrode. */
  Overridden?: Array<PermissionSource & { Access: Level }>
}

export interface ResourcePermissions {
  /** Exact rules by segment, then prefix rules by segment. */
  Rules: PermissionRule[]
  /** What decides where no rule applies (every name no rule matches; a resource without names and without a rule). */
  Otherwise?: { Access: 'write' | 'deny'; Grants: string[]; DecidedBy: PermissionSource[] }
}

export interface TokenPermissions {
  AccessorID: string
  Datacenter: string
  DefaultPolicy: DefaultPolicy
  /** Linked to global-management here: everything is allowed, whatever the other sources say. */
  Management: boolean
  /** Every source the token links, with whether it counts in this datacenter. */
  Sources: Array<PermissionSource & { AppliesHere: boolean }>
  Resources: { [R in Resource]: ResourcePermissions }
}

/** The resources in the order the view lists them (alphabetical, as Consul's resource list). */
export const PERMISSION_RESOURCES: readonly Resource[] = Object.keys(RESOURCE_ACCESSES).sort() as Resource[]

export function effectivePermissions(accessorID: string, collected: TokenRules, datacenter: string, defaultPolicy: DefaultPolicy): TokenPermissions {
  const applicable = collected.sources.filter((source) => source.appliesHere)
  const base = {
    AccessorID: accessorID,
    Datacenter: datacenter,
    DefaultPolicy: defaultPolicy,
    Management: collected.management,
    Sources: collected.sources.map((source) => ({ ...describe(source), AppliesHere: source.appliesHere })),
  }
  if (collected.management) {
    // The management authorizer allows everything; the global-management policy decides, whatever else is linked.
    const deciders = applicable.filter((source) => source.origin.kind === 'policy').map(describe)
    const everything = (resource: Resource): ResourcePermissions => ({ Rules: [], Otherwise: { Access: 'write', Grants: grants(resource, 'write'), DecidedBy: deciders } })
    return { ...base, Resources: byResource(everything) }
  }
  const merged = mergePolicies(applicable.map((source) => source.rules))
  const compiled = compileRules(merged)
  const otherwise = (resource: Resource): NonNullable<ResourcePermissions['Otherwise']> => {
    const access = defaultPolicy === 'allow' ? 'write' : 'deny'
    return { Access: access, Grants: grants(resource, access), DecidedBy: [{ Type: 'default-policy', Name: defaultPolicy }] }
  }
  const view = (resource: Resource): ResourcePermissions => {
    const rules = compiled[resource]
    const listed = (rule: MatchedRule, match?: 'exact' | 'prefix'): PermissionRule => permissionRule(resource, rule, match, applicable, merged)
    if (rules.kind === 'plain') return rules.rule === undefined ? { Rules: [], Otherwise: otherwise(resource) } : { Rules: [listed(rules.rule)] }
    const exact = rules.exact.map((rule: LabelledMatch) => listed(rule, 'exact'))
    const prefix = rules.prefix.map((rule: LabelledMatch) => listed(rule, 'prefix'))
    return { Rules: [...exact, ...prefix], Otherwise: otherwise(resource) }
  }
  return { ...base, Resources: byResource(view) }
}

function byResource(view: (resource: Resource) => ResourcePermissions): TokenPermissions['Resources'] {
  const resources = {} as TokenPermissions['Resources']
  for (const resource of PERMISSION_RESOURCES) resources[resource] = view(resource)
  return resources
}

/** The accesses of `resource` a level grants, as checks decide them (write-prefix is no one rule's, so it is left out). */
function grants(resource: Resource, level: Level): string[] {
  return RESOURCE_ACCESSES[resource].filter((access) => access !== 'write-prefix' && levelAllows(level, access))
}

function permissionRule(resource: Resource, rule: MatchedRule, match: 'exact' | 'prefix' | undefined, sources: readonly RulesSource[], merged: MergedRules): PermissionRule {
  // Derived intentions are settled by the merged policy, so the sources are weighed by their policy level.
  const derived = rule.attribute === 'intentions' && mergedServiceRule(merged, rule)?.intentions === undefined
  const decisive = derived ? (mergedServiceRule(merged, rule)?.policy ?? rule.level) : rule.level
  const decidedBy: PermissionSource[] = []
  const overridden: Array<PermissionSource & { Access: Level }> = []
  for (const source of sources) {
    const level = sourceLevel(source.rules, rule, derived)
    if (level === undefined) continue
    if (level === decisive) decidedBy.push(describe(source))
    else overridden.push({ ...describe(source), Access: level })
  }
  // Fields in reading order: where the rule is, what it is, what it grants, who decided.
  return {
    ...(rule.label === undefined ? {} : { Segment: rule.label, ...(match === undefined ? {} : { Match: match }) }),
    Keyword: rule.keyword,
    ...(rule.attribute === 'intentions' ? { Attribute: 'intentions' as const } : {}),
    ...(derived ? { Derived: true as const } : {}),
    Access: rule.level,
    Grants: grants(resource, rule.level),
    DecidedBy: decidedBy,
    ...(overridden.length === 0 ? {} : { Overridden: overridden }),
  }
}

/** What one source's own rules say at the place of `rule` (its keyword and label), or undefined if nothing. */
function sourceLevel(rules: PolicyRules, rule: MatchedRule, derived: boolean): Level | undefined {
  const field = fieldOf(rule.keyword)
  if (field === undefined) return rules[rule.keyword as PlainKeyword]
  const own = (rules[field] as readonly ServiceRule[]).find((candidate) => candidate.name === rule.label)
  if (own === undefined) return undefined
  return rule.attribute === 'intentions' && !derived ? own.intentions : own.policy
}

function mergedServiceRule(merged: MergedRules, rule: MatchedRule): ServiceRule | undefined {
  const field = fieldOf(rule.keyword)
  return field === undefined ? undefined : (merged[field] as readonly ServiceRule[]).find((candidate) => candidate.name === rule.label)
}

/** The rules field of a labelled keyword as written (`service_prefix` → servicePrefix); undefined for plain keywords. */
function fieldOf(keyword: string): LabelledField | undefined {
  const prefix = keyword.endsWith('_prefix')
  const base = (prefix ? keyword.slice(0, -'_prefix'.length) : keyword) as LabelledKeyword
  const fields = Object.hasOwn(LABELLED_FIELDS, base) ? LABELLED_FIELDS[base] : undefined
  return fields === undefined ? undefined : prefix ? fields.prefix : fields.exact
}

function describe(source: RulesSource): PermissionSource {
  const via = source.via.map((link: RulesLink) => (link.kind === 'token' ? { Type: 'token' as const } : { Type: 'role' as const, ID: link.id, Name: link.name }))
  const origin = source.origin
  switch (origin.kind) {
    case 'policy':
      return { Type: 'policy', ID: origin.id, Name: origin.name, Via: via }
    case 'service-identity':
      return origin.datacenters.length === 0
        ? { Type: 'service-identity', Name: origin.serviceName, Via: via }
        : { Type: 'service-identity', Name: origin.serviceName, Datacenters: [...origin.datacenters], Via: via }
    case 'node-identity':
      return { Type: 'node-identity', Name: origin.nodeName, Datacenter: origin.datacenter, Via: via }
    case 'templated-policy':
      return origin.variables === undefined
        ? { Type: 'templated-policy', Name: origin.templateName, Via: via }
        : { Type: 'templated-policy', Name: origin.templateName, TemplateVariables: { ...origin.variables }, Via: via }
  }
}
