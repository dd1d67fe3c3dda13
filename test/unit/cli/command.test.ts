/**
 * The behaviour every command shares (src/cli/command.ts runCommand), Consul's: `-help` prints the usage and every
 * flag and exits 0; a usage mistake prints its line, a blank line and the usage on stderr and exits 1; any other
 * failure prints one line and exits 1; secrets the invocation holds never appear in what it prints on failure.
 * Method: stand-in commands (no HTTP: the one that takes -token only builds its client, which connects to nothing)
 * run with an in-memory CliIo; then the CLI-wide property over every command in commands/index.ts: `-help` exits 0
 * and names each of its visible flags, and the HTTP API flags unless the command takes none.
 */
import { expect } from 'chai'
import { UsageError } from '../../../src/cli/argv.js'
import { CommandError, commandHelp, runCommand, type Command, type CommandContext } from '../../../src/cli/command.js'
import { COMMANDS } from '../../../src/cli/commands/index.js'
import { HTTP_FLAGS } from '../../../src/cli/http-flags.js'
import { MemoryIo } from './memory-io.js'

function fake(run: (context: CommandContext) => Promise<number | void>, extra: Partial<Command> = {}): Command {
  return {
    path: 'test fake',
    synopsis: 'A stand-in',
    help: 'Usage: warden test fake [options]\n\n  Does what the test says.\n',
    flags: {
      name: { type: 'string', value: 'value', help: 'A name.' },
      loud: { type: 'boolean', help: 'Say it loudly.' },
      'merge-old': { type: 'boolean', help: 'Deprecated.', hidden: true },
      secret: { type: 'string', value: 'value', help: 'A secret.' },
    },
    http: false,
    run,
    ...extra,
  }
}

