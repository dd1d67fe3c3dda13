/**
 * Every call the UI makes goes through request(): to the agent that served the page (same origin, so the content
 * security policy's connect-src 'self' holds), with the token in X-Service-Token and the picked datacenter as ?dc.
 * An answer that says the token itself is no longer valid (403 acl_not_found) signs the user out with the server's
 * reason, whatever view asked.
 */
import { session, signOut } from './session.js'

/** The agent's error body (README "The API": Errors), with Line and Column on a rules error where the server gives them. */
interface ErrorBody {
  Error?: string
  Code?: string
  Field?: string
  Line?: number
  Column?: number
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    /** The server's Code (`permission_denied`, `invalid_input`, ...), or `network` when no answer came. */
    readonly code: string,
    message: string,
    readonly field?: string,
    /** 1-based position in the field's text (policy rules), when the server gives one. */
    readonly line?: number,
    readonly column?: number,
  ) {
    super(message)
  }
}

export interface Answer<T> {
  body: T
  /** X-Service-Index, 0 when absent: what a blocking query waits past. */
  index: number
  headers: Headers
}

export type Query = Record<string, string | number | undefined>

export interface RequestOptions {
  query?: Query
  body?: unknown
  signal?: AbortSignal
  /** A token other than the session's (sign-in checks one before keeping it). */
  token?: string
  /** Leave ?dc off (the datacenter list, the UI's own calls about this agent). */
  local?: boolean
}

export function url(path: string, query: Query = {}, local = false): string {
  const params = new URLSearchParams()
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value))
  const { datacenter } = session()
  if (!local && datacenter !== undefined) params.set('dc', datacenter)
  const text = params.toString()
  return text === '' ? path : `${path}?${text}`
}

export async function request<T>(method: string, path: string, options: RequestOptions = {}): Promise<Answer<T>> {
  const token = options.token ?? session().token
  const headers: Record<string, string> = { Accept: 'application/json' }
  if (token !== undefined) headers['X-Service-Token'] = token
  if (options.body !== undefined) headers['Content-Type'] = 'application/json'
  let response: Response
  try {
    response = await fetch(url(path, options.query, options.local), {
      method,
      headers,
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      credentials: 'omit',
      cache: 'no-store',
      redirect: 'error',
    })
  } catch (error) {
    if (options.signal?.aborted === true) throw error
    throw new ApiError(0, 'network', `The agent did not answer (${error instanceof Error ? error.message : String(error)}).`)
  }
  const text = await response.text()
  let body: unknown = undefined
  if (text !== '') {
    try {
      body = JSON.parse(text)
    } catch {
      body = text
    }
  }
  if (!response.ok) throw failure(response.status, body, options.token === undefined)
  return { body: body as T, index: Number(response.headers.get('X-Service-Index') ?? 0) || 0, headers: response.headers }
}

function failure(status: number, body: unknown, sessionToken: boolean): ApiError {
  const shape = (typeof body === 'object' && body !== null ? body : {}) as ErrorBody
  const message = shape.Error ?? (typeof body === 'string' && body !== '' ? body : `HTTP ${status}`)
  const error = new ApiError(status, shape.Code ?? `http_${status}`, message, shape.Field, numberOrUndefined(shape.Line), numberOrUndefined(shape.Column))
  // The token was deleted, expired, or never existed: nothing this tab does can work until the user signs in again.
  if (sessionToken && error.code === 'acl_not_found' && session().token !== undefined) signOut(`Your token is no longer valid: ${message}`)
  return error
}

function numberOrUndefined(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined
}

export function errorText(error: unknown): string {
  if (error instanceof ApiError) return error.message
  if (error instanceof Error) return error.message
  return String(error)
}
