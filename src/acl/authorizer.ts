/**
 * The authorizer: merges the policies of one token and answers "may this token do `access` on `resource` `name`?".
 *
 * Semantics follow Consul's acl/policy_merger.go and acl/policy_authorizer.go (see consul-behaviour.md §2a):
 * - Policies merge per (keyword, exact-or-prefix, label) with deny > write > list > read; a service rule's policy and
 *   intentions merge separately.
 * - For a labelled resource, an exact rule for the whole name wins; otherwise the longest prefix rule decides;
 *   otherwise the rules have no opinion ('default').
 * - An explicit level that does not grant the access is a denial, not a fall-through to the default policy.
 * - mesh and peering fall back to operator when the merged rules say nothing about them.
 * - Only a 'default' answer reaches the default policy (allow-all or deny-all).
 *
 * An authorizer is built once per token (and cached by the caller), so building does the work that makes `check`
 * cheap: per-resource exact Maps and a sorted prefix array with parent links, giving a lookup of one Map probe, one
 * binary search and a short walk up the prefix chain.
 */
import { assert } from '../lib/assert.js'
import {
  emptyPolicyRules,
  LABELLED_FIELDS,
  LABELLED_KEYWORDS,
  PLAIN_KEYWORDS,
  type LabelledField,
  type LabelRule,
  type Level,
  type PolicyRules,
  type ServiceRule,
} from './rules/index.js'

export type AccessLevel = Level
export type Decision = 'allow' | 'deny' | 'default'
export type DefaultPolicy = 'allow' | 'deny'
export type Access = 'read' | 'list' | 'write'

export type Resource =
  | 'acl'
  | 'operator'
  | 'mesh'
  | 'peering'
  | 'keyring'
  | 'agent'
  | 'node'
  | 'service'
  | 'intention'
  | 'session'
  | 'key'
  | 'event'
  | 'query'
  | 'identity'

/** The resources whose rules carry a name; a check on them must pass one. */
export type LabelledResource = Exclude<Resource, 'acl' | 'operator' | 'mesh' | 'peering' | 'keyring'>

/** The rule that decided a check, described as it is written in the rules language. */
export interface MatchedRule {
  /** As written: `service_prefix`, `key`, `operator` (also when mesh or peering fell back to it). */
  readonly keyword: string
  /** The label of a labelled rule; absent for plain keywords. */
  readonly label?: string
  /** Which setting gave the level: intention checks read a service rule's `intentions`. */
  readonly attribute: 'policy' | 'intentions'
  /** The merged level; for intentions, after the default derived from `policy`. */
  readonly level: AccessLevel
}

export interface Explanation {
  readonly allowed: boolean
  /** The merged rules' own answer, before the default policy. */
  readonly decision: Decision
  /** Who settled it: a rule, the default policy (decision 'default'), or the management token. */
  readonly by: 'rules' | 'default-policy' | 'management'
  /** The deciding rule, for single-name checks decided by a rule. Wildcard checks weigh many rules and name none. */
  readonly rule?: MatchedRule
}

/**
 * Answers permission checks for one token. Every method is synchronous, allocation-free on the check path and safe
 * to call from any request. `name` is required for labelled resources and ignored for plain ones.
 */
export interface Authorizer {
  check(resource: Resource, access: Access, name?: string): boolean
  explain(resource: Resource, access: Access, name?: string): Explanation
  /** May the token do `access` on at least one name? Consul uses this for reading intentions named `*`. */
  anyAllowed(resource: Resource, access: Access): boolean
  /** May the token do `access` on every name? Consul uses this for writing intentions named `*`. */
  allAllowed(resource: Resource, access: Access): boolean
  /**
   * Consul's KeyWritePrefix: may the token write every key under `prefix` (a recursive delete)? The longest prefix
   * rule covering `prefix` must grant write, and so must every exact and prefix rule at or under it.
   */
  keyWritePrefix(prefix: string): boolean
}

/**
 * The merged rules of several policies: the same shape as one policy's rules, with at most one rule per
 * (field, name), each list sorted by name. A service rule's `intentions` stays absent when no policy set it, because
 * Consul derives the default from the merged `policy`, not from each policy's own.
 */
