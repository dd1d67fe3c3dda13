/**
 * What the HTTP API writes to the audit log (issue 18): for every write, login and logout a `request` line before it
 * is proposed and a `response` line once it is answered; for every other request refused 401, 403 or 429 one
 * `refused` line. Reads are not audited (a blocking query woken a thousand times would be a thousand lines).
 *
 * Fail closed, as Vault's audit devices: propose() (write.ts, the one place HTTP proposes from) writes the request
 * line and proposes only once it is in the file; when it cannot be written the request is answered 503
 * audit_unavailable and nothing is proposed. The line is written after the caller was resolved and authorized and the
 * body read and checked, so it names the caller and the record. Response lines and refusals are not waited for: the
 * answer does not wait on them, and what they report has happened already.
 *
 * Secrets never reach a line: the caller is named by AccessorID, a created token by its AccessorID, the path loses
 * its `token` parameter, and no body, header or command is copied, only the fields picked below. A refusal line is
 * dropped (and counted in the agent log) when the queue is half full, so that callers refused by the thousand cannot
 * crowd out the lines of writes and turn them into 503s.
 */
import type { Context, Next } from 'koa'
import type { Logger } from 'pino'
import { LogLimiter } from '../lib/log-limiter.js'
import { WardenError } from '../lib/errors.js'
import type { Command } from '../state/commands.js'
import type { AuditLog } from './audit-log.js'
import type { ApiContext, AppServices } from './context.js'

/** What a request line said, for the response line that follows it. */
export interface AuditedWrite {
  fields: Record<string, unknown>
  index?: number
}

/** Characters of a path or an ID a line carries: both may be the caller's choosing. */
const PATH_CHARS_MAX = 1024
const ID_CHARS_MAX = 512

