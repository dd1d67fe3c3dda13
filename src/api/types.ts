/**
 * The shapes warden's HTTP API answers with and accepts, as the contract names their fields. These are the wire
 * forms (links carry names, durations are Go duration text), not the state machine's records, so the client stands
 * apart from the server's code.
 */

/** A link to a policy or role: by ID, by Name, or both (answers carry both). */
export interface Link {
  ID?: string
  Name?: string
}

export interface NamedLink {
  ID: string
  Name: string
}

export interface ServiceIdentity {
  ServiceName: string
  Datacenters?: string[]
}

export interface NodeIdentity {
  NodeName: string
  Datacenter: string
}

export interface TemplatedPolicy {
  TemplateName: string
  TemplateID?: string
  TemplateVariables?: { name?: string }
}

export interface Token {
  AccessorID: string
  SecretID: string
  Description: string
  Policies: NamedLink[]
  Roles: NamedLink[]
  TemplatedPolicies: TemplatedPolicy[]
  ServiceIdentities: ServiceIdentity[]
  NodeIdentities: NodeIdentity[]
  Local: boolean
  AuthMethod: string
  AuthMethodNamespace?: string
  ExpirationTime?: string
  ExpirationTTL?: string
  CreateTime: string
  Hash: string
  Namespace: string
  CreateIndex: number
  ModifyIndex: number
  /** `?expanded` reads only. */
  ExpandedPolicies?: Policy[]
  ExpandedRoles?: Role[]
  NamespaceDefaultPolicyIDs?: string[]
  NamespaceDefaultRoleIDs?: string[]
  AgentACLDefaultPolicy?: string
  AgentACLDownPolicy?: string
  ResolvedByAgent?: string
}

/** Where a rule of a token's permissions comes from (GET /v1/acl/token/:AccessorID/permissions). */
export interface PermissionSource {
  Type: 'policy' | 'service-identity' | 'node-identity' | 'templated-policy' | 'default-policy'
  ID?: string
  Name: string
  Datacenters?: string[]
  Datacenter?: string
  TemplateVariables?: Record<string, unknown>
  Via?: Array<{ Type: 'token' } | { Type: 'role'; ID: string; Name: string }>
}

export interface PermissionRule {
  Segment?: string
  Match?: 'exact' | 'prefix'
  Keyword: string
  Attribute?: 'intentions'
  Derived?: true
  Access: string
  Grants: string[]
  DecidedBy: PermissionSource[]
  Overridden?: Array<PermissionSource & { Access: string }>
}

export interface ResourcePermissions {
  Rules: PermissionRule[]
  Otherwise?: { Access: string; Grants: string[]; DecidedBy: PermissionSource[] }
}

/** A token's effective permissions in the answering datacenter, per resource, as the authorizer decides them. */
export interface TokenPermissions {
  AccessorID: string
  Datacenter: string
  DefaultPolicy: string
  Management: boolean
  Sources: Array<PermissionSource & { AppliesHere: boolean }>
  Resources: Record<string, ResourcePermissions>
}

/** One check of POST /v1/internal/acl/authorize; the answer echoes it with Allow. */
export interface AuthorizationCheck {
  Resource: string
  Segment?: string
  Access: string
}

export interface TokenWrite {
  AccessorID?: string
  SecretID?: string
  Description?: string
  Policies?: Link[]
  Roles?: Link[]
  TemplatedPolicies?: TemplatedPolicy[]
  ServiceIdentities?: ServiceIdentity[]
  NodeIdentities?: NodeIdentity[]
  Local?: boolean
  AuthMethod?: string
  ExpirationTime?: string
  ExpirationTTL?: string
  Namespace?: string
}

export interface Policy {
  ID: string
  Name: string
  Description: string
  /** Absent in lists. */
  Rules?: string
  Datacenters?: string[]
  Hash: string
  Namespace: string
  CreateIndex: number
  ModifyIndex: number
}

export interface PolicyWrite {
  ID?: string
  Name: string
  Description?: string
  Rules?: string
  Datacenters?: string[]
  Namespace?: string
}

export interface Role {
  ID: string
  Name: string
  Description: string
  Policies: NamedLink[]
  TemplatedPolicies?: TemplatedPolicy[]
  ServiceIdentities?: ServiceIdentity[]
  NodeIdentities?: NodeIdentity[]
  Hash: string
  Namespace: string
  CreateIndex: number
  ModifyIndex: number
}

