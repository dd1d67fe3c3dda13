/**
 * Every operator command against a real agent, compared with golden scripts (testdata/*.txt; see golden.ts for
 * the format, REWRITE=1 to rewrite them). Each script gets a fresh `--dev` agent, so lists hold only what the script
 * wrote. Commands run in this process through the CLI's own dispatcher with the agent's address and management token
 * in WARDEN_HTTP_ADDR and WARDEN_HTTP_TOKEN, as an operator's shell would set them; test/cli/process.test.ts runs
 * the built binary for what only a process shows (exit codes, argv handling, TLS).
 */
import { expect } from 'chai'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../../src/cli/dispatch.js'
import type { CliIo } from '../../src/cli/io.js'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { capture, Normaliser, parseScript, prepare, renderScript, splitWords, substitute } from './golden.js'

const TESTDATA = join(import.meta.dirname, 'testdata')
const REWRITE = process.env['REWRITE'] === '1'

export interface Ran {
  code: number
  stdout: string
  stderr: string
}

/** Runs one command line (without the leading `warden`) in this process. */
export async function runInProcess(words: string[], env: Record<string, string>, stdin = ''): Promise<Ran> {
  let stdout = ''
  let stderr = ''
  const io: CliIo = {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    readStdin: async () => stdin,
    env,
    isTty: false,
  }
  const code = await runCli(words, io)
  return { code, stdout, stderr }
}

function render(ran: Ran, normaliser: Normaliser): string {
  const parts = [`exit ${ran.code}`]
  if (ran.stdout.trim() !== '') parts.push(normaliser.normalise(ran.stdout.trimEnd()))
  // A usage error prints the command's whole help after its message; the unit tests check the help, so the
  // scripts keep only the first line of it.
  const stderr = ran.stderr.replace(/\n\nUsage: (.*)\n[\s\S]*$/, '\n\nUsage: $1 …')
  if (stderr.trim() !== '') parts.push('--- stderr', normaliser.normalise(stderr.trimEnd()))
  return parts.join('\n')
}

describe('command line: golden scripts against a real agent', function () {
  this.timeout(60_000)
  const files = readdirSync(TESTDATA).filter((name) => name.endsWith('.txt')).sort()

  it('has a script for each command family', function () {
    for (const family of ['acl-token', 'acl-policy', 'acl-role', 'acl-auth-method', 'acl-binding-rule', 'acl-templated-policy', 'login', 'config', 'operator']) {
      expect(files, family).to.include(`${family}.txt`)
    }
  })

  for (const file of files) {
    describe(file, function () {
      let agent: AgentProcess
      let dir: string

      before(async function () {
        agent = await startAgent()
        dir = mkdtempSync(join(tmpdir(), 'warden-cli-'))
      })

      after(async function () {
        await agent?.stop()
        if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
      })

      it('prints what the golden script says', async function () {
        const path = join(TESTDATA, file)
        const blocks = parseScript(readFileSync(path, 'utf8'))
        expect(blocks.length, 'commands in the script').to.be.greaterThan(0)
        const env = { WARDEN_HTTP_ADDR: agent.httpAddress, WARDEN_HTTP_TOKEN: agent.managementToken, HOME: dir }
        const variables = new Map<string, string>([['dir', dir], ['token', agent.managementToken], ['addr', agent.httpAddress]])
        const normaliser = new Normaliser(dir)
        const results: Array<(typeof blocks)[number] & { actual: string }> = []
        for (const block of blocks) {
          const { stdin, captures, modes } = prepare(block.directives.map((item) => substitute(item, variables)), dir)
          const words = splitWords(substitute(block.command, variables))
          expect(words[0], `"${block.command}" starts with warden`).to.equal('warden')
          const ran = await runInProcess(words.slice(1), env, stdin)
          for (const [name, field] of captures) variables.set(name, capture(ran.stdout, field))
          for (const [path, mode] of modes) expect((statSync(path).mode & 0o777).toString(8), `mode of ${path}`).to.equal(mode.toString(8))
          results.push({ ...block, actual: render(ran, normaliser) })
        }
        if (REWRITE) {
          writeFileSync(path, renderScript(results))
          return
        }
        for (const result of results) expect(result.actual, `$ ${result.command}`).to.equal(result.expected)
      })
    })
  }
})
