/**
 * A CA and the certificates it signs, for warden's TLS, as `consul tls ca create` and `consul tls cert create` make
 * them (Consul's tlsutil): ECDSA P-256 keys in SEC1 PEM ("EC PRIVATE KEY"), random 128-bit serial numbers, the CA
 * valid 1825 days by default and a certificate 365, a server certificate naming `server.<dc>.<domain>`, `localhost`
 * and 127.0.0.1 (what the peer links and HTTPS check: Consul's verify_server_hostname).
 *
 * node:crypto parses certificates but cannot issue them, so @peculiar/x509 builds and signs them over node's
 * WebCrypto (no openssl binary). It needs a Reflect metadata polyfill loaded first (its dependency tsyringe refuses to
 * load without one), hence the `reflect-metadata` import. Load this module lazily: the commands that do not issue
 * certificates should not pay for it (src/cli/main.ts).
 *
 * Where warden differs from Consul, on purpose:
 * - a client or cli certificate is for TLS clients only (ExtendedKeyUsage clientAuth; Consul's client certificates
 *   also carry serverAuth, for client agents that serve HTTPS, which warden does not have): it never acts as a server;
 * - a leaf's KeyUsage is digitalSignature alone: keyEncipherment (Consul sets it) means nothing for an ECDSA key, and
 *   RFC 5480 leaves it out of what such a certificate may carry;
 * - the additional DNS names are kept for -cli too (Consul drops them).
 */
import 'reflect-metadata'
import { createPrivateKey, createPublicKey, randomBytes, webcrypto, X509Certificate as NodeCertificate, type KeyObject } from 'node:crypto'
import { isIP } from 'node:net'
import { AsnConvert } from '@peculiar/asn1-schema'
import { GeneralName, GeneralSubtree, GeneralSubtrees, NameConstraints, id_ce_nameConstraints } from '@peculiar/asn1-x509'
import * as x509 from '@peculiar/x509'
import { serverName, TLS_DOMAIN } from '../../lib/tls-names.js'

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0])

/** The DNS domain of warden's certificate names (Consul's is `consul`). */
export const DEFAULT_DOMAIN = TLS_DOMAIN
export const DEFAULT_DATACENTER = 'dc1'
/** Consul's defaults: about five years for the CA, one year for a certificate. */
export const DEFAULT_CA_DAYS = 1825
export const DEFAULT_CERT_DAYS = 365

export type CertKind = 'server' | 'client' | 'cli'
export type KeyPurpose = 'serverAuth' | 'clientAuth'

/**
 * Invalid input to createCa or createCert (a name, a number of days, a CA that cannot sign): the message says which,
 * naming the input by the flag of `warden tls` that gives it.
 */
export class CertificateError extends Error {
  override readonly name = 'CertificateError'
}

export interface CaOptions {
  /** Days from now the CA is valid for. Default 1825. */
  days?: number
  /** The domain the name constraint permits (with -name-constraint). Default `warden`. */
  domain?: string
  /** The CA's common name. Default `Warden Agent CA <serial in decimal>`. */
  commonName?: string
  /** Limit what the CA can sign to DNS names under `domain`, `localhost` and `additionalNameConstraints`. */
  nameConstraint?: boolean
  additionalNameConstraints?: readonly string[]
  /** The start of validity. Default now. */
  now?: Date
}

export interface Ca {
  /** PEM. */
  cert: string
  /** PEM, SEC1 ("EC PRIVATE KEY"). */
  key: string
}

export interface CertOptions {
  /** The CA's certificate and key, PEM (the key SEC1 or PKCS#8; EC P-256/384/521 or RSA). */
  ca: string
  caKey: string
  kind: CertKind
  /** Default dc1. */
  dc?: string
  /** Default `warden`. */
  domain?: string
  /** Default 365. */
  days?: number
  /** For a server certificate: adds `<node>.server.<dc>.<domain>`. */
  node?: string
  dnsNames?: readonly string[]
  ipAddresses?: readonly string[]
  /** Replaces the kind's ExtendedKeyUsage: for tests that need a certificate warden would not issue. */
  purposes?: readonly KeyPurpose[]
  now?: Date
}