async function run(command: Command, argv: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> {
  const io = new MemoryIo(env)
  const code = await runCommand(command, argv, io)
  return { code, out: io.out, err: io.err }
}

const SECRET = '6a1f3c52-4d4e-4c0b-9d1e-7c2b1f0a9e33'

describe('cli command: help, usage errors, failures, redaction', function () {
  describe('-help', function () {
    it('prints the usage and the command\'s visible flags under "Command Options" on stdout and exits 0, without running', async function () {
      let ran = false
      const command = fake(async () => {
        ran = true
      })
      const result = await run(command, ['-help'])
      expect(result).to.include({ code: 0, err: '' })
      expect(ran).to.equal(false)
      expect(result.out).to.equal(`${commandHelp(command)}\n`)
      expect(result.out.startsWith('Usage: warden test fake [options]\n\n  Does what the test says.\n')).to.equal(true)
      expect(result.out).to.include('\nCommand Options:\n\n')
      for (const flag of ['  -name=<value>\n     A name.', '  -loud\n     Say it loudly.', '  -secret=<value>']) expect(result.out).to.include(flag)
      expect(result.out).not.to.include('merge-old')
      expect(result.out).not.to.include('HTTP API Options')
    })

    it('answers every help spelling, anywhere in argv, even beside a bad flag', async function () {
      const command = fake(async () => {
        throw new Error('must not run')
      })
      for (const argv of [['-h'], ['--help'], ['-help'], ['--h'], ['-name', 'x', '-help'], ['-bogus', '-h']]) {
        expect((await run(command, argv)).code, argv.join(' ')).to.equal(0)
      }
    })

    it('lists the HTTP API options before the command options when the command talks to an agent, and -format and -meta when it prints records', async function () {
      const command = fake(async () => {}, { http: true, format: true, meta: true })
      const { out } = await run(command, ['-help'])
      const http = out.indexOf('\nHTTP API Options:\n\n')
      const own = out.indexOf('\nCommand Options:\n\n')
      expect(http).to.be.greaterThan(0)
      expect(own).to.be.greaterThan(http)
      for (const name of Object.keys(HTTP_FLAGS)) expect(out.slice(http, own), name).to.match(new RegExp(`\\n  -${name}(=<|\\n)`))
      expect(out.slice(own)).to.include('  -format=<string>\n     Output format {pretty|json}')
      expect(out.slice(own)).to.include('  -meta\n')
    })
  })

  describe('failures', function () {
    it('prints a usage error, a blank line and the usage on stderr, and exits 1', async function () {
      const command = fake(async () => {
        throw new UsageError('Missing required -name flag')
      })
      const result = await run(command, [])
      expect(result).to.deep.equal({ code: 1, out: '', err: `Missing required -name flag\n\n${commandHelp(command)}\n` })
    })

    it('treats a flag mistake as a usage error, without running the command', async function () {
      let ran = false
      const command = fake(async () => {
        ran = true
      })
      expect(await run(command, ['-bogus'])).to.deep.equal({ code: 1, out: '', err: `flag provided but not defined: -bogus\n\n${commandHelp(command)}\n` })
      expect(await run(command, ['-name'])).to.deep.equal({ code: 1, out: '', err: `flag needs an argument: -name\n\n${commandHelp(command)}\n` })
      expect(ran).to.equal(false)
    })

    it('refuses a -format other than pretty or json as a usage error', async function () {
      const command = fake(async () => {}, { format: true })
      const result = await run(command, ['-format', 'xml'])
      expect(result.code).to.equal(1)
      expect(result.err.startsWith('Unknown format: xml\n\nUsage: ')).to.equal(true)
    })

    it('prints a command error as one line on stderr and exits 1', async function () {
      const result = await run(
        fake(async () => {
          throw new CommandError('Failed to create new token: Unexpected response code: 403 (permission_denied: ACL not found)')
        }),
        [],
      )
      expect(result).to.deep.equal({ code: 1, out: '', err: 'Failed to create new token: Unexpected response code: 403 (permission_denied: ACL not found)\n' })
    })

    it('prints any other error as one "Error:" line and exits 1', async function () {
      const result = await run(
        fake(async () => {
          throw new TypeError('something broke')
        }),
        [],
      )
      expect(result).to.deep.equal({ code: 1, out: '', err: 'Error: something broke\n' })
    })
  })

  describe('redaction', function () {
    it('prints <hidden> in place of a secret the command added, in a command error', async function () {
      const command = fake(async (context) => {
        context.addSecret(context.string('secret'))
        throw new CommandError(`Failed: the server refused SecretID ${context.string('secret')} (twice: ${context.string('secret')})`)
      })
      const result = await run(command, ['-secret', SECRET])
      expect(result).to.deep.equal({ code: 1, out: '', err: 'Failed: the server refused SecretID <hidden> (twice: <hidden>)\n' })
    })

    it('prints <hidden> in place of a secret in a usage error and in any other error', async function () {
      const usage = await run(
        fake(async (context) => {
          context.addSecret(SECRET)
          throw new UsageError(`bad value ${SECRET}`)
        }),
        [],
      )
      expect(usage.err.startsWith('bad value <hidden>\n\n')).to.equal(true)
      expect(usage.err).not.to.include(SECRET)
      const other = await run(
        fake(async (context) => {
          context.addSecret(SECRET)
          throw new Error(`parse error near ${SECRET}`)
        }),
        [],
      )
      expect(other.err).to.equal('Error: parse error near <hidden>\n')
    })

    it('hides the -token the command talks to the agent with, and WARDEN_HTTP_TOKEN', async function () {
      const command = fake(
        async (context) => {
          const token = context.http().client.options.token
          throw new CommandError(`Error: token ${token} is not valid`)
        },
        { http: true },
      )
      expect((await run(command, ['-token', SECRET])).err).to.equal('Error: token <hidden> is not valid\n')
      expect((await run(command, [], { WARDEN_HTTP_TOKEN: SECRET })).err).to.equal('Error: token <hidden> is not valid\n')
    })

    it('leaves text without a secret as it is, and values under four characters unredacted', async function () {
      const command = fake(async (context) => {
        context.addSecret('abc')
        throw new CommandError('abc is too short to hide')
      })
      expect((await run(command, [])).err).to.equal('abc is too short to hide\n')
    })
  })

  describe('success', function () {
    it('exits 0 when the command returns nothing, and with the code it returns otherwise', async function () {
      expect(await run(fake(async (context) => context.print('done')), [])).to.deep.equal({ code: 0, out: 'done\n', err: '' })
      expect((await run(fake(async () => 2), [])).code).to.equal(2)
    })

    it('prints a record\'s pretty text, or with -format=json its JSON indented by four spaces', async function () {
      const command = fake(async (context) => context.output({ Name: 'web', Local: false }, (value) => `Name: ${value.Name}`), { format: true })
      expect((await run(command, [])).out).to.equal('Name: web\n')
      expect((await run(command, ['-format=json'])).out).to.equal('{\n    "Name": "web",\n    "Local": false\n}\n')
    })
  })

  describe('every command in COMMANDS', function () {
    it('has a distinct path, a synopsis and a usage line naming its path', function () {
      const paths = COMMANDS.map((command) => command.path)
      expect(new Set(paths).size).to.equal(paths.length)
      for (const command of COMMANDS) {
        expect(command.synopsis, command.path).not.to.equal('')
        expect(command.help.trimStart().startsWith(`Usage: warden ${command.path}`), command.path).to.equal(true)
      }
    })

    it('defines no flag or alias that an HTTP API flag already names (it would be overwritten silently)', function () {
      for (const command of COMMANDS.filter((item) => item.http !== false)) {
        const names = Object.entries(command.flags).flatMap(([name, spec]) => [name, ...(spec.aliases ?? [])])
        expect(names.filter((name) => name in HTTP_FLAGS), command.path).to.deep.equal([])
      }
    })

    it('answers -help with exit 0, naming each of its visible flags, and the HTTP API flags unless it takes none', async function () {
      for (const command of COMMANDS) {
        const result = await run(command, ['-help'])
        expect(result.code, command.path).to.equal(0)
        expect(result.err, command.path).to.equal('')
        const names = [
          ...Object.entries(command.flags)
            .filter(([, spec]) => spec.hidden !== true)
            .map(([name]) => name),
          ...(command.format === true ? ['format'] : []),
          ...(command.meta === true ? ['meta'] : []),
        ]
        for (const name of names) expect(result.out, `${command.path} -${name}`).to.match(new RegExp(`\\n  -${name}(=<|\\n)`))
        for (const [name, spec] of Object.entries(command.flags)) {
          if (spec.hidden === true) expect(result.out, `${command.path} hides -${name}`).not.to.match(new RegExp(`\\n  -${name}(=<|\\n)`))
        }
        if (command.http === false) expect(result.out, command.path).not.to.include('HTTP API Options')
        else for (const name of Object.keys(HTTP_FLAGS)) expect(result.out, `${command.path} -${name}`).to.match(new RegExp(`\\n  -${name}(=<|\\n)`))
      }
    })
  })
})
