#!/usr/bin/env node
/**
 * The `warden` command. `warden agent` runs a server (agent.ts; exit 2 for a bad flag). `warden recover` rewrites a
 * survivor's data dir (agent/recover.ts). Every other word is an operator command with Consul's name, flags and
 * output (`warden acl token create -policy-name web`): commands/, run by command.ts, exit 0 or 1.
 */
import { resolve } from 'node:path'
import { answerCompletion, completionScript, installCompletion } from './completion.js'
import { groupHelp, runCli } from './dispatch.js'
import { processCliIo } from './io.js'
import { wardenVersion as version } from '../lib/version.js'

async function main(argv: string[]): Promise<number> {
  const io = processCliIo()
  if (answerCompletion(io)) return 0
  const [command, ...rest] = argv
  const binary = resolve(process.argv[1] ?? 'warden')
  switch (command) {
    // The server's modules (Koa, LevelDB, the Raft driver) load only for the commands that run them: an operator
    // command then starts in about half the time.
    case 'agent':
      return (await import('./agent.js')).runAgent(rest)
    case 'recover': {
      const { processIo, runRecover } = await import('../agent/recover.js')
      return runRecover(rest, processIo())
    }
    case 'version':
    case '-version':
    case '--version':
      io.stdout(`warden v${version()}\n`)
      return 0
    case 'completion': {
      const script = completionScript(rest[0] ?? '', binary)
      if (script === undefined) {
        io.stderr('usage: warden completion bash|zsh\n')
        return 1
      }
      io.stdout(script)
      return 0
    }
    case '-autocomplete-install':
    case '--autocomplete-install':
      return installCompletion(io, binary, true)
    case '-autocomplete-uninstall':
    case '--autocomplete-uninstall':
      return installCompletion(io, binary, false)
    case undefined:
    case '-h':
    case '-help':
    case '--help':
    case 'help':
      io.stdout(`${groupHelp([])}\n`)
      return command === undefined ? 1 : 0
    default:
      return runCli(argv, io)
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
    // Nothing should keep the process alive after a clean stop; exit explicitly in case a library left a handle.
    setTimeout(() => process.exit(code), 100).unref()
  },
  (error: unknown) => {
    process.stderr.write(`warden: ${(error as Error).stack ?? String(error)}\n`)
    process.exit(1)
  },
)
