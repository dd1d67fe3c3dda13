/**
 * The shape of every command: what a command must be for `applyCommand` to apply it without throwing, and without
 * writing a record that readers cannot read. Checked on the leader before a command enters the log (a follower's
 * forwarded bytes, and this node's own commands), and again on every replica when an entry is applied, for entries a
 * leader wrote without checking them (an older build).
 *
 * What is checked, field by field, for the fields apply reads: the type (strings, booleans, non-negative integers,
 * RFC 3339 times, maps, lists), the fields that must be there, that no other field is, list lengths, enumerations,
 * and that strings that become parts of LevelDB keys (IDs, names, namespaces) hold no NUL, the keys' separator.
 * Config entries and auth-method Config keep whatever JSON-like values they were given (strings, finite numbers,
 * booleans, nil, lists, maps), nested at most VALUE_DEPTH_MAX deep. What depends on the state (does the linked policy
 * exist, is the name taken) is apply's to decide, and what HTTP decides from the contract (UUID forms, name rules) is
 * not repeated here: those are refusals for clients, these are the conditions of applying at all.
 *
 * The rules are part of the command format, like the meaning of each field: every replica applies an entry these
 * rules refuse as a no-op, so two builds with different rules for one command version would disagree on an entry
 * between them. Adding a field to a command, or tightening a rule, needs a new COMMAND_VERSION; adding a command type
 * does not (a build that does not know the type stops on it, as it does on a newer version: UnknownCommandError).
 *
 * Failures are values, never exceptions, so one malformed command costs no more than a well-formed one and a caller
 * cannot forget to catch. The checkers below throw `Malformed` to leave deep recursion at once; `checkCommand` is the
 * only place that catches it.
 */
import { parseTime } from '../lib/ids.js'
import { decode } from './codec.js'
import { COMMAND_VERSION, type Command, type CommandType } from './commands.js'
import { configDeleteAddress } from './replication.js'
import { RESTORE_CHUNK_PAIRS_MAX } from './restore.js'

/** A command that can be applied, or why not: `unknown` for a version or type this build does not know. */
export type CommandCheck =
  | { ok: true; command: Command }
  | { ok: false; problem: 'malformed' | 'unknown'; field: string; message: string }

/** Entries of a list: links, identities, datacenters (the HTTP schemas' maxItems), conditions, namespace rules. */
export const LIST_ITEMS_MAX = 1024
/** AccessorIDs of one `acl.token.delete-expired`: four times the reaper's batch (4,096). */
export const EXPIRED_IDS_MAX = 16_384
/** Nesting of config-entry values and auth-method Config (HTTP allows 32 levels for a config entry). */
export const VALUE_DEPTH_MAX = 64

/** Decodes `bytes` (MessagePack) and checks the command they hold; never throws. */
export function validateCommand(bytes: Uint8Array): CommandCheck {
  let value: unknown
  try {
    value = decode<unknown>(bytes)
  } catch (error) {
    // msgpackr's errors (a truncated map, an unknown extension, nesting deeper than the stack): the bytes are not a
    // command whatever their content, on every replica alike.
    return malformed('command', `is not MessagePack (${error instanceof Error ? error.message : String(error)})`)
  }
  return checkCommand(value)
}

/** Checks a decoded command (or one built in this process, before it is encoded); never throws. */
/** Whether this build applies commands of version `v` and type `type` (the check checkCommand makes first). */
export function isKnownCommand(v: unknown, type: unknown): boolean {
  return v === COMMAND_VERSION && typeof type === 'string' && Object.hasOwn(CHECKERS, type)
}

export function checkCommand(value: unknown): CommandCheck {
  try {
    if (!isPlainMap(value)) return malformed('command', `must be a map, not ${describe(value)}`)
    const { v, type } = value as { v?: unknown; type?: unknown }
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) return malformed('v', `must be a command version (a positive integer), not ${describe(v)}`)
    if (v !== COMMAND_VERSION) return unknown('v', `is ${v}: this warden applies commands of version ${COMMAND_VERSION}`)
    if (typeof type !== 'string') return malformed('type', `must be a string, not ${describe(type)}`)
    if (!Object.hasOwn(CHECKERS, type)) return unknown('type', `${JSON.stringify(cut(type))} is not a command type this warden knows (command version ${COMMAND_VERSION})`)
    CHECKERS[type as CommandType](value as Fields)
    return { ok: true, command: value as Command }
  } catch (error) {
    if (error instanceof Malformed) return malformed(error.field, error.rule)
    // A checker that throws anything else is a bug in this file; the command is refused rather than applied.
    return malformed('command', `could not be checked (${error instanceof Error ? error.message : String(error)})`)
  }
}

