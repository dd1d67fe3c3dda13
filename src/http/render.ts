/**
 * Records to response bodies: links get the current name of what they point to (links whose target was deleted are
 * left out, as Consul does), secrets are redacted for callers who may not see them, and list forms leave out what the
 * contract leaves out.
 */
import { formatDuration } from '../lib/duration.js'
import type { Reader } from '../state/reader.js'
import type { AclAuthMethod, AclBindingRule, AclPolicy, AclRole, AclToken, IdLink } from '../state/records.js'
import type { StateStore } from '../state/store.js'
import { getRecord, policySpec, roleSpec } from '../state/tables.js'
import { recordPrefix } from '../state/keys.js'

export const HIDDEN = '<hidden>'

/** Resolves link names, caching per response so a list of tokens reads each policy once. */
export class LinkNames {
  private readonly policies = new Map<string, AclPolicy | undefined>()
  private readonly roles = new Map<string, AclRole | undefined>()

  /** `shared`: the live state's names (liveLinkNames), for a reader of the live state only. */
  constructor(
    private readonly reader: Reader,
    private readonly shared?: SharedNames,
  ) {}

  policy(id: string): Promise<AclPolicy | undefined> {
    return cached(this.policies, id, () => getRecord(this.reader, policySpec, id))
  }

  role(id: string): Promise<AclRole | undefined> {
    return cached(this.roles, id, () => getRecord(this.reader, roleSpec, id))
  }

  policyLinks(links: IdLink[]): Promise<NamedLink[]> {
    const shared = this.shared
    return named(links, shared === undefined ? (id) => this.policy(id) : (id) => shared.name('policy', id, () => this.policy(id)))
  }

  roleLinks(links: IdLink[]): Promise<NamedLink[]> {
    const shared = this.shared
    return named(links, shared === undefined ? (id) => this.role(id) : (id) => shared.name('role', id, () => this.role(id)))
  }
}

/** Link names rendered from the live state, through the names every response from it shares (SharedNames). */
export function liveLinkNames(state: StateStore): LinkNames {
  let shared = sharedNames.get(state)
  if (shared === undefined) {
    shared = new SharedNames(state)
    sharedNames.set(state, shared)
  }
  return new LinkNames(state.reader, shared)
}

interface NamedLink {
  ID: string
  Name: string
}

const SHARED_NAMES_MAX = 4_096
const POLICY_PREFIX = recordPrefix('policy')
const ROLE_PREFIX = recordPrefix('role')

/**
 * The name of each policy and role, by ID, as the live state holds it (null: none with that ID), shared by every
 * response rendered from it: a token create's answer names its policies without reading and decoding each policy
 * (rules included) again. A write to a policy or role drops its entry when its batch is applied, a snapshot install
 * drops them all; a name read while such a change was applied is not kept (`generation`), since it may predate it.
 */
class SharedNames {
  private readonly names = { policy: new Map<string, NamedLink | null>(), role: new Map<string, NamedLink | null>() }
  private generation = 0

  constructor(state: StateStore) {
    state.changeListeners.add((tables, recordKeys) => {
      if (!tables.includes('policy') && !tables.includes('role')) return
      this.generation += 1
      for (const key of recordKeys) {
        if (key.startsWith(POLICY_PREFIX)) this.names.policy.delete(key.slice(POLICY_PREFIX.length))
        else if (key.startsWith(ROLE_PREFIX)) this.names.role.delete(key.slice(ROLE_PREFIX.length))
      }
    })
    state.resetListeners.add(() => {
      this.generation += 1
      this.names.policy.clear()
      this.names.role.clear()
    })
  }

  async name(kind: 'policy' | 'role', id: string, read: () => Promise<NamedLink | undefined>): Promise<NamedLink | undefined> {
    const names = this.names[kind]
    const known = names.get(id)
    if (known !== undefined) return known ?? undefined
    const generation = this.generation
    const record = await read()
    if (generation === this.generation) {
      // Bounded: past the limit it starts over (policies and roles are few next to the tokens linking them).
      if (names.size >= SHARED_NAMES_MAX) names.clear()
      names.set(id, record === undefined ? null : { ID: record.ID, Name: record.Name })
    }
    return record
  }
}

const sharedNames = new WeakMap<StateStore, SharedNames>()

async function cached<R>(cache: Map<string, R | undefined>, id: string, read: () => Promise<R | undefined>): Promise<R | undefined> {
  if (!cache.has(id)) cache.set(id, await read())
  return cache.get(id)
}

/** The links whose target still exists, in order, each with the target's current name. */
async function named(links: IdLink[], target: (id: string) => Promise<NamedLink | undefined>): Promise<NamedLink[]> {
  const result: NamedLink[] = []
  for (const link of links) {
    const found = await target(link.ID)
    if (found !== undefined) result.push({ ID: found.ID, Name: found.Name })
  }
  return result
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

/** Config keys that hold credentials: hidden from callers without acl:write, as SecretIDs are. */
const AUTH_METHOD_SECRETS = ['ServiceAccountJWT', 'OIDCClientSecret']

export function renderAuthMethod(method: AclAuthMethod, form: 'full' | 'list' = 'full', showSecrets = true): Record<string, unknown> {
  const body: Record<string, unknown> = {
    Name: method.Name,
    Type: method.Type,
    DisplayName: method.DisplayName,
    Description: method.Description,
    MaxTokenTTL: formatDuration(method.MaxTokenTTLMs),
    TokenLocality: method.TokenLocality,
    Config: showSecrets ? method.Config : hideSecrets(method.Config),
    NamespaceRules: method.NamespaceRules,
    Namespace: method.Namespace,
    CreateIndex: method.CreateIndex,
    ModifyIndex: method.ModifyIndex,
  }
  if (form === 'list') delete body.Config
  return body
}

function hideSecrets(config: Record<string, unknown>): Record<string, unknown> {
  const shown = { ...config }
  for (const key of AUTH_METHOD_SECRETS) if (key in shown) shown[key] = HIDDEN
  return shown
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
