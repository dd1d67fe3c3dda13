/**
 * Tests for the authorizer (consul-behaviour.md §2a, §2d): how the policies of one token merge, which rule decides a
 * check, what each level grants, and when the default policy speaks. Each `it` states one rule of Consul's
 * behaviour on small hand-written policies. The lookup itself is tricky (a binary search over sorted prefixes with
 * parent links), so it is also compared with a deliberately dumb linear-scan implementation on random policies and
 * names from a seeded generator; a failure prints the seed and the case.
 */
import { expect } from 'chai'
import { AssertionError } from '../../../src/lib/assert.js'
import {
  buildAuthorizer,
  MANAGEMENT_AUTHORIZER,
  managementAuthorizer,
  mergePolicies,
  type Access,
  type Authorizer,
  type DefaultPolicy,
  type Resource,
} from '../../../src/acl/authorizer.js'
import {
  emptyPolicyRules,
  parseRules,
  type LabelledKeyword,
  type Level,
  type PlainKeyword,
} from '../../../src/acl/rules/index.js'

const RESOURCES: readonly Resource[] = [
  'acl',
  'operator',
  'mesh',
  'peering',
  'keyring',
  'agent',
  'node',
  'service',
  'intention',
  'session',
  'key',
  'event',
  'query',
  'identity',
]
const ACCESSES: readonly Access[] = ['read', 'list', 'write']
const PLAIN: readonly PlainKeyword[] = ['acl', 'operator', 'mesh', 'peering', 'keyring']
const LABELLED: readonly LabelledKeyword[] = [
  'agent',
  'node',
  'service',
  'session',
  'key',
  'event',
  'query',
  'identity',
]

/** Builds an authorizer from policy texts; a policy given as an array is one rule per line. */
function authorizer(policies: Array<string | string[]>, defaultPolicy: DefaultPolicy = 'deny'): Authorizer {
  const texts = policies.map((policy) => (Array.isArray(policy) ? policy.join('\n') : policy))
  return buildAuthorizer(texts.map(parseRules), defaultPolicy)
}

describe('authorizer: which rule decides a name', () => {
  it('lets an exact rule for the whole name beat any prefix rule', () => {
    const authz = authorizer(['service "web" { policy = "read" }\nservice_prefix "" { policy = "write" }'])
    expect(authz.check('service', 'read', 'web')).to.equal(true)
    expect(authz.check('service', 'write', 'web')).to.equal(false)
    expect(authz.check('service', 'write', 'webx')).to.equal(true)
  })

  it('applies an exact rule to its whole name only, never to longer names', () => {
    const authz = authorizer(['node "db" { policy = "write" }'])
    expect(authz.check('node', 'write', 'db')).to.equal(true)
    expect(authz.check('node', 'read', 'db1')).to.equal(false)
    expect(authz.check('node', 'read', 'd')).to.equal(false)
  })

  it('lets the longest matching prefix rule win, wherever it appears in the text', () => {
    const authz = authorizer([
      [
        'key_prefix "a/b/" { policy = "write" }',
        'key_prefix "a/" { policy = "deny" }',
        'key_prefix "a/b/c/" { policy = "read" }',
      ],
    ])
    expect(authz.check('key', 'write', 'a/b/x')).to.equal(true)
    expect(authz.check('key', 'read', 'a/x')).to.equal(false)
    expect(authz.check('key', 'read', 'a/b/c/d')).to.equal(true)
    expect(authz.check('key', 'write', 'a/b/c/d')).to.equal(false)
    expect(authz.check('key', 'write', 'a/b/')).to.equal(true)
    expect(authz.check('key', 'read', 'b')).to.equal(false)
  })

  it('skips prefix rules that sort between a prefix and the name', () => {
    // "ab" and "aba" sort between "a" and "abz" but are not prefixes of it; only "a" applies.
    const authz = authorizer([
      [
        'service_prefix "a" { policy = "write" }',
        'service_prefix "aba" { policy = "deny" }',
        'service "ab" { policy = "deny" }',
      ],
    ])
    expect(authz.check('service', 'write', 'abz')).to.equal(true)
    expect(authz.check('service', 'write', 'abab')).to.equal(false)
  })

  it('matches every name, the empty name included, with the empty prefix', () => {
    const authz = authorizer(['event_prefix "" { policy = "write" }'])
    for (const name of ['', 'deploy', 'x/y']) expect(authz.check('event', 'write', name), name).to.equal(true)
  })

  it('matches only the empty name with an exact rule whose label is empty', () => {
    const authz = authorizer(['query "" { policy = "write" }'], 'deny')
    expect(authz.check('query', 'write', '')).to.equal(true)
    expect(authz.check('query', 'read', 'q')).to.equal(false)
  })

  it('keeps resources apart: a service rule says nothing about nodes', () => {
    const authz = authorizer(['service_prefix "" { policy = "write" }'], 'deny')
    expect(authz.check('node', 'read', 'web')).to.equal(false)
    expect(authz.check('service', 'read', 'web')).to.equal(true)
  })

  it('treats a labelled check without a name as a bug', () => {
    const authz = authorizer(['service_prefix "" { policy = "write" }'])
    expect(() => authz.check('service', 'read')).to.throw(AssertionError)
  })
})

