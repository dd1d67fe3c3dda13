/**
 * Operating errors: expected failures with a stable code, a message that names the field and the rule, and an
 * optional field. The HTTP layer maps each code to a status in exactly one place (src/http/errors.ts); across the
 * wire an error travels as { code, message, field } and is rebuilt with `errorFromWire`, never matched on its text.
 */
export type ErrorCode =
  | 'invalid_input'
  | 'acl_not_found'
  | 'permission_denied'
  | 'bootstrap_done'
  | 'not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'payload_too_large'
  | 'rate_limited'
  | 'internal'
  | 'no_leader'
  | 'outcome_unknown'
  | 'audit_unavailable'
  /** `?dc` names a datacenter no server here knows. */
  | 'unknown_datacenter'
  /** `?dc` names a known datacenter none of whose servers can be reached now. */
  | 'no_path_to_datacenter'
  /** A secondary without token replication makes no local tokens, auth methods, binding rules or logins. */
  | 'token_replication_required'
  /** A snapshot restore is being applied: every other write is refused until it completes or is abandoned. */
  | 'restore_in_progress'

export interface WireError {
  code: ErrorCode
  message: string
  field?: string | undefined
  /** Where in the field's text the mistake is (policy Rules), 1-based; absent for errors without a position. */
  line?: number | undefined
  column?: number | undefined
}

/** A 1-based line and column inside the text of a field (policy Rules), for an editor to put the cursor on. */
export interface TextPosition {
  readonly line: number
  readonly column: number
}

export class WardenError extends Error {
  override readonly name: string = 'WardenError'
  /** Set when the error is about one place in the field's text (a rules mistake): the body then carries Line, Column. */
  readonly position: TextPosition | undefined
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly field?: string,
    options?: { cause?: unknown; position?: TextPosition | undefined },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.position = options?.position
  }

  toWire(): WireError {
    const wire: WireError = { code: this.code, message: this.message }
    if (this.field !== undefined) wire.field = this.field
    if (this.position !== undefined) {
      wire.line = this.position.line
      wire.column = this.position.column
    }
    return wire
  }
}

/** A request field broke a rule. The message reads `<field>: <rule>`; `position` points into the field's text. */
export class InvalidInputError extends WardenError {
  override readonly name: string = 'InvalidInputError'
  constructor(field: string | undefined, rule: string, position?: TextPosition) {
    super('invalid_input', field === undefined ? rule : `${field}: ${rule}`, field, { position })
  }
}

export class NotFoundError extends WardenError {
  override readonly name: string = 'NotFoundError'
  constructor(message: string) {
    super('not_found', message)
  }
}

export class PermissionDeniedError extends WardenError {
  override readonly name: string = 'PermissionDeniedError'
  constructor(message: string) {
    super('permission_denied', message)
  }
}

export class AclNotFoundError extends WardenError {
  override readonly name: string = 'AclNotFoundError'
  constructor() {
    super('acl_not_found', 'ACL not found')
  }
}

/** A request over a rate limit (429); `retryAfterSeconds` (a whole number, at least 1) becomes `Retry-After`. */
export class RateLimitedError extends WardenError {
  override readonly name: string = 'RateLimitedError'
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super('rate_limited', message)
  }
}

export function errorFromWire(wire: WireError): WardenError {
  const position = typeof wire.line === 'number' && typeof wire.column === 'number' ? { line: wire.line, column: wire.column } : undefined
  return new WardenError(wire.code, wire.message, wire.field, { position })
}
