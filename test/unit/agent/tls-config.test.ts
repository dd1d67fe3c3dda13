/**
 * The agent's TLS settings (issue 18): which combinations of --tls-*-file, --https-addr, --http-addr off and
 * --tls-verify-incoming are refused, each with a message naming the setting; and the checks loadTlsFiles makes of the
 * files themselves (parse, key of the certificate, signed by the CA, valid now, names server.<dc>.warden), which stop
 * a start with exit 2 rather than fail one connection at a time.
 *
 * Method: loadConfig over literal argv arrays; certificates made by `warden tls`'s generator into a temporary dir.
 */
import { expect } from 'chai'
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, loadConfig, type AgentConfig, type ConfigWarning } from '../../../src/agent/config.js'
import { loadTlsFiles, type TlsFiles } from '../../../src/agent/tls-files.js'
import { createCa, createCert, type Ca } from '../../../src/cli/tls/generate.js'

function load(argv: string[], config?: string): AgentConfig {
  return loadConfig(['--dev', ...(config === undefined ? [] : ['--config-file', config]), ...argv], {})
}

function refusal(argv: string[], config?: string): string {
  try {
    load(argv, config)
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError)
    return (error as Error).message
  }
  throw new Error(`loadConfig accepted ${argv.join(' ')}`)
}

