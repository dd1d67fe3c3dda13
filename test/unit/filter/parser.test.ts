/**
 * The filter parser must accept go-bexpr's grammar with its precedence (not > and > or) and right-associative
 * chains, turn every selector and literal form into the AST the evaluator expects, and reject bad input with a
 * FilterSyntaxError that names the reason and the exact line and column, including the length and nesting bounds.
 */
import { expect } from 'chai'
import {
  FilterSyntaxError,
  MAX_NESTING_DEPTH,
  MAX_SOURCE_LENGTH,
  parseFilter,
  selectorsOf,
  type FilterExpression,
  type MatchExpression,
} from '../../../src/filter/index.js'

/** Renders the tree as an S-expression so a test can state a whole shape in one line. */
function show(expression: FilterExpression): string {
  switch (expression.kind) {
    case 'or':
    case 'and':
      return `(${expression.kind} ${show(expression.left)} ${show(expression.right)})`
    case 'not':
      return `(not ${show(expression.operand)})`
    case 'match': {
      const selector = expression.selector.path.join('.')
      if (!('value' in expression)) return `(${expression.operator} ${selector})`
      return `(${expression.operator} ${selector} ${expression.value.form}:${expression.value.text})`
    }
  }
}

function match(source: string): MatchExpression {
  const expression = parseFilter(source)
  if (expression.kind !== 'match') throw new Error(`expected a match, got ${expression.kind}`)
  return expression
}

function syntaxError(source: string): FilterSyntaxError {
  try {
    parseFilter(source)
  } catch (error) {
    if (error instanceof FilterSyntaxError) return error
    throw error
  }
  throw new Error(`expected ${JSON.stringify(source)} to be rejected`)
}

function expectError(source: string, reason: string, line: number, column: number, offset: number): void {
  const error = syntaxError(source)
  expect(error.reason).to.equal(reason)
  expect(error.position).to.deep.equal({ offset, line, column })
}

