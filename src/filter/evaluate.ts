/**
 * Evaluates a parsed filter expression over plain JSON-like data. Every literal in the expression is text; it is
 * coerced to the type of whatever the selector finds, as go-bexpr coerces to the field's Go type. Evaluation never
 * throws: a selector that reaches nothing is "missing", and every operator has a defined answer for it.
 */
import { unreachable } from '../lib/assert.js'
import type { FilterExpression, FilterSelector, MatchExpression } from './parser.js'

const MISSING = Symbol('missing')
/** A key missing from an object that the rest of the selector reached (see evaluateMatch). */
const ABSENT_KEY = Symbol('absent key')
type Found = unknown

const ABSENT_KEY_DISPOSITION: Record<MatchExpression['operator'], boolean> = {
  '==': false,
  '!=': true,
  in: false,
  'not in': true,
  contains: false,
  'not contains': true,
  'is empty': true,
  'is not empty': false,
  matches: false,
  'not matches': true,
}

const CANONICAL_INDEX = /^(?:0|[1-9][0-9]*)$/
const NUMBER_TEXT = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$/

/** Work left to a compiled filter (index.ts, FILTER_WORK_MAX); evaluation spends from it and throws when it runs out. */
export interface FilterBudget {
  remaining: number
}

/** The filter's calls together needed more work than its budget allows. */
export class FilterBudgetError extends Error {
  override readonly name = 'FilterBudgetError'
}

const UNLIMITED: FilterBudget = { remaining: Number.POSITIVE_INFINITY }

function spend(budget: FilterBudget, units: number): void {
  budget.remaining -= units
  if (budget.remaining < 0) {
    throw new FilterBudgetError('needs too much work over these entries (long patterns matched against long values); narrow it down')
  }
}

export function evaluateFilter(expression: FilterExpression, target: unknown, budget: FilterBudget = UNLIMITED): boolean {
  switch (expression.kind) {
    case 'or':
      return evaluateFilter(expression.left, target, budget) || evaluateFilter(expression.right, target, budget)
    case 'and':
      return evaluateFilter(expression.left, target, budget) && evaluateFilter(expression.right, target, budget)
    case 'not':
      return !evaluateFilter(expression.operand, target, budget)
    case 'match':
      return evaluateMatch(expression, target, budget)
    default:
      return unreachable(expression, 'unknown filter expression')
  }
}

/** Every selector path in source order, for callers that restrict which fields a filter may name. */
export function selectorsOf(expression: FilterExpression): string[][] {
  switch (expression.kind) {
    case 'or':
    case 'and':
      return [...selectorsOf(expression.left), ...selectorsOf(expression.right)]
    case 'not':
      return selectorsOf(expression.operand)
    case 'match':
      return [[...expression.selector.path]]
    default:
      return unreachable(expression, 'unknown filter expression')
  }
}

/**
 * What a selector that reaches nothing means depends on where it stops, as in go-bexpr (Consul's filter):
 * - a key missing from an object that is there (`Meta.team` on an entry whose Meta has no `team`) is a map key that
 *   is absent, and each operator answers as go-bexpr's NotPresentDisposition does: nothing equals it, is in it or
 *   matches it, so `==`, `in`, `contains`, `matches` and `is not empty` are false, and `!=`, `not in`,
 *   `not contains`, `not matches` and `is empty` are true;
 * - anything else (a top-level field the entry lacks, a walk through an absent or non-object value, an index past the
 *   end of an array) is where go-bexpr fails the whole filter; readings.md makes it "does not match (no error)", so no
 *   operator matches: `Protocl != "http"`, a misspelt field, selects nothing. `not` still negates the whole match.
 */
function evaluateMatch(match: MatchExpression, target: unknown, budget: FilterBudget): boolean {
  const found = resolve(match.selector, target)
  if (found === MISSING) return false
  if (found === ABSENT_KEY) return ABSENT_KEY_DISPOSITION[match.operator]
  if (typeof found === 'string') spend(budget, 'pattern' in match ? (match.pattern.source.length + 1) * found.length : found.length)
  switch (match.operator) {
    case '==':
      return equalsText(found, match.value.text)
    case '!=':
      return !equalsText(found, match.value.text)
    case 'is empty':
      return isEmpty(found)
    case 'is not empty':
      return !isEmpty(found)
    case 'in':
    case 'contains':
      return holds(found, match.value.text)
    case 'not in':
    case 'not contains':
      return !holds(found, match.value.text)
    case 'matches':
      return typeof found === 'string' && match.pattern.test(found)
    case 'not matches':
      return !(typeof found === 'string' && match.pattern.test(found))
    default:
      return unreachable(match, 'unknown match operator')
  }
}

/** Walks own object keys and array indices; anything else along the way, or an undefined value, is missing. */
function resolve(selector: FilterSelector, target: unknown): Found | typeof MISSING | typeof ABSENT_KEY {
  let current: unknown = target
  const last = selector.path.length - 1
  for (const [depth, segment] of selector.path.entries()) {
    if (Array.isArray(current)) {
      if (!CANONICAL_INDEX.test(segment)) return MISSING
      const index = Number(segment)
      if (index >= current.length) return MISSING
      current = current[index]
    } else if (isRecord(current)) {
      // Own keys only, so `constructor` or `__proto__` never reach into the prototype chain. Only the last segment,
      // below the top level, can be an absent map key (go-bexpr's evaluateNotPresent).
      if (!Object.hasOwn(current, segment) || current[segment] === undefined) return depth === last && depth > 0 ? ABSENT_KEY : MISSING
      current = current[segment]
    } else {
      return MISSING
    }
    if (current === undefined) return MISSING
  }
  return current === undefined ? MISSING : current
}

/**
 * `==` coerces the literal to the found value's type. A null matches only the literal text `null` (bare or quoted:
 * quoting never changes a literal's meaning); objects and arrays equal nothing.
 */
function equalsText(found: Found, text: string): boolean {
  switch (typeof found) {
    case 'string':
      return found === text
    case 'number':
      return NUMBER_TEXT.test(text) && Number(text) === found
    case 'boolean':
      return (text === 'true' && found) || (text === 'false' && !found)
    case 'object':
      return found === null && text === 'null'
    default:
      return false
  }
}

/** `in` / `contains`: an array holds an equal element, an object holds the key, a string holds the substring. */
function holds(found: Found, text: string): boolean {
  if (typeof found === 'string') return found.includes(text)
  if (Array.isArray(found)) return found.some((element) => equalsText(element, text))
  if (isRecord(found)) return Object.hasOwn(found, text)
  return false
}

/** Strings, arrays and objects are empty at length zero; null is empty; numbers and booleans never. */
function isEmpty(found: Found): boolean {
  if (found === null) return true
  if (typeof found === 'string' || Array.isArray(found)) return found.length === 0
  if (isRecord(found)) return Object.keys(found).length === 0
  return false
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