describe('authorizer: what each level grants', () => {
  it('grants write, list and read with write; only read with read; nothing with deny', () => {
    const authz = authorizer([
      ['agent "w" { policy = "write" }', 'agent "r" { policy = "read" }', 'agent "d" { policy = "deny" }'],
    ])
    const grants = (name: string): boolean[] => ACCESSES.map((access) => authz.check('agent', access, name))
    expect(grants('w')).to.deep.equal([true, true, true])
    expect(grants('r')).to.deep.equal([true, false, false])
    expect(grants('d')).to.deep.equal([false, false, false])
  })

  it('grants list and read but not write with the key list level', () => {
    const authz = authorizer(['key_prefix "app/" { policy = "list" }'], 'allow')
    expect(authz.check('key', 'list', 'app/x')).to.equal(true)
    expect(authz.check('key', 'read', 'app/x')).to.equal(true)
    expect(authz.check('key', 'write', 'app/x')).to.equal(false)
  })

  it('does not grant list with the key read level', () => {
    const authz = authorizer(['key "k" { policy = "read" }'], 'allow')
    expect(authz.check('key', 'list', 'k')).to.equal(false)
  })

  it('denies write with an explicit read even when the default policy is allow', () => {
    const authz = authorizer(['acl = "read"'], 'allow')
    expect(authz.check('acl', 'read')).to.equal(true)
    expect(authz.check('acl', 'write')).to.equal(false)
    expect(authz.explain('acl', 'write')).to.deep.equal({
      allowed: false,
      decision: 'deny',
      by: 'rules',
      rule: { keyword: 'acl', attribute: 'policy', level: 'read' },
    })
  })

  it('denies with an explicit deny even when the default policy is allow', () => {
    const authz = authorizer(['session_prefix "" { policy = "deny" }'], 'allow')
    expect(authz.check('session', 'read', 'node1')).to.equal(false)
  })
})

describe('authorizer: the default policy', () => {
  it('allows everything no rule matches when the default policy is allow', () => {
    const authz = authorizer(['service "web" { policy = "read" }'], 'allow')
    expect(authz.check('service', 'write', 'db')).to.equal(true)
    expect(authz.check('keyring', 'write')).to.equal(true)
    expect(authz.explain('node', 'write', 'n')).to.deep.equal({
      allowed: true,
      decision: 'default',
      by: 'default-policy',
    })
  })

  it('denies everything no rule matches when the default policy is deny', () => {
    const authz = authorizer(['service "web" { policy = "read" }'], 'deny')
    expect(authz.check('service', 'read', 'db')).to.equal(false)
    expect(authz.check('operator', 'read')).to.equal(false)
  })

  it('answers from the default policy alone for a token with no policies or empty rules', () => {
    for (const defaultPolicy of ['allow', 'deny'] as const) {
      for (const authz of [buildAuthorizer([], defaultPolicy), authorizer([''], defaultPolicy)]) {
        expect(authz.check('acl', 'write')).to.equal(defaultPolicy === 'allow')
        expect(authz.check('key', 'list', 'x')).to.equal(defaultPolicy === 'allow')
      }
    }
  })
})

