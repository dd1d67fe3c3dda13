/**
 * Agent settings from flags, a JSON config file (snake_case keys, readings.md) and the environment, validated once
 * at start. Flags win over the file; secrets may come from files or the environment instead of argv. Every problem is
 * a ConfigError whose message names the flag, key or variable, and the CLI exits 2 with it. What is allowed but unwise
 * (a secret on argv, a secret file others may read) is a warning the agent logs at start; no message quotes a secret.
 */
import { ACCEPT_KEYS_MAX } from '../transport/handshake.js'
import { readFileSync, statSync } from 'node:fs'
import { NODE_NAME_PATTERN } from '../lib/ids.js'
import { hostname } from 'node:os'
import { parseDuration } from '../lib/duration.js'
import type { RateLimitSettings } from '../http/rate-limit.js'
import type { TlsFiles } from './tls-files.js'

export class ConfigError extends Error {
  override readonly name = 'ConfigError'
}

export interface Address {
  host: string
  port: number
}

export interface AgentConfig {
  dev: boolean
  nodeName: string
  datacenter: string
  primaryDatacenter: string
  dataDir: string | undefined
  /** Plain HTTP; undefined when `http_addr` is `off`. */
  httpAddr: Address | undefined
  /** HTTPS (`https_addr`), which needs the TLS files; undefined when not asked for. */
  httpsAddr: Address | undefined
  /**
   * The TLS files (tls-files.ts), when given: peer links then run over TLS, and HTTPS may be served. With
   * `verifyIncoming`, HTTPS clients must present a certificate the CA signed.
   */
  tls: (TlsFiles & { verifyIncoming: boolean }) | undefined
  /** `--unsealed-peer-links-for-benchmark`: peer frames in clear, to measure what sealing costs. Never for use. */
  unsealedPeerLinks: boolean
  clusterAddr: Address
  peers: Record<string, string>
  join: string[]
  /** `--join-wan` / `retry_join_wan`: cluster addresses of servers of other datacenters, dialed until one answers. */
  joinWan: string[]
  clusterKey: string | undefined
  /**
   * Keys this node still accepts from peers besides clusterKey, during a rotation (`--cluster-key-accept`); each
   * valid as clusterKey is. Empty unless clusterKey is set.
   */
  clusterKeysAccepted: string[]
  initialManagementToken: string | undefined
  /**
   * ACL replication in a secondary datacenter (datacenter other than primary_datacenter): the token it reads the
   * primary with (`acl.tokens.replication`), and the records a second it applies at most.
   */
  replication: { token: string | undefined; applyRate: number; rate: number; burst: number; readYourWritesWaitMs: number; tokens: boolean }
  defaultPolicy: 'allow' | 'deny'
  downPolicy: 'allow' | 'deny' | 'extend-cache' | 'async-cache'
  logLevel: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal'
  tokenMinExpirationTtlMs: number
  tokenMaxExpirationTtlMs: number
  cloud: { resourceId?: string; clientId?: string; clientSecret?: string; managementPlaneUrl?: string }
  raft: { heartbeatIntervalMs: number; electionTimeoutMs: number; snapshotThreshold: number; leaderWaitMs: number; shipWrites: boolean }
  /**
   * `httpMaxConnsPerClient`: HTTP connections one client address may hold at once; 0 for no limit per client. `rates`:
   * `limits.request_limits` (mode, read_rate, write_rate) and `limits.login_rate`, Infinity where unlimited.
   */
  limits: { httpMaxConnsPerClient: number; rates: RateLimitSettings }
  /**
   * The audit log (`--audit-log FILE`, file key `audit`), undefined when off. `setting` names where the path came
   * from, for the message that stops the agent when the file cannot be opened.
   */
  audit: { path: string; rotateBytes: number; rotateKeep: number; setting: string } | undefined
  /** What the agent logs as warnings once it has a logger: settings that work but expose a secret. */
  warnings: ConfigWarning[]
}

export interface ConfigWarning {
  /** The flag, file key or variable concerned (`--cluster-key`, `--cluster-key-file`). */
  setting: string
  message: string
}

/** An audit file is rotated at this size unless audit.rotate_bytes says otherwise, and this many rotated files are kept. */
export const AUDIT_ROTATE_BYTES_DEFAULT = 100 * 1024 * 1024
export const AUDIT_ROTATE_KEEP_DEFAULT = 5

/** Consul's default for limits.http_max_conns_per_client. */
export const HTTP_MAX_CONNS_PER_CLIENT_DEFAULT = 200

type Raw = Record<string, unknown>

