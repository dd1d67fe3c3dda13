/**
 * Finding the command argv names, group help and shell completion (src/cli/dispatch.ts). Goal: `warden WORDS...`
 * runs the command whose whole path argv starts with (the longest), a group prints the commands under it as Consul's
 * command tree does (exit 1, or 0 when help was asked for), an unknown word says so on stderr (exit 1), and the
 * completion candidates are the next words or the command's visible flags. Method: the real COMMANDS table (plus,
 * for the longest-path rule, a stand-in command pushed onto it and taken off again), runCli with an in-memory CliIo;
 * no command that talks to an agent is run.
 */
import { expect } from 'chai'
import { commandHelp, type Command } from '../../../src/cli/command.js'
import { COMMANDS } from '../../../src/cli/commands/index.js'
import { complete, findCommand, groupHelp, runCli } from '../../../src/cli/dispatch.js'
import { MemoryIo } from './memory-io.js'

/** The words a group's help lists, in order. */
function listed(help: string | undefined): string[] {
  expect(help, 'group help').to.be.a('string')
  const block = help!.split('\n\n')[1]!
  expect(block.startsWith('Subcommands:\n')).to.equal(true)
  return block
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/)[0]!)
}

describe('cli dispatch: commands, group help, completion', function () {
  describe('findCommand', function () {
    it('finds the command whose whole path argv starts with and hands it the rest', function () {
      const found = findCommand(['acl', 'token', 'create', '-policy-name', 'web'])
      expect(found?.command.path).to.equal('acl token create')
      expect(found?.rest).to.deep.equal(['-policy-name', 'web'])
      expect(findCommand(['operator', 'raft', 'list-peers'])).to.deep.include({ rest: [] })
      expect(findCommand(['keygen'])?.command.path).to.equal('keygen')
    })

    it('finds nothing for a group, a partial word or an unknown word', function () {
      expect(findCommand(['acl', 'token'])).to.equal(undefined)
      expect(findCommand(['acl', 'token', 'cre'])).to.equal(undefined)
      expect(findCommand(['acl', 'token', 'createx'])).to.equal(undefined)
      expect(findCommand(['nope'])).to.equal(undefined)
      expect(findCommand([])).to.equal(undefined)
    })

    it('picks the longest path when a shorter command\'s path is a prefix of it', function () {
      const shorter: Command = { path: 'acl token', synopsis: 'stand-in', help: 'Usage: warden acl token', flags: {}, http: false, run: async () => {} }
      const table = COMMANDS as Command[]
      table.push(shorter)
      try {
        expect(findCommand(['acl', 'token', 'create', '-x'])).to.deep.include({ rest: ['-x'] })
        expect(findCommand(['acl', 'token', 'create'])?.command.path).to.equal('acl token create')
        expect(findCommand(['acl', 'token', 'bogus'])).to.deep.equal({ command: shorter, rest: ['bogus'] })
      } finally {
        table.splice(table.indexOf(shorter), 1)
      }
      expect(COMMANDS).not.to.include(shorter)
    })
  })

  describe('groupHelp', function () {
    it('lists the top-level words, the commands main.ts runs itself included, sorted', function () {
      expect(listed(groupHelp([]))).to.deep.equal(['acl', 'agent', 'catalog', 'completion', 'config', 'keygen', 'login', 'logout', 'members', 'operator', 'recover', 'snapshot', 'tls', 'version'])
    })

    it('lists the acl groups and acl bootstrap under acl', function () {
      expect(listed(groupHelp(['acl']))).to.deep.equal(['auth-method', 'binding-rule', 'bootstrap', 'policy', 'role', 'templated-policy', 'token'])
    })

    it('lists the token verbs under acl token, each with its synopsis', function () {
      const help = groupHelp(['acl', 'token'])
      expect(listed(help)).to.deep.equal(['clone', 'create', 'delete', 'list', 'permissions', 'read', 'update'])
      expect(help).to.include('    create         Create an ACL token\n')
    })

    it('starts with the group\'s usage line and ends with how to get a subcommand\'s flags', function () {
      const help = groupHelp(['acl', 'token'])!
      expect(help.startsWith('Usage: warden acl token <subcommand> [options] [args]\n\nSubcommands:\n')).to.equal(true)
      expect(help.endsWith('\n\nRun "warden acl token <subcommand> -help" for a subcommand\'s flags.')).to.equal(true)
    })

    it('gives nothing for a command or an unknown word', function () {
      expect(groupHelp(['acl', 'token', 'create'])).to.equal(undefined)
      expect(groupHelp(['nope'])).to.equal(undefined)
    })

    it('lists every command under the groups of its path', function () {
      for (const command of COMMANDS) {
        const words = command.path.split(' ')
        for (let depth = 0; depth < words.length; depth += 1) {
          expect(listed(groupHelp(words.slice(0, depth))), command.path).to.include(words[depth])
        }
      }
    })
  })

  describe('runCli', function () {
    it('says an unknown word is unknown on stderr, with the top-level help, and exits 1', async function () {
      const io = new MemoryIo()
      expect(await runCli(['frobnicate'], io)).to.equal(1)
      expect(io.err).to.equal(`Unknown command: warden frobnicate\n\n${groupHelp([])}\n`)
      expect(io.out).to.equal('')
    })

    it('says an unknown word under a group is unknown, with that group\'s help, and exits 1', async function () {
      const io = new MemoryIo()
      expect(await runCli(['acl', 'tokn', 'list'], io)).to.equal(1)
      expect(io.err).to.equal(`Unknown command: warden acl tokn\n\n${groupHelp(['acl'])}\n`)
      expect(io.out).to.equal('')
    })

    it('prints a group\'s help on stdout and exits 1 for a group named alone, as Consul', async function () {
      for (const group of [['acl'], ['acl', 'token'], ['operator', 'raft']]) {
        const io = new MemoryIo()
        expect(await runCli(group, io), group.join(' ')).to.equal(1)
        expect(io.out).to.equal(`${groupHelp(group)}\n`)
        expect(io.err).to.equal('')
      }
    })

    it('prints a group\'s help on stdout and exits 0 when help is asked for', async function () {
      for (const argv of [['acl', '-help'], ['acl', '--help'], ['acl', '-h'], ['acl', 'token', '-help']]) {
        const io = new MemoryIo()
        expect(await runCli(argv, io), argv.join(' ')).to.equal(0)
        expect(io.out).to.equal(`${groupHelp(argv.slice(0, -1))}\n`)
        expect(io.err).to.equal('')
      }
    })

    it('prints a group\'s help on stderr and exits 1 for a flag that is not help', async function () {
      const io = new MemoryIo()
      expect(await runCli(['acl', '-bogus'], io)).to.equal(1)
      expect(io.err).to.equal(`${groupHelp(['acl'])}\n`)
      expect(io.out).to.equal('')
    })

    it('runs the command argv names with the words after its path', async function () {
      const io = new MemoryIo()
      expect(await runCli(['keygen'], io)).to.equal(0)
      expect(Buffer.from(io.out.trim(), 'base64')).to.have.length(32)
      const help = new MemoryIo()
      expect(await runCli(['acl', 'token', 'create', '-help'], help)).to.equal(0)
      expect(help.out).to.equal(`${commandHelp(findCommand(['acl', 'token', 'create'])!.command)}\n`)
    })
  })

  describe('complete (COMP_LINE up to the cursor)', function () {
    it('completes a top-level word', function () {
      expect(complete('warden ac')).to.deep.equal(['acl'])
      expect(complete('warden lo')).to.deep.equal(['login', 'logout'])
    })

    it('offers every top-level word after "warden "', function () {
      expect(complete('warden ')).to.deep.equal(listed(groupHelp([])))
    })

    it('completes a word under a group', function () {
      expect(complete('warden acl token cr')).to.deep.equal(['create'])
      expect(complete('warden acl ')).to.deep.equal(['auth-method', 'binding-rule', 'bootstrap', 'policy', 'role', 'templated-policy', 'token'])
    })

    it('completes a command\'s flags, its own and the HTTP ones, sorted', function () {
      expect(complete('warden acl token create -pol')).to.deep.equal(['-policy-id', '-policy-name'])
      expect(complete('warden acl token create -tok')).to.deep.equal(['-token', '-token-file'])
      expect(complete('warden acl token create -policy-name web -ro')).to.deep.equal(['-role-id', '-role-name'])
      expect(complete('warden acl token read -f')).to.deep.equal(['-format'])
    })

    it('does not offer hidden flags (the deprecated -merge-* spellings)', function () {
      expect(complete('warden acl token update -merge')).to.deep.equal([])
      const all = complete('warden acl token update -')
      expect(all).to.include('-append-policy-name')
      expect(all.filter((flag) => flag.startsWith('-merge'))).to.deep.equal([])
    })

    it('offers no HTTP flags to a command that takes none', function () {
      expect(complete('warden keygen -')).to.deep.equal([])
    })

    it('offers nothing for a word after a command that is not a flag', function () {
      expect(complete('warden acl token create we')).to.deep.equal([])
      expect(complete('warden nope x')).to.deep.equal([])
    })
  })
})
