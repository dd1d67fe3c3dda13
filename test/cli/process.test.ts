/**
 * The built `warden` binary as an operator runs it: exit codes and one-line errors for bad flags, an unreachable
 * agent, a certificate it cannot verify and API refusals; -help; secrets never echoed; version, completion. Each
 * case spawns dist/cli/main.js (npm test builds it first) with its environment, never with a secret in argv unless
 * the case is about that.
 */
import { expect } from 'chai'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from '../../cluster/lib.js'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { makeCertificate, startDouble, type Double } from '../support/identity-doubles.js'
import { runWarden, type Ran } from './run.js'

function warden(args: string[], env: Record<string, string> = {}, stdin = ''): Promise<Ran> {
  return runWarden(args, { env, stdin })
}

function lines(text: string): string[] {
  return text.trimEnd().split('\n')
}

describe('command line: the warden binary', function () {
  this.timeout(30_000)

  describe('without an agent', function () {
    it('a flag the command does not know: exit 1, the flag named on the first line, then the usage', async function () {
      const ran = await warden(['acl', 'token', 'create', '-nope'])
      expect(ran.code).to.equal(1)
      expect(lines(ran.stderr)[0]).to.equal('flag provided but not defined: -nope')
      expect(ran.stderr).to.include('Usage: warden acl token create')
    })

    it('takes Consul\'s flag forms: one or two dashes, -flag=value and -flag value', async function () {
      for (const form of [['-http-addr=nowhere:1'], ['--http-addr', 'nowhere:1'], ['-http-addr', 'nowhere:1'], ['--http-addr=nowhere:1']]) {
        const ran = await warden(['acl', 'policy', 'list', ...form])
        expect(ran.code, form.join(' ')).to.equal(1)
        expect(lines(ran.stderr), form.join(' ')).to.have.length(1)
        expect(ran.stderr, form.join(' ')).to.include('nowhere:1')
      }
    })

    it('an unreachable agent: exit 1 and one line saying the connection was refused', async function () {
      const ran = await warden(['acl', 'policy', 'list'], { WARDEN_HTTP_ADDR: `127.0.0.1:${await freePort()}` })
      expect(ran.code).to.equal(1)
      expect(lines(ran.stderr)).to.have.length(1)
      expect(ran.stderr).to.match(/^Failed to retrieve the policy list: .*connection refused/)
    })

    it('an address that is not HOST:PORT or http(s)://: exit 1 naming -http-addr', async function () {
      const ran = await warden(['acl', 'policy', 'list', '-http-addr', 'ftp://x:1'])
      expect(ran.code).to.equal(1)
      expect(lines(ran.stderr)[0]).to.match(/^-http-addr: .*scheme must be http:\/\/ or https:\/\//)
    })

    it('-help on a command prints its flags and exits 0; a group alone prints its commands and exits 1', async function () {
      const help = await warden(['config', 'delete', '-help'])
      expect(help.code).to.equal(0)
      for (const flag of ['-kind', '-name', '-cas', '-modify-index', '-http-addr', '-token-file']) expect(help.stdout).to.include(flag)
      const group = await warden(['acl'])
      expect(group.code).to.equal(1)
      expect(group.stdout).to.include('token').and.include('policy').and.include('auth-method')
      const unknown = await warden(['nosuch'])
      expect(unknown.code).to.equal(1)
      expect(unknown.stderr).to.match(/^Unknown command: warden nosuch/)
    })

    it('warden agent keeps exit 2 for a bad flag', async function () {
      const ran = await warden(['agent', '--no-such-flag'])
      expect(ran.code).to.equal(2)
      expect(lines(ran.stderr)).to.have.length(1)
    })

    it('keygen prints 32 random bytes in base64, different each time', async function () {
      const [first, second] = await Promise.all([warden(['keygen']), warden(['keygen'])])
      expect(first.code).to.equal(0)
      expect(Buffer.from(first.stdout.trim(), 'base64')).to.have.length(32)
      expect(first.stdout).to.not.equal(second.stdout)
    })

    it('prints its version, the completion scripts, and completes a line under COMP_LINE', async function () {
      expect((await warden(['version'])).stdout).to.match(/^warden v\d+\.\d+\.\d+/)
      const bash = await warden(['completion', 'bash'])
      expect(bash.stdout).to.match(/^complete -C '.*main\.js' warden\n$/)
      const zsh = await warden(['completion', 'zsh'])
      expect(zsh.stdout).to.include('bashcompinit').and.include('complete -o nospace -C')
      const completed = await warden([], { COMP_LINE: 'warden acl token cr', COMP_POINT: '19' })
      expect(completed.code).to.equal(0)
      expect(completed.stdout).to.equal('create\n')
    })
  })

  describe('over TLS', function () {
    const certificate = makeCertificate()
    let double: Double | undefined
    let dir: string

    before(async function () {
      double = await startDouble(certificate, () => ({ status: 200, body: ['dc7'] }))
      dir = mkdtempSync(join(tmpdir(), 'warden-cli-tls-'))
      writeFileSync(join(dir, 'ca.pem'), certificate.cert)
    })

    after(async function () {
      await double?.close()
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    })

    it('verifies the agent against -ca-file, and a certificate it cannot verify is one line and exit 1', async function () {
      const address = double!.url.replace(/\/$/, '')
      const trusted = await warden(['catalog', 'datacenters', '-http-addr', address, '-ca-file', join(dir, 'ca.pem')])
      expect(trusted.code, trusted.stderr).to.equal(0)
      expect(trusted.stdout).to.equal('dc7\n')
      const fromEnv = await warden(['catalog', 'datacenters'], { WARDEN_HTTP_ADDR: address, WARDEN_CACERT: join(dir, 'ca.pem') })
      expect(fromEnv.stdout).to.equal('dc7\n')
      const untrusted = await warden(['catalog', 'datacenters', '-http-addr', address])
      expect(untrusted.code).to.equal(1)
      expect(lines(untrusted.stderr)).to.have.length(1)
      expect(untrusted.stderr).to.match(/certificate/i)
      const missing = await warden(['catalog', 'datacenters', '-http-addr', address, '-ca-file', join(dir, 'absent.pem')])
      expect(missing.code).to.equal(1)
      expect(lines(missing.stderr)).to.deep.equal([`-ca-file: cannot read ${join(dir, 'absent.pem')}: no such file`])
    })
  })

  describe('against an agent', function () {
    let agent: AgentProcess
    let env: Record<string, string>

    before(async function () {
      agent = await startAgent()
      env = { WARDEN_HTTP_ADDR: agent.httpAddress, WARDEN_HTTP_TOKEN: agent.managementToken }
    })

    after(async function () {
      await agent?.stop()
    })

    it('an API refusal is one line with the status and code, exit 1', async function () {
      const ran = await warden(['acl', 'policy', 'read', '-name', 'nope'], env)
      expect(ran.code).to.equal(1)
      expect(lines(ran.stderr)).to.deep.equal(['Error reading policy "nope": Unexpected response code: 404 (not_found: policy named "nope" does not exist)'])
    })

    it('never prints a secret it was given, even when the server refuses it', async function () {
      const secret = '6b1d6f0e-3f0a-4c2e-9a51-7c3e2d1f0a9b'
      const refused = await warden(['acl', 'token', 'read', '-self', '-token', secret], { WARDEN_HTTP_ADDR: agent.httpAddress })
      expect(refused.code).to.equal(1)
      expect(refused.stderr).to.not.include(secret)
      const created = await warden(['acl', 'token', 'create', '-secret', secret, '-policy-name', 'no-such-policy'], env)
      expect(created.code).to.equal(1)
      expect(created.stderr + created.stdout).to.not.include(secret)
      expect(created.stderr + created.stdout).to.not.include(agent.managementToken)
    })

    it('-format=json prints the API\'s JSON, the same record the API gives', async function () {
      const ran = await warden(['acl', 'policy', 'read', '-name', 'global-management', '-format=json'], env)
      expect(ran.code).to.equal(0)
      const printed = JSON.parse(ran.stdout) as Record<string, unknown>
      const api = await agent.request('GET', '/v1/acl/policy/name/global-management')
      expect(printed).to.deep.equal(api.body)
      expect(ran.stdout).to.match(/^\{\n {4}"ID"/)
    })

    it('reads the token from -token-file and WARDEN_HTTP_TOKEN_FILE, a flag winning over the environment', async function () {
      const dir = mkdtempSync(join(tmpdir(), 'warden-cli-token-'))
      try {
        writeFileSync(join(dir, 'token'), `${agent.managementToken}\n`)
        const fromFile = await warden(['acl', 'token', 'read', '-self', '-format=json', '-token-file', join(dir, 'token')], { WARDEN_HTTP_ADDR: agent.httpAddress })
        expect(JSON.parse(fromFile.stdout).SecretID).to.equal(agent.managementToken)
        const fromEnv = await warden(['acl', 'token', 'read', '-self', '-format=json'], { WARDEN_HTTP_ADDR: agent.httpAddress, WARDEN_HTTP_TOKEN_FILE: join(dir, 'token') })
        expect(JSON.parse(fromEnv.stdout).SecretID).to.equal(agent.managementToken)
        const flagWins = await warden(['acl', 'token', 'read', '-self', '-token-file', join(dir, 'token')], { ...env, WARDEN_HTTP_TOKEN: 'not-the-token' })
        expect(flagWins.code).to.equal(0)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    })

    it('reads rules from standard input with -rules -', async function () {
      const ran = await warden(['acl', 'policy', 'create', '-name', 'from-stdin', '-rules', '-', '-format=json'], env, 'operator = "read"\n')
      expect(ran.code, ran.stderr).to.equal(0)
      expect(JSON.parse(ran.stdout).Rules).to.equal('operator = "read"\n')
    })
  })
})