function malformed(field: string, rule: string): CommandCheck {
  const named = cut(field)
  return { ok: false, problem: 'malformed', field: named, message: `${named}: ${rule}` }
}

function unknown(field: string, rule: string): CommandCheck {
  return { ok: false, problem: 'unknown', field, message: `${field}: ${rule}` }
}

/** Field names come from the command (an unknown field is named as sent): a message quotes at most this much of one. */
const FIELD_CHARS_MAX = 256

function cut(field: string): string {
  return field.length <= FIELD_CHARS_MAX ? field : `${field.slice(0, FIELD_CHARS_MAX)}…`
}

// ---------------------------------------------------------------------------------------------------------------
// One checker per command type. Each is handed the command, a map, and throws Malformed at the first problem.

type Fields = Record<string, unknown>

const CHECKERS: { [T in CommandType]: (command: Fields) => void } = {
  'acl.init': (command) => {
    fields(command, '', INIT)
    if (present(command.bootstrapToken)) tokenCreate(command.bootstrapToken, 'bootstrapToken')
  },
  'acl.bootstrap': (command) => tokenCommand(command),
  'acl.token.ensure': (command) => tokenCommand(command),
  'acl.token.create': (command) => tokenCommand(command),
  'acl.token.update': (command) => {
    fields(command, '', TOKEN_COMMAND)
    tokenUpdate(required(command, 'token', ''), 'token')
  },
  'acl.token.clone': (command) => {
    fields(command, '', CLONE)
    keyPart(command, 'sourceAccessorID', '', 'any')
    const token = fields(required(command, 'token', ''), 'token', CLONE_TOKEN)
    keyPart(token, 'AccessorID', 'token')
    nonEmptyString(token, 'SecretID', 'token')
    string(token, 'Description', 'token')
    time(token, 'CreateTime', 'token')
    keyPart(token, 'Namespace', 'token')
  },
  'acl.token.delete': (command) => {
    fields(command, '', ACCESSOR_ID)
    keyPart(command, 'AccessorID', '', 'any')
  },
  'acl.login': (command) => {
    fields(command, '', LOGIN_COMMAND)
    const login = fields(required(command, 'login', ''), 'login', LOGIN)
    tokenCreate(required(login, 'token', 'login'), 'login.token')
    keyPart(login, 'authMethodNamespace', 'login')
    count(login, 'authMethodModifyIndex', 'login')
  },
  'acl.token.delete-expired': (command) => {
    fields(command, '', DELETE_EXPIRED)
    list(command, 'AccessorIDs', '', EXPIRED_IDS_MAX, (item, at) => keyValue(item, at, 'any'))
    time(command, 'now', '')
  },
  'acl.policy.create': (command) => policyCommand(command),
  'acl.policy.update': (command) => policyCommand(command),
  'acl.policy.delete': (command) => idCommand(command),
  'acl.role.create': (command) => roleCommand(command),
  'acl.role.update': (command) => roleCommand(command),
  'acl.role.delete': (command) => idCommand(command),
  'acl.auth-method.create': (command) => authMethodCommand(command),
  'acl.auth-method.update': (command) => authMethodCommand(command),
  'acl.auth-method.delete': (command) => {
    fields(command, '', NAMESPACE_NAME)
    keyPart(command, 'Namespace', '', 'any')
    keyPart(command, 'Name', '', 'any')
  },
  'acl.binding-rule.create': (command) => bindingRuleCommand(command),
  'acl.binding-rule.update': (command) => bindingRuleCommand(command),
  'acl.binding-rule.delete': (command) => idCommand(command),
  'config.apply': (command) => {
    fields(command, '', CONFIG_APPLY)
    configEntry(required(command, 'entry', ''), 'entry')
    optionalCount(command, 'cas', '')
  },
  'config.delete': (command) => {
    fields(command, '', CONFIG_DELETE)
    keyPart(command, 'Kind', '', 'any')
    keyPart(command, 'Namespace', '', 'any')
    keyPart(command, 'Name', '', 'any')
    optionalCount(command, 'cas', '')
  },
  'link.set': (command) => {
    fields(command, '', LINK_SET)
    const link = fields(required(command, 'link', ''), 'link', LINK)
    for (const name of ['resourceId', 'clientId', 'clientSecret', 'uid', 'generation']) string(link, name, 'link')
    oneOf(link, 'source', 'link', LINK_SOURCES)
    optionalCount(command, 'version', '')
  },
  'link.delete': (command) => {
    fields(command, '', VERSION)
    optionalCount(command, 'version', '')
  },
  'link.status': (command) => {
    fields(command, '', LINK_STATUS_COMMAND)
    const status = fields(required(command, 'status', ''), 'status', LINK_STATUS)
    string(status, 'generation', 'status')
    list(status, 'conditions', 'status', LIST_ITEMS_MAX, (item, at) => {
      const condition = fields(item, at, CONDITION)
      for (const name of CONDITION) string(condition, name, at)
    })
    string(status, 'updatedAt', 'status')
    optionalString(status, 'accessLevel', 'status')
    optionalString(status, 'cloudClusterUrl', 'status')
  },
  'raft.member.set': (command) => {
    fields(command, '', MEMBER_SET)
    keyPart(command, 'Node', '')
    string(command, 'Address', '')
    optionalString(command, 'Incarnation', '')
  },
  'raft.member.delete': (command) => {
    fields(command, '', NODE)
    keyPart(command, 'Node', '', 'any')
  },
  'acl.replicate': (command) => {
    fields(command, '', REPLICATE)
    oneOf(command, 'stream', '', STREAMS)
    list(command, 'upserts', '', REPLICATED_ITEMS_MAX, (item, at) => replicatedRecord(command.stream, item, at))
    list(command, 'deletes', '', REPLICATED_ITEMS_MAX, (item, at) => {
      keyValue(item, at, 'any')
      if (command.stream === 'config' && configDeleteAddress(item as string) === undefined) fail(at, 'must name a config entry as ["Kind","Namespace","Name"]')
    })
    count(command, 'remoteIndex', '')
    time(command, 'now', '')
  },
  'restore.begin': (command) => {
    fields(command, '', RESTORE_BEGIN)
    keyPart(command, 'id', '')
    count(command, 'chunks', '')
    count(command, 'records', '')
  },
  'restore.chunk': (command) => {
    fields(command, '', RESTORE_CHUNK)
    keyPart(command, 'id', '')
    count(command, 'seq', '')
    // The pairs' content (which keys, which records) is apply's to judge: a chunk it refuses leaves the restore to be
    // abandoned, never the node stopped. Here only what apply reads without checking: strings and bytes.
    list(command, 'pairs', '', RESTORE_CHUNK_PAIRS_MAX, (pair, at) => {
      if (!Array.isArray(pair) || pair.length !== 2) fail(at, `must be a [key, value] pair, not ${describe(pair)}`)
      stringValue(pair[0], `${at}[0]`)
      if (!(pair[1] instanceof Uint8Array)) fail(`${at}[1]`, `must be bytes, not ${describe(pair[1])}`)
    })
  },
  'restore.commit': (command) => {
    fields(command, '', RESTORE_COMMIT)
    keyPart(command, 'id', '')
    count(command, 'chunks', '')
    string(command, 'digest', '')
  },
  'restore.abort': (command) => {
    fields(command, '', RESTORE_ABORT)
    keyPart(command, 'id', '')
    string(command, 'reason', '')
  },
  noop: (command) => {
    fields(command, '', ENVELOPE)
  },
}

