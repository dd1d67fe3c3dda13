/**
 * The agent's TLS files (`--tls-ca-file`, `--tls-cert-file`, `--tls-key-file`; config `tls.*`), read and checked at
 * start and again on every SIGHUP. What is checked is what would otherwise fail later, one connection at a time and
 * far from its cause: that each file parses, that the key is the certificate's, that the CA signed the certificate,
 * that the certificate is valid now, and that it names `server.<datacenter>.warden` (the name every peer checks).
 */
import { createPrivateKey, X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { serverName } from '../lib/tls-names.js'
import type { PeerTlsMaterial } from '../transport/tls.js'
import { ConfigError, secretFileWarning, type ConfigWarning } from './config.js'

export interface TlsFiles {
  caFile: string
  certFile: string
  keyFile: string
  /** The settings the three came from, for messages: `--tls-ca-file` or `tls.ca_file`. */
  labels: { caFile: string; certFile: string; keyFile: string }
}

export interface TlsMaterial extends PeerTlsMaterial {
  /** For the log line of a start or a reload: never the key. */
  summary: { subject: string; names: string; validTo: string; fingerprint256: string }
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g

/**
 * Reads and checks the files for a server of `datacenter`; a ConfigError naming the setting and the rule otherwise.
 * `warnings` receives one for a key file others may read.
 */
export function loadTlsFiles(files: TlsFiles, datacenter: string, now: Date, warnings: ConfigWarning[] = []): TlsMaterial {
  const { labels } = files
  const ca = readFile(labels.caFile, files.caFile)
  const certPem = readFile(labels.certFile, files.certFile)
  const keyPem = readFile(labels.keyFile, files.keyFile)
  const warning = secretFileWarning(labels.keyFile, files.keyFile)
  if (warning !== undefined) warnings.push(warning)

  const authorities = (ca.toString('utf8').match(PEM_CERTIFICATE) ?? []).map((pem, position) => parseCertificate(`${labels.caFile} (certificate ${position + 1})`, pem))
  if (authorities.length === 0) throw new ConfigError(`${labels.caFile}: ${files.caFile} holds no PEM certificate`)
  const chain = certPem.toString('utf8').match(PEM_CERTIFICATE) ?? []
  if (chain[0] === undefined) throw new ConfigError(`${labels.certFile}: ${files.certFile} holds no PEM certificate`)
  const certificate = parseCertificate(labels.certFile, chain[0])
  let key
  try {
    key = createPrivateKey(keyPem)
  } catch (error) {
    throw new ConfigError(`${labels.keyFile}: ${files.keyFile} is not a PEM private key: ${(error as Error).message}`)
  }
  if (!certificate.checkPrivateKey(key)) throw new ConfigError(`${labels.keyFile}: the key in ${files.keyFile} is not the key of the certificate in ${files.certFile}`)
  // The certificate, or the last of its chain, must be signed by one of the CA file's certificates.
  const intermediates = chain.slice(1).map((pem, position) => parseCertificate(`${labels.certFile} (chain certificate ${position + 2})`, pem))
  const top = [certificate, ...intermediates].at(-1) ?? certificate
  if (!authorities.some((authority) => top.checkIssued(authority) && top.verify(authority.publicKey))) {
    throw new ConfigError(`${labels.certFile}: the certificate in ${files.certFile} is not signed by the CA in ${files.caFile}`)
  }
  if (Date.parse(certificate.validTo) <= now.getTime()) throw new ConfigError(`${labels.certFile}: the certificate in ${files.certFile} expired on ${certificate.validTo}`)
  if (Date.parse(certificate.validFrom) > now.getTime()) throw new ConfigError(`${labels.certFile}: the certificate in ${files.certFile} is not valid before ${certificate.validFrom}`)
  const expected = serverName(datacenter)
  if (certificate.checkHost(expected) === undefined) {
    throw new ConfigError(
      `${labels.certFile}: the certificate names ${certificate.subjectAltName ?? certificate.subject}; a server of datacenter ${datacenter} needs one naming ${expected}, which every peer checks (make one with: warden tls cert create -server -dc ${datacenter})`,
    )
  }
  return {
    ca,
    cert: certPem,
    key: keyPem,
    summary: { subject: certificate.subject, names: certificate.subjectAltName ?? '', validTo: certificate.validTo, fingerprint256: certificate.fingerprint256 },
  }
}

function readFile(label: string, path: string): Buffer {
  try {
    return readFileSync(path)
  } catch (error) {
    throw new ConfigError(`${label}: cannot read ${path}: ${(error as Error).message}`)
  }
}

function parseCertificate(label: string, pem: string): X509Certificate {
  try {
    return new X509Certificate(pem)
  } catch (error) {
    throw new ConfigError(`${label}: not a valid PEM certificate: ${(error as Error).message}`)
  }
}