export interface Cert {
  /** PEM. */
  cert: string
  /** PEM, SEC1 ("EC PRIVATE KEY"). */
  key: string
  /** The common name, also the first name a verifier should check: `server.dc1.warden`. */
  name: string
  dnsNames: string[]
  ipAddresses: string[]
  purposes: KeyPurpose[]
}

const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const
const DAY_MS = 24 * 60 * 60 * 1000
/** As the agent's datacenter names (src/agent/config.ts). */
const DATACENTER = /^[a-z0-9_-]{1,64}$/
const LABEL = '[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?'
const DNS_NAME = new RegExp(`^(\\*\\.)?${LABEL}(\\.${LABEL})*\\.?$`)
const PURPOSE_OID: Record<KeyPurpose, string> = { serverAuth: x509.ExtendedKeyUsage.serverAuth, clientAuth: x509.ExtendedKeyUsage.clientAuth }

export { serverName }

/** The names a certificate of `kind` carries, as Consul's `tls cert create` gives them, and its purposes. */
export function certificateNames(options: Pick<CertOptions, 'kind' | 'dc' | 'domain' | 'node' | 'dnsNames' | 'ipAddresses'>): {
  name: string
  dnsNames: string[]
  ipAddresses: string[]
  purposes: KeyPurpose[]
} {
  const dc = options.dc ?? DEFAULT_DATACENTER
  const domain = options.domain ?? DEFAULT_DOMAIN
  if (!DATACENTER.test(dc)) throw new CertificateError(`-dc "${dc}" must be lowercase letters, digits, "-" or "_"`)
  checkDnsName(domain, '-domain')
  const extraDns = (options.dnsNames ?? []).map((name) => name.trim()).filter((name) => name !== '')
  for (const name of extraDns) checkDnsName(name, '-additional-dnsname')
  const extraIps = (options.ipAddresses ?? []).map((address) => address.trim()).filter((address) => address !== '')
  for (const address of extraIps) if (isIP(address) === 0) throw new CertificateError(`-additional-ipaddress "${address}" is not an IP address`)
  if (options.node !== undefined && options.kind !== 'server') throw new CertificateError('-node requires -server')
  const name = `${options.kind}.${dc}.${domain}`
  const dnsNames = [...extraDns]
  if (options.node !== undefined) {
    checkDnsName(options.node, '-node')
    dnsNames.push(`${options.node}.${name}`)
  }
  dnsNames.push(name, 'localhost')
  // Consul gives a cli certificate no IP address of its own.
  const ipAddresses = options.kind === 'cli' ? extraIps : [...extraIps, '127.0.0.1']
  const purposes: KeyPurpose[] = options.kind === 'server' ? ['serverAuth', 'clientAuth'] : ['clientAuth']
  return { name, dnsNames: unique(dnsNames), ipAddresses: unique(ipAddresses), purposes }
}

export async function createCa(options: CaOptions = {}): Promise<Ca> {
  const days = checkDays(options.days ?? DEFAULT_CA_DAYS)
  const domain = options.domain ?? DEFAULT_DOMAIN
  checkDnsName(domain, '-domain')
  const constraints = options.nameConstraint === true ? unique([...(options.additionalNameConstraints ?? []).map((name) => name.trim()).filter((name) => name !== ''), domain, 'localhost']) : []
  for (const name of constraints) checkDnsName(name, '-additional-name-constraint')
  const keys = await generateKeys()
  const serial = serialNumber()
  const commonName = options.commonName !== undefined && options.commonName !== '' ? options.commonName : `Warden Agent CA ${BigInt(`0x${serial}`).toString(10)}`
  const ski = await x509.SubjectKeyIdentifierExtension.create(keys.publicKey)
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(true, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
    ski,
    new x509.AuthorityKeyIdentifierExtension(ski.keyId),
  ]
  if (constraints.length > 0) {
    const permitted = new GeneralSubtrees(constraints.map((name) => new GeneralSubtree({ base: new GeneralName({ dNSName: name }) })))
    extensions.push(new x509.Extension(id_ce_nameConstraints, true, AsnConvert.serialize(new NameConstraints({ permittedSubtrees: permitted }))))
  }
  const now = options.now ?? new Date()
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial,
    name: [{ CN: [commonName] }],
    notBefore: now,
    notAfter: new Date(now.getTime() + days * DAY_MS),
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions,
  })
  return { cert: cert.toString('pem'), key: await sec1Pem(keys.privateKey) }
}

