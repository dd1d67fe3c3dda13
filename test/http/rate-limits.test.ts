/**
 * Rate limits (issue 18; Consul 1.13's `limits.request_limits`): per node, one rate for reads and one for writes, in
 * mode disabled (the default), permissive (log and serve) or enforcing (answer 429 `rate_limited` with a Retry-After
 * of whole seconds, before any work, so a refused write leaves nothing behind). `/v1/status/*` is exempt. Logins have
 * their own rate per auth method (`limits.login_rate`): one method over it is refused, another is not.
 *
 * Method: real agents with a config file, bursts sent in parallel (the bucket holds a rate's worth, so a burst of
 * three times the rate is refused in part whatever the machine's speed), and the state read back afterwards.
 */
import { expect } from 'chai'
import { generateKeyPairSync } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startAgent, type AgentProcess, type ApiResponse } from '../support/agent.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

function expectRateLimited(response: ApiResponse): void {
  expect(response.status, response.text).to.equal(429)
  expect(response.body.Code).to.equal('rate_limited')
  expect(response.body.Error).to.be.a('string').and.include('rate limit')
  const retryAfter = response.headers.get('Retry-After')
  expect(retryAfter, 'Retry-After').to.match(/^\d+$/)
  expect(Number(retryAfter)).to.be.at.least(1)
}

describe('rate limits', () => {
  let scratch: string
  let agents: AgentProcess[] = []
  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'warden-rates-'))
  })
  after(async () => {
    await Promise.all(agents.map((agent) => agent.stop()))
    agents = []
    await rm(scratch, { recursive: true, force: true })
  })

  async function agentWith(name: string, config: unknown): Promise<AgentProcess> {
    const file = join(scratch, `${name}.json`)
    await writeFile(file, JSON.stringify(config))
    const agent = await startAgent({ args: ['--config-file', file] })
    agents.push(agent)
    return agent
  }

  const createToken = (agent: AgentProcess, description: string): Promise<ApiResponse> =>
    agent.request('PUT', '/v1/acl/token', { body: { Description: description, ServiceIdentities: [{ ServiceName: 'web' }] } })

  describe('enforcing, write_rate 2 and read_rate 4', () => {
    let agent: AgentProcess
    let auditPath: string
    before(async () => {
      auditPath = join(scratch, 'audit.log')
      agent = await agentWith('enforcing', { limits: { request_limits: { mode: 'enforcing', write_rate: 2, read_rate: 4 } }, audit: { path: auditPath } })
    })

    it('a burst of writes: those over the rate get 429 rate_limited with Retry-After, and none of them is applied', async () => {
      const answers = await Promise.all(Array.from({ length: 6 }, (_, n) => createToken(agent, `burst-${n}`)))
      const served = answers.filter((answer) => answer.status === 200)
      const refused = answers.filter((answer) => answer.status !== 200)
      // At most 2 held and 2 more a second: of 6 sent at once, at least 2 are refused however slow the machine.
      expect(refused.length, answers.map((answer) => answer.status).join(',')).to.be.at.least(2)
      expect(served.length).to.be.at.least(1)
      for (const answer of refused) expectRateLimited(answer)
      const list = await agent.request('GET', '/v1/acl/tokens')
      expect(list.status, list.text).to.equal(200)
      const descriptions = (list.body as Array<{ Description: string }>).map((token) => token.Description).filter((text) => text.startsWith('burst-'))
      expect(descriptions.sort()).to.deep.equal(served.map((answer) => answer.body.Description as string).sort())
    })

    it('reads are not held back by the write rate: with the writes spent, a read is served', async () => {
      const [read, ...writes] = await Promise.all([agent.request('GET', '/v1/acl/policies'), ...Array.from({ length: 8 }, (_, n) => createToken(agent, `spend-${n}`))])
      expect(writes.some((answer) => answer.status === 429)).to.equal(true)
      expect(read!.status, read!.text).to.equal(200)
    })

    it('writes are not held back by the read rate: with the reads spent, a write is served', async () => {
      await sleep(1_100)
      const reads = await Promise.all(Array.from({ length: 12 }, () => agent.request('GET', '/v1/acl/policies')))
      expect(reads.some((answer) => answer.status === 429)).to.equal(true)
      for (const answer of reads.filter((read) => read.status !== 200)) expectRateLimited(answer)
      const write = await createToken(agent, 'after-reads')
      expect(write.status, write.text).to.equal(200)
    })

    it('/v1/status/* is exempt', async () => {
      const answers = await Promise.all(Array.from({ length: 20 }, () => agent.request('GET', '/v1/status/leader')))
      expect(answers.map((answer) => answer.status)).to.deep.equal(Array(20).fill(200))
    })

    it('a refusal is a `refused` line of the audit log, with status 429 and error rate_limited', async () => {
      await sleep(200)
      const lines = (await readFile(auditPath, 'utf8'))
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>)
      const refused = lines.filter((line) => line.type === 'refused' && line.status === 429)
      expect(refused.length).to.be.at.least(3)
      expect(refused[0]).to.include({ error: 'rate_limited', method: 'PUT', path: '/v1/acl/token' })
    })
  })

  it('permissive: every request over the rate is served, and the node logs it', async () => {
    const agent = await agentWith('permissive', { limits: { request_limits: { mode: 'permissive', write_rate: 1 } } })
    const answers = await Promise.all(Array.from({ length: 5 }, (_, n) => createToken(agent, `permissive-${n}`)))
    expect(answers.map((answer) => answer.status)).to.deep.equal(Array(5).fill(200))
    const logged = agent.logs.filter((line) => line.includes('request exceeded the write rate limit'))
    expect(logged.length).to.be.at.least(1)
    expect(JSON.parse(logged[0]!)).to.include({ limit_type: 'global/write', limit_enforced: false })
  })

  it('disabled by default: rates without a mode limit nothing', async () => {
    const agent = await agentWith('disabled', { limits: { request_limits: { write_rate: 1, read_rate: 1 } } })
    const answers = await Promise.all([
      ...Array.from({ length: 5 }, (_, n) => createToken(agent, `disabled-${n}`)),
      ...Array.from({ length: 5 }, () => agent.request('GET', '/v1/acl/policies')),
    ])
    expect(answers.map((answer) => answer.status)).to.deep.equal(Array(10).fill(200))
    expect(agent.logs.some((line) => line.includes('rate limit'))).to.equal(false)
  })

  it('login_rate 1: a method over its rate is refused 429 with Retry-After; another method is not', async () => {
    const agent = await agentWith('logins', { limits: { login_rate: 1 } })
    const publicKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString()
    for (const name of ['limited', 'other']) {
      const created = await agent.request('PUT', '/v1/acl/auth-method', { body: { Name: name, Type: 'jwt', Config: { JWTValidationPubKeys: [publicKey] } } })
      expect(created.status, created.text).to.equal(200)
    }
    const login = (method: string): Promise<ApiResponse> =>
      agent.request('POST', '/v1/acl/login', { token: null, body: { AuthMethod: method, BearerToken: 'not-a-valid-jwt' } })
    // The bearer token is refused (not a JWT), but the attempt counts: it is the identity check the rate protects.
    const first = await login('limited')
    expect(first.status, first.text).to.not.equal(429)
    expectRateLimited(await login('limited'))
    const other = await login('other')
    expect(other.status, other.text).to.not.equal(429)
    expect(other.body.Code).to.not.equal('rate_limited')
  })
})
