/**
 * The jwt auth method: a bearer token is a JWS whose signature is checked with jose against the method's keys
 * (JWTValidationPubKeys, a JWKS fetched from JWKSURL, or the JWKS named by OIDC discovery), and whose claims are
 * checked the way Consul's go-sso does (internal/go-sso/oidcauth/jwt.go):
 *
 * - a token needs at least one of iat, nbf, exp. Without exp it expires ExpirationLeeway (default 150 s) after the
 *   later of iat and nbf; without nbf it is valid from iat, or NotBeforeLeeway (default 150 s) before exp. A
 *   negative leeway means none.
 * - nbf, exp and iat are compared with the clock allowing ClockSkewLeeway (default 60 s; negative means none).
 * - iss must equal BoundIssuer when it is set (with OIDC discovery, the discovered issuer as well).
 * - aud must contain one of BoundAudiences when they are set; a token with an audience and a method that binds none
 *   is refused (OIDC discovery is lenient there, as Consul is).
 *
 * Signing algorithms: JWTSupportedAlgs when set. Otherwise RS256 with OIDC discovery (go-oidc's default) and any
 * asymmetric algorithm the key fits for static keys and JWKS (Consul does not restrict those). HMAC and `none` are
 * never accepted: the keys are public.
 */
import { createPublicKey, type KeyObject } from 'node:crypto'
import { compactVerify, decodeProtectedHeader, type JWSAlgorithm } from 'jose'
import { parseDuration } from '../../lib/duration.js'
import { JWT_SIGNING_ALGORITHMS } from '../auth-method-config.js'
import { formatTime } from '../../lib/ids.js'
import { InvalidBearerTokenError } from './errors.js'
import { jwtIdentity, type Identity } from './identity.js'
import { DiscoveryCache, JwksCache, type DiscoveredProvider } from './key-sets.js'

const ASYMMETRIC_ALGORITHMS: JWSAlgorithm[] = [...JWT_SIGNING_ALGORITHMS]
const DEFAULT_LEEWAY_SECONDS = 150
const DEFAULT_CLOCK_SKEW_SECONDS = 60

export interface JwtConfig {
  JWTValidationPubKeys?: string[]
  JWKSURL?: string
  JWKSCACert?: string
  OIDCDiscoveryURL?: string
  OIDCDiscoveryCACert?: string
  BoundIssuer?: string
  BoundAudiences?: string[]
  ClaimMappings?: Record<string, string>
  ListClaimMappings?: Record<string, string>
  JWTSupportedAlgs?: string[]
  ExpirationLeeway?: string
  NotBeforeLeeway?: string
  ClockSkewLeeway?: string
}

export interface KeyCaches {
  jwks: JwksCache
  discovery: DiscoveryCache
}

/** The caches every login of this process shares. */
export const sharedKeyCaches: KeyCaches = { jwks: new JwksCache(), discovery: new DiscoveryCache() }

export interface ClaimChecks {
  issuer?: string
  audiences: readonly string[]
  /** A token with an audience needs a bound audience (static keys and JWKS), or not (OIDC discovery). */
  strictAudience: boolean
  /** Seconds; already resolved from the config (defaults applied, negative made 0). */
  expirationLeeway: number
  notBeforeLeeway: number
  clockSkewLeeway: number
}

export async function validateJwt(config: JwtConfig, bearerToken: string, nowMs: number, caches: KeyCaches = sharedKeyCaches): Promise<Identity> {
  const header = protectedHeader(bearerToken)
  const discovery = nonEmpty(config.OIDCDiscoveryURL)
  const allowed = allowedAlgorithms(config, discovery ? ['RS256'] : ASYMMETRIC_ALGORITHMS, header)
  let payload: Uint8Array
  let issuer = nonEmpty(config.BoundIssuer) ? config.BoundIssuer : undefined
  if (discovery) {
    const provider = await caches.discovery.provider(config.OIDCDiscoveryURL as string, caOf(config.OIDCDiscoveryCACert))
    payload = await caches.jwks.verify(bearerToken, { url: provider.jwksUri, ...withCa(config.OIDCDiscoveryCACert) }, allowed)
    if (issuer !== undefined && issuer !== provider.issuer) {
      throw new InvalidBearerTokenError(
        'the issuer the discovery document names is not the bound issuer',
        `the discovered issuer ${JSON.stringify(provider.issuer)} is not the bound issuer ${JSON.stringify(issuer)}`,
      )
    }
    issuer = provider.issuer
  } else if (nonEmpty(config.JWKSURL)) {
    payload = await caches.jwks.verify(bearerToken, { url: config.JWKSURL as string, ...withCa(config.JWKSCACert) }, allowed)
  } else {
    payload = await verifyWithStaticKeys(bearerToken, config.JWTValidationPubKeys ?? [], allowed)
  }
  const claims = parseClaims(payload)
  checkClaims(
    claims,
    {
      ...(issuer === undefined ? {} : { issuer }),
      audiences: config.BoundAudiences ?? [],
      strictAudience: !discovery,
      expirationLeeway: leewaySeconds(config.ExpirationLeeway, DEFAULT_LEEWAY_SECONDS),
      notBeforeLeeway: leewaySeconds(config.NotBeforeLeeway, DEFAULT_LEEWAY_SECONDS),
      clockSkewLeeway: leewaySeconds(config.ClockSkewLeeway, DEFAULT_CLOCK_SKEW_SECONDS),
    },
    nowMs,
    discovery,
  )
  return jwtIdentity(claims, config.ClaimMappings, config.ListClaimMappings)
}