describe('authorizer: merging the policies of one token', () => {
  it('merges the same key with deny > write > list > read, whatever the order of the policies', () => {
    const levels: Level[] = ['read', 'list', 'write', 'deny']
    for (const first of levels) {
      for (const second of levels) {
        const strongest = levels[Math.max(levels.indexOf(first), levels.indexOf(second))]
        const merged = mergePolicies([
          parseRules(`key "k" { policy = "${first}" }\noperator = "${first === 'list' ? 'read' : first}"`),
          parseRules(`key "k" { policy = "${second}" }`),
        ])
        expect(merged.key, `${first} + ${second}`).to.deep.equal([{ name: 'k', policy: strongest }])
      }
    }
  })

  it('merges plain keywords with the same precedence', () => {
    const authz = authorizer(['acl = "write"', 'acl = "read"'])
    expect(authz.check('acl', 'write')).to.equal(true)
    expect(authorizer(['acl = "write"', 'acl = "deny"'], 'allow').check('acl', 'read')).to.equal(false)
  })

  it('keeps exact and prefix rules apart, so an exact read from one policy shadows a prefix write from another', () => {
    const authz = authorizer(['service_prefix "" { policy = "write" }', 'service "web" { policy = "read" }'])
    expect(authz.check('service', 'write', 'web')).to.equal(false)
    expect(authz.check('service', 'read', 'web')).to.equal(true)
    expect(authz.check('service', 'write', 'api')).to.equal(true)
  })

  it('keeps rules for different labels from different policies side by side', () => {
    const merged = mergePolicies([
      parseRules('node "b" { policy = "read" }'),
      parseRules('node "a" { policy = "write" }'),
    ])
    expect(merged.node).to.deep.equal([
      { name: 'a', policy: 'write' },
      { name: 'b', policy: 'read' },
    ])
  })

  it('merges a service rule policy and its intentions separately', () => {
    const merged = mergePolicies([
      parseRules('service "web" { policy = "write" intentions = "read" }'),
      parseRules('service "web" { policy = "read" intentions = "write" }'),
    ])
    expect(merged.service).to.deep.equal([{ name: 'web', policy: 'write', intentions: 'write' }])
  })

  it('derives default intentions from the merged policy after merging what the policies wrote, as Consul does', () => {
    // The first policy writes no intentions, so its deny does not reach the intentions merge.
    const authz = authorizer([
      'service "web" { policy = "deny" }',
      'service "web" { policy = "read" intentions = "write" }',
    ])
    expect(authz.check('service', 'read', 'web')).to.equal(false)
    expect(authz.check('intention', 'write', 'web')).to.equal(true)
    const derived = authorizer(['service "web" { policy = "deny" }', 'service "web" { policy = "write" }'], 'allow')
    expect(derived.check('intention', 'read', 'web')).to.equal(false)
  })

  it('returns empty rules for no policies', () => {
    expect(mergePolicies([])).to.deep.equal(emptyPolicyRules())
  })
})

