/**
 * The JSON form of ACL rules, which Consul accepts because its HCL v1 decoder also reads JSON. Three shapes occur:
 *
 *   {"acl": "write", "service": {"web": {"policy": "read"}}}
 *   {"service": [{"web": [{"policy": "read"}]}]}
 *   {"service": [{"web": {"policy": "read"}}]}
 *
 * JSON.parse cannot report where an error is, so this file has its own small scanner and parser that keep the line
 * and column of every value and key, and keep duplicate keys (a duplicate is an error, found later with its position).
 * The parse tree is then flattened into the same `RuleItem`s the HCL parser produces.
 */
import {
  keywordShape,
  RulesSyntaxError,
  type Located,
  type Position,
  type RuleAttribute,
  type RuleItem,
} from './policy-rules.js'
import { readQuotedString, SourceCursor } from './tokenizer.js'

interface JsonEntry {
  readonly key: Located<string>
  readonly value: JsonValue
}

type JsonValue =
  | { readonly kind: 'object'; readonly entries: readonly JsonEntry[]; readonly at: Position }
  | { readonly kind: 'array'; readonly items: readonly JsonValue[]; readonly at: Position }
  | { readonly kind: 'string'; readonly value: string; readonly at: Position }
  | { readonly kind: 'scalar'; readonly text: string; readonly at: Position }

/** Valid rules never nest deeper than six levels; the bound keeps hostile input from exhausting the stack. */
const NESTING_DEPTH_MAX = 32

export function parseJsonItems(text: string): RuleItem[] {
  const cursor = new SourceCursor(text)
  const root = parseValue(cursor, 0)
  skipWhitespace(cursor)
  if (!cursor.atEnd) throw unexpectedAt(cursor)
  if (root.kind !== 'object') throw new RulesSyntaxError('expected an object', root.at)
  const items: RuleItem[] = []
  for (const entry of root.entries) collectRuleItems(entry, items)
  return items
}

/** A plain keyword takes a string; a labelled one takes an object (or array of objects) of labelled blocks. */
function collectRuleItems(entry: JsonEntry, items: RuleItem[]): void {
  const keyword = entry.key
  const value = entry.value
  const spelled = keyword.value.toLowerCase()
  if (keywordShape(keyword) === 'plain') {
    if (value.kind !== 'string') throw new RulesSyntaxError(`expected a string for ${spelled}`, value.at)
    items.push({ kind: 'plain', keyword, value: { value: value.value, at: value.at } })
    return
  }
  if (value.kind !== 'object' && value.kind !== 'array') {
    throw new RulesSyntaxError(`expected an object for ${spelled}`, value.at)
  }
  for (const labels of objectsOf(value)) {
    for (const labelEntry of labels.entries) {
      for (const block of objectsOf(labelEntry.value)) {
        items.push({ kind: 'block', keyword, label: labelEntry.key, attributes: attributesOf(block) })
      }
    }
  }
}

/** HCL v1's JSON reading lets an array of objects stand where an object is expected. */
function objectsOf(value: JsonValue): Array<Extract<JsonValue, { kind: 'object' }>> {
  if (value.kind === 'object') return [value]
  if (value.kind !== 'array') throw new RulesSyntaxError('expected an object', value.at)
  return value.items.map((item) => {
    if (item.kind !== 'object') throw new RulesSyntaxError('expected an object', item.at)
    return item
  })
}

function attributesOf(block: Extract<JsonValue, { kind: 'object' }>): RuleAttribute[] {
  return block.entries.map((entry) => {
    if (entry.value.kind !== 'string') throw new RulesSyntaxError('expected a string', entry.value.at)
    return { name: entry.key, value: { value: entry.value.value, at: entry.value.at } }
  })
}

