/**
 * validateCommand and checkCommand (src/state/validate.ts): the shape a command must have for apply to apply it
 * without throwing. A leader checks every forwarded command with it before proposing, and every replica checks each
 * entry again when applying it.
 *
 * Method: one well-formed example of every command type, as the HTTP layer, the agent and the controllers build them,
 * is accepted as built and after a MessagePack round trip. Then every field of every example is broken in each way a
 * peer could break it, generated from the example itself so a new field cannot be forgotten: removed (unless optional),
 * replaced by a value of another type, and joined by a field no command has. Each must be refused as malformed, naming
 * the field by its path (`token.Policies[0].ID`). Then the rules that are not about types: empty IDs, NUL in key parts,
 * times, enumerations, list lengths, the values config entries may hold, versions and types this build does not know,
 * and bytes that are no MessagePack at all.
 */
import { expect } from 'chai'
import { encode } from '../../../src/state/codec.js'
import { COMMAND_VERSION, type Command, type CommandType } from '../../../src/state/commands.js'
import { checkCommand, EXPIRED_IDS_MAX, LIST_ITEMS_MAX, validateCommand, VALUE_DEPTH_MAX, type CommandCheck } from '../../../src/state/validate.js'
import { buildTokenCreate } from '../../support/state.js'

const NOW = '2026-01-01T00:00:00Z'
const ID = (n: number): string => `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`

const token = buildTokenCreate({
  AccessorID: ID(1),
  SecretID: ID(2),
  CreateTime: NOW,
  Description: 'a token',
  Policies: [{ ID: ID(3) }, { Name: 'readers' }],
  Roles: [{ Name: 'ops' }],
  TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateID: '00000000-0000-0000-0000-000000000003', TemplateVariables: { name: 'api' } }],
  ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1'] }],
  NodeIdentities: [{ NodeName: 'node-1', Datacenter: 'dc1' }],
  ExpirationTime: '2026-01-02T00:00:00.000Z',
})
const linked = { Policies: token.Policies, TemplatedPolicies: token.TemplatedPolicies, ServiceIdentities: token.ServiceIdentities, NodeIdentities: token.NodeIdentities }
const { AccessorID, SecretID, Description, Local, Namespace } = token
const { Roles } = token
const method = {
  Name: 'jwt-1',
  Type: 'jwt',
  DisplayName: '',
  Description: '',
  MaxTokenTTLMs: 60_000,
  TokenLocality: 'global',
  Config: { JWTValidationPubKeys: ['k'], ClaimMappings: { sub: 'user' }, Leeway: 1.5, Enabled: true, Nothing: null },
  NamespaceRules: [{ Selector: 'value.ns != ""', BindNamespace: 'team' }],
  Namespace: 'default',
}
const rule = { ID: ID(5), Description: '', AuthMethod: 'jwt-1', Selector: '', BindType: 'role', BindName: 'ops', BindVars: { name: 'x' }, Namespace: 'default' }
const policy = { ID: ID(4), Name: 'readers', Description: '', Rules: 'acl = "read"', Datacenters: ['dc1'], Namespace: 'default' }
const role = { ID: ID(6), Name: 'ops', Description: '', ...linked, Namespace: 'default' }
const entry = { Kind: 'service-defaults', Name: 'web', Namespace: 'default', Protocol: 'http', Meta: { a: 'b' }, Expose: { Paths: [{ Path: '/x', LocalPathPort: 8080 }] } }
const link = { resourceId: 'organization/o/project/p/service.global-network-manager.cluster/c', clientId: 'id', clientSecret: 'secret', uid: ID(7), generation: '01JB', source: 'api' }
const status = { generation: '01JB', conditions: [{ message: 'ok', reason: 'SUCCESS', state: 'STATE_TRUE', type: 'linked' }], updatedAt: NOW, accessLevel: 'GLOBAL_READ_WRITE', cloudClusterUrl: 'https://x' }