export async function createCert(options: CertOptions): Promise<Cert> {
  const days = checkDays(options.days ?? DEFAULT_CERT_DAYS)
  const names = certificateNames(options)
  const purposes = options.purposes === undefined ? names.purposes : [...options.purposes]
  const issuer = readCa(options.ca, options.caKey)
  checkNameConstraints(issuer.cert, names.dnsNames)
  const signer = await importSigningKey(issuer.key)
  const keys = await generateKeys()
  const ca = new x509.X509Certificate(issuer.cert.raw)
  const caKeyId = ca.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    caKeyId === undefined ? await x509.AuthorityKeyIdentifierExtension.create(issuer.cert.publicKey.export({ type: 'spki', format: 'der' })) : new x509.AuthorityKeyIdentifierExtension(caKeyId),
    new x509.SubjectAlternativeNameExtension([...names.dnsNames.map((value) => ({ type: 'dns' as const, value })), ...names.ipAddresses.map((value) => ({ type: 'ip' as const, value }))]),
  ]
  if (purposes.length > 0) extensions.push(new x509.ExtendedKeyUsageExtension(purposes.map((purpose) => PURPOSE_OID[purpose])))
  const now = options.now ?? new Date()
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    subject: [{ CN: [names.name] }],
    issuer: ca.subjectName,
    notBefore: now,
    notAfter: new Date(now.getTime() + days * DAY_MS),
    publicKey: keys.publicKey,
    signingKey: signer.key,
    signingAlgorithm: signer.algorithm,
    extensions,
  })
  const pem = cert.toString('pem')
  // As Consul checks what it made before writing it: signed by the CA, and naming what a verifier will ask for.
  const made = new NodeCertificate(pem)
  if (!made.checkIssued(issuer.cert) || !made.verify(issuer.cert.publicKey)) throw new CertificateError('the new certificate does not verify against the CA')
  if (made.checkHost(names.name) === undefined) throw new CertificateError(`the new certificate does not name ${names.name}`)
  return { cert: pem, key: await sec1Pem(keys.privateKey), ...names, purposes }
}

/** The CA's certificate and key, checked: a CA, and the key that goes with it. */
function readCa(certPem: string, keyPem: string): { cert: NodeCertificate; key: KeyObject } {
  let cert: NodeCertificate
  try {
    cert = new NodeCertificate(certPem)
  } catch (error) {
    throw new CertificateError(`the CA certificate is not a PEM certificate (${(error as Error).message})`)
  }
  if (!cert.ca) throw new CertificateError(`the CA certificate (${cert.subject.replace(/\n/g, ', ')}) is not a CA`)
  let key: KeyObject
  try {
    key = createPrivateKey(keyPem)
  } catch (error) {
    throw new CertificateError(`the CA key is not a PEM private key (${(error as Error).message})`)
  }
  const spki = (object: KeyObject): Buffer => object.export({ type: 'spki', format: 'der' })
  if (!spki(createPublicKey(key)).equals(spki(cert.publicKey))) throw new CertificateError('the CA key does not belong to the CA certificate')
  return { cert, key }
}