describe('authorizer: mesh and peering fall back to operator', () => {
  it('answers mesh and peering from operator when no policy sets them', () => {
    const authz = authorizer(['operator = "write"'])
    expect(authz.check('mesh', 'write')).to.equal(true)
    expect(authz.check('peering', 'write')).to.equal(true)
    expect(authz.explain('mesh', 'read').rule).to.deep.equal({
      keyword: 'operator',
      attribute: 'policy',
      level: 'write',
    })
  })

  it('denies mesh:write with an explicit mesh = "read" even when operator = "write"', () => {
    const authz = authorizer(['mesh = "read"\noperator = "write"'])
    expect(authz.check('mesh', 'write')).to.equal(false)
    expect(authz.check('mesh', 'read')).to.equal(true)
    expect(authz.check('peering', 'write')).to.equal(true)
  })

  it('stops the fallback when any policy of the token sets mesh', () => {
    const authz = authorizer(['operator = "write"', 'mesh = "read"'])
    expect(authz.check('mesh', 'write')).to.equal(false)
  })

  it('falls back to the operator rule, so operator = "deny" denies mesh even with default allow', () => {
    const authz = authorizer(['operator = "deny"'], 'allow')
    expect(authz.check('mesh', 'read')).to.equal(false)
    expect(authz.check('peering', 'read')).to.equal(false)
  })

  it('reaches the default policy for mesh only when neither mesh nor operator is set', () => {
    expect(authorizer(['acl = "read"'], 'allow').check('mesh', 'write')).to.equal(true)
    expect(authorizer(['acl = "read"'], 'deny').check('mesh', 'read')).to.equal(false)
  })
})

describe('authorizer: intentions', () => {
  it('defaults intentions to read for a read or write service policy', () => {
    const authz = authorizer(['service "r" { policy = "read" }\nservice_prefix "w" { policy = "write" }'], 'allow')
    for (const name of ['r', 'web']) {
      expect(authz.check('intention', 'read', name), name).to.equal(true)
      expect(authz.check('intention', 'write', name), name).to.equal(false)
    }
  })

  it('defaults intentions to deny for a deny service policy', () => {
    const authz = authorizer(['service "d" { policy = "deny" }'], 'allow')
    expect(authz.check('intention', 'read', 'd')).to.equal(false)
  })

  it('uses the intentions level when the rule sets it, independently of policy', () => {
    const authz = authorizer([
      [
        'service "web" { policy = "read" intentions = "write" }',
        'service "db" { policy = "write" intentions = "deny" }',
      ],
    ])
    expect(authz.check('intention', 'write', 'web')).to.equal(true)
    expect(authz.check('service', 'write', 'web')).to.equal(false)
    expect(authz.check('intention', 'read', 'db')).to.equal(false)
    expect(authz.check('service', 'write', 'db')).to.equal(true)
  })

  it('follows exact-beats-prefix and longest prefix for intentions too', () => {
    const authz = authorizer([
      ['service_prefix "" { policy = "read" intentions = "write" }', 'service "db" { policy = "read" }'],
    ])
    expect(authz.check('intention', 'write', 'api')).to.equal(true)
    expect(authz.check('intention', 'write', 'db')).to.equal(false)
  })

  it('reads intentions named * with any-allowed and writes them with all-allowed', () => {
    const authz = authorizer([
      [
        'service_prefix "" { policy = "write" intentions = "write" }',
        'service "db" { policy = "read" intentions = "read" }',
      ],
    ])
    expect(authz.check('intention', 'read', '*')).to.equal(true)
    expect(authz.check('intention', 'write', '*')).to.equal(false)
    expect(authz.explain('intention', 'write', '*')).to.deep.equal({ allowed: false, decision: 'deny', by: 'rules' })
  })
})

