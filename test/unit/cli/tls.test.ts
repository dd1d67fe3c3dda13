/**
 * The CA and certificates `warden tls` makes (src/cli/tls/generate.ts). Goal: they carry what Consul's `tls ca create`
 * and `tls cert create` put in theirs (ECDSA P-256, random serials, CA:true with keyCertSign and cRLSign, key
 * identifiers, a server's `server.<dc>.warden`, localhost and 127.0.0.1, a purpose per kind), and they work: node's
 * TLS (OpenSSL) accepts them for mutual TLS under the server name peers and clients check, and refuses what it should.
 * Method: certificates are made in-process, read back with node's own X509Certificate and with @peculiar/x509 for
 * the extensions node does not expose, then used by a node:https server and node:tls clients on loopback; where the
 * openssl binary is installed, `openssl x509 -text` and `openssl verify -purpose` read them too.
 * Also recorded here, for the transport: what node:tls does not check by itself (the names in a client's
 * certificate).
 */
import 'reflect-metadata'
import { expect } from 'chai'
import { execFileSync, spawnSync } from 'node:child_process'
import { createPrivateKey, webcrypto, X509Certificate } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, request, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TLSSocket } from 'node:tls'
import { AsnConvert } from '@peculiar/asn1-schema'
import { NameConstraints } from '@peculiar/asn1-x509'
import * as x509 from '@peculiar/x509'
import { certificateNames, CertificateError, createCa, createCert, serverName, type Ca, type Cert } from '../../../src/cli/tls/generate.js'

const DAY_MS = 24 * 60 * 60 * 1000
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1'
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2'

function extensionsOf(pem: string): x509.X509Certificate {
  return new x509.X509Certificate(pem)
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise
  } catch (error) {
    return error as Error
  }
  throw new Error('expected a rejection')
}

