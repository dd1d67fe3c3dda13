/**
 * The state of an OIDC browser login between its two calls (auth URL, then callback), carried by the `state`
 * parameter itself rather than held by the node that answered the first call: behind a load balancer the callback may
 * reach another node of the cluster, and a leader change must not lose logins under way.
 *
 * The state is sealed with AES-256-GCM: the provider and the browser carry it but can neither read it (it holds the
 * ID token's nonce and the caller's Meta) nor change it (the tag fails). Every node of a cluster derives the same key
 * from the cluster key (HKDF-SHA256 with a label of its own, so the key serves nothing else); a node without one (a
 * single node) draws a random key at start, and a restart ends the logins under way. A sealed state expires after
 * OIDC_STATE_TTL_MS, as Consul's does after 10 minutes.
 *
 * A state is not single-use here: the authorization code it travels with is (the provider redeems a code once).
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'
import { inspect } from 'node:util'

export const OIDC_STATE_TTL_MS = 10 * 60_000

const IV_BYTES = 12
const TAG_BYTES = 16
/** Sealed states are parsed only up to this length: a caller cannot make a node decrypt megabytes. */
export const OIDC_STATE_CHARS_MAX = 16_384
const HKDF_SALT = Buffer.from('warden/oidc-state/v1')

/** What the auth-URL call decided and the callback needs. */
export interface OidcLoginState {
  /** The auth method's name and namespace. */
  method: string
  namespace: string
  redirectUri: string
  /** The nonce sent to the provider, which its ID token must carry back. */
  nonce: string
  /** The caller's own nonce: the callback must present it again. */
  clientNonce: string
  meta?: Record<string, string>
}

export class OidcStateSealer {
  readonly #key: Buffer

  private constructor(key: Buffer) {
    this.#key = key
  }

  /** The sealer of a cluster (the same on every node), or of a single node without a cluster key. */
  static create(clusterKey: string | undefined): OidcStateSealer {
    if (clusterKey === undefined) return new OidcStateSealer(randomBytes(32))
    return new OidcStateSealer(Buffer.from(hkdfSync('sha256', Buffer.from(clusterKey, 'utf8'), HKDF_SALT, 'oidc login state', 32)))
  }

  seal(state: OidcLoginState, nowMs: number): string {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv)
    const plain = Buffer.from(JSON.stringify({ ...state, expiresAtMs: nowMs + OIDC_STATE_TTL_MS }), 'utf8')
    const sealed = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()])
    return sealed.toString('base64url')
  }

  /** The state, or undefined when it was not sealed with this key, was changed, or has expired. */
  open(text: string, nowMs: number): OidcLoginState | undefined {
    if (text.length > OIDC_STATE_CHARS_MAX || !/^[A-Za-z0-9_-]+$/.test(text)) return undefined
    const sealed = Buffer.from(text, 'base64url')
    if (sealed.length <= IV_BYTES + TAG_BYTES) return undefined
    const decipher = createDecipheriv('aes-256-gcm', this.#key, sealed.subarray(0, IV_BYTES))
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
    let plain: Buffer
    try {
      plain = Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()])
    } catch {
      return undefined
    }
    const { expiresAtMs, ...state } = JSON.parse(plain.toString('utf8')) as OidcLoginState & { expiresAtMs: number }
    if (!(nowMs < expiresAtMs)) return undefined
    return state
  }

  toJSON(): string {
    return '[redacted]'
  }

  [inspect.custom](): string {
    return 'OidcStateSealer [redacted]'
  }
}