describe('authorizer: any-allowed and all-allowed', () => {
  it('allows any when some rule allows, even under a denying empty prefix', () => {
    const authz = authorizer(['node_prefix "" { policy = "deny" }\nnode "n1" { policy = "read" }'])
    expect(authz.anyAllowed('node', 'read')).to.equal(true)
    expect(authz.anyAllowed('node', 'write')).to.equal(false)
  })

  it('denies any when no rule allows and the empty prefix denies, even with default allow', () => {
    const authz = authorizer(['node_prefix "" { policy = "read" }\nnode "n1" { policy = "deny" }'], 'allow')
    expect(authz.anyAllowed('node', 'write')).to.equal(false)
  })

  it('leaves any to the default policy when no rule allows and there is no empty prefix', () => {
    const rules = 'node "n1" { policy = "read" }'
    expect(authorizer([rules], 'allow').anyAllowed('node', 'write')).to.equal(true)
    expect(authorizer([rules], 'deny').anyAllowed('node', 'write')).to.equal(false)
  })

  it('denies all when any rule denies, even under an allowing empty prefix', () => {
    const authz = authorizer(
      [['service_prefix "" { policy = "write" }', 'service_prefix "secret" { policy = "read" }']],
      'allow',
    )
    expect(authz.allAllowed('service', 'read')).to.equal(true)
    expect(authz.allAllowed('service', 'write')).to.equal(false)
  })

  it('leaves all to the default policy when no rule denies and there is no empty prefix', () => {
    const rules = 'service "a" { policy = "write" }'
    expect(authorizer([rules], 'allow').allAllowed('service', 'write')).to.equal(true)
    expect(authorizer([rules], 'deny').allAllowed('service', 'write')).to.equal(false)
  })

  it('answers any and all for a plain resource from its one rule', () => {
    const authz = authorizer(['keyring = "read"'], 'allow')
    expect(authz.anyAllowed('keyring', 'read')).to.equal(true)
    expect(authz.allAllowed('keyring', 'write')).to.equal(false)
  })
})

describe('authorizer: management', () => {
  it('allows every check, any and all, whatever the default policy (global-management)', () => {
    for (const authz of [MANAGEMENT_AUTHORIZER, managementAuthorizer()]) {
      for (const resource of RESOURCES) {
        for (const access of ACCESSES) {
          expect(authz.check(resource, access, 'x'), `${resource}:${access}`).to.equal(true)
          expect(authz.anyAllowed(resource, access)).to.equal(true)
          expect(authz.allAllowed(resource, access)).to.equal(true)
        }
      }
      expect(authz.explain('acl', 'write')).to.deep.equal({ allowed: true, decision: 'allow', by: 'management' })
    }
  })
})

// ---------------------------------------------------------------------------------------------------------------
// Randomized comparison with a linear-scan implementation.

interface GeneratedLabelRule {
  kind: 'labelled'
  keyword: LabelledKeyword
  prefix: boolean
  label: string
  policy: Level
  intentions?: Level
}

type GeneratedRule = { kind: 'plain'; keyword: PlainKeyword; level: Level } | GeneratedLabelRule

/** mulberry32: a tiny seeded PRNG, so that a failing case can be replayed from its seed. */
class Random {
  constructor(private state: number) {}

  next(): number {
    this.state = (this.state + 0x6d2b79f5) | 0
    let t = this.state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }

  int(bound: number): number {
    return Math.floor(this.next() * bound)
  }

  pick<T>(items: readonly T[]): T {
    const item = items[this.int(items.length)]
    if (item === undefined) throw new Error('pick from an empty list')
    return item
  }
}

/** Short names over a two-letter alphabet, so that exact and prefix labels collide often. */
function randomName(random: Random): string {
  let name = ''
  const length = random.int(4)
  for (let index = 0; index < length; index++) name += random.pick(['a', 'b'])
  return name
}

function randomPolicy(random: Random): GeneratedRule[] {
  const rules: GeneratedRule[] = []
  const seen = new Set<string>()
  const count = random.int(7)
  for (let index = 0; index < count; index++) {
    const levels: Level[] = ['read', 'write', 'deny']
    let rule: GeneratedRule
    if (random.int(4) === 0) {
      rule = { kind: 'plain', keyword: random.pick(PLAIN), level: random.pick(levels) }
    } else {
      // Weight service and key, whose intentions and list levels have the most logic.
      const keyword = random.pick<LabelledKeyword>([...LABELLED, 'service', 'service', 'key'])
      const policy = random.pick<Level>(keyword === 'key' ? [...levels, 'list'] : levels)
      const prefix = random.int(2) === 0
      const base: GeneratedLabelRule = { kind: 'labelled', keyword, prefix, label: randomName(random), policy }
      rule = keyword === 'service' && random.int(2) === 0 ? { ...base, intentions: random.pick(levels) } : base
    }
    const key = rule.kind === 'plain' ? rule.keyword : `${rule.keyword}/${rule.prefix}/${rule.label}`
    if (seen.has(key)) continue
    seen.add(key)
    rules.push(rule)
  }
  return rules
}

