/**
 * The tokenizer of the filter expression language (HashiCorp go-bexpr's grammar, as Consul uses it for `?filter=`
 * and binding-rule selectors). It splits the source into bare words, quoted strings, brackets, parentheses and the
 * two symbolic operators; keywords such as `and` or `is` are plain words here, because whether a word is a keyword
 * depends on where it stands, and only the parser knows that.
 */

export interface SourcePosition {
  /** 0-based offset into the source, in UTF-16 code units. */
  offset: number
  /** 1-based line; only `\n` starts a new line. */
  line: number
  /** 1-based column, in UTF-16 code units. */
  column: number
}

/** A filter expression that cannot be parsed. The message reads `<reason> at line L, column C`. */
export class FilterSyntaxError extends Error {
  override readonly name = 'FilterSyntaxError'
  constructor(
    readonly reason: string,
    readonly position: SourcePosition,
  ) {
    super(`${reason} at line ${position.line}, column ${position.column}`)
  }
}

export type TokenKind = 'word' | 'string' | 'raw' | '(' | ')' | '[' | ']' | '==' | '!=' | 'eof'

export interface Token {
  readonly kind: TokenKind
  /** The token exactly as written in the source. */
  readonly text: string
  /** What the token means: the decoded contents of a string, the text of anything else. */
  readonly value: string
  readonly offset: number
  /** Whether whitespace separates this token from the previous one; keywords and index brackets depend on it. */
  readonly spaceBefore: boolean
}

export function positionAt(source: string, offset: number): SourcePosition {
  let line = 1
  let lineStart = 0
  for (let i = source.indexOf('\n'); i !== -1 && i < offset; i = source.indexOf('\n', i + 1)) {
    line += 1
    lineStart = i + 1
  }
  return { offset, line, column: offset - lineStart + 1 }
}

export function syntaxError(source: string, offset: number, reason: string): FilterSyntaxError {
  return new FilterSyntaxError(reason, positionAt(source, offset))
}

/** How a token is named in "expected X, found Y" messages. */
export function describeToken(token: Token): string {
  switch (token.kind) {
    case 'eof':
      return 'end of input'
    case 'string':
    case 'raw':
      // A long string literal would drown the message, so only its start is quoted.
      return `string ${token.text.length > 40 ? `${token.text.slice(0, 37)}...` : token.text}`
    case 'word':
      return `'${token.text.length > 40 ? `${token.text.slice(0, 37)}...` : token.text}'`
    default:
      return `'${token.kind}'`
  }
}

const WHITESPACE = new Set([' ', '\t', '\r', '\n'])
const WORD_CHARACTER = /[A-Za-z0-9_./:-]/

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  "'": "'",
  '\\': '\\',
  '/': '/',
  a: '\x07',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
}

const HEX_ESCAPE_LENGTH: Readonly<Record<string, number>> = { x: 2, u: 4, U: 8 }

export function tokenize(source: string): Token[] {
  const tokens: Token[] = []
  let i = 0
  while (true) {
    const whitespaceStart = i
    while (i < source.length && WHITESPACE.has(source[i] ?? '')) i += 1
    const spaceBefore = i > whitespaceStart
    const start = i
    const c = source[i]
    if (c === undefined) {
      tokens.push({ kind: 'eof', text: '', value: '', offset: start, spaceBefore })
      return tokens
    }
    const push = (kind: TokenKind, end: number, value = source.slice(start, end)): void => {
      tokens.push({ kind, text: source.slice(start, end), value, offset: start, spaceBefore })
      i = end
    }
    if (c === '(' || c === ')' || c === '[' || c === ']') {
      push(c, i + 1)
    } else if ((c === '=' || c === '!') && source[i + 1] === '=') {
      push(c === '=' ? '==' : '!=', i + 2)
    } else if (c === '"') {
      const { end, value } = scanQuoted(source, start)
      push('string', end, value)
    } else if (c === '`') {
      // Raw strings take every character up to the next backtick, newlines included, as Go's do.
      const close = source.indexOf('`', start + 1)
      if (close === -1) throw syntaxError(source, start, 'Unterminated string literal')
      push('raw', close + 1, source.slice(start + 1, close))
    } else if (WORD_CHARACTER.test(c)) {
      let end = i + 1
      while (end < source.length && WORD_CHARACTER.test(source[end] ?? '')) end += 1
      push('word', end)
    } else {
      const shown = String.fromCodePoint(source.codePointAt(i) ?? 0)
      throw syntaxError(source, start, `expected a word, string, operator or parenthesis, found '${shown}'`)
    }
  }
}

/** Scans a double-quoted string with Go and JSON escapes. A line break before the closing quote ends it unterminated. */
function scanQuoted(source: string, start: number): { end: number; value: string } {
  let value = ''
  let i = start + 1
  while (true) {
    const c = source[i]
    if (c === undefined || c === '\n') throw syntaxError(source, start, 'Unterminated string literal')
    if (c === '"') return { end: i + 1, value }
    if (c !== '\\') {
      value += c
      i += 1
      continue
    }
    const escape = source[i + 1]
    if (escape === undefined) throw syntaxError(source, start, 'Unterminated string literal')
    const simple = SIMPLE_ESCAPES[escape]
    if (simple !== undefined) {
      value += simple
      i += 2
      continue
    }
    const length = HEX_ESCAPE_LENGTH[escape]
    const digits = length === undefined ? '' : source.slice(i + 2, i + 2 + length)
    if (length === undefined || !new RegExp(`^[0-9A-Fa-f]{${length}}$`).test(digits)) {
      throw syntaxError(source, i, `Invalid escape sequence`)
    }
    const code = Number.parseInt(digits, 16)
    if (escape === 'U' && (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))) {
      throw syntaxError(source, i, `Invalid escape sequence`)
    }
    // \uXXXX adds one UTF-16 unit, so a JSON surrogate pair written as two escapes joins into one character.
    value += escape === 'U' ? String.fromCodePoint(code) : String.fromCharCode(code)
    i += 2 + length
  }
}
