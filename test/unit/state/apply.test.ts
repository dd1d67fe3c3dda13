/**
 * The state machine's apply function, command by command, over a real LevelDB in a temporary directory: every type of
 * the Command union, the rules each one re-checks against the state at its own index (unique names and secrets, links
 * that must exist, immutable fields, the built-in guards, the auth-method cascade), and the bookkeeping every command
 * shares (CreateIndex/ModifyIndex equal the command index, table indexes rise on creates, updates and deletes, a failed
 * command writes nothing but the applied index). Secondary indexes are checked through the lookups of tables.ts, and
 * a last group replays one command sequence on two fresh stores and compares their LevelDB contents byte for byte.
 */
import { expect } from 'chai'
import { AssertionError } from '../../../src/lib/assert.js'
import {
  ANONYMOUS_TOKEN_ID,
  ANONYMOUS_TOKEN_SECRET,
  GLOBAL_MANAGEMENT_POLICY_ID,
  GLOBAL_MANAGEMENT_POLICY_NAME,
  GLOBAL_MANAGEMENT_RULES,
} from '../../../src/state/builtins.js'
import { createHash } from 'node:crypto'
import { decode, encode } from '../../../src/state/codec.js'
import {
  COMMAND_VERSION,
  type ApplyResult,
  type AuthMethodWrite,
  type BindingRuleWrite,
  type Command,
  type CommandType,
  type ConfigEntryWrite,
  type LinkedFields,
  type LoginWrite,
  type LinkStatusWrite,
  type LinkWrite,
  type PolicyWrite,
  type RoleWrite,
  type TokenCreate,
  type TokenUpdate,
} from '../../../src/state/commands.js'
import { policyHash } from '../../../src/state/acl-policies.js'
import { nextDigest } from '../../../src/state/restore.js'
import { tokenHash } from '../../../src/state/acl-tokens.js'
import {
  APPLIED_KEY,
  BOOTSTRAP_KEY,
  SECRET_INDEX_FORM_KEY,
  SECRET_INDEX_PREFIX,
  nsKey,
  recordKey,
  TABLES,
  tableIndexKey,
  type Table,
  uniqueKey,
  uniqueTarget,
  uniqueValue,
} from '../../../src/state/keys.js'
import { dropStoredSecretIndex, SECRET_INDEX_FORM } from '../../../src/state/secret-index-upgrade.js'
import type { BatchOp } from '../../../src/state/reader.js'
import { configEntryKey } from '../../../src/state/config-entries.js'
import { LINK_NAME, linkSpec } from '../../../src/state/link.js'
import type { AclAuthMethod, AclBindingRule, AclPolicy, AclRole, AclToken, CloudLink, ConfigEntry } from '../../../src/state/records.js'
import { decodeCommand, encodeCommand, StateStore, type Shipped } from '../../../src/state/store.js'
import {
  authMethodSpec,
  bindingRuleSpec,
  configSpec,
  getByUnique,
  getRecord,
  listByIndex,
  listRecords,
  memberSpec,
  policySpec,
  roleSpec,
  secretDigest,
  tokenBySecret,
  tokenSpec,
} from '../../../src/state/tables.js'
import { buildTokenCreate, commands, dump, expectSameContents, indexProblems, replaceWithCopy, type Entry } from '../../support/state.js'
import { useTempDirs, type TempDirs } from '../../support/temp-dir.js'

const NOW = '2024-05-01T12:00:00Z'
const TEAM = 'team'

/** Every command type; a Record over CommandType makes the compiler fail when the union grows and this list does not. */
const ALL_COMMAND_TYPES: Record<CommandType, true> = {
  'acl.init': true,
  'acl.bootstrap': true,
  'acl.token.ensure': true,
  'acl.token.create': true,
  'acl.token.update': true,
  'acl.token.clone': true,
  'acl.token.delete': true,
  'acl.login': true,
  'acl.token.delete-expired': true,
  'acl.policy.create': true,
  'acl.policy.update': true,
  'acl.policy.delete': true,
  'acl.role.create': true,
  'acl.role.update': true,
  'acl.role.delete': true,
  'acl.auth-method.create': true,
  'acl.auth-method.update': true,
  'acl.auth-method.delete': true,
  'acl.binding-rule.create': true,
  'acl.binding-rule.update': true,
  'acl.binding-rule.delete': true,
  'config.apply': true,
  'config.delete': true,
  'link.set': true,
  'link.delete': true,
  'link.status': true,
  'raft.member.set': true,
  'raft.member.delete': true,
  'acl.replicate': true,
  'restore.begin': true,
  'restore.chunk': true,
  'restore.commit': true,
  'restore.abort': true,
  noop: true,
}
/** Command types some test below applied; the last test checks that this covers the union. */
const exercised = new Set<CommandType>()

// ---- fixtures: deterministic IDs, secrets and records --------------------------------------------------------------

/** A UUID whose first group says what it names (0xa token, 0x5 secret, 0xb policy, 0xc role, 0xd binding rule). */
function uuid(kind: number, n: number): string {
  return `${kind.toString(16).padStart(8, '0')}-0000-4000-8000-${n.toString(16).padStart(12, '0')}`
}
const accessor = (n: number): string => uuid(0xa, n)
const secret = (n: number): string => uuid(0x5, n)
const policyId = (n: number): string => uuid(0xb, n)
const roleId = (n: number): string => uuid(0xc, n)
const ruleId = (n: number): string => uuid(0xd, n)

function tokenCreate(n: number, fields: Partial<TokenCreate> = {}): TokenCreate {
  return buildTokenCreate({ AccessorID: accessor(n), SecretID: secret(n), Description: `token ${n}`, CreateTime: NOW, ...fields })
}

/** An update that restates a token (as stored, or as created) the way a client would, with `fields` changed. */
function tokenUpdate(token: LinkedFields & Pick<TokenUpdate, 'AccessorID' | 'Description' | 'Local' | 'Namespace'>, fields: Partial<TokenUpdate> = {}): TokenUpdate {
  return {
    AccessorID: token.AccessorID,
    Description: token.Description,
    Policies: token.Policies,
    Roles: token.Roles,
    TemplatedPolicies: token.TemplatedPolicies,
    ServiceIdentities: token.ServiceIdentities,
    NodeIdentities: token.NodeIdentities,
    Local: token.Local,
    Namespace: token.Namespace,
    ...fields,
  }
}

function policyWrite(n: number, fields: Partial<PolicyWrite> = {}): PolicyWrite {
  return { ID: policyId(n), Name: `policy-${n}`, Description: '', Rules: 'acl = "read"', Datacenters: [], Namespace: 'default', ...fields }
}

function roleWrite(n: number, fields: Partial<RoleWrite> = {}): RoleWrite {
  return {
    ID: roleId(n),
    Name: `role-${n}`,
    Description: '',
    Policies: [],
    TemplatedPolicies: [],
    ServiceIdentities: [],
    NodeIdentities: [],
    Namespace: 'default',
    ...fields,
  }
}

function authMethodWrite(name: string, fields: Partial<AuthMethodWrite> = {}): AuthMethodWrite {
  return {
    Name: name,
    Type: 'jwt',
    DisplayName: '',
    Description: '',
    MaxTokenTTLMs: 0,
    TokenLocality: '',
    Config: { JWTValidationPubKeys: ['-----BEGIN PUBLIC KEY-----'] },
    NamespaceRules: [],
    Namespace: 'default',
    ...fields,
  }
}

function bindingRuleWrite(n: number, method: string, fields: Partial<BindingRuleWrite> = {}): BindingRuleWrite {
  return { ID: ruleId(n), Description: '', AuthMethod: method, Selector: '', BindType: 'service', BindName: 'web', Namespace: 'default', ...fields }
}

function configWrite(name: string, fields: Record<string, unknown> = {}): ConfigEntryWrite {
  return { Kind: 'service-defaults', Name: name, Namespace: 'default', Protocol: 'http', ...fields }
}

function linkWrite(generation: string, fields: Partial<LinkWrite> = {}): LinkWrite {
  return {
    resourceId: 'organization/org/project/proj/service.global-network-manager.cluster/c1',
    clientId: 'client',
    clientSecret: 'secret',
    uid: `uid-${generation}`,
    generation,
    source: 'api',
    ...fields,
  }
}

function linkStatus(generation: string, fields: Partial<LinkStatusWrite> = {}): LinkStatusWrite {
  return {
    generation,
    conditions: [{ type: 'linked', state: 'STATE_TRUE', reason: 'SUCCESS', message: 'Successfully linked' }],
    updatedAt: NOW,
    ...fields,
  }
}

/** The shared command shorthands, and a clone whose new IDs follow this file's numbering. */
const cmd = {
  ...commands,
  tokenClone: (source: string, n: number, description = `clone ${n}`): Command => ({
    v: COMMAND_VERSION,
    type: 'acl.token.clone',
    sourceAccessorID: source,
    token: { AccessorID: accessor(n), SecretID: secret(n), Description: description, CreateTime: NOW, Namespace: 'default' },
  }),
}

/** A login through `method` (verified when the method had `modifyIndex`) whose binding rules named `roles`. */
function loginWrite(n: number, method: string, modifyIndex: number, fields: Partial<TokenCreate> = {}, methodNamespace = 'default'): LoginWrite {
  return {
    token: tokenCreate(n, { AuthMethod: method, Local: true, Description: `login ${n}`, ...fields }),
    authMethodNamespace: methodNamespace,
    authMethodModifyIndex: modifyIndex,
  }
}

// ---- harness ---------------------------------------------------------------------------------------------------------

/** A store plus the next log index: commands are applied at 1, 2, 3, ... as the replica would. */
class Harness {
  index = 0
  constructor(
    public store: StateStore,
    private readonly directory: string,
  ) {}

  static async open(dirs: TempDirs): Promise<Harness> {
    const directory = await dirs.make('warden-apply-')
    const harness = new Harness(await StateStore.open(directory), directory)
    dirs.defer(() => harness.close())
    return harness
  }

  async apply(command: Command): Promise<ApplyResult> {
    this.index += 1
    exercised.add(command.type)
    return this.store.apply(command, this.index)
  }

  /** Applies a command that must succeed and returns its value. */
  async ok<T = unknown>(command: Command): Promise<T> {
    const result = await this.apply(command)
    expect(result, `${command.type} at ${this.index}: ${JSON.stringify(result)}`).to.have.property('ok', true)
    return (result as { value?: unknown }).value as T
  }

  /** Applies a command that must fail with `code` (and `field`, when given); returns the error. */
  async fails(command: Command, code: string, field?: string): Promise<{ code: string; message: string; field?: string }> {
    const result = await this.apply(command)
    expect(result.ok, `${command.type} at ${this.index} should fail: ${JSON.stringify(result)}`).to.equal(false)
    const error = (result as Extract<ApplyResult, { ok: false }>).error
    expect(error.code).to.equal(code)
    if (field !== undefined) {
      expect(error.field).to.equal(field)
      expect(error.message).to.contain(field)
    }
    return error
  }

  async reopen(): Promise<void> {
    await this.store.close()
    this.store = await StateStore.open(this.directory)
  }

  async close(): Promise<void> {
    if (this.store.db.status === 'open') await this.store.close()
  }

  token(accessorID: string): Promise<AclToken | undefined> {
    return getRecord(this.store.reader, tokenSpec, accessorID)
  }

  policy(id: string): Promise<AclPolicy | undefined> {
    return getRecord(this.store.reader, policySpec, id)
  }

  role(id: string): Promise<AclRole | undefined> {
    return getRecord(this.store.reader, roleSpec, id)
  }

  method(name: string, namespace = 'default'): Promise<AclAuthMethod | undefined> {
    return getRecord(this.store.reader, authMethodSpec, nsKey(namespace, name))
  }

  rule(id: string): Promise<AclBindingRule | undefined> {
    return getRecord(this.store.reader, bindingRuleSpec, id)
  }

  config(name: string, kind = 'service-defaults'): Promise<ConfigEntry | undefined> {
    return getRecord(this.store.reader, configSpec, configEntryKey({ Kind: kind, Namespace: 'default', Name: name }))
  }

  link(): Promise<CloudLink | undefined> {
    return getRecord(this.store.reader, linkSpec, LINK_NAME)
  }

  async tokensBy(index: string, value: string): Promise<string[]> {
    return (await listByIndex(this.store.reader, tokenSpec, index, value)).map((token) => token.AccessorID)
  }
}

