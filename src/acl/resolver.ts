/**
 * Token resolution: the request's secret (or none, meaning the anonymous token) to a token and its permissions. The
 * lookup is by the SHA-256 index of the secret; an unknown or expired secret is `acl_not_found` (403 "ACL not found").
 *
 * Compiled authorizers are cached by the secret's digest. An entry is dropped when its token changes, and when a
 * policy or role it was built from changes; every entry goes when policies or roles are deleted wholesale by a
 * cascade, so a request right after an edit is always judged by the edited rules. The cache is bounded.
 */
import { AclNotFoundError, WardenError } from '../lib/errors.js'
import { ANONYMOUS_TOKEN_ID, ANONYMOUS_TOKEN_SECRET } from '../state/builtins.js'
import { recordPrefix, type Table } from '../state/keys.js'
import type { AclToken } from '../state/records.js'
import type { StateStore } from '../state/store.js'
import { getRecord, secretDigest as digestOf, tokenBySecret as tokenBySecretIndex, tokenSpec } from '../state/tables.js'
import type { Permissions } from './authorization.js'
import type { Authorizer, DefaultPolicy } from './authorizer.js'
import { authorizeToken, type TokenAuthorization } from './token-authorizer.js'

export interface Caller {
  token: AclToken
  /** How messages name the caller: its AccessorID, or `anonymous`. */
  accessorID: string
  permissions: Permissions
}

export function isExpired(token: AclToken, nowMs: number): boolean {
  return token.ExpirationTime !== undefined && Date.parse(token.ExpirationTime) <= nowMs
}

interface CacheEntry extends TokenAuthorization {
  token: AclToken
  expiresAtMs: number
  caller: Caller
}

export interface ResolverSettings {
  datacenter: string
  defaultPolicy: DefaultPolicy
  /** Bound on cached authorizers; the oldest is dropped past it. */
  cacheEntriesMax?: number
  /**
   * In a secondary datacenter: how to resolve a secret this datacenter does not hold (a global token of the
   * primary, while tokens are not replicated), and for how long an answer holds. Policies and roles come from this
   * datacenter's (replicated) state. When the primary cannot be asked, `downPolicy` decides, as Consul's
   * acl.down_policy: extend-cache and async-cache keep using what was resolved before, however old; allow lets the
   * request through; deny refuses it.
   */
  remote?: RemoteResolution
}

export interface RemoteResolution {
  /**
   * The token of `secret` at the primary; undefined when the primary says there is none. Throws a WardenError
   * `no_path_to_datacenter` or `unknown_datacenter` when the primary cannot be reached (then acl.down_policy
   * decides), and anything else when it could be reached but did not answer (then the request fails with that).
   */
  lookup(secret: string): Promise<AclToken | undefined>
  /** How long the primary's answer holds; a "no such token" holds NEGATIVE_TTL_MS at most. */
  ttlMs: number
  /**
   * Global tokens are the primary's to answer for, whatever copy this datacenter holds: with token replication off
   * (acl.enable_token_replication false), copies replicated while it was on are no longer kept current, and a token
   * deleted or narrowed at the primary would keep its old permissions here.
   */
  globalTokensFromPrimary?: boolean
  downPolicy: 'allow' | 'deny' | 'extend-cache' | 'async-cache'
}

/** What the resolver counts since it started, read by the agent's metrics when scraped. Only ever incremented. */
export interface ResolverCounts {
  /** Every resolution asked for (the anonymous token included). */
  resolutions: number
  /** Resolutions answered from the authorizer cache. */
  cacheHits: number
  /** Secrets looked up at the primary (a secondary datacenter). */
  remoteLookups: number
}

interface RemoteEntry {
  token: AclToken | undefined
  fetchedAtMs: number
}

/** Secrets resolved at the primary that are remembered at once (answers and refusals alike); the oldest go first. */
const REMOTE_ENTRIES_MAX = 16_384
/** A secret the primary did not know is asked again after this: a token just created there works here soon. */
const NEGATIVE_TTL_MS = 2_000
/** What makes acl.down_policy apply: the primary cannot be reached at all, not merely busy or failing. */
const PRIMARY_DOWN = new Set(['no_path_to_datacenter', 'unknown_datacenter'])

const TOKEN_PREFIX = recordPrefix('token')
const POLICY_PREFIX = recordPrefix('policy')
const ROLE_PREFIX = recordPrefix('role')