describe('filter parser', () => {
  describe('match forms', () => {
    it('parses every operator into a match node with its selector and value', () => {
      expect(show(parseFilter('a == x'))).to.equal('(== a word:x)')
      expect(show(parseFilter('a != x'))).to.equal('(!= a word:x)')
      expect(show(parseFilter('a is empty'))).to.equal('(is empty a)')
      expect(show(parseFilter('a is not empty'))).to.equal('(is not empty a)')
      expect(show(parseFilter('x in a'))).to.equal('(in a word:x)')
      expect(show(parseFilter('x not in a'))).to.equal('(not in a word:x)')
      expect(show(parseFilter('a contains x'))).to.equal('(contains a word:x)')
      expect(show(parseFilter('a not contains x'))).to.equal('(not contains a word:x)')
      expect(show(parseFilter('a matches "^x"'))).to.equal('(matches a string:^x)')
      expect(show(parseFilter('a not matches "^x"'))).to.equal('(not matches a string:^x)')
    })

    it('needs no whitespace around == and !=', () => {
      expect(show(parseFilter('a==x'))).to.equal('(== a word:x)')
      expect(show(parseFilter('a!=-1'))).to.equal('(!= a number:-1)')
    })

    it('compiles the pattern of matches once, at parse time', () => {
      const parsed = match('Name matches "^web-[0-9]+$"')
      expect(parsed.operator).to.equal('matches')
      if (parsed.operator !== 'matches') return
      expect(parsed.pattern).to.be.instanceOf(RegExp)
      expect(parsed.pattern.test('web-12')).to.equal(true)
    })
  })

  describe('precedence and associativity', () => {
    it('binds and tighter than or', () => {
      expect(show(parseFilter('a == 1 or b == 2 and c == 3'))).to.equal(
        '(or (== a number:1) (and (== b number:2) (== c number:3)))',
      )
      expect(show(parseFilter('a == 1 and b == 2 or c == 3'))).to.equal(
        '(or (and (== a number:1) (== b number:2)) (== c number:3))',
      )
    })

    it('binds not tighter than and', () => {
      expect(show(parseFilter('not a == 1 and b == 2'))).to.equal('(and (not (== a number:1)) (== b number:2))')
    })

    it('groups or and and chains to the right', () => {
      expect(show(parseFilter('a == 1 or b == 2 or c == 3'))).to.equal(
        '(or (== a number:1) (or (== b number:2) (== c number:3)))',
      )
      expect(show(parseFilter('a == 1 and b == 2 and c == 3'))).to.equal(
        '(and (== a number:1) (and (== b number:2) (== c number:3)))',
      )
    })

    it('lets parentheses override precedence', () => {
      expect(show(parseFilter('(a == 1 or b == 2) and c == 3'))).to.equal(
        '(and (or (== a number:1) (== b number:2)) (== c number:3))',
      )
      expect(show(parseFilter('not (a == 1 or b == 2)'))).to.equal('(not (or (== a number:1) (== b number:2)))')
    })

    it('drops a double not and keeps an odd one', () => {
      expect(show(parseFilter('not not a == 1'))).to.equal('(== a number:1)')
      expect(show(parseFilter('not not not a == 1'))).to.equal('(not (== a number:1))')
      expect(show(parseFilter('not (not a == 1)'))).to.equal('(== a number:1)')
    })

    it('accepts keywords against parentheses without whitespace', () => {
      expect(show(parseFilter('(a == 1)and(b == 2)'))).to.equal('(and (== a number:1) (== b number:2))')
      expect(show(parseFilter('not(a == 1)'))).to.equal('(not (== a number:1))')
    })

    it('reads a long flat or chain without counting it as nesting', () => {
      const source = Array.from({ length: 200 }, (_, i) => `a == ${i}`).join(' or ')
      expect(selectorsOf(parseFilter(source))).to.have.length(200)
    })
  })

  describe('selectors', () => {
    it('walks dotted names, dotted indices, bracket indices and quoted keys', () => {
      const parsed = match('a.b.0[1]["x y"].c_d == 1')
      expect(parsed.selector.form).to.equal('path')
      expect(parsed.selector.path).to.deep.equal(['a', 'b', '0', '1', 'x y', 'c_d'])
      expect(parsed.selector.text).to.equal('a.b.0[1]["x y"].c_d')
    })

    it('allows whitespace inside index brackets', () => {
      expect(match('a[ 2 ] == 1').selector.path).to.deep.equal(['a', '2'])
    })

    it('accepts an identifier starting with an underscore', () => {
      expect(match('_a.b_1 == 1').selector.path).to.deep.equal(['_a', 'b_1'])
    })

    it('reads a double-quoted string starting with / in selector position as a JSON pointer', () => {
      const parsed = match('"/a/b~1c/~0d/0" == x')
      expect(parsed.selector.form).to.equal('pointer')
      expect(parsed.selector.path).to.deep.equal(['a', 'b/c', '~d', '0'])
    })

    it('accepts a JSON pointer after in', () => {
      const parsed = match('x in "/meta/tags"')
      expect(parsed.selector.path).to.deep.equal(['meta', 'tags'])
    })

    it('returns every selector path in source order from selectorsOf', () => {
      const expression = parseFilter('a.b == 1 and (x in c or not d[0] is empty)')
      expect(selectorsOf(expression)).to.deep.equal([['a', 'b'], ['c'], ['d', '0']])
    })

    it('records where a selector and a value start', () => {
      const parsed = match('\n  a.b ==\n "x"')
      expect(parsed.selector.position).to.deep.equal({ offset: 3, line: 2, column: 3 })
      if (parsed.operator !== '==') throw new Error('expected ==')
      expect(parsed.value.position).to.deep.equal({ offset: 11, line: 3, column: 2 })
    })
  })

  describe('values', () => {
    it('reads integers and floats, negative or not, as number literals', () => {
      expect(show(parseFilter('a == 0'))).to.equal('(== a number:0)')
      expect(show(parseFilter('a == -12.5'))).to.equal('(== a number:-12.5)')
    })

    it('decodes Go and JSON escapes in double-quoted strings', () => {
      const parsed = match('a == "q\\" b\\\\ n\\n t\\t u\\u00e9 s\\/ x\\x41 U\\U0001F600"')
      if (parsed.operator !== '==') throw new Error('expected ==')
      expect(parsed.value.form).to.equal('string')
      expect(parsed.value.text).to.equal('q" b\\ n\n t\t u\u00e9 s/ xA U\u{1F600}')
    })

    it('joins a JSON surrogate pair written as two \\u escapes', () => {
      const parsed = match('a == "\\ud83d\\ude00"')
      if (parsed.operator !== '==') throw new Error('expected ==')
      expect(parsed.value.text).to.equal('\u{1F600}')
    })

    it('takes backtick strings raw, with no escapes and across lines', () => {
      const parsed = match('a matches `^\\d+\n$`')
      if (parsed.operator !== 'matches') throw new Error('expected matches')
      expect(parsed.value.form).to.equal('raw')
      expect(parsed.value.text).to.equal('^\\d+\n$')
    })

    it('takes bare words literally, including dashes, dots, slashes and colons', () => {
      expect(show(parseFilter('Kind == service-defaults'))).to.equal('(== Kind word:service-defaults)')
      expect(show(parseFilter('x == true'))).to.equal('(== x word:true)')
      expect(show(parseFilter('x == a.b/c:d_e'))).to.equal('(== x word:a.b/c:d_e)')
    })

    it('accepts a keyword as a bare-word value', () => {
      expect(show(parseFilter('a == and and b == or'))).to.equal('(and (== a word:and) (== b word:or))')
    })
  })

  describe('errors', () => {
    it('formats the message as reason at line and column', () => {
      const error = syntaxError('a ==')
      expect(error).to.be.instanceOf(Error)
      expect(error.name).to.equal('FilterSyntaxError')
      expect(error.message).to.equal('expected a value, found end of input at line 1, column 5')
    })

    it('rejects an empty or whitespace-only expression', () => {
      expectError('', 'empty expression', 1, 1, 0)
      expectError('  \n\t ', 'empty expression', 1, 1, 0)
    })

    it('reports an unclosed parenthesis at the parenthesis', () => {
      expectError('a == 1 and (b == 2', 'Unmatched parentheses', 1, 12, 11)
      expectError('((a == 1)', 'Unmatched parentheses', 1, 1, 0)
    })

    it('reports a stray closing parenthesis where it stands', () => {
      expectError('a == 1)', 'Unmatched parentheses', 1, 7, 6)
    })

    it('rejects a selector that is not an identifier path', () => {
      expectError('a-b == 1', 'Invalid selector', 1, 1, 0)
      expectError('1a == 1', 'Invalid selector', 1, 1, 0)
      expectError('a.b-c == 1', 'Invalid selector', 1, 3, 2)
      expectError('a..b == 1', 'Invalid selector', 1, 3, 2)
      expectError('`raw` == 1', 'Invalid selector', 1, 1, 0)
    })

    it('rejects a non-selector after in, including a string not starting with /', () => {
      expectError('x in "abc"', 'Invalid selector', 1, 6, 5)
      expectError('x not in 5', 'Invalid selector', 1, 10, 9)
      expectError('x in (a)', 'Invalid selector', 1, 6, 5)
    })

    it('rejects a malformed JSON pointer escape', () => {
      expectError('"/a~2" == 1', 'Invalid selector', 1, 1, 0)
    })

    it('rejects a word that starts like a number but is not one', () => {
      expectError('a == 1x', 'Invalid number literal', 1, 6, 5)
      expectError('a == 01', 'Invalid number literal', 1, 6, 5)
      expectError('a == 1.2.3', 'Invalid number literal', 1, 6, 5)
      expectError('a == -1.', 'Invalid number literal', 1, 6, 5)
      expectError('1x in a', 'Invalid number literal', 1, 1, 0)
    })

    it('reports an unterminated string at its opening quote', () => {
      expectError('a == "abc', 'Unterminated string literal', 1, 6, 5)
      expectError('a == `abc', 'Unterminated string literal', 1, 6, 5)
      expectError('a == "ab\\"', 'Unterminated string literal', 1, 6, 5)
      expectError('a == "ab\ncd"', 'Unterminated string literal', 1, 6, 5)
    })

    it('reports an unknown escape at its backslash', () => {
      expectError('a == "ab\\qc"', 'Invalid escape sequence', 1, 9, 8)
      expectError('a == "\\u12"', 'Invalid escape sequence', 1, 7, 6)
    })

    it('rejects an index that is not a plain non-negative integer or string', () => {
      expectError('a[x] == 1', 'Invalid index', 1, 3, 2)
      expectError('a[-1] == 1', 'Invalid index', 1, 3, 2)
      expectError('a[01] == 1', 'Invalid index', 1, 3, 2)
      expectError('a[] == 1', 'Invalid index', 1, 3, 2)
      expectError('a.01 == 1', 'Invalid index', 1, 3, 2)
    })

    it('rejects an index bracket that is not closed', () => {
      expectError('a[0 == 1', "expected ']', found '=='", 1, 5, 4)
    })

    it('rejects an invalid regular expression at the value', () => {
      const error = syntaxError('a matches "(ab"')
      expect(error.reason).to.match(/^Invalid regular expression: /)
      expect(error.position).to.deep.equal({ offset: 10, line: 1, column: 11 })
      expectError('a not matches `[z-a]`', 'Invalid regular expression: Range out of order in character class', 1, 15, 14)
    })

    it('requires whitespace around keywords', () => {
      expectError('a == "x"and b == 1', "expected whitespace before 'and'", 1, 9, 8)
      expectError('a contains"x"', "expected whitespace after 'contains'", 1, 11, 10)
      expectError('a[0]is empty', "expected whitespace before 'is'", 1, 5, 4)
    })

    it('treats upper-case keywords as plain words', () => {
      expectError('a == 1 AND b == 2', "expected 'and', 'or' or end of input, found 'AND'", 1, 8, 7)
    })

    it('names what was expected and what was found', () => {
      expectError('a', 'expected an operator (==, !=, is, contains, matches), found end of input', 1, 2, 1)
      expectError('a = 1', "expected a word, string, operator or parenthesis, found '='", 1, 3, 2)
      expectError('a == 1 b == 2', "expected 'and', 'or' or end of input, found 'b'", 1, 8, 7)
      expectError('(a == 1 b)', "expected 'and', 'or' or ')', found 'b'", 1, 9, 8)
      expectError('()', "expected a selector or value, found ')'", 1, 2, 1)
      expectError('a is full', "expected 'empty' or 'not empty' after 'is', found 'full'", 1, 6, 5)
      expectError('a is not full', "expected 'empty' or 'not empty' after 'is', found 'full'", 1, 10, 9)
      expectError('a not equals b', "expected 'contains' or 'matches' after 'not', found 'equals'", 1, 7, 6)
      expectError('a == 1 and', 'expected a selector or value, found end of input', 1, 11, 10)
      expectError('a == (', "expected a value, found '('", 1, 6, 5)
    })

    it('counts lines and columns across a multi-line source', () => {
      expectError('a == 1 and\n  b == 2 or\n    c == 1x', 'Invalid number literal', 3, 10, 32)
      expectError('(a == 1\n and\r\n b == 2', 'Unmatched parentheses', 1, 1, 0)
      expectError('a == 1\r\n\r\n  ) ', 'Unmatched parentheses', 3, 3, 12)
    })
  })

  describe('bounds', () => {
    it(`accepts ${MAX_NESTING_DEPTH} nested parentheses and rejects one more`, () => {
      const nested = (depth: number): string => `${'('.repeat(depth)}a == 1${')'.repeat(depth)}`
      expect(show(parseFilter(nested(MAX_NESTING_DEPTH)))).to.equal('(== a number:1)')
      expectError(nested(MAX_NESTING_DEPTH + 1), `nesting deeper than ${MAX_NESTING_DEPTH} levels`, 1, 33, 32)
    })

    it('counts not towards the nesting depth', () => {
      const nots = (count: number): string => `${'not '.repeat(count)}a == 1`
      expect(show(parseFilter(nots(MAX_NESTING_DEPTH)))).to.equal('(== a number:1)')
      expectError(nots(MAX_NESTING_DEPTH + 1), `nesting deeper than ${MAX_NESTING_DEPTH} levels`, 1, 129, 128)
    })

    it('rejects deep nesting far past the bound without overflowing the stack', () => {
      expectError(`${'('.repeat(4000)}a == 1`, `nesting deeper than ${MAX_NESTING_DEPTH} levels`, 1, 33, 32)
    })

    it(`accepts a source of ${MAX_SOURCE_LENGTH} characters and rejects a longer one`, () => {
      const value = (length: number): string => `a == "${'x'.repeat(length - 7)}"`
      expect(value(MAX_SOURCE_LENGTH)).to.have.length(MAX_SOURCE_LENGTH)
      expect(match(value(MAX_SOURCE_LENGTH)).operator).to.equal('==')
      expectError(value(MAX_SOURCE_LENGTH + 1), `expression longer than ${MAX_SOURCE_LENGTH} characters`, 1, 4097, 4096)
    })
  })
})
