/**
 * `warden tls ca create` and `warden tls cert create` as an operator runs them: the built binary (npm test builds it
 * first) in a fresh directory, as Consul's `consul tls` is run. Checks what it prints, line for line, the files it
 * writes (names, modes: keys 0600), that it never overwrites a file (a CA that exists is refused, a certificate takes
 * the next free number), its usage errors and -help. What is inside the certificates is test/unit/cli/tls.test.ts's.
 */
import { expect } from 'chai'
import { X509Certificate } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runWarden, type Ran } from './run.js'

function warden(cwd: string, args: string[]): Promise<Ran> {
  return runWarden(args, { cwd })
}

function mode(path: string): string {
  return (statSync(path).mode & 0o777).toString(8)
}

const SERVER_WARNING = `==> WARNING: A server certificate lets its holder act as a server of the
    datacenter and read all of its state, every ACL token included. Give it
    only to server nodes and keep it as safe as the CA key.
`

describe('command line: warden tls', function () {
  this.timeout(30_000)
  let dir: string

  beforeEach(function () {
    dir = mkdtempSync(join(tmpdir(), 'warden-cli-tls-'))
  })

  afterEach(function () {
    rmSync(dir, { recursive: true, force: true })
  })

  it('tls ca create writes warden-agent-ca.pem and warden-agent-ca-key.pem (0600) and refuses to run again', async function () {
    const ran = await warden(dir, ['tls', 'ca', 'create'])
    expect(ran).to.deep.equal({ code: 0, stdout: '==> Saved warden-agent-ca.pem\n==> Saved warden-agent-ca-key.pem\n', stderr: '' })
    expect(readdirSync(dir).sort()).to.deep.equal(['warden-agent-ca-key.pem', 'warden-agent-ca.pem'])
    expect(mode(join(dir, 'warden-agent-ca-key.pem'))).to.equal('600')
    // The certificate is world-readable, less what the umask takes; never writable by others.
    expect(statSync(join(dir, 'warden-agent-ca.pem')).mode & 0o622).to.equal(0o600)
    expect(new X509Certificate(readFileSync(join(dir, 'warden-agent-ca.pem'))).ca).to.equal(true)
    const before = readFileSync(join(dir, 'warden-agent-ca-key.pem'), 'utf8')
    const again = await warden(dir, ['tls', 'ca', 'create'])
    expect(again).to.deep.equal({ code: 1, stdout: '', stderr: 'warden-agent-ca.pem already exists.\n' })
    expect(readFileSync(join(dir, 'warden-agent-ca-key.pem'), 'utf8')).to.equal(before)
  })

  it('tls ca create refuses when only the key exists, and leaves it as it was', async function () {
    writeFileSync(join(dir, 'warden-agent-ca-key.pem'), 'mine')
    const ran = await warden(dir, ['tls', 'ca', 'create'])
    expect(ran).to.deep.equal({ code: 1, stdout: '', stderr: 'warden-agent-ca-key.pem already exists.\n' })
    expect(readdirSync(dir)).to.deep.equal(['warden-agent-ca-key.pem'])
    expect(readFileSync(join(dir, 'warden-agent-ca-key.pem'), 'utf8')).to.equal('mine')
  })

  it('tls cert create -server, -client and -cli: Consul\'s lines and file names, the next free number each time, keys 0600', async function () {
    expect((await warden(dir, ['tls', 'ca', 'create'])).code).to.equal(0)
    const first = await warden(dir, ['tls', 'cert', 'create', '-server', '-dc', 'dc1'])
    expect(first).to.deep.equal({
      code: 0,
      stdout: `${SERVER_WARNING}==> Using warden-agent-ca.pem and warden-agent-ca-key.pem\n==> Saved dc1-server-warden-0.pem\n==> Saved dc1-server-warden-0-key.pem\n`,
      stderr: '',
    })
    const firstCert = readFileSync(join(dir, 'dc1-server-warden-0.pem'), 'utf8')
    const second = await warden(dir, ['tls', 'cert', 'create', '-server'])
    expect(second.stdout).to.match(/==> Saved dc1-server-warden-1\.pem\n==> Saved dc1-server-warden-1-key\.pem\n$/)
    expect(readFileSync(join(dir, 'dc1-server-warden-0.pem'), 'utf8')).to.equal(firstCert)
    // A number taken by either file of the pair is skipped.
    writeFileSync(join(dir, 'dc2-server-warden-0-key.pem'), 'someone else\'s')
    const dc2 = await warden(dir, ['tls', 'cert', 'create', '-server', '-dc', 'dc2', '-node', 'n1', '-additional-dnsname', 'n1.example.com', '-additional-ipaddress', '10.0.0.9'])
    expect(dc2.code, dc2.stderr).to.equal(0)
    expect(dc2.stdout).to.match(/==> Saved dc2-server-warden-1\.pem\n==> Saved dc2-server-warden-1-key\.pem\n$/)
    expect(readFileSync(join(dir, 'dc2-server-warden-0-key.pem'), 'utf8')).to.equal('someone else\'s')
    expect(new X509Certificate(readFileSync(join(dir, 'dc2-server-warden-1.pem'))).subjectAltName).to.equal(
      'DNS:n1.example.com, DNS:n1.server.dc2.warden, DNS:server.dc2.warden, DNS:localhost, IP Address:10.0.0.9, IP Address:127.0.0.1',
    )
    const client = await warden(dir, ['tls', 'cert', 'create', '-client'])
    expect(client).to.deep.equal({
      code: 0,
      stdout: '==> Using warden-agent-ca.pem and warden-agent-ca-key.pem\n==> Saved dc1-client-warden-0.pem\n==> Saved dc1-client-warden-0-key.pem\n',
      stderr: '',
    })
    const cli = await warden(dir, ['tls', 'cert', 'create', '-cli'])
    expect(cli.stdout).to.match(/==> Saved dc1-cli-warden-0\.pem\n==> Saved dc1-cli-warden-0-key\.pem\n$/)
    for (const key of ['dc1-server-warden-0-key.pem', 'dc1-server-warden-1-key.pem', 'dc2-server-warden-1-key.pem', 'dc1-client-warden-0-key.pem', 'dc1-cli-warden-0-key.pem']) {
      expect(mode(join(dir, key)), key).to.equal('600')
      expect(readFileSync(join(dir, key), 'utf8').startsWith('-----BEGIN EC PRIVATE KEY-----\n'), key).to.equal(true)
    }
    const ca = new X509Certificate(readFileSync(join(dir, 'warden-agent-ca.pem')))
    expect(new X509Certificate(readFileSync(join(dir, 'dc1-client-warden-0.pem'))).checkIssued(ca)).to.equal(true)
  })

  it('-domain names the files and the certificates; -ca and -key take a CA from elsewhere', async function () {
    const pki = join(dir, 'pki')
    mkdirSync(pki)
    expect((await warden(pki, ['tls', 'ca', 'create', '-domain', 'example', '-days', '30'])).stdout).to.equal('==> Saved example-agent-ca.pem\n==> Saved example-agent-ca-key.pem\n')
    const ran = await warden(dir, ['tls', 'cert', 'create', '-client', '-domain', 'example', '-ca', 'pki/example-agent-ca.pem', '-key', 'pki/example-agent-ca-key.pem'])
    expect(ran).to.deep.equal({
      code: 0,
      stdout: '==> Using pki/example-agent-ca.pem and pki/example-agent-ca-key.pem\n==> Saved dc1-client-example-0.pem\n==> Saved dc1-client-example-0-key.pem\n',
      stderr: '',
    })
    expect(new X509Certificate(readFileSync(join(dir, 'dc1-client-example-0.pem'))).subject).to.equal('CN=client.dc1.example')
  })

  it('without a CA, or with a key that is not the CA\'s: one line, exit 1, no file written', async function () {
    const missing = await warden(dir, ['tls', 'cert', 'create', '-server'])
    expect(missing).to.deep.equal({ code: 1, stdout: '', stderr: 'Error reading CA: cannot read warden-agent-ca.pem: no such file\n' })
    const other = join(dir, 'other')
    mkdirSync(other)
    expect((await warden(dir, ['tls', 'ca', 'create'])).code).to.equal(0)
    expect((await warden(other, ['tls', 'ca', 'create'])).code).to.equal(0)
    const mismatched = await warden(dir, ['tls', 'cert', 'create', '-client', '-key', 'other/warden-agent-ca-key.pem'])
    expect(mismatched.code).to.equal(1)
    expect(mismatched.stderr).to.equal('Error creating the certificate: the CA key does not belong to the CA certificate\n')
    expect(readdirSync(dir).sort()).to.deep.equal(['other', 'warden-agent-ca-key.pem', 'warden-agent-ca.pem'])
  })

  it('usage mistakes: the line, then the usage, exit 1', async function () {
    const cases: Array<[string[], string]> = [
      [['tls', 'cert', 'create'], 'Please provide either -server, -client, or -cli'],
      [['tls', 'cert', 'create', '-server', '-client'], 'Please provide either -server, -client, or -cli'],
      [['tls', 'cert', 'create', '-client', '-node', 'n1'], '-node requires -server'],
      [['tls', 'cert', 'create', '-server', '-ca='], 'Please provide the ca'],
      [['tls', 'cert', 'create', '-server', '-days', 'ten'], 'invalid value "ten" for flag -days: parse error'],
      [['tls', 'cert', 'create', '-server', '-additional-ipaddress', 'ten'], '-additional-ipaddress "ten" is not an IP address'],
      [['tls', 'cert', 'create', '-server', '-dc', '../x'], '-dc "../x" must be lowercase letters, digits, "-" or "_"'],
      [['tls', 'ca', 'create', '-domain', 'a/b'], '-domain "a/b" is not a DNS name'],
      [['tls', 'ca', 'create', '-days', '0'], '-days must be 1 or more'],
    ]
    for (const [args, line] of cases) {
      const ran = await warden(dir, args)
      expect(ran.code, args.join(' ')).to.equal(1)
      expect(ran.stderr.split('\n')[0], args.join(' ')).to.equal(line)
      expect(ran.stderr, args.join(' ')).to.include(`\n\nUsage: warden ${args.slice(0, 3).join(' ')}`)
    }
    expect(readdirSync(dir)).to.deep.equal([])
  })

  it('-help prints the flags and exits 0; warden tls lists ca and cert', async function () {
    const ca = await warden(dir, ['tls', 'ca', 'create', '-help'])
    expect(ca.code).to.equal(0)
    for (const flag of ['-days=<int>', '-domain=<string>', '-name-constraint', '-additional-name-constraint=<value>', '-common-name=<string>']) expect(ca.stdout).to.include(flag)
    expect(ca.stdout).to.not.include('-http-addr')
    const cert = await warden(dir, ['tls', 'cert', 'create', '-help'])
    expect(cert.code).to.equal(0)
    for (const flag of ['-ca=', '-key=', '-server', '-client', '-cli', '-node=', '-days=', '-dc=', '-domain=', '-additional-dnsname=', '-additional-ipaddress=']) {
      expect(cert.stdout).to.include(flag)
    }
    const group = await warden(dir, ['tls'])
    expect(group.code).to.equal(1)
    expect(group.stdout).to.match(/\n {4}ca {6}tls ca commands\n {4}cert {4}tls cert commands\n/)
    expect(readdirSync(dir)).to.deep.equal([])
  })
})