function keywordOf(rule: GeneratedLabelRule): string {
  return rule.prefix ? `${rule.keyword}_prefix` : rule.keyword
}

function renderHcl(rules: readonly GeneratedRule[]): string {
  return rules
    .map((rule) => {
      if (rule.kind === 'plain') return `${rule.keyword} = "${rule.level}"`
      const intentions = rule.intentions === undefined ? '' : ` intentions = "${rule.intentions}"`
      return `${keywordOf(rule)} "${rule.label}" {\n  policy = "${rule.policy}"${intentions}\n}`
    })
    .join('\n')
}

function renderJson(rules: readonly GeneratedRule[]): string {
  const body: Record<string, unknown> = {}
  for (const rule of rules) {
    if (rule.kind === 'plain') {
      body[rule.keyword] = rule.level
      continue
    }
    const blocks = (body[keywordOf(rule)] ??= []) as unknown[]
    const attributes =
      rule.intentions === undefined ? { policy: rule.policy } : { policy: rule.policy, intentions: rule.intentions }
    blocks.push({ [rule.label]: [attributes] })
  }
  return JSON.stringify(body)
}

const RANK: readonly Level[] = ['read', 'list', 'write', 'deny']

function strongest(levels: ReadonlyArray<Level | undefined>): Level | undefined {
  let best: Level | undefined
  for (const level of levels) {
    if (level !== undefined && (best === undefined || RANK.indexOf(level) > RANK.indexOf(best))) best = level
  }
  return best
}

function dumbGrants(level: Level, access: Access): boolean {
  const granting: Record<Access, readonly Level[]> = {
    read: ['read', 'list', 'write'],
    list: ['list', 'write'],
    write: ['write'],
  }
  return granting[access].includes(level)
}

/** The merged level of a group of rules with the same keyword, kind and label, for `resource`. */
function dumbGroupLevel(resource: Resource, group: ReadonlyArray<GeneratedLabelRule>): Level {
  const policy = strongest(group.map((rule) => rule.policy))
  if (policy === undefined) throw new Error('empty group')
  if (resource !== 'intention') return policy
  return strongest(group.map((rule) => rule.intentions)) ?? (policy === 'deny' ? 'deny' : 'read')
}

function labelledRulesFor(policies: GeneratedRule[][], resource: Resource): Array<GeneratedLabelRule> {
  const keyword = resource === 'intention' ? 'service' : resource
  return policies
    .flat()
    .filter((rule): rule is GeneratedLabelRule => rule.kind === 'labelled' && rule.keyword === keyword)
}

function dumbLevel(policies: GeneratedRule[][], resource: Resource, name: string): Level | undefined {
  if ((PLAIN as readonly string[]).includes(resource)) {
    const plainLevel = (keyword: string): Level | undefined =>
      strongest(
        policies.flat().map((rule) => (rule.kind === 'plain' && rule.keyword === keyword ? rule.level : undefined)),
      )
    const own = plainLevel(resource)
    return own === undefined && (resource === 'mesh' || resource === 'peering') ? plainLevel('operator') : own
  }
  const rules = labelledRulesFor(policies, resource)
  const exact = rules.filter((rule) => !rule.prefix && rule.label === name)
  if (exact.length > 0) return dumbGroupLevel(resource, exact)
  const prefixes = rules.filter((rule) => rule.prefix && name.startsWith(rule.label))
  if (prefixes.length === 0) return undefined
  const longest = Math.max(...prefixes.map((rule) => rule.label.length))
  return dumbGroupLevel(resource, prefixes.filter((rule) => rule.label.length === longest))
}

