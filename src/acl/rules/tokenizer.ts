/**
 * The character level of the rules language: a cursor that tracks line and column, quoted strings for both HCL and
 * JSON, and the HCL v1 tokenizer. Everything here is strict: a character the rules language has no use for is an
 * error at its own position, never skipped.
 */
import { RulesSyntaxError, type Position } from './policy-rules.js'

/** Walks a text one code point at a time, keeping the 1-based line and column of the next character. */
export class SourceCursor {
  private offset = 0
  private line = 1
  private column = 1

  constructor(private readonly text: string) {}

  get atEnd(): boolean {
    return this.offset >= this.text.length
  }

  /** The code unit `ahead` places on, or '' past the end. Every character the grammar looks at is in the BMP. */
  peek(ahead = 0): string {
    return this.text.charAt(this.offset + ahead)
  }

  position(): Position {
    return { line: this.line, column: this.column }
  }

  /** Consumes one code point (a surrogate pair counts once, so columns match what an editor shows). */
  advance(): string {
    const code = this.text.charCodeAt(this.offset)
    let width = 1
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = this.text.charCodeAt(this.offset + 1)
      if (next >= 0xdc00 && next <= 0xdfff) width = 2
    }
    const consumed = this.text.slice(this.offset, this.offset + width)
    this.offset += width
    if (consumed === '\n') {
      this.line += 1
      this.column = 1
    } else {
      this.column += 1
    }
    return consumed
  }
}

export type QuoteDialect = 'hcl' | 'json'

/**
 * Reads a double-quoted string starting at the opening quote and returns its value. HCL v1 takes Go's escapes
 * (\a \b \f \n \r \t \v \\ \" and octal, \x, \u, \U); JSON takes its own smaller set. Neither allows a raw newline,
 * and JSON also refuses other raw control characters.
 */
export function readQuotedString(cursor: SourceCursor, dialect: QuoteDialect): string {
  const start = cursor.position()
  cursor.advance()
  let value = ''
  for (;;) {
    if (cursor.atEnd) throw new RulesSyntaxError('unterminated string', start)
    const char = cursor.peek()
    if (char === '"') {
      cursor.advance()
      return value
    }
    if (char === '\n' || char === '\r') throw new RulesSyntaxError('unterminated string', start)
    if (char === '\\') {
      value += readEscape(cursor, dialect)
      continue
    }
    if (dialect === 'json' && char.charCodeAt(0) < 0x20) {
      throw new RulesSyntaxError('control character in string', cursor.position())
    }
    value += cursor.advance()
  }
}

const HCL_SIMPLE_ESCAPES: ReadonlyMap<string, string> = new Map([
  ['a', '\x07'],
  ['b', '\b'],
  ['f', '\f'],
  ['n', '\n'],
  ['r', '\r'],
  ['t', '\t'],
  ['v', '\v'],
  ['\\', '\\'],
  ['"', '"'],
])

const JSON_SIMPLE_ESCAPES: ReadonlyMap<string, string> = new Map([
  ['b', '\b'],
  ['f', '\f'],
  ['n', '\n'],
  ['r', '\r'],
  ['t', '\t'],
  ['/', '/'],
  ['\\', '\\'],
  ['"', '"'],
])

function readEscape(cursor: SourceCursor, dialect: QuoteDialect): string {
  const at = cursor.position()
  cursor.advance()
  const kind = cursor.peek()
  const invalid = (): RulesSyntaxError => new RulesSyntaxError(`invalid escape sequence "\\${kind}"`, at)
  if (kind === '' || kind === '\n' || kind === '\r') throw new RulesSyntaxError('unterminated string', at)
  const simple = (dialect === 'hcl' ? HCL_SIMPLE_ESCAPES : JSON_SIMPLE_ESCAPES).get(kind)
  if (simple !== undefined) {
    cursor.advance()
    return simple
  }
  if (kind === 'u') return codePointEscape(cursor, 4, 16, invalid)
  if (dialect === 'json') throw invalid()
  if (kind === 'U') return codePointEscape(cursor, 8, 16, invalid)
  if (kind === 'x') return codePointEscape(cursor, 2, 16, invalid)
  if (kind >= '0' && kind <= '7') return codePointEscape(cursor, 3, 8, invalid, false)
  throw invalid()
}

