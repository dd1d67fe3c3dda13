/**
 * One operator command (`warden acl token create`): its flags, its help, and what it does. The runner gives every
 * command the same behaviour, Consul's: `-help` prints the usage and the flags and exits 0; a usage mistake prints one
 * line, then the usage, and exits 1; any other failure prints one line and exits 1. Secrets the invocation holds
 * are cut out of every line it prints on failure, whatever a server's message quoted.
 */
import { ApiError, ConnectionError, type WardenClient } from '../api/index.js'
import { describeFlags, parseFlags, UsageError, type FlagSpecs, type ParsedFlags } from './argv.js'
import { json, type Format } from './format.js'
import { HTTP_FLAGS, httpSettings, type HttpSettings } from './http-flags.js'
import { FileError, type CliIo } from './io.js'

export interface Command {
  /** The words that name it: 'acl token create'. */
  path: string
  synopsis: string
  /** The usage text: `Usage: warden ... [options]`, a blank line, then what it does and examples. */
  help: string
  flags: FlagSpecs
  /** Takes the HTTP flags (-http-addr, -token, ...); true unless said otherwise. */
  http?: boolean
  /** Takes -format=pretty|json (and -meta when `meta`). */
  format?: boolean
  meta?: boolean
  run(context: CommandContext): Promise<number | void>
}

/** A failure the command describes itself: printed as it is, exit 1. */
export class CommandError extends Error {
  override readonly name = 'CommandError'
}

export class CommandContext {
  private settings: HttpSettings | undefined
  private readonly secrets: string[] = []

  constructor(
    readonly command: Command,
    readonly flags: ParsedFlags,
    readonly io: CliIo,
  ) {}

  /** Closes the client's connections, if the command made one. */
  close(): void {
    this.settings?.client.close()
  }

  get client(): WardenClient {
    return this.http().client
  }

  http(): HttpSettings {
    if (this.settings === undefined) {
      this.settings = httpSettings(this.flags, this.io)
      this.secrets.push(...this.settings.secrets)
    }
    return this.settings
  }

  /** Reads under -stale when the operator asked for it. */
  get consistency(): { consistency?: 'stale' } {
    return this.http().stale ? { consistency: 'stale' } : {}
  }

  get format(): Format {
    return this.string('format') === 'json' ? 'json' : 'pretty'
  }

  get meta(): boolean {
    return this.flags.values['meta'] === true
  }

  string(name: string): string | undefined {
    const value = this.flags.values[name]
    return typeof value === 'string' ? value : undefined
  }

  list(name: string): string[] {
    const value = this.flags.values[name]
    return Array.isArray(value) ? value : typeof value === 'string' ? [value] : []
  }

  boolean(name: string): boolean {
    return this.flags.values[name] === true
  }

  /** A flag the command cannot do without: a usage error naming it, as Consul's messages do. */
  required(name: string, message?: string): string {
    const value = this.string(name)
    if (value === undefined || value === '') throw new UsageError(message ?? `Missing required -${name} flag`)
    return value
  }

  /** A value that must not appear in anything printed on failure (a -secret, a bearer token). */
  addSecret(value: string | undefined): void {
    if (value !== undefined && value.length >= 4) this.secrets.push(value)
  }

  redact(text: string): string {
    let result = text
    for (const secret of this.secrets) result = result.split(secret).join('<hidden>')
    return result
  }

  /** Prints a line as Consul's UI.Info does: the text and a newline. */
  print(text: string): void {
    this.io.stdout(`${text}\n`)
  }

  /** Prints a record: its pretty text, or its JSON with -format=json. */
  output<T>(value: T, pretty: (value: T) => string): void {
    this.print(this.format === 'json' ? json(value) : pretty(value))
  }

  /** Runs one API call; a failure becomes one line starting with `what` ("Failed to create new token"). */
  async api<T>(what: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call()
    } catch (error) {
      if (error instanceof ApiError || error instanceof ConnectionError) throw new CommandError(`${what}: ${describeFailure(error)}`, { cause: error })
      if (error instanceof CommandError) throw new CommandError(`${what}: ${error.message}`, { cause: error })
      throw error
    }
  }
}

/** An API failure in one line: Consul's "Unexpected response code" wording, with warden's code and message. */
export function describeFailure(error: ApiError | ConnectionError): string {
  if (error instanceof ApiError) return `Unexpected response code: ${error.status} (${error.code}: ${error.message})`
  return error.message
}

/** Consul's layout: the usage, then "HTTP API Options", then "Command Options". */
export function commandHelp(command: Command): string {
  const own = allFlags({ ...command, http: false })
  const http = command.http === false ? '' : `\nHTTP API Options:\n\n${describeFlags(HTTP_FLAGS)}`
  const text = describeFlags(own)
  return `${command.help.trim()}\n${http}${text === '' ? '' : `\nCommand Options:\n\n${text}`}`.trimEnd()
}

function allFlags(command: Command): FlagSpecs {
  const flags: FlagSpecs = { ...command.flags }
  if (command.format === true) flags['format'] = { type: 'string', value: 'string', help: 'Output format {pretty|json}' }
  if (command.meta === true) flags['meta'] = { type: 'boolean', help: 'Show the hash and the Raft indexes of each record' }
  if (command.http !== false) Object.assign(flags, HTTP_FLAGS)
  return flags
}

const HELP_WORDS = new Set(['-h', '-help', '--help', '--h'])

export async function runCommand(command: Command, argv: readonly string[], io: CliIo): Promise<number> {
  // Help is asked for before `--`; after it, `-help` is an argument like any other (as in Consul's CLI library).
  const end = argv.indexOf('--')
  if ((end === -1 ? argv : argv.slice(0, end)).some((word) => HELP_WORDS.has(word))) {
    io.stdout(`${commandHelp(command)}\n`)
    return 0
  }
  let context: CommandContext | undefined
  try {
    const flags = parseFlags(argv, allFlags(command))
    context = new CommandContext(command, flags, io)
    const format = context.string('format')
    if (format !== undefined && format !== 'pretty' && format !== 'json') throw new UsageError(`Unknown format: ${format}`)
    return (await command.run(context)) ?? 0
  } catch (error) {
    const redact = (text: string): string => context?.redact(text) ?? text
    if (error instanceof UsageError) {
      io.stderr(`${redact(error.message)}\n\n${commandHelp(command)}\n`)
      return 1
    }
    if (error instanceof CommandError || error instanceof FileError) {
      io.stderr(`${redact(error.message)}\n`)
      return 1
    }
    if (error instanceof ApiError || error instanceof ConnectionError) {
      io.stderr(`Error: ${redact(describeFailure(error))}\n`)
      return 1
    }
    io.stderr(`Error: ${redact((error as Error).message ?? String(error))}\n`)
    return 1
  } finally {
    context?.close()
  }
}
