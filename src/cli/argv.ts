/**
 * Consul's flags as node's `util.parseArgs` reads them. Consul (Go's flag package) takes long flags with one dash or
 * two, `-flag=value` or `-flag value`, and booleans as `-flag`, `-flag=true` or `-flag=false`; parseArgs takes only
 * `--flag`. Rather than a parser of our own, argv is first normalised: each known flag becomes `--flag` or
 * `--flag=value`, taking the next word as its value even when that word starts with a dash (as Go does), and
 * `-flag=false` is dropped. parseArgs then does the rest (types, repeats, positionals).
 */
import { parseArgs } from 'node:util'

export interface FlagSpec {
  type: 'string' | 'boolean'
  /** May be given more than once; the values are kept in order. */
  multiple?: boolean
  /** One line for `-help`. */
  help: string
  /** Shown as the value's name in help (`-name=<value>`). */
  value?: string
  /** Other names of the same flag (Consul's older spellings). */
  aliases?: string[]
  /** Left out of `-help` (deprecated spellings). */
  hidden?: boolean
}

export type FlagSpecs = Record<string, FlagSpec>

export interface ParsedFlags {
  values: Record<string, string | boolean | string[] | undefined>
  positionals: string[]
}

/** A usage mistake: the command prints the message and its usage, and exits 1 (as Consul). */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}

const FLAG = /^--?([A-Za-z][A-Za-z0-9_.-]*)(?:=(.*))?$/s

/** Normalises Consul-style argv against the flags the command knows, then parses it. */
export function parseFlags(argv: readonly string[], specs: FlagSpecs): ParsedFlags {
  const canonical = new Map<string, string>()
  for (const [name, spec] of Object.entries(specs)) {
    canonical.set(name, name)
    for (const alias of spec.aliases ?? []) canonical.set(alias, name)
  }
  let normalised: string[] = []
  for (let i = 0; i < argv.length; i += 1) {
    const word = argv[i]!
    if (word === '--') {
      normalised.push(...argv.slice(i))
      break
    }
    const match = FLAG.exec(word)
    if (match === null) {
      normalised.push(word)
      continue
    }
    const name = canonical.get(match[1]!)
    if (name === undefined) throw new UsageError(`flag provided but not defined: -${match[1]}`)
    const spec = specs[name]!
    const inline = match[2]
    if (spec.type === 'boolean') {
      // Go's strconv.ParseBool spellings. The last occurrence wins, as in Go: `-stale -stale=false` is false.
      if (inline === undefined || /^(1|t|T|true|TRUE|True)$/.test(inline)) normalised.push(`--${name}`)
      else if (/^(0|f|F|false|FALSE|False)$/.test(inline)) normalised = normalised.filter((item) => item !== `--${name}`)
      else throw new UsageError(`invalid boolean value "${inline}" for -${match[1]}: parse error`)
      continue
    }
    if (inline !== undefined) {
      normalised.push(`--${name}=${inline}`)
      continue
    }
    if (i + 1 >= argv.length) throw new UsageError(`flag needs an argument: -${match[1]}`)
    i += 1
    normalised.push(`--${name}=${argv[i]}`)
  }
  const options = Object.fromEntries(Object.entries(specs).map(([name, spec]) => [name, { type: spec.type, multiple: spec.multiple === true }]))
  try {
    const parsed = parseArgs({ args: normalised, options, allowPositionals: true, strict: true })
    return { values: parsed.values as ParsedFlags['values'], positionals: parsed.positionals }
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
}

/** The flags of a command as `-help` lists them, Consul's layout: `-name=<value>` then the help indented. */
export function describeFlags(specs: FlagSpecs): string {
  const lines: string[] = []
  for (const [name, spec] of Object.entries(specs).sort(([a], [b]) => a.localeCompare(b))) {
    if (spec.hidden === true) continue
    lines.push(spec.type === 'boolean' ? `  -${name}` : `  -${name}=<${spec.value ?? 'string'}>`)
    lines.push(`     ${spec.help}`)
    lines.push('')
  }
  return lines.join('\n')
}