/** The dump without the applied index, which every command (failed or not) writes. */
async function dumpWithoutApplied(store: StateStore): Promise<Entry[]> {
  return (await dump(store)).filter(([key]) => key !== APPLIED_KEY)
}

async function tableIndexes(store: StateStore): Promise<Record<Table, number>> {
  return Object.fromEntries(TABLES.map((table) => [table, store.tableIndex(table)])) as Record<Table, number>
}

describe('state: apply', function () {
  let h: Harness

  // Registered before the temp-dir cleanup, so it runs while the store is still open: whatever a test did, the index
  // entries must still describe exactly the records.
  /** Set by a test that wrote an older build's index on purpose, which today's index check would call a problem. */
  let olderIndex = false

  afterEach(async function () {
    if (h.store.db.status === 'open' && !olderIndex) expect(await indexProblems(h.store)).to.deep.equal([])
    olderIndex = false
  })

  const dirs = useTempDirs()

  beforeEach(async function () {
    h = await Harness.open(dirs)
  })

  describe('acl.init', function () {
    it('writes the global-management policy and the anonymous token with their fixed IDs', async function () {
      await h.ok(cmd.init())
      const policy = await h.policy(GLOBAL_MANAGEMENT_POLICY_ID)
      expect(policy).to.include({ ID: GLOBAL_MANAGEMENT_POLICY_ID, Name: GLOBAL_MANAGEMENT_POLICY_NAME, Rules: GLOBAL_MANAGEMENT_RULES, Namespace: 'default' })
      expect(policy).to.include({ CreateIndex: 1, ModifyIndex: 1, Hash: policyHash(policy!) })
      const byName = await getByUnique(h.store.reader, policySpec, 'name', nsKey('default', GLOBAL_MANAGEMENT_POLICY_NAME))
      expect(byName?.ID).to.equal(GLOBAL_MANAGEMENT_POLICY_ID)

      const anonymous = await h.token(ANONYMOUS_TOKEN_ID)
      expect(anonymous).to.include({ AccessorID: ANONYMOUS_TOKEN_ID, SecretID: ANONYMOUS_TOKEN_SECRET, Description: 'Anonymous Token', CreateIndex: 1 })
      expect(anonymous?.Policies).to.deep.equal([])
      const bySecret = await getByUnique(h.store.reader, tokenSpec, 'secret', secretDigest(ANONYMOUS_TOKEN_SECRET))
      expect(bySecret?.AccessorID).to.equal(ANONYMOUS_TOKEN_ID)
      expect(h.store.tableIndex('policy')).to.equal(1)
      expect(h.store.tableIndex('token')).to.equal(1)
      // Without a bootstrap token, bootstrapping stays open.
      expect(await h.store.db.get(BOOTSTRAP_KEY)).to.equal(undefined)
    })

    it('is idempotent: a second init writes nothing but the applied index', async function () {
      await h.ok(cmd.init())
      const before = await dumpWithoutApplied(h.store)
      const indexesBefore = await tableIndexes(h.store)
      await h.ok(cmd.init())
      expectSameContents(await dumpWithoutApplied(h.store), before)
      expect(await tableIndexes(h.store)).to.deep.equal(indexesBefore)
      expect(h.store.lastApplied).to.equal(2)
      expect((await h.policy(GLOBAL_MANAGEMENT_POLICY_ID))?.ModifyIndex).to.equal(1)
    })

    it('with a bootstrap token, creates it linked to global-management and closes bootstrapping', async function () {
      await h.ok(cmd.init(tokenCreate(1, { Description: 'Initial Management Token' })))
      const token = await h.token(accessor(1))
      expect(token?.Policies).to.deep.equal([{ ID: GLOBAL_MANAGEMENT_POLICY_ID }])
      expect(await h.tokensBy('policy', GLOBAL_MANAGEMENT_POLICY_ID)).to.deep.equal([accessor(1)])
      expect(decode<number>((await h.store.db.get(BOOTSTRAP_KEY))!)).to.equal(1)
      await h.fails(cmd.bootstrap(tokenCreate(2)), 'bootstrap_done')
    })
  })

  describe('acl.bootstrap', function () {
    it('creates one management token; a second bootstrap returns bootstrap_done with the reset index', async function () {
      await h.ok(cmd.init())
      // The command's own Policies are ignored: a bootstrap token is always a management token.
      const token = await h.ok<AclToken>(cmd.bootstrap(tokenCreate(1, { Policies: [] })))
      expect(token).to.include({ AccessorID: accessor(1), SecretID: secret(1), CreateIndex: 2, ModifyIndex: 2 })
      expect(token.Policies).to.deep.equal([{ ID: GLOBAL_MANAGEMENT_POLICY_ID }])

      const error = await h.fails(cmd.bootstrap(tokenCreate(2)), 'bootstrap_done')
      expect(error.message).to.contain('reset index: 2')
      expect(await h.token(accessor(2))).to.equal(undefined)
      expect(await getByUnique(h.store.reader, tokenSpec, 'secret', secretDigest(secret(2)))).to.equal(undefined)
    })

    it('stays open when the bootstrap token cannot be created (SecretID in use)', async function () {
      await h.ok(cmd.init())
      await h.fails(cmd.bootstrap(tokenCreate(1, { SecretID: ANONYMOUS_TOKEN_SECRET })), 'invalid_input', 'SecretID')
      expect(await h.store.db.get(BOOTSTRAP_KEY)).to.equal(undefined)
      await h.ok(cmd.bootstrap(tokenCreate(2)))
    })
  })

  describe('acl.token.ensure', function () {
    it('creates the configured management token when no token has its secret, and closes bootstrapping', async function () {
      await h.ok(cmd.init())
      const token = await h.ok<AclToken>(cmd.ensure(tokenCreate(1)))
      expect(token.Policies).to.deep.equal([{ ID: GLOBAL_MANAGEMENT_POLICY_ID }])
      expect((await getByUnique(h.store.reader, tokenSpec, 'secret', secretDigest(secret(1))))?.AccessorID).to.equal(accessor(1))
      await h.fails(cmd.bootstrap(tokenCreate(2)), 'bootstrap_done')
    })

    it('returns the existing token and writes nothing when a token already has the secret', async function () {
      await h.ok(cmd.init())
      await h.ok(cmd.ensure(tokenCreate(1)))
      const before = await dumpWithoutApplied(h.store)
      const existing = await h.ok<AclToken>(cmd.ensure(tokenCreate(9, { SecretID: secret(1) })))
      expect(existing.AccessorID).to.equal(accessor(1))
      expect(await h.token(accessor(9))).to.equal(undefined)
      expectSameContents(await dumpWithoutApplied(h.store), before)
    })
  })

  describe('a secret indexed before UUIDs were digested in lower case', function () {
    // What a state written by an older build holds for an initial management token configured in upper case: the
    // record as given, and the digest of the secret as given, stored.
    async function legacyToken(): Promise<string> {
      await h.ok(cmd.init())
      const upper = '1C2D3E4F-5A6B-4C7D-8E9F-0A1B2C3D4E0F'
      const token = await h.ok<AclToken>(cmd.ensure(tokenCreate(1)))
      const legacy = { ...token, SecretID: upper }
      await h.store.db.batch([
        { type: 'put', key: recordKey('token', token.AccessorID), value: encode(legacy) },
        { type: 'put', key: uniqueKey('token', 'secret', createHash('sha256').update(upper, 'utf8').digest('hex')), value: Buffer.from(token.AccessorID) },
        // That build's index held whole digests in hex, and no mark of the form.
        { type: 'del', key: SECRET_INDEX_FORM_KEY },
      ])
      // The older build's state is what a store finds when it opens (its secret index is filled from it then).
      await h.reopen()
      return upper
    }

    it('is found by the secret in either spelling, as any UUID secret is', async function () {
      const upper = await legacyToken()
      expect((await tokenBySecret(h.store.reader, upper))?.AccessorID).to.equal(accessor(1))
      expect((await tokenBySecret(h.store.reader, upper.toLowerCase()))?.AccessorID).to.equal(accessor(1))
    })

    it('is not created a second time by the configured management token, nor taken by a new token', async function () {
      const upper = await legacyToken()
      const existing = await h.ok<AclToken>(cmd.ensure(tokenCreate(9, { SecretID: upper })))
      expect(existing.AccessorID).to.equal(accessor(1))
      expect(await h.token(accessor(9))).to.equal(undefined)
      await h.fails(cmd.tokenCreate(tokenCreate(8, { SecretID: upper })), 'invalid_input')
      await h.fails(cmd.tokenCreate(tokenCreate(8, { SecretID: upper.toLowerCase() })), 'invalid_input')
    })
  })

  describe('the secret index', function () {
    async function storedSecretEntries(): Promise<string[]> {
      return (await dump(h.store)).map(([key]) => key).filter((key) => key.startsWith(SECRET_INDEX_PREFIX))
    }

    it('is held in memory: the state stores no entry, and a token is found by its secret, before and after a reopen', async function () {
      await h.ok(cmd.init())
      await h.ok(cmd.tokenCreate(tokenCreate(1)))
      await h.ok(cmd.tokenCreate(tokenCreate(2)))
      await h.ok(cmd.tokenDelete(accessor(2)))
      expect(await storedSecretEntries()).to.deep.equal([])
      // The entry the transaction code reads: 16 bytes of the secret's SHA-256 in base64url, naming the AccessorID in 16 bytes.
      const digest = createHash('sha256').update(secret(1), 'utf8').digest()
      expect((await h.store.reader.get(uniqueKey('token', 'secret', digest.toString('base64url', 0, 16))))?.toString('hex')).to.equal(accessor(1).replaceAll('-', ''))
      for (const reopened of [false, true]) {
        if (reopened) await h.reopen()
        expect((await tokenBySecret(h.store.reader, secret(1)))?.AccessorID, `reopened: ${reopened}`).to.equal(accessor(1))
        expect(await tokenBySecret(h.store.reader, secret(2)), `reopened: ${reopened}`).to.equal(undefined)
        await h.fails(cmd.tokenCreate(tokenCreate(9, { SecretID: secret(1) })), 'invalid_input', 'SecretID')
      }
      expect(await storedSecretEntries()).to.deep.equal([])
    })

    it('sees a secret taken earlier in the same batch', async function () {
      await h.ok(cmd.init())
      const next = h.store.lastApplied + 1
      const results = await h.store.applyBatch([
        { command: cmd.tokenCreate(tokenCreate(1)), index: next },
        { command: cmd.tokenCreate(tokenCreate(2, { SecretID: secret(1) })), index: next + 1 },
      ])
      h.index = next + 1
      expect(results.map((result) => result.ok)).to.deep.equal([true, false])
      expect(await h.token(accessor(2))).to.equal(undefined)
    })

    it('names an AccessorID other than a lower-case UUID by its text, whatever its length; other indexes keep the text', function () {
      const secretValue = (key: string) => uniqueValue('token', 'secret', key)
      const secretTarget = (value: Buffer) => uniqueTarget('token', 'secret', value)
      // 15 bytes of text would make 16 with one NUL before them: the length of a UUID's bytes.
      for (const key of [accessor(1), ANONYMOUS_TOKEN_ID, accessor(1).toUpperCase(), 'fifteen-bytes-x', 'sixteen-bytes-ok', 'é', '']) {
        expect(secretTarget(secretValue(key)), key).to.equal(key)
        expect(secretValue(key).length === 16, key).to.equal(key === accessor(1) || key === ANONYMOUS_TOKEN_ID)
      }
      expect(uniqueValue('policy', 'name', accessor(1)).toString('utf8')).to.equal(accessor(1))
      expect(uniqueTarget('policy', 'name', Buffer.from('0123456789abcdef'))).to.equal('0123456789abcdef')
    })

    it('is marked as not stored by a new state\'s first apply batch, not when the state is opened', async function () {
      expect(await h.store.db.get(SECRET_INDEX_FORM_KEY)).to.equal(undefined)
      await h.reopen()
      expect(await h.store.db.get(SECRET_INDEX_FORM_KEY)).to.equal(undefined)
      await h.ok(cmd.init())
      expect(await h.store.db.get(SECRET_INDEX_FORM_KEY)).to.deep.equal(SECRET_INDEX_FORM)
    })

    describe('stored by an earlier build', function () {
      /** Stores the index as earlier builds did: each entry under its secret's whole SHA-256 in hex (the AccessorID as text), or under 16 bytes of it in base64url (in 16 bytes). */
      async function storeOlderForms(secrets: readonly string[]): Promise<void> {
        const ops: BatchOp[] = [{ type: 'put', key: SECRET_INDEX_FORM_KEY, value: encode('sha256-16-base64url') }]
        for (const [n, secretID] of secrets.entries()) {
          const holder = await tokenBySecret(h.store.reader, secretID)
          expect(holder, secretID).to.not.equal(undefined)
          const digest = createHash('sha256').update(secretID.toLowerCase(), 'utf8').digest()
          ops.push(
            n % 2 === 0
              ? { type: 'put', key: uniqueKey('token', 'secret', digest.toString('hex')), value: Buffer.from(holder!.AccessorID, 'utf8') }
              : { type: 'put', key: uniqueKey('token', 'secret', digest.toString('base64url', 0, 16)), value: uniqueValue('token', 'secret', holder!.AccessorID) },
          )
        }
        await h.store.db.batch(ops)
      }

      it('is dropped when the store opens it, and every token is found by its secret', async function () {
        await h.ok(cmd.init())
        for (let n = 1; n <= 5; n++) await h.ok(cmd.tokenCreate(tokenCreate(n)))
        const secrets = [1, 2, 3, 4, 5].map((n) => secret(n))
        await storeOlderForms(secrets)
        expect(await storedSecretEntries()).to.have.length(5)
        await h.reopen()
        expect(await storedSecretEntries()).to.deep.equal([])
        for (const [n, secretID] of secrets.entries()) expect((await tokenBySecret(h.store.reader, secretID))?.AccessorID).to.equal(accessor(n + 1))
        expect(await h.store.db.get(SECRET_INDEX_FORM_KEY)).to.deep.equal(SECRET_INDEX_FORM)
        // A new token may not take a secret of the state opened.
        await h.fails(cmd.tokenCreate(tokenCreate(9, { SecretID: secret(3) })), 'invalid_input', 'SecretID')
        // Marked: the next open reads the mark alone.
        expect(await dropStoredSecretIndex(h.store.db)).to.equal(true)
      })

      it('is dropped when the store switches to a state that stores it (a snapshot, or a restore of an earlier build\'s archive)', async function () {
        await h.ok(cmd.init())
        for (let n = 1; n <= 3; n++) await h.ok(cmd.tokenCreate(tokenCreate(n)))
        const secrets = [1, 2, 3].map((n) => secret(n))
        await storeOlderForms(secrets)
        // The older state, switched to as a snapshot install or a restore build is.
        await replaceWithCopy(h.store)
        expect(await storedSecretEntries()).to.deep.equal([])
        for (const [n, secretID] of secrets.entries()) expect((await tokenBySecret(h.store.reader, secretID))?.AccessorID).to.equal(accessor(n + 1))
      })

      it('is dropped in bounded batches, however many entries there are', async function () {
        const entries = 25_003
        const ops: BatchOp[] = []
        for (let n = 0; n < entries; n++) ops.push({ type: 'put', key: SECRET_INDEX_PREFIX + createHash('sha256').update(`secret ${n}`).digest('hex'), value: Buffer.from(accessor(n + 1)) })
        await h.store.db.batch(ops)
        let batches = 0
        const db = h.store.db as unknown as { batch(ops: unknown[]): Promise<void> }
        const batch = db.batch.bind(db)
        db.batch = (written: unknown[]) => {
          batches++
          return batch(written)
        }
        try {
          expect(await dropStoredSecretIndex(h.store.db)).to.equal(true)
        } finally {
          db.batch = batch
        }
        expect(batches).to.equal(3)
        expect(await storedSecretEntries()).to.deep.equal([])
      })

      it('is dropped the rest of the way after a drop stopped part-way', async function () {
        await h.ok(cmd.init())
        for (let n = 1; n <= 4; n++) await h.ok(cmd.tokenCreate(tokenCreate(n)))
        const secrets = [1, 2, 3, 4].map((n) => secret(n))
        await storeOlderForms(secrets)
        // Part of the entries were dropped, and the mark not written yet, when the server stopped.
        const stored = await storedSecretEntries()
        await h.store.db.batch(stored.slice(0, 2).map((key) => ({ type: 'del' as const, key })))
        await h.reopen()
        expect(await storedSecretEntries()).to.deep.equal([])
        for (const [n, secretID] of secrets.entries()) expect((await tokenBySecret(h.store.reader, secretID))?.AccessorID).to.equal(accessor(n + 1))
      })
    })
  })

  describe('acl.token.create', function () {
    it('stores the token with CreateIndex = ModifyIndex = the command index, a Hash and its secret index', async function () {
      await h.ok(cmd.init())
      await h.ok(cmd.noop())
      const token = await h.ok<AclToken>(cmd.tokenCreate(tokenCreate(1, { ServiceIdentities: [{ ServiceName: 'web' }] })))
      expect(token).to.include({ CreateIndex: 3, ModifyIndex: 3 })
      expect(token.Hash).to.be.a('string').and.not.equal('')
      expect(await h.token(accessor(1))).to.deep.equal(token)
      expect((await getByUnique(h.store.reader, tokenSpec, 'secret', secretDigest(secret(1))))?.AccessorID).to.equal(accessor(1))
      expect(await h.tokensBy('service', 'web')).to.deep.equal([accessor(1)])
      expect(await h.tokensBy('ns', 'default')).to.have.members([ANONYMOUS_TOKEN_ID, accessor(1)])
      // The index holds a digest, never the secret itself.
      const keys = (await dump(h.store)).map(([key]) => key)
      expect(keys.filter((key) => key.includes(secret(1)))).to.deep.equal([])
    })

    it('refuses an AccessorID already in use (invalid_input on AccessorID)', async function () {
      await h.ok(cmd.tokenCreate(tokenCreate(1)))
      await h.fails(cmd.tokenCreate(tokenCreate(2, { AccessorID: accessor(1) })), 'invalid_input', 'AccessorID')
      expect(await h.token(accessor(1))).to.include({ SecretID: secret(1) })
    })

    it('refuses a SecretID already in use (invalid_input on SecretID)', async function () {
      await h.ok(cmd.tokenCreate(tokenCreate(1)))
      await h.fails(cmd.tokenCreate(tokenCreate(2, { SecretID: secret(1) })), 'invalid_input', 'SecretID')
      expect(await h.token(accessor(2))).to.equal(undefined)
    })

    it('resolves links given by ID or by Name to IDs, dropping duplicates', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.ok(cmd.policyCreate(policyWrite(2)))
      await h.ok(cmd.roleCreate(roleWrite(1)))
      const token = await h.ok<AclToken>(
        cmd.tokenCreate(
          tokenCreate(1, {
            Policies: [{ Name: 'policy-1' }, { ID: policyId(2) }, { ID: policyId(1), Name: 'ignored when an ID is given' }],
            Roles: [{ Name: 'role-1' }],
          }),
        ),
      )
      expect(token.Policies).to.deep.equal([{ ID: policyId(1) }, { ID: policyId(2) }])
      expect(token.Roles).to.deep.equal([{ ID: roleId(1) }])
      expect(await h.tokensBy('policy', policyId(1))).to.deep.equal([accessor(1)])
      expect(await h.tokensBy('policy', policyId(2))).to.deep.equal([accessor(1)])
      expect(await h.tokensBy('role', roleId(1))).to.deep.equal([accessor(1)])
    })

    it('refuses a link to a missing policy or role with invalid_input naming the field', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.fails(cmd.tokenCreate(tokenCreate(1, { Policies: [{ ID: policyId(1) }, { ID: policyId(7) }] })), 'invalid_input', 'Policies[1].ID')
      await h.fails(cmd.tokenCreate(tokenCreate(1, { Policies: [{ Name: 'nope' }] })), 'invalid_input', 'Policies[0].Name')
      await h.fails(cmd.tokenCreate(tokenCreate(1, { Roles: [{ ID: roleId(7) }] })), 'invalid_input', 'Roles[0].ID')
      await h.fails(cmd.tokenCreate(tokenCreate(1, { Roles: [{ Name: 'nope' }] })), 'invalid_input', 'Roles[0].Name')
      await h.fails(cmd.tokenCreate(tokenCreate(1, { Policies: [{}] })), 'invalid_input', 'Policies[0]')
      expect(await h.token(accessor(1))).to.equal(undefined)
      expect(await h.tokensBy('policy', policyId(1))).to.deep.equal([])
    })

    it('resolves a Name link in the token namespace first, then in the default namespace', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1, { Name: 'shared' })))
      await h.ok(cmd.policyCreate(policyWrite(2, { Name: 'both' })))
      await h.ok(cmd.policyCreate(policyWrite(3, { Name: 'both', Namespace: TEAM })))
      const token = await h.ok<AclToken>(cmd.tokenCreate(tokenCreate(1, { Namespace: TEAM, Policies: [{ Name: 'shared' }, { Name: 'both' }] })))
      expect(token.Policies).to.deep.equal([{ ID: policyId(1) }, { ID: policyId(3) }])
      expect(await h.tokensBy('ns', TEAM)).to.deep.equal([accessor(1)])
      // A default-namespace token does not see the team's policy by name.
      const other = await h.ok<AclToken>(cmd.tokenCreate(tokenCreate(2, { Policies: [{ Name: 'both' }] })))
      expect(other.Policies).to.deep.equal([{ ID: policyId(2) }])
    })
  })

  describe('acl.token.update', function () {
    it('replaces the mutable fields, keeps CreateIndex, sets ModifyIndex and moves the index entries', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.ok(cmd.policyCreate(policyWrite(2)))
      const created = await h.ok<AclToken>(
        cmd.tokenCreate(tokenCreate(1, { Policies: [{ ID: policyId(1) }], ServiceIdentities: [{ ServiceName: 'web' }] })),
      )
      const updated = await h.ok<AclToken>(
        cmd.tokenUpdate(tokenUpdate(created, { Description: 'changed', Policies: [{ Name: 'policy-2' }], ServiceIdentities: [{ ServiceName: 'db' }] })),
      )
      expect(updated).to.include({ CreateIndex: 3, ModifyIndex: 4, Description: 'changed', SecretID: secret(1), CreateTime: NOW })
      expect(updated.Policies).to.deep.equal([{ ID: policyId(2) }])
      expect(updated.Hash).to.not.equal(created.Hash)
      expect(await h.token(accessor(1))).to.deep.equal(updated)
      expect(await h.tokensBy('policy', policyId(1))).to.deep.equal([])
      expect(await h.tokensBy('policy', policyId(2))).to.deep.equal([accessor(1)])
      expect(await h.tokensBy('service', 'web')).to.deep.equal([])
      expect(await h.tokensBy('service', 'db')).to.deep.equal([accessor(1)])
    })

    it('keeps the Hash when nothing hashed changes', async function () {
      const created = await h.ok<AclToken>(cmd.tokenCreate(tokenCreate(1)))
      const updated = await h.ok<AclToken>(cmd.tokenUpdate(tokenUpdate(created)))
      expect(updated.Hash).to.equal(created.Hash)
      expect(updated.ModifyIndex).to.equal(2)
    })

    it('refuses to change SecretID, AuthMethod or ExpirationTime (immutable), naming the field', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('m')))
      const created = await h.ok<AclToken>(cmd.tokenCreate(tokenCreate(1, { ExpirationTime: '2030-01-01T00:00:00Z' })))
      await h.fails(cmd.tokenUpdate(tokenUpdate(created, { SecretID: secret(2) })), 'invalid_input', 'SecretID')
      await h.fails(cmd.tokenUpdate(tokenUpdate(created, { AuthMethod: 'm' })), 'invalid_input', 'AuthMethod')
      await h.fails(cmd.tokenUpdate(tokenUpdate(created, { ExpirationTime: '2031-01-01T00:00:00Z' })), 'invalid_input', 'ExpirationTime')
      expect(await h.token(accessor(1))).to.deep.equal(created)
      // Restating the same values, even written differently, is allowed.
      const same = await h.ok<AclToken>(
        cmd.tokenUpdate(tokenUpdate(created, { SecretID: secret(1), AuthMethod: '', ExpirationTime: '2030-01-01T00:00:00.000Z' })),
      )
      expect(same.ExpirationTime).to.equal('2030-01-01T00:00:00Z')
    })

    it('refuses to toggle Local', async function () {
      const created = await h.ok<AclToken>(cmd.tokenCreate(tokenCreate(1, { Local: false })))
      const error = await h.fails(cmd.tokenUpdate(tokenUpdate(created, { Local: true })), 'invalid_input', 'Local')
      expect(error.message).to.contain('local mode')
      expect((await h.token(accessor(1)))?.Local).to.equal(false)
    })

    it('refuses to move a token to another namespace', async function () {
      const created = await h.ok<AclToken>(cmd.tokenCreate(tokenCreate(1)))
      await h.fails(cmd.tokenUpdate(tokenUpdate(created, { Namespace: TEAM })), 'invalid_input', 'Namespace')
    })

    it('refuses a link to a missing policy and leaves the token as it was', async function () {
      const created = await h.ok<AclToken>(cmd.tokenCreate(tokenCreate(1)))
      await h.fails(cmd.tokenUpdate(tokenUpdate(created, { Policies: [{ Name: 'missing' }] })), 'invalid_input', 'Policies[0].Name')
      expect(await h.token(accessor(1))).to.deep.equal(created)
    })

    it('returns not_found for an unknown AccessorID', async function () {
      const created = await h.ok<AclToken>(cmd.tokenCreate(tokenCreate(1)))
      await h.fails(cmd.tokenUpdate(tokenUpdate(created, { AccessorID: accessor(2) })), 'not_found')
      expect(await h.token(accessor(2))).to.equal(undefined)
    })
  })

  describe('acl.token.clone', function () {
    it("copies the source's links and Local into a new token with its own IDs, Description and indexes", async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.ok(cmd.roleCreate(roleWrite(1)))
      const source = await h.ok<AclToken>(
        cmd.tokenCreate(
          tokenCreate(1, { Local: true, Policies: [{ ID: policyId(1) }], Roles: [{ ID: roleId(1) }], NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc1' }] }),
        ),
      )
      const clone = await h.ok<AclToken>(cmd.tokenClone(accessor(1), 2, 'the clone'))
      expect(clone).to.include({ AccessorID: accessor(2), SecretID: secret(2), Description: 'the clone', Local: true, CreateIndex: 4, ModifyIndex: 4 })
      expect(clone.Policies).to.deep.equal(source.Policies)
      expect(clone.Roles).to.deep.equal(source.Roles)
      expect(clone.NodeIdentities).to.deep.equal(source.NodeIdentities)
      expect(await h.tokensBy('policy', policyId(1))).to.have.members([accessor(1), accessor(2)])
      expect(await h.tokensBy('role', roleId(1))).to.have.members([accessor(1), accessor(2)])
      expect(await h.token(accessor(1))).to.deep.equal(source)
    })

    it('refuses to clone a token created through an auth method', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('m')))
      await h.ok(cmd.tokenCreate(tokenCreate(1, { AuthMethod: 'm' })))
      const error = await h.fails(cmd.tokenClone(accessor(1), 2), 'invalid_input')
      expect(error.message).to.contain('auth method')
      expect(await h.token(accessor(2))).to.equal(undefined)
    })

    it('returns not_found for a missing source, and invalid_input when the new SecretID is in use', async function () {
      await h.fails(cmd.tokenClone(accessor(1), 2), 'not_found')
      await h.ok(cmd.tokenCreate(tokenCreate(1)))
      await h.ok(cmd.tokenCreate(tokenCreate(2)))
      await h.fails(cmd.tokenClone(accessor(1), 2), 'invalid_input', 'AccessorID')
    })
  })

  describe('acl.token.delete', function () {
    it('deletes the token and every index entry, raising the token table index', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.ok(cmd.tokenCreate(tokenCreate(1, { Policies: [{ ID: policyId(1) }], ServiceIdentities: [{ ServiceName: 'web' }] })))
      await h.ok(cmd.noop())
      const deleted = await h.ok(cmd.tokenDelete(accessor(1)))
      expect(deleted).to.equal(true)
      expect(await h.token(accessor(1))).to.equal(undefined)
      expect(await getByUnique(h.store.reader, tokenSpec, 'secret', secretDigest(secret(1)))).to.equal(undefined)
      expect(await h.tokensBy('policy', policyId(1))).to.deep.equal([])
      expect(await h.tokensBy('service', 'web')).to.deep.equal([])
      expect(await h.tokensBy('ns', 'default')).to.deep.equal([])
      expect((await dump(h.store)).filter(([key]) => key.includes(accessor(1)))).to.deep.equal([])
      expect(h.store.tableIndex('token')).to.equal(4)
      expect(h.store.tableIndex('policy')).to.equal(1)
    })

    it('is idempotent: deleting a missing token returns true and writes nothing else', async function () {
      await h.ok(cmd.tokenCreate(tokenCreate(1)))
      await h.ok(cmd.tokenDelete(accessor(1)))
      const before = await dumpWithoutApplied(h.store)
      expect(await h.ok(cmd.tokenDelete(accessor(1)))).to.equal(true)
      expect(await h.ok(cmd.tokenDelete(accessor(9)))).to.equal(true)
      expectSameContents(await dumpWithoutApplied(h.store), before)
    })

    it('refuses to delete the anonymous token', async function () {
      await h.ok(cmd.init())
      await h.fails(cmd.tokenDelete(ANONYMOUS_TOKEN_ID), 'invalid_input', 'AccessorID')
      expect(await h.token(ANONYMOUS_TOKEN_ID)).to.not.equal(undefined)
    })
  })

  describe('acl.login', function () {
    it('writes the login token with its roles resolved by Name, missing roles dropped, indexed by its auth method', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('m')))
      await h.ok(cmd.roleCreate(roleWrite(1)))
      const token = await h.ok<AclToken>(
        cmd.login(loginWrite(1, 'm', 1, { Roles: [{ Name: 'role-1' }, { Name: 'not-yet-created' }, { Name: 'role-1' }], ExpirationTime: '2030-01-01T00:00:00Z' })),
      )
      expect(token).to.deep.include({ AccessorID: accessor(1), AuthMethod: 'm', Local: true, CreateIndex: 3, ModifyIndex: 3, Roles: [{ ID: roleId(1) }] })
      expect(token.Policies).to.deep.equal([])
      expect(await h.tokensBy('authmethod', nsKey('default', 'm'))).to.deep.equal([accessor(1)])
      expect(await h.tokensBy('role', roleId(1))).to.deep.equal([accessor(1)])
      expect((await getByUnique(h.store.reader, tokenSpec, 'secret', secretDigest(secret(1))))?.AccessorID).to.equal(accessor(1))
    })

    it('is refused (permission_denied) when the auth method was changed or deleted since the login was verified', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('m')))
      await h.ok(cmd.methodUpdate(authMethodWrite('m', { Description: 'changed' })))
      await h.fails(cmd.login(loginWrite(1, 'm', 1, { ServiceIdentities: [{ ServiceName: 'web' }] })), 'permission_denied')
      await h.ok(cmd.methodDelete('m'))
      await h.fails(cmd.login(loginWrite(1, 'm', 2, { ServiceIdentities: [{ ServiceName: 'web' }] })), 'permission_denied')
      expect(await h.token(accessor(1))).to.equal(undefined)
    })

    it('is refused (permission_denied) when no privilege is left after dropping missing roles', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('m')))
      const error = await h.fails(cmd.login(loginWrite(1, 'm', 1, { Roles: [{ Name: 'missing' }] })), 'permission_denied')
      expect(error.message).to.contain('missing')
      expect(await h.token(accessor(1))).to.equal(undefined)
    })

    it('refuses an AccessorID or SecretID already in use', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('m')))
      await h.ok(cmd.tokenCreate(tokenCreate(1)))
      const identities = { ServiceIdentities: [{ ServiceName: 'web' }] }
      await h.fails(cmd.login(loginWrite(2, 'm', 1, { ...identities, AccessorID: accessor(1) })), 'invalid_input', 'AccessorID')
      await h.fails(cmd.login(loginWrite(2, 'm', 1, { ...identities, SecretID: secret(1) })), 'invalid_input', 'SecretID')
    })

    it('a login token bound into another namespace is still deleted with its auth method', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('m')))
      await h.ok(cmd.login(loginWrite(1, 'm', 1, { Namespace: TEAM, ServiceIdentities: [{ ServiceName: 'web' }] })))
      expect(await h.tokensBy('authmethod', nsKey('default', 'm'))).to.deep.equal([accessor(1)])
      await h.ok(cmd.methodDelete('m'))
      expect(await h.token(accessor(1))).to.equal(undefined)
      expect(await h.tokensBy('ns', TEAM)).to.deep.equal([])
    })
  })

  describe('acl.token.delete-expired', function () {
    it('deletes only the listed tokens whose ExpirationTime has passed at the command’s now, and counts them', async function () {
      await h.ok(cmd.tokenCreate(tokenCreate(1, { ExpirationTime: '2024-05-01T12:00:00Z' })))
      await h.ok(cmd.tokenCreate(tokenCreate(2, { ExpirationTime: '2024-05-01T12:00:01Z' })))
      await h.ok(cmd.tokenCreate(tokenCreate(3)))
      await h.ok(cmd.tokenCreate(tokenCreate(4, { ExpirationTime: '2024-01-01T00:00:00Z' })))
      const now = '2024-05-01T12:00:00.500Z'
      const count = await h.ok(cmd.tokenDeleteExpired([accessor(1), accessor(2), accessor(3), accessor(9)], now))
      expect(count).to.equal(1)
      expect(await h.token(accessor(1))).to.equal(undefined)
      expect(await h.token(accessor(2))).to.not.equal(undefined)
      expect(await h.token(accessor(3))).to.not.equal(undefined)
      // Not listed, so not deleted, although expired: the proposer decides which tokens to reap.
      expect(await h.token(accessor(4))).to.not.equal(undefined)
      expect(h.store.tableIndex('token')).to.equal(5)
    })

    it('deletes nothing and leaves the table index when none has expired', async function () {
      await h.ok(cmd.tokenCreate(tokenCreate(1, { ExpirationTime: '2030-01-01T00:00:00Z' })))
      expect(await h.ok(cmd.tokenDeleteExpired([accessor(1)], NOW))).to.equal(0)
      expect(h.store.tableIndex('token')).to.equal(1)
    })
  })

  describe('acl.policy.*', function () {
    it('creates a policy found by ID and by name, with its Hash and indexes', async function () {
      const policy = await h.ok<AclPolicy>(cmd.policyCreate(policyWrite(1, { Datacenters: ['dc1'] })))
      expect(policy).to.include({ ID: policyId(1), Name: 'policy-1', CreateIndex: 1, ModifyIndex: 1, Hash: policyHash(policy) })
      expect(await h.policy(policyId(1))).to.deep.equal(policy)
      expect((await getByUnique(h.store.reader, policySpec, 'name', nsKey('default', 'policy-1')))?.ID).to.equal(policyId(1))
      expect((await listByIndex(h.store.reader, policySpec, 'ns', 'default')).map((p) => p.ID)).to.deep.equal([policyId(1)])
    })

    it('refuses an ID already in use', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.fails(cmd.policyCreate(policyWrite(1, { Name: 'other' })), 'invalid_input', 'ID')
    })

    it('keeps names unique per namespace, and allows the same name in another namespace', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1, { Name: 'ops' })))
      await h.fails(cmd.policyCreate(policyWrite(2, { Name: 'ops' })), 'invalid_input', 'Name')
      await h.ok(cmd.policyCreate(policyWrite(3, { Name: 'ops', Namespace: TEAM })))
      await h.ok(cmd.policyCreate(policyWrite(4, { Name: 'other' })))
      await h.fails(cmd.policyUpdate(policyWrite(4, { Name: 'ops' })), 'invalid_input', 'Name')
      expect((await getByUnique(h.store.reader, policySpec, 'name', nsKey('default', 'ops')))?.ID).to.equal(policyId(1))
      expect((await getByUnique(h.store.reader, policySpec, 'name', nsKey(TEAM, 'ops')))?.ID).to.equal(policyId(3))
      expect((await listByIndex(h.store.reader, policySpec, 'ns', TEAM)).map((p) => p.ID)).to.deep.equal([policyId(3)])
      expect(await h.policy(policyId(2))).to.equal(undefined)
    })

    it('renames: the old name is free, the new one found, and linked tokens keep the link', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.ok(cmd.tokenCreate(tokenCreate(1, { Policies: [{ Name: 'policy-1' }] })))
      const renamed = await h.ok<AclPolicy>(cmd.policyUpdate(policyWrite(1, { Name: 'renamed' })))
      expect(renamed).to.include({ CreateIndex: 1, ModifyIndex: 3 })
      expect(await getByUnique(h.store.reader, policySpec, 'name', nsKey('default', 'policy-1'))).to.equal(undefined)
      expect((await getByUnique(h.store.reader, policySpec, 'name', nsKey('default', 'renamed')))?.ID).to.equal(policyId(1))
      expect(await h.tokensBy('policy', policyId(1))).to.deep.equal([accessor(1)])
      await h.ok(cmd.policyCreate(policyWrite(2, { Name: 'policy-1' })))
    })

    it('changes the Hash with Name, Description, Rules or Datacenters, and only then', async function () {
      const base = await h.ok<AclPolicy>(cmd.policyCreate(policyWrite(1)))
      const same = await h.ok<AclPolicy>(cmd.policyUpdate(policyWrite(1)))
      expect(same.Hash).to.equal(base.Hash)
      const hashes = new Set([base.Hash])
      for (const change of [{ Name: 'x' }, { Description: 'd' }, { Rules: 'acl = "write"' }, { Datacenters: ['dc2'] }]) {
        const changed = await h.ok<AclPolicy>(cmd.policyUpdate(policyWrite(1, change)))
        expect(hashes.has(changed.Hash), `Hash after ${JSON.stringify(change)}`).to.equal(false)
        hashes.add(changed.Hash)
      }
    })

    it('returns not_found when updating a missing policy, and refuses a move to another namespace', async function () {
      await h.fails(cmd.policyUpdate(policyWrite(1)), 'not_found')
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.fails(cmd.policyUpdate(policyWrite(1, { Namespace: TEAM })), 'invalid_input', 'Namespace')
    })

    it('guards global-management: its Rules and Datacenters cannot change, it cannot be deleted, its Name can change', async function () {
      await h.ok(cmd.init())
      const builtin = (await h.policy(GLOBAL_MANAGEMENT_POLICY_ID))!
      const write = (fields: Partial<PolicyWrite>): PolicyWrite => ({
        ID: builtin.ID,
        Name: builtin.Name,
        Description: builtin.Description,
        Rules: builtin.Rules,
        Datacenters: builtin.Datacenters,
        Namespace: builtin.Namespace,
        ...fields,
      })
      await h.fails(cmd.policyUpdate(write({ Rules: 'acl = "read"' })), 'invalid_input', 'Rules')
      await h.fails(cmd.policyUpdate(write({ Datacenters: ['dc1'] })), 'invalid_input', 'Datacenters')
      await h.fails(cmd.policyDelete(GLOBAL_MANAGEMENT_POLICY_ID), 'invalid_input', 'ID')
      expect(await h.policy(GLOBAL_MANAGEMENT_POLICY_ID)).to.deep.equal(builtin)
      const renamed = await h.ok<AclPolicy>(cmd.policyUpdate(write({ Name: 'root', Description: 'everything' })))
      expect(renamed).to.include({ Name: 'root', Rules: GLOBAL_MANAGEMENT_RULES })
    })

    it('deletes a policy and its name entry, raises the table index, and is idempotent', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.ok(cmd.tokenCreate(tokenCreate(1, { Policies: [{ ID: policyId(1) }] })))
      expect(await h.ok(cmd.policyDelete(policyId(1)))).to.equal(true)
      expect(await h.policy(policyId(1))).to.equal(undefined)
      expect(await getByUnique(h.store.reader, policySpec, 'name', nsKey('default', 'policy-1'))).to.equal(undefined)
      expect(h.store.tableIndex('policy')).to.equal(3)
      // The token keeps its (now dangling) link; reads leave it out. A new link to it is refused.
      expect((await h.token(accessor(1)))?.Policies).to.deep.equal([{ ID: policyId(1) }])
      await h.fails(cmd.tokenCreate(tokenCreate(2, { Policies: [{ ID: policyId(1) }] })), 'invalid_input', 'Policies[0].ID')
      expect(await h.ok(cmd.policyDelete(policyId(1)))).to.equal(true)
      expect(h.store.tableIndex('policy')).to.equal(3)
    })
  })

  describe('acl.role.*', function () {
    it('creates a role with links resolved to IDs, found by name and listed by policy', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      const role = await h.ok<AclRole>(cmd.roleCreate(roleWrite(1, { Policies: [{ Name: 'policy-1' }, { ID: policyId(1) }] })))
      expect(role).to.include({ CreateIndex: 2, ModifyIndex: 2 })
      expect(role.Policies).to.deep.equal([{ ID: policyId(1) }])
      expect((await getByUnique(h.store.reader, roleSpec, 'name', nsKey('default', 'role-1')))?.ID).to.equal(roleId(1))
      expect((await listByIndex(h.store.reader, roleSpec, 'policy', policyId(1))).map((r) => r.ID)).to.deep.equal([roleId(1)])
      expect((await listByIndex(h.store.reader, roleSpec, 'ns', 'default')).map((r) => r.ID)).to.deep.equal([roleId(1)])
    })

    it('refuses a link to a missing policy, a duplicate ID, and a duplicate name in the same namespace', async function () {
      await h.fails(cmd.roleCreate(roleWrite(1, { Policies: [{ ID: policyId(5) }] })), 'invalid_input', 'Policies[0].ID')
      await h.ok(cmd.roleCreate(roleWrite(1)))
      await h.fails(cmd.roleCreate(roleWrite(1, { Name: 'x' })), 'invalid_input', 'ID')
      await h.fails(cmd.roleCreate(roleWrite(2, { Name: 'role-1' })), 'invalid_input', 'Name')
      await h.ok(cmd.roleCreate(roleWrite(3, { Name: 'role-1', Namespace: TEAM })))
      expect((await getByUnique(h.store.reader, roleSpec, 'name', nsKey(TEAM, 'role-1')))?.ID).to.equal(roleId(3))
    })

    it('updates a role: keeps CreateIndex, moves its policy and name entries, changes the Hash', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.ok(cmd.policyCreate(policyWrite(2)))
      const created = await h.ok<AclRole>(cmd.roleCreate(roleWrite(1, { Policies: [{ ID: policyId(1) }] })))
      const updated = await h.ok<AclRole>(cmd.roleUpdate(roleWrite(1, { Name: 'renamed', Policies: [{ ID: policyId(2) }] })))
      expect(updated).to.include({ CreateIndex: 3, ModifyIndex: 4 })
      expect(updated.Hash).to.not.equal(created.Hash)
      expect(await listByIndex(h.store.reader, roleSpec, 'policy', policyId(1))).to.deep.equal([])
      expect((await listByIndex(h.store.reader, roleSpec, 'policy', policyId(2))).map((r) => r.ID)).to.deep.equal([roleId(1)])
      expect(await getByUnique(h.store.reader, roleSpec, 'name', nsKey('default', 'role-1'))).to.equal(undefined)
      expect(h.store.tableIndex('role')).to.equal(4)
      await h.fails(cmd.roleUpdate(roleWrite(2)), 'not_found')
      await h.fails(cmd.roleUpdate(roleWrite(1, { Name: 'renamed', Namespace: TEAM })), 'invalid_input', 'Namespace')
    })

    it('deletes a role and its entries, is idempotent, and a Name link to it is refused afterwards', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.ok(cmd.roleCreate(roleWrite(1, { Policies: [{ ID: policyId(1) }] })))
      expect(await h.ok(cmd.roleDelete(roleId(1)))).to.equal(true)
      expect(await h.role(roleId(1))).to.equal(undefined)
      expect(await listByIndex(h.store.reader, roleSpec, 'policy', policyId(1))).to.deep.equal([])
      expect(h.store.tableIndex('role')).to.equal(3)
      expect(await h.ok(cmd.roleDelete(roleId(1)))).to.equal(true)
      await h.fails(cmd.tokenCreate(tokenCreate(1, { Roles: [{ Name: 'role-1' }] })), 'invalid_input', 'Roles[0].Name')
    })
  })

  describe('acl.replicate', function () {
    const replicate = (stream: 'policies' | 'roles' | 'tokens' | 'config', upserts: unknown[], deletes: string[], remoteIndex: number): Command =>
      ({ v: COMMAND_VERSION, type: 'acl.replicate', stream, upserts, deletes, remoteIndex, now: NOW }) as Command

    it("writes the primary's policies as they are, hashed as the primary hashes them, and records the replicated index", async function () {
      const local = await h.ok<AclPolicy>(cmd.policyCreate(policyWrite(1)))
      const result = await h.ok<{ RemoteIndex: number }>(replicate('policies', [policyWrite(1, { Rules: 'acl = "write"' }), policyWrite(2)], [], 40))
      expect(result.RemoteIndex).to.equal(40)
      const one = await h.policy(policyId(1))
      expect(one).to.include({ Rules: 'acl = "write"', CreateIndex: local.CreateIndex, ModifyIndex: 2 })
      expect(one?.Hash).to.equal(policyHash({ Name: 'policy-1', Description: '', Rules: 'acl = "write"', Datacenters: [] }))
      expect((await h.policy(policyId(2)))?.Name).to.equal('policy-2')
      expect(h.store.tableIndex('policy')).to.equal(2)
      expect(h.store.tableIndex('replication')).to.equal(2)
      // A batch after the primary went back (a restore) records the lower index it replicated.
      expect((await h.ok<{ RemoteIndex: number }>(replicate('policies', [], [], 30))).RemoteIndex).to.equal(30)
    })

    it('applies deletions first, never deletes global-management, and drops a local record of another ID holding an upserted name', async function () {
      await h.ok(cmd.init())
      await h.ok(cmd.policyCreate(policyWrite(1)))
      await h.ok(cmd.policyCreate(policyWrite(2)))
      // The primary renamed policy-1 to policy-2's name and deleted policy-2, in one round.
      await h.ok(replicate('policies', [policyWrite(3, { Name: 'policy-1' })], [policyId(2), GLOBAL_MANAGEMENT_POLICY_ID], 50))
      expect(await h.policy(policyId(1))).to.equal(undefined)
      expect(await h.policy(policyId(2))).to.equal(undefined)
      expect((await getByUnique(h.store.reader, policySpec, 'name', nsKey('default', 'policy-1')))?.ID).to.equal(policyId(3))
      expect(await h.policy(GLOBAL_MANAGEMENT_POLICY_ID)).to.not.equal(undefined)
    })

    it("writes the primary's global tokens, never touches a local token, and indexes the secret", async function () {
      await h.ok(cmd.init())
      const local = await h.ok<AclToken>(cmd.tokenCreate(tokenCreate(1, { Local: true })))
      await h.ok(replicate('tokens', [tokenCreate(2, { Policies: [{ ID: GLOBAL_MANAGEMENT_POLICY_ID }] }), tokenCreate(1, { Description: 'overwrite?' }), tokenCreate(3, { Local: true })], [accessor(1)], 7))
      const replicated = await h.token(accessor(2))
      expect(replicated).to.include({ Local: false, SecretID: secret(2) })
      const { Hash, CreateIndex, ModifyIndex, ...fields } = replicated!
      expect(Hash).to.equal(tokenHash(fields))
      expect(ModifyIndex).to.equal(CreateIndex)
      expect((await tokenBySecret(h.store.reader, secret(2)))?.AccessorID).to.equal(accessor(2))
      // The local token is untouched by an upsert or a deletion naming it; a local token in a batch is not written.
      expect(await h.token(accessor(1))).to.deep.equal(local)
      expect(await h.token(accessor(3))).to.equal(undefined)
      await h.ok(replicate('tokens', [], [accessor(2)], 8))
      expect(await h.token(accessor(2))).to.equal(undefined)
    })

    it("writes the primary's config entries as given, deletes by key, and never touches exported-services", async function () {
      await h.ok({ v: COMMAND_VERSION, type: 'config.apply', entry: { Kind: 'exported-services', Name: 'default', Namespace: 'default', Services: [] } } as Command)
      await h.ok({ v: COMMAND_VERSION, type: 'config.apply', entry: { Kind: 'service-defaults', Name: 'old', Namespace: 'default', Protocol: 'tcp' } } as Command)
      const web = { Kind: 'service-defaults', Name: 'web', Namespace: 'default', Protocol: 'http', Meta: { a: 'b' }, CreateIndex: 99, ModifyIndex: 99 }
      const foreign = { Kind: 'exported-services', Name: 'default', Namespace: 'default', Services: [{ Name: 'x' }] }
      await h.ok(replicate('config', [web, foreign], ['["service-defaults","default","old"]', '["exported-services","default","default"]'], 12))
      const stored = await getRecord(h.store.reader, configSpec, 'service-defaults\u0000default\u0000web')
      expect(stored).to.deep.equal({ Kind: 'service-defaults', Name: 'web', Namespace: 'default', Protocol: 'http', Meta: { a: 'b' }, CreateIndex: 3, ModifyIndex: 3 })
      expect(await getRecord(h.store.reader, configSpec, 'service-defaults\u0000default\u0000old')).to.equal(undefined)
      expect((await getRecord(h.store.reader, configSpec, 'exported-services\u0000default\u0000default'))?.['Services']).to.deep.equal([])
    })

    it("writes roles with the primary's links by ID, even to a policy not replicated yet", async function () {
      await h.ok(replicate('roles', [roleWrite(1, { Policies: [{ ID: policyId(7), Name: 'later' }] })], [], 9))
      const role = await h.role(roleId(1))
      expect(role?.Policies).to.deep.equal([{ ID: policyId(7) }])
      expect((await listByIndex(h.store.reader, roleSpec, 'policy', policyId(7))).map((r) => r.ID)).to.deep.equal([roleId(1)])
      await h.ok(replicate('roles', [], [roleId(1)], 10))
      expect(await h.role(roleId(1))).to.equal(undefined)
    })
  })

  describe('acl.auth-method.*', function () {
    it('creates a method keyed by namespace and name; the same name may exist in another namespace', async function () {
      const method = await h.ok<AclAuthMethod>(cmd.methodCreate(authMethodWrite('m')))
      expect(method).to.include({ Name: 'm', Type: 'jwt', CreateIndex: 1, ModifyIndex: 1 })
      expect(await h.method('m')).to.deep.equal(method)
      await h.fails(cmd.methodCreate(authMethodWrite('m')), 'invalid_input', 'Name')
      await h.ok(cmd.methodCreate(authMethodWrite('m', { Namespace: TEAM })))
      expect(await h.method('m', TEAM)).to.include({ Namespace: TEAM, CreateIndex: 3 })
    })

    it('updates a method: keeps CreateIndex, refuses a Type change, not_found when missing', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('m')))
      const updated = await h.ok<AclAuthMethod>(cmd.methodUpdate(authMethodWrite('m', { Description: 'new', MaxTokenTTLMs: 60_000 })))
      expect(updated).to.include({ CreateIndex: 1, ModifyIndex: 2, Description: 'new', MaxTokenTTLMs: 60_000 })
      await h.fails(cmd.methodUpdate(authMethodWrite('m', { Type: 'kubernetes' })), 'invalid_input', 'Type')
      await h.fails(cmd.methodUpdate(authMethodWrite('other')), 'not_found')
      expect(h.store.tableIndex('auth-method')).to.equal(2)
    })

    it('deletes its binding rules and the tokens it created in the same command, and nothing else', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('a')))
      await h.ok(cmd.methodCreate(authMethodWrite('b')))
      await h.ok(cmd.methodCreate(authMethodWrite('a', { Namespace: TEAM })))
      await h.ok(cmd.ruleCreate(bindingRuleWrite(1, 'a')))
      await h.ok(cmd.ruleCreate(bindingRuleWrite(2, 'a')))
      await h.ok(cmd.ruleCreate(bindingRuleWrite(3, 'b')))
      await h.ok(cmd.ruleCreate(bindingRuleWrite(4, 'a', { Namespace: TEAM })))
      await h.ok(cmd.tokenCreate(tokenCreate(1, { AuthMethod: 'a', Local: true })))
      await h.ok(cmd.tokenCreate(tokenCreate(2, { AuthMethod: 'a', Local: true })))
      await h.ok(cmd.tokenCreate(tokenCreate(3, { AuthMethod: 'b', Local: true })))
      await h.ok(cmd.tokenCreate(tokenCreate(4)))
      await h.ok(cmd.tokenCreate(tokenCreate(5, { AuthMethod: 'a', Namespace: TEAM })))
      expect(await h.tokensBy('authmethod', nsKey('default', 'a'))).to.have.members([accessor(1), accessor(2)])

      expect(await h.ok(cmd.methodDelete('a'))).to.equal(true)
      const at = h.index
      expect(await h.method('a')).to.equal(undefined)
      expect(await h.rule(ruleId(1))).to.equal(undefined)
      expect(await h.rule(ruleId(2))).to.equal(undefined)
      expect(await h.token(accessor(1))).to.equal(undefined)
      expect(await h.token(accessor(2))).to.equal(undefined)
      expect(await getByUnique(h.store.reader, tokenSpec, 'secret', secretDigest(secret(1)))).to.equal(undefined)
      expect(await h.tokensBy('authmethod', nsKey('default', 'a'))).to.deep.equal([])
      expect(await listByIndex(h.store.reader, bindingRuleSpec, 'authmethod', nsKey('default', 'a'))).to.deep.equal([])
      // Another method, a plain token, and the same name in another namespace are untouched.
      expect(await h.method('b')).to.not.equal(undefined)
      expect(await h.method('a', TEAM)).to.not.equal(undefined)
      expect(await h.rule(ruleId(3))).to.not.equal(undefined)
      expect(await h.rule(ruleId(4))).to.not.equal(undefined)
      expect(await h.token(accessor(3))).to.not.equal(undefined)
      expect(await h.token(accessor(4))).to.not.equal(undefined)
      expect(await h.token(accessor(5))).to.not.equal(undefined)
      // One command changed three tables: each table index is that command's index.
      expect(h.store.tableIndex('auth-method')).to.equal(at)
      expect(h.store.tableIndex('binding-rule')).to.equal(at)
      expect(h.store.tableIndex('token')).to.equal(at)
    })

    it('deleting a missing method returns true and writes nothing else', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('a')))
      const before = await dumpWithoutApplied(h.store)
      expect(await h.ok(cmd.methodDelete('missing'))).to.equal(true)
      expect(await h.ok(cmd.methodDelete('a', TEAM))).to.equal(true)
      expectSameContents(await dumpWithoutApplied(h.store), before)
    })
  })

  describe('acl.binding-rule.*', function () {
    it('needs an existing auth method in the same namespace', async function () {
      await h.fails(cmd.ruleCreate(bindingRuleWrite(1, 'm')), 'invalid_input', 'AuthMethod')
      await h.ok(cmd.methodCreate(authMethodWrite('m', { Namespace: TEAM })))
      await h.fails(cmd.ruleCreate(bindingRuleWrite(1, 'm')), 'invalid_input', 'AuthMethod')
      expect(await h.rule(ruleId(1))).to.equal(undefined)
      const rule = await h.ok<AclBindingRule>(cmd.ruleCreate(bindingRuleWrite(1, 'm', { Namespace: TEAM })))
      expect(rule).to.include({ ID: ruleId(1), CreateIndex: 4, ModifyIndex: 4 })
      expect((await listByIndex(h.store.reader, bindingRuleSpec, 'authmethod', nsKey(TEAM, 'm'))).map((r) => r.ID)).to.deep.equal([ruleId(1)])
      expect((await listByIndex(h.store.reader, bindingRuleSpec, 'ns', TEAM)).map((r) => r.ID)).to.deep.equal([ruleId(1)])
    })

    it('refuses a duplicate ID on create', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('m')))
      await h.ok(cmd.ruleCreate(bindingRuleWrite(1, 'm')))
      await h.fails(cmd.ruleCreate(bindingRuleWrite(1, 'm')), 'invalid_input', 'ID')
    })

    it('updates a rule: keeps CreateIndex, refuses an AuthMethod change, not_found when missing', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('m')))
      await h.ok(cmd.methodCreate(authMethodWrite('n')))
      await h.ok(cmd.ruleCreate(bindingRuleWrite(1, 'm')))
      const updated = await h.ok<AclBindingRule>(cmd.ruleUpdate(bindingRuleWrite(1, 'm', { BindName: 'api', Selector: 'value.a == "b"' })))
      expect(updated).to.include({ CreateIndex: 3, ModifyIndex: 4, BindName: 'api' })
      await h.fails(cmd.ruleUpdate(bindingRuleWrite(1, 'n')), 'invalid_input', 'AuthMethod')
      await h.fails(cmd.ruleUpdate(bindingRuleWrite(2, 'm')), 'not_found')
      expect(await h.rule(ruleId(1))).to.deep.equal(updated)
    })

    it('deletes a rule and its index entries, idempotently', async function () {
      await h.ok(cmd.methodCreate(authMethodWrite('m')))
      await h.ok(cmd.ruleCreate(bindingRuleWrite(1, 'm')))
      expect(await h.ok(cmd.ruleDelete(ruleId(1)))).to.equal(true)
      expect(await h.rule(ruleId(1))).to.equal(undefined)
      expect(await listByIndex(h.store.reader, bindingRuleSpec, 'authmethod', nsKey('default', 'm'))).to.deep.equal([])
      expect(h.store.tableIndex('binding-rule')).to.equal(3)
      expect(await h.ok(cmd.ruleDelete(ruleId(1)))).to.equal(true)
    })
  })

  describe('config.*', function () {
    it('config.apply upserts an entry keyed by kind, namespace and name: CreateIndex kept, ModifyIndex = the command index', async function () {
      expect(await h.ok(cmd.configApply(configWrite('web')))).to.equal(true)
      expect(await h.config('web')).to.deep.include({ Kind: 'service-defaults', Name: 'web', Protocol: 'http', CreateIndex: 1, ModifyIndex: 1 })
      // Indexes in the command are the client's guess; the state decides them.
      expect(await h.ok(cmd.configApply(configWrite('web', { Protocol: 'grpc', CreateIndex: 99, ModifyIndex: 99 })))).to.equal(true)
      expect(await h.config('web')).to.deep.include({ Protocol: 'grpc', CreateIndex: 1, ModifyIndex: 2 })
      await h.ok(cmd.configApply(configWrite('web', { Kind: 'proxy-defaults' })))
      expect(await h.config('web', 'proxy-defaults')).to.deep.include({ CreateIndex: 3 })
      expect((await listRecords(h.store.reader, configSpec, 'service-defaults\u0000')).map((entry) => entry.Name)).to.deep.equal(['web'])
      expect(h.store.tableIndex('config')).to.equal(3)
    })

    it('config.apply with cas: 0 only creates, N only replaces ModifyIndex N; a failed cas answers false and writes nothing', async function () {
      expect(await h.ok(cmd.configApply(configWrite('web'), 0))).to.equal(true)
      const before = await dumpWithoutApplied(h.store)
      expect(await h.ok(cmd.configApply(configWrite('web', { Protocol: 'tcp' }), 0))).to.equal(false)
      expect(await h.ok(cmd.configApply(configWrite('web', { Protocol: 'tcp' }), 7))).to.equal(false)
      expect(await h.ok(cmd.configApply(configWrite('api'), 1))).to.equal(false)
      expectSameContents(await dumpWithoutApplied(h.store), before)
      expect(h.store.tableIndex('config')).to.equal(1)
      expect(await h.ok(cmd.configApply(configWrite('web', { Protocol: 'tcp' }), 1))).to.equal(true)
      expect(await h.config('web')).to.deep.include({ Protocol: 'tcp', ModifyIndex: 5 })
      // The same cas cannot win twice: the first write moved ModifyIndex on.
      expect(await h.ok(cmd.configApply(configWrite('web', { Protocol: 'grpc' }), 1))).to.equal(false)
    })

    it('config.apply refuses an entry without Kind or Name', async function () {
      await h.fails(cmd.configApply(configWrite('')), 'invalid_input')
      await h.fails(cmd.configApply(configWrite('web', { Kind: '' })), 'invalid_input')
      expect(h.store.tableIndex('config')).to.equal(0)
    })

    it('config.delete removes the entry (true even when missing); with cas only at that ModifyIndex, never with cas 0', async function () {
      await h.ok(cmd.configApply(configWrite('web')))
      await h.ok(cmd.configApply(configWrite('api')))
      expect(await h.ok(cmd.configDelete('web', 0))).to.equal(false)
      expect(await h.ok(cmd.configDelete('web', 2))).to.equal(false)
      expect(await h.config('web')).to.not.equal(undefined)
      expect(await h.ok(cmd.configDelete('web', 1))).to.equal(true)
      expect(await h.config('web')).to.equal(undefined)
      expect(h.store.tableIndex('config')).to.equal(5)
      expect(await h.ok(cmd.configDelete('api'))).to.equal(true)
      expect(await h.ok(cmd.configDelete('api'))).to.equal(true)
      expect(await listRecords(h.store.reader, configSpec)).to.deep.equal([])
      expect(h.store.tableIndex('config')).to.equal(6)
    })
  })

  describe('link.*', function () {
    it('link.set creates the link with the command’s uid and generation; a rewrite keeps the uid and raises the version', async function () {
      const created = await h.ok<CloudLink>(cmd.linkSet(linkWrite('g1'), 0))
      expect(created).to.deep.include({ uid: 'uid-g1', generation: 'g1', source: 'api', CreateIndex: 1, ModifyIndex: 1 })
      expect(await h.link()).to.deep.equal(created)
      const rewritten = await h.ok<CloudLink>(cmd.linkSet(linkWrite('g2', { clientId: 'other', source: 'config' }), 1))
      expect(rewritten).to.deep.include({ uid: 'uid-g1', generation: 'g2', source: 'config', CreateIndex: 1, ModifyIndex: 2 })
      expect(rewritten.data.clientId).to.equal('other')
      expect(h.store.tableIndex('link')).to.equal(2)
    })

    it('link.set and link.delete with a stale version are a conflict on "version" and write nothing', async function () {
      await h.fails(cmd.linkSet(linkWrite('g1'), 3), 'conflict', 'version')
      await h.ok(cmd.linkSet(linkWrite('g1')))
      await h.fails(cmd.linkSet(linkWrite('g2'), 1), 'conflict', 'version')
      await h.fails(cmd.linkDelete(1), 'conflict', 'version')
      expect(await h.link()).to.deep.include({ generation: 'g1', ModifyIndex: 2 })
    })

    it('link.status records the controller’s finding for the current generation only', async function () {
      await h.ok(cmd.linkSet(linkWrite('g1')))
      expect(await h.ok(cmd.linkStatus(linkStatus('g1', { accessLevel: 'CONSUL_ACCESS_LEVEL_GLOBAL_READ_WRITE' })))).to.equal(true)
      const link = (await h.link())!
      expect(link).to.deep.include({ ModifyIndex: 2, generation: 'g1' })
      expect(link.status).to.deep.include({ observedGeneration: 'g1', updatedAt: NOW })
      expect(link.data.accessLevel).to.equal('CONSUL_ACCESS_LEVEL_GLOBAL_READ_WRITE')
      // A slow check of an older generation never overwrites the newer link.
      await h.ok(cmd.linkSet(linkWrite('g2')))
      const before = await dumpWithoutApplied(h.store)
      expect(await h.ok(cmd.linkStatus(linkStatus('g1')))).to.equal(false)
      expectSameContents(await dumpWithoutApplied(h.store), before)
      // The new data drops what the controller learned about the old data.
      expect((await h.link())?.data.accessLevel).to.equal(undefined)
    })

    it('link.delete removes the link, idempotently; a status for a deleted link is dropped', async function () {
      await h.ok(cmd.linkSet(linkWrite('g1')))
      expect(await h.ok(cmd.linkDelete(1))).to.equal(true)
      expect(await h.link()).to.equal(undefined)
      expect(h.store.tableIndex('link')).to.equal(2)
      expect(await h.ok(cmd.linkDelete())).to.equal(true)
      expect(await h.ok(cmd.linkDelete(0))).to.equal(true)
      expect(await h.ok(cmd.linkStatus(linkStatus('g1')))).to.equal(false)
      expect(await h.link()).to.equal(undefined)
    })
  })

  describe('raft.member.*', function () {
    it('raft.member.set records a server address; the same address again writes nothing; delete is idempotent', async function () {
      const created = await h.ok<{ Node: string; Address: string; CreateIndex: number; ModifyIndex: number }>({ v: 1, type: 'raft.member.set', Node: 'n4', Address: '127.0.0.1:9004' })
      expect(created).to.deep.equal({ Node: 'n4', Address: '127.0.0.1:9004', CreateIndex: 1, ModifyIndex: 1 })
      expect(h.store.tableIndex('member')).to.equal(1)
      await h.ok({ v: 1, type: 'raft.member.set', Node: 'n4', Address: '127.0.0.1:9004' })
      expect(h.store.tableIndex('member')).to.equal(1)
      const moved = await h.ok<{ Address: string; ModifyIndex: number }>({ v: 1, type: 'raft.member.set', Node: 'n4', Address: '127.0.0.1:9005' })
      expect(moved).to.deep.include({ Address: '127.0.0.1:9005', ModifyIndex: 3 })
      expect(await h.ok({ v: 1, type: 'raft.member.delete', Node: 'n4' })).to.equal(true)
      expect(await h.ok({ v: 1, type: 'raft.member.delete', Node: 'n4' })).to.equal(true)
      expect(await listRecords(h.store.reader, memberSpec)).to.deep.equal([])
    })
  })

  describe('restore.*', function () {
    // The whole restore (staging, checks, the switch, crashes) is test/unit/state/restore.test.ts; here each command
    // once through the harness, so the coverage check below sees it.
    it('begins, stages a chunk, commits; aborts another', async function () {
      await h.ok(cmd.init())
      await h.ok(cmd.policyCreate(policyWrite(1)))
      const pairs: Array<[string, Uint8Array]> = [[recordKey('policy', policyId(2)), encode({ ...policyWrite(2), Hash: 'h', CreateIndex: 1, ModifyIndex: 1 })]]
      const { index } = await h.ok<{ index: number }>({ v: 1, type: 'restore.begin', id: 'one', chunks: 1, records: 1 })
      await h.fails(cmd.policyCreate(policyWrite(3)), 'restore_in_progress')
      await h.ok({ v: 1, type: 'restore.chunk', id: 'one', seq: 0, pairs })
      expect(await h.ok({ v: 1, type: 'restore.commit', id: 'one', chunks: 1, digest: nextDigest('', pairs) })).to.deep.equal({ index: h.index })
      expect(await h.policy(policyId(1))).to.equal(undefined)
      // Records are written at the begin; the tables' indexes are the commit's.
      expect(await h.policy(policyId(2))).to.include({ CreateIndex: 1, ModifyIndex: index })
      expect(h.store.tableIndex('policy')).to.equal(h.index)
      await h.ok({ v: 1, type: 'restore.begin', id: 'two', chunks: 1, records: 0 })
      await h.ok({ v: 1, type: 'restore.abort', id: 'two', reason: 'test' })
      await h.ok(cmd.policyCreate(policyWrite(3)))
    })
  })

  describe('every command', function () {
    it('a failed command writes nothing, raises no table index, but advances lastApplied (also across reopen)', async function () {
      await h.ok(cmd.init())
      await h.ok(cmd.policyCreate(policyWrite(1)))
      const before = await dumpWithoutApplied(h.store)
      const indexesBefore = await tableIndexes(h.store)
      const watched: string[] = []
      const unsubscribe = h.store.watches.subscribe('policy', undefined, () => watched.push('policy'))
      await h.fails(cmd.policyCreate(policyWrite(2, { Name: 'policy-1' })), 'invalid_input', 'Name')
      await h.fails(cmd.tokenCreate(tokenCreate(1, { Policies: [{ ID: policyId(1) }, { ID: policyId(9) }] })), 'invalid_input', 'Policies[1].ID')
      unsubscribe()
      expect(watched).to.deep.equal([])
      expect(h.store.lastApplied).to.equal(4)
      expectSameContents(await dumpWithoutApplied(h.store), before)
      expect(await tableIndexes(h.store)).to.deep.equal(indexesBefore)
      await h.reopen()
      expect(h.store.lastApplied).to.equal(4)
      expect(decode<number>((await h.store.db.get(APPLIED_KEY))!)).to.equal(4)
    })

    it('noop advances lastApplied and touches no table', async function () {
      await h.ok(cmd.noop())
      expect(h.store.lastApplied).to.equal(1)
      expect(Object.values(await tableIndexes(h.store))).to.deep.equal(TABLES.map(() => 0))
    })

    it('table indexes rise on creates, updates and deletes, only for the tables written, and survive reopen', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      expect(await tableIndexes(h.store)).to.include({ policy: 1, token: 0, role: 0 })
      await h.ok(cmd.tokenCreate(tokenCreate(1)))
      expect(await tableIndexes(h.store)).to.include({ policy: 1, token: 2 })
      await h.ok(cmd.policyUpdate(policyWrite(1, { Description: 'd' })))
      expect(await tableIndexes(h.store)).to.include({ policy: 3, token: 2 })
      await h.ok(cmd.tokenDelete(accessor(1)))
      expect(await tableIndexes(h.store)).to.include({ policy: 3, token: 4 })
      await h.ok(cmd.policyDelete(policyId(1)))
      const indexes = await tableIndexes(h.store)
      expect(indexes).to.include({ policy: 5, token: 4 })
      for (const table of TABLES) {
        const stored = await h.store.db.get(tableIndexKey(table))
        expect(stored === undefined ? 0 : decode<number>(stored), table).to.equal(indexes[table])
      }
      await h.reopen()
      expect(await tableIndexes(h.store)).to.deep.equal(indexes)
    })

    it('refuses to apply an index at or below lastApplied (applied once, in order)', async function () {
      await h.ok(cmd.noop())
      await h.ok(cmd.noop())
      let caught: unknown
      try {
        await h.store.apply(cmd.noop(), 2)
      } catch (error) {
        caught = error
      }
      expect(caught).to.be.instanceOf(AssertionError)
      expect(h.store.lastApplied).to.equal(2)
    })

    it('wakes the watchers of each written table and record, after the batch is visible', async function () {
      await h.ok(cmd.policyCreate(policyWrite(1)))
      const seen: string[] = []
      let readInListener: Promise<AclToken | undefined> | undefined
      h.store.watches.subscribe('token', undefined, () => {
        seen.push('token table')
        readInListener = h.token(accessor(1))
      })
      h.store.watches.subscribe('policy', [recordKey('policy', policyId(1))], () => {
        seen.push('policy-1')
      })
      h.store.watches.subscribe('role', undefined, () => seen.push('role table'))
      await h.ok(cmd.tokenCreate(tokenCreate(1)))
      expect(seen).to.deep.equal(['token table'])
      // A blocking query woken by the notification must find the new record.
      expect(await readInListener).to.include({ AccessorID: accessor(1) })
      await h.ok(cmd.policyUpdate(policyWrite(1, { Description: 'd' })))
      expect(seen).to.deep.equal(['token table', 'policy-1'])
      expect(h.store.watches.size).to.equal(1)
      await h.ok(cmd.roleCreate(roleWrite(1)))
      expect(h.store.watches.size).to.equal(0)
    })
  })

  describe('determinism', function () {
    /** A sequence that exercises every command type, including failures, deletes and the cascade. */
    function script(): Command[] {
      const login = (n: number): TokenCreate => tokenCreate(n, { AuthMethod: 'm', Local: true, ExpirationTime: '2024-05-01T13:00:00Z' })
      return [
        cmd.init(),
        cmd.ensure(tokenCreate(100, { Description: 'Initial Management Token' })),
        cmd.bootstrap(tokenCreate(101)),
        cmd.policyCreate(policyWrite(1)),
        cmd.policyCreate(policyWrite(2, { Namespace: TEAM, Rules: 'service_prefix "" { policy = "read" }', Datacenters: ['dc1', 'dc2'] })),
        cmd.policyCreate(policyWrite(3, { Name: 'policy-1' })),
        cmd.roleCreate(roleWrite(1, { Policies: [{ Name: 'policy-1' }], ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1'] }] })),
        cmd.roleCreate(roleWrite(2, { Namespace: TEAM, Policies: [{ Name: 'policy-1' }, { ID: policyId(2) }] })),
        cmd.tokenCreate(tokenCreate(1, { Policies: [{ ID: policyId(1) }], Roles: [{ Name: 'role-1' }], NodeIdentities: [{ NodeName: 'n', Datacenter: 'dc1' }] })),
        cmd.tokenCreate(
          tokenCreate(2, {
            Namespace: TEAM,
            Roles: [{ ID: roleId(2) }],
            TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateID: '00000000-0000-0000-0000-000000000003', TemplateVariables: { name: 'api' } }],
          }),
        ),
        cmd.tokenCreate(tokenCreate(3, { ExpirationTime: '2024-05-01T12:30:00Z', ServiceIdentities: [{ ServiceName: 'db' }] })),
        cmd.tokenCreate(tokenCreate(4, { Policies: [{ Name: 'missing' }] })),
        cmd.tokenClone(accessor(1), 5),
        cmd.methodCreate(authMethodWrite('m', { MaxTokenTTLMs: 3_600_000, Config: { JWTValidationPubKeys: ['k'], ClaimMappings: { sub: 'sub' } } })),
        cmd.ruleCreate(bindingRuleWrite(1, 'm', { Selector: 'value.sub == "x"', BindVars: { a: 'b' } })),
        cmd.ruleCreate(bindingRuleWrite(2, 'm', { BindType: 'role', BindName: 'role-1' })),
        cmd.ruleCreate(bindingRuleWrite(3, 'nope')),
        cmd.tokenCreate(login(6)),
        cmd.tokenCreate(login(7)),
        cmd.tokenClone(accessor(6), 8),
        cmd.login(loginWrite(11, 'm', 14, { Roles: [{ Name: 'role-1' }, { Name: 'none' }], ExpirationTime: '2024-05-01T13:00:00Z' })),
        cmd.login(loginWrite(12, 'm', 14, { Namespace: TEAM, NodeIdentities: [{ NodeName: 'n2', Datacenter: 'dc1' }] })),
        cmd.login(loginWrite(13, 'm', 1, { ServiceIdentities: [{ ServiceName: 'web' }] })),
        cmd.tokenUpdate(tokenUpdate(tokenCreate(1), { Description: 'u', Policies: [{ ID: policyId(3) }] })),
        cmd.tokenUpdate(tokenUpdate(tokenCreate(3), { Local: true })),
        cmd.policyUpdate(policyWrite(1, { Name: 'renamed', Description: 'x' })),
        cmd.roleUpdate(roleWrite(1, { Policies: [{ Name: 'renamed' }, { ID: policyId(3) }] })),
        cmd.methodUpdate(authMethodWrite('m', { Description: 'updated', MaxTokenTTLMs: 1_800_000 })),
        cmd.ruleUpdate(bindingRuleWrite(1, 'm', { BindName: 'api' })),
        cmd.tokenDeleteExpired([accessor(3), accessor(1)], '2024-05-01T12:45:00Z'),
        cmd.noop(),
        cmd.tokenDelete(accessor(5)),
        cmd.tokenDelete(ANONYMOUS_TOKEN_ID),
        cmd.ruleDelete(ruleId(2)),
        cmd.ruleCreate(bindingRuleWrite(9, 'm')),
        cmd.roleDelete(roleId(2)),
        cmd.policyDelete(policyId(2)),
        cmd.policyDelete(GLOBAL_MANAGEMENT_POLICY_ID),
        cmd.methodDelete('m'),
        cmd.tokenCreate(tokenCreate(10, { Roles: [{ ID: roleId(1) }] })),
        cmd.configApply(configWrite('web', { MeshGateway: { Mode: 'local' }, Meta: { a: 'b' } })),
        cmd.configApply(configWrite('web', { Protocol: 'grpc' }), 0),
        cmd.configApply(configWrite('api'), 0),
        cmd.configDelete('web'),
        cmd.linkSet(linkWrite('g1'), 0),
        cmd.linkStatus(linkStatus('g1', { cloudClusterUrl: 'https://example.invalid/c1' })),
        cmd.linkSet(linkWrite('g2'), 1),
        cmd.linkDelete(),
        cmd.linkSet(linkWrite('g3')),
      ]
    }

    it('the same commands on two fresh stores give byte-identical LevelDB contents', async function () {
      // One store applies the commands as the proposer holds them, the other as decoded from the log: the replica
      // does the former while running and the latter on recovery, and both must agree.
      const other = await Harness.open(dirs)
      const results: Array<[ApplyResult, ApplyResult]> = []
      const commands = script()
      for (const command of commands) {
        const decoded = decodeCommand(encodeCommand(command), other.index + 1)
        results.push([await h.apply(command), await other.apply(decoded)])
      }
      for (const [position, [a, b]] of results.entries()) expect(b, `result of command ${position + 1}`).to.deep.equal(a)
      expect(results.filter(([result]) => !result.ok).length, 'the script includes failing commands').to.be.greaterThan(3)
      expect(h.store.lastApplied).to.equal(other.store.lastApplied)
      expect(await tableIndexes(h.store)).to.deep.equal(await tableIndexes(other.store))
      const contents = await dump(h.store)
      expect(contents.length).to.be.greaterThan(30)
      expectSameContents(contents, await dump(other.store))
      expect(await indexProblems(other.store)).to.deep.equal([])
      const loginResults = results.filter((_, position) => commands[position]?.type === 'acl.login').map(([result]) => result.ok)
      expect(loginResults, 'two logins succeed, the one against an old method version fails').to.deep.equal([true, true, false])
      // The cascade ran: no login token of the deleted method is left.
      expect(await h.token(accessor(6))).to.equal(undefined)
      expect(await h.token(accessor(7))).to.equal(undefined)
      expect(await h.token(accessor(11))).to.equal(undefined)
      expect(await h.token(accessor(12))).to.equal(undefined)
    })

    it('applying the commands in batches (as the replica applies a Ready) gives the same results and the same bytes', async function () {
      // Batches of 1 to 7 commands: later commands in a batch must see what earlier ones wrote (the token links the
      // policy created just before it, the cascade finds the login tokens), and a failing one must leave the rest.
      const batched = await Harness.open(dirs)
      const commands = script()
      const singleChanges: string[][] = []
      h.store.changeListeners.add((tables, records) => singleChanges.push([...tables, ...records]))
      const single: ApplyResult[] = []
      for (const command of commands) single.push(await h.apply(command))
      const changes: string[][] = []
      batched.store.changeListeners.add((tables, records) => changes.push([...tables, ...records]))
      const results: ApplyResult[] = []
      let index = 0
      for (let start = 0, size = 1; start < commands.length; start += size, size = (size % 7) + 1) {
        const items = commands.slice(start, start + size).map((command) => ({ command, index: ++index }))
        results.push(...(await batched.store.applyBatch(items)))
      }
      expect(results).to.deep.equal(single)
      expect(batched.store.lastApplied).to.equal(h.store.lastApplied)
      expect(await tableIndexes(batched.store)).to.deep.equal(await tableIndexes(h.store))
      expectSameContents(await dump(batched.store), await dump(h.store))
      // The same change notifications, in the same order: one per command that succeeded.
      expect(changes.length).to.be.greaterThan(30)
      expect(changes).to.deep.equal(singleChanges)
    })

    it('a follower that applies the leader’s shipped writes ends with the same bytes and notifications, decoding no command', async function () {
      // The leader applies the log and keeps what each command wrote (ApplyOptions.produced); the follower is handed
      // those writes (ApplyOptions.shipped) for log entries whose bytes are not even a command, so that only the writes
      // can have made its state. Membership commands are not shipped: the follower decodes and applies those itself.
      const commands: Command[] = [...script(), { v: COMMAND_VERSION, type: 'raft.member.set', Node: 'n4', Address: '127.0.0.1:9004' }, cmd.tokenCreate(tokenCreate(40))]
      const entries = commands.map((command, n) => ({ data: encodeCommand(command), index: n + 1, term: 1, type: 'command' }))
      const follower = await Harness.open(dirs)
      const leaderChanges: string[][] = []
      const followerChanges: string[][] = []
      h.store.changeListeners.add((tables, records, index) => leaderChanges.push([String(index), ...tables, ...records]))
      follower.store.changeListeners.add((tables, records, index) => followerChanges.push([String(index), ...tables, ...records]))
      const produced = new Map<number, Shipped>()
      for (let start = 0, size = 1; start < entries.length; start += size, size = (size % 5) + 1) {
        await h.store.applyEntries(entries.slice(start, start + size), undefined, { produced: (entry, shipped) => produced.set(entry.index, shipped) })
      }
      for (const [index, shipped] of produced) expect(shipped.type, `the type shipped at ${index}`).to.equal(commands[index - 1]!.type)
      const shippedTypes = new Set(commands.filter((_, n) => produced.has(n + 1)).map((command) => command.type))
      expect(shippedTypes.has('noop') || shippedTypes.has('raft.member.set')).to.equal(false)
      expect(produced.size).to.equal(commands.filter((command) => command.type !== 'noop' && command.type !== 'raft.member.set').length)
      expect([...produced.values()].filter((shipped) => shipped.writes.length === 0).length, 'failed commands ship no writes').to.be.greaterThan(3)
      const notACommand = Uint8Array.of(0xc1)
      const followerEntries = entries.map((entry) => (produced.has(entry.index) ? { ...entry, data: notACommand } : entry))
      const decoded: string[] = []
      for (let start = 0, size = 3; start < followerEntries.length; start += size, size = (size % 4) + 2) {
        await follower.store.applyEntries(followerEntries.slice(start, start + size), (_entry, command) => decoded.push(command.type), { shipped: (entry) => produced.get(entry.index) })
      }
      expect(decoded).to.include('raft.member.set')
      expect(follower.store.lastApplied).to.equal(h.store.lastApplied)
      expect(await tableIndexes(follower.store)).to.deep.equal(await tableIndexes(h.store))
      expectSameContents(await dump(follower.store), await dump(h.store))
      expect(await indexProblems(follower.store)).to.deep.equal([])
      expect(followerChanges.length).to.be.greaterThan(30)
      expect(followerChanges).to.deep.equal(leaderChanges)
    })

    it('runs the command instead of shipped writes for a command it does not know or would not ship, or a key apply never writes', async function () {
      const command = cmd.tokenCreate(tokenCreate(1))
      const entry = { data: encodeCommand(command), index: 1, term: 1, type: 'command' }
      let shipped: Shipped | undefined
      await h.store.applyEntries([entry], undefined, { produced: (_entry, made) => (shipped = made) })
      expect(shipped?.writes.length).to.be.greaterThan(2)
      const { writes } = shipped!
      const offers: Array<[string, Shipped]> = [
        ['another command version', { ...shipped!, v: COMMAND_VERSION + 1 }],
        ['a type this build does not know', { ...shipped!, type: 'acl.token.future' }],
        ['a membership command', { ...shipped!, type: 'raft.member.set' }],
        ['the applied index', { ...shipped!, writes: [...writes, [APPLIED_KEY, encode(99)]] }],
        ['a restore in progress', { ...shipped!, writes: [...writes, ['m\u0000restore', encode({ id: 'r' })]] }],
        ['a record key without its table', { ...shipped!, writes: [...writes, ['r\u0000token', Buffer.from('x')]] }],
        ['a table this build does not have', { ...shipped!, writes: [...writes, ['r\u0000future\u0000k', Buffer.from('x')]] }],
      ]
      for (const [what, offer] of offers) {
        const follower = await Harness.open(dirs)
        const ran: string[] = []
        await follower.store.applyEntries([entry], (_entry, applied) => ran.push(applied.type), { shipped: () => offer })
        expect(ran, what).to.deep.equal(['acl.token.create'])
        expectSameContents(await dump(follower.store), await dump(h.store))
      }
      const follower = await Harness.open(dirs)
      const ran: string[] = []
      await follower.store.applyEntries([entry], (_entry, applied) => ran.push(applied.type), { shipped: () => shipped })
      expect(ran, 'the writes as shipped are applied instead').to.deep.equal(['noop'])
      expectSameContents(await dump(follower.store), await dump(h.store))
    })

    it('a batch must continue the applied index without a gap', async function () {
      await h.apply(cmd.init())
      let failure: unknown
      await h.store.applyBatch([{ command: cmd.noop(), index: 3 }]).catch((error: unknown) => (failure = error))
      expect(failure).to.be.instanceOf(AssertionError)
      expect(h.store.lastApplied).to.equal(1)
    })
  })

  describe('coverage', function () {
    it('every command type of the Command union was applied by a test above', function () {
      expect([...exercised].sort()).to.deep.equal(Object.keys(ALL_COMMAND_TYPES).sort())
    })
  })
})