/** Reads `digits` digits in `radix` after the escape letter (or, for octal, starting at the first digit). */
function codePointEscape(
  cursor: SourceCursor,
  digits: number,
  radix: number,
  invalid: () => RulesSyntaxError,
  skipLetter = true,
): string {
  if (skipLetter) cursor.advance()
  let text = ''
  for (let index = 0; index < digits; index++) {
    const char = cursor.peek()
    if (char === '' || Number.isNaN(Number.parseInt(char, radix))) throw invalid()
    text += cursor.advance()
  }
  const codePoint = Number.parseInt(text, radix)
  if (codePoint > 0x10ffff || (radix === 8 && codePoint > 0xff)) throw invalid()
  return String.fromCodePoint(codePoint)
}

export type TokenKind = 'ident' | 'string' | 'number' | 'punct' | 'eof'

export interface Token {
  readonly kind: TokenKind
  /** The decoded value for strings, the source text otherwise ('' at the end of input). */
  readonly text: string
  readonly at: Position
}

const PUNCTUATION = new Set(['{', '}', '=', ',', '[', ']'])

/** Splits HCL text into tokens, dropping whitespace and `#`, `//` and `/* *\/` comments. Ends with one eof token. */
export function tokenizeHcl(text: string): Token[] {
  const cursor = new SourceCursor(text)
  const tokens: Token[] = []
  for (;;) {
    skipSpaceAndComments(cursor)
    const at = cursor.position()
    if (cursor.atEnd) {
      tokens.push({ kind: 'eof', text: '', at })
      return tokens
    }
    const char = cursor.peek()
    if (char === '"') {
      tokens.push({ kind: 'string', text: readQuotedString(cursor, 'hcl'), at })
    } else if (PUNCTUATION.has(char)) {
      tokens.push({ kind: 'punct', text: cursor.advance(), at })
    } else if (isIdentStart(char)) {
      tokens.push({ kind: 'ident', text: readWhile(cursor, isIdentPart), at })
    } else if (isDigit(char)) {
      // Numbers have no meaning in rules; they are tokens only so that the error can say a string was expected.
      tokens.push({ kind: 'number', text: readWhile(cursor, isIdentPart), at })
    } else {
      throw new RulesSyntaxError(`unexpected character ${JSON.stringify(cursor.advance())}`, at)
    }
  }
}

function skipSpaceAndComments(cursor: SourceCursor): void {
  for (;;) {
    const char = cursor.peek()
    if (char === ' ' || char === '\t' || char === '\n' || char === '\r' || char === '\uFEFF') {
      cursor.advance()
    } else if (char === '#' || (char === '/' && cursor.peek(1) === '/')) {
      while (!cursor.atEnd && cursor.peek() !== '\n') cursor.advance()
    } else if (char === '/' && cursor.peek(1) === '*') {
      const start = cursor.position()
      cursor.advance()
      cursor.advance()
      while (!(cursor.peek() === '*' && cursor.peek(1) === '/')) {
        if (cursor.atEnd) throw new RulesSyntaxError('unterminated comment', start)
        cursor.advance()
      }
      cursor.advance()
      cursor.advance()
    } else {
      return
    }
  }
}

function readWhile(cursor: SourceCursor, accept: (char: string) => boolean): string {
  let text = ''
  while (!cursor.atEnd && accept(cursor.peek())) text += cursor.advance()
  return text
}

function isDigit(char: string): boolean {
  return char >= '0' && char <= '9'
}

/** HCL v1 identifiers start with a letter or underscore and go on with letters, digits, `_`, `-` and `.`. */
function isIdentStart(char: string): boolean {
  return (char >= 'a' && char <= 'z') || (char >= 'A' && char <= 'Z') || char === '_' || /^\p{L}$/u.test(char)
}

function isIdentPart(char: string): boolean {
  return isIdentStart(char) || isDigit(char) || char === '-' || char === '.'
}
