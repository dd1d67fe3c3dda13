/**
 * The permissions view (src/acl/effective-permissions.ts) against the authorizer it describes. The view must say what
 * the checks decide, so the main test reads the view the way a person would (the exact rule for the name, else the
 * longest prefix rule, else what the view says decides otherwise) and compares that answer with the authorizer's
 * `check` for sample resources, on hand-written tokens and on random ones from a seeded generator (a failure prints
 * the seed). The other tests pin the attribution: which source decided a rule, which were overridden, the operator
 * fallback of mesh, derived intentions, management, and sources that do not apply in this datacenter. Last, Consul's
 * KeyWritePrefix, which only the authorize endpoint asks.
 */
import { expect } from 'chai'
import { buildAuthorizer, type Access, type DefaultPolicy, type Resource } from '../../../src/acl/authorizer.js'
import { effectivePermissions, PERMISSION_RESOURCES, type TokenPermissions } from '../../../src/acl/effective-permissions.js'
import { RESOURCE_ACCESSES } from '../../../src/acl/enforce.js'
import { parseRules } from '../../../src/acl/rules/index.js'
import { authorizerOf, type RulesSource, type TokenRules } from '../../../src/acl/token-authorizer.js'

const ACCESSOR = '11111111-2222-3333-4444-555555555555'

/** A policy source linked by the token itself. */
function policy(name: string, rules: string, appliesHere = true): RulesSource {
  return { origin: { kind: 'policy', id: `id-${name}`, name }, via: [{ kind: 'token' }], appliesHere, rules: parseRules(rules) }
}

function collected(sources: RulesSource[], management = false): TokenRules {
  return { sources, management, policyIds: new Set(), roleIds: new Set() }
}

/** The view's answer for one check, read as documented: exact rule, else longest prefix rule, else Otherwise. */
function answerOf(view: TokenPermissions, resource: Resource, access: Access, name: string): boolean {
  const { Rules: rules, Otherwise: otherwise } = view.Resources[resource]
  const plain = rules.find((rule) => rule.Segment === undefined)
  const exact = rules.find((rule) => rule.Match === 'exact' && rule.Segment === name)
  const prefix = rules
    .filter((rule) => rule.Match === 'prefix' && name.startsWith(rule.Segment ?? ''))
    .sort((a, b) => (b.Segment ?? '').length - (a.Segment ?? '').length)[0]
  const deciding = plain ?? exact ?? prefix
  const granted = deciding !== undefined ? deciding.Grants : otherwise?.Grants
  expect(granted, `${resource} ${name}: the view must say what decides`).to.be.an('array')
  return (granted ?? []).includes(access)
}

/** Compares the view with the authorizer on every resource and access for the names given. */
function expectAgreement(sources: RulesSource[], defaultPolicy: DefaultPolicy, names: readonly string[], context = ''): number {
  const token = collected(sources)
  const view = effectivePermissions(ACCESSOR, token, 'dc1', defaultPolicy)
  const authorizer = authorizerOf(token, defaultPolicy)
  let checks = 0
  for (const resource of PERMISSION_RESOURCES) {
    for (const access of RESOURCE_ACCESSES[resource]) {
      if (access === 'write-prefix') continue
      for (const name of names) {
        // An intention named * is weighed over every rule (anyAllowed/allAllowed), which no single rule decides.
        if (resource === 'intention' && name === '*') continue
        const expected = authorizer.check(resource, access, name)
        expect(answerOf(view, resource, access, name), `${context}${resource}:${access} on ${JSON.stringify(name)}`).to.equal(expected)
        checks += 1
      }
    }
  }
  return checks
}