/** One well-formed command of every type; a Record over CommandType fails to compile when the union grows. */
const EXAMPLES: Record<CommandType, Command> = {
  'acl.init': { v: 1, type: 'acl.init', bootstrapToken: token },
  'acl.bootstrap': { v: 1, type: 'acl.bootstrap', token },
  'acl.token.ensure': { v: 1, type: 'acl.token.ensure', token },
  'acl.token.create': { v: 1, type: 'acl.token.create', token },
  'acl.token.update': { v: 1, type: 'acl.token.update', token: { AccessorID, SecretID, AuthMethod: 'jwt-1', ExpirationTime: NOW, Description, ...linked, Roles, Local, Namespace } },
  'acl.token.clone': { v: 1, type: 'acl.token.clone', sourceAccessorID: ID(8), token: { AccessorID, SecretID, Description, CreateTime: NOW, Namespace } },
  'acl.token.delete': { v: 1, type: 'acl.token.delete', AccessorID },
  'acl.login': { v: 1, type: 'acl.login', login: { token: { ...token, AuthMethod: 'jwt-1' }, authMethodNamespace: 'default', authMethodModifyIndex: 12 } },
  'acl.token.delete-expired': { v: 1, type: 'acl.token.delete-expired', AccessorIDs: [ID(1), ID(2)], now: NOW },
  'acl.policy.create': { v: 1, type: 'acl.policy.create', policy },
  'acl.policy.update': { v: 1, type: 'acl.policy.update', policy },
  'acl.policy.delete': { v: 1, type: 'acl.policy.delete', ID: ID(4) },
  'acl.role.create': { v: 1, type: 'acl.role.create', role },
  'acl.role.update': { v: 1, type: 'acl.role.update', role },
  'acl.role.delete': { v: 1, type: 'acl.role.delete', ID: ID(6) },
  'acl.auth-method.create': { v: 1, type: 'acl.auth-method.create', method },
  'acl.auth-method.update': { v: 1, type: 'acl.auth-method.update', method },
  'acl.auth-method.delete': { v: 1, type: 'acl.auth-method.delete', Namespace: 'default', Name: 'jwt-1' },
  'acl.binding-rule.create': { v: 1, type: 'acl.binding-rule.create', rule: rule as Extract<Command, { type: 'acl.binding-rule.create' }>['rule'] },
  'acl.binding-rule.update': { v: 1, type: 'acl.binding-rule.update', rule: rule as Extract<Command, { type: 'acl.binding-rule.update' }>['rule'] },
  'acl.binding-rule.delete': { v: 1, type: 'acl.binding-rule.delete', ID: ID(5) },
  'config.apply': { v: 1, type: 'config.apply', entry, cas: 0 },
  'config.delete': { v: 1, type: 'config.delete', Kind: 'service-defaults', Namespace: 'default', Name: 'web', cas: 3 },
  'link.set': { v: 1, type: 'link.set', link: link as Extract<Command, { type: 'link.set' }>['link'], version: 2 },
  'link.delete': { v: 1, type: 'link.delete', version: 2 },
  'link.status': { v: 1, type: 'link.status', status },
  'raft.member.set': { v: 1, type: 'raft.member.set', Node: 'n2', Address: '10.0.0.2:8300', Incarnation: 'abc' },
  'raft.member.delete': { v: 1, type: 'raft.member.delete', Node: 'n2' },
  'acl.replicate': { v: 1, type: 'acl.replicate', stream: 'policies', upserts: [policy], deletes: [ID(9)], remoteIndex: 12, now: NOW },
  'restore.begin': { v: 1, type: 'restore.begin', id: 'r1', chunks: 1, records: 1 },
  'restore.chunk': { v: 1, type: 'restore.chunk', id: 'r1', seq: 0, pairs: [['r\u0000policy\u0000x', Buffer.from([0x80])]] },
  'restore.commit': { v: 1, type: 'restore.commit', id: 'r1', chunks: 1, digest: 'abc' },
  'restore.abort': { v: 1, type: 'restore.abort', id: 'r1', reason: 'test' },
  noop: { v: 1, type: 'noop' },
}