/** Every merged rule of a labelled resource, one per (exact-or-prefix, label). */
interface DumbGroup {
  prefix: boolean
  label: string
  level: Level
}

function dumbGroups(policies: GeneratedRule[][], resource: Resource): DumbGroup[] {
  const rules = labelledRulesFor(policies, resource)
  const keys = [...new Set(rules.map((rule) => `${rule.prefix}/${rule.label}`))]
  return keys.map((key) => {
    const group = rules.filter((rule) => `${rule.prefix}/${rule.label}` === key)
    const first = group[0]
    if (first === undefined) throw new Error('empty group')
    return { prefix: first.prefix, label: first.label, level: dumbGroupLevel(resource, group) }
  })
}

function dumbWildcard(
  policies: GeneratedRule[][],
  defaultPolicy: DefaultPolicy,
  resource: Resource,
  access: Access,
  mode: 'any' | 'all',
): boolean {
  if ((PLAIN as readonly string[]).includes(resource)) return dumbCheck(policies, defaultPolicy, resource, access, '')
  const groups = dumbGroups(policies, resource)
  const hasEmptyPrefix = groups.some((group) => group.prefix && group.label === '')
  if (mode === 'any') {
    if (groups.some((group) => dumbGrants(group.level, access))) return true
    return hasEmptyPrefix ? false : defaultPolicy === 'allow'
  }
  if (groups.some((group) => !dumbGrants(group.level, access))) return false
  return hasEmptyPrefix ? true : defaultPolicy === 'allow'
}

function dumbCheck(
  policies: GeneratedRule[][],
  defaultPolicy: DefaultPolicy,
  resource: Resource,
  access: Access,
  name: string,
): boolean {
  if (resource === 'intention' && name === '*') {
    return dumbWildcard(policies, defaultPolicy, resource, access, access === 'write' ? 'all' : 'any')
  }
  const level = dumbLevel(policies, resource, name)
  return level === undefined ? defaultPolicy === 'allow' : dumbGrants(level, access)
}

describe('authorizer: randomized comparison with a linear scan', () => {
  it('agrees with the linear scan on check, anyAllowed and allAllowed for random policies and names', () => {
    const seed = 0x5eed
    const random = new Random(seed)
    for (let trial = 0; trial < 400; trial++) {
      const policies = Array.from({ length: 1 + random.int(3) }, () => randomPolicy(random))
      const texts = policies.map((rules) => (random.int(2) === 0 ? renderHcl(rules) : renderJson(rules)))
      const defaultPolicy = random.pick<DefaultPolicy>(['allow', 'deny'])
      const authz = authorizer(texts, defaultPolicy)
      const context = (what: string): string =>
        `seed=0x${seed.toString(16)} trial=${trial} default=${defaultPolicy} ${what}\n${texts.join('\n---\n')}`
      for (let query = 0; query < 40; query++) {
        const resource = random.pick(RESOURCES)
        const access = random.pick(ACCESSES)
        const name = resource === 'intention' && random.int(5) === 0 ? '*' : randomName(random)
        const expected = dumbCheck(policies, defaultPolicy, resource, access, name)
        expect(authz.check(resource, access, name), context(`check ${resource}:${access} "${name}"`)).to.equal(expected)
      }
      for (const resource of RESOURCES) {
        for (const access of ACCESSES) {
          expect(authz.anyAllowed(resource, access), context(`any ${resource}:${access}`)).to.equal(
            dumbWildcard(policies, defaultPolicy, resource, access, 'any'),
          )
          expect(authz.allAllowed(resource, access), context(`all ${resource}:${access}`)).to.equal(
            dumbWildcard(policies, defaultPolicy, resource, access, 'all'),
          )
        }
      }
    }
  })
})