export type MergedRules = PolicyRules

const PRECEDENCE: { readonly [L in Level]: number } = { read: 1, list: 2, write: 3, deny: 4 }

/** Consul's takesPrecedenceOver: deny > write > list > read > unset. */
function stronger(a: Level | undefined, b: Level | undefined): Level | undefined {
  if (a === undefined) return b
  if (b === undefined) return a
  return PRECEDENCE[a] >= PRECEDENCE[b] ? a : b
}

export function mergePolicies(rules: readonly PolicyRules[]): MergedRules {
  const merged = emptyPolicyRules()
  for (const keyword of PLAIN_KEYWORDS) {
    let level: Level | undefined
    for (const policy of rules) level = stronger(policy[keyword], level)
    if (level !== undefined) merged[keyword] = level
  }
  for (const keyword of LABELLED_KEYWORDS) {
    const fields = LABELLED_FIELDS[keyword]
    for (const field of [fields.exact, fields.prefix]) {
      merged[field].push(...mergeField(rules, field))
    }
  }
  return merged
}

function mergeField(rules: readonly PolicyRules[], field: LabelledField): ServiceRule[] {
  const byName = new Map<string, { policy: Level; intentions: Level | undefined }>()
  for (const policy of rules) {
    for (const rule of policy[field] as readonly ServiceRule[]) {
      const existing = byName.get(rule.name)
      if (existing === undefined) {
        byName.set(rule.name, { policy: rule.policy, intentions: rule.intentions })
      } else {
        existing.policy = stronger(rule.policy, existing.policy) ?? rule.policy
        existing.intentions = stronger(rule.intentions, existing.intentions)
      }
    }
  }
  const names = [...byName.keys()].sort(compareCodeUnits)
  return names.map((name) => {
    const entry = byName.get(name)
    assert(entry !== undefined, 'merged rule vanished')
    return entry.intentions === undefined
      ? { name, policy: entry.policy }
      : { name, policy: entry.policy, intentions: entry.intentions }
  })
}

/** Plain `<` and `>` on strings compare UTF-16 code units, the order the prefix search below relies on. */
function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** What a level grants: write grants everything, list grants list and read, read grants read, deny nothing. */
function enforce(level: AccessLevel, access: Access): 'allow' | 'deny' {
  switch (level) {
    case 'write':
      return 'allow'
    case 'list':
      return access === 'write' ? 'deny' : 'allow'
    case 'read':
      return access === 'read' ? 'allow' : 'deny'
    case 'deny':
      return 'deny'
  }
}

/** Whether a rule of `level` grants `access`, as every check decides it (the permissions view lists what each grants). */
export function levelAllows(level: AccessLevel, access: Access): boolean {
  return enforce(level, access) === 'allow'
}

/** Consul's default intentions level for a service rule that did not set one. */
function intentionsLevel(rule: ServiceRule): AccessLevel {
  if (rule.intentions !== undefined) return rule.intentions
  return rule.policy === 'read' || rule.policy === 'write' ? 'read' : 'deny'
}

/** A rule of a labelled resource, which always has a label (possibly empty). */
export type LabelledMatch = MatchedRule & { readonly label: string }

/** Where a check finds its rule: one fixed rule for a plain keyword, a name lookup for a labelled one. */
interface RuleSource {
  lookup(name: string | undefined): MatchedRule | undefined
  anyDecision(access: Access): Decision
  allDecision(access: Access): Decision
}

class PlainSource implements RuleSource {
  constructor(private readonly rule: MatchedRule | undefined) {}

  lookup(): MatchedRule | undefined {
    return this.rule
  }

  anyDecision(access: Access): Decision {
    return this.rule === undefined ? 'default' : enforce(this.rule.level, access)
  }

  allDecision(access: Access): Decision {
    return this.anyDecision(access)
  }
}

/**
 * The exact and prefix rules of one labelled resource.
 *
 * Longest-prefix search: `prefixes` is sorted, and `parents[i]` is the index of the longest other prefix that is a
 * prefix of `prefixes[i]` (or -1). Every prefix p of a name n satisfies p <= n, and every string between p and n
 * starts with p; so all prefixes of n are prefixes of the greatest entry e <= n, and lie on e's parent chain in
 * order of decreasing length. The first chain entry that is a prefix of n is therefore the longest.
 */
