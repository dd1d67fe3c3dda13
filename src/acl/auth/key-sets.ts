/**
 * Remote keys for jwt auth methods, cached: JWKS documents by URL (and CA), and OIDC discovery documents by discovery
 * URL. A key set is fetched on first use, used for `maxAgeMs`, and fetched again early when a token names a key id
 * the cached set does not have (the provider rotated its keys). That early refresh is bounded: at most one per
 * `refreshCooldownMs` per set, so tokens with made-up key ids cannot turn the agent into a load generator against
 * the provider. Concurrent logins share one fetch. A failed fetch is remembered for `failureCooldownMs`: logins
 * meanwhile fail with the same error without a fetch, so anonymous login attempts against an unreachable provider
 * cost one fetch per cooldown, not one each. Both caches hold a bounded number of entries and drop the least
 * recently used.
 */
import { compactVerify, createLocalJWKSet, errors, type CryptoKey, type JSONWebKeySet, type JWSAlgorithm, type LocalJWKSet } from 'jose'
import { IdentityServiceError, InvalidBearerTokenError } from './errors.js'
import { requestJson } from './http-client.js'

export interface KeySetSource {
  url: string
  caCert?: string
}

export interface KeySetCacheOptions {
  entriesMax?: number
  maxAgeMs?: number
  refreshCooldownMs?: number
  /** How long a failed fetch answers for its URL without a new attempt (default 5 s). */
  failureCooldownMs?: number
  now?: () => number
}

/** The last failed fetch of one URL, answered again until the cooldown has passed. */
interface RecentFailure {
  error: unknown
  atMs: number
}

interface KeySetEntry {
  set?: LocalJWKSet
  fetchedAtMs: number
  forcedRefreshAtMs: number
  inflight?: Promise<LocalJWKSet>
  failure?: RecentFailure
}

/** A Map used as an LRU: reading an entry moves it to the end; inserting past the bound drops the first. */
class Lru<V> {
  private readonly map = new Map<string, V>()
  constructor(private readonly entriesMax: number) {}

  get(key: string): V | undefined {
    const value = this.map.get(key)
    if (value !== undefined) {
      this.map.delete(key)
      this.map.set(key, value)
    }
    return value
  }

  set(key: string, value: V): void {
    this.map.delete(key)
    this.map.set(key, value)
    if (this.map.size > this.entriesMax) this.map.delete(this.map.keys().next().value as string)
  }

  get size(): number {
    return this.map.size
  }
}

export class JwksCache {
  private readonly entries: Lru<KeySetEntry>
  private readonly maxAgeMs: number
  private readonly refreshCooldownMs: number
  private readonly failureCooldownMs: number
  private readonly now: () => number
  /** Fetches made, for tests and metrics. */
  fetchCount = 0

  constructor(options: KeySetCacheOptions = {}) {
    this.entries = new Lru(options.entriesMax ?? 64)
    this.maxAgeMs = options.maxAgeMs ?? 10 * 60_000
    this.refreshCooldownMs = options.refreshCooldownMs ?? 5_000
    this.failureCooldownMs = options.failureCooldownMs ?? 5_000
    this.now = options.now ?? Date.now
  }

  /** Verifies the JWS signature with the set's key for its kid and alg; returns the payload bytes. */
  async verify(jws: string, source: KeySetSource, algorithms: JWSAlgorithm[]): Promise<Uint8Array> {
    const key = `${source.url}\u0000${source.caCert ?? ''}`
    let entry = this.entries.get(key)
    if (entry === undefined) {
      entry = { fetchedAtMs: 0, forcedRefreshAtMs: Number.NEGATIVE_INFINITY }
      this.entries.set(key, entry)
    }
    const tried = await this.current(entry, source)
    try {
      return await verifyWithSet(jws, tried, algorithms, source.url)
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) throw error
    }
    // No key in the set has the token's kid: the provider may have rotated. Use a set fetched since, if any; else
    // fetch now unless the last such refresh was too recent.
    let fresher: LocalJWKSet
    if (entry.inflight !== undefined) fresher = await entry.inflight
    else if (entry.set !== undefined && entry.set !== tried) fresher = entry.set
    else if (this.now() - entry.forcedRefreshAtMs >= this.refreshCooldownMs) {
      entry.forcedRefreshAtMs = this.now()
      fresher = await this.fetch(entry, source)
    } else {
      throw noMatchingKey(jws, source.url, 'and the key set was refreshed too recently to fetch it again')
    }
    try {
      return await verifyWithSet(jws, fresher, algorithms, source.url)
    } catch (error) {
      if (error instanceof errors.JWKSNoMatchingKey) throw noMatchingKey(jws, source.url, 'even after fetching the key set again')
      throw error
    }
  }

  private async current(entry: KeySetEntry, source: KeySetSource): Promise<LocalJWKSet> {
    if (entry.inflight !== undefined) return entry.inflight
    if (entry.set !== undefined && this.now() - entry.fetchedAtMs < this.maxAgeMs) return entry.set
    if (entry.failure !== undefined && this.now() - entry.failure.atMs < this.failureCooldownMs) throw entry.failure.error
    return this.fetch(entry, source)
  }

  private fetch(entry: KeySetEntry, source: KeySetSource): Promise<LocalJWKSet> {
    const inflight = (async () => {
      this.fetchCount += 1
      const { status, body } = await requestJson('fetching the JWKS', source.url, source.caCert === undefined ? {} : { caCert: source.caCert })
      if (status !== 200) throw new IdentityServiceError(`fetching the JWKS at ${source.url} answered ${status}`)
      let set: LocalJWKSet
      try {
        set = createLocalJWKSet(body as JSONWebKeySet)
      } catch (error) {
        throw new IdentityServiceError(`the JWKS at ${source.url} is not a valid JSON Web Key Set (${(error as Error).message})`)
      }
      entry.set = set
      entry.fetchedAtMs = this.now()
      return set
    })()
    entry.inflight = inflight
    // The entry forgets the fetch whichever way it ends; a failure reaches the caller through `inflight` itself, and
    // is kept to answer the logins of the next cooldown.
    inflight.then(
      () => {
        entry.inflight = undefined
        entry.failure = undefined
      },
      (error: unknown) => {
        entry.inflight = undefined
        entry.failure = { error, atMs: this.now() }
      },
    )
    return inflight
  }
}