/** Fields a command may leave out, by path, `[]` standing for any position in a list. */
const OPTIONAL = new Set([
  'bootstrapToken',
  'token.ExpirationTime',
  'login.token.ExpirationTime',
  'bootstrapToken.ExpirationTime',
  'token.SecretID@acl.token.update',
  'token.AuthMethod@acl.token.update',
  'token.ExpirationTime@acl.token.update',
  'token.Policies[].ID',
  'token.Policies[].Name',
  'token.Roles[].ID',
  'token.Roles[].Name',
  'login.token.Policies[].ID',
  'login.token.Policies[].Name',
  'login.token.Roles[].ID',
  'login.token.Roles[].Name',
  'bootstrapToken.Policies[].ID',
  'bootstrapToken.Policies[].Name',
  'bootstrapToken.Roles[].ID',
  'bootstrapToken.Roles[].Name',
  'role.Policies[].ID',
  'role.Policies[].Name',
  'token.TemplatedPolicies[].TemplateVariables',
  'token.TemplatedPolicies[].TemplateVariables.name',
  'login.token.TemplatedPolicies[].TemplateVariables',
  'login.token.TemplatedPolicies[].TemplateVariables.name',
  'bootstrapToken.TemplatedPolicies[].TemplateVariables',
  'bootstrapToken.TemplatedPolicies[].TemplateVariables.name',
  'role.TemplatedPolicies[].TemplateVariables',
  'role.TemplatedPolicies[].TemplateVariables.name',
  'token.ServiceIdentities[].Datacenters',
  'login.token.ServiceIdentities[].Datacenters',
  'bootstrapToken.ServiceIdentities[].Datacenters',
  'role.ServiceIdentities[].Datacenters',
  'rule.BindVars',
  'cas',
  'version',
  'status.accessLevel',
  'status.cloudClusterUrl',
  'Incarnation',
])

/** Maps whose fields are the client's own (any JSON-like value, any name): only their own rules apply. */
const FREE = (path: string): boolean => (path.startsWith('entry.') && !['entry.Kind', 'entry.Name', 'entry.Namespace'].includes(path)) || path.startsWith('method.Config.') || path.startsWith('rule.BindVars.')

type Path = Array<string | number>

function pathText(path: Path): string {
  let text = ''
  for (const part of path) text += typeof part === 'number' ? `[${part}]` : text === '' ? part : `.${part}`
  return text
}

/** Every field of `value` below the top, with its path (lists' entries too). */
function* leaves(value: unknown, path: Path = []): Generator<{ path: Path; value: unknown }> {
  if (Array.isArray(value)) {
    for (const [position, item] of value.entries()) {
      yield { path: [...path, position], value: item }
      yield* leaves(item, [...path, position])
    }
  } else if (typeof value === 'object' && value !== null && !(value instanceof Uint8Array)) {
    // Bytes (a restore chunk's values) are one value, not a map of their octets.
    for (const [name, item] of Object.entries(value)) {
      if (path.length === 0 && (name === 'v' || name === 'type')) continue
      yield { path: [...path, name], value: item }
      yield* leaves(item, [...path, name])
    }
  }
}

/** A deep copy of `command` with `change` done to the map or list holding the last part of `path`. */
function changed(command: Command, path: Path, change: (holder: Record<string | number, unknown>, key: string | number) => void): unknown {
  const copy = structuredClone(command) as unknown as Record<string | number, unknown>
  let holder = copy
  for (const part of path.slice(0, -1)) holder = holder[part] as Record<string | number, unknown>
  change(holder, path.at(-1)!)
  return copy
}

