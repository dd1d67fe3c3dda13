/**
 * Policy Rules are checked when a policy is written. The rules language lands with the enforcement work; until then
 * Rules is stored as given, bounded in size.
 */
import { InvalidInputError } from '../lib/errors.js'

export const RULES_BYTES_MAX = 128 * 1024

export function checkRules(rules: string): string {
  if (Buffer.byteLength(rules, 'utf8') > RULES_BYTES_MAX) throw new InvalidInputError('Rules', `must be at most ${RULES_BYTES_MAX} bytes`)
  return rules
}
