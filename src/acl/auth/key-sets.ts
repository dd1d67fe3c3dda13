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
import { IdentityServiceError, InvalidBearerTokenError, loggableUrl } from './errors.js'
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

/** One remote document: the last one fetched, the fetch under way, the last failure. */
interface RemoteEntry<T> {
  value?: T
  fetchedAtMs: number
  inflight?: Promise<T>
  failure?: RecentFailure
  /** When a fetch was last forced before the document's maximum age (a key set's early refresh). */
  forcedRefreshAtMs: number
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
}

/**
 * Remote documents by key, what both caches below are made of: fetched on first use and reused for `maxAgeMs`, one
 * fetch shared by concurrent callers, a failed fetch answered again for `failureCooldownMs`.
 */
class RemoteDocuments<T> {
  private readonly entries: Lru<RemoteEntry<T>>
  private readonly maxAgeMs: number
  private readonly failureCooldownMs: number
  readonly now: () => number
  /** Fetches made, for tests and metrics. */
  fetchCount = 0

  constructor(options: KeySetCacheOptions) {
    this.entries = new Lru(options.entriesMax ?? 64)
    this.maxAgeMs = options.maxAgeMs ?? 10 * 60_000
    this.failureCooldownMs = options.failureCooldownMs ?? 5_000
    this.now = options.now ?? Date.now
  }

  entry(key: string): RemoteEntry<T> {
    let entry = this.entries.get(key)
    if (entry === undefined) {
      entry = { fetchedAtMs: 0, forcedRefreshAtMs: Number.NEGATIVE_INFINITY }
      this.entries.set(key, entry)
    }
    return entry
  }

  /** The document: the one being fetched, the cached one while fresh, the recent failure, or a new fetch. */
  current(entry: RemoteEntry<T>, fetch: () => Promise<T>): Promise<T> {
    if (entry.inflight !== undefined) return entry.inflight
    if (entry.value !== undefined && this.now() - entry.fetchedAtMs < this.maxAgeMs) return Promise.resolve(entry.value)
    if (entry.failure !== undefined && this.now() - entry.failure.atMs < this.failureCooldownMs) return Promise.reject(entry.failure.error)
    return this.fetch(entry, fetch)
  }