class LabelledSource implements RuleSource {
  private readonly exact = new Map<string, MatchedRule>()
  private readonly prefixes: string[]
  private readonly prefixRules: MatchedRule[]
  private readonly parents: Int32Array
  private readonly anyDecisions: { readonly [A in Access]: Decision }
  private readonly allDecisions: { readonly [A in Access]: Decision }

  constructor(
    private readonly resource: LabelledResource,
    exactRules: readonly LabelledMatch[],
    prefixRules: readonly LabelledMatch[],
  ) {
    for (const rule of exactRules) this.exact.set(rule.label, rule)
    const sorted = [...prefixRules].sort((a, b) => compareCodeUnits(a.label, b.label))
    this.prefixRules = sorted
    this.prefixes = sorted.map((rule) => rule.label)
    this.parents = linkParents(this.prefixes)
    // The wildcard answers depend only on the rules, so they are settled here once per access.
    const emptyPrefix = sorted[0]?.label === '' ? sorted[0] : undefined
    const all = [...exactRules, ...sorted]
    const decide = (wildcard: typeof anyDecision): { [A in Access]: Decision } => ({
      read: wildcard(all, emptyPrefix, 'read'),
      list: wildcard(all, emptyPrefix, 'list'),
      write: wildcard(all, emptyPrefix, 'write'),
    })
    this.anyDecisions = decide(anyDecision)
    this.allDecisions = decide(allDecision)
  }

  lookup(name: string | undefined): MatchedRule | undefined {
    assert(name !== undefined, `a ${this.resource} check needs a name`)
    return this.exact.get(name) ?? this.longestPrefix(name)
  }

  /**
   * Consul's KeyWritePrefix (acl/policy_authorizer.go): the longest prefix rule covering `prefix` (exact rules do not
   * count there) must grant write, and no rule, exact or prefix, at or under `prefix` may withhold it; without such a
   * prefix rule and with nothing under it withholding write, the rules have no opinion.
   */
  writePrefixDecision(prefix: string): Decision {
    const covering = this.longestPrefix(prefix)
    if (covering !== undefined && enforce(covering.level, 'write') === 'deny') return 'deny'
    const withholds = (rule: MatchedRule & { readonly label?: string }): boolean =>
      (rule.label ?? '').startsWith(prefix) && enforce(rule.level, 'write') === 'deny'
    for (const rule of this.exact.values()) if (withholds(rule)) return 'deny'
    for (const rule of this.prefixRules) if (withholds(rule)) return 'deny'
    return covering === undefined ? 'default' : 'allow'
  }

  private longestPrefix(name: string): MatchedRule | undefined {
    const prefixes = this.prefixes
    let low = 0
    let high = prefixes.length - 1
    let index = -1
    while (low <= high) {
      const middle = (low + high) >>> 1
      if ((prefixes[middle] as string) <= name) {
        index = middle
        low = middle + 1
      } else {
        high = middle - 1
      }
    }
    while (index >= 0 && !name.startsWith(prefixes[index] as string)) index = this.parents[index] as number
    return index >= 0 ? this.prefixRules[index] : undefined
  }

  anyDecision(access: Access): Decision {
    return this.anyDecisions[access]
  }

  allDecision(access: Access): Decision {
    return this.allDecisions[access]
  }
}

/** Links each sorted prefix to its longest proper prefix in the list, keeping the chain of open prefixes on a stack. */
function linkParents(sorted: readonly string[]): Int32Array {
  const parents = new Int32Array(sorted.length)
  const open: number[] = []
  sorted.forEach((prefix, index) => {
    while (open.length > 0 && !prefix.startsWith(sorted[open[open.length - 1] as number] as string)) open.pop()
    parents[index] = open.length > 0 ? (open[open.length - 1] as number) : -1
    open.push(index)
  })
  return parents
}

/**
 * Consul's anyAllowed: allow if any rule allows; otherwise deny if the catch-all `_prefix ""` rule denies, else
 * no opinion (the catch-all rule, when present, can only deny here, since it would have allowed otherwise).
 */