async function importSigningKey(key: KeyObject): Promise<{ key: webcrypto.CryptoKey; algorithm: webcrypto.Algorithm | webcrypto.EcdsaParams }> {
  const pkcs8 = key.export({ type: 'pkcs8', format: 'der' })
  if (key.asymmetricKeyType === 'ec') {
    const curve = { prime256v1: ['P-256', 'SHA-256'], secp384r1: ['P-384', 'SHA-384'], secp521r1: ['P-521', 'SHA-512'] }[key.asymmetricKeyDetails?.namedCurve ?? '']
    if (curve === undefined) throw new CertificateError(`the CA key's curve ${key.asymmetricKeyDetails?.namedCurve ?? '(unknown)'} is not P-256, P-384 or P-521`)
    const imported = await webcrypto.subtle.importKey('pkcs8', pkcs8, { name: 'ECDSA', namedCurve: curve[0]! }, false, ['sign'])
    return { key: imported, algorithm: { name: 'ECDSA', hash: curve[1]! } }
  }
  if (key.asymmetricKeyType === 'rsa') {
    const algorithm: webcrypto.RsaHashedImportParams = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }
    return { key: await webcrypto.subtle.importKey('pkcs8', pkcs8, algorithm, false, ['sign']), algorithm }
  }
  throw new CertificateError(`the CA key is ${key.asymmetricKeyType ?? 'of an unknown type'}: only EC and RSA keys can sign`)
}

/**
 * The CA's permitted and excluded DNS subtrees against the new names, as a verifier would apply them: a certificate
 * the CA may not sign is refused here rather than by every peer later. Other kinds of constraint are not checked.
 */
function checkNameConstraints(ca: NodeCertificate, dnsNames: readonly string[]): void {
  const extension = new x509.X509Certificate(ca.raw).getExtension(id_ce_nameConstraints)
  if (extension === null) return
  const constraints = AsnConvert.parse(extension.value, NameConstraints)
  const dns = (trees: GeneralSubtrees | undefined): string[] => (trees ?? []).map((tree) => tree.base.dNSName).filter((name): name is string => name !== undefined)
  const permitted = dns(constraints.permittedSubtrees)
  const excluded = dns(constraints.excludedSubtrees)
  const within = (name: string, tree: string): boolean => {
    const base = tree.replace(/^\./, '').toLowerCase()
    const candidate = name.toLowerCase().replace(/\.$/, '')
    return base === '' || candidate === base || candidate.endsWith(`.${base}`)
  }
  for (const name of dnsNames) {
    if (permitted.length > 0 && !permitted.some((tree) => within(name, tree))) throw new CertificateError(`the CA may sign only names under ${permitted.join(', ')}: not ${name}`)
    if (excluded.some((tree) => within(name, tree))) throw new CertificateError(`the CA may not sign names under ${excluded.filter((tree) => within(name, tree)).join(', ')}: not ${name}`)
  }
}

async function generateKeys(): Promise<webcrypto.CryptoKeyPair> {
  return webcrypto.subtle.generateKey(EC_P256, true, ['sign', 'verify'])
}

/** A private key as SEC1 PEM, "EC PRIVATE KEY", the form Consul writes. */
async function sec1Pem(key: webcrypto.CryptoKey): Promise<string> {
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key))
  return createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({ type: 'sec1', format: 'pem' }) as string
}

/** 128 random bits, as hex (Consul's serials are random below 2^128); @peculiar/x509 keeps the INTEGER positive. */
function serialNumber(): string {
  const bytes = randomBytes(16)
  if (bytes[0] === 0) bytes[0] = 1 // sixteen bytes on the wire, never fewer
  return bytes.toString('hex')
}

function checkDays(days: number): number {
  if (!Number.isSafeInteger(days) || days < 1) throw new CertificateError(`-days must be a whole number, 1 or more: ${days}`)
  return days
}

/** Throws unless `name` is a DNS name (labels of letters, digits, "-" and "_"; a leading `*.` allowed). */
export function checkDnsName(name: string, what: string): void {
  if (name.length > 253 || !DNS_NAME.test(name)) throw new CertificateError(`${what} "${name}" is not a DNS name`)
}

function unique(list: readonly string[]): string[] {
  return [...new Set(list)]
}
