/**
 * What every route handler reaches through `ctx.state.app`: the state store (reads), the cluster (writes), the token
 * resolver, and the agent settings the API exposes or enforces.
 */
import type { Readable } from 'node:stream'
import type { Context } from 'koa'
import type { Logger } from 'pino'
import type { Cluster } from '../rpc/index.js'
import type { StateStore } from '../state/store.js'
import type { Caller, TokenResolver } from '../acl/resolver.js'
import type { OidcStateSealer } from '../acl/auth/oidc-state.js'
import type { PermissionAccess, PermissionResource } from '../acl/authorization.js'
import type { AuditLog } from './audit-log.js'
import type { AuditedWrite } from './audit.js'
import type { RateLimiter } from './rate-limit.js'
import type { DatacenterForwarder } from '../rpc/dc-forward.js'

export interface ApiSettings {
  nodeName: string
  datacenter: string
  primaryDatacenter: string
  defaultPolicy: 'allow' | 'deny'
  downPolicy: string
  tokenMinExpirationTtlMs: number
  tokenMaxExpirationTtlMs: number
  /** Bound on blocking queries waiting at once on this node. */
  blockingQueriesMax: number
  /** How long a secondary's forwarded global write waits to be replicated here (acl.replication_read_your_writes_wait); 5 s when unset. */
  replicationReadYourWritesWaitMs?: number
}

export interface AppServices {
  state: StateStore
  cluster: Cluster
  resolver: TokenResolver
  settings: ApiSettings
  log: Logger
  /** The clock, injectable so tests of expiry need not sleep. */
  now: () => number
  /** Aborted when the agent stops: blocking queries return at once instead of holding the shutdown. */
  closing: AbortSignal
  /** Seals the state of OIDC browser logins; the same key on every node of a cluster. */
  oidcStates: OidcStateSealer
  /** The audit log (`--audit-log`), when there is one: writes, logins, logouts and refusals (audit.ts). */
  audit?: AuditLog | undefined
  /** Request and login rate limits (`limits.request_limits`, `limits.login_rate`: rate-limit.ts); none when absent. */
  rateLimiter?: RateLimiter | undefined
  /**
   * The datacenters this server knows (WAN membership, rpc/wan-membership.ts): its own first, then by round-trip
   * time. Absent on a server without WAN links (no cluster key): its own datacenter only.
   */
  datacenters?: (() => string[]) | undefined
  /** Sends `?dc` requests for other datacenters to a server there (rpc/dc-forward.ts); absent without WAN links. */
  forwarder?: DatacenterForwarder | undefined
  /** ACL replication from the primary, in a secondary datacenter (controllers/acl-replication.ts). */
  replication?: { status(): ReplicationStatusView } | undefined
  /** The agent's metrics (src/metrics, wired by the agent): what `GET /v1/agent/metrics` serves. */
  metrics?: ApiMetrics | undefined
  /** Restores snapshot archives (`PUT /v1/snapshot`); absent where nothing can spool an upload. */
  restorer?: SnapshotRestoring | undefined
}

/** What restores an uploaded archive (controllers/snapshot-restore.ts), as the HTTP layer sees it. */
export interface SnapshotRestoring {
  /** Spools, verifies and restores; throws a WardenError saying what went wrong. `index` is the restore's. */
  restore(body: Readable, hooks?: { beforePropose?: (id: string) => Promise<void> }): Promise<{ index: number }>
}

/** The metrics as the HTTP layer sees them: one call per answered request, and the two forms of the endpoint. */
export interface ApiMetrics {
  /**
   * Counts one answered request by method, route pattern (never the raw path: its cardinality is unbounded) and
   * status; times it unless `seconds` is undefined; `errorCode` is the error answer's Code, if any. Called for every
   * request, so it must not allocate beyond the counter's own bookkeeping.
   */
  recordRequest(method: string, route: string, status: number, seconds: number | undefined, errorCode: string | undefined): void
  /** The text exposition format, with its content type. */
  prometheus(): Promise<{ contentType: string; text: string }>
  /** Consul's JSON form. */
  consul(): Promise<unknown>
}

/** What the replication loop reports of itself (its leader-only, in-memory part; the rest is in the state). */
export interface ReplicationStatusView {
  running: boolean
  lagSeconds: number
  tokens: boolean
  streams: Map<string, { lastErrorAt: number | undefined; lastErrorMessage: string }>
}

export interface RequestState {
  app: AppServices
  caller?: Caller
  /**
   * The permissions a write checked before its body was read, checked again once it has arrived (request.ts
   * authorizeAfterBody). Recorded for writes only, so a blocking read woken many times records nothing.
   */
  checksBeforeBody?: Array<{ resource: PermissionResource; access: PermissionAccess; name: string | undefined }>
  /** Set once the body has been read: checks made after it need not be checked again. */
  bodyRead?: boolean
  /**
   * The write's barrier (app.ts) fixed its index after the whole body had arrived: it covers the body too, and the
   * caller the route resolved past it is not resolved again once the body is read (request.ts authorizeAfterBody).
   */
  barrierAfterBody?: boolean
  /** Koa's parsed query, read once: each `ctx.query` walks Koa's getters and the URL parse cache again. */
  query?: Record<string, string | string[] | undefined>
  /** The consistency mode, parsed once (the app middleware and serveRead both need it). */
  consistency?: { mode: 'leader' | 'stale' | 'consistent'; maxStaleMs?: number }
  /** The write whose request line the audit log holds, for its response line (audit.ts). */
  audited?: AuditedWrite
  /** Ties a request's audit lines together. */
  auditRequestID?: string
  /** The caller's AccessorID where it is known without resolving a Caller (a logout knows its own token). */
  auditAccessorID?: string
}

export type ApiContext = Context & { state: RequestState }