/** Records of one `acl.replicate` batch, upserts or deletions: the replication loop sends far fewer (256 and 4,096). */
export const REPLICATED_ITEMS_MAX = 16_384

function names(...list: string[]): ReadonlySet<string> {
  return new Set(list)
}

const ENVELOPE = names('v', 'type')
const INIT = names('v', 'type', 'bootstrapToken')
const TOKEN_COMMAND = names('v', 'type', 'token')
const CLONE = names('v', 'type', 'sourceAccessorID', 'token')
const CLONE_TOKEN = names('AccessorID', 'SecretID', 'Description', 'CreateTime', 'Namespace')
const ACCESSOR_ID = names('v', 'type', 'AccessorID')
const LOGIN_COMMAND = names('v', 'type', 'login')
const LOGIN = names('token', 'authMethodNamespace', 'authMethodModifyIndex')
const DELETE_EXPIRED = names('v', 'type', 'AccessorIDs', 'now')
const ID = names('v', 'type', 'ID')
const NAMESPACE_NAME = names('v', 'type', 'Namespace', 'Name')
const CONFIG_APPLY = names('v', 'type', 'entry', 'cas')
const CONFIG_DELETE = names('v', 'type', 'Kind', 'Namespace', 'Name', 'cas')
const LINK_SET = names('v', 'type', 'link', 'version')
const LINK = names('resourceId', 'clientId', 'clientSecret', 'uid', 'generation', 'source')
const LINK_SOURCES = names('api', 'config')
const VERSION = names('v', 'type', 'version')
const LINK_STATUS_COMMAND = names('v', 'type', 'status')
const LINK_STATUS = names('generation', 'conditions', 'updatedAt', 'accessLevel', 'cloudClusterUrl')
const CONDITION = names('message', 'reason', 'state', 'type')
const MEMBER_SET = names('v', 'type', 'Node', 'Address', 'Incarnation')
const NODE = names('v', 'type', 'Node')
const REPLICATE = names('v', 'type', 'stream', 'upserts', 'deletes', 'remoteIndex', 'now')
const STREAMS = names('policies', 'roles', 'tokens', 'config')
const RESTORE_BEGIN = names('v', 'type', 'id', 'chunks', 'records')
const RESTORE_CHUNK = names('v', 'type', 'id', 'seq', 'pairs')
const RESTORE_COMMIT = names('v', 'type', 'id', 'chunks', 'digest')
const RESTORE_ABORT = names('v', 'type', 'id', 'reason')

