/**
 * The recursive-descent parser of the filter expression language (go-bexpr's grammar.peg):
 *
 *   Expression = OrExpr
 *   OrExpr     = AndExpr [ "or" OrExpr ]
 *   AndExpr    = NotExpr [ "and" AndExpr ]
 *   NotExpr    = "not" NotExpr | Paren
 *   Paren      = "(" OrExpr ")" | Match
 *   Match      = Selector ("==" | "!=" | "contains" | "not contains" | "matches" | "not matches") Value
 *              | Selector ("is empty" | "is not empty")
 *              | Value ("in" | "not in") Selector
 *
 * A value is always a single token, so the parser tells `V in Sel` from the selector-first forms by looking at the
 * token after the first one, without backtracking. `and` and `or` chains are read in a loop and folded to the right,
 * so a long flat list of alternatives does not count against the nesting bound; only parentheses and `not` do.
 */
import { setFlagsFromString } from 'node:v8'
import { assert } from '../lib/assert.js'
import {
  describeToken,
  positionAt,
  syntaxError,
  tokenize,
  type FilterSyntaxError,
  type SourcePosition,
  type Token,
} from './tokenizer.js'

// The linear-time regular expression engine is behind a V8 flag; it must be on before the first `l` pattern compiles.
setFlagsFromString('--enable-experimental-regexp-engine')

export const MAX_SOURCE_LENGTH = 4096
export const MAX_NESTING_DEPTH = 32

export interface FilterSelector {
  /** `path` for `a.b[0]["k"]`, `pointer` for a JSON pointer written as `"/a/b"`. */
  readonly form: 'path' | 'pointer'
  /** Object keys and array indices, decoded (`~1` and `~0` already replaced in a pointer). */
  readonly path: readonly string[]
  /** The selector as written, for messages. */
  readonly text: string
  readonly position: SourcePosition
}

export interface FilterValue {
  /** How the literal was written; evaluation looks only at `text`, coerced to the type of the selected data. */
  readonly form: 'word' | 'number' | 'string' | 'raw'
  /** The literal's contents: a bare word or number as written, a string with its escapes decoded. */
  readonly text: string
  readonly position: SourcePosition
}

export interface OrExpression {
  readonly kind: 'or'
  readonly left: FilterExpression
  readonly right: FilterExpression
}

export interface AndExpression {
  readonly kind: 'and'
  readonly left: FilterExpression
  readonly right: FilterExpression
}

export interface NotExpression {
  readonly kind: 'not'
  readonly operand: FilterExpression
}

export interface EqualityMatch {
  readonly kind: 'match'
  readonly operator: '==' | '!='
  readonly selector: FilterSelector
  readonly value: FilterValue
}

export interface EmptinessMatch {
  readonly kind: 'match'
  readonly operator: 'is empty' | 'is not empty'
  readonly selector: FilterSelector
}

export interface MembershipMatch {
  readonly kind: 'match'
  /** `V in Sel` and `Sel contains V` are the same test written in two orders. */
  readonly operator: 'in' | 'not in' | 'contains' | 'not contains'
  readonly selector: FilterSelector
  readonly value: FilterValue
}

export interface RegexMatch {
  readonly kind: 'match'
  readonly operator: 'matches' | 'not matches'
  readonly selector: FilterSelector
  readonly value: FilterValue
  /** Compiled once at parse time, so a bad pattern is a syntax error and evaluation never throws. */
  readonly pattern: RegExp
}

export type MatchExpression = EqualityMatch | EmptinessMatch | MembershipMatch | RegexMatch

export type FilterExpression = OrExpression | AndExpression | NotExpression | MatchExpression

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/
const DIGITS = /^[0-9]+$/
const CANONICAL_INDEX = /^(?:0|[1-9][0-9]*)$/
const NUMBER_LITERAL = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$/
const LOOKS_NUMERIC = /^-?[0-9]/

export function parseFilter(source: string): FilterExpression {
  if (source.length > MAX_SOURCE_LENGTH) {
    throw syntaxError(source, MAX_SOURCE_LENGTH, `expression longer than ${MAX_SOURCE_LENGTH} characters`)
  }
  const parser = new Parser(source, tokenize(source))
  return parser.parseExpression()
}

class Parser {
  private index = 0

  constructor(
    private readonly source: string,
    private readonly tokens: readonly Token[],
  ) {
    assert(tokens.at(-1)?.kind === 'eof', 'the token list ends with eof')
  }

  parseExpression(): FilterExpression {
    if (this.peek().kind === 'eof') throw syntaxError(this.source, 0, 'empty expression')
    const expression = this.parseOr(0)
    const next = this.peek()
    if (next.kind === ')') throw this.error(next, 'Unmatched parentheses')
    if (next.kind !== 'eof') throw this.error(next, `expected 'and', 'or' or end of input, found ${describeToken(next)}`)
    return expression
  }