describe('tls certificates: what warden tls makes', function () {
  let ca: Ca
  let server: Cert

  before(async function () {
    ca = await createCa()
    server = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'server', dc: 'dc1' })
  })

  describe('the CA', function () {
    it('is a self-signed CA with an ECDSA P-256 key in SEC1 PEM, valid 1825 days from now', function () {
      const cert = new X509Certificate(ca.cert)
      expect(cert.ca).to.equal(true)
      expect(cert.checkIssued(cert)).to.equal(true)
      expect(cert.verify(cert.publicKey)).to.equal(true)
      expect(cert.publicKey.asymmetricKeyDetails?.namedCurve).to.equal('prime256v1')
      expect(ca.key.startsWith('-----BEGIN EC PRIVATE KEY-----\n')).to.equal(true)
      expect(createPrivateKey(ca.key).asymmetricKeyDetails?.namedCurve).to.equal('prime256v1')
      const from = Date.parse(cert.validFrom)
      expect(Math.abs(from - Date.now())).to.be.below(60_000)
      expect(Date.parse(cert.validTo) - from).to.equal(1825 * DAY_MS)
      expect(cert.subject).to.match(/^CN=Warden Agent CA \d+$/)
    })

    it('has BasicConstraints CA:true and KeyUsage keyCertSign, cRLSign, digitalSignature, both critical, and key identifiers', function () {
      const cert = extensionsOf(ca.cert)
      const basic = cert.getExtension(x509.BasicConstraintsExtension)!
      expect(basic).to.include({ ca: true, critical: true })
      const usage = cert.getExtension(x509.KeyUsagesExtension)!
      expect(usage.critical).to.equal(true)
      expect(usage.usages).to.equal(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature)
      const ski = cert.getExtension(x509.SubjectKeyIdentifierExtension)!.keyId
      expect(ski).to.match(/^[0-9a-f]{40}$/)
      expect(cert.getExtension(x509.AuthorityKeyIdentifierExtension)!.keyId).to.equal(ski)
      expect(cert.getExtension('2.5.29.30')).to.equal(null)
    })

    it('draws a random 128-bit serial number, different for each CA', async function () {
      const other = await createCa()
      const serials = [ca, other].map((item) => new X509Certificate(item.cert).serialNumber)
      for (const serial of serials) expect(serial).to.match(/^[0-9A-F]{32}$/)
      expect(serials[0]).to.not.equal(serials[1])
    })

    it('takes -days, -common-name, and -name-constraint with the domain, localhost and the additional names', async function () {
      const named = await createCa({ days: 10, commonName: 'Example CA, Ops', nameConstraint: true, domain: 'example', additionalNameConstraints: ['corp.test', ' '] })
      const cert = new X509Certificate(named.cert)
      expect(Date.parse(cert.validTo) - Date.parse(cert.validFrom)).to.equal(10 * DAY_MS)
      expect(cert.subject).to.equal('CN=Example CA\\, Ops')
      const constraint = extensionsOf(named.cert).getExtension('2.5.29.30')!
      expect(constraint.critical).to.equal(true)
      const permitted = AsnConvert.parse(constraint.value, NameConstraints).permittedSubtrees!.map((tree) => tree.base.dNSName)
      expect(permitted).to.deep.equal(['corp.test', 'example', 'localhost'])
      expect(AsnConvert.parse(constraint.value, NameConstraints).excludedSubtrees).to.equal(undefined)
    })

    it('refuses a bad number of days or a domain that is not a DNS name', async function () {
      expect(await rejection(createCa({ days: 0 }))).to.be.instanceOf(CertificateError)
      expect(await rejection(createCa({ days: 1.5 }))).to.be.instanceOf(CertificateError)
      expect((await rejection(createCa({ domain: '../x' }))).message).to.equal('-domain "../x" is not a DNS name')
    })
  })

  describe('certificates', function () {
    it('a server certificate: CN and SANs server.dc1.warden, localhost, 127.0.0.1; serverAuth and clientAuth; one year', function () {
      const cert = new X509Certificate(server.cert)
      expect(cert.subject).to.equal('CN=server.dc1.warden')
      expect(cert.subjectAltName).to.equal('DNS:server.dc1.warden, DNS:localhost, IP Address:127.0.0.1')
      expect(cert.keyUsage).to.deep.equal([SERVER_AUTH, CLIENT_AUTH])
      expect(cert.ca).to.equal(false)
      expect(cert.checkIssued(new X509Certificate(ca.cert))).to.equal(true)
      expect(cert.verify(new X509Certificate(ca.cert).publicKey)).to.equal(true)
      expect(Date.parse(cert.validTo) - Date.parse(cert.validFrom)).to.equal(365 * DAY_MS)
      expect(cert.checkHost(serverName('dc1'))).to.equal('server.dc1.warden')
      expect(cert.checkHost('server.dc2.warden')).to.equal(undefined)
      expect(cert.checkIP('127.0.0.1')).to.equal('127.0.0.1')
      expect(server.key.startsWith('-----BEGIN EC PRIVATE KEY-----\n')).to.equal(true)
      expect(createPrivateKey(server.key).asymmetricKeyDetails?.namedCurve).to.equal('prime256v1')
      expect(server).to.deep.include({ name: 'server.dc1.warden', purposes: ['serverAuth', 'clientAuth'] })
    })

    it('a leaf: BasicConstraints CA:false and KeyUsage digitalSignature, critical; its own key identifier; the CA\'s as authority', function () {
      const cert = extensionsOf(server.cert)
      expect(cert.getExtension(x509.BasicConstraintsExtension)).to.include({ ca: false, critical: true })
      expect(cert.getExtension(x509.KeyUsagesExtension)).to.include({ usages: x509.KeyUsageFlags.digitalSignature, critical: true })
      const caKeyId = extensionsOf(ca.cert).getExtension(x509.SubjectKeyIdentifierExtension)!.keyId
      expect(cert.getExtension(x509.AuthorityKeyIdentifierExtension)!.keyId).to.equal(caKeyId)
      expect(cert.getExtension(x509.SubjectKeyIdentifierExtension)!.keyId).to.not.equal(caKeyId)
      expect(cert.getExtension(x509.ExtendedKeyUsageExtension)!.critical).to.equal(false)
    })

    it('adds -node as <node>.server.<dc>.<domain> and the additional names and addresses, before the kind\'s own', async function () {
      const made = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'server', dc: 'east', node: 'n1', dnsNames: ['n1.example.com', ' ', 'n1.example.com'], ipAddresses: ['10.0.0.5', '::1'] })
      expect(new X509Certificate(made.cert).subjectAltName).to.equal(
        'DNS:n1.example.com, DNS:n1.server.east.warden, DNS:server.east.warden, DNS:localhost, IP Address:10.0.0.5, IP Address:0:0:0:0:0:0:0:1, IP Address:127.0.0.1',
      )
    })

    it('a client certificate names client.<dc>.warden and is for clients only; a cli one has no IP address', async function () {
      const client = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'client', dc: 'dc1' })
      const clientCert = new X509Certificate(client.cert)
      expect(clientCert.subject).to.equal('CN=client.dc1.warden')
      expect(clientCert.subjectAltName).to.equal('DNS:client.dc1.warden, DNS:localhost, IP Address:127.0.0.1')
      expect(clientCert.keyUsage).to.deep.equal([CLIENT_AUTH])
      const cli = new X509Certificate((await createCert({ ca: ca.cert, caKey: ca.key, kind: 'cli' })).cert)
      expect(cli.subject).to.equal('CN=cli.dc1.warden')
      expect(cli.subjectAltName).to.equal('DNS:cli.dc1.warden, DNS:localhost')
      expect(cli.keyUsage).to.deep.equal([CLIENT_AUTH])
    })

    it('takes -days and -domain', async function () {
      const made = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'server', dc: 'dc3', domain: 'example', days: 7 })
      const cert = new X509Certificate(made.cert)
      expect(cert.subject).to.equal('CN=server.dc3.example')
      expect(Date.parse(cert.validTo) - Date.parse(cert.validFrom)).to.equal(7 * DAY_MS)
    })

    it('refuses bad names, addresses, -node without -server, and days', function () {
      const bad = (options: Parameters<typeof certificateNames>[0]): string => {
        try {
          certificateNames(options)
        } catch (error) {
          expect(error).to.be.instanceOf(CertificateError)
          return (error as Error).message
        }
        throw new Error('expected a CertificateError')
      }
      expect(bad({ kind: 'server', dc: 'DC1' })).to.equal('-dc "DC1" must be lowercase letters, digits, "-" or "_"')
      expect(bad({ kind: 'server', dc: 'a/b' })).to.match(/^-dc /)
      expect(bad({ kind: 'server', dnsNames: ['bad name'] })).to.equal('-additional-dnsname "bad name" is not a DNS name')
      expect(bad({ kind: 'server', ipAddresses: ['300.1.1.1'] })).to.equal('-additional-ipaddress "300.1.1.1" is not an IP address')
      expect(bad({ kind: 'client', node: 'n1' })).to.equal('-node requires -server')
      expect(bad({ kind: 'server', domain: 'a..b' })).to.equal('-domain "a..b" is not a DNS name')
    })

    it('refuses a CA key that is not the CA certificate\'s, a CA certificate that is not a CA, and what is not PEM', async function () {
      const other = await createCa()
      expect((await rejection(createCert({ ca: ca.cert, caKey: other.key, kind: 'server' }))).message).to.equal('the CA key does not belong to the CA certificate')
      expect((await rejection(createCert({ ca: server.cert, caKey: server.key, kind: 'server' }))).message).to.match(/^the CA certificate \(CN=server\.dc1\.warden\) is not a CA$/)
      expect((await rejection(createCert({ ca: 'nonsense', caKey: ca.key, kind: 'server' }))).message).to.match(/^the CA certificate is not a PEM certificate/)
      expect((await rejection(createCert({ ca: ca.cert, caKey: 'nonsense', kind: 'server' }))).message).to.match(/^the CA key is not a PEM private key/)
      expect(await rejection(createCert({ ca: ca.cert, caKey: ca.key, kind: 'server', days: -1 }))).to.be.instanceOf(CertificateError)
    })

    it('refuses a name outside the CA\'s name constraints rather than write a certificate no verifier accepts', async function () {
      const constrained = await createCa({ nameConstraint: true })
      const inside = await createCert({ ca: constrained.cert, caKey: constrained.key, kind: 'server', dnsNames: ['n1.dc1.warden'] })
      expect(new X509Certificate(inside.cert).subjectAltName).to.include('DNS:n1.dc1.warden')
      const error = await rejection(createCert({ ca: constrained.cert, caKey: constrained.key, kind: 'server', dnsNames: ['wardenx.example.com'] }))
      expect(error.message).to.equal('the CA may sign only names under warden, localhost: not wardenx.example.com')
    })

    it('signs with a CA key in PKCS#8 as well as SEC1, and with an RSA CA', async function () {
      const pkcs8 = createPrivateKey(ca.key).export({ type: 'pkcs8', format: 'pem' }) as string
      const fromPkcs8 = await createCert({ ca: ca.cert, caKey: pkcs8, kind: 'client' })
      expect(new X509Certificate(fromPkcs8.cert).checkIssued(new X509Certificate(ca.cert))).to.equal(true)
      // An RSA CA made here with the same library, as an operator's existing CA might be.
      const algorithm = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', publicExponent: new Uint8Array([1, 0, 1]), modulusLength: 2048 }
      const keys = (await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair
      x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0])
      const rsaCa = await x509.X509CertificateGenerator.createSelfSigned({
        serialNumber: '01',
        name: 'CN=RSA CA',
        notBefore: new Date(),
        notAfter: new Date(Date.now() + DAY_MS),
        keys: keys as unknown as Parameters<typeof x509.X509CertificateGenerator.createSelfSigned>[0]['keys'],
        signingAlgorithm: algorithm,
        extensions: [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)],
      })
      const rsaKey = createPrivateKey({ key: Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)), format: 'der', type: 'pkcs8' }).export({ type: 'pkcs1', format: 'pem' }) as string
      const signed = await createCert({ ca: rsaCa.toString('pem'), caKey: rsaKey, kind: 'server' })
      const cert = new X509Certificate(signed.cert)
      expect(cert.verify(new X509Certificate(rsaCa.toString('pem')).publicKey)).to.equal(true)
      expect(cert.publicKey.asymmetricKeyDetails?.namedCurve).to.equal('prime256v1')
    })
  })

  describe('with node:tls: mutual TLS under the server name', function () {
    let client: Cert
    let otherCa: Ca
    let servers: Server[] = []

    before(async function () {
      client = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'client', dc: 'dc1' })
      otherCa = await createCa()
    })

    afterEach(async function () {
      await Promise.all(servers.map((item) => new Promise<void>((resolve) => item.close(() => resolve()))))
      servers = []
    })

    /**
     * An HTTPS server with `identity` that requires a client certificate signed by `trusted`; answers the client's CN.
     * With `reject` false it lets an unverified client in and answers why node would have refused it.
     */
    async function serve(identity: { cert: string; key: string }, trusted: string = ca.cert, reject = true): Promise<number> {
      const https = createServer({ ...identity, ca: trusted, requestCert: true, rejectUnauthorized: reject, minVersion: 'TLSv1.3' }, (req, res) => {
        const socket = req.socket as TLSSocket
        if (!socket.authorized) res.end(`unauthorized ${String(socket.authorizationError)}`)
        else res.end(`hello ${socket.getPeerCertificate().subject?.CN ?? '?'}`)
      })
      servers.push(https)
      await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve))
      return (https.address() as AddressInfo).port
    }

    /** One request: the body, or the error's code (or message). */
    function ask(port: number, options: { servername?: string; host?: string; identity?: { cert: string; key: string }; trusted?: string }): Promise<string> {
      return new Promise((resolve) => {
        const req = request(
          {
            host: options.host ?? '127.0.0.1',
            port,
            path: '/',
            agent: false,
            ca: options.trusted ?? ca.cert,
            ...(options.servername === undefined ? {} : { servername: options.servername }),
            ...(options.identity ?? {}),
          },
          (res) => {
            let body = ''
            res.on('data', (chunk: Buffer) => (body += chunk.toString()))
            res.on('end', () => resolve(body))
          },
        )
        req.on('error', (error: NodeJS.ErrnoException) => resolve(`error ${error.code ?? error.message}`))
        req.end()
      })
    }

    it('a client certificate and the server certificate work together under server.dc1.warden', async function () {
      const port = await serve(server)
      expect(await ask(port, { servername: 'server.dc1.warden', identity: client })).to.equal('hello client.dc1.warden')
    })

    it('a server certificate is also a client certificate (peer links: each server dials the others)', async function () {
      const port = await serve(server)
      expect(await ask(port, { servername: 'server.dc1.warden', identity: server })).to.equal('hello server.dc1.warden')
    })

    it('localhost and 127.0.0.1 are names of every server certificate', async function () {
      const port = await serve(server)
      expect(await ask(port, { identity: client })).to.equal('hello client.dc1.warden')
      expect(await ask(port, { host: 'localhost', identity: client })).to.equal('hello client.dc1.warden')
    })

    it('the client refuses a server of another datacenter: the name is checked', async function () {
      const dc2 = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'server', dc: 'dc2' })
      const port = await serve(dc2)
      expect(await ask(port, { servername: 'server.dc1.warden', identity: client })).to.equal('error ERR_TLS_CERT_ALTNAME_INVALID')
      expect(await ask(port, { servername: 'server.dc2.warden', identity: client })).to.equal('hello client.dc1.warden')
    })

    it('the server refuses a client without a certificate, or with one from another CA; the client refuses a server from another CA', async function () {
      const port = await serve(server)
      expect(await ask(port, { servername: 'server.dc1.warden' })).to.match(/^error /)
      const stranger = await createCert({ ca: otherCa.cert, caKey: otherCa.key, kind: 'client' })
      expect(await ask(port, { servername: 'server.dc1.warden', identity: stranger })).to.match(/^error /)
      expect(await ask(await serve(server, ca.cert, false), { servername: 'server.dc1.warden', identity: stranger })).to.equal('unauthorized UNABLE_TO_VERIFY_LEAF_SIGNATURE')
      const strangeServer = await createCert({ ca: otherCa.cert, caKey: otherCa.key, kind: 'server' })
      const otherPort = await serve(strangeServer)
      expect(await ask(otherPort, { servername: 'server.dc1.warden', identity: client })).to.equal('error UNABLE_TO_VERIFY_LEAF_SIGNATURE')
    })

    it('node enforces ExtendedKeyUsage: a client certificate cannot serve, a serverAuth-only one cannot be a client', async function () {
      // The client's certificate names client.dc1.warden; asked for that name, only its purpose can stop it.
      const port = await serve(client)
      expect(await ask(port, { servername: 'client.dc1.warden', identity: server })).to.equal('error INVALID_PURPOSE')
      // A server refusing a client only closes the connection; one that lets it in says why node would have refused.
      const serverOnly = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'server', purposes: ['serverAuth'] })
      expect(await ask(await serve(server), { servername: 'server.dc1.warden', identity: serverOnly })).to.match(/^error /)
      const telling = await serve(server, ca.cert, false)
      expect(await ask(telling, { servername: 'server.dc1.warden', identity: serverOnly })).to.equal('unauthorized INVALID_PURPOSE')
      expect(await ask(telling, { servername: 'server.dc1.warden', identity: client })).to.equal('hello client.dc1.warden')
    })

    it('node does not check the names in a client\'s certificate: the transport must (any client the CA signed gets in)', async function () {
      const port = await serve(server)
      const dc2Client = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'client', dc: 'dc2' })
      expect(await ask(port, { servername: 'server.dc1.warden', identity: dc2Client })).to.equal('hello client.dc2.warden')
      const cli = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'cli' })
      expect(await ask(port, { servername: 'server.dc1.warden', identity: cli })).to.equal('hello cli.dc1.warden')
    })
  })

  describe('read by openssl', function () {
    let dir: string

    before(function () {
      if (spawnSync('openssl', ['version']).status !== 0) {
        this.skip() // no openssl binary here: node's reading above is the check
      }
      dir = mkdtempSync(join(tmpdir(), 'warden-tls-openssl-'))
    })

    after(function () {
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    })

    it('openssl x509 -text shows the extensions, and openssl verify accepts each certificate for its purpose only', async function () {
      const client = await createCert({ ca: ca.cert, caKey: ca.key, kind: 'client' })
      writeFileSync(join(dir, 'ca.pem'), ca.cert)
      writeFileSync(join(dir, 'server.pem'), server.cert)
      writeFileSync(join(dir, 'client.pem'), client.cert)
      const caText = execFileSync('openssl', ['x509', '-noout', '-text', '-in', join(dir, 'ca.pem')], { encoding: 'utf8' })
      expect(caText).to.match(/Basic Constraints: critical\s+CA:TRUE/)
      expect(caText).to.match(/Key Usage: critical\s+Digital Signature, Certificate Sign, CRL Sign/)
      expect(caText).to.include('NIST CURVE: P-256')
      const serverText = execFileSync('openssl', ['x509', '-noout', '-text', '-in', join(dir, 'server.pem')], { encoding: 'utf8' })
      expect(serverText).to.match(/Subject Alternative Name:\s+DNS:server\.dc1\.warden, DNS:localhost, IP Address:127\.0\.0\.1/)
      expect(serverText).to.match(/Extended Key Usage:\s+TLS Web Server Authentication, TLS Web Client Authentication/)
      expect(serverText).to.include('Signature Algorithm: ecdsa-with-SHA256')
      const verify = (purpose: string, file: string): number | null =>
        spawnSync('openssl', ['verify', '-CAfile', join(dir, 'ca.pem'), '-purpose', purpose, join(dir, file)], { stdio: 'ignore' }).status
      expect(verify('sslserver', 'server.pem')).to.equal(0)
      expect(verify('sslclient', 'server.pem')).to.equal(0)
      expect(verify('sslclient', 'client.pem')).to.equal(0)
      expect(verify('sslserver', 'client.pem')).to.not.equal(0)
    })
  })
})
