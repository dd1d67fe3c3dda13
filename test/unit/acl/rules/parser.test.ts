/**
 * Tests for the ACL rules parser (consul-behaviour.md §2a). The goal is that every policy a Consul user writes, in
 * HCL or in any of the three JSON forms, reads into the same typed rules, and that every mistake is refused with the
 * reason and the exact line and column of the offending token. Error cases are a table: each row is one rule of the
 * language with a small text that breaks it, and the expected positions were counted by hand, not copied from output.
 */
import { expect } from 'chai'
import {
  emptyPolicyRules,
  LABELLED_FIELDS,
  LABELLED_KEYWORDS,
  parseRules,
  PLAIN_KEYWORDS,
  RULES_BYTES_MAX,
  RulesSyntaxError,
  type PolicyRules,
} from '../../../../src/acl/rules/index.js'

function rulesWith(fields: Partial<PolicyRules>): PolicyRules {
  return { ...emptyPolicyRules(), ...fields }
}

function parseError(text: string): RulesSyntaxError {
  try {
    parseRules(text)
  } catch (error) {
    expect(error).to.be.instanceOf(RulesSyntaxError)
    return error as RulesSyntaxError
  }
  expect.fail(`expected ${JSON.stringify(text)} to be refused`)
}

describe('parseRules: valid HCL', () => {
  it('reads empty and whitespace-only text as no rules (Consul: empty Rules means no rules)', () => {
    expect(parseRules('')).to.deep.equal(emptyPolicyRules())
    expect(parseRules('  \n\t\r\n ')).to.deep.equal(emptyPolicyRules())
  })

  it('reads text made only of #, // and /* */ comments as no rules', () => {
    expect(parseRules('# one\n// two\n/* three\n   lines */\n')).to.deep.equal(emptyPolicyRules())
  })

  it('reads every plain keyword with each of read, write and deny', () => {
    for (const keyword of PLAIN_KEYWORDS) {
      for (const level of ['read', 'write', 'deny'] as const) {
        const expected = rulesWith({ [keyword]: level })
        expect(parseRules(`${keyword} = "${level}"`), `${keyword} ${level}`).to.deep.equal(expected)
      }
    }
  })

  it('reads the exact and _prefix block of every labelled keyword into its own list', () => {
    for (const keyword of LABELLED_KEYWORDS) {
      const fields = LABELLED_FIELDS[keyword]
      const text = `${keyword} "a" { policy = "write" }\n${keyword}_prefix "b/" { policy = "deny" }`
      expect(parseRules(text), keyword).to.deep.equal(
        rulesWith({
          [fields.exact]: [{ name: 'a', policy: 'write' }],
          [fields.prefix]: [{ name: 'b/', policy: 'deny' }],
        }),
      )
    }
  })

  it('reads service intentions, and leaves them absent when the rule does not set them', () => {
    const text = 'service "web" { policy = "read" intentions = "write" }\nservice_prefix "" { policy = "read" }'
    expect(parseRules(text)).to.deep.equal(
      rulesWith({
        service: [{ name: 'web', policy: 'read', intentions: 'write' }],
        servicePrefix: [{ name: '', policy: 'read' }],
      }),
    )
  })

  it('accepts the list level in key and key_prefix rules', () => {
    expect(parseRules('key "a" { policy = "list" }\nkey_prefix "b" { policy = "list" }')).to.deep.equal(
      rulesWith({ key: [{ name: 'a', policy: 'list' }], keyPrefix: [{ name: 'b', policy: 'list' }] }),
    )
  })

  it('accepts the empty label for exact and prefix rules alike', () => {
    expect(parseRules('node "" { policy = "read" }\nnode_prefix "" { policy = "write" }')).to.deep.equal(
      rulesWith({ node: [{ name: '', policy: 'read' }], nodePrefix: [{ name: '', policy: 'write' }] }),
    )
  })

  it('repeats a keyword with different labels, and keeps an exact and a prefix rule with the same label apart', () => {
    const text = [
      'service "a" { policy = "read" }',
      'service "b" { policy = "write" }',
      'service_prefix "a" { policy = "deny" }',
    ].join('\n')
    expect(parseRules(text)).to.deep.equal(
      rulesWith({
        service: [
          { name: 'a', policy: 'read' },
          { name: 'b', policy: 'write' },
        ],
        servicePrefix: [{ name: 'a', policy: 'deny' }],
      }),
    )
  })

  it('allows commas between attributes and items, and several items on one line', () => {
    const text = 'acl = "read", operator = "write" service "w" { policy = "write", intentions = "deny", }'
    expect(parseRules(text)).to.deep.equal(
      rulesWith({ acl: 'read', operator: 'write', service: [{ name: 'w', policy: 'write', intentions: 'deny' }] }),
    )
  })

  it('accepts HCL v1 variants: an unquoted label, a quoted keyword and "=" before a block', () => {
    expect(parseRules('service web = { policy = "read" }\n"acl" = "write"')).to.deep.equal(
      rulesWith({ acl: 'write', service: [{ name: 'web', policy: 'read' }] }),
    )
  })

  it('decodes Go-style string escapes in labels', () => {
    const rules = parseRules('key "a\\"b\\\\c\\u00e9\\x41\\101\\td" { policy = "read" }')
    expect(rules.key).to.deep.equal([{ name: 'a"b\\céAA\td', policy: 'read' }])
  })

  it('matches keywords and attribute names case-insensitively and lowercases levels, as Consul does', () => {
    expect(parseRules('ACL = "Write"\nService "Web" { Policy = "READ" }')).to.deep.equal(
      rulesWith({ acl: 'write', service: [{ name: 'Web', policy: 'read' }] }),
    )
  })

  it('reads comments between and inside rules', () => {
    const text = [
      '# Operators may read the raft state.',
      'operator = "read" // trailing comment',
      'service "web" {',
      '  /* the web team owns this */ policy = "write"',
      '}',
    ].join('\n')
    expect(parseRules(text)).to.deep.equal(rulesWith({ operator: 'read', service: [{ name: 'web', policy: 'write' }] }))
  })

  it(`accepts rules of exactly ${RULES_BYTES_MAX} bytes`, () => {
    const text = `acl = "read" #${'x'.repeat(RULES_BYTES_MAX - 14)}`
    expect(Buffer.byteLength(text)).to.equal(RULES_BYTES_MAX)
    expect(parseRules(text)).to.deep.equal(rulesWith({ acl: 'read' }))
  })
})