  private parseOr(depth: number): FilterExpression {
    const operands = [this.parseAnd(depth)]
    while (this.atKeyword('or')) {
      this.takeKeyword('or')
      operands.push(this.parseAnd(depth))
    }
    return foldRight(operands, 'or')
  }

  private parseAnd(depth: number): FilterExpression {
    const operands = [this.parseNot(depth)]
    while (this.atKeyword('and')) {
      this.takeKeyword('and')
      operands.push(this.parseNot(depth))
    }
    return foldRight(operands, 'and')
  }

  private parseNot(depth: number): FilterExpression {
    if (!this.atKeyword('not')) return this.parseParen(depth)
    this.checkDepth(depth)
    this.takeKeyword('not')
    const operand = this.parseNot(depth + 1)
    // As in go-bexpr, `not not X` is X; dropping the pair keeps the tree shallow for the evaluator.
    return operand.kind === 'not' ? operand.operand : { kind: 'not', operand }
  }

  private parseParen(depth: number): FilterExpression {
    const open = this.peek()
    if (open.kind !== '(') return this.parseMatch()
    this.checkDepth(depth)
    this.index += 1
    const inner = this.parseOr(depth + 1)
    const close = this.peek()
    if (close.kind === 'eof') throw this.error(open, 'Unmatched parentheses')
    if (close.kind !== ')') throw this.error(close, `expected 'and', 'or' or ')', found ${describeToken(close)}`)
    this.index += 1
    return inner
  }

  private parseMatch(): MatchExpression {
    const first = this.peek()
    if (first.kind !== 'word' && first.kind !== 'string' && first.kind !== 'raw') {
      throw this.error(first, `expected a selector or value, found ${describeToken(first)}`)
    }
    if (this.atKeyword('in', 1) || (this.atKeyword('not', 1) && this.atKeyword('in', 2))) {
      const value = this.parseValue()
      const negated = this.atKeyword('not')
      if (negated) this.takeKeyword('not')
      this.takeKeyword('in')
      const selector = this.parseSelector()
      return { kind: 'match', operator: negated ? 'not in' : 'in', selector, value }
    }

    const selector = this.parseSelector()
    const operator = this.peek()
    if (operator.kind === '==' || operator.kind === '!=') {
      this.index += 1
      return { kind: 'match', operator: operator.kind, selector, value: this.parseValue() }
    }
    if (this.atKeyword('is')) {
      this.takeKeyword('is')
      if (this.atKeyword('empty')) {
        this.takeKeyword('empty')
        return { kind: 'match', operator: 'is empty', selector }
      }
      if (this.atKeyword('not') && this.atKeyword('empty', 1)) {
        this.takeKeyword('not')
        this.takeKeyword('empty')
        return { kind: 'match', operator: 'is not empty', selector }
      }
      const found = this.atKeyword('not') ? this.peek(1) : this.peek()
      throw this.error(found, `expected 'empty' or 'not empty' after 'is', found ${describeToken(found)}`)
    }
    const negated = this.atKeyword('not')
    if (negated) this.takeKeyword('not')
    if (this.atKeyword('contains')) {
      this.takeKeyword('contains')
      return { kind: 'match', operator: negated ? 'not contains' : 'contains', selector, value: this.parseValue() }
    }
    if (this.atKeyword('matches')) {
      this.takeKeyword('matches')
      const value = this.parseValue()
      return { kind: 'match', operator: negated ? 'not matches' : 'matches', selector, value, pattern: this.compile(value) }
    }
    const found = this.peek()
    throw this.error(
      found,
      negated
        ? `expected 'contains' or 'matches' after 'not', found ${describeToken(found)}`
        : `expected an operator (==, !=, is, contains, matches), found ${describeToken(found)}`,
    )
  }

  private parseValue(): FilterValue {
    const token = this.peek()
    const position = positionAt(this.source, token.offset)
    if (token.kind === 'string' || token.kind === 'raw') {
      this.index += 1
      return { form: token.kind, text: token.value, position }
    }
    if (token.kind !== 'word') throw this.error(token, `expected a value, found ${describeToken(token)}`)
    this.index += 1
    if (!LOOKS_NUMERIC.test(token.text)) return { form: 'word', text: token.text, position }
    // A word that starts like a number must be one, as in go-bexpr; `1.2.3` or `10s` has to be quoted.
    if (!NUMBER_LITERAL.test(token.text)) throw this.error(token, 'Invalid number literal')
    return { form: 'number', text: token.text, position }
  }

