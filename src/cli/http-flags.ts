/**
 * The flags and environment every command that talks to an agent takes, Consul's with WARDEN_ names:
 * -http-addr / WARDEN_HTTP_ADDR, -token / WARDEN_HTTP_TOKEN, -token-file / WARDEN_HTTP_TOKEN_FILE, -datacenter,
 * -namespace / WARDEN_NAMESPACE, -stale, -ca-file / WARDEN_CACERT, -client-cert / WARDEN_CLIENT_CERT,
 * -client-key / WARDEN_CLIENT_KEY, -tls-server-name / WARDEN_TLS_SERVER_NAME, and WARDEN_HTTP_SSL /
 * WARDEN_HTTP_SSL_VERIFY. A flag wins over the environment, as in Consul.
 */
import { readFileSync } from 'node:fs'
import { DEFAULT_ADDRESS, WardenClient, type TlsOptions } from '../api/index.js'
import { UsageError, type FlagSpecs, type ParsedFlags } from './argv.js'
import { FileError, type CliIo } from './io.js'

export const HTTP_FLAGS: FlagSpecs = {
  'http-addr': { type: 'string', value: 'address', help: `The address of the agent's HTTP API, HOST:PORT or https://HOST:PORT. Default ${DEFAULT_ADDRESS}; also WARDEN_HTTP_ADDR.` },
  token: { type: 'string', value: 'value', help: 'The ACL token to use (SecretID). Also WARDEN_HTTP_TOKEN. Prefer -token-file: argv is visible to other users.' },
  'token-file': { type: 'string', value: 'value', help: 'A file holding the ACL token. Also WARDEN_HTTP_TOKEN_FILE.' },
  datacenter: { type: 'string', value: 'value', help: "The datacenter to ask. Defaults to the agent's." },
  namespace: { type: 'string', value: 'value', help: 'The namespace of the request. Also WARDEN_NAMESPACE.' },
  stale: { type: 'boolean', help: 'Allow any server to answer reads, even one that is not the leader.' },
  'ca-file': { type: 'string', value: 'value', help: "PEM file of the CA that signed the agent's certificate. Also WARDEN_CACERT." },
  'client-cert': { type: 'string', value: 'value', help: 'PEM client certificate, for agents that verify clients. Also WARDEN_CLIENT_CERT.' },
  'client-key': { type: 'string', value: 'value', help: "PEM key of -client-cert. Also WARDEN_CLIENT_KEY." },
  'tls-server-name': { type: 'string', value: 'value', help: "The name the agent's certificate must carry, when not the host dialled. Also WARDEN_TLS_SERVER_NAME." },
}

export interface HttpSettings {
  client: WardenClient
  stale: boolean
  /** The secrets this invocation holds: never printed, even inside a server's error message. */
  secrets: string[]
}

function readPem(path: string, flag: string): Buffer {
  try {
    return readFileSync(path)
  } catch (error) {
    throw new FileError(path, (error as NodeJS.ErrnoException).code ?? (error as Error).message, `-${flag}`)
  }
}

function readToken(path: string, flag: string): string {
  try {
    return readFileSync(path, 'utf8').trim()
  } catch (error) {
    throw new FileError(path, (error as NodeJS.ErrnoException).code ?? (error as Error).message, `-${flag}`)
  }
}

export function httpSettings(flags: ParsedFlags, io: CliIo): HttpSettings {
  const value = (name: string): string | undefined => {
    const given = flags.values[name]
    return typeof given === 'string' ? given : undefined
  }
  const env = io.env
  let address = value('http-addr') ?? env['WARDEN_HTTP_ADDR'] ?? DEFAULT_ADDRESS
  if (!/^[a-z]+:\/\//i.test(address) && /^(1|true)$/i.test(env['WARDEN_HTTP_SSL'] ?? '')) address = `https://${address}`
  const tokenFile = value('token-file') ?? env['WARDEN_HTTP_TOKEN_FILE']
  let token = value('token')
  if (token === undefined && tokenFile !== undefined) token = readToken(tokenFile, 'token-file')
  token ??= env['WARDEN_HTTP_TOKEN']
  const tls: TlsOptions = {}
  const caFile = value('ca-file') ?? env['WARDEN_CACERT']
  if (caFile !== undefined) tls.ca = readPem(caFile, 'ca-file')
  const certFile = value('client-cert') ?? env['WARDEN_CLIENT_CERT']
  const keyFile = value('client-key') ?? env['WARDEN_CLIENT_KEY']
  if ((certFile === undefined) !== (keyFile === undefined)) throw new UsageError('-client-cert and -client-key go together: give both or neither')
  if (certFile !== undefined && keyFile !== undefined) {
    tls.cert = readPem(certFile, 'client-cert')
    tls.key = readPem(keyFile, 'client-key')
  }
  const serverName = value('tls-server-name') ?? env['WARDEN_TLS_SERVER_NAME']
  if (serverName !== undefined) tls.serverName = serverName
  if (/^(0|false)$/i.test(env['WARDEN_HTTP_SSL_VERIFY'] ?? '')) tls.insecureSkipVerify = true
  const namespace = value('namespace') ?? env['WARDEN_NAMESPACE']
  const datacenter = value('datacenter')
  let client: WardenClient
  try {
    client = new WardenClient({
      address,
      ...(token === undefined || token === '' ? {} : { token }),
      ...(namespace === undefined ? {} : { namespace }),
      ...(datacenter === undefined ? {} : { datacenter }),
      tls,
      maxSockets: 8,
    })
  } catch (error) {
    throw new UsageError(`-http-addr: ${(error as Error).message}`)
  }
  return { client, stale: flags.values['stale'] === true, secrets: token === undefined || token === '' ? [] : [token] }
}