describe('parseRules: valid JSON', () => {
  const expected = rulesWith({
    acl: 'write',
    service: [{ name: 'web', policy: 'read', intentions: 'write' }],
    keyPrefix: [{ name: '', policy: 'list' }],
  })

  it('reads the plain-object JSON form', () => {
    const text =
      '{"acl":"write","service":{"web":{"policy":"read","intentions":"write"}},"key_prefix":{"":{"policy":"list"}}}'
    expect(parseRules(text)).to.deep.equal(expected)
  })

  it('reads the list JSON form that HCL v1 emits', () => {
    const text =
      '{"acl":"write","service":[{"web":[{"policy":"read","intentions":"write"}]}],' +
      '"key_prefix":[{"":[{"policy":"list"}]}]}'
    expect(parseRules(text)).to.deep.equal(expected)
  })

  it('reads the mixed JSON form (a list of labels, each an object)', () => {
    const text =
      '{"acl":"write","service":[{"web":{"policy":"read","intentions":"write"}}],"key_prefix":[{"":{"policy":"list"}}]}'
    expect(parseRules(text)).to.deep.equal(expected)
  })

  it('reads JSON after leading whitespace, and an empty object as no rules', () => {
    expect(parseRules('\n  {"acl": "read"}\n')).to.deep.equal(rulesWith({ acl: 'read' }))
    expect(parseRules('{}')).to.deep.equal(emptyPolicyRules())
    expect(parseRules('{"service": {}, "node": []}')).to.deep.equal(emptyPolicyRules())
  })

  it('decodes JSON string escapes, including surrogate pairs', () => {
    expect(parseRules('{"key": {"a\\/b\\n\\ud83d\\ude00": {"policy": "read"}}}').key).to.deep.equal([
      { name: 'a/b\n😀', policy: 'read' },
    ])
  })
})

