/**
 * The OIDC authorization-code flow of an oidc auth method (Consul's /v1/acl/oidc/auth-url and /v1/acl/oidc/callback):
 *
 * 1. auth URL: the caller names the method, where the provider should send the browser back (one of the method's
 *    AllowedRedirectURIs) and its own nonce; warden answers the provider's authorization URL, with a fresh nonce for
 *    the ID token and the sealed state (oidc-state.ts) as `state`.
 * 2. callback: the caller hands back the `state` and `code` the provider appended to the redirect, and its nonce;
 *    warden opens the state, redeems the code at the provider's token endpoint (client_secret_basic), and validates
 *    the ID token (jwt-validator.ts). The identity it yields is bound like any login's.
 *
 * Not done, and said in the README: the provider's userinfo endpoint is not read (claims come from the ID token
 * alone), and PKCE and private-key client assertions are not offered.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { InvalidInputError } from '../../lib/errors.js'
import type { AclAuthMethod } from '../../state/records.js'
import { IdentityServiceError, OidcLoginError, loggableUrl } from './errors.js'
import { requestJson } from './http-client.js'
import type { Identity } from './identity.js'
import { caOf, sharedKeyCaches, validateIdToken, withCa, type KeyCaches, type OidcConfig } from './jwt-validator.js'
import type { DiscoveredProvider } from './key-sets.js'
import type { OidcLoginState, OidcStateSealer } from './oidc-state.js'

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1'])

/**
 * Whether `uri` is one of the allowed redirect URIs: exactly, or, for a loopback address, with any port (RFC 8252
 * 7.3: a native client such as the CLI listens on whatever port is free), as Consul and Vault match them.
 */
export function validRedirect(uri: string, allowed: readonly string[]): boolean {
  if (allowed.includes(uri)) return true
  let given: URL
  try {
    given = new URL(uri)
  } catch {
    return false
  }
  if (!LOOPBACK_HOSTS.has(given.hostname)) return false
  given.port = ''
  return allowed.some((candidate) => {
    try {
      const allowedUrl = new URL(candidate)
      if (!LOOPBACK_HOSTS.has(allowedUrl.hostname)) return false
      allowedUrl.port = ''
      return allowedUrl.href === given.href
    } catch {
      return false
    }
  })
}

/** Compared in constant time (by digest, so lengths need not match): the client nonce binds a login to its client. */
function sameText(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest())
}

function oidcConfig(method: AclAuthMethod): OidcConfig {
  return method.Config as unknown as OidcConfig
}

async function providerOf(config: OidcConfig, caches: KeyCaches): Promise<DiscoveredProvider & { authorizationEndpoint: string; tokenEndpoint: string }> {
  const provider = await caches.discovery.provider(config.OIDCDiscoveryURL, caOf(config.OIDCDiscoveryCACert))
  if (provider.authorizationEndpoint === undefined || provider.tokenEndpoint === undefined) {
    throw new IdentityServiceError(
      'the OIDC discovery document lacks authorization_endpoint or token_endpoint',
      `the OIDC discovery document of ${loggableUrl(config.OIDCDiscoveryURL)} lacks authorization_endpoint or token_endpoint`,
    )
  }
  return { ...provider, authorizationEndpoint: provider.authorizationEndpoint, tokenEndpoint: provider.tokenEndpoint }
}

export interface AuthUrlRequest {
  redirectUri: string
  clientNonce: string
  meta?: Record<string, string>
}