/** An oidc method's Config, as far as the browser flow reads it. */
export interface OidcConfig extends JwtConfig {
  OIDCDiscoveryURL: string
  OIDCClientID: string
  OIDCClientSecret: string
  AllowedRedirectURIs: string[]
  OIDCScopes?: string[]
  OIDCACRValues?: string[]
}

/**
 * The claims of an ID token the provider of an oidc method issued at the end of its browser flow: signed with a key of
 * the provider's JWKS (RS256 unless JWTSupportedAlgs says otherwise), issued by the provider, with an expiry, for this
 * client (its aud holds OIDCClientID, or one of BoundAudiences when those are set, as Consul's cap library checks),
 * and carrying the nonce the flow sent.
 */
export async function validateIdToken(
  config: OidcConfig,
  provider: DiscoveredProvider,
  idToken: string,
  nonce: string,
  nowMs: number,
  caches: KeyCaches = sharedKeyCaches,
): Promise<Identity> {
  const header = protectedHeader(idToken)
  const allowed = allowedAlgorithms(config, ['RS256'], header)
  const payload = await caches.jwks.verify(idToken, { url: provider.jwksUri, ...withCa(config.OIDCDiscoveryCACert) }, allowed)
  const claims = parseClaims(payload)
  const bound = config.BoundAudiences ?? []
  checkClaims(
    claims,
    {
      issuer: provider.issuer,
      audiences: bound.length > 0 ? bound : [config.OIDCClientID],
      strictAudience: true,
      expirationLeeway: DEFAULT_LEEWAY_SECONDS,
      notBeforeLeeway: DEFAULT_LEEWAY_SECONDS,
      clockSkewLeeway: leewaySeconds(config.ClockSkewLeeway, DEFAULT_CLOCK_SKEW_SECONDS),
    },
    nowMs,
    true,
  )
  // Compared as strings of public length: the nonce is not a secret once the provider has seen it.
  if (claims.nonce !== nonce) throw new InvalidBearerTokenError('the ID token does not carry the nonce of this login')
  return jwtIdentity(claims, config.ClaimMappings, config.ListClaimMappings)
}

/**
 * The algorithms a token may be signed with (JWTSupportedAlgs, else `defaults`); refuses a token whose header names
 * another. The caller is told which algorithm was refused, the log which ones are allowed (a setting).
 */
function allowedAlgorithms(config: JwtConfig, defaults: readonly JWSAlgorithm[], header: { alg?: unknown }): JWSAlgorithm[] {
  const allowed = (config.JWTSupportedAlgs ?? []).length > 0 ? (config.JWTSupportedAlgs as JWSAlgorithm[]) : [...defaults]
  if (typeof header.alg !== 'string' || !allowed.includes(header.alg)) {
    const alg = JSON.stringify(header.alg ?? null)
    throw new InvalidBearerTokenError(`signing algorithm ${alg} is not allowed`, `signing algorithm ${alg} is not allowed (allowed: ${allowed.join(', ')})`)
  }
  return allowed
}

function nonEmpty(value: string | undefined): boolean {
  return value !== undefined && value !== ''
}

/** A CA certificate setting, or undefined when it is unset or empty. */
export function caOf(caCert: string | undefined): string | undefined {
  return caCert === undefined || caCert === '' ? undefined : caCert
}

/** Request options carrying a CA certificate setting, when it is set. */
export function withCa(caCert: string | undefined): { caCert?: string } {
  const ca = caOf(caCert)
  return ca === undefined ? {} : { caCert: ca }
}

/** 0 (or unset) means the default, a negative value means no leeway; seconds, as Go's Duration.Seconds() is used. */
export function leewaySeconds(setting: string | undefined, defaultSeconds: number): number {
  const ms = setting === undefined || setting === '' ? 0 : (parseDuration(setting) ?? 0)
  if (ms < 0) return 0
  if (ms === 0) return defaultSeconds
  return ms / 1000
}

