/**
 * Consul's pretty output (src/cli/format.ts). Goal: `warden acl token|policy|role read|list` print, byte for byte,
 * what Consul's formatters print for the same record, so scripts that scrape Consul's output work on warden's.
 * Method: the records of Consul's own formatter tests (command/acl/token/formatter_test.go, role/formatter_test.go:
 * the "basic" and "complex" cases, Hash "abcdefgh", times 2020-05-22 18:52:31 UTC) in warden's wire shape, compared
 * with literal text checked line by line against Consul's formatter.go and testdata/Format*\/*.golden. Where warden
 * deliberately differs, the test says so next to the expectation.
 *
 * Consul versions: the expectations follow Consul's current formatters (1.17+): "Auth Method: NAME (Namespace: NS)",
 * no "Legacy:" line in token lists, "Templated Policies:" on tokens and roles. Older goldens in Consul's history lack
 * the namespace and templated policies and have a "Legacy:" line (and a list bug printing node identities as a
 * second "Service Identities:" block); warden does not copy those.
 */
import { expect } from 'chai'
import type { Policy, Role, Token } from '../../../src/api/index.js'
import { formatPolicy, formatPolicyList, formatRole, formatRoleList, formatToken, formatTokenList, goTime } from '../../../src/cli/format.js'

/** Consul's test Hash, []byte("abcdefgh"), as base64 on the wire; Go's %x prints 6162636465666768. */
const HASH = Buffer.from('abcdefgh').toString('base64')

function token(fields: Partial<Token>): Token {
  return {
    AccessorID: 'fbd2447f-7479-4329-ad13-b021d74f86ba',
    SecretID: '869c6e91-4de9-4dab-b56e-87548435f9c6',
    Description: 'test token',
    Policies: [],
    Roles: [],
    TemplatedPolicies: [],
    ServiceIdentities: [],
    NodeIdentities: [],
    Local: false,
    AuthMethod: '',
    CreateTime: '2020-05-22T18:52:31Z',
    Hash: HASH,
    Namespace: '',
    CreateIndex: 42,
    ModifyIndex: 100,
    ...fields,
  }
}

const BASIC_TOKEN = token({})

const COMPLEX_TOKEN = token({
  Namespace: 'foo',
  AuthMethod: 'bar',
  AuthMethodNamespace: 'baz',
  ExpirationTime: '2020-05-22T19:52:31Z',
  CreateIndex: 5,
  ModifyIndex: 10,
  Policies: [
    { ID: 'beb04680-815b-4d7c-9e33-3d707c24672c', Name: 'hobbiton' },
    { ID: '18788457-584c-4812-80d3-23d403148a90', Name: 'bywater' },
  ],
  Roles: [
    { ID: '3b0a78fe-b9c3-40de-b8ea-7d4d6674b366', Name: 'shire' },
    { ID: '6c9d1e1d-34bc-4d55-80f3-add0890ad791', Name: 'west-farthing' },
  ],
  ServiceIdentities: [{ ServiceName: 'gardener', Datacenters: ['middleearth-northwest'] }],
  NodeIdentities: [{ NodeName: 'bagend', Datacenter: 'middleearth-northwest' }],
})

const lines = (...text: string[]): string => text.map((line) => `${line}\n`).join('')