describe('effective permissions: the view says what the authorizer decides', () => {
  const names = ['', 'web', 'web-1', 'web-sidecar-proxy', 'db', 'a/b/c', 'a/b', 'x']

  it('agrees on hand-written tokens, with either default policy', () => {
    const sources = [
      policy('ops', 'operator = "write"\nservice_prefix "" { policy = "read" }\nkey_prefix "a/" { policy = "list" }'),
      policy('web', 'service "web" { policy = "write" intentions = "deny" }\nservice_prefix "web-" { policy = "deny" }\nkey "a/b" { policy = "deny" }'),
      policy('mesh', 'mesh = "read"\nnode_prefix "" { policy = "write" }\nagent "x" { policy = "read" }'),
    ]
    for (const defaultPolicy of ['allow', 'deny'] as const) expect(expectAgreement(sources, defaultPolicy, names)).to.be.greaterThan(100)
  })

  it('agrees on random tokens of random policies (seeded)', () => {
    for (let seed = 1; seed <= 100; seed++) {
      const random = new Random(seed)
      const sources = Array.from({ length: 1 + random.int(3) }, (_, index) => policy(`p${index}`, randomRules(random)))
      const sampleNames = ['', 'a', 'b', 'ab', 'aa', 'ba', 'aab', 'abb', 'bbb']
      expectAgreement(sources, random.int(2) === 0 ? 'allow' : 'deny', sampleNames, `seed=${seed} `)
    }
  })

  it('lists every resource, exact rules before prefix rules, each with what it grants', () => {
    const view = effectivePermissions(ACCESSOR, collected([policy('p', 'key_prefix "a" { policy = "list" }\nkey "b" { policy = "read" }')]), 'dc1', 'deny')
    expect(Object.keys(view.Resources)).to.deep.equal(['acl', 'agent', 'event', 'identity', 'intention', 'key', 'keyring', 'mesh', 'node', 'operator', 'peering', 'query', 'service', 'session'])
    expect(view.Resources.key.Rules.map((rule) => [rule.Match, rule.Segment, rule.Keyword, rule.Access, rule.Grants])).to.deep.equal([
      ['exact', 'b', 'key', 'read', ['read']],
      ['prefix', 'a', 'key_prefix', 'list', ['read', 'list']],
    ])
    expect(view.Resources.key.Otherwise).to.deep.equal({ Access: 'deny', Grants: [], DecidedBy: [{ Type: 'default-policy', Name: 'deny' }] })
    expect(view.Resources.acl).to.deep.equal({ Rules: [], Otherwise: { Access: 'deny', Grants: [], DecidedBy: [{ Type: 'default-policy', Name: 'deny' }] } })
  })
})

describe('effective permissions: attribution', () => {
  it('names the source whose level won the merge, and the ones it overrode', () => {
    const reader = policy('reader', 'service "web" { policy = "read" }')
    const writer: RulesSource = { ...policy('writer', 'service "web" { policy = "write" }'), via: [{ kind: 'token' }, { kind: 'role', id: 'r1', name: 'ops' }] }
    const rule = effectivePermissions(ACCESSOR, collected([reader, writer]), 'dc1', 'deny').Resources.service.Rules[0]
    expect(rule).to.deep.equal({
      Keyword: 'service',
      Segment: 'web',
      Match: 'exact',
      Access: 'write',
      Grants: ['read', 'write'],
      DecidedBy: [{ Type: 'policy', ID: 'id-writer', Name: 'writer', Via: [{ Type: 'token' }, { Type: 'role', ID: 'r1', Name: 'ops' }] }],
      Overridden: [{ Type: 'policy', ID: 'id-reader', Name: 'reader', Via: [{ Type: 'token' }], Access: 'read' }],
    })
  })

  it('lists every source that agrees on the winning level', () => {
    const rule = effectivePermissions(ACCESSOR, collected([policy('a', 'acl = "read"'), policy('b', 'acl = "read"')]), 'dc1', 'deny').Resources.acl.Rules[0]
    expect(rule?.DecidedBy.map((source) => source.Name)).to.deep.equal(['a', 'b'])
    expect(rule).to.not.have.property('Overridden')
  })

  it('mesh and peering without rules of their own are decided by the operator rule', () => {
    const view = effectivePermissions(ACCESSOR, collected([policy('op', 'operator = "read"'), policy('peer', 'peering = "write"')]), 'dc1', 'deny')
    expect(view.Resources.mesh.Rules).to.deep.equal([{ Keyword: 'operator', Access: 'read', Grants: ['read'], DecidedBy: [{ Type: 'policy', ID: 'id-op', Name: 'op', Via: [{ Type: 'token' }] }] }])
    expect(view.Resources.mesh).to.not.have.property('Otherwise')
    expect(view.Resources.peering.Rules[0]?.Keyword).to.equal('peering')
  })

  it('intentions no source set are derived from the merged policy, and say so', () => {
    const view = effectivePermissions(ACCESSOR, collected([policy('w', 'service "web" { policy = "write" }'), policy('r', 'service "web" { policy = "read" }')]), 'dc1', 'deny')
    const rule = view.Resources.intention.Rules[0]
    expect(rule).to.include({ Keyword: 'service', Segment: 'web', Attribute: 'intentions', Derived: true, Access: 'read' })
    expect(rule?.DecidedBy.map((source) => source.Name)).to.deep.equal(['w'])
    const explicit = effectivePermissions(ACCESSOR, collected([policy('i', 'service "web" { policy = "read" intentions = "write" }')]), 'dc1', 'deny')
    expect(explicit.Resources.intention.Rules[0]).to.include({ Access: 'write' }).and.not.have.property('Derived')
  })

  it('a source whose datacenters leave this one out is listed but decides nothing', () => {
    const elsewhere = policy('elsewhere', 'acl = "write"', false)
    const view = effectivePermissions(ACCESSOR, collected([elsewhere, policy('here', 'acl = "read"')]), 'dc1', 'deny')
    expect(view.Sources.map((source) => [source.Name, source.AppliesHere])).to.deep.equal([['elsewhere', false], ['here', true]])
    expect(view.Resources.acl.Rules[0]).to.include({ Access: 'read' }).and.not.have.property('Overridden')
  })

  it('identities and templated policies are named as such', () => {
    const identity: RulesSource = {
      origin: { kind: 'service-identity', serviceName: 'api', datacenters: [] },
      via: [{ kind: 'role', id: 'r', name: 'apis' }],
      appliesHere: true,
      rules: parseRules('service "api" { policy = "write" }'),
    }
    const rule = effectivePermissions(ACCESSOR, collected([identity]), 'dc1', 'deny').Resources.service.Rules[0]
    expect(rule?.DecidedBy).to.deep.equal([{ Type: 'service-identity', Name: 'api', Via: [{ Type: 'role', ID: 'r', Name: 'apis' }] }])
  })

  it('a management token may do everything, decided by global-management', () => {
    const management = policy('global-management', 'acl = "write"')
    const view = effectivePermissions(ACCESSOR, collected([management], true), 'dc1', 'deny')
    expect(view.Management).to.equal(true)
    for (const resource of PERMISSION_RESOURCES) {
      expect(view.Resources[resource].Rules).to.deep.equal([])
      expect(view.Resources[resource].Otherwise?.Access).to.equal('write')
      expect(view.Resources[resource].Otherwise?.DecidedBy[0]?.Name).to.equal('global-management')
    }
    expect(view.Resources.key.Otherwise?.Grants).to.deep.equal(['read', 'list', 'write'])
  })
})

