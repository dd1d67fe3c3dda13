/**
 * The filter expression language (go-bexpr's grammar) used for config-entry list `filter`, binding-rule `Selector`
 * and auth-method NamespaceRule `Selector`. Callers treat an empty selector as "match all" before parsing, because
 * an empty source is a syntax error here.
 */
import { evaluateFilter } from './evaluate.js'
import { parseFilter } from './parser.js'

export { evaluateFilter, selectorsOf } from './evaluate.js'
export {
  MAX_NESTING_DEPTH,
  MAX_SOURCE_LENGTH,
  parseFilter,
  type AndExpression,
  type EmptinessMatch,
  type EqualityMatch,
  type FilterExpression,
  type FilterSelector,
  type FilterValue,
  type MatchExpression,
  type MembershipMatch,
  type NotExpression,
  type OrExpression,
  type RegexMatch,
} from './parser.js'
export { FilterSyntaxError, type SourcePosition } from './tokenizer.js'

/** Parses once and returns the predicate; throws FilterSyntaxError at compile time, never when called. */
export function compileFilter(source: string): (target: unknown) => boolean {
  const expression = parseFilter(source)
  return (target) => evaluateFilter(expression, target)
}
