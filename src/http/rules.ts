/**
 * Policy Rules are parsed when a policy is written: an invalid rule set is a 400 that says what is wrong and where,
 * in the message and as the body's Line and Column (for an editor to point at).
 */
import { InvalidInputError } from '../lib/errors.js'
import { parseRules, RulesSyntaxError } from '../acl/rules/index.js'

export function checkRules(rules: string, field = 'Rules'): string {
  try {
    parseRules(rules)
  } catch (error) {
    if (error instanceof RulesSyntaxError) throw new InvalidInputError(field, error.message, { line: error.line, column: error.column })
    throw error
  }
  return rules
}