describe("the authorizer's KeyWritePrefix (Consul's conditions)", () => {
  const decide = (rules: string, prefix: string, defaultPolicy: DefaultPolicy = 'deny'): boolean => buildAuthorizer([parseRules(rules)], defaultPolicy).keyWritePrefix(prefix)

  it('allows when the covering prefix rule grants write and nothing under the prefix withholds it', () => {
    expect(decide('key_prefix "a/" { policy = "write" }\nkey "a/b" { policy = "write" }', 'a/')).to.equal(true)
    expect(decide('key_prefix "" { policy = "write" }', 'a/b/')).to.equal(true)
  })

  it('denies when the covering prefix rule does not grant write, even with a default of allow', () => {
    expect(decide('key_prefix "a" { policy = "list" }', 'a/b', 'allow')).to.equal(false)
  })

  it('denies when any rule under the prefix, exact or prefix, withholds write', () => {
    expect(decide('key_prefix "" { policy = "write" }\nkey "a/b/c" { policy = "read" }', 'a/')).to.equal(false)
    expect(decide('key_prefix "" { policy = "write" }\nkey_prefix "a/x" { policy = "deny" }', 'a/')).to.equal(false)
    // A rule beside the prefix, not under it, does not count.
    expect(decide('key_prefix "" { policy = "write" }\nkey "b" { policy = "deny" }', 'a/')).to.equal(true)
  })

  it('without a covering prefix rule leaves it to the default policy, unless something under it withholds write', () => {
    expect(decide('key "a/b" { policy = "write" }', 'a/', 'allow')).to.equal(true)
    expect(decide('key "a/b" { policy = "write" }', 'a/', 'deny')).to.equal(false)
    expect(decide('key "a/b" { policy = "read" }', 'a/', 'allow')).to.equal(false)
  })

  it('an exact rule for the prefix itself does not cover it', () => {
    expect(decide('key "a/" { policy = "write" }', 'a/', 'deny')).to.equal(false)
  })
})

/** mulberry32: a tiny seeded PRNG, so that a failing case can be replayed from its seed. */
class Random {
  constructor(private state: number) {}

  int(bound: number): number {
    this.state = (this.state + 0x6d2b79f5) | 0
    let t = this.state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * bound)
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T
  }
}

/** One policy's rules text over short names of a two-letter alphabet, so that exact and prefix labels collide often. */
function randomRules(random: Random): string {
  const lines: string[] = []
  const seen = new Set<string>()
  const levels = ['read', 'write', 'deny']
  for (let index = random.int(8); index > 0; index--) {
    if (random.int(4) === 0) {
      const keyword = random.pick(['acl', 'operator', 'mesh', 'peering', 'keyring'])
      if (!seen.has(keyword)) lines.push(`${keyword} = "${random.pick(levels)}"`)
      seen.add(keyword)
      continue
    }
    const base = random.pick(['agent', 'node', 'service', 'service', 'session', 'key', 'key', 'event', 'query', 'identity'])
    const keyword = random.int(2) === 0 ? `${base}_prefix` : base
    const label = ['', 'a', 'b', 'ab', 'aa'][random.int(5)] ?? ''
    if (seen.has(`${keyword}/${label}`)) continue
    seen.add(`${keyword}/${label}`)
    const level = random.pick(base === 'key' ? [...levels, 'list'] : levels)
    const intentions = base === 'service' && random.int(2) === 0 ? ` intentions = "${random.pick(levels)}"` : ''
    lines.push(`${keyword} "${label}" { policy = "${level}"${intentions} }`)
  }
  return lines.join('\n')
}
