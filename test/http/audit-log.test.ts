/**
 * The audit log (issue 18, `--audit-log FILE`): one JSON line before each write is proposed and one after it is
 * answered, with the caller's AccessorID, the record's kind and ID and the Raft index; logins and logouts named by
 * the token's AccessorID; one line per refused request (403, and a 429 of the per-client connection limit); `token`
 * taken out of paths; rotation by size keeping N files; fail closed (the audit file replaced by a directory: a write
 * is refused 503 audit_unavailable and not applied, and writes resume once the path is a file again); an agent that
 * cannot open its audit file exits 2 naming the setting. Last, every audit file is searched for every secret the
 * tests used: the management token, created SecretIDs, JWTs, a secret sent in a query.
 *
 * Method: real agents (test/support/agent.ts) with the flag or the config file, the files read as they are on disk.
 * Response and refusal lines are written after the answer, so the tests wait for them (bounded).
 */
import { expect } from 'chai'
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { connect, type Socket } from 'node:net'
import { mkdir, mkdtemp, readdir, readFile, rm, rmdir, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { exportSPKI, SignJWT } from 'jose'
import { CLI, startAgent, type AgentProcess } from '../support/agent.js'
import { keyPair, type KeyPair } from '../support/identity-doubles.js'

type Line = Record<string, any>

const ISSUER = 'https://issuer.test'

async function readLines(path: string): Promise<Line[]> {
  const text = await readFile(path, 'utf8').catch(() => '')
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Line)
}

/** Waits (at most 5 s) for a line of the file that matches; the lines after an answer are not waited for by it. */
async function waitForLine(path: string, matches: (line: Line) => boolean, what: string): Promise<Line> {
  for (let waited = 0; waited < 5_000; waited += 25) {
    const found = (await readLines(path)).find(matches)
    if (found !== undefined) return found
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`no audit line for ${what} in ${path}:\n${(await readFile(path, 'utf8').catch(() => '')).slice(-4000)}`)
}