/** The provider's authorization URL for a new login through `method` (an oidc method). */
export async function oidcAuthUrl(method: AclAuthMethod, request: AuthUrlRequest, sealer: OidcStateSealer, nowMs: number, caches: KeyCaches = sharedKeyCaches): Promise<string> {
  const config = oidcConfig(method)
  if (!validRedirect(request.redirectUri, config.AllowedRedirectURIs ?? [])) {
    throw new InvalidInputError('RedirectURI', `is not one of the auth method's AllowedRedirectURIs: ${JSON.stringify(request.redirectUri)}`)
  }
  const provider = await providerOf(config, caches)
  // 160 bits each, as Consul draws its state and nonce (RFC 6749 10.10).
  const nonce = randomBytes(20).toString('hex')
  const state: OidcLoginState = {
    method: method.Name,
    namespace: method.Namespace,
    redirectUri: request.redirectUri,
    nonce,
    clientNonce: request.clientNonce,
    ...(request.meta === undefined ? {} : { meta: request.meta }),
  }
  const url = new URL(provider.authorizationEndpoint)
  url.searchParams.set('client_id', config.OIDCClientID)
  url.searchParams.set('nonce', nonce)
  url.searchParams.set('redirect_uri', request.redirectUri)
  url.searchParams.set('response_type', 'code')
  url.searchParams.set('scope', ['openid', ...(config.OIDCScopes ?? []).filter((scope) => scope !== 'openid')].join(' '))
  if ((config.OIDCACRValues ?? []).length > 0) url.searchParams.set('acr_values', (config.OIDCACRValues ?? []).join(' '))
  url.searchParams.set('state', sealer.seal(state, nowMs))
  return url.href
}

/**
 * Opens the callback's state for `method`: undefined-safe refusals for a state that is not this cluster's, changed,
 * expired, for another method, or presented with another client nonce.
 */
export function openCallbackState(method: AclAuthMethod, sealed: string, clientNonce: string, sealer: OidcStateSealer, nowMs: number): OidcLoginState {
  const state = sealer.open(sealed, nowMs)
  if (state === undefined) throw new OidcLoginError('the state is unknown, changed or expired; start the login again')
  if (state.method !== method.Name || state.namespace !== method.Namespace) throw new OidcLoginError('the state belongs to another auth method')
  if (!sameText(state.clientNonce, clientNonce)) throw new OidcLoginError('the client nonce is not the one the login started with')
  // The method may have changed since the login started: its redirect URIs are what count now.
  if (!validRedirect(state.redirectUri, oidcConfig(method).AllowedRedirectURIs ?? [])) throw new OidcLoginError("the login's redirect URI is no longer allowed")
  return state
}

/** Redeems the authorization code and validates the ID token it buys: the identity of whoever logged in. */
export async function oidcIdentity(method: AclAuthMethod, state: OidcLoginState, code: string, nowMs: number, caches: KeyCaches = sharedKeyCaches): Promise<Identity> {
  const config = oidcConfig(method)
  const provider = await providerOf(config, caches)
  // client_secret_basic (RFC 6749 2.3.1): both parts form-encoded, then joined and base64-encoded.
  const credentials = Buffer.from(`${encodeURIComponent(config.OIDCClientID)}:${encodeURIComponent(config.OIDCClientSecret)}`, 'utf8').toString('base64')
  const { status, body } = await requestJson('the OIDC token request', provider.tokenEndpoint, {
    method: 'POST',
    headers: { Authorization: `Basic ${credentials}` },
    form: { grant_type: 'authorization_code', code, redirect_uri: state.redirectUri },
    ...withCa(config.OIDCDiscoveryCACert),
  })
  const answer = (typeof body === 'object' && body !== null ? body : {}) as { id_token?: unknown; error?: unknown; error_description?: unknown }
  if (status !== 200) {
    const error = typeof answer.error === 'string' ? answer.error : 'no error code'
    throw new OidcLoginError(
      `the provider would not redeem the authorization code (${status}, ${error})`,
      `the OIDC token endpoint ${loggableUrl(provider.tokenEndpoint)} answered ${status}: ${JSON.stringify(answer).slice(0, 512)}`,
    )
  }
  if (typeof answer.id_token !== 'string' || answer.id_token === '') throw new OidcLoginError('the provider answered no id_token')
  return validateIdToken(config, provider, answer.id_token, state.nonce, nowMs, caches)
}
