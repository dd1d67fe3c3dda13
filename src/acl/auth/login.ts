/**
 * A login, up to the token it asks for: verify the bearer token with the method's type, bind the identity through
 * the method's binding rules and namespace rules, and describe the token. What remains (roles by name, the method
 * still being there) is decided when the login command is applied.
 */
import { InvalidInputError } from '../../lib/errors.js'
import type { AclAuthMethod, AclBindingRule } from '../../state/records.js'
import { bindIdentity, isEmptyBinding, type Bindings } from './binding.js'
import { BindingError } from './errors.js'
import type { Identity } from './identity.js'
import { sharedKeyCaches, validateJwt, type JwtConfig, type KeyCaches } from './jwt-validator.js'
import { validateKubernetes, type KubernetesConfig } from './kubernetes-validator.js'
import { validateAwsIam, type AwsIamConfig } from './aws-iam-validator.js'
import { bindNamespace } from './namespace-rules.js'

export const LOGIN_DESCRIPTION = 'token created via login'

export async function verifyBearerToken(method: AclAuthMethod, bearerToken: string, nowMs: number, caches: KeyCaches = sharedKeyCaches): Promise<Identity> {
  switch (method.Type) {
    case 'jwt':
      return validateJwt(method.Config as JwtConfig, bearerToken, nowMs, caches)
    case 'kubernetes':
      return validateKubernetes(method.Config as unknown as KubernetesConfig, bearerToken)
    case 'aws-iam':
      return validateAwsIam(method.Config as unknown as AwsIamConfig, bearerToken)
    default:
      // oidc logs in through the browser flow (auth URL and callback), never with a bearer token.
      throw new InvalidInputError(
        'AuthMethod',
        `auth method "${method.Name}" is of type ${method.Type}, which logs in through the browser (/v1/acl/oidc/auth-url, then /v1/acl/oidc/callback), not with a bearer token`,
      )
  }
}

export interface LoginPlan {
  bindings: Bindings
  Namespace: string
}

/** The bindings and namespace for a verified identity; refuses a login that would give the token nothing. */
export function planLogin(method: AclAuthMethod, rules: readonly AclBindingRule[], identity: Identity, datacenter: string): LoginPlan {
  const bindings = bindIdentity(rules, identity, datacenter)
  if (isEmptyBinding(bindings)) {
    throw new BindingError(
      `login through auth method "${method.Name}" yields no privilege: no binding rule matches the identity`,
      rules.length === 0 ? `auth method "${method.Name}" has no binding rules` : `none of the ${rules.length} binding rules of auth method "${method.Name}" matches the identity`,
    )
  }
  return { bindings, Namespace: bindNamespace(method, identity) }
}

/**
 * Consul's BuildTokenDescription: the prefix, then `: ` and the Meta as JSON when there is any. Go's json.Marshal
 * sorts map keys and escapes <, > and & (and U+2028/U+2029), so the same Meta gives the same bytes as in Consul.
 */
export function loginDescription(meta: Readonly<Record<string, string>> | undefined): string {
  const keys = Object.keys(meta ?? {}).sort()
  if (meta === undefined || keys.length === 0) return LOGIN_DESCRIPTION
  const sorted: Record<string, string> = {}
  for (const key of keys) sorted[key] = meta[key] ?? ''
  const json = JSON.stringify(sorted).replace(/[<>&\u2028\u2029]/g, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`)
  return `${LOGIN_DESCRIPTION}: ${json}`
}