/** A value of another type than `value`. */
function otherType(value: unknown): unknown {
  if (typeof value === 'string') return 5
  if (typeof value === 'number') return 'five'
  if (typeof value === 'boolean') return 'yes'
  if (Array.isArray(value)) return 'a list'
  return ['a map']
}

function expectMalformed(check: CommandCheck, field: string, rule?: RegExp): void {
  expect(check.ok, `${field}: accepted`).to.equal(false)
  const refusal = check as Extract<CommandCheck, { ok: false }>
  expect(refusal.problem, refusal.message).to.equal('malformed')
  expect(refusal.field, refusal.message).to.equal(field)
  expect(refusal.message.startsWith(`${field}: `), refusal.message).to.equal(true)
  if (rule !== undefined) expect(refusal.message).to.match(rule)
}

function expectAccepted(value: unknown, what: string): void {
  const check = checkCommand(value)
  expect(check.ok, `${what}: ${check.ok ? '' : check.message}`).to.equal(true)
}

const wire = (value: unknown): CommandCheck => validateCommand(encode(value))

describe('state/validate: the shape of every command', () => {
  describe('accepts', () => {
    for (const [type, command] of Object.entries(EXAMPLES)) {
      it(`a well-formed ${type}, as built and as decoded from the log`, () => {
        expectAccepted(command, type)
        const decoded = wire(command)
        expect(decoded.ok, decoded.ok ? '' : decoded.message).to.equal(true)
        expect((decoded as { command: Command }).command).to.deep.equal(command)
      })
    }

    it('optional fields left out, or set to undefined (MessagePack keeps the key with no value)', () => {
      for (const [type, command] of Object.entries(EXAMPLES)) {
        for (const { path } of leaves(command)) {
          const general = pathText(path).replace(/\[\d+\]/g, '[]')
          if (!OPTIONAL.has(general) && !OPTIONAL.has(`${general}@${type}`)) continue
          expectAccepted(changed(command, path, (holder, key) => delete holder[key]), `${type} without ${pathText(path)}`)
          expect(wire(changed(command, path, (holder, key) => (holder[key] = undefined))).ok, `${type} with ${pathText(path)} undefined`).to.equal(true)
        }
      }
    })

    it('the commands the server builds itself: a bare token, Raft member changes, empty lists', () => {
      expectAccepted({ v: 1, type: 'acl.init' }, 'acl.init without a token')
      expectAccepted({ v: 1, type: 'acl.token.create', token: buildTokenCreate({ AccessorID: ID(1), SecretID: 'any string an operator chose', CreateTime: NOW }) }, 'bare token')
      expectAccepted({ v: 1, type: 'acl.token.delete-expired', AccessorIDs: [], now: '2026-01-01T00:00:00.123Z' }, 'nothing to reap')
      expectAccepted({ v: 1, type: 'link.delete' }, 'unconditional link delete')
      expectAccepted({ v: 1, type: 'config.delete', Kind: 'service-defaults', Namespace: 'default', Name: '' }, 'delete of an empty name (apply finds nothing)')
    })
  })

  describe('refuses, naming the field', () => {
    for (const [type, command] of Object.entries(EXAMPLES)) {
      it(`${type}: each field missing, of another type, or joined by an unknown one`, () => {
        let checked = 0
        for (const { path, value } of leaves(command)) {
          const field = pathText(path)
          const general = field.replace(/\[\d+\]/g, '[]')
          if (FREE(field)) continue
          if (typeof path.at(-1) !== 'number' && !OPTIONAL.has(general) && !OPTIONAL.has(`${general}@${type}`)) {
            expectMalformed(checkCommand(changed(command, path, (holder, key) => delete holder[key])), field, /is required/)
            expectMalformed(wire(changed(command, path, (holder, key) => (holder[key] = undefined))), field, /is required/)
          }
          expectMalformed(checkCommand(changed(command, path, (holder, key) => (holder[key] = otherType(value)))), field, /must be/)
          // nil is no value of any typed field (only config entries and auth-method Config hold nils).
          expectMalformed(wire(changed(command, path, (holder, key) => (holder[key] = null))), field, /must be/)
          if (typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array) && !FREE(`${field}.x`)) {
            expectMalformed(checkCommand(changed(command, [...path, 'Extra'], (holder, key) => (holder[key] = 'x'))), `${field}.Extra`, /is not a field of this command/)
          }
          checked++
        }
        expectMalformed(checkCommand({ ...command, Extra: 1 }), 'Extra', /is not a field of this command/)
        expect(checked, 'fields broken').to.equal([...leaves(command)].filter(({ path }) => !FREE(pathText(path))).length)
      })
    }

    it('empty record IDs, names and namespaces', () => {
      for (const [command, field] of [
        [{ v: 1, type: 'acl.token.create', token: { ...token, AccessorID: '' } }, 'token.AccessorID'],
        [{ v: 1, type: 'acl.token.create', token: { ...token, SecretID: '' } }, 'token.SecretID'],
        [{ v: 1, type: 'acl.token.create', token: { ...token, Namespace: '' } }, 'token.Namespace'],
        [{ v: 1, type: 'acl.policy.create', policy: { ...policy, Name: '' } }, 'policy.Name'],
        [{ v: 1, type: 'acl.role.update', role: { ...role, ID: '' } }, 'role.ID'],
        [{ v: 1, type: 'acl.auth-method.create', method: { ...method, Type: '' } }, 'method.Type'],
        [{ v: 1, type: 'acl.binding-rule.create', rule: { ...rule, AuthMethod: '' } }, 'rule.AuthMethod'],
        [{ v: 1, type: 'config.apply', entry: { ...entry, Kind: '' } }, 'entry.Kind'],
        [{ v: 1, type: 'raft.member.set', Node: '', Address: 'x:1' }, 'Node'],
        [{ v: 1, type: 'acl.token.create', token: { ...token, ServiceIdentities: [{ ServiceName: '' }] } }, 'token.ServiceIdentities[0].ServiceName'],
      ] as const) {
        expectMalformed(checkCommand(command), field, /must not be empty/)
      }
    })

    it('NUL, the key separator, in any string that becomes part of a LevelDB key', () => {
      for (const [command, field] of [
        [{ v: 1, type: 'acl.token.create', token: { ...token, AccessorID: 'a\u0000b' } }, 'token.AccessorID'],
        [{ v: 1, type: 'acl.token.create', token: { ...token, Policies: [{ ID: 'x\u0000' }] } }, 'token.Policies[0].ID'],
        [{ v: 1, type: 'acl.token.create', token: { ...token, Roles: [{ Name: '\u0000' }] } }, 'token.Roles[0].Name'],
        [{ v: 1, type: 'acl.token.delete', AccessorID: '\u0000' }, 'AccessorID'],
        [{ v: 1, type: 'acl.policy.create', policy: { ...policy, Namespace: 'ns\u0000x' } }, 'policy.Namespace'],
        [{ v: 1, type: 'config.delete', Kind: 'k', Namespace: 'default', Name: 'a\u0000' }, 'Name'],
        [{ v: 1, type: 'acl.token.delete-expired', AccessorIDs: ['a', 'b\u0000'], now: NOW }, 'AccessorIDs[1]'],
      ] as const) {
        expectMalformed(checkCommand(command), field, /NUL/)
      }
      // A secret is hashed, never a key: any string will do.
      expectAccepted({ v: 1, type: 'acl.token.create', token: { ...token, SecretID: 'a\u0000b' } }, 'secret with NUL')
    })

    it('times that are not RFC 3339', () => {
      for (const [command, field] of [
        [{ v: 1, type: 'acl.token.create', token: { ...token, CreateTime: 'yesterday' } }, 'token.CreateTime'],
        [{ v: 1, type: 'acl.token.create', token: { ...token, ExpirationTime: '2026-02-30T00:00:00Z' } }, 'token.ExpirationTime'],
        [{ v: 1, type: 'acl.token.delete-expired', AccessorIDs: [], now: '1700000000' }, 'now'],
      ] as const) {
        expectMalformed(checkCommand(command), field, /RFC 3339/)
      }
    })

    it('values outside an enumeration, and counts that are not non-negative integers', () => {
      expectMalformed(checkCommand({ v: 1, type: 'acl.binding-rule.create', rule: { ...rule, BindType: 'policy' } }), 'rule.BindType', /must be one of/)
      expectMalformed(checkCommand({ v: 1, type: 'link.set', link: { ...link, source: 'cli' } }), 'link.source', /must be one of/)
      expectMalformed(checkCommand({ v: 1, type: 'acl.auth-method.create', method: { ...method, TokenLocality: 'everywhere' } }), 'method.TokenLocality', /must be one of/)
      for (const bad of [-1, 1.5, Number.NaN, 2 ** 60]) {
        expectMalformed(checkCommand({ v: 1, type: 'config.delete', Kind: 'k', Namespace: 'default', Name: 'n', cas: bad }), 'cas', /non-negative integer/)
      }
      for (const bad of [-1, Number.POSITIVE_INFINITY, Number.NaN]) {
        expectMalformed(checkCommand({ v: 1, type: 'acl.auth-method.create', method: { ...method, MaxTokenTTLMs: bad } }), 'method.MaxTokenTTLMs', /non-negative number/)
      }
      // A 64-bit integer beyond 2^53 decodes as a BigInt, not a number.
      expectMalformed(checkCommand({ v: 1, type: 'link.delete', version: 2n ** 64n - 1n }), 'version', /non-negative integer, not the integer/)
    })

    it('lists longer than their bound', () => {
      const many = (count: number) => Array.from({ length: count }, () => ({ ID: ID(3) }))
      expectAccepted({ v: 1, type: 'acl.token.create', token: { ...token, Policies: many(LIST_ITEMS_MAX) } }, 'links at the bound')
      expectMalformed(checkCommand({ v: 1, type: 'acl.token.create', token: { ...token, Policies: many(LIST_ITEMS_MAX + 1) } }), 'token.Policies', /at most 1024/)
      expectMalformed(
        checkCommand({ v: 1, type: 'acl.token.delete-expired', AccessorIDs: Array.from({ length: EXPIRED_IDS_MAX + 1 }, (_, n) => ID(n)), now: NOW }),
        'AccessorIDs',
        /at most/,
      )
    })

    it('config-entry and auth-method Config values JSON could not hold, or nested too deep', () => {
      const deep = (depth: number): unknown => (depth === 0 ? 'x' : { a: deep(depth - 1) })
      expectAccepted({ v: 1, type: 'config.apply', entry: { ...entry, Deep: deep(VALUE_DEPTH_MAX - 1) } }, 'nesting at the bound')
      expectMalformed(checkCommand({ v: 1, type: 'config.apply', entry: { ...entry, Deep: deep(VALUE_DEPTH_MAX) } }), `entry.Deep${'.a'.repeat(VALUE_DEPTH_MAX - 1)}`, /deeper than/)
      for (const [value, rule] of [
        [Number.NaN, /finite number/],
        [Number.POSITIVE_INFINITY, /finite number/],
        [new Date(0), /not a Date/],
        [Buffer.from('x'), /not a Buffer/],
        [10n, /not the integer 10/],
      ] as const) {
        expectMalformed(checkCommand({ v: 1, type: 'config.apply', entry: { ...entry, Meta: { x: [value] } } }), 'entry.Meta.x[0]', rule)
        expectMalformed(checkCommand({ v: 1, type: 'acl.auth-method.create', method: { ...method, Config: { Leeway: value } } }), 'method.Config.Leeway', rule)
      }
      // A map built from JSON may carry `__proto__` as its own key.
      expectMalformed(checkCommand({ v: 1, type: 'config.apply', entry: { ...entry, Meta: JSON.parse('{"__proto__": {"x": 1}}') as unknown } }), 'entry.Meta.__proto__', /not allowed/)
      // Decoded from the wire, msgpackr renames it: the entry holds a harmless `__proto_`.
      expect(wire({ v: 1, type: 'config.apply', entry: { ...entry, Meta: JSON.parse('{"__proto__": {"x": 1}}') as unknown } }).ok).to.equal(true)
    })

    it('an unknown field name is quoted cut short', () => {
      const check = checkCommand({ v: 1, type: 'noop', ['x'.repeat(100_000)]: 1 })
      expect(check.ok).to.equal(false)
      expect((check as { message: string }).message.length).to.be.below(400)
    })
  })

  describe('versions and types this build does not know, and bytes that are no command', () => {
    it('a newer version, or a type this build does not know, is unknown (the node that meets it in its log needs an upgrade)', () => {
      for (const [value, field] of [
        [{ v: COMMAND_VERSION + 1, type: 'acl.token.create', token: {} }, 'v'],
        [{ v: 7 }, 'v'],
        [{ v: COMMAND_VERSION, type: 'acl.token.mint' }, 'type'],
        [{ v: COMMAND_VERSION, type: 'constructor' }, 'type'],
        [{ v: COMMAND_VERSION, type: '__proto__' }, 'type'],
      ] as const) {
        const check = wire(value)
        expect(check.ok).to.equal(false)
        expect(check).to.deep.include({ problem: 'unknown', field })
      }
    })

    it('no version, a version that is not a positive integer, or a type that is not a string is malformed', () => {
      for (const [value, field] of [
        [{ type: 'noop' }, 'v'],
        [{ v: '1', type: 'noop' }, 'v'],
        [{ v: 0, type: 'noop' }, 'v'],
        [{ v: 1.5, type: 'noop' }, 'v'],
        [{ v: 1 }, 'type'],
        [{ v: 1, type: 3 }, 'type'],
      ] as const) {
        expectMalformed(wire(value), field)
      }
    })

    it('bytes that are not MessagePack, or a MessagePack value that is not a map', () => {
      for (const [bytes, rule] of [
        [Buffer.alloc(0), /is not MessagePack/],
        [Buffer.from([0x81, 0xa1]), /is not MessagePack/],
        [Buffer.from([0xd4, 0x05, 0x00]), /is not MessagePack/],
        [Buffer.concat([encode({ v: 1, type: 'noop' }), Buffer.from([0x01])]), /is not MessagePack/],
        [Buffer.concat([Buffer.alloc(100_000, 0x91), Buffer.from([0x01])]), /is not MessagePack/],
        [encode(null), /must be a map, not nil/],
        [encode([1, 2]), /must be a map, not a list/],
        [encode('acl.token.create'), /must be a map/],
        [Buffer.from([0xc1]), /must be a map/],
        [encode(new Date(0)), /must be a map, not a Date/],
      ] as const) {
        expectMalformed(validateCommand(bytes), 'command', rule)
      }
    })

    it('never throws, whatever the bytes', () => {
      const TYPES = Object.keys(EXAMPLES)
      let seed = 0x2545f491
      const next = (): number => (seed = (seed * 1103515245 + 12345) >>> 0)
      for (let round = 0; round < 5_000; round++) {
        const bytes = Buffer.from(Array.from({ length: 1 + (next() % 64) }, () => next() & 0xff))
        // Half the rounds start like a command, so the checkers see maps of every kind.
        if (round % 2 === 0) bytes.set(encode({ v: 1, type: TYPES[next() % TYPES.length] }).subarray(0, Math.min(bytes.length, 8)))
        expect(() => validateCommand(bytes)).to.not.throw()
      }
    })
  })
})
