/**
 * The filter expression language (go-bexpr's grammar) used for config-entry list `filter`, binding-rule `Selector`
 * and auth-method NamespaceRule `Selector`. Callers treat an empty selector as "match all" before parsing, because
 * an empty source is a syntax error here.
 */
import { evaluateFilter } from './evaluate.js'
import { parseFilter } from './parser.js'

export { evaluateFilter, FilterBudgetError, selectorsOf, type FilterBudget } from './evaluate.js'
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

/**
 * Work one compiled filter may do over all the targets it is called on, in units of one character of a searched
 * string times one character of the pattern (`matches`) or one character (`contains`, `in` on strings). V8's
 * linear-time regular expression engine cannot backtrack, but a long pattern over long strings still costs about
 * their product: a 400-character alternation over twenty 20 KB values blocked the event loop for 12 s. Four million
 * units is well under a second here and far above what a filter over names and tags needs.
 */
export const FILTER_WORK_MAX = 4_000_000

/**
 * Parses once and returns the predicate; throws FilterSyntaxError at compile time. Calling it throws
 * FilterBudgetError once its calls together exceed `workMax` (see FILTER_WORK_MAX): compile one per use.
 */
export function compileFilter(source: string, workMax = FILTER_WORK_MAX): (target: unknown) => boolean {
  const expression = parseFilter(source)
  const budget = { remaining: workMax }
  return (target) => evaluateFilter(expression, target, budget)
}