describe('audit log', function () {
  this.timeout(60_000)
  let scratch: string
  let agent: AgentProcess
  let auditPath: string
  let managementAccessor: string
  /** Every secret a test sent or received: none may appear in any audit file. */
  const secrets: string[] = []

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'warden-audit-'))
    auditPath = join(scratch, 'audit.log')
    agent = await startAgent({ args: ['--audit-log', auditPath] })
    secrets.push(agent.managementToken)
    const self = await agent.request('GET', '/v1/acl/token/self')
    expect(self.status, self.text).to.equal(200)
    managementAccessor = self.body.AccessorID
  })

  after(async () => {
    await agent?.stop()
    await rm(scratch, { recursive: true, force: true })
  })

  it('is created with mode 0600', async () => {
    expect((await stat(auditPath)).mode & 0o777).to.equal(0o600)
  })

  it('writes a policy create before proposing it and its outcome after, with kind, ID, Raft index and the caller', async () => {
    const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'audited', Rules: 'key_prefix "" { policy = "read" }' } })
    expect(response.status, response.text).to.equal(200)
    const id = response.body.ID
    const outcome = await waitForLine(auditPath, (line) => line.type === 'response' && line.id === id, 'the policy create')
    const request = (await readLines(auditPath)).find((line) => line.type === 'request' && line.id === id)
    expect(request).to.include({
      node: 'test-node',
      accessor_id: managementAccessor,
      remote_address: '127.0.0.1',
      method: 'PUT',
      path: '/v1/acl/policy',
      operation: 'acl.policy.create',
      kind: 'acl-policy',
      namespace: 'default',
    })
    expect(Date.parse(request!.time)).to.be.closeTo(Date.now(), 60_000)
    expect(outcome).to.include({ request_id: request!.request_id, status: 200, kind: 'acl-policy', accessor_id: managementAccessor })
    expect(outcome.index).to.equal(response.body.CreateIndex)
    const lines = await readLines(auditPath)
    expect(lines.indexOf(request!)).to.be.below(lines.findIndex((line) => line.type === 'response' && line.id === id))
  })

  it('names a created token by its AccessorID, never its SecretID', async () => {
    const response = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'audited token' } })
    expect(response.status, response.text).to.equal(200)
    secrets.push(response.body.SecretID)
    const outcome = await waitForLine(auditPath, (line) => line.type === 'response' && line.id === response.body.AccessorID, 'the token create')
    expect(outcome).to.include({ operation: 'acl.token.create', kind: 'acl-token', status: 200, accessor_id: managementAccessor })
    expect(outcome.index).to.equal(response.body.CreateIndex)
    expect(await readFile(auditPath, 'utf8')).to.not.include(response.body.SecretID)
  })

  it('takes the token parameter out of the path', async () => {
    const response = await agent.request('PUT', `/v1/acl/policy?token=${agent.managementToken}&pretty`, { token: null, body: { Name: 'by-query' } })
    expect(response.status, response.text).to.equal(200)
    const outcome = await waitForLine(auditPath, (line) => line.type === 'response' && line.id === response.body.ID, 'the write with ?token')
    expect(outcome.path).to.equal('/v1/acl/policy?pretty')
    expect(outcome.accessor_id).to.equal(managementAccessor)
    // A refused one too, with a secret the agent does not know.
    const unknown = randomUUID()
    secrets.push(unknown)
    const refused = await agent.request('DELETE', `/v1/acl/policy/${response.body.ID}?token=${unknown}`, { token: null })
    expect(refused.status).to.equal(403)
    const line = await waitForLine(auditPath, (candidate) => candidate.type === 'refused' && candidate.method === 'DELETE', 'the refused delete')
    expect(line).to.include({ status: 403, error: 'acl_not_found', accessor_id: null, path: `/v1/acl/policy/${response.body.ID}` })
  })

  it('writes one line for a request refused 403 for want of permission, naming the caller', async () => {
    const weak = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'no rights' } })
    expect(weak.status, weak.text).to.equal(200)
    secrets.push(weak.body.SecretID)
    const refused = await agent.request('PUT', '/v1/acl/policy', { token: weak.body.SecretID, body: { Name: 'not-allowed' } })
    expect(refused.status).to.equal(403)
    const line = await waitForLine(auditPath, (candidate) => candidate.type === 'refused' && candidate.accessor_id === weak.body.AccessorID, 'the 403')
    expect(line).to.include({ status: 403, error: 'permission_denied', method: 'PUT', path: '/v1/acl/policy' })
    // Refused before anything was proposed: no request line.
    expect((await readLines(auditPath)).filter((candidate) => candidate.accessor_id === weak.body.AccessorID && candidate.type === 'request')).to.deep.equal([])
  })

  it('does not audit reads', async () => {
    const before = (await readLines(auditPath)).length
    for (let n = 0; n < 5; n += 1) expect((await agent.request('GET', '/v1/acl/policies')).status).to.equal(200)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect((await readLines(auditPath)).length).to.equal(before)
  })

  describe('logins and logouts', () => {
    let key: KeyPair

    before(async () => {
      key = await keyPair('a')
      const method = await agent.request('PUT', '/v1/acl/auth-method', {
        body: { Name: 'static', Type: 'jwt', Config: { JWTValidationPubKeys: [await exportSPKI(key.publicKey)], BoundIssuer: ISSUER, BoundAudiences: ['warden'], ClaimMappings: { sub: 'name' } } },
      })
      expect(method.status, method.text).to.equal(200)
      const rule = await agent.request('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: 'static', BindType: 'service', BindName: 'web' } })
      expect(rule.status, rule.text).to.equal(200)
    })

    it('names the token a login created and the token a logout deleted by their AccessorID', async () => {
      const now = Math.floor(Date.now() / 1000)
      const jwt = await new SignJWT({ iss: ISSUER, aud: 'warden', sub: 'web', iat: now, exp: now + 300 }).setProtectedHeader({ alg: 'RS256', kid: 'a' }).sign(key.privateKey)
      secrets.push(jwt)
      const login = await agent.request('POST', '/v1/acl/login', { token: null, body: { AuthMethod: 'static', BearerToken: jwt } })
      expect(login.status, login.text).to.equal(200)
      secrets.push(login.body.SecretID)
      const loggedIn = await waitForLine(auditPath, (line) => line.type === 'response' && line.operation === 'acl.login', 'the login')
      expect(loggedIn).to.include({ kind: 'acl-token', id: login.body.AccessorID, status: 200, path: '/v1/acl/login', accessor_id: null })
      expect(loggedIn.index).to.equal(login.body.CreateIndex)

      const logout = await agent.request('POST', '/v1/acl/logout', { token: login.body.SecretID })
      expect(logout.status, logout.text).to.equal(200)
      const loggedOut = await waitForLine(auditPath, (line) => line.type === 'response' && line.path === '/v1/acl/logout', 'the logout')
      expect(loggedOut).to.include({ operation: 'acl.token.delete', kind: 'acl-token', id: login.body.AccessorID, accessor_id: login.body.AccessorID, status: 200 })
      expect(loggedOut.index).to.be.above(loggedIn.index)

      // A login refused (a JWT signed by another key) is a refusal line.
      const stranger = await keyPair('a')
      const forged = await new SignJWT({ iss: ISSUER, aud: 'warden', sub: 'web', iat: now, exp: now + 300 }).setProtectedHeader({ alg: 'RS256', kid: 'a' }).sign(stranger.privateKey)
      secrets.push(forged)
      const refused = await agent.request('POST', '/v1/acl/login', { token: null, body: { AuthMethod: 'static', BearerToken: forged } })
      expect(refused.status).to.equal(403)
      await waitForLine(auditPath, (line) => line.type === 'refused' && line.path === '/v1/acl/login', 'the refused login')
    })
  })

  it('fails closed: while the file cannot be written a write is refused 503 audit_unavailable and not applied; it resumes after', async () => {
    await rm(auditPath)
    await mkdir(auditPath)
    const refused = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'while-unaudited' } })
    expect(refused.status, refused.text).to.equal(503)
    expect(refused.body.Code).to.equal('audit_unavailable')
    const read = await agent.request('GET', '/v1/acl/policy/name/while-unaudited')
    expect(read.status, 'the refused write was applied').to.equal(404)
    // Logins are writes too.
    const token = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'while unaudited' } })
    expect(token.status).to.equal(503)
    // Reads go on.
    expect((await agent.request('GET', '/v1/acl/policies')).status).to.equal(200)
    expect(agent.logs.some((line) => line.includes('the audit log cannot be written'))).to.equal(true)

    await rmdir(auditPath)
    const resumed = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'while-unaudited' } })
    expect(resumed.status, resumed.text).to.equal(200)
    await waitForLine(auditPath, (line) => line.type === 'response' && line.id === resumed.body.ID, 'the write after the file came back')
    expect((await stat(auditPath)).mode & 0o777).to.equal(0o600)
  })

  describe('rotation and connection refusals', () => {
    let second: AgentProcess
    let directory: string
    const sockets: Socket[] = []

    before(async () => {
      directory = join(scratch, 'rotated')
      await mkdir(directory)
      const config = join(scratch, 'audit.json')
      await writeFile(config, JSON.stringify({ audit: { path: join(directory, 'audit.log'), rotate_bytes: 2048, rotate_keep: 2 } }))
      second = await startAgent({ args: ['--config-file', config, '--http-max-conns-per-client', '2'] })
      secrets.push(second.managementToken)
    })

    after(async () => {
      for (const socket of sockets) socket.destroy()
      await second?.stop()
    })

    it('rotates at audit.rotate_bytes, keeping audit.rotate_keep files', async () => {
      for (let n = 0; n < 30; n += 1) {
        const response = await second.request('PUT', '/v1/acl/policy', { body: { Name: `rotated-${n}` } })
        expect(response.status, response.text).to.equal(200)
      }
      await waitForLine(join(directory, 'audit.log'), (line) => line.type === 'response' && line.path === '/v1/acl/policy' && line.status === 200 && line.index !== undefined && line.id !== undefined && line.operation === 'acl.policy.create', 'a write')
      expect((await readdir(directory)).sort()).to.deep.equal(['audit.log', 'audit.log.1', 'audit.log.2'])
      for (const name of ['audit.log.1', 'audit.log.2']) {
        expect((await stat(join(directory, name))).size).to.be.within(1, 2048)
        for (const line of await readLines(join(directory, name))) expect(line.node).to.equal('test-node')
      }
    })

    it('writes a line for a connection refused 429 by the per-client limit', async () => {
      const { hostname, port } = new URL(second.url)
      for (let n = 0; n < 2; n += 1) {
        const socket = connect(Number(port), hostname)
        sockets.push(socket)
        await new Promise((resolve) => socket.once('connect', resolve))
      }
      // The test client's own connections may be among the two: a third connection is refused either way.
      const extra = connect(Number(port), hostname)
      sockets.push(extra)
      const answer = await new Promise<string>((resolve) => {
        let text = ''
        extra.on('data', (chunk: Buffer) => (text += chunk.toString()))
        extra.once('close', () => resolve(text))
      })
      expect(answer).to.match(/^HTTP\/1\.1 429/)
      await waitForLine(join(directory, 'audit.log'), (line) => line.type === 'refused' && line.status === 429, 'the refused connection')
      for (const socket of sockets.splice(0)) socket.destroy()
    })
  })

  it('stops an agent that cannot open its audit file with exit 2, naming the setting', async () => {
    const exit = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(process.execPath, [CLI, 'agent', '--dev', '--http-addr', '127.0.0.1:0', '--cluster-addr', '127.0.0.1:0', '--audit-log', join(scratch, 'missing', 'audit.log')], { stdio: ['ignore', 'pipe', 'pipe'] })
      let output = ''
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      child.once('close', (code) => {
        clearTimeout(timer)
        resolve({ code, output })
      })
    })
    expect(exit.code, exit.output).to.equal(2)
    expect(exit.output).to.include('--audit-log: cannot open').and.not.include('agent ready')
  })

  // Last: mocha runs a describe's own tests before its nested describes, whose secrets this must see.
  describe('at the end', () => {
  it('holds no secret the tests used, in any audit file', async () => {
    expect(secrets.length).to.be.at.least(8)
    const files = [auditPath, ...(await readdir(join(scratch, 'rotated'))).map((name) => join(scratch, 'rotated', name))]
    let bytes = 0
    for (const file of files) {
      const text = await readFile(file, 'utf8')
      bytes += text.length
      for (const secret of secrets) expect(text, `${file} holds a secret`).to.not.include(secret)
    }
    expect(bytes).to.be.above(1000)
  })
  })
})