const FLAG_KEYS: Record<string, string> = {
  'node-name': 'node_name',
  datacenter: 'datacenter',
  'primary-datacenter': 'primary_datacenter',
  'data-dir': 'data_dir',
  'http-addr': 'http_addr',
  'https-addr': 'https_addr',
  'tls-ca-file': 'tls.ca_file',
  'tls-cert-file': 'tls.cert_file',
  'tls-key-file': 'tls.key_file',
  'cluster-addr': 'cluster_addr',
  'cluster-key': 'cluster_key',
  'log-level': 'log_level',
  'default-policy': 'acl.default_policy',
  'down-policy': 'acl.down_policy',
  'initial-management-token': 'acl.tokens.initial_management',
  'acl-replication-token': 'acl.tokens.replication',
  'http-max-conns-per-client': 'limits.http_max_conns_per_client',
  'audit-log': 'audit.path',
  'enable-token-replication': 'acl.enable_token_replication',
}

const FILE_FLAGS: Record<string, string> = {
  'cluster-key-file': 'cluster_key',
  'initial-management-token-file': 'acl.tokens.initial_management',
  'acl-replication-token-file': 'acl.tokens.replication',
}

/** Flags given more than once, each in the order given. */
const REPEATED_FLAGS = ['peer', 'join', 'join-wan', 'cluster-key-accept', 'cluster-key-accept-file'] as const
type RepeatedFlag = (typeof REPEATED_FLAGS)[number]

export interface ParsedFlags {
  values: Map<string, string>
  dev: boolean
  /** `--tls-verify-incoming`, which takes no value (as --dev). */
  tlsVerifyIncoming: boolean
  /** `--unsealed-peer-links-for-benchmark`, no value; not in the usage: the benchmark's comparison only. */
  unsealedPeerLinks: boolean
  peers: string[]
  join: string[]
  joinWan: string[]
  /** `--cluster-key-accept KEY` and `--cluster-key-accept-file FILE`, in the order given. */
  clusterKeyAccept: Array<{ flag: 'cluster-key-accept' | 'cluster-key-accept-file'; value: string }>
  configFile: string | undefined
}

/** `--flag value` and `--flag=value`; `--dev` takes no value; `--peer`, `--join` and `--cluster-key-accept[-file]` repeat. */
export function parseFlags(argv: readonly string[]): ParsedFlags {
  const parsed: ParsedFlags = { values: new Map(), dev: false, tlsVerifyIncoming: false, unsealedPeerLinks: false, peers: [], join: [], joinWan: [], clusterKeyAccept: [], configFile: undefined }
  for (let position = 0; position < argv.length; position += 1) {
    const arg = argv[position] ?? ''
    if (!arg.startsWith('--')) throw new ConfigError(`unexpected argument "${arg}"; flags start with --`)
    const equals = arg.indexOf('=')
    const name = arg.slice(2, equals === -1 ? undefined : equals)
    if (name === 'dev' || name === 'tls-verify-incoming' || name === 'unsealed-peer-links-for-benchmark') {
      if (equals !== -1) throw new ConfigError(`--${name}: takes no value`)
      if (name === 'dev') parsed.dev = true
      else if (name === 'tls-verify-incoming') parsed.tlsVerifyIncoming = true
      else parsed.unsealedPeerLinks = true
      continue
    }
    const known = Object.hasOwn(FLAG_KEYS, name) || Object.hasOwn(FILE_FLAGS, name) || (REPEATED_FLAGS as readonly string[]).includes(name) || name === 'config-file'
    if (!known) throw new ConfigError(`--${name}: unknown flag`)
    let value: string
    if (equals !== -1) value = arg.slice(equals + 1)
    else {
      const next = argv[position + 1]
      if (next === undefined) throw new ConfigError(`--${name}: needs a value`)
      value = next
      position += 1
    }
    if (name === 'peer') parsed.peers.push(value)
    else if (name === 'join') parsed.join.push(value)
    else if (name === 'join-wan') parsed.joinWan.push(value)
    else if (name === 'cluster-key-accept' || name === 'cluster-key-accept-file') parsed.clusterKeyAccept.push({ flag: name as Exclude<RepeatedFlag, 'peer' | 'join' | 'join-wan'>, value })
    else if (name === 'config-file') parsed.configFile = value
    else parsed.values.set(name, value)
  }
  return parsed
}

function readSecretFile(flag: string, path: string, warnings: ConfigWarning[]): string {
  try {
    const text = readFileSync(path, 'utf8').trim()
    const warning = secretFileWarning(`--${flag}`, path)
    if (warning !== undefined) warnings.push(warning)
    if (text === '') throw new ConfigError(`--${flag}: ${path} is empty`)
    return text
  } catch (error) {
    if (error instanceof ConfigError) throw error
    throw new ConfigError(`--${flag}: cannot read ${path}: ${(error as Error).message}`)
  }
}