function configEntry(entry: unknown, at: string): void {
  if (!isPlainMap(entry)) fail(at, `must be a map, not ${describe(entry)}`)
  keyPart(entry, 'Kind', at)
  keyPart(entry, 'Name', at)
  keyPart(entry, 'Namespace', at)
  jsonMap(entry, at, 1)
}

/** One upsert of an `acl.replicate` batch, by its stream. */
function replicatedRecord(stream: unknown, item: unknown, at: string): void {
  if (stream === 'policies') return policy(item, at)
  if (stream === 'roles') return role(item, at)
  if (stream === 'tokens') return tokenCreate(item, at)
  configEntry(item, at)
}
const POLICY_COMMAND = names('v', 'type', 'policy')
const POLICY = names('ID', 'Name', 'Description', 'Rules', 'Datacenters', 'Namespace')
const ROLE_COMMAND = names('v', 'type', 'role')
const ROLE = names('ID', 'Name', 'Description', 'Policies', 'TemplatedPolicies', 'ServiceIdentities', 'NodeIdentities', 'Namespace')
const METHOD_COMMAND = names('v', 'type', 'method')
const METHOD = names('Name', 'Type', 'DisplayName', 'Description', 'MaxTokenTTLMs', 'TokenLocality', 'Config', 'NamespaceRules', 'Namespace')
const TOKEN_LOCALITIES = names('', 'local', 'global')
const NAMESPACE_RULE = names('Selector', 'BindNamespace')
const RULE_COMMAND = names('v', 'type', 'rule')
const RULE = names('ID', 'Description', 'AuthMethod', 'Selector', 'BindType', 'BindName', 'BindVars', 'Namespace')
const BIND_TYPES = names('service', 'node', 'role', 'templated-policy')
const LINKED = ['Policies', 'Roles', 'TemplatedPolicies', 'ServiceIdentities', 'NodeIdentities']
const TOKEN_CREATE = names('AccessorID', 'SecretID', 'Description', ...LINKED, 'Local', 'AuthMethod', 'ExpirationTime', 'CreateTime', 'Namespace')
const TOKEN_UPDATE = names('AccessorID', 'SecretID', 'AuthMethod', 'ExpirationTime', 'Description', ...LINKED, 'Local', 'Namespace')
const LINK_INPUT = names('ID', 'Name')
const TEMPLATED_POLICY = names('TemplateName', 'TemplateID', 'TemplateVariables')
const TEMPLATE_VARIABLES = names('name')
const SERVICE_IDENTITY = names('ServiceName', 'Datacenters')
const NODE_IDENTITY = names('NodeName', 'Datacenter')