export class TokenResolver {
  private readonly cache = new Map<string, CacheEntry>()
  /** AccessorID to the digest its entry is cached under, so a token write drops its entry without a scan. */
  private readonly digestByAccessor = new Map<string, string>()
  private readonly cacheEntriesMax: number
  /** Digest to what the primary answered for it, while it holds (ttlMs), or longer when the primary is down. */
  private readonly remote = new Map<string, RemoteEntry>()
  /** Lookups under way, by digest: concurrent requests with one secret ask the primary once. Bounded as `remote`. */
  private readonly lookups = new Map<string, Promise<AclToken | undefined>>()
  readonly counts: ResolverCounts = { resolutions: 0, cacheHits: 0, remoteLookups: 0 }

  constructor(
    private readonly state: StateStore,
    private readonly settings: ResolverSettings,
  ) {
    this.cacheEntriesMax = settings.cacheEntriesMax ?? 65_536
    state.changeListeners.add((tables, recordKeys) => this.invalidate(tables, recordKeys))
    state.resetListeners.add(() => {
      this.cache.clear()
      this.digestByAccessor.clear()
      this.remote.clear()
    })
  }

  private invalidate(tables: readonly Table[], recordKeys: readonly string[]): void {
    if (this.cache.size === 0) return
    if (!tables.includes('token') && !tables.includes('policy') && !tables.includes('role')) return
    const accessors = new Set<string>()
    const policies = new Set<string>()
    const roles = new Set<string>()
    for (const key of recordKeys) {
      if (key.startsWith(TOKEN_PREFIX)) accessors.add(key.slice(TOKEN_PREFIX.length))
      else if (key.startsWith(POLICY_PREFIX)) policies.add(key.slice(POLICY_PREFIX.length))
      else if (key.startsWith(ROLE_PREFIX)) roles.add(key.slice(ROLE_PREFIX.length))
    }
    for (const accessor of accessors) {
      const digest = this.digestByAccessor.get(accessor)
      if (digest !== undefined) this.drop(digest)
    }
    // Policy and role writes are rare next to token writes: a scan of the cache is affordable there.
    if (policies.size === 0 && roles.size === 0) return
    for (const [digest, entry] of this.cache) {
      if ([...policies].some((id) => entry.policyIds.has(id)) || [...roles].some((id) => entry.roleIds.has(id))) this.drop(digest)
    }
  }

  private drop(digest: string): void {
    const entry = this.cache.get(digest)
    if (entry === undefined) return
    this.cache.delete(digest)
    this.digestByAccessor.delete(entry.token.AccessorID)
  }

  async tokenBySecret(secret: string, nowMs: number): Promise<AclToken | undefined> {
    const token = await tokenBySecretIndex(this.state.reader, secret)
    if (token === undefined || isExpired(token, nowMs)) return undefined
    return token
  }

  /** Authorizers held in the cache now. */
  get cacheEntries(): number {
    return this.cache.size
  }

  async resolve(secret: string | undefined, nowMs: number): Promise<Caller> {
    this.counts.resolutions += 1
    const effective = secret === undefined || secret === '' ? ANONYMOUS_TOKEN_SECRET : secret
    const digest = digestOf(effective)
    const cached = this.cache.get(digest)
    if (cached !== undefined) {
      if (nowMs < cached.expiresAtMs) {
        this.counts.cacheHits += 1
        return cached.caller
      }
      this.drop(digest)
      throw new AclNotFoundError()
    }
    // Read before the token itself: a write applied while the token is looked up must also keep it out of the cache.
    const appliedBefore = this.state.lastApplied
    const local =
      effective === ANONYMOUS_TOKEN_SECRET
        ? await getRecord(this.state.reader, tokenSpec, ANONYMOUS_TOKEN_ID)
        : await this.tokenBySecret(effective, nowMs)
    const remote = this.settings.remote
    if (remote !== undefined && effective !== ANONYMOUS_TOKEN_SECRET && (local === undefined || (remote.globalTokensFromPrimary === true && !local.Local))) {
      return this.resolveRemotely(effective, digest, nowMs, remote)
    }
    const token = local
    if (token === undefined) throw new AclNotFoundError()
    const authorization = await authorizeToken(this.state.reader, token, this.settings.datacenter, this.settings.defaultPolicy)
    const caller: Caller = {
      token,
      accessorID: token.AccessorID === ANONYMOUS_TOKEN_ID ? 'anonymous' : token.AccessorID,
      permissions: permissionsOf(authorization.authorizer),
    }
    // Cache only what no write overtook while it was being built: otherwise the change listener may have run before
    // this entry existed, and the entry would outlive the change.
    if (this.state.lastApplied === appliedBefore) {
      if (this.cache.size >= this.cacheEntriesMax) this.drop(this.cache.keys().next().value as string)
      const expiresAtMs = token.ExpirationTime === undefined ? Number.POSITIVE_INFINITY : Date.parse(token.ExpirationTime)
      this.cache.set(digest, { ...authorization, token, expiresAtMs, caller })
      this.digestByAccessor.set(token.AccessorID, digest)
    }
    return caller
  }

