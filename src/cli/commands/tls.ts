/**
 * `warden tls ca create` and `warden tls cert create`, as Consul's `consul tls`: files in the current directory,
 * `warden-agent-ca.pem` and `warden-agent-ca-key.pem` for the CA, `<dc>-<kind>-warden-<N>.pem` and
 * `<dc>-<kind>-warden-<N>-key.pem` for a certificate with the first N that names no existing file. Nothing is ever
 * overwritten: each file is created exclusively, a key with mode 0600 from its creation. The generator
 * (../tls/generate.ts) is loaded only when a command runs, so other commands do not pay for it.
 */
import { readFile, unlink, writeFile } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { UsageError } from '../argv.js'
import { CommandError, type Command, type CommandContext } from '../command.js'
import { FileError } from '../io.js'

const DOMAIN = 'warden'
/** Consul looks this far for a free N before giving up. */
const MAX_INDEX = 10000

/** The CA's file names for a domain. */
export function caFileNames(domain: string): { cert: string; key: string } {
  return { cert: `${domain}-agent-ca.pem`, key: `${domain}-agent-ca-key.pem` }
}

/** The first `<prefix>-N.pem` / `<prefix>-N-key.pem` pair of which neither file exists in `dir`. */
export function freeCertFileNames(dir: string, prefix: string): { cert: string; key: string } {
  for (let index = 0; index <= MAX_INDEX; index += 1) {
    const names = { cert: `${prefix}-${index}.pem`, key: `${prefix}-${index}-key.pem` }
    if (!existsSync(join(dir, names.cert)) && !existsSync(join(dir, names.key))) return names
  }
  throw new CommandError("Could not find a filename that doesn't already exist")
}

/**
 * Writes the files in order, each created exclusively (never over an existing file, even one that appeared since the
 * names were chosen), with its mode from creation. If one cannot be written, those written before it are removed.
 */
export async function saveNew(dir: string, files: ReadonlyArray<{ name: string; text: string; mode: number }>, saved: (name: string) => void): Promise<void> {
  const written: string[] = []
  try {
    for (const file of files) {
      try {
        await writeFile(join(dir, file.name), file.text, { flag: 'wx', mode: file.mode })
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code
        throw new CommandError(code === 'EEXIST' ? `${file.name} already exists.` : `Error writing ${file.name}: ${code ?? (error as Error).message}`)
      }
      written.push(file.name)
      saved(file.name)
    }
  } catch (error) {
    await Promise.all(written.map((name) => unlink(join(dir, name)).catch(() => undefined)))
    throw error
  }
}

function days(context: CommandContext, fallback: number): number {
  const text = context.string('days')
  if (text === undefined) return fallback
  if (!/^\d+$/.test(text.trim())) throw new UsageError(`invalid value "${text}" for flag -days: parse error`)
  const value = Number(text.trim())
  if (value < 1) throw new UsageError('-days must be 1 or more')
  return value
}

type Generator = typeof import('../tls/generate.js')

/** The generator, loaded on first use. */
async function generator(): Promise<Generator> {
  return import('../tls/generate.js')
}

/** Runs `make`; the generator's complaint (a bad name, a CA that cannot sign) becomes `as`, with its message. */
async function generating<T>(as: 'usage' | 'failure', make: (generate: Generator) => T | Promise<T>): Promise<T> {
  const generate = await generator()
  try {
    return await make(generate)
  } catch (error) {
    if (!(error instanceof generate.CertificateError)) throw error
    if (as === 'usage') throw new UsageError(error.message)
    throw new CommandError(`Error creating the certificate: ${error.message}`)
  }
}

async function readPem(path: string, what: string): Promise<string> {
  try {
    return await readFile(path, 'utf8')
  } catch (error) {
    throw new CommandError(`Error reading ${what}: ${new FileError(path, (error as NodeJS.ErrnoException).code ?? (error as Error).message).message}`)
  }
}

export const caCreate: Command = {
  path: 'tls ca create',
  synopsis: 'Create a new warden CA',
  help: `Usage: warden tls ca create [options]

  Creates a CA for warden's TLS certificates in the current directory: its certificate and its key
  (mode 0600). Existing files are never overwritten:

      $ warden tls ca create
      ==> Saved warden-agent-ca.pem
      ==> Saved warden-agent-ca-key.pem`,
  flags: {
    days: { type: 'string', value: 'int', help: 'Number of days the CA is valid for. Defaults to 1825 (about 5 years).' },
    domain: { type: 'string', value: 'string', help: 'The DNS domain of the certificates\' names and of the file names. Defaults to warden. Used by -name-constraint.' },
    'name-constraint': {
      type: 'boolean',
      help: 'Lets the CA sign only DNS names under localhost, -domain and each -additional-name-constraint (X.509 name constraints). Defaults to false.',
    },
    'additional-name-constraint': {
      type: 'string',
      multiple: true,
      value: 'value',
      help: 'Another DNS domain the CA may sign names under, with -name-constraint. May be given more than once.',
    },
    'common-name': { type: 'string', value: 'string', help: 'Common Name of the CA. Defaults to "Warden Agent CA <serial number>".' },
  },
  http: false,
  async run(context) {
    const domain = context.string('domain') ?? DOMAIN
    const validity = days(context, 1825)
    const constraints = context.list('additional-name-constraint')
    await generating('usage', (generate) => {
      generate.checkDnsName(domain, '-domain')
      for (const name of constraints) generate.checkDnsName(name.trim(), '-additional-name-constraint')
    })
    const dir = process.cwd()
    const names = caFileNames(domain)
    for (const name of [names.cert, names.key]) if (existsSync(join(dir, name))) throw new CommandError(`${name} already exists.`)
    const commonName = context.string('common-name')
    const ca = await generating('failure', (generate) =>
      generate.createCa({
        days: validity,
        domain,
        nameConstraint: context.boolean('name-constraint'),
        additionalNameConstraints: constraints,
        ...(commonName === undefined || commonName === '' ? {} : { commonName }),
      }),
    )
    await saveNew(
      dir,
      [
        { name: names.cert, text: ca.cert, mode: 0o644 },
        { name: names.key, text: ca.key, mode: 0o600 },
      ],
      (name) => context.print(`==> Saved ${name}`),
    )
  },
}