  private parseSelector(): FilterSelector {
    const first = this.peek()
    const position = positionAt(this.source, first.offset)
    if (first.kind === 'string') {
      if (!first.value.startsWith('/')) throw this.error(first, 'Invalid selector')
      this.index += 1
      return { form: 'pointer', path: this.pointerSegments(first), text: first.text, position }
    }
    if (first.kind !== 'word') throw this.error(first, 'Invalid selector')
    this.index += 1
    const path = this.dottedSegments(first, 0)
    let end = first.offset + first.text.length
    // Index brackets and further `.name` parts belong to the selector only when written flush against it.
    while (true) {
      const next = this.peek()
      if (next.spaceBefore) break
      if (next.kind === '[') {
        this.index += 1
        const key = this.peek()
        if ((key.kind === 'word' && CANONICAL_INDEX.test(key.text)) || key.kind === 'string' || key.kind === 'raw') {
          path.push(key.value)
        } else {
          throw this.error(key, 'Invalid index')
        }
        this.index += 1
        const close = this.peek()
        if (close.kind !== ']') throw this.error(close, `expected ']', found ${describeToken(close)}`)
        this.index += 1
        end = close.offset + 1
      } else if (next.kind === 'word' && next.text.startsWith('.')) {
        this.index += 1
        path.push(...this.dottedSegments(next, 1))
        end = next.offset + next.text.length
      } else {
        break
      }
    }
    return { form: 'path', path, text: this.source.slice(first.offset, end), position }
  }

  /** Splits `a.b.0` (or `.b.0` after an index, skipping the empty first part) into checked segments. */
  private dottedSegments(token: Token, skip: number): string[] {
    const segments: string[] = []
    let offset = token.offset
    for (const [i, segment] of token.text.split('.').entries()) {
      if (i >= skip) {
        if (DIGITS.test(segment) && i > 0) {
          if (!CANONICAL_INDEX.test(segment)) throw syntaxError(this.source, offset, 'Invalid index')
        } else if (!IDENTIFIER.test(segment)) {
          throw syntaxError(this.source, offset, 'Invalid selector')
        }
        segments.push(segment)
      }
      offset += segment.length + 1
    }
    return segments
  }

  /** Decodes `"/a/b~1c"` per RFC 6901: `~1` is `/`, `~0` is `~`, and any other `~` is malformed. */
  private pointerSegments(token: Token): string[] {
    return token.value
      .slice(1)
      .split('/')
      .map((segment) => {
        if (/~(?![01])/.test(segment)) throw this.error(token, 'Invalid selector')
        return segment.replaceAll('~1', '/').replaceAll('~0', '~')
      })
  }

  private compile(value: FilterValue): RegExp {
    try {
      // V8's linear-time engine (the `l` flag): like Go's RE2, it runs in time linear in the input and refuses
      // what needs backtracking (backreferences, lookaround), so no filter can stall the server, whoever sends it.
      // It cannot be combined with `u` on this Node, so \p{...} classes are not available. No `g` flag, so test()
      // keeps no state.
      return new RegExp(value.text, 'l')
    } catch (error) {
      const detail = error instanceof Error ? error.message.replace(/^.*: /, '') : String(error)
      const reason = /linear time/.test(detail)
        ? 'Invalid regular expression: it cannot run in linear time (a backreference, a lookaround, or a large counted repetition such as {0,200}), which filters do not support'
        : `Invalid regular expression: ${detail}`
      throw syntaxError(this.source, value.position.offset, reason)
    }
  }

  private checkDepth(depth: number): void {
    if (depth >= MAX_NESTING_DEPTH) {
      throw this.error(this.peek(), `nesting deeper than ${MAX_NESTING_DEPTH} levels`)
    }
  }

  private peek(ahead = 0): Token {
    const token = this.tokens[Math.min(this.index + ahead, this.tokens.length - 1)]
    assert(token !== undefined, 'the token list is never empty')
    return token
  }

  private atKeyword(word: string, ahead = 0): boolean {
    const token = this.peek(ahead)
    return token.kind === 'word' && token.text === word
  }

  /** Consumes a keyword, which must stand apart from its neighbours: whitespace, a parenthesis or either end. */
  private takeKeyword(word: string): void {
    assert(this.atKeyword(word), `the caller checked for '${word}'`)
    const token = this.peek()
    const previous = this.tokens[this.index - 1]
    const next = this.peek(1)
    if (previous !== undefined && !token.spaceBefore && previous.kind !== '(' && previous.kind !== ')') {
      throw this.error(token, `expected whitespace before '${word}'`)
    }
    if (next.kind !== 'eof' && !next.spaceBefore && next.kind !== '(' && next.kind !== ')') {
      throw this.error(next, `expected whitespace after '${word}'`)
    }
    this.index += 1
  }

  private error(token: Token, reason: string): FilterSyntaxError {
    return syntaxError(this.source, token.offset, reason)
  }
}

function foldRight(operands: FilterExpression[], kind: 'and' | 'or'): FilterExpression {
  const last = operands.at(-1)
  assert(last !== undefined, 'a chain has at least one operand')
  let result: FilterExpression = last
  for (let i = operands.length - 2; i >= 0; i -= 1) {
    const left = operands[i]
    assert(left !== undefined, 'i is within the operands')
    result = { kind, left, right: result }
  }
  return result
}