function tokenCommand(command: Fields): void {
  fields(command, '', TOKEN_COMMAND)
  tokenCreate(required(command, 'token', ''), 'token')
}

function idCommand(command: Fields): void {
  fields(command, '', ID)
  keyPart(command, 'ID', '', 'any')
}

function tokenCreate(value: unknown, at: string): void {
  const token = fields(value, at, TOKEN_CREATE)
  keyPart(token, 'AccessorID', at)
  nonEmptyString(token, 'SecretID', at)
  string(token, 'Description', at)
  linkedFields(token, at, true)
  boolean(token, 'Local', at)
  keyPart(token, 'AuthMethod', at, 'any')
  if (present(token.ExpirationTime)) time(token, 'ExpirationTime', at)
  time(token, 'CreateTime', at)
  keyPart(token, 'Namespace', at)
}

function tokenUpdate(value: unknown, at: string): void {
  const token = fields(value, at, TOKEN_UPDATE)
  keyPart(token, 'AccessorID', at)
  if (present(token.SecretID)) nonEmptyString(token, 'SecretID', at)
  if (present(token.AuthMethod)) keyPart(token, 'AuthMethod', at, 'any')
  if (present(token.ExpirationTime)) time(token, 'ExpirationTime', at)
  string(token, 'Description', at)
  linkedFields(token, at, true)
  boolean(token, 'Local', at)
  keyPart(token, 'Namespace', at)
}

/** Links and identities: tokens have Roles, roles do not. */
function linkedFields(record: Fields, at: string, roles: boolean): void {
  list(record, 'Policies', at, LIST_ITEMS_MAX, linkInput)
  if (roles) list(record, 'Roles', at, LIST_ITEMS_MAX, linkInput)
  list(record, 'TemplatedPolicies', at, LIST_ITEMS_MAX, (item, itemAt) => {
    const link = fields(item, itemAt, TEMPLATED_POLICY)
    string(link, 'TemplateName', itemAt)
    string(link, 'TemplateID', itemAt)
    if (present(link.TemplateVariables)) {
      const variablesAt = join(itemAt, 'TemplateVariables')
      const variables = fields(link.TemplateVariables, variablesAt, TEMPLATE_VARIABLES)
      optionalString(variables, 'name', variablesAt)
    }
  })
  list(record, 'ServiceIdentities', at, LIST_ITEMS_MAX, (item, itemAt) => {
    const identity = fields(item, itemAt, SERVICE_IDENTITY)
    keyPart(identity, 'ServiceName', itemAt)
    if (present(identity.Datacenters)) list(identity, 'Datacenters', itemAt, LIST_ITEMS_MAX, stringValue)
  })
  list(record, 'NodeIdentities', at, LIST_ITEMS_MAX, (item, itemAt) => {
    const identity = fields(item, itemAt, NODE_IDENTITY)
    string(identity, 'NodeName', itemAt)
    string(identity, 'Datacenter', itemAt)
  })
}

function linkInput(item: unknown, at: string): void {
  const link = fields(item, at, LINK_INPUT)
  if (present(link.ID)) keyPart(link, 'ID', at, 'any')
  if (present(link.Name)) keyPart(link, 'Name', at, 'any')
}

function policyCommand(command: Fields): void {
  fields(command, '', POLICY_COMMAND)
  policy(required(command, 'policy', ''), 'policy')
}

function policy(value: unknown, at: string): void {
  const record = fields(value, at, POLICY)
  keyPart(record, 'ID', at)
  keyPart(record, 'Name', at)
  string(record, 'Description', at)
  string(record, 'Rules', at)
  list(record, 'Datacenters', at, LIST_ITEMS_MAX, stringValue)
  keyPart(record, 'Namespace', at)
}

function roleCommand(command: Fields): void {
  fields(command, '', ROLE_COMMAND)
  role(required(command, 'role', ''), 'role')
}

function role(value: unknown, at: string): void {
  const record = fields(value, at, ROLE)
  keyPart(record, 'ID', at)
  keyPart(record, 'Name', at)
  string(record, 'Description', at)
  linkedFields(record, at, false)
  keyPart(record, 'Namespace', at)
}