export const certCreate: Command = {
  path: 'tls cert create',
  synopsis: 'Create a new certificate',
  help: `Usage: warden tls cert create (-server | -client | -cli) [options]

  Creates a certificate and its key (mode 0600) in the current directory, signed by the CA that
  warden tls ca create made. A server's certificate names server.<dc>.warden, which peers and clients
  check; a client's or the CLI's can only authenticate a client. Existing files are never overwritten:
  the file names take the first free number.

      $ warden tls cert create -server -dc dc1 -additional-dnsname n1.example.com
      ==> WARNING: A server certificate lets its holder act as a server of the
          datacenter and read all of its state, every ACL token included. Give it
          only to server nodes and keep it as safe as the CA key.
      ==> Using warden-agent-ca.pem and warden-agent-ca-key.pem
      ==> Saved dc1-server-warden-0.pem
      ==> Saved dc1-server-warden-0-key.pem
      $ warden tls cert create -client
      ==> Using warden-agent-ca.pem and warden-agent-ca-key.pem
      ==> Saved dc1-client-warden-0.pem
      ==> Saved dc1-client-warden-0-key.pem`,
  flags: {
    ca: { type: 'string', value: 'string', help: 'The CA\'s certificate. Defaults to <domain>-agent-ca.pem (warden-agent-ca.pem).' },
    key: { type: 'string', value: 'string', help: 'The CA\'s key. Defaults to <domain>-agent-ca-key.pem (warden-agent-ca-key.pem).' },
    server: { type: 'boolean', help: 'Create a server certificate.' },
    client: { type: 'boolean', help: 'Create a client certificate.' },
    cli: { type: 'boolean', help: 'Create a certificate for the CLI.' },
    node: { type: 'string', value: 'string', help: 'With -server: also name <node>.server.<dc>.<domain>.' },
    days: { type: 'string', value: 'int', help: 'Number of days the certificate is valid for. Defaults to 365.' },
    dc: { type: 'string', value: 'string', help: 'The datacenter the certificate is for. Defaults to dc1.' },
    domain: { type: 'string', value: 'string', help: 'The DNS domain of the certificate\'s names. Defaults to warden.' },
    'additional-dnsname': {
      type: 'string',
      multiple: true,
      value: 'value',
      help: 'Another DNS name for the Subject Alternative Names; localhost is always included. May be given more than once.',
    },
    'additional-ipaddress': {
      type: 'string',
      multiple: true,
      value: 'value',
      help: 'Another IP address for the Subject Alternative Names; 127.0.0.1 is always included, except with -cli. May be given more than once.',
    },
  },
  http: false,
  async run(context) {
    const domain = context.string('domain') ?? DOMAIN
    const defaults = caFileNames(domain)
    const caFile = context.string('ca') ?? defaults.cert
    const keyFile = context.string('key') ?? defaults.key
    if (caFile === '') throw new UsageError('Please provide the ca')
    if (keyFile === '') throw new UsageError('Please provide the key')
    const kinds = (['server', 'client', 'cli'] as const).filter((kind) => context.boolean(kind))
    if (kinds.length !== 1) throw new UsageError('Please provide either -server, -client, or -cli')
    const kind = kinds[0]!
    const node = context.string('node')
    if (node !== undefined && node !== '' && kind !== 'server') throw new UsageError('-node requires -server')
    const dc = context.string('dc') ?? 'dc1'
    const validity = days(context, 365)
    const options = { kind, dc, domain, dnsNames: context.list('additional-dnsname'), ipAddresses: context.list('additional-ipaddress'), ...(node === undefined || node === '' ? {} : { node }) }
    // A bad datacenter, name or address is a usage mistake, reported before any file is looked at.
    await generating('usage', (generate) => generate.certificateNames(options))
    const dir = process.cwd()
    const names = freeCertFileNames(dir, `${dc}-${kind}-${domain}`)
    const ca = await readPem(caFile, 'CA')
    const caKey = await readPem(keyFile, 'CA key')
    if (kind === 'server') {
      context.print(`==> WARNING: A server certificate lets its holder act as a server of the
    datacenter and read all of its state, every ACL token included. Give it
    only to server nodes and keep it as safe as the CA key.`)
    }
    context.print(`==> Using ${caFile} and ${keyFile}`)
    const made = await generating('failure', (generate) => generate.createCert({ ...options, ca, caKey, days: validity }))
    await saveNew(
      dir,
      [
        { name: names.cert, text: made.cert, mode: 0o644 },
        { name: names.key, text: made.key, mode: 0o600 },
      ],
      (name) => context.print(`==> Saved ${name}`),
    )
  },
}