describe('cli format: Consul\'s pretty output', function () {
  describe('goTime (Go\'s %v of a time.Time)', function () {
    it('prints a UTC time without a fraction as Go does', function () {
      expect(goTime('2020-05-22T18:52:31Z')).to.equal('2020-05-22 18:52:31 +0000 UTC')
    })

    it('keeps the fraction as written, beyond milliseconds, without trailing zeros', function () {
      expect(goTime('2020-05-22T18:52:31.479026Z')).to.equal('2020-05-22 18:52:31.479026 +0000 UTC')
      expect(goTime('2020-05-22T18:52:31.123456789Z')).to.equal('2020-05-22 18:52:31.123456789 +0000 UTC')
      expect(goTime('2020-05-22T18:52:31.500Z')).to.equal('2020-05-22 18:52:31.5 +0000 UTC')
      expect(goTime('2020-05-22T18:52:31.000Z')).to.equal('2020-05-22 18:52:31 +0000 UTC')
    })

    it('does not round a fraction into the next second', function () {
      expect(goTime('2020-05-22T18:52:31.9999Z')).to.equal('2020-05-22 18:52:31.9999 +0000 UTC')
    })

    // Warden differs: Go prints a time in the offset it was decoded with ("2020-05-22 20:52:31 +0200 +0200");
    // warden always prints UTC, so output does not depend on where the server or the operator is.
    it('converts a time with an offset to UTC, keeping its whole fraction', function () {
      expect(goTime('2020-05-22T20:52:31+02:00')).to.equal('2020-05-22 18:52:31 +0000 UTC')
      expect(goTime('2020-05-22T20:52:31.479026+02:00')).to.equal('2020-05-22 18:52:31.479026 +0000 UTC')
      expect(goTime('2020-05-22T18:52:31.5-07:30')).to.equal('2020-05-23 02:22:31.5 +0000 UTC')
    })

    it('accepts a lower-case z', function () {
      expect(goTime('2020-05-22T18:52:31.25z')).to.equal('2020-05-22 18:52:31.25 +0000 UTC')
    })

    it('returns input it cannot read as it is, and nothing for nothing', function () {
      expect(goTime('not a time')).to.equal('not a time')
      expect(goTime('')).to.equal('')
      expect(goTime(undefined)).to.equal('')
    })
  })

  describe('formatToken', function () {
    const BASIC_LINES = [
      'AccessorID:       fbd2447f-7479-4329-ad13-b021d74f86ba',
      'SecretID:         869c6e91-4de9-4dab-b56e-87548435f9c6',
      'Description:      test token',
      'Local:            false',
      'Create Time:      2020-05-22 18:52:31 +0000 UTC',
    ]

    it('prints the basic token as Consul\'s FormatToken/basic.pretty.golden', function () {
      // Consul's newest formatter adds a first line "Name:" for a token name; warden's tokens have no name.
      expect(formatToken(BASIC_TOKEN, false)).to.equal(lines(...BASIC_LINES))
    })

    it('adds the hash in hex and the indexes with meta, as Consul\'s basic.pretty-meta.golden', function () {
      expect(formatToken(BASIC_TOKEN, true)).to.equal(lines(...BASIC_LINES, 'Hash:             6162636465666768', 'Create Index:     42', 'Modify Index:     100'))
    })

    const COMPLEX_HEAD = [
      'AccessorID:       fbd2447f-7479-4329-ad13-b021d74f86ba',
      'SecretID:         869c6e91-4de9-4dab-b56e-87548435f9c6',
      'Namespace:        foo',
      'Description:      test token',
      'Local:            false',
      'Auth Method:      bar (Namespace: baz)',
      'Create Time:      2020-05-22 18:52:31 +0000 UTC',
      'Expiration Time:  2020-05-22 19:52:31 +0000 UTC',
    ]
    const COMPLEX_LINKS = [
      'Policies:',
      '   beb04680-815b-4d7c-9e33-3d707c24672c - hobbiton',
      '   18788457-584c-4812-80d3-23d403148a90 - bywater',
      'Roles:',
      '   3b0a78fe-b9c3-40de-b8ea-7d4d6674b366 - shire',
      '   6c9d1e1d-34bc-4d55-80f3-add0890ad791 - west-farthing',
      'Service Identities:',
      '   gardener (Datacenters: middleearth-northwest)',
      'Node Identities:',
      '   bagend (Datacenter: middleearth-northwest)',
    ]

    it('prints the complex token (namespace, auth method, expiry, every link kind) as Consul\'s complex.pretty.golden', function () {
      expect(formatToken(COMPLEX_TOKEN, false)).to.equal(lines(...COMPLEX_HEAD, ...COMPLEX_LINKS))
    })

    it('puts the meta lines after the times and before the links, as Consul\'s complex.pretty-meta.golden', function () {
      expect(formatToken(COMPLEX_TOKEN, true)).to.equal(lines(...COMPLEX_HEAD, 'Hash:             6162636465666768', 'Create Index:     5', 'Modify Index:     10', ...COMPLEX_LINKS))
    })

    it('prints "all" for a service identity without datacenters and joins several with ", "', function () {
      const text = formatToken(token({ ServiceIdentities: [{ ServiceName: 'web' }, { ServiceName: 'db', Datacenters: ['dc1', 'dc2'] }] }), false)
      expect(text).to.include(lines('Service Identities:', '   web (Datacenters: all)', '   db (Datacenters: dc1, dc2)'))
    })

    // As Consul 1.17+'s formatter (older goldens predate templated policies).
    it('prints templated policies last: the template, its name variable when set, and its datacenters or "all"', function () {
      const text = formatToken(
        token({
          NodeIdentities: [{ NodeName: 'bagend', Datacenter: 'dc1' }],
          TemplatedPolicies: [
            { TemplateName: 'builtin/service', TemplateVariables: { name: 'gardener' } },
            { TemplateName: 'builtin/dns' },
            { TemplateName: 'builtin/node', TemplateVariables: { name: 'bagend' }, Datacenters: ['dc1', 'dc2'] } as Token['TemplatedPolicies'][number],
          ],
        }),
        false,
      )
      expect(text.endsWith(
        lines(
          'Node Identities:',
          '   bagend (Datacenter: dc1)',
          'Templated Policies:',
          '   builtin/service',
          '      Name: gardener',
          '      Datacenters: all',
          '   builtin/dns',
          '      Datacenters: all',
          '   builtin/node',
          '      Name: bagend',
          '      Datacenters: dc1, dc2',
        ),
      )).to.equal(true, text)
    })

    it('leaves out Namespace, Auth Method and Expiration Time when empty, as Consul does', function () {
      const text = formatToken(BASIC_TOKEN, false)
      expect(text).not.to.match(/Namespace|Auth Method|Expiration Time|Policies|Roles|Identities/)
    })

    // Consul prints AuthMethodNamespace as it is ("(Namespace: )" when empty); warden falls back to the token's
    // own namespace, where a login puts the token.
    it('names the token\'s namespace for an auth method without a namespace of its own (warden)', function () {
      expect(formatToken(token({ AuthMethod: 'ci', Namespace: 'default' }), false)).to.include('Auth Method:      ci (Namespace: default)\n')
    })

    it('prints Local: true for a local token', function () {
      expect(formatToken(token({ Local: true }), false)).to.include('Local:            true\n')
    })
  })

  describe('formatTokenList', function () {
    // Consul's older list goldens have a "Legacy:" line after the times; its current formatter has none, and
    // warden, which never had legacy tokens, prints none.
    it('prints each token as formatToken does, with a blank line between entries and no Legacy line', function () {
      const second = token({ AccessorID: '00000000-0000-0000-0000-000000000002', SecretID: 'anonymous', Description: 'Anonymous Token' })
      expect(formatTokenList([BASIC_TOKEN, second], false)).to.equal(`${formatToken(BASIC_TOKEN, false)}\n${formatToken(second, false)}`)
      expect(formatTokenList([COMPLEX_TOKEN], true)).to.equal(formatToken(COMPLEX_TOKEN, true))
      expect(formatTokenList([COMPLEX_TOKEN], true)).not.to.include('Legacy')
    })

    it('prints nothing for no tokens', function () {
      expect(formatTokenList([], false)).to.equal('')
    })
  })

  describe('formatPolicy and formatPolicyList', function () {
    const POLICY: Policy = {
      ID: 'beb04680-815b-4d7c-9e33-3d707c24672c',
      Name: 'hobbiton',
      Namespace: '',
      Description: 'test policy',
      Rules: 'node_prefix "" {\n  policy = "read"\n}',
      Datacenters: [],
      Hash: HASH,
      CreateIndex: 42,
      ModifyIndex: 100,
    }
    const COMPLEX_POLICY: Policy = { ...POLICY, Namespace: 'foo', Datacenters: ['middleearth-northwest', 'dc2'], CreateIndex: 5, ModifyIndex: 10 }

    // Consul's policy formatter (command/acl/policy/formatter.go): "Datacenters:" is printed even when empty
    // (with its two spaces), the rules follow "Rules:" as they are, without a newline of their own.
    it('prints a policy as Consul\'s FormatPolicy: ID, Name, Description, Datacenters, then the rules', function () {
      expect(formatPolicy(POLICY, false)).to.equal(
        lines('ID:           beb04680-815b-4d7c-9e33-3d707c24672c', 'Name:         hobbiton', 'Description:  test policy', 'Datacenters:  ', 'Rules:') +
          'node_prefix "" {\n  policy = "read"\n}',
      )
    })

    it('adds the namespace, the datacenters joined with ", " and, with meta, the hash and indexes before the rules', function () {
      expect(formatPolicy(COMPLEX_POLICY, true)).to.equal(
        lines(
          'ID:           beb04680-815b-4d7c-9e33-3d707c24672c',
          'Name:         hobbiton',
          'Namespace:    foo',
          'Description:  test policy',
          'Datacenters:  middleearth-northwest, dc2',
          'Hash:         6162636465666768',
          'Create Index: 5',
          'Modify Index: 10',
          'Rules:',
        ) + 'node_prefix "" {\n  policy = "read"\n}',
      )
    })

    it('prints "Rules:" and nothing after it for a policy read without rules', function () {
      const { Rules: _rules, ...withoutRules } = POLICY
      expect(formatPolicy(withoutRules, false).endsWith('Rules:\n')).to.equal(true)
    })

    it('lists policies as Consul\'s FormatPolicyList: "NAME:" then indented fields, no rules, no blank lines', function () {
      expect(formatPolicyList([POLICY, { ...COMPLEX_POLICY, ID: '18788457-584c-4812-80d3-23d403148a90', Name: 'bywater' }], true)).to.equal(
        lines(
          'hobbiton:',
          '   ID:           beb04680-815b-4d7c-9e33-3d707c24672c',
          '   Description:  test policy',
          '   Datacenters:  ',
          '   Hash:         6162636465666768',
          '   Create Index: 42',
          '   Modify Index: 100',
          'bywater:',
          '   ID:           18788457-584c-4812-80d3-23d403148a90',
          '   Namespace:    foo',
          '   Description:  test policy',
          '   Datacenters:  middleearth-northwest, dc2',
          '   Hash:         6162636465666768',
          '   Create Index: 5',
          '   Modify Index: 10',
        ),
      )
      expect(formatPolicyList([POLICY], false)).not.to.match(/Hash|Index/)
    })
  })

  describe('formatRole and formatRoleList', function () {
    const BASIC_ROLE: Role = {
      ID: 'bd6c9fb0-2d1a-4b96-acaf-669f5d7e7852',
      Name: 'basic',
      Namespace: '',
      Description: 'test role',
      Policies: [],
      Hash: HASH,
      CreateIndex: 42,
      ModifyIndex: 100,
    }
    const COMPLEX_ROLE: Role = {
      ID: 'c29c4ee4-bca6-474e-be37-7d9606f9582a',
      Name: 'complex',
      Namespace: 'foo',
      Description: 'test role complex',
      Hash: HASH,
      CreateIndex: 5,
      ModifyIndex: 10,
      Policies: [
        { ID: 'beb04680-815b-4d7c-9e33-3d707c24672c', Name: 'hobbiton' },
        { ID: '18788457-584c-4812-80d3-23d403148a90', Name: 'bywater' },
      ],
      ServiceIdentities: [{ ServiceName: 'gardener', Datacenters: ['middleearth-northwest'] }],
      NodeIdentities: [{ NodeName: 'bagend', Datacenter: 'middleearth-northwest' }],
      TemplatedPolicies: [
        { TemplateName: 'builtin/service', TemplateVariables: { name: 'gardener' } },
        { TemplateName: 'builtin/node', TemplateVariables: { name: 'bagend' } },
      ],
    }

    it('prints the basic role as Consul\'s FormatRole/basic.pretty.golden, and with meta as basic.pretty-meta.golden', function () {
      const basic = ['ID:           bd6c9fb0-2d1a-4b96-acaf-669f5d7e7852', 'Name:         basic', 'Description:  test role']
      expect(formatRole(BASIC_ROLE, false)).to.equal(lines(...basic))
      expect(formatRole(BASIC_ROLE, true)).to.equal(lines(...basic, 'Hash:         6162636465666768', 'Create Index: 42', 'Modify Index: 100'))
    })

    it('prints the complex role as Consul\'s FormatRole/complex.pretty-meta.golden, with the templated policies of its current formatter last', function () {
      expect(formatRole(COMPLEX_ROLE, true)).to.equal(
        lines(
          'ID:           c29c4ee4-bca6-474e-be37-7d9606f9582a',
          'Name:         complex',
          'Namespace:    foo',
          'Description:  test role complex',
          'Hash:         6162636465666768',
          'Create Index: 5',
          'Modify Index: 10',
          'Policies:',
          '   beb04680-815b-4d7c-9e33-3d707c24672c - hobbiton',
          '   18788457-584c-4812-80d3-23d403148a90 - bywater',
          'Service Identities:',
          '   gardener (Datacenters: middleearth-northwest)',
          'Node Identities:',
          '   bagend (Datacenter: middleearth-northwest)',
          'Templated Policies:',
          '   builtin/service',
          '      Name: gardener',
          '      Datacenters: all',
          '   builtin/node',
          '      Name: bagend',
          '      Datacenters: all',
        ),
      )
    })

    it('leaves the meta lines out without meta', function () {
      expect(formatRole(COMPLEX_ROLE, false)).not.to.match(/Hash|Create Index|Modify Index/)
    })

    it('lists roles as Consul\'s FormatRoleList/complex.pretty-meta.golden: "NAME:", fields indented by 3, links by 6', function () {
      expect(formatRoleList([BASIC_ROLE, COMPLEX_ROLE], true)).to.equal(
        lines(
          'basic:',
          '   ID:           bd6c9fb0-2d1a-4b96-acaf-669f5d7e7852',
          '   Description:  test role',
          '   Hash:         6162636465666768',
          '   Create Index: 42',
          '   Modify Index: 100',
          'complex:',
          '   ID:           c29c4ee4-bca6-474e-be37-7d9606f9582a',
          '   Namespace:    foo',
          '   Description:  test role complex',
          '   Hash:         6162636465666768',
          '   Create Index: 5',
          '   Modify Index: 10',
          '   Policies:',
          '      beb04680-815b-4d7c-9e33-3d707c24672c - hobbiton',
          '      18788457-584c-4812-80d3-23d403148a90 - bywater',
          '   Service Identities:',
          '      gardener (Datacenters: middleearth-northwest)',
          '   Node Identities:',
          '      bagend (Datacenter: middleearth-northwest)',
          '   Templated Policies:',
          '      builtin/service',
          '         Name: gardener',
          '         Datacenters: all',
          '      builtin/node',
          '         Name: bagend',
          '         Datacenters: all',
        ),
      )
    })
  })
})
