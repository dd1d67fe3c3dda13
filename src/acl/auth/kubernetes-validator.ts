/**
 * The kubernetes auth method: the bearer token (a service account JWT) is sent to the API server's TokenReview API at
 * Host, over TLS trusting only CACert, with ServiceAccountJWT as the reviewer's own credential. An authenticated answer
 * names the user `system:serviceaccount:<namespace>:<name>`, which with the user's uid becomes the identity
 * (`serviceaccount.namespace`, `.name`, `.uid`), as Consul's kubeauth does. Consul also reads the service account's
 * `consul.hashicorp.com/service-name` annotation to override the name; warden does not (see README, Divergences).
 */
import { decodeProtectedHeader } from 'jose'
import { IdentityServiceError, InvalidBearerTokenError, loggableUrl } from './errors.js'
import { requestJson } from './http-client.js'
import { kubernetesIdentity, type Identity } from './identity.js'

export interface KubernetesConfig {
  Host: string
  CACert: string
  ServiceAccountJWT: string
}

export const TOKEN_REVIEW_PATH = '/apis/authentication.k8s.io/v1/tokenreviews'

interface TokenReviewStatus {
  authenticated?: boolean
  error?: string
  user?: { username?: string; uid?: string }
}

export async function validateKubernetes(config: KubernetesConfig, bearerToken: string): Promise<Identity> {
  try {
    decodeProtectedHeader(bearerToken)
  } catch (error) {
    // Not worth a round trip to the API server: a service account token is always a JWT.
    throw new InvalidBearerTokenError(`it is not a JWT (${(error as Error).message})`)
  }
  const url = config.Host.replace(/\/+$/, '') + TOKEN_REVIEW_PATH
  const { status, body } = await requestJson('the Kubernetes TokenReview request', url, {
    method: 'POST',
    headers: { Authorization: `Bearer ${config.ServiceAccountJWT.trim()}` },
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: bearerToken } },
    caCert: config.CACert,
  })
  if (status !== 200 && status !== 201) {
    const message = typeof body === 'object' && body !== null && typeof (body as { message?: unknown }).message === 'string' ? `: ${(body as { message: string }).message}` : ''
    // The API server's message names the reviewer's service account: the operator's log gets it, the caller does not.
    throw new IdentityServiceError(`the Kubernetes TokenReview request answered ${status}`, `the Kubernetes TokenReview request at ${loggableUrl(url)} answered ${status}${message}`)
  }
  const review = (typeof body === 'object' && body !== null ? (body as { status?: TokenReviewStatus }).status : undefined) ?? {}
  if (typeof review.error === 'string' && review.error !== '') throw new InvalidBearerTokenError(`the Kubernetes TokenReview refused it: ${review.error}`)
  if (review.authenticated !== true) throw new InvalidBearerTokenError('the Kubernetes TokenReview did not authenticate it')
  const username = review.user?.username ?? ''
  const parts = username.split(':')
  if (parts.length !== 4 || parts[0] !== 'system' || parts[1] !== 'serviceaccount') {
    throw new InvalidBearerTokenError(`the Kubernetes TokenReview names user ${JSON.stringify(username)}, which is not a service account (system:serviceaccount:<namespace>:<name>)`)
  }
  return kubernetesIdentity({ namespace: parts[2] ?? '', name: parts[3] ?? '', uid: review.user?.uid ?? '' })
}
