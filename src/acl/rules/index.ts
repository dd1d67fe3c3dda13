/**
 * The ACL rules language: `parseRules` turns a policy's Rules text (HCL v1 or its JSON form) into typed
 * `PolicyRules`, or throws a `RulesSyntaxError` that names the line and column of the first mistake.
 */
import { parseHclItems } from './hcl-parser.js'
import { parseJsonItems } from './json-form.js'
import { buildPolicyRules, emptyPolicyRules, RulesSyntaxError, type PolicyRules } from './policy-rules.js'

export {
  emptyPolicyRules,
  LABELLED_FIELDS,
  LABELLED_KEYWORDS,
  PLAIN_KEYWORDS,
  RulesSyntaxError,
  type LabelledField,
  type LabelledKeyword,
  type LabelRule,
  type Level,
  type PlainKeyword,
  type PolicyRules,
  type Position,
  type ServiceRule,
} from './policy-rules.js'

/** Rules larger than this are refused before any parsing, so that one request cannot make the parser work unbounded. */
export const RULES_BYTES_MAX = 128 * 1024

export function parseRules(text: string): PolicyRules {
  // UTF-8 never takes fewer bytes than UTF-16 code units, so the cheap length test settles most large inputs.
  if (text.length > RULES_BYTES_MAX || Buffer.byteLength(text, 'utf8') > RULES_BYTES_MAX) {
    throw new RulesSyntaxError(`rules are larger than ${RULES_BYTES_MAX} bytes`, { line: 1, column: 1 })
  }
  const first = /\S/.exec(text)
  if (first === null) return emptyPolicyRules()
  // Consul's HCL v1 decoder switches to JSON when the text starts with "{", and no valid HCL rules can start so.
  const items = first[0] === '{' ? parseJsonItems(text) : parseHclItems(text)
  return buildPolicyRules(items)
}
