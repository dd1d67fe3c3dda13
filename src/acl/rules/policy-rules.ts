/**
 * The typed form of one policy's rules, and the one place that turns parsed rule items into it.
 *
 * Both front ends (HCL in hcl-parser.ts, JSON in json-form.ts) only check syntax and shape. They hand a list of
 * `RuleItem`s to `buildPolicyRules`, which applies every semantic rule (known keywords, labels, attributes, levels,
 * duplicates) once, so that the HCL and JSON forms of the same policy fail or succeed in exactly the same way.
 * The semantics follow Consul's acl/policy.go; where warden is stricter the comment says so.
 */
import { assert } from '../../lib/assert.js'

/** An access level as written in a rule. `list` exists only for key and key_prefix rules. */
export type Level = 'read' | 'list' | 'write' | 'deny'

/** Keywords that take a level directly: `acl = "write"`. */
export type PlainKeyword = 'acl' | 'operator' | 'mesh' | 'peering' | 'keyring'

/** Keywords that take a label and a block; each also has a `_prefix` form. */
export type LabelledKeyword = 'agent' | 'node' | 'service' | 'session' | 'key' | 'event' | 'query' | 'identity'

/** A labelled rule. For the exact form the name is the whole resource name; for the prefix form it is a prefix. */
export interface LabelRule {
  readonly name: string
  readonly policy: Level
}

/** A service rule also carries the level for intentions whose destination is this service. */
export interface ServiceRule extends LabelRule {
  /**
   * Absent when the rule did not say; the authorizer then derives it from the merged `policy` (read or write → read,
   * deny → deny).
   */
  readonly intentions?: Level
}

/**
 * One policy's rules. A plain field is absent when the policy says nothing about it. Each list holds at most one rule
 * per name (the parser rejects duplicates), in source order.
 */
export interface PolicyRules {
  acl?: Level
  operator?: Level
  mesh?: Level
  peering?: Level
  keyring?: Level
  agent: LabelRule[]
  agentPrefix: LabelRule[]
  node: LabelRule[]
  nodePrefix: LabelRule[]
  service: ServiceRule[]
  servicePrefix: ServiceRule[]
  session: LabelRule[]
  sessionPrefix: LabelRule[]
  key: LabelRule[]
  keyPrefix: LabelRule[]
  event: LabelRule[]
  eventPrefix: LabelRule[]
  query: LabelRule[]
  queryPrefix: LabelRule[]
  identity: LabelRule[]
  identityPrefix: LabelRule[]
}

/** The names of the list fields of `PolicyRules`. */
export type LabelledField = {
  [K in keyof PolicyRules]-?: PolicyRules[K] extends readonly unknown[] ? K : never
}[keyof PolicyRules]

export const PLAIN_KEYWORDS: readonly PlainKeyword[] = ['acl', 'operator', 'mesh', 'peering', 'keyring']

export const LABELLED_KEYWORDS: readonly LabelledKeyword[] = [
  'agent',
  'node',
  'service',
  'session',
  'key',
  'event',
  'query',
  'identity',
]

/** Where each labelled keyword's exact and prefix rules live in `PolicyRules`. */
export const LABELLED_FIELDS: {
  readonly [K in LabelledKeyword]: { readonly exact: LabelledField; readonly prefix: LabelledField }
} = {
  agent: { exact: 'agent', prefix: 'agentPrefix' },
  node: { exact: 'node', prefix: 'nodePrefix' },
  service: { exact: 'service', prefix: 'servicePrefix' },
  session: { exact: 'session', prefix: 'sessionPrefix' },
  key: { exact: 'key', prefix: 'keyPrefix' },
  event: { exact: 'event', prefix: 'eventPrefix' },
  query: { exact: 'query', prefix: 'queryPrefix' },
  identity: { exact: 'identity', prefix: 'identityPrefix' },
}

/** Keywords of enterprise-only rule scopes, recognised so that the error can say why they are refused. */
const SCOPE_KEYWORDS: ReadonlyMap<string, string> = new Map([
  ['namespace', 'namespace'],
  ['namespace_prefix', 'namespace'],
  ['partition', 'partition'],
  ['partition_prefix', 'partition'],
])

