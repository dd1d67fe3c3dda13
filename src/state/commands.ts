/**
 * Every change to the state is a command: a plain object with a format version, encoded with msgpack, written to the
 * log and applied by `applyCommand` on every replica. Anything random or read from the clock (IDs, SecretIDs,
 * CreateTime, ExpirationTime) is decided before the command is proposed and travels inside it; whatever is derived
 * (Hash, resolved links) is computed while applying, from the command and the state alone.
 *
 * Commands are named resource then verb. Adding a command type is backwards compatible; changing the meaning of an
 * existing one needs a new COMMAND_VERSION, and so does adding a field to one or tightening a rule of its shape
 * (validate.ts): every replica applies a command that breaks those rules as a no-op.
 */
import type { ReplicateCommand } from './replication.js'
import type { RestoreCommand } from './restore.js'
import {
  DEFAULT_NAMESPACE,
  type AclAuthMethod,
  type AclBindingRule,
  type AclPolicy,
  type CloudLinkCondition,
  type NodeIdentity,
  type ServiceIdentity,
  type TemplatedPolicyLink,
} from './records.js'

export const COMMAND_VERSION = 1

/** A link as a client wrote it: by ID, by Name, or both (the ID wins). Resolved to an ID while applying. */
export interface LinkInput {
  ID?: string
  Name?: string
}

export interface LinkedFields {
  Policies: LinkInput[]
  Roles: LinkInput[]
  TemplatedPolicies: TemplatedPolicyLink[]
  ServiceIdentities: ServiceIdentity[]
  NodeIdentities: NodeIdentity[]
}

export interface TokenCreate extends LinkedFields {
  AccessorID: string
  SecretID: string
  Description: string
  Local: boolean
  AuthMethod: string
  ExpirationTime?: string
  CreateTime: string
  Namespace: string
}

/**
 * A token with no policies, roles, templated policies or identities, not local, from no auth method, in the default
 * namespace: the tokens the server makes itself (the anonymous token, the bootstrap token) start as this.
 */
export function bareToken(fields: Pick<TokenCreate, 'AccessorID' | 'SecretID' | 'Description' | 'CreateTime'>): TokenCreate {
  return {
    AccessorID: fields.AccessorID,
    SecretID: fields.SecretID,
    Description: fields.Description,
    Policies: [],
    Roles: [],
    TemplatedPolicies: [],
    ServiceIdentities: [],
    NodeIdentities: [],
    Local: false,
    AuthMethod: '',
    CreateTime: fields.CreateTime,
    Namespace: DEFAULT_NAMESPACE,
  }
}

/** An update replaces the token's mutable fields; immutable fields, when given, must equal the stored ones. */
export interface TokenUpdate extends LinkedFields {
  AccessorID: string
  SecretID?: string
  AuthMethod?: string
  ExpirationTime?: string
  Description: string
  Local: boolean
  Namespace: string
}

/**
 * A login's token (Roles by Name only), with the auth method it was verified against: apply refuses it if that method
 * is gone or changed since, and drops roles that do not exist (a binding rule may name a role not yet created).
 */
export interface LoginWrite {
  token: TokenCreate
  authMethodNamespace: string
  authMethodModifyIndex: number
}

export type PolicyWrite = Omit<AclPolicy, 'Hash' | 'CreateIndex' | 'ModifyIndex'>

export interface RoleWrite {
  ID: string
  Name: string
  Description: string
  Policies: LinkInput[]
  TemplatedPolicies: TemplatedPolicyLink[]
  ServiceIdentities: ServiceIdentity[]
  NodeIdentities: NodeIdentity[]
  Namespace: string
}

export type AuthMethodWrite = Omit<AclAuthMethod, 'CreateIndex' | 'ModifyIndex'>
export type BindingRuleWrite = Omit<AclBindingRule, 'CreateIndex' | 'ModifyIndex'>