/**
 * A warning when a file holding a secret may be read or written by its group or others (any of the mode's 077 bits),
 * naming the file and the fix; nothing on systems without Unix modes, or when the file cannot be examined (reading it
 * is what reports that). For the TLS key file too, once there is one.
 */
export function secretFileWarning(setting: string, path: string): ConfigWarning | undefined {
  if (process.platform === 'win32') return undefined
  let mode: number
  try {
    mode = statSync(path).mode & 0o777
  } catch {
    // Reading the file names the problem; a warning about its mode would add nothing.
    return undefined
  }
  if ((mode & 0o077) === 0) return undefined
  const octal = mode.toString(8).padStart(4, '0')
  return { setting, message: `${setting}: ${path} holds a secret and its group or others may access it (mode ${octal}); make it private: chmod 600 ${path}` }
}

/** Flags whose value is a secret, with the forms that keep it off the command line. */
const SECRET_FLAGS: Array<{ flag: string; file: string; environment: string }> = [
  { flag: 'cluster-key', file: 'cluster-key-file', environment: 'WARDEN_CLUSTER_KEY' },
  { flag: 'cluster-key-accept', file: 'cluster-key-accept-file', environment: 'WARDEN_CLUSTER_KEY_ACCEPT' },
  { flag: 'initial-management-token', file: 'initial-management-token-file', environment: 'WARDEN_INITIAL_MANAGEMENT_TOKEN' },
  { flag: 'acl-replication-token', file: 'acl-replication-token-file', environment: 'WARDEN_ACL_REPLICATION_TOKEN' },
]

/** File keys whose value is a secret: a config file holding one is a secret file. */
const SECRET_FILE_KEYS = ['cluster_key', 'cluster_key_accept', 'acl.tokens.initial_management', 'acl.tokens.replication', 'cloud.client_secret']

function argvWarnings(flags: ParsedFlags): ConfigWarning[] {
  const given = (flag: string): boolean => flags.values.has(flag) || flags.clusterKeyAccept.some((entry) => entry.flag === flag)
  return SECRET_FLAGS.filter(({ flag }) => given(flag)).map(({ flag, file, environment }) => ({
    setting: `--${flag}`,
    message: `--${flag}: a secret on the command line can be read by other users of this machine (ps, /proc/<pid>/cmdline) and lands in shell histories; give it with --${file} FILE (mode 600) or the ${environment} environment variable instead`,
  }))
}

/**
 * A cluster key's bytes and the form they were read in, or undefined when the text is neither form. A string of hex
 * digits only is hex, although it is valid base64 too: read as base64, 24 hex digits would pass for 18 bytes while
 * holding 12 bytes' worth of randomness. Anything else is standard base64 (RFC 4648 §4), padded or not, as `warden
 * keygen` and `consul keygen` print it. Peers compare the key as written, not its bytes: give every node the same text.
 */
export function decodeClusterKey(text: string): { form: 'hex' | 'base64'; bytes: Buffer } | undefined {
  if (HEX_DIGITS.test(text)) return text.length % 2 === 0 ? { form: 'hex', bytes: Buffer.from(text, 'hex') } : undefined
  if (!BASE64.test(text)) return undefined
  return { form: 'base64', bytes: Buffer.from(text, 'base64') }
}

const HEX_DIGITS = /^[0-9a-fA-F]+$/
/** Groups of four, then a last group of two or three characters, its padding optional. Not empty. */
const BASE64 = /^(?=.)(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/s
export const CLUSTER_KEY_BYTES_MIN = 16

function checkClusterKey(label: string, text: string): void {
  const decoded = decodeClusterKey(text)
  if (decoded !== undefined && decoded.bytes.length >= CLUSTER_KEY_BYTES_MIN) return
  const problem = decoded === undefined ? 'is neither base64 nor hex' : `is ${decoded.bytes.length} bytes (read as ${decoded.form})`
  throw new ConfigError(
    `${label}: ${problem}; a cluster key is at least ${CLUSTER_KEY_BYTES_MIN} random bytes, written as base64 or as 32 or more hex digits. Make one with: warden keygen`,
  )
}

function readConfigFile(path: string): Raw {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    throw new ConfigError(`--config-file: cannot read ${path}: ${(error as Error).message}`)
  }
  try {
    const value = JSON.parse(text) as unknown
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('the top level must be an object')
    return value as Raw
  } catch (error) {
    throw new ConfigError(`--config-file: ${path} is not valid JSON: ${(error as Error).message}`)
  }
}