function protectedHeader(token: string): { alg?: unknown; kid?: unknown } {
  try {
    return decodeProtectedHeader(token)
  } catch (error) {
    throw new InvalidBearerTokenError(`it is not a JWT (${(error as Error).message})`)
  }
}

async function verifyWithStaticKeys(token: string, pems: readonly string[], algorithms: JWSAlgorithm[]): Promise<Uint8Array> {
  for (const pem of pems) {
    let key: KeyObject
    try {
      key = createPublicKey(pem)
    } catch {
      // Keys are checked when the method is written; one that no longer parses verifies nothing.
      continue
    }
    try {
      return (await compactVerify(token, key, { algorithms })).payload
    } catch {
      // A signature that does not verify, or a key of another type than the algorithm: try the next key.
    }
  }
  throw new InvalidBearerTokenError(
    "the signature does not verify with the auth method's keys",
    `the signature does not verify with any of the auth method's ${pems.length} JWTValidationPubKeys`,
  )
}

function parseClaims(payload: Uint8Array): Record<string, unknown> {
  let claims: unknown
  try {
    claims = JSON.parse(Buffer.from(payload).toString('utf8'))
  } catch {
    throw new InvalidBearerTokenError('its payload is not a JSON object of claims')
  }
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) throw new InvalidBearerTokenError('its payload is not a JSON object of claims')
  return claims as Record<string, unknown>
}

function numericDate(claims: Record<string, unknown>, name: 'iat' | 'nbf' | 'exp'): number {
  const value = claims[name]
  if (value === undefined || value === null) return 0
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new InvalidBearerTokenError(`claim ${name} is not a number of seconds`)
  return Math.trunc(value)
}

function at(seconds: number): string {
  return formatTime(seconds * 1000)
}

/** The time and issuer and audience checks, in Consul's order. Throws InvalidBearerTokenError saying which failed. */
export function checkClaims(claims: Record<string, unknown>, checks: ClaimChecks, nowMs: number, requireExpiry = false): void {
  const issuedAt = numericDate(claims, 'iat')
  let notBefore = numericDate(claims, 'nbf')
  let expiry = numericDate(claims, 'exp')
  if (requireExpiry && expiry === 0) throw new InvalidBearerTokenError('it has no expiration time (exp)')
  if (issuedAt === 0 && notBefore === 0 && expiry === 0) {
    throw new InvalidBearerTokenError('it has no issue time (iat), not-before time (nbf) or expiration time (exp)')
  }
  if (expiry === 0) expiry = Math.max(issuedAt, notBefore) + checks.expirationLeeway
  if (notBefore === 0) notBefore = issuedAt !== 0 ? issuedAt : expiry - checks.notBeforeLeeway
  if (checks.issuer !== undefined && claims.iss !== checks.issuer) {
    const iss = JSON.stringify(claims.iss ?? null)
    throw new InvalidBearerTokenError(`its issuer (iss) ${iss} is not the bound issuer`, `its issuer (iss) ${iss} is not the bound issuer ${JSON.stringify(checks.issuer)}`)
  }
  const now = nowMs / 1000
  const skew = checks.clockSkewLeeway
  if (now + skew < notBefore) throw new InvalidBearerTokenError(`it is not valid yet (not before ${at(notBefore)}, leeway ${skew}s)`)
  if (now - skew > expiry) throw new InvalidBearerTokenError(`it has expired (at ${at(expiry)}, leeway ${skew}s)`)
  if (issuedAt !== 0 && now + skew < issuedAt) throw new InvalidBearerTokenError(`it was issued in the future (iat ${at(issuedAt)}, leeway ${skew}s)`)
  checkAudience(claims.aud, checks)
}

function checkAudience(claim: unknown, checks: ClaimChecks): void {
  const audiences = typeof claim === 'string' ? [claim] : Array.isArray(claim) ? claim.filter((item): item is string => typeof item === 'string') : []
  if (checks.audiences.length === 0) {
    if (checks.strictAudience && audiences.length > 0) {
      throw new InvalidBearerTokenError(
        `its audience (aud) ${JSON.stringify(audiences)} is not accepted`,
        `it has an audience (aud) ${JSON.stringify(audiences)} but the auth method binds no audiences`,
      )
    }
    return
  }
  if (!checks.audiences.some((audience) => audiences.includes(audience))) {
    throw new InvalidBearerTokenError(
      `its audience (aud) ${JSON.stringify(audiences)} is not accepted`,
      `its audience (aud) ${JSON.stringify(audiences)} matches none of the bound audiences ${JSON.stringify(checks.audiences)}`,
    )
  }
}
