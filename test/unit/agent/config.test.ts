/**
 * The agent's settings (src/agent/config.ts) for issue 18: the cluster key's format (base64 of 16 bytes or more, or
 * 32+ hex digits; a string of hex digits only is read as hex), the keys a node still accepts during a rotation
 * (`--cluster-key-accept`, repeatable, with the file, config-file and environment forms), the per-client connection
 * limit, and the warnings for secrets in files others may read or on the command line, which never quote the secret.
 *
 * Method: loadConfig over literal argv arrays and environments, with files in a temporary directory.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, decodeClusterKey, loadConfig, type AgentConfig } from '../../../src/agent/config.js'

const KEY = randomBytes(32).toString('base64')
const OLD_KEY = randomBytes(32).toString('base64')

function load(argv: string[], env: NodeJS.ProcessEnv = {}): AgentConfig {
  return loadConfig(['--dev', ...argv], env)
}

function refusal(argv: string[], env: NodeJS.ProcessEnv = {}): string {
  try {
    load(argv, env)
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError)
    return (error as Error).message
  }
  throw new Error(`loadConfig accepted ${argv.join(' ')}`)
}

describe('agent/config', () => {
  let scratch: string
  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'warden-config-'))
  })
  after(async () => {
    await rm(scratch, { recursive: true, force: true })
  })

  async function file(name: string, text: string, mode: number): Promise<string> {
    const path = join(scratch, name)
    await writeFile(path, text)
    await chmod(path, mode)
    return path
  }

  describe('raft.ship_writes', () => {
    it('is on by default; the config file turns it off; anything but a boolean is refused, naming the setting', async () => {
      expect(load([]).raft.shipWrites).to.equal(true)
      const off = await file('ship-off.json', JSON.stringify({ raft: { ship_writes: false } }), 0o644)
      expect(load(['--config-file', off]).raft.shipWrites).to.equal(false)
      for (const value of ['false', 0, 'yes']) {
        const bad = await file('ship-bad.json', JSON.stringify({ raft: { ship_writes: value } }), 0o644)
        expect(refusal(['--config-file', bad]), String(value)).to.equal('raft.ship_writes: must be true or false')
      }
    })
  })

  describe('the cluster key', () => {
    it('accepts base64 of 16 bytes or more, as warden keygen prints it (padded or not)', () => {
      for (const key of [KEY, randomBytes(16).toString('base64'), randomBytes(16).toString('base64').replace(/=+$/, ''), randomBytes(64).toString('base64')]) {
        expect(load(['--cluster-key', key]).clusterKey).to.equal(key)
      }
    })

    it('accepts 32 or more hex digits, in either case', () => {
      for (const key of [randomBytes(16).toString('hex'), randomBytes(24).toString('hex'), randomBytes(32).toString('hex').toUpperCase()]) {
        expect(load(['--cluster-key', key]).clusterKey).to.equal(key)
      }
    })

    it('refuses anything shorter, or neither form, naming the flag and how to make a key, never quoting it', () => {
      const short = [randomBytes(15).toString('base64'), randomBytes(15).toString('hex'), 'short', 'test-cluster-key-0123456789abcdef', 'a key with spaces in it, long enough', `${KEY}\n`, `${KEY.slice(0, -1)}==`]
      for (const key of short) {
        const message = refusal(['--cluster-key', key])
        expect(message, key).to.match(/^--cluster-key: /)
        expect(message, key).to.include('warden keygen')
        expect(message, key).to.not.include(key.trim())
      }
    })

    it('reads a string of hex digits only as hex: 32 of them are 16 bytes, 24 of them (valid base64 of 18 bytes) are 12 and refused', () => {
      const hex32 = 'deadbeef'.repeat(4)
      expect(decodeClusterKey(hex32)).to.deep.equal({ form: 'hex', bytes: Buffer.from(hex32, 'hex') })
      expect(load(['--cluster-key', hex32]).clusterKey).to.equal(hex32)
      const hex24 = 'deadbeef'.repeat(3)
      expect(decodeClusterKey(hex24)).to.deep.equal({ form: 'hex', bytes: Buffer.from(hex24, 'hex') })
      expect(refusal(['--cluster-key', hex24])).to.include('warden keygen')
      // An odd number of hex digits is no hex, and no base64 either.
      expect(decodeClusterKey(`${hex32}a`)).to.equal(undefined)
      // Anything with a character outside the hex digits is base64.
      expect(decodeClusterKey(KEY)).to.deep.equal({ form: 'base64', bytes: Buffer.from(KEY, 'base64') })
    })

    it('checks the file and environment forms too, naming each', async () => {
      const path = await file('short.key', 'abcdabcdabcd\n', 0o600)
      expect(refusal(['--cluster-key-file', path])).to.match(/^--cluster-key-file: /)
      expect(refusal([], { WARDEN_CLUSTER_KEY: 'abcdabcdabcd' })).to.match(/^WARDEN_CLUSTER_KEY: /)
      const config = await file('short-key.json', JSON.stringify({ cluster_key: 'abcdabcdabcd' }), 0o600)
      expect(refusal(['--config-file', config])).to.match(/^cluster_key: /)
      const good = await file('good.key', `${KEY}\n`, 0o600)
      expect(load(['--cluster-key-file', good]).clusterKey).to.equal(KEY)
      expect(load([], { WARDEN_CLUSTER_KEY: KEY }).clusterKey).to.equal(KEY)
    })
  })

  describe('keys still accepted during a rotation', () => {
    it('none by default', () => {
      expect(load(['--cluster-key', KEY]).clusterKeysAccepted).to.deep.equal([])
      expect(load([]).clusterKeysAccepted).to.deep.equal([])
    })

    it('at most 8 keys are accepted besides --cluster-key (the transport tries each on every handshake)', () => {
      const keys = Array.from({ length: 9 }, () => randomBytes(32).toString('base64'))
      const nine = keys.flatMap((key) => ['--cluster-key-accept', key])
      expect(refusal(['--cluster-key', KEY, ...nine])).to.match(/^--cluster-key-accept: at most 8 keys/)
      expect(load(['--cluster-key', KEY, ...nine.slice(2)]).clusterKeysAccepted).to.have.length(8)
    })

    it('--cluster-key-accept repeats, in the order given, with = or the next word', () => {
      const third = randomBytes(16).toString('hex')
      expect(load(['--cluster-key', KEY, '--cluster-key-accept', OLD_KEY, `--cluster-key-accept=${third}`]).clusterKeysAccepted).to.deep.equal([OLD_KEY, third])
    })

    it('comes from the config file (cluster_key_accept), the environment (WARDEN_CLUSTER_KEY_ACCEPT, comma-separated) and files of one key a line', async () => {
      const third = randomBytes(32).toString('base64')
      const config = await file('accept.json', JSON.stringify({ cluster_key: KEY, cluster_key_accept: [OLD_KEY, third] }), 0o600)
      expect(load(['--config-file', config]).clusterKeysAccepted).to.deep.equal([OLD_KEY, third])
      expect(load(['--cluster-key', KEY], { WARDEN_CLUSTER_KEY_ACCEPT: `${OLD_KEY}, ${third}` }).clusterKeysAccepted).to.deep.equal([OLD_KEY, third])
      const keys = await file('accept.keys', `${OLD_KEY}\n\n${third}\n`, 0o600)
      expect(load(['--cluster-key', KEY, '--cluster-key-accept-file', keys]).clusterKeysAccepted).to.deep.equal([OLD_KEY, third])
    })

    it('flags replace the file, and the file the environment, as for every setting', async () => {
      const fromFile = randomBytes(32).toString('base64')
      const fromEnv = randomBytes(32).toString('base64')
      const config = await file('accept-precedence.json', JSON.stringify({ cluster_key: KEY, cluster_key_accept: [fromFile] }), 0o600)
      const env = { WARDEN_CLUSTER_KEY_ACCEPT: fromEnv }
      expect(load(['--config-file', config, '--cluster-key-accept', OLD_KEY], env).clusterKeysAccepted).to.deep.equal([OLD_KEY])
      expect(load(['--config-file', config], env).clusterKeysAccepted).to.deep.equal([fromFile])
      expect(load(['--cluster-key', KEY], env).clusterKeysAccepted).to.deep.equal([fromEnv])
    })

    it('each is validated as the cluster key is, and named by where it came from', async () => {
      expect(refusal(['--cluster-key', KEY, '--cluster-key-accept', OLD_KEY, '--cluster-key-accept', 'tooshort'])).to.match(/^--cluster-key-accept: .*warden keygen/)
      expect(refusal(['--cluster-key', KEY], { WARDEN_CLUSTER_KEY_ACCEPT: `${OLD_KEY},tooshort` })).to.match(/^WARDEN_CLUSTER_KEY_ACCEPT: /)
      const config = await file('accept-bad.json', JSON.stringify({ cluster_key: KEY, cluster_key_accept: [OLD_KEY, 'tooshort'] }), 0o600)
      expect(refusal(['--config-file', config])).to.match(/^cluster_key_accept\[1\]: /)
      const notList = await file('accept-not-list.json', JSON.stringify({ cluster_key: KEY, cluster_key_accept: OLD_KEY }), 0o600)
      expect(refusal(['--config-file', notList])).to.match(/^cluster_key_accept: must be a list/)
    })

    it('needs the key the node uses', () => {
      expect(refusal(['--cluster-key-accept', OLD_KEY])).to.match(/^--cluster-key-accept: .*--cluster-key/)
    })
  })

  describe('limits.http_max_conns_per_client', () => {
    it('is 200 by default, as Consul', () => {
      expect(load([]).limits.httpMaxConnsPerClient).to.equal(200)
    })

    it('comes from the config file, and --http-max-conns-per-client wins over it; 0 means no limit per client', async () => {
      const config = await file('limits.json', JSON.stringify({ limits: { http_max_conns_per_client: 5 } }), 0o644)
      expect(load(['--config-file', config]).limits.httpMaxConnsPerClient).to.equal(5)
      expect(load(['--config-file', config, '--http-max-conns-per-client', '10000']).limits.httpMaxConnsPerClient).to.equal(10_000)
      expect(load(['--http-max-conns-per-client', '0']).limits.httpMaxConnsPerClient).to.equal(0)
    })

    it('refuses what is not a non-negative integer, naming the setting', async () => {
      for (const value of [-1, 1.5, '7', null]) {
        const config = await file('limits-bad.json', JSON.stringify({ limits: { http_max_conns_per_client: value } }), 0o644)
        expect(refusal(['--config-file', config]), String(value)).to.match(/^limits\.http_max_conns_per_client: must be/)
      }
      for (const value of ['-1', 'many', '1e3', '']) expect(refusal(['--http-max-conns-per-client', value]), value).to.match(/^--http-max-conns-per-client: must be/)
      const unknown = await file('limits-unknown.json', JSON.stringify({ limits: { http_max_conns: 5 } }), 0o644)
      expect(refusal(['--config-file', unknown])).to.include('limits.http_max_conns')
    })
  })

  describe('limits.request_limits and limits.login_rate', () => {
    it('default to Consul\'s: mode disabled, every rate unlimited', () => {
      expect(load([]).limits.rates).to.deep.equal({ mode: 'disabled', readRate: Infinity, writeRate: Infinity, loginRate: Infinity })
    })

    it('come from the config file; -1 is no limit, as Consul\'s -1 for Inf; fractional rates are allowed', async () => {
      const config = await file(
        'rates.json',
        JSON.stringify({ limits: { request_limits: { mode: 'enforcing', read_rate: 0.5, write_rate: -1 }, login_rate: 3 } }),
        0o644,
      )
      expect(load(['--config-file', config]).limits.rates).to.deep.equal({ mode: 'enforcing', readRate: 0.5, writeRate: Infinity, loginRate: 3 })
    })

    it('refuse a bad mode, a rate that is not positive (or -1), and unknown keys, naming the setting', async () => {
      const cases: Array<[unknown, RegExp]> = [
        [{ request_limits: { mode: 'strict' } }, /^limits\.request_limits\.mode: must be one of disabled, permissive, enforcing/],
        [{ request_limits: { read_rate: 0 } }, /^limits\.request_limits\.read_rate: must be a positive number/],
        [{ request_limits: { write_rate: -2 } }, /^limits\.request_limits\.write_rate: must be a positive number/],
        [{ request_limits: { write_rate: '5' } }, /^limits\.request_limits\.write_rate: must be a positive number/],
        [{ login_rate: 0 }, /^limits\.login_rate: must be a positive number/],
        [{ request_limits: { burst: 5 } }, /unknown key "limits\.request_limits\.burst"/],
        [{ request_limits: 5 }, /"limits\.request_limits" must be an object/],
      ]
      for (const [limits, expected] of cases) {
        const config = await file('rates-bad.json', JSON.stringify({ limits }), 0o644)
        expect(refusal(['--config-file', config]), JSON.stringify(limits)).to.match(expected)
      }
    })
  })

  describe('warnings about secrets', () => {
    const messages = (config: AgentConfig): string[] => config.warnings.map((warning) => warning.message)

    it('none for secrets in files only their owner may read, or in the environment', async () => {
      const key = await file('private.key', KEY, 0o600)
      const token = await file('private.token', 'b0b2c1d4-0c9e-4d43-8f3f-6f0f2a7f1e11', 0o400)
      expect(messages(load(['--cluster-key-file', key, '--initial-management-token-file', token]))).to.deep.equal([])
      expect(messages(load([], { WARDEN_CLUSTER_KEY: KEY, WARDEN_INITIAL_MANAGEMENT_TOKEN: 'b0b2c1d4-0c9e-4d43-8f3f-6f0f2a7f1e11' }))).to.deep.equal([])
    })

    it('a secret file that group or others may access is named, with chmod 600', async () => {
      const key = await file('open.key', KEY, 0o644)
      const token = await file('group.token', 'b0b2c1d4-0c9e-4d43-8f3f-6f0f2a7f1e11', 0o640)
      const accepted = await file('open-accept.keys', OLD_KEY, 0o604)
      const config = load(['--cluster-key-file', key, '--initial-management-token-file', token, '--cluster-key-accept-file', accepted])
      const warned = messages(config)
      expect(warned).to.have.length(3)
      expect(warned[0]).to.include(key).and.include(`chmod 600 ${key}`).and.include('--cluster-key-file')
      expect(warned[1]).to.include(token).and.include(`chmod 600 ${token}`).and.include('--initial-management-token-file')
      expect(warned[2]).to.include(accepted).and.include(`chmod 600 ${accepted}`)
      for (const text of warned) expect(text).to.not.include(KEY).and.not.include(OLD_KEY).and.not.include('b0b2c1d4')
      expect(config.warnings.map((warning) => warning.setting)).to.deep.equal(['--cluster-key-file', '--initial-management-token-file', '--cluster-key-accept-file'])
    })

    it('a config file holding a secret is a secret file; one without is not', async () => {
      const withKey = await file('with-key.json', JSON.stringify({ cluster_key: KEY }), 0o644)
      const warned = messages(load(['--config-file', withKey]))
      expect(warned).to.have.length(1)
      expect(warned[0]).to.include(withKey).and.include('chmod 600').and.not.include(KEY)
      const withoutSecret = await file('plain.json', JSON.stringify({ log_level: 'debug' }), 0o644)
      expect(messages(load(['--config-file', withoutSecret]))).to.deep.equal([])
    })

    it('a secret on the command line points at the file and environment forms, without quoting it', () => {
      const secret = 'b0b2c1d4-0c9e-4d43-8f3f-6f0f2a7f1e11'
      const config = load(['--cluster-key', KEY, '--cluster-key-accept', OLD_KEY, '--initial-management-token', secret])
      const warned = messages(config)
      expect(warned).to.have.length(3)
      expect(warned[0]).to.include('--cluster-key-file').and.include('WARDEN_CLUSTER_KEY')
      expect(warned[1]).to.include('--cluster-key-accept-file').and.include('WARDEN_CLUSTER_KEY_ACCEPT')
      expect(warned[2]).to.include('--initial-management-token-file').and.include('WARDEN_INITIAL_MANAGEMENT_TOKEN')
      for (const text of warned) expect(text).to.not.include(KEY).and.not.include(OLD_KEY).and.not.include(secret)
    })
  })

  describe('audit', () => {
    it('is off by default; --audit-log or audit.path turns it on, with rotation at 100 MiB keeping 5 files unless set', async () => {
      expect(load([]).audit).to.equal(undefined)
      expect(load(['--audit-log', '/var/log/warden/audit.log']).audit).to.deep.equal({ path: '/var/log/warden/audit.log', rotateBytes: 100 * 1024 * 1024, rotateKeep: 5, setting: '--audit-log' })
      const config = await file('audit.json', JSON.stringify({ audit: { path: '/tmp/a.log', rotate_bytes: 4096, rotate_keep: 2 } }), 0o644)
      expect(load(['--config-file', config]).audit).to.deep.equal({ path: '/tmp/a.log', rotateBytes: 4096, rotateKeep: 2, setting: 'audit.path' })
      expect(load(['--config-file', config, '--audit-log', '/tmp/b.log']).audit?.path).to.equal('/tmp/b.log')
    })

    it('refuses bad values naming the setting, and rotation settings without a path', async () => {
      for (const [audit, setting] of [
        [{ path: '/tmp/a.log', rotate_bytes: 10 }, 'audit.rotate_bytes'],
        [{ path: '/tmp/a.log', rotate_bytes: '1MB' }, 'audit.rotate_bytes'],
        [{ path: '/tmp/a.log', rotate_keep: 0 }, 'audit.rotate_keep'],
        [{ path: '/tmp/a.log', rotate_keep: 1.5 }, 'audit.rotate_keep'],
        [{ path: 7 }, 'audit.path'],
        [{ path: '' }, 'audit.path'],
        [{ rotate_keep: 3 }, 'audit.rotate_keep'],
        [{ file: '/tmp/a.log' }, 'audit.file'],
      ] as const) {
        const config = await file('audit-bad.json', JSON.stringify({ audit }), 0o644)
        expect(refusal(['--config-file', config]), JSON.stringify(audit)).to.include(setting)
      }
      expect(refusal(['--audit-log', ''])).to.match(/^--audit-log: must name a file/)
    })
  })

  describe('--join-wan', () => {
    it('takes cluster addresses from repeated flags or the file key retry_join_wan, and needs the cluster key', async () => {
      expect(load(['--cluster-key', KEY, '--join-wan', '10.0.0.1:8300', '--join-wan', '10.0.1.1:8300']).joinWan).to.deep.equal(['10.0.0.1:8300', '10.0.1.1:8300'])
      expect(load([]).joinWan).to.deep.equal([])
      expect(refusal(['--join-wan', '10.0.0.1:8300'])).to.match(/^--join-wan: needs --cluster-key/)
      expect(refusal(['--cluster-key', KEY, '--join-wan', 'nowhere'])).to.match(/^--join-wan: "nowhere" must be host:port/)
      const dir = await mkdtemp(join(tmpdir(), 'warden-join-wan-'))
      try {
        const file = join(dir, 'agent.json')
        await writeFile(file, JSON.stringify({ cluster_key: KEY, retry_join_wan: ['10.0.2.1:8300'] }))
        expect(load(['--config-file', file]).joinWan).to.deep.equal(['10.0.2.1:8300'])
        await writeFile(file, JSON.stringify({ cluster_key: KEY, retry_join_wan: '10.0.2.1:8300' }))
        expect(refusal(['--config-file', file])).to.equal('retry_join_wan: must be a list of HOST:PORT cluster addresses')
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
    })
  })

  describe('replication settings', () => {
    it('token replication is on unless turned off by flag or file; the apply limit is a positive whole number', async () => {
      expect(load([]).replication).to.deep.include({ tokens: true, applyRate: 3500, rate: 10, burst: 20, readYourWritesWaitMs: 5000, token: undefined })
      expect(load(['--enable-token-replication', 'false']).replication.tokens).to.equal(false)
      expect(refusal(['--enable-token-replication', 'no'])).to.equal('--enable-token-replication: must be true or false')
      expect(load([], { WARDEN_ACL_REPLICATION_TOKEN: 'abc' }).replication.token).to.equal('abc')
      const dir = await mkdtemp(join(tmpdir(), 'warden-replication-'))
      try {
        const file = join(dir, 'agent.json')
        await writeFile(file, JSON.stringify({ acl: { enable_token_replication: false, replication_apply_limit: 50, replication_rate: 2, replication_burst: 3, replication_read_your_writes_wait: '250ms', tokens: { replication: 'def' } } }), { mode: 0o600 })
        expect(load(['--config-file', file]).replication).to.deep.equal({ tokens: false, applyRate: 50, rate: 2, burst: 3, readYourWritesWaitMs: 250, token: 'def' })
        await writeFile(file, JSON.stringify({ acl: { replication_apply_limit: 0 } }))
        expect(refusal(['--config-file', file])).to.match(/^acl\.replication_apply_limit: must be a whole number/)
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
    })
  })
})
