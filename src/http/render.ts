/**
 * Records to response bodies: links get the current name of what they point to (links whose target was deleted are
 * left out, as Consul does), secrets are redacted for callers who may not see them, and list forms leave out what the
 * contract leaves out.
 */
import { formatDuration } from '../lib/duration.js'
import type { Reader } from '../state/reader.js'
import type { AclAuthMethod, AclBindingRule, AclPolicy, AclRole, AclToken, IdLink } from '../state/records.js'
import { getRecord, policySpec, roleSpec } from '../state/tables.js'

export const HIDDEN = '<hidden>'

/** Resolves link names, caching per response so a list of tokens reads each policy once. */
export class LinkNames {
  private readonly policies = new Map<string, AclPolicy | undefined>()
  private readonly roles = new Map<string, AclRole | undefined>()

  constructor(private readonly reader: Reader) {}

  async policy(id: string): Promise<AclPolicy | undefined> {
    if (!this.policies.has(id)) this.policies.set(id, await getRecord(this.reader, policySpec, id))
    return this.policies.get(id)
  }

  async role(id: string): Promise<AclRole | undefined> {
    if (!this.roles.has(id)) this.roles.set(id, await getRecord(this.reader, roleSpec, id))
    return this.roles.get(id)
  }

  async policyLinks(links: IdLink[]): Promise<Array<{ ID: string; Name: string }>> {
    const result: Array<{ ID: string; Name: string }> = []
    for (const link of links) {
      const policy = await this.policy(link.ID)
      if (policy !== undefined) result.push({ ID: policy.ID, Name: policy.Name })
    }
    return result
  }

  async roleLinks(links: IdLink[]): Promise<Array<{ ID: string; Name: string }>> {
    const result: Array<{ ID: string; Name: string }> = []
    for (const link of links) {
      const role = await this.role(link.ID)
      if (role !== undefined) result.push({ ID: role.ID, Name: role.Name })
    }
    return result
  }
}

export async function renderToken(token: AclToken, names: LinkNames, showSecret: boolean): Promise<Record<string, unknown>> {
  const body: Record<string, unknown> = {
    AccessorID: token.AccessorID,
    SecretID: showSecret ? token.SecretID : HIDDEN,
    Description: token.Description,
    Policies: await names.policyLinks(token.Policies),
    Roles: await names.roleLinks(token.Roles),
    TemplatedPolicies: token.TemplatedPolicies,
    ServiceIdentities: token.ServiceIdentities,
    NodeIdentities: token.NodeIdentities,
    Local: token.Local,
    AuthMethod: token.AuthMethod,
    CreateTime: token.CreateTime,
    Hash: token.Hash,
    Namespace: token.Namespace,
    CreateIndex: token.CreateIndex,
    ModifyIndex: token.ModifyIndex,
  }
  // Go clients decode ExpirationTime into a time; an empty string would not parse, so "never" is an absent field.
  if (token.ExpirationTime !== undefined) body.ExpirationTime = token.ExpirationTime
  return body
}

export function renderPolicy(policy: AclPolicy, form: 'full' | 'list' = 'full'): Record<string, unknown> {
  const body: Record<string, unknown> = {
    ID: policy.ID,
    Name: policy.Name,
    Description: policy.Description,
    Rules: policy.Rules,
    Datacenters: policy.Datacenters,
    Hash: policy.Hash,
    Namespace: policy.Namespace,
    CreateIndex: policy.CreateIndex,
    ModifyIndex: policy.ModifyIndex,
  }
  if (form === 'list') delete body.Rules
  return body
}

export async function renderRole(role: AclRole, names: LinkNames): Promise<Record<string, unknown>> {
  return {
    ID: role.ID,
    Name: role.Name,
    Description: role.Description,
    Policies: await names.policyLinks(role.Policies),
    TemplatedPolicies: role.TemplatedPolicies,
    ServiceIdentities: role.ServiceIdentities,
    NodeIdentities: role.NodeIdentities,
    Hash: role.Hash,
    Namespace: role.Namespace,
    CreateIndex: role.CreateIndex,
    ModifyIndex: role.ModifyIndex,
  }
}

export function renderAuthMethod(method: AclAuthMethod, form: 'full' | 'list' = 'full'): Record<string, unknown> {
  const body: Record<string, unknown> = {
    Name: method.Name,
    Type: method.Type,
    DisplayName: method.DisplayName,
    Description: method.Description,
    MaxTokenTTL: formatDuration(method.MaxTokenTTLMs),
    TokenLocality: method.TokenLocality,
    Config: method.Config,
    NamespaceRules: method.NamespaceRules,
    Namespace: method.Namespace,
    CreateIndex: method.CreateIndex,
    ModifyIndex: method.ModifyIndex,
  }
  if (form === 'list') delete body.Config
  return body
}

export function renderBindingRule(rule: AclBindingRule, form: 'full' | 'list' = 'full'): Record<string, unknown> {
  const body: Record<string, unknown> = {
    ID: rule.ID,
    Description: rule.Description,
    AuthMethod: rule.AuthMethod,
    Selector: rule.Selector,
    BindType: rule.BindType,
    BindName: rule.BindName,
    Namespace: rule.Namespace,
    CreateIndex: rule.CreateIndex,
    ModifyIndex: rule.ModifyIndex,
  }
  if (rule.BindVars !== undefined) body.BindVars = rule.BindVars
  if (form === 'list' && rule.Selector === '') delete body.Selector
  return body
}