describe('parseRules: HCL and JSON forms are equivalent', () => {
  const hcl = `
    acl = "read"
    operator = "write"
    mesh = "deny"
    peering = "read"
    keyring = "write"
    agent "a1" { policy = "read" }
    agent_prefix "" { policy = "deny" }
    node "n1" { policy = "write" }
    node_prefix "n" { policy = "read" }
    service "web" { policy = "write" intentions = "deny" }
    service_prefix "" { policy = "read" }
    session "s" { policy = "write" }
    session_prefix "" { policy = "read" }
    key "k/x" { policy = "deny" }
    key_prefix "k/" { policy = "list" }
    event "deploy" { policy = "write" }
    event_prefix "" { policy = "read" }
    query "q" { policy = "write" }
    query_prefix "" { policy = "read" }
    identity "id" { policy = "write" }
    identity_prefix "" { policy = "read" }
  `
  const labelled: Record<string, Record<string, Record<string, string>>> = {
    agent: { a1: { policy: 'read' } },
    agent_prefix: { '': { policy: 'deny' } },
    node: { n1: { policy: 'write' } },
    node_prefix: { n: { policy: 'read' } },
    service: { web: { policy: 'write', intentions: 'deny' } },
    service_prefix: { '': { policy: 'read' } },
    session: { s: { policy: 'write' } },
    session_prefix: { '': { policy: 'read' } },
    key: { 'k/x': { policy: 'deny' } },
    key_prefix: { 'k/': { policy: 'list' } },
    event: { deploy: { policy: 'write' } },
    event_prefix: { '': { policy: 'read' } },
    query: { q: { policy: 'write' } },
    query_prefix: { '': { policy: 'read' } },
    identity: { id: { policy: 'write' } },
    identity_prefix: { '': { policy: 'read' } },
  }
  const plain = { acl: 'read', operator: 'write', mesh: 'deny', peering: 'read', keyring: 'write' }

  function jsonForm(shape: (blocks: Record<string, Record<string, string>>) => unknown): string {
    const body: Record<string, unknown> = { ...plain }
    for (const [keyword, blocks] of Object.entries(labelled)) body[keyword] = shape(blocks)
    return JSON.stringify(body, null, 2)
  }

  it('reads the HCL policy and its plain-object JSON form to the same rules', () => {
    expect(parseRules(jsonForm((blocks) => blocks))).to.deep.equal(parseRules(hcl))
  })

  it('reads the HCL policy and its list JSON form to the same rules', () => {
    const text = jsonForm((blocks) => Object.entries(blocks).map(([label, body]) => ({ [label]: [body] })))
    expect(parseRules(text)).to.deep.equal(parseRules(hcl))
  })

  it('reads the HCL policy and its mixed JSON form to the same rules', () => {
    const text = jsonForm((blocks) => Object.entries(blocks).map(([label, body]) => ({ [label]: body })))
    expect(parseRules(text)).to.deep.equal(parseRules(hcl))
  })

  it('reads every resource of the HCL policy', () => {
    const rules = parseRules(hcl)
    expect(rules.mesh).to.equal('deny')
    expect(rules.service).to.deep.equal([{ name: 'web', policy: 'write', intentions: 'deny' }])
    expect(rules.identityPrefix).to.deep.equal([{ name: '', policy: 'read' }])
    const counted = LABELLED_KEYWORDS.flatMap((keyword) => [
      ...rules[LABELLED_FIELDS[keyword].exact],
      ...rules[LABELLED_FIELDS[keyword].prefix],
    ])
    expect(counted).to.have.length(16)
  })
})

interface ErrorCase {
  rule: string
  text: string
  reason: string
  line: number
  column: number
}

