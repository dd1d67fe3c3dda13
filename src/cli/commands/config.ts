/** `warden config write|read|list|delete`, as Consul's, for config entries. */
import type { ConfigEntry } from '../../api/index.js'
import { UsageError } from '../argv.js'
import { CommandError, type Command, type CommandContext } from '../command.js'
import { json } from '../format.js'
import { FileError, valueOrFile } from '../io.js'

const KIND_NAME_FLAGS = {
  kind: { type: 'string' as const, value: 'value', help: 'The kind of the config entry, e.g. service-defaults.' },
  name: { type: 'string' as const, value: 'value', help: 'The name of the config entry.' },
}
const CAS_FLAGS = {
  cas: { type: 'boolean' as const, help: 'Compare and set: act only if the entry\'s ModifyIndex is -modify-index (0 on write: only if it does not exist).' },
  'modify-index': { type: 'string' as const, value: 'int', help: 'The ModifyIndex -cas compares with.' },
}

function casIndex(context: CommandContext): number | undefined {
  if (!context.boolean('cas')) {
    if (context.string('modify-index') !== undefined) throw new UsageError('-modify-index needs -cas')
    return undefined
  }
  const text = context.string('modify-index')
  if (text === undefined) throw new UsageError('Must specify a -modify-index with -cas')
  if (!/^\d+$/.test(text)) throw new UsageError(`-modify-index "${text}" must be a whole number`)
  return Number(text)
}

/** Parses a config entry file. JSON only: HCL would need a parser, and no maintained HCL 2 parser exists for Node. */
function parseEntry(text: string, source: string): ConfigEntry {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    throw new CommandError(`Failed to decode config entry input: ${source} is not JSON (${(error as Error).message}); warden reads config entries as JSON only`)
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new CommandError(`Failed to decode config entry input: ${source} must hold one JSON object`)
  const entry = parsed as ConfigEntry
  // Consul's files may spell the keys in snake_case (kind, name); the API takes Kind and Name.
  for (const [lower, upper] of [['kind', 'Kind'], ['name', 'Name']] as const) {
    if (entry[upper] === undefined && typeof entry[lower] === 'string') {
      entry[upper] = entry[lower] as string
      delete entry[lower]
    }
  }
  if (typeof entry.Kind !== 'string' || entry.Kind === '') throw new CommandError(`Failed to decode config entry input: ${source} has no Kind`)
  return entry
}

export const configWrite: Command = {
  path: 'config write',
  synopsis: 'Create or update a config entry',
  help: `Usage: warden config write [options] FILE

  Writes the config entry in FILE (JSON), or read from standard input with -:

      $ warden config write web-defaults.json
      $ echo '{"Kind": "service-defaults", "Name": "web", "Protocol": "http"}' | warden config write -`,
  flags: CAS_FLAGS,
  async run(context) {
    const [source, ...extra] = context.flags.positionals
    if (source === undefined) throw new UsageError('Must provide exactly one positional argument to specify the config entry to write')
    if (extra.length > 0) throw new UsageError(`Too many arguments: ${extra.join(' ')}`)
    let text: string
    try {
      text = await valueOrFile(context.io, source === '-' ? '-' : `@${source}`)
    } catch (error) {
      if (error instanceof FileError) throw new CommandError(`Failed to read config entry: ${error.message}`)
      throw error
    }
    const entry = parseEntry(text, source === '-' ? 'standard input' : source)
    const cas = casIndex(context)
    const written = await context.api(`Error writing config entry ${entry.Kind}/${entry.Name}`, () => context.client.config.apply(entry, cas === undefined ? {} : { cas }))
    if (!written) throw new CommandError(`Config entry not updated: ${entry.Kind}/${entry.Name}`)
    context.print(`Config entry written: ${entry.Kind}/${entry.Name}`)
  },
}

export const configRead: Command = {
  path: 'config read',
  synopsis: 'Read a config entry',
  help: `Usage: warden config read -kind KIND -name NAME [options]

      $ warden config read -kind service-defaults -name web`,
  flags: KIND_NAME_FLAGS,
  async run(context) {
    const kind = context.required('kind', 'Must specify the -kind parameter')
    const name = context.required('name', 'Must specify the -name parameter')
    const entry = await context.api(`Error reading config entry ${kind}/${name}`, () => context.client.config.get(kind, name, context.consistency))
    context.print(json(entry))
  },
}

export const configList: Command = {
  path: 'config list',
  synopsis: 'List config entries of one kind',
  help: `Usage: warden config list -kind KIND [-filter EXPR] [options]

  Prints the names of the entries of a kind, one per line:

      $ warden config list -kind service-defaults -filter 'Protocol == "http"'`,
  flags: {
    kind: KIND_NAME_FLAGS.kind,
    filter: { type: 'string', value: 'value', help: 'A filter expression the entries must match.' },
  },
  async run(context) {
    const kind = context.required('kind', 'Must specify the -kind parameter')
    const filter = context.string('filter')
    const entries = await context.api(`Error listing config entries for kind "${kind}"`, () =>
      context.client.config.list(kind, { ...context.consistency, ...(filter === undefined ? {} : { filter }) }),
    )
    for (const entry of entries) context.print(entry.Name)
  },
}

export const configDelete: Command = {
  path: 'config delete',
  synopsis: 'Delete a config entry',
  help: `Usage: warden config delete -kind KIND -name NAME [-cas -modify-index N] [options]

      $ warden config delete -kind service-defaults -name web`,
  flags: { ...KIND_NAME_FLAGS, ...CAS_FLAGS },
  async run(context) {
    const kind = context.required('kind', 'Must specify the -kind parameter')
    const name = context.required('name', 'Must specify the -name parameter')
    const cas = casIndex(context)
    const deleted = await context.api(`Error deleting config entry ${kind}/${name}`, () => context.client.config.delete(kind, name, cas === undefined ? {} : { cas }))
    if (!deleted) throw new CommandError(`Config entry not deleted: ${kind}/${name}`)
    context.print(`Config entry deleted: ${kind}/${name}`)
  },
}
