/**
 * Golden scripts for the command line, in the manner of etcd-io/raft's datadriven tests: a file holds commands
 * (`$ acl token create -policy-name web`) each followed by what it printed (`exit N`, standard output, and standard
 * error after `--- stderr`). Run with REWRITE=1 to write what the commands print now; review the diff before
 * committing it.
 *
 * What changes from run to run is normalised: UUIDs (other than the built-in 00000000-… ones) become <uuid-N> in
 * order of first appearance, times <time>, hashes <hash>, Raft indexes <index>, loopback addresses <addr>.
 * Directives after a command line:
 *   > stdin TEXT          standard input for the command (\n for newlines)
 *   > file NAME TEXT      writes TEXT to NAME in the script's temp dir before the command; {{dir}} names that dir
 *   > capture VAR FIELD   after the command, VAR is the first `FIELD: value` of its output (or JSON key FIELD)
 *   > mode NAME OCTAL     after the command, the file NAME in the temp dir has these permission bits
 * Commands use {{VAR}} for captured values.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface Block {
  /** Comment lines (`## ...`) before the command, kept on rewrite. */
  comments: string[]
  command: string
  directives: string[]
  expected: string
}

export function parseScript(text: string): Block[] {
  const blocks: Block[] = []
  let comments: string[] = []
  let current: Block | undefined
  const body: string[] = []
  const finish = (): void => {
    if (current === undefined) return
    current.expected = body.join('\n').trim()
    blocks.push(current)
    body.length = 0
    current = undefined
  }
  for (const line of text.split('\n')) {
    if (line.startsWith('## ')) {
      finish()
      comments.push(line)
    } else if (line.startsWith('$ ')) {
      finish()
      current = { comments, command: line.slice(2), directives: [], expected: '' }
      comments = []
    } else if (current !== undefined && line.startsWith('> ') && body.length === 0) {
      current.directives.push(line.slice(2))
    } else if (current !== undefined) {
      body.push(line)
    }
  }
  finish()
  return blocks
}

export function renderScript(blocks: Array<Block & { actual: string }>): string {
  return blocks
    .map((block) => [...block.comments, `$ ${block.command}`, ...block.directives.map((item) => `> ${item}`), block.actual].join('\n'))
    .join('\n\n')
    .concat('\n')
}

/** Splits a command line as a shell would: single quotes literal, double quotes with backslash escapes. */
export function splitWords(line: string): string[] {
  const words: string[] = []
  let word = ''
  let started = false
  for (let at = 0; at < line.length; at += 1) {
    const char = line[at]!
    if (char === "'") {
      const end = line.indexOf("'", at + 1)
      if (end === -1) throw new Error(`unclosed ' in: ${line}`)
      word += line.slice(at + 1, end)
      at = end
      started = true
    } else if (char === '"') {
      at += 1
      while (at < line.length && line[at] !== '"') {
        if (line[at] === '\\' && at + 1 < line.length) at += 1
        word += line[at]
        at += 1
      }
      if (at >= line.length) throw new Error(`unclosed " in: ${line}`)
      started = true
    } else if (char === ' ' || char === '\t') {
      if (started) words.push(word)
      word = ''
      started = false
    } else {
      word += char
      started = true
    }
  }
  if (started) words.push(word)
  return words
}

const UUID = /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi

/** Replaces what differs between runs; one instance per script, so <uuid-N> numbers are stable within it. */
export class Normaliser {
  private readonly uuids = new Map<string, string>()

  /** `dir`: the script's temp dir, printed back as {{dir}}. */
  constructor(private readonly dir: string) {}

  normalise(text: string): string {
    return text
      .split(this.dir)
      .join('{{dir}}')
      .replace(UUID, (uuid) => {
        if (uuid.startsWith('00000000-0000-0000-0000-')) return uuid
        let name = this.uuids.get(uuid.toLowerCase())
        if (name === undefined) {
          name = `<uuid-${this.uuids.size + 1}>`
          this.uuids.set(uuid.toLowerCase(), name)
        }
        return name
      })
      .replace(/\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)? \+0000 UTC/g, '<time>')
      .replace(/"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})"/g, '"<time>"')
      .replace(/\b[0-9a-f]{64}\b/g, '<hash>')
      .replace(/"Hash": "[A-Za-z0-9+/=]+"/g, '"Hash": "<hash>"')
      .replace(/((?:Create|Modify) Index:\s+)\d+/g, '$1<index>')
      .replace(/("(?:Create|Modify)Index": )\d+/g, '$1<index>')
      .replace(/(modify-index |index )\d+/g, '$1<index>')
      .replace(/127\.0\.0\.1:\d+/g, '<addr>')
  }
}

/** The value of FIELD in a command's output: a `FIELD:  value` line, or a key of its JSON. */
export function capture(stdout: string, field: string): string {
  const line = new RegExp(`^\\s*${field.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\s+(\\S+)`, 'm').exec(stdout)
  if (line !== null) return line[1]!
  try {
    const value = (JSON.parse(stdout) as Record<string, unknown>)[field]
    if (typeof value === 'string' || typeof value === 'number') return String(value)
  } catch {
    // Not JSON either: reported below.
  }
  throw new Error(`capture: no "${field}" in the output:\n${stdout}`)
}

/** Applies `> file` directives and returns the command's stdin and captures. */
export function prepare(directives: string[], dir: string): { stdin: string; captures: Array<[string, string]>; modes: Array<[string, number]> } {
  let stdin = ''
  const captures: Array<[string, string]> = []
  const modes: Array<[string, number]> = []
  for (const directive of directives) {
    const [verb, ...rest] = directive.split(' ')
    // Backslash-n is a newline and a doubled backslash one backslash, so a JSON escape is written with two.
    const unescape = (text: string): string => text.replace(/\\(\\|n)/g, (_whole, char: string) => (char === 'n' ? '\n' : '\\'))
    if (verb === 'stdin') stdin = unescape(rest.join(' '))
    else if (verb === 'file') {
      mkdirSync(dir, { recursive: true })
      writeFileSync(join(dir, rest[0]!), unescape(rest.slice(1).join(' ')))
    } else if (verb === 'capture') captures.push([rest[0]!, rest[1]!])
    else if (verb === 'mode') modes.push([join(dir, rest[0]!), parseInt(rest[1]!, 8)])
    else throw new Error(`unknown directive: > ${directive}`)
  }
  return { stdin, captures, modes }
}

export function substitute(command: string, variables: Map<string, string>): string {
  return command.replace(/\{\{(\w+)\}\}/g, (whole, name: string) => {
    const value = variables.get(name)
    if (value === undefined) throw new Error(`no variable {{${name}}} captured before: ${command}`)
    return value
  })
}