function parseValue(cursor: SourceCursor, depth: number): JsonValue {
  skipWhitespace(cursor)
  const at = cursor.position()
  const char = cursor.peek()
  if (char === '{' || char === '[') {
    if (depth >= NESTING_DEPTH_MAX) throw new RulesSyntaxError('nesting too deep', at)
    return char === '{' ? parseObject(cursor, depth + 1) : parseArray(cursor, depth + 1)
  }
  if (char === '"') return { kind: 'string', value: readQuotedString(cursor, 'json'), at }
  if (char === '-' || (char >= '0' && char <= '9')) return { kind: 'scalar', text: readNumber(cursor), at }
  for (const literal of ['true', 'false', 'null']) {
    if (matchesAhead(cursor, literal)) {
      for (let index = 0; index < literal.length; index++) cursor.advance()
      return { kind: 'scalar', text: literal, at }
    }
  }
  throw unexpectedAt(cursor)
}

function parseObject(cursor: SourceCursor, depth: number): JsonValue {
  const at = cursor.position()
  cursor.advance()
  const entries: JsonEntry[] = []
  skipWhitespace(cursor)
  if (cursor.peek() === '}') {
    cursor.advance()
    return { kind: 'object', entries, at }
  }
  for (;;) {
    skipWhitespace(cursor)
    const keyAt = cursor.position()
    if (cursor.peek() !== '"') throw expected(cursor, 'expected a quoted key')
    const key = readQuotedString(cursor, 'json')
    skipWhitespace(cursor)
    if (cursor.peek() !== ':') throw expected(cursor, 'expected ":"')
    cursor.advance()
    entries.push({ key: { value: key, at: keyAt }, value: parseValue(cursor, depth) })
    skipWhitespace(cursor)
    const separator = cursor.peek()
    if (separator === '}') {
      cursor.advance()
      return { kind: 'object', entries, at }
    }
    if (separator !== ',') throw expected(cursor, 'expected "," or "}"')
    cursor.advance()
  }
}

function parseArray(cursor: SourceCursor, depth: number): JsonValue {
  const at = cursor.position()
  cursor.advance()
  const items: JsonValue[] = []
  skipWhitespace(cursor)
  if (cursor.peek() === ']') {
    cursor.advance()
    return { kind: 'array', items, at }
  }
  for (;;) {
    items.push(parseValue(cursor, depth))
    skipWhitespace(cursor)
    const separator = cursor.peek()
    if (separator === ']') {
      cursor.advance()
      return { kind: 'array', items, at }
    }
    if (separator !== ',') throw expected(cursor, 'expected "," or "]"')
    cursor.advance()
  }
}

/** Reads a number in RFC 8259 syntax; numbers mean nothing in rules but must still be scanned to report well. */
function readNumber(cursor: SourceCursor): string {
  const at = cursor.position()
  let text = ''
  const digits = (): void => {
    const before = text.length
    while (cursor.peek() >= '0' && cursor.peek() <= '9') text += cursor.advance()
    if (text.length === before) throw new RulesSyntaxError('invalid number', at)
  }
  if (cursor.peek() === '-') text += cursor.advance()
  digits()
  if (cursor.peek() === '.') {
    text += cursor.advance()
    digits()
  }
  if (cursor.peek() === 'e' || cursor.peek() === 'E') {
    text += cursor.advance()
    if (cursor.peek() === '+' || cursor.peek() === '-') text += cursor.advance()
    digits()
  }
  return text
}

function matchesAhead(cursor: SourceCursor, word: string): boolean {
  for (let index = 0; index < word.length; index++) {
    if (cursor.peek(index) !== word[index]) return false
  }
  return true
}

function skipWhitespace(cursor: SourceCursor): void {
  for (;;) {
    const char = cursor.peek()
    if (char !== ' ' && char !== '\t' && char !== '\n' && char !== '\r' && char !== '\uFEFF') return
    cursor.advance()
  }
}

function expected(cursor: SourceCursor, reason: string): RulesSyntaxError {
  return new RulesSyntaxError(cursor.atEnd ? 'unexpected end of input' : reason, cursor.position())
}

function unexpectedAt(cursor: SourceCursor): RulesSyntaxError {
  if (cursor.atEnd) return new RulesSyntaxError('unexpected end of input', cursor.position())
  const at = cursor.position()
  return new RulesSyntaxError(`unexpected character ${JSON.stringify(cursor.advance())}`, at)
}
