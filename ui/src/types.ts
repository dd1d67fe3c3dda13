/** The records as the API answers them (../shared/spec/api.md), the fields the UI reads. */
export interface Link {
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

export interface TemplatedPolicyLink {
  TemplateName: string
  TemplateVariables?: Record<string, string>
  TemplateID?: string
}

export interface Token {
  AccessorID: string
  SecretID: string
  Description: string
  Policies?: Link[]
  Roles?: Link[]
  TemplatedPolicies?: TemplatedPolicyLink[]
  ServiceIdentities?: ServiceIdentity[]
  NodeIdentities?: NodeIdentity[]
  Local: boolean
  AuthMethod?: string
  ExpirationTime?: string
  CreateTime: string
  Namespace?: string
  Hash?: string
  CreateIndex: number
  ModifyIndex: number
}

export interface Policy {
  ID: string
  Name: string
  Description: string
  Rules?: string
  Datacenters?: string[]
  Namespace?: string
  CreateIndex: number
  ModifyIndex: number
}

export interface Role {
  ID: string
  Name: string
  Description: string
  Policies?: Link[]
  TemplatedPolicies?: TemplatedPolicyLink[]
  ServiceIdentities?: ServiceIdentity[]
  NodeIdentities?: NodeIdentity[]
  Namespace?: string
  CreateIndex: number
  ModifyIndex: number
}

export interface AuthMethod {
  Name: string
  Type: string
  DisplayName?: string
  Description?: string
  MaxTokenTTL?: string
  TokenLocality?: string
  Config?: Record<string, unknown>
  Namespace?: string
  CreateIndex: number
  ModifyIndex: number
}

export interface BindingRule {
  ID: string
  Description?: string
  AuthMethod: string
  Selector?: string
  BindType: string
  BindName: string
  BindVars?: Record<string, string>
  Namespace?: string
  CreateIndex: number
  ModifyIndex: number
}

export interface TemplatedPolicy {
  TemplateName: string
  Schema: string
  Template: string
}

export interface ConfigEntry {
  Kind: string
  Name: string
  CreateIndex?: number
  ModifyIndex?: number
  [field: string]: unknown
}
