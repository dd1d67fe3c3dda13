/**
 * Finds the command argv names (`acl token create ...`) and runs it; a group (`warden acl token`) prints the
 * commands under it, as Consul's command tree does. Also answers shell completion: bash and zsh run
 * `complete -C warden warden`, which starts warden with COMP_LINE set, as Consul's -autocomplete-install arranges.
 */
import { runCommand, type Command } from './command.js'
import { COMMANDS } from './commands/index.js'
import type { CliIo } from './io.js'
import { HTTP_FLAGS } from './http-flags.js'

/** Words that are not in COMMANDS but that main.ts runs itself, with one line each for the top-level help. */
export const OTHER_COMMANDS: Record<string, string> = {
  agent: 'Run a warden server',
  recover: 'Rewrite a survivor\'s data dir into a cluster of one (offline)',
  completion: 'Print the bash or zsh completion script',
  version: 'Print the version',
}

/** The longest command path argv starts with, and the words after it. */
export function findCommand(argv: readonly string[]): { command: Command; rest: string[] } | undefined {
  let best: { command: Command; rest: string[] } | undefined
  for (const command of COMMANDS) {
    const words = command.path.split(' ')
    if (words.every((word, at) => argv[at] === word) && (best === undefined || words.length > best.command.path.split(' ').length)) {
      best = { command, rest: argv.slice(words.length) }
    }
  }
  return best
}

/** The commands one level under `prefix` (a group's help), with their synopses. */
export function groupHelp(prefix: string[]): string | undefined {
  const under = new Map<string, string>()
  for (const command of COMMANDS) {
    const words = command.path.split(' ')
    if (words.length <= prefix.length || !prefix.every((word, at) => words[at] === word)) continue
    const next = words[prefix.length]!
    const isLeaf = words.length === prefix.length + 1
    if (isLeaf) under.set(next, command.synopsis)
    else if (!under.has(next)) under.set(next, `${[...prefix, next].join(' ')} commands`)
  }
  if (prefix.length === 0) for (const [word, synopsis] of Object.entries(OTHER_COMMANDS)) under.set(word, synopsis)
  if (under.size === 0) return undefined
  const width = Math.max(...[...under.keys()].map((word) => word.length))
  const lines = [...under.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([word, synopsis]) => `    ${word.padEnd(width)}    ${synopsis}`)
  const name = ['warden', ...prefix].join(' ')
  return `Usage: ${name} <subcommand> [options] [args]\n\nSubcommands:\n${lines.join('\n')}\n\nRun "${name} <subcommand> -help" for a subcommand's flags.`
}

export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const found = findCommand(argv)
  if (found !== undefined) return runCommand(found.command, found.rest, io)
  // A group, or a word nobody knows: the help of the deepest group argv names. Asking for help is exit 0;
  // anything else exits 1, as Consul's CLI does.
  const words = argv.filter((word) => !word.startsWith('-'))
  let depth = words.length
  while (depth > 0 && groupHelp(words.slice(0, depth)) === undefined) depth -= 1
  const help = groupHelp(words.slice(0, depth))!
  const asked = argv.length === depth || argv.slice(depth).every((word) => /^--?(h|help)$/.test(word))
  if (asked && depth > 0) {
    io.stdout(`${help}\n`)
    return argv.length === depth ? 1 : 0
  }
  const unknown = words[depth]
  io.stderr(`${unknown === undefined ? '' : `Unknown command: ${['warden', ...words.slice(0, depth + 1)].join(' ')}\n\n`}${help}\n`)
  return 1
}

/** Completion candidates for the line typed so far (COMP_LINE up to COMP_POINT). */
export function complete(line: string): string[] {
  const words = line.split(/\s+/).slice(1) // without "warden"
  const current = words.pop() ?? ''
  const found = findCommand(words)
  if (found !== undefined) {
    if (!current.startsWith('-')) return []
    const flags = { ...found.command.flags, ...(found.command.http === false ? {} : HTTP_FLAGS) }
    if (found.command.format === true) flags['format'] = { type: 'string', help: '' }
    if (found.command.meta === true) flags['meta'] = { type: 'boolean', help: '' }
    return Object.entries(flags)
      .filter(([, spec]) => spec.hidden !== true)
      .map(([name]) => `-${name}`)
      .filter((flag) => flag.startsWith(current))
      .sort()
  }
  const next = new Set<string>()
  for (const command of COMMANDS) {
    const path = command.path.split(' ')
    if (path.length > words.length && words.every((word, at) => path[at] === word)) next.add(path[words.length]!)
  }
  if (words.length === 0) for (const word of Object.keys(OTHER_COMMANDS)) next.add(word)
  return [...next].filter((word) => word.startsWith(current)).sort()
}
