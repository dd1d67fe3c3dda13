/**
 * The API over HTTPS (issue 18): `--https-addr` serves the same API as plain HTTP with the agent's certificate;
 * `--tls-verify-incoming` requires a client certificate the CA signed on HTTPS (plain HTTP, when on, is not
 * affected, as in Consul); a client refused for its certificate gets a ConnectionError that says why and that the
 * request never reached the server; the CLI reaches it with -ca-file and -client-cert/-client-key; a certificate
 * that would fail every connection stops the start with exit 2 naming the setting.
 *
 * Method: real agent processes on 127.0.0.1 with certificates made by `warden tls`'s generator in a temporary dir.
 */
import { expect } from 'chai'
import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConnectionError, WardenClient } from '../../src/api/index.js'
import { createCa, createCert, type Ca } from '../../src/cli/tls/generate.js'
import { runWarden } from '../cli/run.js'
import { CLI, startAgent, type AgentProcess } from '../support/agent.js'

describe('HTTPS', function () {
  this.timeout(30_000)
  let dir: string
  let ca: Ca
  let otherCa: Ca
  const path = (name: string): string => join(dir, name)
  const clients: WardenClient[] = []
  const agents: AgentProcess[] = []

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'warden-https-'))
    ca = await createCa()
    otherCa = await createCa()
    await writeFile(path('ca.pem'), ca.cert)
    const made = {
      server: await createCert({ ca: ca.cert, caKey: ca.key, kind: 'server', dc: 'dc1' }),
      client: await createCert({ ca: ca.cert, caKey: ca.key, kind: 'client', dc: 'dc1' }),
      foreign: await createCert({ ca: otherCa.cert, caKey: otherCa.key, kind: 'client', dc: 'dc1' }),
      dc2: await createCert({ ca: ca.cert, caKey: ca.key, kind: 'server', dc: 'dc2' }),
    }
    for (const [name, cert] of Object.entries(made)) {
      await writeFile(path(`${name}.pem`), cert.cert)
      await writeFile(path(`${name}-key.pem`), cert.key, { mode: 0o600 })
    }
  })

  afterEach(async () => {
    for (const client of clients.splice(0)) client.close()
    await Promise.all(agents.splice(0).map((agent) => agent.stop()))
  })

  after(async () => rm(dir, { recursive: true, force: true }))

  const tlsArgs = (cert = 'server'): string[] => ['--tls-ca-file', path('ca.pem'), '--tls-cert-file', path(`${cert}.pem`), '--tls-key-file', path(`${cert}-key.pem`)]

  async function httpsAgent(extra: string[] = []): Promise<{ agent: AgentProcess; https: string }> {
    const agent = await startAgent({ args: [...tlsArgs(), '--https-addr', '127.0.0.1:0', ...extra] })
    agents.push(agent)
    const ready = agent.logs.find((line) => line.includes('"agent ready"'))
    const https = (JSON.parse(ready ?? '{}') as { https?: string }).https
    expect(https, 'the agent ready line names the HTTPS address').to.match(/^127\.0\.0\.1:\d+$/)
    return { agent, https: `https://${https}` }
  }

  async function withFiles(tls: { cert?: string }): Promise<{ ca: string; cert?: string; key?: string }> {
    return {
      ca: ca.cert,
      ...(tls.cert === undefined ? {} : { cert: await readFile(path(`${tls.cert}.pem`), 'utf8'), key: await readFile(path(`${tls.cert}-key.pem`), 'utf8') }),
    }
  }

  it('serves the same API over HTTPS as over HTTP, with the certificate it was given', async () => {
    const { agent, https } = await httpsAgent()
    const secure = new WardenClient({ address: https, token: agent.managementToken, tls: { ca: ca.cert } })
    clients.push(secure)
    const self = await secure.acl.tokens.self()
    expect(self.SecretID).to.equal(agent.managementToken)
    const created = await secure.acl.policies.create({ Name: 'over-https', Rules: 'key_prefix "" { policy = "read" }' })
    const plain = await agent.request('GET', `/v1/acl/policy/${created.ID}`)
    expect(plain.status).to.equal(200)
    expect(plain.body.Name).to.equal('over-https')
    // A client that does not trust the agent's CA refuses it, before sending anything.
    const untrusting = new WardenClient({ address: https, token: agent.managementToken, tls: { ca: otherCa.cert } })
    clients.push(untrusting)
    const refused = await untrusting.acl.tokens.self().then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(refused).to.be.instanceOf(ConnectionError)
    expect((refused as ConnectionError).reached).to.equal('no')
    expect((refused as ConnectionError).message).to.include('not signed by a CA this client trusts')
  })

  it('with --tls-verify-incoming, HTTPS requires a client certificate of the CA; plain HTTP is not affected', async () => {
    const { agent, https } = await httpsAgent(['--tls-verify-incoming'])
    const withCert = new WardenClient({ address: https, token: agent.managementToken, tls: await withFiles({ cert: 'client' }) })
    clients.push(withCert)
    expect((await withCert.acl.tokens.self()).SecretID).to.equal(agent.managementToken)
    for (const tls of [await withFiles({}), await withFiles({ cert: 'foreign' })]) {
      const refusedClient = new WardenClient({ address: https, token: agent.managementToken, tls })
      clients.push(refusedClient)
      const error = await refusedClient.acl.tokens.self().then(
        () => undefined,
        (failure: unknown) => failure,
      )
      expect(error, 'a client without a certificate of the CA').to.be.instanceOf(ConnectionError)
      // Refused in the TLS handshake. When the server's alert arrives, the client knows the request never reached a
      // route; when the server's close overtakes it (a reset), the client cannot know, and must not claim to.
      const refusal = error as ConnectionError
      if (refusal.reason === 'ECONNRESET') expect(refusal.reached).to.equal('maybe')
      else {
        expect(refusal.reached, `${refusal.reason}: ${refusal.message}`).to.equal('no')
        expect(refusal.message).to.match(/requires a client certificate|refused the client certificate/)
      }
    }
    expect((await agent.request('GET', '/v1/acl/token/self')).status).to.equal(200)
  })

  it('the CLI reaches HTTPS with -ca-file and -client-cert/-client-key, and says what is missing without them', async () => {
    const { agent, https } = await httpsAgent(['--tls-verify-incoming'])
    const base = ['acl', 'token', 'read', '-self', '-http-addr', https, '-token', agent.managementToken, '-ca-file', path('ca.pem')]
    const ok = await runWarden([...base, '-client-cert', path('client.pem'), '-client-key', path('client-key.pem')])
    expect(ok.code, ok.stderr).to.equal(0)
    expect(ok.stdout).to.match(/^AccessorID:/m)
    const missing = await runWarden(base)
    expect(missing.code).to.equal(1)
    expect(missing.stderr).to.include('the server requires a client certificate')
    expect(`${missing.stdout}${missing.stderr}`).not.to.include(agent.managementToken)
  })

  it('a certificate that cannot serve this datacenter stops the start with exit 2, one line naming the setting', async () => {
    const child = spawn(process.execPath, [CLI, 'agent', '--dev', '--http-addr', '127.0.0.1:0', '--cluster-addr', '127.0.0.1:0', '--https-addr', '127.0.0.1:0', ...tlsArgs('dc2')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
    clearTimeout(timer)
    expect(code, stderr).to.equal(2)
    expect(stderr.trim().split('\n')).to.have.length(1)
    expect(stderr).to.match(/^warden: --tls-cert-file: the certificate names .*; a server of datacenter dc1 needs one naming server\.dc1\.warden/)
  })
})