const HCL_ERRORS: ErrorCase[] = [
  {
    rule: 'an unknown resource keyword',
    text: 'acl = "read"\nfoo "x" { policy = "read" }',
    reason: 'unknown resource "foo"',
    line: 2,
    column: 1,
  },
  {
    rule: 'an unknown attribute inside a block',
    text: 'service "web" {\n  policy = "read"\n  polcy = "write"\n}',
    reason: 'unknown attribute "polcy" in service "web"; allowed: policy, intentions',
    line: 3,
    column: 3,
  },
  {
    rule: 'intentions outside service rules',
    text: 'node "n" { policy = "read" intentions = "read" }',
    reason: 'unknown attribute "intentions" in node "n"; allowed: policy',
    line: 1,
    column: 28,
  },
  {
    rule: 'an invalid prefix policy level',
    text: 'service_prefix "" { policy = "writ" }',
    reason: 'Invalid service_prefix policy: "writ"; allowed levels are read, write, deny',
    line: 1,
    column: 30,
  },
  {
    rule: 'an invalid plain level',
    text: 'acl = "all"',
    reason: 'Invalid acl policy: "all"; allowed levels are read, write, deny',
    line: 1,
    column: 7,
  },
  {
    rule: 'an invalid intentions level',
    text: 'service "a" { policy = "read", intentions = "allow" }',
    reason: 'Invalid service intentions policy: "allow"; allowed levels are read, write, deny',
    line: 1,
    column: 45,
  },
  {
    rule: 'an invalid key level, listing list among the allowed levels',
    text: 'key_prefix "x" { policy = "lis" }',
    reason: 'Invalid key_prefix policy: "lis"; allowed levels are read, write, list, deny',
    line: 1,
    column: 27,
  },
  {
    rule: 'list outside key rules',
    text: 'node_prefix "" {\n\tpolicy = "list"\n}',
    reason: 'Invalid node_prefix policy: "list"; list is allowed only in key and key_prefix rules',
    line: 2,
    column: 11,
  },
  {
    rule: 'list as a plain level',
    text: 'acl = "list"',
    reason: 'Invalid acl policy: "list"; list is allowed only in key and key_prefix rules',
    line: 1,
    column: 7,
  },
  {
    rule: 'list as an intentions level',
    text: 'service "a" { policy = "read" intentions = "list" }',
    reason: 'Invalid service intentions policy: "list"; list is allowed only in key and key_prefix rules',
    line: 1,
    column: 44,
  },
  {
    rule: 'a plain resource set twice',
    text: 'acl = "read"\nacl = "write"',
    reason: 'duplicate rule acl',
    line: 2,
    column: 1,
  },
  {
    rule: 'a plain resource set twice, whatever the case of its keyword',
    text: 'acl = "read"\r\nACL = "write"',
    reason: 'duplicate rule acl',
    line: 2,
    column: 1,
  },
  {
    rule: 'the same label twice for one keyword',
    text: 'service "web" { policy = "read" }\n\nservice "web" { policy = "write" }',
    reason: 'duplicate rule service "web"',
    line: 3,
    column: 9,
  },
  {
    rule: 'the same label twice, once quoted and once bare',
    text: 'key_prefix "a" { policy = "read" } key_prefix a { policy = "read" }',
    reason: 'duplicate rule key_prefix "a"',
    line: 1,
    column: 47,
  },
  {
    rule: 'an attribute twice in one block',
    text: 'key "a" { policy = "read" policy = "write" }',
    reason: 'duplicate attribute "policy" in key "a"',
    line: 1,
    column: 27,
  },
  {
    rule: 'a namespace block, with nested rules',
    text: 'acl = "read"\nnamespace "team" {\n  service "web" { policy = "read" }\n}',
    reason: 'namespace rules are not supported in this version',
    line: 2,
    column: 1,
  },
  {
    rule: 'a namespace_prefix block',
    text: 'namespace_prefix "" { policy = "read" }',
    reason: 'namespace rules are not supported in this version',
    line: 1,
    column: 1,
  },
  {
    rule: 'a partition block',
    text: '  partition "p" { mesh = "write" }',
    reason: 'partition rules are not supported in this version',
    line: 1,
    column: 3,
  },
  {
    rule: 'a block without policy (even a service block that sets only intentions, as Consul validates)',
    text: 'service "web" { intentions = "write" }',
    reason: 'missing policy in service "web"',
    line: 1,
    column: 1,
  },
  {
    rule: 'a label on a plain keyword',
    text: 'operator "x" { policy = "read" }',
    reason: 'operator takes no label or block; write operator = "<level>"',
    line: 1,
    column: 1,
  },
  {
    rule: 'a labelled keyword without a label',
    text: 'event_prefix = "read"',
    reason: 'event_prefix needs a label; write event_prefix "<name>" { policy = "<level>" }',
    line: 1,
    column: 1,
  },
  {
    rule: 'a token other than "=" or "{" after a label',
    text: 'service "web" policy = "read"',
    reason: 'expected "=" or "{"',
    line: 1,
    column: 15,
  },
  {
    rule: 'a token other than "=", a label or "{" after a keyword',
    text: 'acl , "read"',
    reason: 'expected "=" or "{"',
    line: 1,
    column: 5,
  },
  {
    rule: 'a missing "=" inside a block',
    text: 'node "n" {\n  policy "read"\n}',
    reason: 'expected "="',
    line: 2,
    column: 10,
  },
  {
    rule: 'an unquoted value',
    text: 'acl = write',
    reason: 'expected a string',
    line: 1,
    column: 7,
  },
  {
    rule: 'a number as a value',
    text: 'key "a" { policy = 1 }',
    reason: 'expected a string',
    line: 1,
    column: 20,
  },
  {
    rule: 'a stray closing brace',
    text: 'acl = "read"\n}',
    reason: 'expected a rule keyword',
    line: 2,
    column: 1,
  },
  {
    rule: 'a character the language does not use',
    text: 'acl: "read"',
    reason: 'unexpected character ":"',
    line: 1,
    column: 4,
  },
  {
    rule: 'a string that runs into the end of its line',
    text: 'acl = "write\nkeyring = "read"',
    reason: 'unterminated string',
    line: 1,
    column: 7,
  },
  {
    rule: 'a string that runs into the end of input',
    text: 'service "web',
    reason: 'unterminated string',
    line: 1,
    column: 9,
  },
  {
    rule: 'an invalid escape sequence',
    text: 'service "a\\qb" { policy = "read" }',
    reason: 'invalid escape sequence "\\q"',
    line: 1,
    column: 11,
  },
  {
    rule: 'an unterminated block comment',
    text: 'acl = "read"\n  /* note\nkeyring = "read"',
    reason: 'unterminated comment',
    line: 2,
    column: 3,
  },
  {
    rule: 'the end of input inside a block',
    text: 'service "web" {\n  policy = "read"\n',
    reason: 'unexpected end of input',
    line: 3,
    column: 1,
  },
  {
    rule: 'the end of input after a keyword',
    text: 'acl',
    reason: 'unexpected end of input',
    line: 1,
    column: 4,
  },
  {
    rule: 'an invalid level after an emoji label (columns count code points)',
    text: 'service "😀" { policy = "bad" }',
    reason: 'Invalid service policy: "bad"; allowed levels are read, write, deny',
    line: 1,
    column: 24,
  },
]

