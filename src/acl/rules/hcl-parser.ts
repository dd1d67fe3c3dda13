/**
 * A recursive-descent parser for the subset of HCL v1 that ACL rules use:
 *
 *   body      := { item [","] }
 *   item      := key ( "=" STRING | label [ "=" ] "{" block "}" | "{" block "}" )
 *   block     := { key "=" STRING [","] }
 *   key       := IDENT | STRING
 *   label     := STRING | IDENT
 *
 * It checks syntax only and yields `RuleItem`s; what the keywords and attributes mean is decided in policy-rules.ts.
 * Blocks do not nest, so the recursion depth is fixed whatever the input.
 */
import { assert } from '../../lib/assert.js'
import { keywordShape, RulesSyntaxError, type Located, type RuleAttribute, type RuleItem } from './policy-rules.js'
import { tokenizeHcl, type Token } from './tokenizer.js'

export function parseHclItems(text: string): RuleItem[] {
  const parser = new HclParser(tokenizeHcl(text))
  return parser.parseBody()
}

class HclParser {
  private index = 0

  constructor(private readonly tokens: readonly Token[]) {}

  parseBody(): RuleItem[] {
    const items: RuleItem[] = []
    while (this.peek().kind !== 'eof') {
      items.push(this.parseItem())
      this.skipComma()
    }
    return items
  }

  private parseItem(): RuleItem {
    const keyword = this.expectKey('a rule keyword')
    keywordShape(keyword)
    const next = this.peek()
    if (isPunct(next, '=')) {
      this.index += 1
      return { kind: 'plain', keyword, value: this.expectString() }
    }
    if (isPunct(next, '{')) {
      return { kind: 'block', keyword, label: undefined, attributes: this.parseBlock() }
    }
    if (next.kind !== 'string' && next.kind !== 'ident') throw this.unexpected(next, 'expected "=" or "{"')
    this.index += 1
    const label: Located<string> = { value: next.text, at: next.at }
    // HCL v1 accepts `service "web" = { ... }` as well as the usual form without "=".
    if (isPunct(this.peek(), '=')) this.index += 1
    if (!isPunct(this.peek(), '{')) throw this.unexpected(this.peek(), 'expected "=" or "{"')
    return { kind: 'block', keyword, label, attributes: this.parseBlock() }
  }

  private parseBlock(): RuleAttribute[] {
    this.index += 1
    const attributes: RuleAttribute[] = []
    while (!isPunct(this.peek(), '}')) {
      const name = this.expectKey('an attribute name or "}"')
      const equals = this.peek()
      if (!isPunct(equals, '=')) throw this.unexpected(equals, 'expected "="')
      this.index += 1
      attributes.push({ name, value: this.expectString() })
      this.skipComma()
    }
    this.index += 1
    return attributes
  }

  private expectKey(what: string): Located<string> {
    const token = this.peek()
    if (token.kind !== 'ident' && token.kind !== 'string') throw this.unexpected(token, `expected ${what}`)
    this.index += 1
    return { value: token.text, at: token.at }
  }

  private expectString(): Located<string> {
    const token = this.peek()
    if (token.kind !== 'string') throw this.unexpected(token, 'expected a string')
    this.index += 1
    return { value: token.text, at: token.at }
  }

  private skipComma(): void {
    if (isPunct(this.peek(), ',')) this.index += 1
  }

  private peek(): Token {
    // The tokenizer always ends with an eof token and the parser never moves past it.
    const token = this.tokens[Math.min(this.index, this.tokens.length - 1)]
    assert(token !== undefined, 'the tokenizer returned no eof token')
    return token
  }

  /** At the end of input every expectation fails the same way, so say so rather than list what was expected. */
  private unexpected(token: Token, reason: string): RulesSyntaxError {
    return new RulesSyntaxError(token.kind === 'eof' ? 'unexpected end of input' : reason, token.at)
  }
}

function isPunct(token: Token, text: string): boolean {
  return token.kind === 'punct' && token.text === text
}
