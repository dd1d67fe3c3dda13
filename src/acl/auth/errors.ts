/**
 * The ways a login fails, each a 403 `permission_denied` whose message says why, so that a client (and the operator
 * reading its log) can tell an expired token from a wrong audience without the server's log. Every one of them begins
 * with "Permission denied", the text Consul's clients test for.
 */
import { PermissionDeniedError } from '../../lib/errors.js'

/**
 * A refused login: the message is `prefix` and `reason`, what the caller is told; `logDetail`, when there is one, is
 * what only the agent's log shows (the HTTP layer writes it there, rate-limited).
 */
abstract class LoginRefusal extends PermissionDeniedError {
  constructor(
    prefix: string,
    readonly reason: string,
    readonly logDetail?: string,
  ) {
    super(`${prefix}${reason}`)
  }
}

/**
 * The bearer token is not valid: malformed, badly signed, expired, for another issuer or audience, refused by review.
 * Whoever logs in needs no token, so `reason` says what is wrong with the bearer token without showing the auth
 * method's settings (its bound issuer and audiences, its keys, its algorithms), which only acl:read may read; those go
 * in `logDetail`, for the agent's log.
 */
export class InvalidBearerTokenError extends LoginRefusal {
  override readonly name = 'InvalidBearerTokenError'
  constructor(reason: string, logDetail?: string) {
    super('Permission denied: invalid bearer token: ', reason, logDetail)
  }
}

/**
 * The service that vouches for bearer tokens (a JWKS or discovery endpoint, the Kubernetes TokenReview API) could not
 * be asked or gave an answer that cannot be used. The login is refused, not failed with a 500: nothing on this server
 * is broken, and the message names the service and what went wrong. Whoever logs in may hold no token at all, so the
 * message leaves out where the service is (its URL, the address a connection failed on): that goes in `logDetail`,
 * which the HTTP layer writes to the agent's log only.
 */
export class IdentityServiceError extends LoginRefusal {
  override readonly name = 'IdentityServiceError'
  constructor(reason: string, logDetail?: string) {
    super('Permission denied: cannot verify the bearer token: ', reason, logDetail)
  }
}

/**
 * A URL as the log may show it: scheme, host and path. Credentials in its user part and its query (an access token
 * in a JWKS URL, say) stay out of the log, as every secret does.
 */
export function loggableUrl(url: string | URL): string {
  try {
    const parsed = typeof url === 'string' ? new URL(url) : url
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}${parsed.search === '' ? '' : '?…'}`
  } catch {
    return '(a URL that does not parse)'
  }
}

/**
 * A login gives nothing: no binding rule matches, or one matched but cannot be applied to this identity (an
 * interpolated name is not valid). The caller learns that, not which rule or what it binds (binding rules need
 * acl:read); `logDetail` names the rule, its template and what it gave, for the agent's log.
 */
export class BindingError extends LoginRefusal {
  override readonly name = 'BindingError'
  constructor(reason: string, logDetail?: string) {
    super('Permission denied: ', reason, logDetail)
  }
}

/**
 * The OIDC browser flow failed between its two calls: the state is unknown, changed, expired or for another auth
 * method, the client nonce differs, or the provider would not redeem the code. `logDetail` holds what only the
 * operator should see (the provider's own error answer).
 */
export class OidcLoginError extends LoginRefusal {
  override readonly name = 'OidcLoginError'
  constructor(reason: string, logDetail?: string) {
    super('Permission denied: OIDC login failed: ', reason, logDetail)
  }
}