const FILE_KEYS: Record<string, string[] | 'object'> = {
  node_name: [],
  datacenter: [],
  primary_datacenter: [],
  data_dir: [],
  http_addr: [],
  https_addr: [],
  cluster_addr: [],
  retry_join_wan: [],
  peers: 'object',
  cluster_key: [],
  cluster_key_accept: [],
  log_level: [],
  acl: ['default_policy', 'down_policy', 'token_min_expiration_ttl', 'token_max_expiration_ttl', 'tokens', 'replication_apply_limit', 'replication_rate', 'replication_burst', 'replication_read_your_writes_wait', 'enable_token_replication'],
  cloud: ['resource_id', 'client_id', 'client_secret', 'management_plane_url'],
  raft: ['heartbeat_interval', 'election_timeout', 'snapshot_threshold', 'leader_wait', 'ship_writes'],
  limits: ['http_max_conns_per_client', 'request_limits', 'login_rate'],
  audit: ['path', 'rotate_bytes', 'rotate_keep'],
  tls: ['ca_file', 'cert_file', 'key_file', 'verify_incoming'],
}

const REQUEST_LIMITS_KEYS = ['mode', 'read_rate', 'write_rate']

/** Flattens the file to dotted keys (acl.default_policy), refusing keys the agent does not know. */
function flattenFile(raw: Raw): Map<string, unknown> {
  const flat = new Map<string, unknown>()
  for (const [key, value] of Object.entries(raw)) {
    const shape = FILE_KEYS[key]
    if (shape === undefined) throw new ConfigError(`config file: unknown key "${key}"`)
    if (shape === 'object' || (Array.isArray(shape) && shape.length === 0)) {
      flat.set(key, value)
      continue
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ConfigError(`config file: "${key}" must be an object`)
    for (const [inner, innerValue] of Object.entries(value as Raw)) {
      if (!shape.includes(inner)) throw new ConfigError(`config file: unknown key "${key}.${inner}"`)
      if (key === 'acl' && inner === 'tokens') {
        if (typeof innerValue !== 'object' || innerValue === null) throw new ConfigError('config file: "acl.tokens" must be an object')
        for (const [tokenKey, tokenValue] of Object.entries(innerValue as Raw)) {
          if (tokenKey !== 'initial_management' && tokenKey !== 'replication') throw new ConfigError(`config file: unknown key "acl.tokens.${tokenKey}"`)
          flat.set(`acl.tokens.${tokenKey}`, tokenValue)
        }
        continue
      }
      if (key === 'limits' && inner === 'request_limits') {
        if (typeof innerValue !== 'object' || innerValue === null || Array.isArray(innerValue)) throw new ConfigError('config file: "limits.request_limits" must be an object')
        for (const [limitKey, limitValue] of Object.entries(innerValue as Raw)) {
          if (!REQUEST_LIMITS_KEYS.includes(limitKey)) throw new ConfigError(`config file: unknown key "limits.request_limits.${limitKey}"`)
          flat.set(`limits.request_limits.${limitKey}`, limitValue)
        }
        continue
      }
      flat.set(`${key}.${inner}`, innerValue)
    }
  }
  return flat
}

function parseAddress(name: string, value: string): Address {
  const match = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(value)
  const port = Number(match?.[2])
  if (match === null || port > 65535) throw new ConfigError(`${name}: "${value}" must be host:port with a port from 0 to 65535`)
  return { host: (match[1] ?? '').replace(/^\[|\]$/g, ''), port }
}

export function formatAddress(address: Address): string {
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`
}

function durationSetting(name: string, value: unknown, fallbackMs: number): number {
  if (value === undefined) return fallbackMs
  const ms = typeof value === 'string' ? parseDuration(value) : undefined
  if (ms === undefined || ms < 0) throw new ConfigError(`${name}: must be a duration such as 30s`)
  return ms
}

function oneOf<T extends string>(name: string, value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw new ConfigError(`${name}: must be one of ${allowed.join(', ')}`)
  }
  return value as T
}

function stringSetting(name: string, value: unknown): string | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'string') throw new ConfigError(`${name}: must be a string`)
  return value
}

const DATACENTER = /^[a-z0-9_-]{1,64}$/

export function loadConfig(argv: readonly string[], env: NodeJS.ProcessEnv): AgentConfig {
  const flags = parseFlags(argv)
  const warnings: ConfigWarning[] = []
  const settings = flags.configFile === undefined ? new Map<string, unknown>() : flattenFile(readConfigFile(flags.configFile))
  if (flags.configFile !== undefined && SECRET_FILE_KEYS.some((key) => settings.has(key))) {
    const warning = secretFileWarning('--config-file', flags.configFile)
    if (warning !== undefined) warnings.push(warning)
  }
  // Where each setting came from, so messages name the flag or variable the operator used, and the file key otherwise.
  const origins = new Map<string, string>()
  // Environment secrets fill in what the file leaves out; flags override both.
  if (env.WARDEN_CLUSTER_KEY && !settings.has('cluster_key')) {
    settings.set('cluster_key', env.WARDEN_CLUSTER_KEY)
    origins.set('cluster_key', 'WARDEN_CLUSTER_KEY')
  }
  if (env.WARDEN_ACL_REPLICATION_TOKEN && !settings.has('acl.tokens.replication')) {
    settings.set('acl.tokens.replication', env.WARDEN_ACL_REPLICATION_TOKEN)
    origins.set('acl.tokens.replication', 'WARDEN_ACL_REPLICATION_TOKEN')
  }
  if (env.WARDEN_INITIAL_MANAGEMENT_TOKEN && !settings.has('acl.tokens.initial_management')) {
    settings.set('acl.tokens.initial_management', env.WARDEN_INITIAL_MANAGEMENT_TOKEN)
    origins.set('acl.tokens.initial_management', 'WARDEN_INITIAL_MANAGEMENT_TOKEN')
  }
  for (const [flag, key] of Object.entries(FILE_FLAGS)) {
    const path = flags.values.get(flag)
    if (path !== undefined) {
      settings.set(key, readSecretFile(flag, path, warnings))
      origins.set(key, `--${flag}`)
    }
  }
  for (const [flag, value] of flags.values) {
    const key = FLAG_KEYS[flag]
    if (key !== undefined) {
      settings.set(key, value)
      origins.set(key, `--${flag}`)
    }
  }
  const label = (key: string): string => origins.get(key) ?? key
  const text = (key: string): string | undefined => stringSetting(label(key), settings.get(key))

  const nodeName = text('node_name') ?? hostname()
  if (!NODE_NAME_PATTERN.test(nodeName)) throw new ConfigError(`${label('node_name')}: "${nodeName}" must be letters, digits, ".", "-" or "_"`)
  const datacenter = text('datacenter') ?? 'dc1'
  if (!DATACENTER.test(datacenter)) throw new ConfigError(`${label('datacenter')}: must be lowercase letters, digits, "-" or "_"`)
  const primaryDatacenter = text('primary_datacenter') ?? datacenter
  if (!DATACENTER.test(primaryDatacenter)) throw new ConfigError(`${label('primary_datacenter')}: must be lowercase letters, digits, "-" or "_"`)

  const peers: Record<string, string> = {}
  const filePeers = settings.get('peers')
  if (filePeers !== undefined) {
    if (typeof filePeers !== 'object' || filePeers === null || Array.isArray(filePeers)) throw new ConfigError('peers: must be an object of name to address')
    for (const [name, address] of Object.entries(filePeers as Raw)) peers[name] = String(address)
  }
  for (const peer of flags.peers) {
    const equals = peer.indexOf('=')
    if (equals <= 0) throw new ConfigError(`--peer: "${peer}" must be NAME=host:port`)
    peers[peer.slice(0, equals)] = peer.slice(equals + 1)
  }
  for (const [name, address] of Object.entries(peers)) {
    if (!NODE_NAME_PATTERN.test(name)) throw new ConfigError(`--peer: "${name}" is not a valid node name`)
    parseAddress(`--peer ${name}`, address)
  }
  for (const address of flags.join) {
    const scheme = /^(https?):\/\//.exec(address)
    parseAddress('--join', scheme === null ? address : address.slice(scheme[0].length))
  }

  const joinWan = joinWanSettings(flags, settings.get('retry_join_wan'))
  const initialManagementToken = text('acl.tokens.initial_management')
  if (initialManagementToken !== undefined && !/^[\x21-\x7e]{1,128}$/.test(initialManagementToken)) {
    throw new ConfigError(`${label('acl.tokens.initial_management')}: must be 1 to 128 printable characters without spaces`)
  }
  const clusterKey = text('cluster_key')
  if (clusterKey !== undefined) checkClusterKey(label('cluster_key'), clusterKey)
  const accepted = acceptedKeys(flags, settings.get('cluster_key_accept'), env, warnings)
  // The transport tries each accepted key on every handshake it takes: a few are enough for a rotation.
  if (accepted.length > ACCEPT_KEYS_MAX) throw new ConfigError(`--cluster-key-accept: at most ${ACCEPT_KEYS_MAX} keys may be accepted besides --cluster-key (${accepted.length} given)`)
  for (const { label: acceptLabel, key } of accepted) checkClusterKey(acceptLabel, key)
  if (accepted.length > 0 && clusterKey === undefined) {
    throw new ConfigError(`${accepted[0]?.label}: needs --cluster-key (or --cluster-key-file, WARDEN_CLUSTER_KEY), the key this node uses; accepted keys are the old ones it still accepts during a rotation`)
  }
  if (joinWan.length > 0 && clusterKey === undefined) throw new ConfigError('--join-wan: needs --cluster-key (or --cluster-key-file, WARDEN_CLUSTER_KEY): servers of every datacenter prove the same key')
  warnings.push(...argvWarnings(flags))
  const connsKey = 'limits.http_max_conns_per_client'
  const httpMaxConnsPerClient = connectionCount(label(connsKey), settings.get(connsKey), origins.has(connsKey), HTTP_MAX_CONNS_PER_CLIENT_DEFAULT)

  const rates = rateSettings(settings)
  const audit = auditSettings(settings, label)

  const tokenMinExpirationTtlMs = durationSetting('acl.token_min_expiration_ttl', settings.get('acl.token_min_expiration_ttl'), 60_000)
  const tokenMaxExpirationTtlMs = durationSetting('acl.token_max_expiration_ttl', settings.get('acl.token_max_expiration_ttl'), 24 * 3_600_000)
  if (tokenMinExpirationTtlMs <= 0 || tokenMinExpirationTtlMs > tokenMaxExpirationTtlMs) {
    throw new ConfigError('acl.token_min_expiration_ttl: must be above zero and at most acl.token_max_expiration_ttl')
  }

  const heartbeatIntervalMs = durationSetting('raft.heartbeat_interval', settings.get('raft.heartbeat_interval'), 50)
  const electionTimeoutMs = durationSetting('raft.election_timeout', settings.get('raft.election_timeout'), 500)
  if (heartbeatIntervalMs <= 0 || electionTimeoutMs < 2 * heartbeatIntervalMs) {
    throw new ConfigError('raft.election_timeout: must be at least twice raft.heartbeat_interval')
  }
  const leaderWaitMs = durationSetting('raft.leader_wait', settings.get('raft.leader_wait'), 7_000)
  if (leaderWaitMs < electionTimeoutMs) throw new ConfigError('raft.leader_wait: must be at least raft.election_timeout, or no election could finish in time')
  const snapshotThreshold = settings.get('raft.snapshot_threshold') ?? 8192
  if (typeof snapshotThreshold !== 'number' || !Number.isInteger(snapshotThreshold) || snapshotThreshold < 1) {
    throw new ConfigError('raft.snapshot_threshold: must be a positive integer')
  }
  // Followers apply the writes the leader's apply produced (replica/shipped-writes.ts); false: each runs every command.
  const shipWrites = settings.get('raft.ship_writes') ?? true
  if (typeof shipWrites !== 'boolean') throw new ConfigError('raft.ship_writes: must be true or false')

  const dataDir = text('data_dir')
  if (!flags.dev && dataDir === undefined) throw new ConfigError('--data-dir: is required (or run with --dev)')
  const { httpAddr, httpsAddr, tls } = listenerSettings(flags, settings, label, text)
  if (flags.unsealedPeerLinks && tls !== undefined) throw new ConfigError('--unsealed-peer-links-for-benchmark: cannot be used with TLS files; peer links over TLS are never sealed twice')

  return {
    dev: flags.dev,
    nodeName,
    datacenter,
    primaryDatacenter,
    dataDir,
    httpAddr,
    httpsAddr,
    tls,
    unsealedPeerLinks: flags.unsealedPeerLinks,
    clusterAddr: parseAddress(label('cluster_addr'), text('cluster_addr') ?? (flags.dev ? '127.0.0.1:0' : '127.0.0.1:8300')),
    peers,
    join: flags.join,
    joinWan,
    clusterKey,
    clusterKeysAccepted: accepted.map(({ key }) => key),
    initialManagementToken,
    replication: {
      token: text('acl.tokens.replication'),
      // Records a second (Consul counts Raft applies of up to ~256 KB, 100 a second): 3,500 brought 110,000 records over
      // in 40 s with the secondary's own writes at 1.7 times their idle p99; 5,000 took 33 s at 1.7 to 2.1 times
      // (docs/benchmarks.md, replication).
      applyRate: positiveInteger('acl.replication_apply_limit', settings.get('acl.replication_apply_limit'), 3_500, 'records a second', 1),
      // Rounds a second per stream, and how many may run back to back (Consul: 1 and 5). A round under steady writes
      // reads only what changed, so ten a second keep the lag near 100 ms.
      rate: positiveInteger('acl.replication_rate', settings.get('acl.replication_rate'), 10, 'rounds a second', 1),
      burst: positiveInteger('acl.replication_burst', settings.get('acl.replication_burst'), 20, 'rounds', 1),
      readYourWritesWaitMs: durationSetting('acl.replication_read_your_writes_wait', settings.get('acl.replication_read_your_writes_wait'), 5_000),
      tokens: booleanSetting(label('acl.enable_token_replication'), settings.get('acl.enable_token_replication'), true),
    },
    defaultPolicy: oneOf(label('acl.default_policy'), settings.get('acl.default_policy'), ['allow', 'deny'] as const, 'deny'),
    downPolicy: oneOf(label('acl.down_policy'), settings.get('acl.down_policy'), ['allow', 'deny', 'extend-cache', 'async-cache'] as const, 'extend-cache'),
    logLevel: oneOf(label('log_level'), settings.get('log_level'), ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const, 'info'),
    tokenMinExpirationTtlMs,
    tokenMaxExpirationTtlMs,
    cloud: {
      ...optional('resourceId', stringSetting('cloud.resource_id', settings.get('cloud.resource_id'))),
      ...optional('clientId', stringSetting('cloud.client_id', settings.get('cloud.client_id'))),
      ...optional('clientSecret', stringSetting('cloud.client_secret', settings.get('cloud.client_secret'))),
      ...optional('managementPlaneUrl', stringSetting('cloud.management_plane_url', settings.get('cloud.management_plane_url'))),
    },
    raft: { heartbeatIntervalMs, electionTimeoutMs, snapshotThreshold, leaderWaitMs, shipWrites },
    limits: { httpMaxConnsPerClient, rates },
    audit,
    warnings,
  }
}

/** `--join-wan` flags, else the file's `retry_join_wan` list: each a cluster address, HOST:PORT. */
function joinWanSettings(flags: ParsedFlags, fromFile: unknown): string[] {
  if (flags.joinWan.length === 0 && fromFile !== undefined && !Array.isArray(fromFile)) throw new ConfigError('retry_join_wan: must be a list of HOST:PORT cluster addresses')
  const [label, addresses] = flags.joinWan.length > 0 ? ['--join-wan', flags.joinWan] : ['retry_join_wan', (fromFile as unknown[] | undefined) ?? []]
  return addresses.map((address) => {
    if (typeof address !== 'string') throw new ConfigError(`${label}: must be a list of HOST:PORT cluster addresses`)
    parseAddress(label, address)
    return address
  })
}

/**
 * Where the API listens and the TLS files. Each rule a message naming the setting: the three files go together;
 * HTTPS and verify_incoming need them; turning plain HTTP off needs HTTPS, or the agent would serve no API.
 */
function listenerSettings(
  flags: ParsedFlags,
  settings: Map<string, unknown>,
  label: (key: string) => string,
  text: (key: string) => string | undefined,
): Pick<AgentConfig, 'httpAddr' | 'httpsAddr' | 'tls'> {
  const httpText = text('http_addr') ?? '127.0.0.1:8500'
  const httpAddr = httpText === 'off' ? undefined : parseAddress(label('http_addr'), httpText)
  const httpsText = text('https_addr')
  const httpsAddr = httpsText === undefined ? undefined : parseAddress(label('https_addr'), httpsText)
  const fileKeys = ['tls.ca_file', 'tls.cert_file', 'tls.key_file'] as const
  const [caFile, certFile, keyFile] = fileKeys.map((key) => text(key))
  const fileVerify = settings.get('tls.verify_incoming')
  if (fileVerify !== undefined && typeof fileVerify !== 'boolean') throw new ConfigError('tls.verify_incoming: must be true or false')
  const verifyIncoming = flags.tlsVerifyIncoming || fileVerify === true
  const verifyLabel = flags.tlsVerifyIncoming ? '--tls-verify-incoming' : 'tls.verify_incoming'
  let tls: AgentConfig['tls']
  if (caFile !== undefined || certFile !== undefined || keyFile !== undefined) {
    if (caFile === undefined || certFile === undefined || keyFile === undefined) {
      const given = fileKeys.filter((key) => text(key) !== undefined).map(label)
      const missing = fileKeys.filter((key) => text(key) === undefined).map((key) => `--${key.replace('.', '-').replace('_', '-')}`)
      throw new ConfigError(`${given.join(', ')}: needs ${missing.join(' and ')} too; TLS takes the CA, the certificate and its key`)
    }
    for (const key of fileKeys) if (text(key) === '') throw new ConfigError(`${label(key)}: must name a file`)
    tls = { caFile, certFile, keyFile, verifyIncoming, labels: { caFile: label('tls.ca_file'), certFile: label('tls.cert_file'), keyFile: label('tls.key_file') } }
  }
  if (httpsAddr !== undefined && tls === undefined) {
    throw new ConfigError(`${label('https_addr')}: needs --tls-ca-file, --tls-cert-file and --tls-key-file (make them with: warden tls ca create; warden tls cert create -server)`)
  }
  if (verifyIncoming && httpsAddr === undefined) throw new ConfigError(`${verifyLabel}: needs --https-addr; client certificates are asked for on HTTPS`)
  if (httpAddr === undefined && httpsAddr === undefined) throw new ConfigError(`${label('http_addr')}: off needs --https-addr, or the agent would serve no API`)
  return { httpAddr, httpsAddr, tls }
}

/**
 * The keys still accepted, each with the name of where it came from: the flags (`--cluster-key-accept KEY`, and
 * `--cluster-key-accept-file FILE` holding one key a line), else the config file's `cluster_key_accept` list, else
 * `WARDEN_CLUSTER_KEY_ACCEPT` (comma-separated; base64 and hex have no commas). As for every setting, flags replace
 * the file and the file the environment.
 */
function acceptedKeys(flags: ParsedFlags, fromFile: unknown, env: NodeJS.ProcessEnv, warnings: ConfigWarning[]): Array<{ label: string; key: string }> {
  if (flags.clusterKeyAccept.length > 0) {
    return flags.clusterKeyAccept.flatMap(({ flag, value }) => {
      if (flag === 'cluster-key-accept') return [{ label: `--${flag}`, key: value }]
      const lines = readSecretFile(flag, value, warnings).split('\n')
      return lines.map((line) => line.trim()).filter((line) => line !== '').map((key) => ({ label: `--${flag}`, key }))
    })
  }
  if (fromFile !== undefined) {
    if (!Array.isArray(fromFile)) throw new ConfigError('cluster_key_accept: must be a list of keys')
    return fromFile.map((key: unknown, position) => ({ label: `cluster_key_accept[${position}]`, key: stringSetting(`cluster_key_accept[${position}]`, key) ?? '' }))
  }
  const listed = env.WARDEN_CLUSTER_KEY_ACCEPT ?? ''
  return listed
    .split(',')
    .map((key) => key.trim())
    .filter((key) => key !== '')
    .map((key) => ({ label: 'WARDEN_CLUSTER_KEY_ACCEPT', key }))
}

/**
 * The audit log's settings, or undefined when no path is given (rotate_bytes and rotate_keep alone are refused: they
 * would suggest an audit log that is not there).
 */
function auditSettings(settings: Map<string, unknown>, label: (key: string) => string): AgentConfig['audit'] {
  const path = stringSetting(label('audit.path'), settings.get('audit.path'))
  const rotateBytes = positiveInteger('audit.rotate_bytes', settings.get('audit.rotate_bytes'), AUDIT_ROTATE_BYTES_DEFAULT, 'bytes', 1024)
  const rotateKeep = positiveInteger('audit.rotate_keep', settings.get('audit.rotate_keep'), AUDIT_ROTATE_KEEP_DEFAULT, 'rotated files to keep', 1)
  if (path === undefined) {
    const stray = ['audit.rotate_bytes', 'audit.rotate_keep'].find((key) => settings.has(key))
    if (stray !== undefined) throw new ConfigError(`${stray}: needs audit.path (or --audit-log FILE), the file to write`)
    return undefined
  }
  if (path === '') throw new ConfigError(`${label('audit.path')}: must name a file`)
  return { path, rotateBytes, rotateKeep, setting: label('audit.path') }
}

/**
 * `limits.request_limits` and `limits.login_rate` (Consul's names and defaults: mode disabled, rates unlimited). A
 * rate is a positive number of requests a second, or -1 (or absent) for no limit, as Consul's -1 for Inf.
 */
function rateSettings(settings: Map<string, unknown>): RateLimitSettings {
  const mode = oneOf('limits.request_limits.mode', settings.get('limits.request_limits.mode'), ['disabled', 'permissive', 'enforcing'] as const, 'disabled')
  return {
    mode,
    readRate: rateSetting('limits.request_limits.read_rate', settings.get('limits.request_limits.read_rate')),
    writeRate: rateSetting('limits.request_limits.write_rate', settings.get('limits.request_limits.write_rate')),
    loginRate: rateSetting('limits.login_rate', settings.get('limits.login_rate')),
  }
}

function rateSetting(name: string, value: unknown): number {
  if (value === undefined || value === -1) return Infinity
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new ConfigError(`${name}: must be a positive number of requests a second, or -1 for no limit`)
  }
  return value
}

/** A whole number from the file (a JSON number), at least `min`. */
function positiveInteger(name: string, value: unknown, fallback: number, unit: string, min: number): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) throw new ConfigError(`${name}: must be a whole number of ${unit}, at least ${min}`)
  return value
}

/** A count of connections: a whole number, 0 or more, from the file (a JSON number) or a flag (its digits). */
function connectionCount(name: string, value: unknown, fromFlag: boolean, fallback: number): number {
  if (value === undefined) return fallback
  const count = fromFlag && typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) {
    throw new ConfigError(`${name}: must be a whole number of connections, 0 or more (0: no limit per client)`)
  }
  return count
}

/** true or false, from the file (a JSON boolean) or a flag (`true` or `false`). */
function booleanSetting(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback
  if (value === true || value === 'true') return true
  if (value === false || value === 'false') return false
  throw new ConfigError(`${name}: must be true or false`)
}

function optional<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>)
}
