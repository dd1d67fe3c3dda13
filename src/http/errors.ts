/**
 * The first middleware: every error leaves as one JSON shape, {"Error", "Code", "Field"?, "Line"?, "Column"?}, with the
 * status its code maps to. Line and Column (1-based) come only with an error about one place in a field's text (policy
 * Rules), so that an editor can put the cursor there. Anything that is not an operating error is a 500 whose details go only to the log.
 */
import type { Context, Next } from 'koa'
import type { Logger } from 'pino'
import { RateLimitedError, WardenError, type ErrorCode, type TextPosition } from '../lib/errors.js'
import { LogLimiter } from '../lib/log-limiter.js'

export const STATUS_BY_CODE: Record<ErrorCode, number> = {
  invalid_input: 400,
  acl_not_found: 403,
  permission_denied: 403,
  bootstrap_done: 403,
  token_replication_required: 403,
  not_found: 404,
  unknown_datacenter: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  rate_limited: 429,
  internal: 500,
  no_leader: 503,
  restore_in_progress: 503,
  audit_unavailable: 503,
  no_path_to_datacenter: 503,
  outcome_unknown: 504,
}

/** Characters of a message and of a field name an answer carries: both may quote what the caller sent. */
const MESSAGE_CHARS_MAX = 1024
const FIELD_CHARS_MAX = 256

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (cut at ${max} characters)`
}

/**
 * The one error shape. Messages quote the offending value or key so the caller can find it, but a 200 KB name or a
 * 500 KB key would come back whole, twice: both are cut.
 */
export function errorBody(code: ErrorCode, message: string, field?: string, position?: TextPosition): Record<string, string | number> {
  const body: Record<string, string | number> = { Error: cut(message, MESSAGE_CHARS_MAX), Code: code }
  if (field !== undefined) body.Field = cut(field, FIELD_CHARS_MAX)
  if (position !== undefined) {
    body.Line = position.line
    body.Column = position.column
  }
  return body
}

export function errorMiddleware(log: Logger, limiter = new LogLimiter()) {
  // Not an async function: every held request (a blocking query) would keep a suspended frame of it, some 300 bytes.
  return function mapErrors(ctx: Context, next: Next): Promise<void> {
    let downstream: Promise<unknown>
    try {
      downstream = next()
    } catch (error) {
      downstream = Promise.reject(error)
    }
    return downstream.then(undefined, (error: unknown) => {
      if (error instanceof WardenError) {
        ctx.status = STATUS_BY_CODE[error.code]
        ctx.body = errorBody(error.code, error.message, error.field, error.position)
        if (error instanceof RateLimitedError) ctx.set('Retry-After', String(error.retryAfterSeconds))
        if (error.code === 'outcome_unknown' || error.code === 'internal') log.warn({ err: error, path: ctx.path }, error.message)
        // What the caller may not see (where an identity service is) but the operator needs to fix it.
        const logDetail = (error as { logDetail?: unknown }).logDetail
        // Rate-limited by kind of failure: the error, the route and the detail's first two words, which the code
        // writes. Never by the whole text, which quotes what a caller chose (a JWT's alg or aud, a header): one
        // anonymous caller could otherwise make every line distinct and flood the log.
        if (typeof logDetail === 'string') {
          const kind = logDetail.split(' ', 2).join(' ')
          limiter.warn(log, `${error.name}\u0000${ctx.method} ${ctx.path}\u0000${kind}`, { path: ctx.path, detail: logDetail }, error.message)
        }
        return
      }
      // Koa's own errors (a client that hung up, a malformed URL) carry an exposable status below 500.
      const status = (error as { status?: unknown }).status
      if (typeof status === 'number' && status >= 400 && status < 500 && (error as { expose?: boolean }).expose === true) {
        ctx.status = status
        ctx.body = errorBody('invalid_input', (error as Error).message)
        return
      }
      log.error({ err: error, method: ctx.method, path: ctx.path }, 'request failed')
      ctx.status = 500
      ctx.body = errorBody('internal', 'internal error; see the agent log')
    }) as Promise<void>
  }
}