function anyDecision(rules: readonly MatchedRule[], emptyPrefix: MatchedRule | undefined, access: Access): Decision {
  if (rules.some((rule) => enforce(rule.level, access) === 'allow')) return 'allow'
  return emptyPrefix === undefined ? 'default' : 'deny'
}

/**
 * Consul's allAllowed: deny if any rule denies; otherwise allow if a catch-all `_prefix ""` rule exists, else no
 * opinion.
 */
function allDecision(rules: readonly MatchedRule[], emptyPrefix: MatchedRule | undefined, access: Access): Decision {
  if (rules.some((rule) => enforce(rule.level, access) === 'deny')) return 'deny'
  return emptyPrefix === undefined ? 'default' : 'allow'
}

class RulesAuthorizer implements Authorizer {
  private readonly defaultAllows: boolean

  constructor(
    private readonly sources: { readonly [R in Resource]: RuleSource } & { readonly key: LabelledSource },
    defaultPolicy: DefaultPolicy,
  ) {
    this.defaultAllows = defaultPolicy === 'allow'
  }

  check(resource: Resource, access: Access, name?: string): boolean {
    const source = this.sourceOf(resource)
    let decision: Decision
    if (resource === 'intention' && name === '*') {
      decision = wildcardIntentionDecision(source, access)
    } else {
      const rule = source.lookup(name)
      decision = rule === undefined ? 'default' : enforce(rule.level, access)
    }
    return decision === 'default' ? this.defaultAllows : decision === 'allow'
  }

  explain(resource: Resource, access: Access, name?: string): Explanation {
    const source = this.sourceOf(resource)
    if (resource === 'intention' && name === '*') {
      return this.settle(wildcardIntentionDecision(source, access), undefined)
    }
    const rule = source.lookup(name)
    return this.settle(rule === undefined ? 'default' : enforce(rule.level, access), rule)
  }

  anyAllowed(resource: Resource, access: Access): boolean {
    const decision = this.sourceOf(resource).anyDecision(access)
    return decision === 'default' ? this.defaultAllows : decision === 'allow'
  }

  allAllowed(resource: Resource, access: Access): boolean {
    const decision = this.sourceOf(resource).allDecision(access)
    return decision === 'default' ? this.defaultAllows : decision === 'allow'
  }

  keyWritePrefix(prefix: string): boolean {
    const decision = this.sources.key.writePrefixDecision(prefix)
    return decision === 'default' ? this.defaultAllows : decision === 'allow'
  }

  /** Callers outside TypeScript can pass any string; an unknown resource is a bug in the caller, not a denial. */
  private sourceOf(resource: Resource): RuleSource {
    const source = this.sources[resource] as RuleSource | undefined
    assert(source !== undefined, `unknown resource ${String(resource)}`)
    return source
  }

  private settle(decision: Decision, rule: MatchedRule | undefined): Explanation {
    if (decision === 'default') return { allowed: this.defaultAllows, decision, by: 'default-policy' }
    const allowed = decision === 'allow'
    return rule === undefined ? { allowed, decision, by: 'rules' } : { allowed, decision, by: 'rules', rule }
  }
}

/**
 * An intention named `*` covers every destination, so (as Consul's IntentionRead/IntentionWrite do) reading one needs
 * intentions read on some service and writing one needs intentions write on all of them.
 */
function wildcardIntentionDecision(source: RuleSource, access: Access): Decision {
  return access === 'write' ? source.allDecision(access) : source.anyDecision(access)
}

/** Builds the authorizer for a token whose policies (already filtered by datacenter) are `rules`. */
export function buildAuthorizer(rules: readonly PolicyRules[], defaultPolicy: DefaultPolicy): Authorizer {
  return authorizerFromMerged(mergePolicies(rules), defaultPolicy)
}

/**
 * Builds the authorizer from rules that `mergePolicies` already merged, for a caller that keeps the merged rules
 * (for example to show a token's effective rules) and should not merge twice.
 */
