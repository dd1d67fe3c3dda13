/**
 * The errors a caller of the client meets. An answer outside 2xx is rebuilt from the server's one error shape
 * (`{Error, Code, Field}`) into an `ApiError` with that code, so callers branch on `code`, never on message text. A
 * request that got no answer is a `ConnectionError` that says whether the server can have seen it: a write whose
 * outcome is unknown must never be taken for one that failed cleanly.
 */
import { WardenError, type ErrorCode, type TextPosition } from '../lib/errors.js'

/** The codes warden answers with, and any a newer server may add. */
export type ApiErrorCode = ErrorCode | 'unknown_datacenter' | 'no_path_to_datacenter' | (string & {})

export class ApiError extends WardenError {
  override readonly name: string = 'ApiError'
  constructor(
    /** The HTTP status of the answer. */
    readonly status: number,
    code: ApiErrorCode,
    message: string,
    field?: string,
    /** The answer's Line and Column: where in the field's text (policy Rules) the mistake is. */
    position?: TextPosition,
  ) {
    super(code as ErrorCode, message, field, { position })
  }

  /** True when this is the code given. */
  is(code: ApiErrorCode): boolean {
    return this.code === code
  }
}

/**
 * No answer. `reached: 'no'` when the request provably never left this process (connection refused, the name did not
 * resolve, TLS failed before any request byte was sent): safe to retry anywhere. `'maybe'` otherwise (a timeout, a
 * reset after sending): a write may have been applied.
 */
export class ConnectionError extends Error {
  override readonly name: string = 'ConnectionError'
  constructor(
    readonly address: string,
    readonly reached: 'no' | 'maybe',
    /** The system error code when there is one (ECONNREFUSED, ETIMEDOUT, CERT_HAS_EXPIRED, ...), else 'timeout' or 'aborted'. */
    readonly reason: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options)
  }
}

/**
 * Rebuilds the error an answer carries. A body that is not the error shape (a proxy's HTML page) still gives an
 * ApiError, with a code from the status and the body's first line as its message.
 */
export function errorFromAnswer(status: number, body: unknown, text: string): ApiError {
  if (typeof body === 'object' && body !== null && typeof (body as { Error?: unknown }).Error === 'string') {
    const { Error: message, Code: code, Field: field, Line: line, Column: column } = body as { Error: string; Code?: unknown; Field?: unknown; Line?: unknown; Column?: unknown }
    const position = typeof line === 'number' && typeof column === 'number' ? { line, column } : undefined
    return new ApiError(status, typeof code === 'string' ? code : codeOfStatus(status), message, typeof field === 'string' ? field : undefined, position)
  }
  const firstLine = text.split('\n', 1)[0]?.trim().slice(0, 200) ?? ''
  return new ApiError(status, codeOfStatus(status), firstLine === '' ? `HTTP ${status}` : `HTTP ${status}: ${firstLine}`)
}

function codeOfStatus(status: number): ApiErrorCode {
  switch (status) {
    case 400:
      return 'invalid_input'
    case 403:
      return 'permission_denied'
    case 404:
      return 'not_found'
    case 405:
      return 'method_not_allowed'
    case 409:
      return 'conflict'
    case 413:
      return 'payload_too_large'
    case 429:
      return 'rate_limited'
    case 503:
      return 'no_leader'
    case 504:
      return 'outcome_unknown'
    default:
      return 'internal'
  }
}