function noMatchingKey(jws: string, url: string, detail: string): InvalidBearerTokenError {
  const header = headerOf(jws)
  return new InvalidBearerTokenError(
    `no key in the JWKS at ${url} matches the token (kid ${JSON.stringify(header.kid ?? null)}, alg ${JSON.stringify(header.alg ?? null)}), ${detail}`,
  )
}

function headerOf(jws: string): { kid?: unknown; alg?: unknown } {
  try {
    return JSON.parse(Buffer.from(jws.split('.')[0] ?? '', 'base64url').toString('utf8')) as { kid?: unknown; alg?: unknown }
  } catch {
    return {}
  }
}

/**
 * One verification against a set. When several keys match the token's kid and alg, each is tried (jose leaves that
 * to the caller). Signature failures become InvalidBearerTokenError; JWKSNoMatchingKey is passed up for the refresh.
 */
async function verifyWithSet(jws: string, set: LocalJWKSet, algorithms: JWSAlgorithm[], url: string): Promise<Uint8Array> {
  try {
    return (await compactVerify(jws, set, { algorithms })).payload
  } catch (error) {
    if (error instanceof errors.JWKSNoMatchingKey) throw error
    if (error instanceof errors.JWKSMultipleMatchingKeys) {
      for await (const key of error as unknown as AsyncIterable<CryptoKey>) {
        try {
          return (await compactVerify(jws, key, { algorithms })).payload
        } catch {
          // This candidate did not verify; the next one may.
        }
      }
    }
    const kid = headerOf(jws).kid
    throw new InvalidBearerTokenError(`the signature does not verify with the key ${JSON.stringify(kid ?? null)} of the JWKS at ${url}`)
  }
}

export interface DiscoveredProvider {
  issuer: string
  jwksUri: string
}

/** OIDC discovery documents, cached like key sets (without the early refresh: they name a JWKS, which has its own). */
export class DiscoveryCache {
  private readonly entries: Lru<{ provider?: DiscoveredProvider; fetchedAtMs: number; inflight?: Promise<DiscoveredProvider>; failure?: RecentFailure }>
  private readonly maxAgeMs: number
  private readonly failureCooldownMs: number
  private readonly now: () => number
  /** Fetches made, for tests and metrics. */
  fetchCount = 0

  constructor(options: KeySetCacheOptions = {}) {
    this.entries = new Lru(options.entriesMax ?? 64)
    this.maxAgeMs = options.maxAgeMs ?? 10 * 60_000
    this.failureCooldownMs = options.failureCooldownMs ?? 5_000
    this.now = options.now ?? Date.now
  }

  /** The provider discovered at `discoveryUrl`: cached, one fetch shared by concurrent logins, failures kept a while. */
  async provider(discoveryUrl: string, caCert: string | undefined): Promise<DiscoveredProvider> {
    const key = `${discoveryUrl}\u0000${caCert ?? ''}`
    let entry = this.entries.get(key)
    if (entry === undefined) {
      entry = { fetchedAtMs: 0 }
      this.entries.set(key, entry)
    }
    if (entry.inflight !== undefined) return entry.inflight
    if (entry.provider !== undefined && this.now() - entry.fetchedAtMs < this.maxAgeMs) return entry.provider
    if (entry.failure !== undefined && this.now() - entry.failure.atMs < this.failureCooldownMs) throw entry.failure.error
    const fetching = entry
    const inflight = this.discover(discoveryUrl, caCert)
    fetching.inflight = inflight
    inflight.then(
      (provider) => {
        fetching.provider = provider
        fetching.fetchedAtMs = this.now()
        fetching.inflight = undefined
        fetching.failure = undefined
      },
      (error: unknown) => {
        fetching.inflight = undefined
        fetching.failure = { error, atMs: this.now() }
      },
    )
    return inflight
  }

  private async discover(discoveryUrl: string, caCert: string | undefined): Promise<DiscoveredProvider> {
    this.fetchCount += 1
    const base = discoveryUrl.replace(/\/+$/, '')
    const url = `${base}/.well-known/openid-configuration`
    const { status, body } = await requestJson('OIDC discovery', url, caCert === undefined ? {} : { caCert })
    if (status !== 200) throw new IdentityServiceError(`OIDC discovery at ${url} answered ${status}`)
    const document = (typeof body === 'object' && body !== null ? body : {}) as { issuer?: unknown; jwks_uri?: unknown }
    if (typeof document.issuer !== 'string' || typeof document.jwks_uri !== 'string') {
      throw new IdentityServiceError(`the OIDC discovery document at ${url} lacks issuer or jwks_uri`)
    }
    // As go-oidc: a provider must name itself with the URL it was discovered at, or anyone serving the document
    // could claim to be it.
    if (document.issuer.replace(/\/+$/, '') !== base) {
      throw new IdentityServiceError(`the OIDC discovery document at ${url} names issuer ${JSON.stringify(document.issuer)}, not ${JSON.stringify(discoveryUrl)}`)
    }
    return { issuer: document.issuer, jwksUri: document.jwks_uri }
  }
}