/** A config entry as validated by the HTTP layer: Kind, Name, Namespace and every other field as given. */
export interface ConfigEntryWrite {
  Kind: string
  Name: string
  Namespace: string
  [field: string]: unknown
}

/** A write of the link's data. uid is used only when the link does not exist yet; generation is new on every write. */
export interface LinkWrite {
  resourceId: string
  clientId: string
  clientSecret: string
  uid: string
  generation: string
  source: 'api' | 'config'
}

/** What the link controller found for one generation of the link; decided (and timed) before proposing. */
export interface LinkStatusWrite {
  generation: string
  conditions: CloudLinkCondition[]
  updatedAt: string
  accessLevel?: string
  cloudClusterUrl?: string
}

export type Command =
  | { v: 1; type: 'acl.init'; bootstrapToken?: TokenCreate }
  | { v: 1; type: 'acl.bootstrap'; token: TokenCreate }
  | { v: 1; type: 'acl.token.ensure'; token: TokenCreate }
  | { v: 1; type: 'acl.token.create'; token: TokenCreate }
  | { v: 1; type: 'acl.token.update'; token: TokenUpdate }
  | { v: 1; type: 'acl.token.clone'; sourceAccessorID: string; token: Pick<TokenCreate, 'AccessorID' | 'SecretID' | 'Description' | 'CreateTime' | 'Namespace'> }
  | { v: 1; type: 'acl.token.delete'; AccessorID: string }
  | { v: 1; type: 'acl.login'; login: LoginWrite }
  | { v: 1; type: 'acl.token.delete-expired'; AccessorIDs: string[]; now: string }
  | { v: 1; type: 'acl.policy.create'; policy: PolicyWrite }
  | { v: 1; type: 'acl.policy.update'; policy: PolicyWrite }
  | { v: 1; type: 'acl.policy.delete'; ID: string }
  | { v: 1; type: 'acl.role.create'; role: RoleWrite }
  | { v: 1; type: 'acl.role.update'; role: RoleWrite }
  | { v: 1; type: 'acl.role.delete'; ID: string }
  | { v: 1; type: 'acl.auth-method.create'; method: AuthMethodWrite }
  | { v: 1; type: 'acl.auth-method.update'; method: AuthMethodWrite }
  | { v: 1; type: 'acl.auth-method.delete'; Namespace: string; Name: string }
  | { v: 1; type: 'acl.binding-rule.create'; rule: BindingRuleWrite }
  | { v: 1; type: 'acl.binding-rule.update'; rule: BindingRuleWrite }
  | { v: 1; type: 'acl.binding-rule.delete'; ID: string }
  | { v: 1; type: 'config.apply'; entry: ConfigEntryWrite; cas?: number }
  | { v: 1; type: 'config.delete'; Kind: string; Namespace: string; Name: string; cas?: number }
  | { v: 1; type: 'link.set'; link: LinkWrite; version?: number }
  | { v: 1; type: 'link.delete'; version?: number }
  | { v: 1; type: 'link.status'; status: LinkStatusWrite }
  | { v: 1; type: 'raft.member.set'; Node: string; Address: string; Incarnation?: string }
  | { v: 1; type: 'raft.member.delete'; Node: string }
  | ReplicateCommand
  | RestoreCommand
  | { v: 1; type: 'noop' }

export type CommandType = Command['type']

/** What applying a command gave: a value for the caller, or an operating error decided from the state. */
export type ApplyResult =
  | { ok: true; value?: unknown }
  | { ok: false; error: { code: ApplyErrorCode; message: string; field?: string } }

export type ApplyErrorCode = 'invalid_input' | 'not_found' | 'bootstrap_done' | 'conflict' | 'permission_denied' | 'restore_in_progress'

export function applyError(
  code: ApplyErrorCode,
  message: string,
  field?: string,
): ApplyResult {
  return field === undefined ? { ok: false, error: { code, message } } : { ok: false, error: { code, message: `${field}: ${message}`, field } }
}