export function authorizerFromMerged(merged: MergedRules, defaultPolicy: DefaultPolicy): Authorizer {
  const compiled = compileRules(merged)
  const plain = (resource: PlainResource): PlainSource => new PlainSource(compiled[resource].rule)
  const labelled = (resource: LabelledResource): LabelledSource => {
    const rules = compiled[resource]
    return new LabelledSource(resource, rules.exact, rules.prefix)
  }
  return new RulesAuthorizer(
    {
      acl: plain('acl'),
      operator: plain('operator'),
      mesh: plain('mesh'),
      peering: plain('peering'),
      keyring: plain('keyring'),
      agent: labelled('agent'),
      node: labelled('node'),
      service: labelled('service'),
      intention: labelled('intention'),
      session: labelled('session'),
      key: labelled('key'),
      event: labelled('event'),
      query: labelled('query'),
      identity: labelled('identity'),
    },
    defaultPolicy,
  )
}

/** The resources whose rules carry no name. */
export type PlainResource = Exclude<Resource, LabelledResource>

/** Every resource's rules, as compileRules gives them. */
export type CompiledRules = { readonly [R in Resource]: R extends PlainResource ? CompiledPlain : CompiledLabelled }

/** A plain resource's one rule (absent: no opinion). */
export interface CompiledPlain {
  readonly kind: 'plain'
  readonly rule: MatchedRule | undefined
}

/** A labelled resource's exact and prefix rules, each carrying the level checks read. */
export interface CompiledLabelled {
  readonly kind: 'labelled'
  readonly exact: readonly LabelledMatch[]
  readonly prefix: readonly LabelledMatch[]
}

/**
 * The rules every check of each resource consults, as the authorizer is built from them: the one place that says
 * that mesh and peering read the operator rule when they have none, and that intentions read a service rule's
 * `intentions` (or the default derived from its policy). The permissions view (effective-permissions.ts) lists these
 * very rules, so what it shows is what the checks decide.
 */
export function compileRules(merged: MergedRules): CompiledRules {
  const plain = (keyword: PlainResource): CompiledPlain => {
    const level = merged[keyword]
    return { kind: 'plain', rule: level === undefined ? undefined : { keyword, attribute: 'policy', level } }
  }
  const operator = plain('operator')
  const labelled = (keyword: Exclude<LabelledResource, 'intention'>): CompiledLabelled => {
    const fields = LABELLED_FIELDS[keyword]
    const compile = (field: LabelledField, spelled: string): LabelledMatch[] =>
      merged[field].map((rule: LabelRule) => ({
        keyword: spelled,
        label: rule.name,
        attribute: 'policy',
        level: rule.policy,
      }))
    return { kind: 'labelled', exact: compile(fields.exact, keyword), prefix: compile(fields.prefix, `${keyword}_prefix`) }
  }
  const intentions = (rules: readonly ServiceRule[], spelled: string): LabelledMatch[] =>
    rules.map((rule) => ({ keyword: spelled, label: rule.name, attribute: 'intentions', level: intentionsLevel(rule) }))
  return {
    acl: plain('acl'),
    operator,
    // Consul's MeshRead/MeshWrite and PeeringRead/PeeringWrite ask the operator rule when they have no rule of
    // their own.
    mesh: merged.mesh === undefined ? operator : plain('mesh'),
    peering: merged.peering === undefined ? operator : plain('peering'),
    keyring: plain('keyring'),
    agent: labelled('agent'),
    node: labelled('node'),
    service: labelled('service'),
    intention: { kind: 'labelled', exact: intentions(merged.service, 'service'), prefix: intentions(merged.servicePrefix, 'service_prefix') },
    session: labelled('session'),
    key: labelled('key'),
    event: labelled('event'),
    query: labelled('query'),
    identity: labelled('identity'),
  }
}

const MANAGEMENT_EXPLANATION: Explanation = Object.freeze({ allowed: true, decision: 'allow', by: 'management' })

/**
 * The authorizer of a management token (one linked to global-management, §2d): write on every keyword and every
 * `_prefix ""`, intentions included, so every check passes whatever the default policy.
 */
export const MANAGEMENT_AUTHORIZER: Authorizer = Object.freeze({
  check: () => true,
  explain: () => MANAGEMENT_EXPLANATION,
  anyAllowed: () => true,
  allAllowed: () => true,
  keyWritePrefix: () => true,
})

export function managementAuthorizer(): Authorizer {
  return MANAGEMENT_AUTHORIZER
}