function authMethodCommand(command: Fields): void {
  fields(command, '', METHOD_COMMAND)
  const method = fields(required(command, 'method', ''), 'method', METHOD)
  keyPart(method, 'Name', 'method')
  nonEmptyString(method, 'Type', 'method')
  string(method, 'DisplayName', 'method')
  string(method, 'Description', 'method')
  const ttl = required(method, 'MaxTokenTTLMs', 'method')
  if (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl < 0) fail(join('method', 'MaxTokenTTLMs'), `must be a non-negative number of milliseconds, not ${describe(ttl)}`)
  oneOf(method, 'TokenLocality', 'method', TOKEN_LOCALITIES)
  const config = required(method, 'Config', 'method')
  if (!isPlainMap(config)) fail(join('method', 'Config'), `must be a map, not ${describe(config)}`)
  jsonMap(config, 'method.Config', 1)
  list(method, 'NamespaceRules', 'method', LIST_ITEMS_MAX, (item, at) => {
    const rule = fields(item, at, NAMESPACE_RULE)
    string(rule, 'Selector', at)
    string(rule, 'BindNamespace', at)
  })
  keyPart(method, 'Namespace', 'method')
}

function bindingRuleCommand(command: Fields): void {
  fields(command, '', RULE_COMMAND)
  const rule = fields(required(command, 'rule', ''), 'rule', RULE)
  keyPart(rule, 'ID', 'rule')
  string(rule, 'Description', 'rule')
  keyPart(rule, 'AuthMethod', 'rule')
  string(rule, 'Selector', 'rule')
  oneOf(rule, 'BindType', 'rule', BIND_TYPES)
  string(rule, 'BindName', 'rule')
  if (present(rule.BindVars)) {
    const variables = rule.BindVars
    if (!isPlainMap(variables)) fail('rule.BindVars', `must be a map, not ${describe(variables)}`)
    for (const [name, value] of Object.entries(variables)) stringValue(value, `rule.BindVars.${name}`)
  }
  keyPart(rule, 'Namespace', 'rule')
}

// ---------------------------------------------------------------------------------------------------------------
// Field checks. `at` is the path of the map holding the field ('' for the command itself); a field's path is built
// only when it is wrong.

class Malformed {
  constructor(
    readonly field: string,
    readonly rule: string,
  ) {}
}

function fail(field: string, rule: string): never {
  throw new Malformed(field, rule)
}

function join(at: string, name: string): string {
  return at === '' ? name : `${at}.${name}`
}

/**
 * A map decoded from MessagePack or built here: its prototype is Object's or none. Not a list, a Buffer (MessagePack
 * bin), a Date (the timestamp extension) or any other class msgpackr may decode an extension into.
 */
function isPlainMap(value: unknown): value is Fields {
  if (typeof value !== 'object' || value === null) return false
  const prototype = Object.getPrototypeOf(value) as unknown
  return prototype === Object.prototype || prototype === null
}

/** Absent: MessagePack keeps a field set to undefined as a key with an undefined value. */
function present(value: unknown): boolean {
  return value !== undefined
}

/** `value` as a map with no field outside `known`. */
function fields(value: unknown, at: string, known: ReadonlySet<string>): Fields {
  if (!isPlainMap(value)) fail(at === '' ? 'command' : at, `must be a map, not ${describe(value)}`)
  for (const name in value) {
    if (Object.hasOwn(value, name) && !known.has(name)) fail(join(at, name), 'is not a field of this command')
  }
  return value
}

function required(record: Fields, name: string, at: string): unknown {
  const value = record[name]
  if (value === undefined) fail(join(at, name), 'is required')
  return value
}

function string(record: Fields, name: string, at: string): string {
  const value = required(record, name, at)
  if (typeof value !== 'string') fail(join(at, name), `must be a string, not ${describe(value)}`)
  return value
}

function optionalString(record: Fields, name: string, at: string): void {
  if (present(record[name])) string(record, name, at)
}

function nonEmptyString(record: Fields, name: string, at: string): void {
  if (string(record, name, at) === '') fail(join(at, name), 'must not be empty')
}

/**
 * A string that becomes part of a LevelDB key (keys.ts joins the parts with NUL), so it must hold none. Record IDs,
 * names and namespaces may not be empty either ('nonEmpty'); a delete's or a reference's may ('any': apply finds
 * nothing, or reports the missing link as a value).
 */