export interface RoleWrite {
  ID?: string
  Name: string
  Description?: string
  Policies?: Link[]
  TemplatedPolicies?: TemplatedPolicy[]
  ServiceIdentities?: ServiceIdentity[]
  NodeIdentities?: NodeIdentity[]
  Namespace?: string
}

export interface NamespaceRule {
  Selector: string
  BindNamespace: string
}

export interface AuthMethod {
  Name: string
  Type: string
  DisplayName?: string
  Description?: string
  /** A Go duration ("10m0s"); "0s" when tokens do not expire. */
  MaxTokenTTL?: string
  TokenLocality?: string
  /** Absent in lists. */
  Config?: Record<string, unknown>
  NamespaceRules?: NamespaceRule[]
  Namespace: string
  CreateIndex: number
  ModifyIndex: number
}

export interface AuthMethodWrite {
  Name: string
  Type?: string
  DisplayName?: string
  Description?: string
  MaxTokenTTL?: string
  TokenLocality?: string
  Config?: Record<string, unknown>
  NamespaceRules?: NamespaceRule[]
  Namespace?: string
}

export interface BindingRule {
  ID: string
  Description: string
  AuthMethod: string
  Selector: string
  BindType: string
  BindName: string
  BindVars?: Record<string, string>
  Namespace: string
  CreateIndex: number
  ModifyIndex: number
}

export interface BindingRuleWrite {
  ID?: string
  Description?: string
  AuthMethod?: string
  Selector?: string
  BindType: string
  BindName: string
  BindVars?: Record<string, string>
  Namespace?: string
}

export interface TemplatedPolicyRecord {
  TemplateName: string
  Schema: string
  Template: string
  Description?: string
}

/** Config entries keep every field they were given. */
export interface ConfigEntry {
  Kind: string
  Name: string
  Namespace?: string
  CreateIndex?: number
  ModifyIndex?: number
  [field: string]: unknown
}

export interface LoginRequest {
  AuthMethod: string
  BearerToken: string
  Meta?: Record<string, string>
  Namespace?: string
}

export interface ReplicationStatus {
  Enabled: boolean
  Running: boolean
  SourceDatacenter: string
  ReplicationType: string
  ReplicatedIndex: number
  ReplicatedRoleIndex: number
  ReplicatedTokenIndex: number
  LastSuccess: string
  LastError: string
  LastErrorMessage: string
}

export interface RaftServer {
  ID: string
  Node: string
  Address: string
  Leader: boolean
  Voter: boolean
}

export interface RaftConfiguration {
  Servers: RaftServer[]
  Index: number
}

/** One node's own view of Raft (`GET /v1/operator/raft/state`). */
export interface RaftState {
  Node: string
  Role: string
  Term: number
  Leader: string
  CommitIndex: number
  AppliedIndex: number
  LastIndex: number
  LastContactMs: number
  ForwardedWrites: number
  ForwardedRequests: number
}

/** A server as the leader sees it (`GET /v1/operator/cluster`); null where it did not report its own state. */
export interface ClusterServer {
  Name: string
  Address: string
  Role: 'leader' | 'follower' | 'non-voter'
  Voter: boolean
  Leader: boolean
  Status: 'alive' | 'failed'
  Term: number | null
  CommitIndex: number | null
  AppliedIndex: number | null
  LastIndex: number | null
  MatchIndex: number | null
  LastContactMs: number | null
  Error?: string
}

/** `GET /v1/operator/cluster`: every server, the leader, the datacenters, replication and the cloud link. */
export interface ClusterStatus {
  Datacenter: string
  PrimaryDatacenter: string
  Datacenters: string[]
  AnsweredBy: string
  Leader: string
  LeaderAddress: string
  Term: number
  Servers: ClusterServer[]
  /** GET /v1/acl/replication's answer in a secondary (the loop's part from its leader); null in the primary. */
  Replication: (ReplicationStatus & { ReplicatedConfigEntryIndex: number; ReplicationLagSeconds: number }) | null
  CloudLink: { ResourceID: string; Linked: boolean | null; Status: Record<string, unknown> | null } | null
}

/** A server of a datacenter (`GET /v1/operator/servers`, `warden members`). */
export interface Server {
  Name: string
  Datacenter: string
  Address: string
  Role: string
  Voter: boolean
  Status: string
}

export interface CloudLinkEnvelope {
  data: { resourceId: string; clientId: string; clientSecret: string; accessLevel?: string; cloudClusterUrl?: string }
  generation: string
  id: Record<string, unknown>
  version: string
  status?: Record<string, unknown>
}
