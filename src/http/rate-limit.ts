/**
 * Request rate limits (issue 18; Consul 1.13's global `limits.request_limits`): one token bucket for the reads and one
 * for the writes this node serves, whoever sends them, and one per auth method for its logins (`limits.login_rate`).
 *
 * - `mode` is Consul's: `disabled` (the default) counts nothing; `permissive` counts, logs a request over the rate
 *   (rate-limited log lines) and serves it; `enforcing` answers it 429 `rate_limited` with `Retry-After`, before its
 *   body is read or anything else is done for it, so a refused write changes nothing.
 * - A write is a request whose method is not GET, HEAD or OPTIONS (the methods that pass the write barrier, app.ts),
 *   logins and logouts included: each proposes a command, as Consul counts ACL.Login and ACL.Logout as writes. The
 *   POSTs that change nothing, the templated-policy preview and the ACL authorize checks, count as reads.
 * - Exempt: `/v1/status/*` (health checks and the cluster tool ask it to know whether a node is up; Consul exempts its
 *   Status RPCs too) and `/v1/operator/raft/join` (a server joining the cluster, proved by the cluster key: refusing
 *   it under client load would keep a node out of its own cluster).
 * - Burst = rate (at least 1 token): a node idle for a second may take one second's worth at once, as Consul's
 *   limiter (golang.org/x/time/rate, burst = rate) does. A rate of Infinity is no limit.
 * - Logins (POST /v1/acl/login and both OIDC steps) also take a token from their auth method's bucket once the method
 *   is known and before its identity service is called. That bucket is enforced whatever `mode` says: it exists to
 *   protect the identity services, as IDENTITY_CALLS_PER_METHOD_MAX does, and is off unless login_rate is set.
 *
 * Buckets read an injectable monotonic clock (performance.now by default), so unit tests drive time by hand.
 */
import { performance } from 'node:perf_hooks'
import type { Logger } from 'pino'
import { TokenBucket } from '../lib/token-bucket.js'
import { RateLimitedError } from '../lib/errors.js'
import { LogLimiter } from '../lib/log-limiter.js'
import { asksOnly } from './request.js'

export type RequestLimitsMode = 'disabled' | 'permissive' | 'enforcing'

export interface RateLimitSettings {
  mode: RequestLimitsMode
  /** Requests per second; Infinity for no limit. */
  readRate: number
  writeRate: number
  /** Logins per second per auth method; Infinity for no limit. */
  loginRate: number
}

export const RATE_LIMITS_DISABLED: RateLimitSettings = { mode: 'disabled', readRate: Infinity, writeRate: Infinity, loginRate: Infinity }

/** Retry-After in whole seconds, at least 1 (RFC 9110 §10.2.3: a non-negative integer; 0 would invite a hot loop). */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000))
}

/** Auth methods whose login buckets are remembered: far more than a cluster has; the oldest is forgotten beyond. */
const LOGIN_BUCKETS_MAX = 4096

export type RequestKind = 'read' | 'write' | 'exempt'

/** Which bucket a request draws from, by method and path (see the file comment for the rules). */
export function requestKind(method: string, path: string): RequestKind {
  if (path.startsWith('/v1/status/') || path === '/v1/operator/raft/join') return 'exempt'
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return 'read'
  if (path.startsWith('/v1/acl/templated-policy/preview/') || asksOnly(method, path)) return 'read'
  return 'write'
}

function bucketFor(rate: number, now: () => number): TokenBucket {
  return new TokenBucket(rate, rate === Infinity ? 1 : Math.max(1, rate), now)
}

export class RateLimiter {
  private readonly read: TokenBucket
  private readonly write: TokenBucket
  private readonly logins = new Map<string, TokenBucket>()
  private readonly lines: LogLimiter

  constructor(
    readonly settings: RateLimitSettings,
    private readonly log: Logger,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.read = bucketFor(settings.readRate, now)
    this.write = bucketFor(settings.writeRate, now)
    this.lines = new LogLimiter(10_000, now)
  }

  /**
   * Counts a request against its node-wide bucket. Throws RateLimitedError when enforcing and over the rate; logs
   * (rate-limited) when over the rate in either counting mode.
   */
  admitRequest(method: string, path: string, remoteAddress: string | undefined): void {
    if (this.settings.mode === 'disabled') return
    const kind = requestKind(method, path)
    if (kind === 'exempt') return
    const bucket = kind === 'read' ? this.read : this.write
    const waitMs = bucket.take()
    if (waitMs === 0) return
    const enforced = this.settings.mode === 'enforcing'
    this.lines.warn(
      this.log,
      `global/${kind}`,
      { limit_type: `global/${kind}`, limit_enforced: enforced, method, path, remote_address: remoteAddress ?? null, rate: bucket.ratePerSecond },
      `request exceeded the ${kind} rate limit (limits.request_limits.${kind}_rate)`,
    )
    if (enforced) {
      throw new RateLimitedError(`rate limit exceeded: this node serves at most ${bucket.ratePerSecond} ${kind}s a second (limits.request_limits.${kind}_rate); retry later`, retryAfterSeconds(waitMs))
    }
  }

  /** Counts a login through one auth method (`key`: its namespace and name). Throws RateLimitedError over the rate. */
  admitLogin(key: string, methodName: string): void {
    if (this.settings.loginRate === Infinity) return
    let bucket = this.logins.get(key)
    if (bucket === undefined) {
      if (this.logins.size >= LOGIN_BUCKETS_MAX) this.logins.delete(this.logins.keys().next().value!)
      bucket = bucketFor(this.settings.loginRate, this.now)
      this.logins.set(key, bucket)
    }
    const waitMs = bucket.take()
    if (waitMs === 0) return
    this.lines.warn(this.log, `login\u0000${key}`, { limit_type: 'login', auth_method: methodName, rate: bucket.ratePerSecond }, 'login exceeded the auth method\'s rate limit (limits.login_rate)')
    throw new RateLimitedError(`rate limit exceeded: at most ${bucket.ratePerSecond} logins a second through auth method "${methodName}" (limits.login_rate); retry later`, retryAfterSeconds(waitMs))
  }
}
