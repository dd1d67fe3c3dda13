/**
 * Shell completion as Consul sets it up (src/cli/completion.ts): `warden completion bash|zsh` prints the
 * `complete -C` line, `warden -autocomplete-install` adds it to the ~/.bashrc and ~/.zshrc that exist (once, however
 * often it runs) and `-autocomplete-uninstall` takes it out again leaving the operator's own lines as they were; a
 * completion call (COMP_LINE set) prints the candidates. Method: HOME pointed at a fresh temporary directory per
 * test through the in-memory CliIo's environment, rc files written and read back; directories removed after each
 * test.
 */
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect } from 'chai'
import { answerCompletion, completionScript, installCompletion } from '../../../src/cli/completion.js'
import { MemoryIo } from './memory-io.js'

const BINARY = '/opt/warden/bin/warden'
const BASH_LINE = `complete -C '${BINARY}' warden`
const ZSH_LINES = ['autoload -U +X bashcompinit && bashcompinit', `complete -o nospace -C '${BINARY}' warden`]
const OWN = "export PATH=$HOME/bin:$PATH\nalias ll='ls -l'\n# complete -C /usr/bin/vault vault\ncomplete -C /usr/bin/vault vault\n"

describe('cli completion: scripts, install, uninstall, answers', function () {
  const made: string[] = []
  let home = ''

  beforeEach(async function () {
    home = await mkdtemp(join(tmpdir(), 'warden-cli-completion-'))
    made.push(home)
  })

  afterEach(async function () {
    for (const directory of made.splice(0)) await rm(directory, { recursive: true, force: true })
  })

  const io = (): MemoryIo => new MemoryIo({ HOME: home })
  const count = (text: string, line: string): number => text.split('\n').filter((item) => item.includes(line)).length

  describe('completionScript', function () {
    it('prints the bash line: complete -C with the binary quoted', function () {
      expect(completionScript('bash', BINARY)).to.equal(`${BASH_LINE}\n`)
    })

    it('prints the zsh lines: bashcompinit, then complete -o nospace -C', function () {
      expect(completionScript('zsh', BINARY)).to.equal(`${ZSH_LINES.join('\n')}\n`)
    })

    it('quotes a binary path holding a single quote for the shell', function () {
      expect(completionScript('bash', "/home/o'brien/warden")).to.equal(`complete -C '/home/o'\\''brien/warden' warden\n`)
    })

    it('gives nothing for another shell', function () {
      expect(completionScript('fish', BINARY)).to.equal(undefined)
      expect(completionScript('', BINARY)).to.equal(undefined)
    })
  })

  describe('installCompletion', function () {
    it('adds the line to an existing .bashrc after the operator\'s lines, says where, and exits 0', async function () {
      const rc = join(home, '.bashrc')
      await writeFile(rc, OWN)
      const out = io()
      expect(installCompletion(out, BINARY, true)).to.equal(0)
      expect(out.out).to.equal(`Installed completion in ${rc}\n`)
      expect(out.err).to.equal('')
      const text = await readFile(rc, 'utf8')
      expect(text.startsWith(OWN)).to.equal(true)
      expect(count(text, BASH_LINE)).to.equal(1)
      expect(existsSync(join(home, '.zshrc'))).to.equal(false)
    })

    it('adds the line once however often install runs', async function () {
      const rc = join(home, '.bashrc')
      await writeFile(rc, OWN)
      expect(installCompletion(io(), BINARY, true)).to.equal(0)
      const once = await readFile(rc, 'utf8')
      expect(installCompletion(io(), BINARY, true)).to.equal(0)
      expect(installCompletion(io(), BINARY, true)).to.equal(0)
      const thrice = await readFile(rc, 'utf8')
      expect(thrice).to.equal(once)
      expect(count(thrice, BASH_LINE)).to.equal(1)
    })

    it('replaces the line of an earlier install from another binary path', async function () {
      const rc = join(home, '.bashrc')
      await writeFile(rc, OWN)
      installCompletion(io(), '/old/place/warden', true)
      installCompletion(io(), BINARY, true)
      const text = await readFile(rc, 'utf8')
      expect(text).not.to.include('/old/place/warden')
      expect(count(text, BASH_LINE)).to.equal(1)
    })

    it('removes the line on uninstall and leaves the operator\'s lines untouched, before and after it', async function () {
      const rc = join(home, '.bashrc')
      await writeFile(rc, OWN)
      installCompletion(io(), BINARY, true)
      await writeFile(rc, `${await readFile(rc, 'utf8')}export EDITOR=vi\n`)
      const out = io()
      expect(installCompletion(out, BINARY, false)).to.equal(0)
      expect(out.out).to.equal(`Removed completion in ${rc}\n`)
      expect(await readFile(rc, 'utf8')).to.equal(`${OWN}export EDITOR=vi\n`)
    })

    it('gives the file back as it was after install then uninstall', async function () {
      const rc = join(home, '.bashrc')
      await writeFile(rc, OWN)
      installCompletion(io(), BINARY, true)
      installCompletion(io(), BINARY, false)
      expect(await readFile(rc, 'utf8')).to.equal(OWN)
    })

    it('gives back blank lines at the end of the file and an empty file as they were', async function () {
      const rc = join(home, '.bashrc')
      for (const original of [`${OWN}\n\n`, '']) {
        await writeFile(rc, original)
        installCompletion(io(), BINARY, true)
        expect(count(await readFile(rc, 'utf8'), BASH_LINE)).to.equal(1)
        installCompletion(io(), BINARY, false)
        expect(await readFile(rc, 'utf8'), JSON.stringify(original)).to.equal(original)
      }
    })

    it('ends a last line without a newline before adding its own, and keeps that line on uninstall', async function () {
      const rc = join(home, '.bashrc')
      await writeFile(rc, 'export A=1')
      installCompletion(io(), BINARY, true)
      expect(await readFile(rc, 'utf8')).to.match(/^export A=1\n/)
      installCompletion(io(), BINARY, false)
      expect(await readFile(rc, 'utf8')).to.equal('export A=1\n')
    })

    it('installs in .zshrc too when it exists, with the bashcompinit line, and uninstalls from both', async function () {
      await writeFile(join(home, '.bashrc'), OWN)
      await writeFile(join(home, '.zshrc'), 'setopt autocd\n')
      const out = io()
      expect(installCompletion(out, BINARY, true)).to.equal(0)
      expect(out.out).to.equal(`Installed completion in ${join(home, '.bashrc')}\nInstalled completion in ${join(home, '.zshrc')}\n`)
      const zsh = await readFile(join(home, '.zshrc'), 'utf8')
      expect(zsh.startsWith('setopt autocd\n')).to.equal(true)
      for (const line of ZSH_LINES) expect(count(zsh, line), line).to.equal(1)
      expect(installCompletion(io(), BINARY, false)).to.equal(0)
      expect(await readFile(join(home, '.zshrc'), 'utf8')).to.equal('setopt autocd\n')
      expect(await readFile(join(home, '.bashrc'), 'utf8')).to.equal(OWN)
    })

    it('exits 1 with a message naming both files when neither exists, and creates none', async function () {
      for (const install of [true, false]) {
        const out = io()
        expect(installCompletion(out, BINARY, install)).to.equal(1)
        expect(out.out).to.equal('')
        expect(out.err).to.include(join(home, '.bashrc'))
        expect(out.err).to.include(join(home, '.zshrc'))
        expect(out.err).to.include('warden completion bash')
        expect(await readdir(home)).to.deep.equal([])
      }
    })
  })

  describe('answerCompletion', function () {
    it('prints the candidates for COMP_LINE, one per line, and says it answered', function () {
      const out = new MemoryIo({ COMP_LINE: 'warden acl token cr' })
      expect(answerCompletion(out)).to.equal(true)
      expect(out.out).to.equal('create\n')
    })

    it('completes the line up to COMP_POINT only', function () {
      const out = new MemoryIo({ COMP_LINE: 'warden lo extra', COMP_POINT: '9' })
      expect(answerCompletion(out)).to.equal(true)
      expect(out.out).to.equal('login\nlogout\n')
    })

    it('does nothing without COMP_LINE (not a completion call)', function () {
      const out = new MemoryIo({})
      expect(answerCompletion(out)).to.equal(false)
      expect(out.out).to.equal('')
    })
  })
})
