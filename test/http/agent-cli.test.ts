/**
 * The `warden agent` command line, per warden's readings ("The agent") and the issue: a bad flag, flag value or
 * config-file value stops the agent with exit code 2 and one line naming it; the initial management token may come
 * from `--initial-management-token`, `--initial-management-token-file` or `WARDEN_INITIAL_MANAGEMENT_TOKEN`, makes that
 * secret a management token and suppresses the printed "Management token:" line; and a restart on the same data dir
 * keeps what was written.
 */
import { expect } from 'chai'
import { spawn } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CLI, startAgent, type AgentProcess } from '../support/agent.js'
import { GLOBAL_MANAGEMENT_ID } from '../support/api.js'

const GLOBAL_MANAGEMENT = { ID: GLOBAL_MANAGEMENT_ID, Name: 'global-management' }

interface Exit {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `warden agent ...args` to completion (killed after 10 s, which fails the test: a bad config must not start). */
function runAgent(args: string[], env: Record<string, string> = {}): Promise<Exit> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, 'agent', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
    child.once('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

/** Exit code 2 and exactly one line of output, which names `what`. */
function expectUsageError(exit: Exit, what: string): void {
  const lines = `${exit.stdout}${exit.stderr}`.split('\n').filter((line) => line.trim() !== '')
  expect(exit.code, `${exit.stdout}${exit.stderr}`).to.equal(2)
  expect(lines, `${exit.stdout}${exit.stderr}`).to.have.length(1)
  expect(lines[0]).to.include(what)
  expect(exit.stdout).to.not.include('agent ready')
}

describe('warden agent command line', () => {
  let scratch: string
  /** Flags every run gets, so that a run which wrongly starts binds nothing fixed. */
  let base: string[]

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'warden-cli-'))
    base = ['--data-dir', join(scratch, 'data'), '--http-addr', '127.0.0.1:0', '--cluster-addr', '127.0.0.1:0']
  })
  after(async () => {
    await rm(scratch, { recursive: true, force: true })
  })

  describe('bad flags and config values exit 2 with one line naming them', () => {
    it('an unknown flag', async () => {
      expectUsageError(await runAgent(['--dev', ...base, '--no-such-flag', 'x']), '--no-such-flag')
    })

    it('a flag missing its value', async () => {
      expectUsageError(await runAgent(['--dev', ...base, '--node-name']), '--node-name')
    })

    it('a bad flag value: --default-policy, --down-policy, --log-level, --http-addr, --datacenter', async () => {
      const cases: Array<[string, string]> = [
        ['--default-policy', 'maybe'],
        ['--down-policy', 'sometimes'],
        ['--log-level', 'loud'],
        ['--http-addr', 'nowhere'],
        ['--datacenter', 'DC One'],
      ]
      for (const [flag, value] of cases) expectUsageError(await runAgent(['--dev', ...base, flag, value]), flag)
    })

    it('without --dev, a missing --data-dir', async () => {
      expectUsageError(await runAgent(['--http-addr', '127.0.0.1:0', '--cluster-addr', '127.0.0.1:0']), '--data-dir')
    })

    it('an --initial-management-token-file that cannot be read', async () => {
      expectUsageError(await runAgent(['--dev', ...base, '--initial-management-token-file', join(scratch, 'absent')]), '--initial-management-token-file')
    })

    it('a bad config-file value names its key', async () => {
      const cases: Array<[unknown, string]> = [
        [{ acl: { token_min_expiration_ttl: 'soon' } }, 'token_min_expiration_ttl'],
        [{ acl: { default_policy: 'perhaps' } }, 'default_policy'],
        [{ log_level: 7 }, 'log_level'],
      ]
      const wrong: string[] = []
      for (const [content, key] of cases) {
        const file = join(scratch, `bad-${key}.json`)
        await writeFile(file, JSON.stringify(content))
        const exit = await runAgent(['--dev', ...base, '--config-file', file])
        try {
          expectUsageError(exit, key)
        } catch {
          wrong.push(`${JSON.stringify(content)} -> exit ${exit.code}: ${(exit.stdout + exit.stderr).trim()}`)
        }
      }
      expect(wrong, 'these did not exit 2 with one line naming the config key').to.deep.equal([])
    })

    it('an unknown config-file key names it', async () => {
      const file = join(scratch, 'unknown-key.json')
      await writeFile(file, JSON.stringify({ colour: 'blue' }))
      expectUsageError(await runAgent(['--dev', ...base, '--config-file', file]), 'colour')
    })

    it('a cluster key shorter than 16 bytes names the flag and how to make one (warden keygen), without quoting it', async () => {
      const exit = await runAgent(['--dev', ...base, '--cluster-key', 'not-a-key-0123456789'])
      expectUsageError(exit, '--cluster-key')
      expect(exit.stderr).to.include('warden keygen').and.not.include('not-a-key-0123456789')
      expectUsageError(await runAgent(['--dev', ...base], { WARDEN_CLUSTER_KEY: 'abcdef0123456789' }), 'WARDEN_CLUSTER_KEY')
    })

    it('a config file that is not JSON names --config-file', async () => {
      const file = join(scratch, 'not-json.json')
      await writeFile(file, '{ acl: ')
      expectUsageError(await runAgent(['--dev', ...base, '--config-file', file]), '--config-file')
    })
  })

  describe('the initial management token', () => {
    let agent: AgentProcess | undefined
    afterEach(async () => {
      await agent?.stop()
      agent = undefined
    })

    /** The secret manages everything: it reads itself as a global-management token and may write. */
    async function expectManagement(running: AgentProcess, secret: string): Promise<void> {
      const self = await running.request('GET', '/v1/acl/token/self', { token: secret })
      expect(self.status, self.text).to.equal(200)
      expect(self.body.SecretID).to.equal(secret)
      expect(self.body.Policies).to.deep.include(GLOBAL_MANAGEMENT)
      const write = await running.request('PUT', '/v1/acl/policy', { token: secret, body: { Name: 'written-by-initial-token' } })
      expect(write.status, write.text).to.equal(200)
    }

    it('--initial-management-token makes that secret a management token, with no "Management token:" line', async () => {
      const secret = randomUUID()
      agent = await startAgent({ args: ['--initial-management-token', secret] })
      expect(agent.managementToken).to.equal('')
      expect(agent.logs.some((line) => line.startsWith('Management token:'))).to.equal(false)
      await expectManagement(agent, secret)
    })

    it('WARDEN_INITIAL_MANAGEMENT_TOKEN in the environment works the same', async () => {
      const secret = randomUUID()
      agent = await startAgent({ env: { WARDEN_INITIAL_MANAGEMENT_TOKEN: secret } })
      expect(agent.logs.some((line) => line.startsWith('Management token:'))).to.equal(false)
      await expectManagement(agent, secret)
    })

    it('--initial-management-token-file reads the secret from a file', async () => {
      const secret = randomUUID()
      const file = join(scratch, 'management-token')
      await writeFile(file, `${secret}\n`, { mode: 0o600 })
      agent = await startAgent({ args: ['--initial-management-token-file', file] })
      expect(agent.logs.some((line) => line.startsWith('Management token:'))).to.equal(false)
      await expectManagement(agent, secret)
    })

    it('the secret is never written into the log', async () => {
      const secret = randomUUID()
      agent = await startAgent({ args: ['--initial-management-token', secret] })
      await expectManagement(agent, secret)
      expect(agent.logs.join('\n')).to.not.include(secret)
    })

    it('any other secret is still refused: 403 acl_not_found', async () => {
      const secret = randomUUID()
      agent = await startAgent({ args: ['--initial-management-token', secret] })
      const response = await agent.request('GET', '/v1/acl/tokens', { token: randomUUID() })
      expect(response.status, response.text).to.equal(403)
      expect(response.body.Code).to.equal('acl_not_found')
    })
  })

  describe('secrets', () => {
    it('a secret on the command line, or in a file others may read, is a warning in the log naming the flag or file, never the secret', async () => {
      const key = randomBytes(32).toString('base64')
      const secret = randomUUID()
      const keyFile = join(scratch, 'open-cluster.key')
      await writeFile(keyFile, `${key}\n`, { mode: 0o644 })
      await chmod(keyFile, 0o644)
      const agent = await startAgent({ args: ['--cluster-key-file', keyFile, '--initial-management-token', secret] })
      try {
        const warnings = agent.logs.filter((line) => line.startsWith('{') && (JSON.parse(line) as { level: number }).level === 40)
        expect(warnings.some((line) => line.includes(keyFile) && line.includes('chmod 600')), warnings.join('\n')).to.equal(true)
        expect(warnings.some((line) => line.includes('--initial-management-token') && line.includes('WARDEN_INITIAL_MANAGEMENT_TOKEN')), warnings.join('\n')).to.equal(true)
        expect(agent.logs.join('\n')).to.not.include(key).and.not.include(secret)
      } finally {
        await agent.stop()
      }
    })
  })

  describe('restart on the same data dir', () => {
    it('in --dev prints the generated management token once: a restart prints none, and the kept token still works', async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'warden-dev-restart-'))
      try {
        const first = await startAgent({ dataDir, keepDataDir: true })
        const printed = first.logs.filter((line) => line.startsWith('Management token:'))
        expect(printed).to.deep.equal([`Management token: ${first.managementToken}`])
        expect(await first.stop()).to.equal(0)
        const second = await startAgent({ dataDir, keepDataDir: true })
        try {
          expect(second.logs.some((line) => line.startsWith('Management token:'))).to.equal(false)
          expect(second.managementToken).to.equal(first.managementToken)
          const self = await second.request('GET', '/v1/acl/token/self')
          expect(self.status, self.text).to.equal(200)
        } finally {
          await second.stop()
        }
      } finally {
        await rm(dataDir, { recursive: true, force: true })
      }
    })

    it('keeps policies and tokens, their IDs and indexes, and the index does not go back', async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'warden-restart-'))
      const secret = randomUUID()
      const options = { dev: false, dataDir, keepDataDir: true, args: ['--initial-management-token', secret] }
      try {
        let agent = await startAgent(options)
        const policy = await agent.request('PUT', '/v1/acl/policy', { token: secret, body: { Name: 'survives', Rules: 'acl = "read"' } })
        expect(policy.status, policy.text).to.equal(200)
        const token = await agent.request('PUT', '/v1/acl/token', { token: secret, body: { Description: 'survivor', Policies: [{ Name: 'survives' }] } })
        expect(token.status, token.text).to.equal(200)
        const indexBefore = Number((await agent.request('GET', '/v1/acl/tokens', { token: secret })).headers.get('X-Service-Index'))
        expect(await agent.stop()).to.equal(0)

        agent = await startAgent(options)
        try {
          const readPolicy = await agent.request('GET', `/v1/acl/policy/${policy.body.ID}`, { token: secret })
          expect(readPolicy.status, readPolicy.text).to.equal(200)
          expect(readPolicy.body).to.deep.include({ Name: 'survives', Rules: 'acl = "read"', CreateIndex: policy.body.CreateIndex, ModifyIndex: policy.body.ModifyIndex })
          const readToken = await agent.request('GET', `/v1/acl/token/${token.body.AccessorID}`, { token: secret })
          expect(readToken.status, readToken.text).to.equal(200)
          expect(readToken.body).to.deep.include({ SecretID: token.body.SecretID, Description: 'survivor' })
          expect(readToken.body.Policies).to.deep.equal([{ ID: policy.body.ID, Name: 'survives' }])
          const used = await agent.request('GET', '/v1/acl/policies', { token: token.body.SecretID })
          expect(used.status, used.text).to.equal(200)
          const list = await agent.request('GET', '/v1/acl/tokens', { token: secret })
          expect(Number(list.headers.get('X-Service-Index'))).to.be.at.least(indexBefore)
          const next = await agent.request('PUT', '/v1/acl/policy', { token: secret, body: { Name: 'after-restart' } })
          expect(next.status, next.text).to.equal(200)
          expect(next.body.CreateIndex).to.be.above(policy.body.ModifyIndex)
        } finally {
          await agent.stop()
        }
      } finally {
        await rm(dataDir, { recursive: true, force: true })
      }
    })
  })
})