export function emptyPolicyRules(): PolicyRules {
  return {
    agent: [],
    agentPrefix: [],
    node: [],
    nodePrefix: [],
    service: [],
    servicePrefix: [],
    session: [],
    sessionPrefix: [],
    key: [],
    keyPrefix: [],
    event: [],
    eventPrefix: [],
    query: [],
    queryPrefix: [],
    identity: [],
    identityPrefix: [],
  }
}

/** A 1-based line and column. Columns count code points, so a character outside the BMP is one column. */
export interface Position {
  readonly line: number
  readonly column: number
}

/** A value with the position of the token it came from, so that a later semantic error can point at it. */
export interface Located<T> {
  readonly value: T
  readonly at: Position
}

export interface RuleAttribute {
  readonly name: Located<string>
  readonly value: Located<string>
}

/**
 * What a front end produces: `keyword = "value"` (plain) or `keyword "label" { attributes }` (block). A block has no
 * label when the source wrote `keyword { ... }`; the builder decides whether the keyword allows each shape.
 */
export type RuleItem =
  | { readonly kind: 'plain'; readonly keyword: Located<string>; readonly value: Located<string> }
  | {
      readonly kind: 'block'
      readonly keyword: Located<string>
      readonly label: Located<string> | undefined
      readonly attributes: readonly RuleAttribute[]
    }

/**
 * Every error `parseRules` throws: syntax and semantics alike carry the position of the offending token, so that an
 * operator editing a long policy can find the mistake.
 */
export class RulesSyntaxError extends Error {
  override readonly name = 'RulesSyntaxError'
  readonly line: number
  readonly column: number
  readonly reason: string

  constructor(reason: string, at: Position) {
    super(`Failed to parse ACL rules: ${reason} at line ${at.line}, column ${at.column}`)
    this.reason = reason
    this.line = at.line
    this.column = at.column
  }
}

/** Quotes a user-supplied value for an error message, cut short so that a huge value cannot bloat the message. */
export function quoteForMessage(value: string): string {
  const displayCharsMax = 64
  const shown = value.length > displayCharsMax ? `${value.slice(0, displayCharsMax)}...` : value
  return JSON.stringify(shown)
}

/**
 * Builds the typed rules from the items of one policy, in source order, so that the first mistake in the text is the
 * one reported. Keywords and attribute names match case-insensitively and levels are lowercased, because Consul's HCL
 * decoder and level parser do the same and policies written for Consul must keep working.
 */
export function buildPolicyRules(items: Iterable<RuleItem>): PolicyRules {
  const rules = emptyPolicyRules()
  const seenLabels = new Map<LabelledField, Set<string>>()
  for (const item of items) {
    const keyword = item.keyword.value.toLowerCase()
    if (keywordShape(item.keyword) === 'plain') {
      addPlainRule(rules, keyword as PlainKeyword, item)
    } else {
      const labelled = labelledKeywordOf(keyword)
      assert(labelled !== undefined, `keyword ${keyword} was classified as labelled`)
      addLabelledRule(rules, seenLabels, labelled, item)
    }
  }
  return rules
}

/**
 * Says whether a keyword takes a level (`acl = "write"`) or labelled blocks, and refuses unknown and enterprise-only
 * keywords. The front ends call it as soon as they read a keyword, so that `namespace "x" { service ... }` is refused
 * for what it is rather than for the nested blocks this grammar does not have.
 */
export function keywordShape(keyword: Located<string>): 'plain' | 'labelled' {
  const lower = keyword.value.toLowerCase()
  const scope = SCOPE_KEYWORDS.get(lower)
  if (scope !== undefined) throw new RulesSyntaxError(`${scope} rules are not supported in this version`, keyword.at)
  if (isPlainKeyword(lower)) return 'plain'
  if (labelledKeywordOf(lower) !== undefined) return 'labelled'
  // Consul's HCL decoder silently ignores unknown keys; warden refuses them so that a typo cannot drop a rule.
  throw new RulesSyntaxError(`unknown resource ${quoteForMessage(keyword.value)}`, keyword.at)
}

function isPlainKeyword(keyword: string): keyword is PlainKeyword {
  return (PLAIN_KEYWORDS as readonly string[]).includes(keyword)
}

interface LabelledSpelling {
  keyword: LabelledKeyword
  prefix: boolean
  spelled: string
}

