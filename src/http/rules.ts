/**
 * Policy Rules are parsed when a policy is written: an invalid rule set is a 400 that says what is wrong and where.
 */
import { InvalidInputError } from '../lib/errors.js'
import { parseRules, RulesSyntaxError } from '../acl/rules/index.js'

export function checkRules(rules: string): string {
  try {
    parseRules(rules)
  } catch (error) {
    if (error instanceof RulesSyntaxError) throw new InvalidInputError('Rules', error.message)
    throw error
  }
  return rules
}