describe('agent/config: TLS and HTTPS settings', function () {
  this.timeout(20_000)
  let dir: string
  let ca: Ca
  let otherCa: Ca
  const path = (name: string): string => join(dir, name)
  const files = (cert = 'server.pem', key = 'server-key.pem', caFile = 'ca.pem'): TlsFiles => ({
    caFile: path(caFile),
    certFile: path(cert),
    keyFile: path(key),
    labels: { caFile: '--tls-ca-file', certFile: '--tls-cert-file', keyFile: '--tls-key-file' },
  })
  const tlsFlags = ['--tls-ca-file', 'ca.pem', '--tls-cert-file', 'server.pem', '--tls-key-file', 'server-key.pem']

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'warden-tls-config-'))
    ca = await createCa()
    otherCa = await createCa()
    const server = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'server', dc: 'dc1' })
    const client = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'client', dc: 'dc1' })
    const foreign = await createCert({ ca: otherCa.cert, caKey: otherCa.key, kind: 'server', dc: 'dc1' })
    const expired = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'server', dc: 'dc1', days: 1, now: new Date(Date.now() - 3 * 86_400_000) })
    await writeFile(path('ca.pem'), ca.cert)
    await writeFile(path('bundle.pem'), `${otherCa.cert}\n${ca.cert}`)
    for (const [name, cert] of Object.entries({ server, client, foreign, expired })) {
      await writeFile(path(`${name}.pem`), cert.cert)
      await writeFile(path(`${name}-key.pem`), cert.key, { mode: 0o600 })
    }
    await writeFile(path('garbage.pem'), 'not a certificate\n')
  })

  after(async () => rm(dir, { recursive: true, force: true }))

  describe('the settings', () => {
    it('takes the three files, HTTPS, verify_incoming and http off, from flags and from the config file', async () => {
      const config = load([...tlsFlags, '--https-addr', '127.0.0.1:8501', '--tls-verify-incoming', '--http-addr', 'off'])
      expect(config.httpAddr).to.equal(undefined)
      expect(config.httpsAddr).to.deep.equal({ host: '127.0.0.1', port: 8501 })
      expect(config.tls).to.include({ caFile: 'ca.pem', certFile: 'server.pem', keyFile: 'server-key.pem', verifyIncoming: true })
      const file = path('agent.json')
      await writeFile(file, JSON.stringify({ https_addr: '127.0.0.1:8501', tls: { ca_file: 'a', cert_file: 'b', key_file: 'c', verify_incoming: true } }))
      const fromFile = load([], file)
      expect(fromFile.tls).to.include({ caFile: 'a', certFile: 'b', keyFile: 'c', verifyIncoming: true })
      expect(fromFile.tls?.labels.certFile).to.equal('tls.cert_file')
      expect(fromFile.httpAddr).to.deep.equal({ host: '127.0.0.1', port: 8500 })
    })

    it('without TLS settings: plain HTTP only, nothing over TLS', () => {
      const config = load([])
      expect(config.tls).to.equal(undefined)
      expect(config.httpsAddr).to.equal(undefined)
      expect(config.httpAddr).to.deep.equal({ host: '127.0.0.1', port: 8500 })
    })

    it('refuses one or two of the three files, naming the missing ones', () => {
      expect(refusal(['--tls-cert-file', 'server.pem'])).to.equal('--tls-cert-file: needs --tls-ca-file and --tls-key-file too; TLS takes the CA, the certificate and its key')
      expect(refusal(['--tls-ca-file', 'ca.pem', '--tls-key-file', 'k'])).to.match(/^--tls-ca-file, --tls-key-file: needs --tls-cert-file too/)
    })

    it('refuses HTTPS without the files, verify_incoming without HTTPS, and http off without HTTPS', async () => {
      expect(refusal(['--https-addr', '127.0.0.1:8501'])).to.match(/^--https-addr: needs --tls-ca-file, --tls-cert-file and --tls-key-file/)
      expect(refusal([...tlsFlags, '--tls-verify-incoming'])).to.match(/^--tls-verify-incoming: needs --https-addr/)
      expect(refusal(['--http-addr', 'off'])).to.match(/^--http-addr: off needs --https-addr/)
      expect(refusal(['--tls-verify-incoming=yes'])).to.equal('--tls-verify-incoming: takes no value')
      const file = path('verify.json')
      await writeFile(file, JSON.stringify({ tls: { verify_incoming: 'yes' } }))
      expect(refusal([], file)).to.equal('tls.verify_incoming: must be true or false')
    })

    it('refuses the benchmark-only unsealed links together with TLS', () => {
      expect(refusal([...tlsFlags, '--unsealed-peer-links-for-benchmark'])).to.match(/^--unsealed-peer-links-for-benchmark: cannot be used with TLS files/)
      expect(load(['--unsealed-peer-links-for-benchmark']).unsealedPeerLinks).to.equal(true)
    })

    it('takes --join as host:port or an http(s):// URL', () => {
      expect(load(['--join', 'https://127.0.0.1:8501', '--join', '10.0.0.1:8500']).join).to.deep.equal(['https://127.0.0.1:8501', '10.0.0.1:8500'])
      expect(refusal(['--join', 'ftp://127.0.0.1:8501'])).to.match(/^--join: /)
    })
  })

  describe('the files', () => {
    // Read when each test runs, after before() made the certificates: they are not valid before they were made.
    let now: Date
    beforeEach(() => {
      now = new Date()
    })
    const problem = (tls: TlsFiles, datacenter = 'dc1'): string => {
      try {
        loadTlsFiles(tls, datacenter, now)
      } catch (error) {
        expect(error).to.be.instanceOf(ConfigError)
        return (error as Error).message
      }
      throw new Error('loadTlsFiles accepted the files')
    }

    it('loads a server certificate of the datacenter signed by the CA, and summarises it without the key', () => {
      const material = loadTlsFiles(files(), 'dc1', now)
      expect(material.summary.subject).to.equal('CN=server.dc1.warden')
      expect(material.summary.names).to.include('DNS:server.dc1.warden')
      expect(JSON.stringify(material.summary)).not.to.include('PRIVATE KEY')
      // A CA file holding several CAs (a rotation): the signer may be any of them.
      expect(loadTlsFiles(files('server.pem', 'server-key.pem', 'bundle.pem'), 'dc1', now).ca.toString()).to.include(otherCa.cert.trim())
    })

    it("refuses a certificate of another datacenter, a client certificate, another CA's, an expired one, a key of another certificate", () => {
      expect(problem(files(), 'dc2')).to.match(/^--tls-cert-file: the certificate names .*server\.dc1\.warden.*; a server of datacenter dc2 needs one naming server\.dc2\.warden.*warden tls cert create -server -dc dc2\)$/)
      expect(problem(files('client.pem', 'client-key.pem'))).to.match(/needs one naming server\.dc1\.warden/)
      expect(problem(files('foreign.pem', 'foreign-key.pem'))).to.match(/^--tls-cert-file: the certificate in .*foreign\.pem is not signed by the CA in .*ca\.pem$/)
      expect(problem(files('expired.pem', 'expired-key.pem'))).to.match(/^--tls-cert-file: the certificate in .*expired\.pem expired on /)
      expect(problem(files('server.pem', 'client-key.pem'))).to.match(/^--tls-key-file: the key in .*client-key\.pem is not the key of the certificate in .*server\.pem$/)
    })

    it('refuses files that are missing or not PEM, naming the setting', () => {
      expect(problem(files('missing.pem'))).to.match(/^--tls-cert-file: cannot read .*missing\.pem/)
      expect(problem(files('garbage.pem'))).to.match(/^--tls-cert-file: .*garbage\.pem holds no PEM certificate$/)
      expect(problem(files('server.pem', 'garbage.pem'))).to.match(/^--tls-key-file: .*garbage\.pem is not a PEM private key/)
      expect(problem(files('server.pem', 'server-key.pem', 'garbage.pem'))).to.match(/^--tls-ca-file: .*garbage\.pem holds no PEM certificate$/)
    })

    it('warns when others may read the key file, without quoting the key', async () => {
      await chmod(path('server-key.pem'), 0o644)
      const warnings: ConfigWarning[] = []
      loadTlsFiles(files(), 'dc1', now, warnings)
      await chmod(path('server-key.pem'), 0o600)
      expect(warnings.map((warning) => warning.setting)).to.deep.equal(['--tls-key-file'])
      expect(warnings[0]?.message).to.include('chmod 600')
      expect(warnings[0]?.message).not.to.include('PRIVATE')
    })
  })
})