const JSON_ERRORS: ErrorCase[] = [
  {
    rule: 'an invalid level in JSON',
    text: '{"service": {"web": {"policy": "writ"}}}',
    reason: 'Invalid service policy: "writ"; allowed levels are read, write, deny',
    line: 1,
    column: 32,
  },
  {
    rule: 'an unknown resource in JSON, even with an empty body',
    text: '{\n  "services": {}\n}',
    reason: 'unknown resource "services"',
    line: 2,
    column: 3,
  },
  {
    rule: 'an unknown attribute in JSON',
    text: '{"node": {"n": {"policy": "read", "rules": "x"}}}',
    reason: 'unknown attribute "rules" in node "n"; allowed: policy',
    line: 1,
    column: 35,
  },
  {
    rule: 'a plain resource set twice in JSON',
    text: '{\n  "acl": "read",\n  "acl": "write"\n}',
    reason: 'duplicate rule acl',
    line: 3,
    column: 3,
  },
  {
    rule: 'the same label twice in the JSON list form',
    text: '{"service": [{"web": {"policy": "read"}}, {"web": {"policy": "write"}}]}',
    reason: 'duplicate rule service "web"',
    line: 1,
    column: 44,
  },
  {
    rule: 'an attribute twice in one JSON block',
    text: '{"key": {"a": {"policy": "read", "policy": "read"}}}',
    reason: 'duplicate attribute "policy" in key "a"',
    line: 1,
    column: 34,
  },
  {
    rule: 'list outside key rules in JSON',
    text: '{"agent_prefix": {"": {"policy": "list"}}}',
    reason: 'Invalid agent_prefix policy: "list"; list is allowed only in key and key_prefix rules',
    line: 1,
    column: 34,
  },
  {
    rule: 'a namespace in JSON',
    text: '{"namespace": {"team": {"service": {"web": {"policy": "read"}}}}}',
    reason: 'namespace rules are not supported in this version',
    line: 1,
    column: 2,
  },
  {
    rule: 'a non-string attribute value in JSON',
    text: '{"service": {"web": {"policy": true}}}',
    reason: 'expected a string',
    line: 1,
    column: 32,
  },
  {
    rule: 'a block that is not an object in JSON',
    text: '{"service": {"web": "read"}}',
    reason: 'expected an object',
    line: 1,
    column: 21,
  },
  {
    rule: 'a plain resource given an object in JSON',
    text: '{"acl": {"policy": "read"}}',
    reason: 'expected a string for acl',
    line: 1,
    column: 9,
  },
  {
    rule: 'a labelled resource given a string in JSON',
    text: '{"service": "write"}',
    reason: 'expected an object for service',
    line: 1,
    column: 13,
  },
  {
    rule: 'a trailing comma in a JSON object',
    text: '{"acl": "write",\n "keyring": "read",\n}',
    reason: 'expected a quoted key',
    line: 3,
    column: 1,
  },
  {
    rule: 'a missing colon in JSON',
    text: '{"acl" "write"}',
    reason: 'expected ":"',
    line: 1,
    column: 8,
  },
  {
    rule: 'a missing comma in JSON',
    text: '{"acl": "write" "keyring": "read"}',
    reason: 'expected "," or "}"',
    line: 1,
    column: 17,
  },
  {
    rule: 'text after the JSON object',
    text: '{"acl": "write"} x',
    reason: 'unexpected character "x"',
    line: 1,
    column: 18,
  },
  {
    rule: 'an unterminated JSON string',
    text: '{"acl": "wri',
    reason: 'unterminated string',
    line: 1,
    column: 9,
  },
  {
    rule: 'the end of input inside a JSON object',
    text: '{"acl": "write"',
    reason: 'unexpected end of input',
    line: 1,
    column: 16,
  },
  {
    rule: 'an escape JSON does not have',
    text: '{"acl": "\\x41"}',
    reason: 'invalid escape sequence "\\x"',
    line: 1,
    column: 10,
  },
  {
    rule: 'a raw control character in a JSON string',
    text: '{"acl": "wr\tite"}',
    reason: 'control character in string',
    line: 1,
    column: 12,
  },
  {
    rule: 'nesting deeper than any valid rules',
    text: `{"service": ${'['.repeat(40)}`,
    reason: 'nesting too deep',
    line: 1,
    column: 44,
  },
]