/** Splits `service_prefix` into its keyword and prefix flag; undefined for anything that is not a labelled keyword. */
function labelledKeywordOf(keyword: string): LabelledSpelling | undefined {
  const prefix = keyword.endsWith('_prefix')
  const base = prefix ? keyword.slice(0, -'_prefix'.length) : keyword
  if (!(LABELLED_KEYWORDS as readonly string[]).includes(base)) return undefined
  return { keyword: base as LabelledKeyword, prefix, spelled: keyword }
}

function addPlainRule(rules: PolicyRules, keyword: PlainKeyword, item: RuleItem): void {
  if (item.kind !== 'plain') {
    throw new RulesSyntaxError(`${keyword} takes no label or block; write ${keyword} = "<level>"`, item.keyword.at)
  }
  if (rules[keyword] !== undefined) {
    throw new RulesSyntaxError(`duplicate rule ${keyword}`, item.keyword.at)
  }
  rules[keyword] = parseLevel(item.value, `${keyword} policy`, false)
}

function addLabelledRule(
  rules: PolicyRules,
  seenLabels: Map<LabelledField, Set<string>>,
  labelled: LabelledSpelling,
  item: RuleItem,
): void {
  const { keyword, prefix, spelled } = labelled
  if (item.kind !== 'block' || item.label === undefined) {
    const hint = `write ${spelled} "<name>" { policy = "<level>" }`
    throw new RulesSyntaxError(`${spelled} needs a label; ${hint}`, item.keyword.at)
  }
  const fields = LABELLED_FIELDS[keyword]
  const field = prefix ? fields.prefix : fields.exact
  const label = item.label.value
  let seen = seenLabels.get(field)
  if (seen === undefined) {
    seen = new Set()
    seenLabels.set(field, seen)
  }
  // Consul (about 1.18 onwards) refuses a key defined twice on new writes. warden always refuses it: a policy that
  // says two things about one name is a mistake, and silently keeping the stronger level would hide it.
  if (seen.has(label)) {
    throw new RulesSyntaxError(`duplicate rule ${spelled} ${quoteForMessage(label)}`, item.label.at)
  }
  seen.add(label)

  const where = `${spelled} ${quoteForMessage(label)}`
  const allowedAttributes = keyword === 'service' ? ['policy', 'intentions'] : ['policy']
  let policy: Level | undefined
  let intentions: Level | undefined
  const seenAttributes = new Set<string>()
  for (const attribute of item.attributes) {
    const name = attribute.name.value.toLowerCase()
    if (!allowedAttributes.includes(name)) {
      throw new RulesSyntaxError(
        `unknown attribute ${quoteForMessage(attribute.name.value)} in ${where}; ` +
          `allowed: ${allowedAttributes.join(', ')}`,
        attribute.name.at,
      )
    }
    if (seenAttributes.has(name)) {
      throw new RulesSyntaxError(`duplicate attribute ${quoteForMessage(name)} in ${where}`, attribute.name.at)
    }
    seenAttributes.add(name)
    if (name === 'policy') {
      policy = parseLevel(attribute.value, `${spelled} policy`, keyword === 'key')
    } else {
      intentions = parseLevel(attribute.value, `${spelled} intentions policy`, false)
    }
  }
  // Consul validates every labelled rule's policy, so a block without one (even a service block that sets only
  // intentions) is refused rather than read as "no opinion".
  if (policy === undefined) {
    throw new RulesSyntaxError(`missing policy in ${where}`, item.keyword.at)
  }
  const rule: ServiceRule = intentions === undefined ? { name: label, policy } : { name: label, policy, intentions }
  rules[field].push(rule)
}

/** Reads a level; `what` names the setting as Consul's messages do ("service_prefix policy", "acl policy"). */
function parseLevel(value: Located<string>, what: string, allowList: boolean): Level {
  const level = value.value.toLowerCase()
  switch (level) {
    case 'read':
    case 'write':
    case 'deny':
      return level
    case 'list':
      if (allowList) return level
      throw new RulesSyntaxError(
        `Invalid ${what}: ${quoteForMessage(value.value)}; list is allowed only in key and key_prefix rules`,
        value.at,
      )
    default: {
      const allowed = allowList ? 'read, write, list, deny' : 'read, write, deny'
      const reason = `Invalid ${what}: ${quoteForMessage(value.value)}; allowed levels are ${allowed}`
      throw new RulesSyntaxError(reason, value.at)
    }
  }
}