  private lookUp(secret: string, digest: string, remote: RemoteResolution): Promise<AclToken | undefined> {
    const running = this.lookups.get(digest)
    if (running !== undefined) return running
    this.counts.remoteLookups += 1
    if (this.lookups.size >= REMOTE_ENTRIES_MAX) return remote.lookup(secret)
    const started = remote.lookup(secret).finally(() => this.lookups.delete(digest))
    this.lookups.set(digest, started)
    started.catch(noop)
    return started
  }

  /**
   * A secret this datacenter does not hold, resolved by the primary (remote.lookup) and remembered for remote.ttlMs;
   * its policies and roles are this datacenter's. Not in the authorizer cache: a remembered answer expires by time,
   * not by a write here.
   */
  private async resolveRemotely(secret: string, digest: string, nowMs: number, remote: RemoteResolution): Promise<Caller> {
    let entry = this.remote.get(digest)
    const holdsMs = entry?.token === undefined ? Math.min(NEGATIVE_TTL_MS, remote.ttlMs) : remote.ttlMs
    if (entry === undefined || nowMs - entry.fetchedAtMs >= holdsMs) {
      try {
        entry = { token: await this.lookUp(secret, digest, remote), fetchedAtMs: nowMs }
        this.remote.delete(digest)
        if (this.remote.size >= REMOTE_ENTRIES_MAX) this.remote.delete(this.remote.keys().next().value as string)
        this.remote.set(digest, entry)
      } catch (error) {
        // Reached but no answer (busy, failing): the request fails with that, whatever acl.down_policy says.
        if (!(error instanceof WardenError) || !PRIMARY_DOWN.has(error.code)) throw error
        // The primary cannot be reached: acl.down_policy.
        if (remote.downPolicy === 'allow') return allowAll(secret)
        if (remote.downPolicy === 'deny' || entry === undefined) throw new AclNotFoundError()
        // extend-cache, async-cache: what the primary said last, however old.
      }
    }
    const token = entry.token
    // A local token of the primary stays there: it is unknown in every other datacenter (Consul #7381).
    if (token === undefined || token.Local || isExpired(token, nowMs)) throw new AclNotFoundError()
    const authorization = await authorizeToken(this.state.reader, token, this.settings.datacenter, this.settings.defaultPolicy)
    return { token, accessorID: token.AccessorID, permissions: permissionsOf(authorization.authorizer) }
  }
}

/** The rejection of a shared lookup is handled by each caller that awaits it. */
function noop(): void {}
/** acl.down_policy allow: the primary is down and the request goes through, whoever sent it (Consul's "allow"). */
function allowAll(secret: string): Caller {
  const token: AclToken = {
    AccessorID: 'down-policy-allow',
    SecretID: secret,
    Description: 'the primary could not be asked: acl.down_policy is allow',
    Policies: [],
    Roles: [],
    TemplatedPolicies: [],
    ServiceIdentities: [],
    NodeIdentities: [],
    Local: false,
    AuthMethod: '',
    CreateTime: new Date(0).toISOString(),
    Namespace: 'default',
    Hash: '',
    CreateIndex: 0,
    ModifyIndex: 0,
  }
  return { token, accessorID: token.AccessorID, permissions: { allows: () => true, allowsKeyWritePrefix: () => true } }
}

/** What a request may do, as its token's authorizer decides. */
function permissionsOf(authorizer: Authorizer): Permissions {
  return {
    allows: (resource, access, name) => authorizer.check(resource, access, name),
    allowsKeyWritePrefix: (prefix) => authorizer.keyWritePrefix(prefix),
  }
}
