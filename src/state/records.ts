/**
 * The records the state machine stores. Field names are the contract's, from HTTP down to LevelDB: one shape, no
 * mapping layer. Links are stored by ID only; names are resolved when a record is read, so renaming a policy or a
 * role never breaks what links to it.
 */
export interface IdLink {
  ID: string
}

export interface ServiceIdentity {
  ServiceName: string
  Datacenters?: string[]
}

export interface NodeIdentity {
  NodeName: string
  Datacenter: string
}

export interface TemplatedPolicyLink {
  TemplateName: string
  TemplateID: string
  TemplateVariables?: { name?: string }
}

export interface AclToken {
  AccessorID: string
  SecretID: string
  Description: string
  Policies: IdLink[]
  Roles: IdLink[]
  TemplatedPolicies: TemplatedPolicyLink[]
  ServiceIdentities: ServiceIdentity[]
  NodeIdentities: NodeIdentity[]
  Local: boolean
  AuthMethod: string
  /** The namespace of the auth method that created the token (login only), when it may differ from Namespace. */
  AuthMethodNamespace?: string
  /** RFC 3339, absent when the token never expires. */
  ExpirationTime?: string
  CreateTime: string
  Namespace: string
  Hash: string
  CreateIndex: number
  ModifyIndex: number
}

export interface AclPolicy {
  ID: string
  Name: string
  Description: string
  Rules: string
  Datacenters: string[]
  Namespace: string
  Hash: string
  CreateIndex: number
  ModifyIndex: number
}

export interface AclRole {
  ID: string
  Name: string
  Description: string
  Policies: IdLink[]
  TemplatedPolicies: TemplatedPolicyLink[]
  ServiceIdentities: ServiceIdentity[]
  NodeIdentities: NodeIdentity[]
  Namespace: string
  Hash: string
  CreateIndex: number
  ModifyIndex: number
}

export interface NamespaceRule {
  Selector: string
  BindNamespace: string
}

export interface AclAuthMethod {
  Name: string
  Type: string
  DisplayName: string
  Description: string
  /** Milliseconds; 0 means tokens do not expire. Formatted as a Go duration in responses. */
  MaxTokenTTLMs: number
  TokenLocality: string
  Config: Record<string, unknown>
  NamespaceRules: NamespaceRule[]
  Namespace: string
  CreateIndex: number
  ModifyIndex: number
}

export type BindType = 'service' | 'node' | 'role' | 'templated-policy'

export interface AclBindingRule {
  ID: string
  Description: string
  AuthMethod: string
  Selector: string
  BindType: BindType
  BindName: string
  BindVars?: Record<string, string>
  Namespace: string
  CreateIndex: number
  ModifyIndex: number
}

/** Config entries keep every field they were given; Kind, Name and the indexes are the ones warden interprets. */
export interface ConfigEntry {
  Kind: string
  Name: string
  Namespace: string
  CreateIndex: number
  ModifyIndex: number
  [field: string]: unknown
}

export const DEFAULT_NAMESPACE = 'default'

/** The link's user-written data and what the link controller learned about it (accessLevel, cloudClusterUrl). */
export interface CloudLinkData {
  resourceId: string
  clientId: string
  clientSecret: string
  accessLevel?: string
  cloudClusterUrl?: string
}

export interface CloudLinkCondition {
  message: string
  reason: string
  state: string
  type: string
}

export interface CloudLinkStatus {
  conditions: CloudLinkCondition[]
  observedGeneration: string
  updatedAt: string
}

/**
 * The single cloud link, named `global`. `generation` changes on every write of data (API or config); `ModifyIndex`
 * changes on every write (data or status) and is the envelope's `version`.
 */
export interface CloudLink {
  uid: string
  generation: string
  data: CloudLinkData
  status?: CloudLinkStatus
  /** Who wrote the data last: `api`, or `config` (the agent's cloud settings at start). */
  source: 'api' | 'config'
  CreateIndex: number
  ModifyIndex: number
}

/** A server of the cluster and the address it advertises, replicated so that every node can dial every other. */
export interface ClusterMember {
  Node: string
  Address: string
  /**
   * The data dir the server joined from (a random identifier made with it): a server that joins again after losing
   * its data has a new one, and learns that the leader re-added it when it sees its own here (replica/membership.ts).
   */
  Incarnation?: string
  CreateIndex: number
  ModifyIndex: number
}