  /** Fetches now, whatever is cached (the caller bounds how often). */
  fetch(entry: RemoteEntry<T>, fetch: () => Promise<T>): Promise<T> {
    this.fetchCount += 1
    const inflight = fetch()
    entry.inflight = inflight
    // The entry forgets the fetch whichever way it ends; a failure reaches the caller through `inflight` itself, and
    // is kept to answer the callers of the next cooldown.
    inflight.then(
      (value) => {
        entry.value = value
        entry.fetchedAtMs = this.now()
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

export class JwksCache {
  private readonly documents: RemoteDocuments<LocalJWKSet>
  private readonly refreshCooldownMs: number

  constructor(options: KeySetCacheOptions = {}) {
    this.documents = new RemoteDocuments(options)
    this.refreshCooldownMs = options.refreshCooldownMs ?? 5_000
  }

  /** Fetches made, for tests and metrics. */
  get fetchCount(): number {
    return this.documents.fetchCount
  }

  /** Verifies the JWS signature with the set's key for its kid and alg; returns the payload bytes. */
  async verify(jws: string, source: KeySetSource, algorithms: JWSAlgorithm[]): Promise<Uint8Array> {
    const entry = this.documents.entry(`${source.url}\u0000${source.caCert ?? ''}`)
    const fetchSet = (): Promise<LocalJWKSet> => fetchKeySet(source)
    const tried = await this.documents.current(entry, fetchSet)
    try {
      return await verifyWithSet(jws, tried, algorithms)
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) throw error
    }
    // No key in the set has the token's kid: the provider may have rotated. Use a set fetched since, if any; else
    // fetch now unless the last such refresh was too recent.
    const { now } = this.documents
    let fresher: LocalJWKSet
    if (entry.inflight !== undefined) fresher = await entry.inflight
    else if (entry.value !== undefined && entry.value !== tried) fresher = entry.value
    else if (now() - entry.forcedRefreshAtMs >= this.refreshCooldownMs) {
      entry.forcedRefreshAtMs = now()
      fresher = await this.documents.fetch(entry, fetchSet)
    } else {
      throw noMatchingKey(jws, 'and the key set was refreshed too recently to fetch it again')
    }
    try {
      return await verifyWithSet(jws, fresher, algorithms)
    } catch (error) {
      if (error instanceof errors.JWKSNoMatchingKey) throw noMatchingKey(jws, 'even after fetching the key set again')
      throw error
    }
  }
}

async function fetchKeySet(source: KeySetSource): Promise<LocalJWKSet> {
  const { status, body } = await requestJson('fetching the JWKS', source.url, source.caCert === undefined ? {} : { caCert: source.caCert })
  if (status !== 200) throw new IdentityServiceError(`fetching the JWKS answered ${status}`, `fetching the JWKS at ${loggableUrl(source.url)} answered ${status}`)
  try {
    return createLocalJWKSet(body as JSONWebKeySet)
  } catch (error) {
    const reason = `is not a valid JSON Web Key Set (${(error as Error).message})`
    throw new IdentityServiceError(`the JWKS ${reason}`, `the JWKS at ${loggableUrl(source.url)} ${reason}`)
  }
}

function noMatchingKey(jws: string, detail: string): InvalidBearerTokenError {
  const header = headerOf(jws)
  return new InvalidBearerTokenError(
    `no key in the JWKS of the auth method matches the token (kid ${JSON.stringify(header.kid ?? null)}, alg ${JSON.stringify(header.alg ?? null)}), ${detail}`,
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
async function verifyWithSet(jws: string, set: LocalJWKSet, algorithms: JWSAlgorithm[]): Promise<Uint8Array> {
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
    throw new InvalidBearerTokenError(`the signature does not verify with the key ${JSON.stringify(kid ?? null)} of the auth method's JWKS`)
  }
}

export interface DiscoveredProvider {
  issuer: string
  jwksUri: string
  /** Where the OIDC browser flow sends the user, and where it redeems the code; absent from a JWT-only provider. */
  authorizationEndpoint?: string
  tokenEndpoint?: string
}

/** OIDC discovery documents, cached like key sets (without the early refresh: they name a JWKS, which has its own). */
export class DiscoveryCache {
  private readonly documents: RemoteDocuments<DiscoveredProvider>

  constructor(options: KeySetCacheOptions = {}) {
    this.documents = new RemoteDocuments(options)
  }

  /** Fetches made, for tests and metrics. */
  get fetchCount(): number {
    return this.documents.fetchCount
  }

  provider(discoveryUrl: string, caCert: string | undefined): Promise<DiscoveredProvider> {
    return this.documents.current(this.documents.entry(`${discoveryUrl}\u0000${caCert ?? ''}`), () => discover(discoveryUrl, caCert))
  }
}

async function discover(discoveryUrl: string, caCert: string | undefined): Promise<DiscoveredProvider> {
  const base = discoveryUrl.replace(/\/+$/, '')
  const url = `${base}/.well-known/openid-configuration`
  const { status, body } = await requestJson('OIDC discovery', url, caCert === undefined ? {} : { caCert })
  if (status !== 200) throw new IdentityServiceError(`OIDC discovery answered ${status}`, `OIDC discovery at ${loggableUrl(url)} answered ${status}`)
  const document = (typeof body === 'object' && body !== null ? body : {}) as {
    issuer?: unknown
    jwks_uri?: unknown
    authorization_endpoint?: unknown
    token_endpoint?: unknown
  }
  if (typeof document.issuer !== 'string' || typeof document.jwks_uri !== 'string') {
    throw new IdentityServiceError('the OIDC discovery document lacks issuer or jwks_uri', `the OIDC discovery document at ${loggableUrl(url)} lacks issuer or jwks_uri`)
  }
  // As go-oidc: a provider must name itself with the URL it was discovered at, or anyone serving the document could
  // claim to be it.
  if (document.issuer.replace(/\/+$/, '') !== base) {
    throw new IdentityServiceError(
      'the OIDC discovery document names an issuer other than the URL it was discovered at',
      `the OIDC discovery document at ${loggableUrl(url)} names issuer ${JSON.stringify(document.issuer)}, not ${JSON.stringify(loggableUrl(discoveryUrl))}`,
    )
  }
  return {
    issuer: document.issuer,
    jwksUri: document.jwks_uri,
    ...(typeof document.authorization_endpoint === 'string' ? { authorizationEndpoint: document.authorization_endpoint } : {}),
    ...(typeof document.token_endpoint === 'string' ? { tokenEndpoint: document.token_endpoint } : {}),
  }
}