const REFUSED_STATUSES = new Set([401, 403, 429])

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`
}

/** The kind and ID of the record a command writes, and its namespace where records have one. Never a secret. */
export function auditSubject(command: Command): { kind: string; id: string; namespace?: string } {
  switch (command.type) {
    case 'acl.token.create':
    case 'acl.token.ensure':
    case 'acl.bootstrap':
    case 'acl.token.update':
    case 'acl.token.clone':
      return { kind: 'acl-token', id: command.token.AccessorID, namespace: command.token.Namespace ?? 'default' }
    case 'acl.login':
      return { kind: 'acl-token', id: command.login.token.AccessorID, namespace: command.login.token.Namespace }
    case 'acl.token.delete':
      return { kind: 'acl-token', id: command.AccessorID }
    case 'acl.policy.create':
    case 'acl.policy.update':
      return { kind: 'acl-policy', id: command.policy.ID, namespace: command.policy.Namespace }
    case 'acl.policy.delete':
      return { kind: 'acl-policy', id: command.ID }
    case 'acl.role.create':
    case 'acl.role.update':
      return { kind: 'acl-role', id: command.role.ID, namespace: command.role.Namespace }
    case 'acl.role.delete':
      return { kind: 'acl-role', id: command.ID }
    case 'acl.auth-method.create':
    case 'acl.auth-method.update':
      return { kind: 'acl-auth-method', id: command.method.Name, namespace: command.method.Namespace }
    case 'acl.auth-method.delete':
      return { kind: 'acl-auth-method', id: command.Name, namespace: command.Namespace }
    case 'acl.binding-rule.create':
    case 'acl.binding-rule.update':
      return { kind: 'acl-binding-rule', id: command.rule.ID, namespace: command.rule.Namespace }
    case 'acl.binding-rule.delete':
      return { kind: 'acl-binding-rule', id: command.ID }
    case 'config.apply':
      return { kind: 'config-entry', id: `${command.entry.Kind}/${command.entry.Name}`, namespace: command.entry.Namespace }
    case 'config.delete':
      return { kind: 'config-entry', id: `${command.Kind}/${command.Name}`, namespace: command.Namespace }
    case 'link.set':
      return { kind: 'link', id: command.link.resourceId }
    case 'link.delete':
    case 'link.status':
      return { kind: 'link', id: '' }
    case 'restore.begin':
    case 'restore.chunk':
    case 'restore.commit':
    case 'restore.abort':
      return { kind: 'snapshot-restore', id: command.id }
    case 'acl.init':
    case 'acl.token.delete-expired':
    case 'raft.member.set':
    case 'raft.member.delete':
    case 'acl.replicate':
    case 'noop':
      // Not proposed from HTTP; named by their type alone.
      return { kind: command.type, id: '' }
  }
}

/** The request's path and query, without the `token` parameter (a SecretID) in any spelling or repetition. */
export function auditedPath(url: string): string {
  const question = url.indexOf('?')
  if (question === -1) return cut(url, PATH_CHARS_MAX)
  const kept = url
    .slice(question + 1)
    .split('&')
    .filter((pair) => {
      const name = pair.split('=', 1)[0] ?? ''
      let decoded = name
      try {
        decoded = decodeURIComponent(name.replace(/\+/g, ' '))
      } catch {
        // Not valid percent-encoding: compared as written, and Koa would not have read it as `token` either.
      }
      return decoded.toLowerCase() !== 'token'
    })
  return cut(kept.length === 0 ? url.slice(0, question) : `${url.slice(0, question)}?${kept.join('&')}`, PATH_CHARS_MAX)
}

/** The fields every line of a request carries. `accessor` is the caller's AccessorID, when it was resolved. */
function requestFields(ctx: ApiContext, services: AppServices, type: string): Record<string, unknown> {
  const accessor = ctx.state.auditAccessorID ?? ctx.state.caller?.accessorID
  return {
    time: new Date(services.now()).toISOString(),
    type,
    node: services.settings.nodeName,
    request_id: ctx.state.auditRequestID ?? '',
    accessor_id: accessor ?? null,
    remote_address: ctx.req.socket.remoteAddress ?? null,
    method: ctx.method,
    path: auditedPath(ctx.originalUrl),
  }
}

let requestCount = 0
/** A per-process prefix: request IDs from a restarted agent do not repeat the earlier run's. */
const RUN_ID = `${Date.now().toString(36)}-${process.pid.toString(36)}`

/** A new ID to tie a request's audit lines together. */
function newRequestID(): string {
  requestCount += 1
  return `${RUN_ID}-${requestCount}`
}

/**
 * Writes a write's request line and resolves once it is in the file; throws audit_unavailable when it cannot be
 * written, before anything is proposed. Does nothing without an audit log.
 */
export function auditBeforePropose(ctx: ApiContext, command: Command): Promise<void> {
  return auditBeforeChange(ctx, command.type, auditSubject(command))
}

/**
 * The same for a change made without propose(): the membership changes of the operator routes (raft.member.*,
 * operator.transfer-leader), which the cluster makes through the log itself.
 */
export async function auditBeforeChange(ctx: ApiContext, operation: string, subject: { kind: string; id: string; namespace?: string }): Promise<void> {
  const services = ctx.state.app
  const audit = services.audit
  if (audit === undefined) return
  ctx.state.auditRequestID ??= newRequestID()
  const fields: Record<string, unknown> = {
    ...requestFields(ctx, services, 'request'),
    operation,
    kind: subject.kind,
    id: cut(subject.id, ID_CHARS_MAX),
    ...(subject.namespace === undefined ? {} : { namespace: subject.namespace }),
  }
  await audit.append(fields)
  ctx.state.audited = { fields }
}

/** Records the log index a write was committed at, for its response line. */
export function auditProposed(ctx: ApiContext, index: number): void {
  if (ctx.state.audited !== undefined) ctx.state.audited.index = index
}

/**
 * The middleware before the error mapper: once a request is answered (its status and error code known), the
 * response line of a write whose request line was written, or the line of a refusal. Not awaited.
 */
export function auditMiddleware(services: AppServices): (ctx: Context, next: Next) => Promise<void> {
  const audit = services.audit
  if (audit === undefined) return (_ctx, next) => next()
  const limiter = new LogLimiter()
  let dropped = 0
  return function auditAnswer(ctx: Context, next: Next): Promise<void> {
    return next().then(() => {
      const api = ctx as ApiContext
      const code = errorCode(ctx.body)
      const audited = api.state.audited
      if (audited !== undefined) {
        const line = {
          ...audited.fields,
          time: new Date(services.now()).toISOString(),
          type: 'response',
          status: ctx.status,
          ...(audited.index === undefined ? {} : { index: audited.index }),
          ...(code === undefined ? {} : { error: code }),
        }
        write(audit, line, services.log, limiter)
        return
      }
      if (!REFUSED_STATUSES.has(ctx.status)) return
      if (audit.busy) {
        dropped += 1
        limiter.warn(services.log, 'dropped', { dropped }, 'the audit log is busy: lines of refused requests are dropped to leave room for writes')
        return
      }
      api.state.auditRequestID ??= newRequestID()
      write(audit, { ...requestFields(api, services, 'refused'), status: ctx.status, ...(code === undefined ? {} : { error: code }) }, services.log, limiter)
    })
  }
}

/**
 * The line of a connection refused before any request was read on it (limits.http_max_conns_per_client): no method,
 * path or caller, a 429. Dropped, as every refusal, while the queue is half full.
 */
export function auditRefusedConnection(audit: AuditLog | undefined, node: { nodeName: string; now: () => number; log: Logger }, client: string): void {
  if (audit === undefined || audit.busy) return
  const line = {
    time: new Date(node.now()).toISOString(),
    type: 'refused',
    node: node.nodeName,
    request_id: newRequestID(),
    accessor_id: null,
    remote_address: client,
    method: null,
    path: null,
    status: 429,
    error: 'rate_limited',
  }
  write(audit, line, node.log, connectionLimiter)
}

const connectionLimiter = new LogLimiter()

function write(audit: AuditLog, line: Record<string, unknown>, log: Logger, limiter: LogLimiter): void {
  audit.append(line).catch((error: unknown) => {
    // The answer has been decided and what it reports has happened; the writer has logged why it failed.
    if (!(error instanceof WardenError)) limiter.warn(log, 'line', { err: error }, 'an audit line could not be written')
  })
}

function errorCode(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object' || Buffer.isBuffer(body)) return undefined
  const code = (body as { Code?: unknown }).Code
  return typeof code === 'string' ? code : undefined
}