function keyPart(record: Fields, name: string, at: string, empty: 'nonEmpty' | 'any' = 'nonEmpty'): void {
  keyValue(required(record, name, at), join(at, name), empty)
}

function keyValue(value: unknown, field: string, empty: 'nonEmpty' | 'any'): void {
  if (typeof value !== 'string') fail(field, `must be a string, not ${describe(value)}`)
  if (empty === 'nonEmpty' && value === '') fail(field, 'must not be empty')
  if (value.includes('\u0000')) fail(field, 'must not contain NUL')
}

function stringValue(value: unknown, field: string): void {
  if (typeof value !== 'string') fail(field, `must be a string, not ${describe(value)}`)
}

function boolean(record: Fields, name: string, at: string): void {
  const value = required(record, name, at)
  if (typeof value !== 'boolean') fail(join(at, name), `must be a boolean, not ${describe(value)}`)
}

/** A non-negative integer: a Raft index, a compare-and-set version. */
function count(record: Fields, name: string, at: string): void {
  const value = required(record, name, at)
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) fail(join(at, name), `must be a non-negative integer, not ${describe(value)}`)
}

function optionalCount(record: Fields, name: string, at: string): void {
  if (present(record[name])) count(record, name, at)
}

/** An RFC 3339 time: tokens are indexed by expiry and compared with `now` by the instant these name. */
function time(record: Fields, name: string, at: string): void {
  if (parseTime(string(record, name, at)) === undefined) fail(join(at, name), 'must be an RFC 3339 time')
}

function oneOf(record: Fields, name: string, at: string, allowed: ReadonlySet<string>): void {
  const value = string(record, name, at)
  if (!allowed.has(value)) fail(join(at, name), `must be one of ${[...allowed].map((item) => JSON.stringify(item)).join(', ')}, not ${JSON.stringify(value)}`)
}

function list(record: Fields, name: string, at: string, itemsMax: number, item: (value: unknown, at: string) => void): void {
  const value = required(record, name, at)
  const field = join(at, name)
  if (!Array.isArray(value)) fail(field, `must be a list, not ${describe(value)}`)
  if (value.length > itemsMax) fail(field, `must have at most ${itemsMax} entries, not ${value.length}`)
  for (let position = 0; position < value.length; position++) item(value[position], `${field}[${position}]`)
}

/** Every field of a map as JSON could hold it: what config entries and auth-method Config store as given. */
function jsonMap(map: Fields, at: string, depth: number): void {
  if (depth > VALUE_DEPTH_MAX) fail(at, `nests maps and lists deeper than ${VALUE_DEPTH_MAX} levels`)
  for (const name in map) {
    if (!Object.hasOwn(map, name)) continue
    // A map built from JSON may hold `__proto__` as its own key; assigned while decoding, it would set a prototype.
    if (name === '__proto__') fail(join(at, name), 'is not allowed as a field name')
    jsonValue(map[name], join(at, name), depth)
  }
}

function jsonValue(value: unknown, at: string, depth: number): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return
    case 'number':
      if (!Number.isFinite(value)) fail(at, `must be a finite number, not ${String(value)}`)
      return
    case 'undefined':
      return
    case 'object':
      if (value === null) return
      if (Array.isArray(value)) {
        if (depth + 1 > VALUE_DEPTH_MAX) fail(at, `nests maps and lists deeper than ${VALUE_DEPTH_MAX} levels`)
        for (let position = 0; position < value.length; position++) jsonValue(value[position], `${at}[${position}]`, depth + 1)
        return
      }
      if (isPlainMap(value)) return jsonMap(value, at, depth + 1)
  }
  fail(at, `must be a string, number, boolean, nil, list or map, not ${describe(value)}`)
}

/** A value named in a message: its kind, and short values themselves. */
function describe(value: unknown): string {
  if (value === null) return 'nil'
  if (value === undefined) return 'nothing'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'string') return value.length <= 40 ? `the string ${JSON.stringify(value)}` : 'a string'
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return `${typeof value === 'bigint' ? 'the integer' : `the ${typeof value}`} ${String(value)}`
  if (typeof value === 'object') {
    const name = (Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null)?.constructor?.name
    return isPlainMap(value) ? 'a map' : `a ${name ?? 'value'}`
  }
  return `a ${typeof value}`
}