describe('parseRules: errors carry the reason and the exact position', () => {
  for (const errorCase of [...HCL_ERRORS, ...JSON_ERRORS]) {
    it(`refuses ${errorCase.rule} at line ${errorCase.line}, column ${errorCase.column}`, () => {
      const error = parseError(errorCase.text)
      expect(error.reason).to.equal(errorCase.reason)
      const expected = { line: errorCase.line, column: errorCase.column }
      expect({ line: error.line, column: error.column }).to.deep.equal(expected)
      expect(error.message).to.equal(
        `Failed to parse ACL rules: ${errorCase.reason} at line ${errorCase.line}, column ${errorCase.column}`,
      )
    })
  }

  it(`refuses rules larger than ${RULES_BYTES_MAX} bytes, counting UTF-8 bytes`, () => {
    const tooLong = parseError(`acl = "read" #${'x'.repeat(RULES_BYTES_MAX)}`)
    expect(tooLong.reason).to.equal(`rules are larger than ${RULES_BYTES_MAX} bytes`)
    // 'é' is two bytes in UTF-8, so this text is short in characters but over the limit in bytes.
    const multiByte = parseError(`#${'é'.repeat(RULES_BYTES_MAX / 2)}`)
    expect(multiByte.reason).to.equal(`rules are larger than ${RULES_BYTES_MAX} bytes`)
  })

  it('is an Error whose name is RulesSyntaxError', () => {
    const error = parseError('acl = ')
    expect(error).to.be.instanceOf(Error)
    expect(error.name).to.equal('RulesSyntaxError')
  })
})
