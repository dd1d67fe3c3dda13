/**
 * Request bodies: read with a hard limit (1 MiB) before anything is parsed, so a large or endless body costs at most
 * the limit in memory, and parsed as JSON with an error that says what is wrong.
 */
import type { IncomingMessage } from 'node:http'
import type { Context } from 'koa'
import { InvalidInputError, WardenError } from '../lib/errors.js'
import { ANONYMOUS_TOKEN_ID } from '../state/builtins.js'
import type { ApiContext } from './context.js'
import { authorizeAfterBody, callerOf } from './request.js'

export const BODY_BYTES_MAX = 1024 * 1024
/**
 * Bytes of request bodies held at once by every request reading one: each body is bounded, but without this anyone
 * (a login needs no token) could open hundreds of connections, send most of a body on each and hold them.
 */
export const BODIES_IN_FLIGHT_BYTES_MAX = 64 * 1024 * 1024
/**
 * How long a body may take to arrive once its route starts reading it (after the write barrier and the caller's
 * resolution). The server's request timeout is long for the sake of blocking queries, whose requests are complete with
 * their headers; a write's body has no reason to trickle.
 */
export const BODY_TIMEOUT_MS = 30_000

/** Bytes of bodies being read at once against one budget. */
interface BodyBudget {
  used: number
}

const sharedBudget: BodyBudget = { used: 0 }
const anonymousBudget: BodyBudget = { used: 0 }

/** Bytes of request bodies being read right now (for tests and metrics). */
export function bodiesInFlight(): number {
  return sharedBudget.used + anonymousBudget.used
}

export interface BodyLimits {
  /** Bytes of this body (default BODY_BYTES_MAX). */
  limit?: number
  /** Milliseconds for it to arrive (default BODY_TIMEOUT_MS). */
  timeoutMs?: number
  /** Bytes of all bodies being read at once against the same budget (default BODIES_IN_FLIGHT_BYTES_MAX). */
  inFlightMax?: number
  /** Counted against the anonymous routes' own budget instead of the shared one. */
  anonymous?: boolean
}

/**
 * The bodies of routes anyone may call without a token (login, the OIDC steps, bootstrap, a server's join): small
 * (a login's fields are a bearer token and a little Meta), quick, and counted against a budget of their own. Were
 * they held to the shared budget, 64 anonymous connections each trickling a 1 MiB body would fill it, and every
 * write on the node would be refused for as long as they trickle.
 */
export const ANONYMOUS_BODY: BodyLimits = { limit: 64 * 1024, timeoutMs: 10_000, inFlightMax: 4 * 1024 * 1024, anonymous: true }

/** Where a body read before its route (to decide where the request goes: forward.ts) waits for the route. */
const READ_AHEAD = Symbol('warden.bodyReadAhead')
type ReadAhead = { [READ_AHEAD]?: Buffer }

/**
 * Reads the body now and keeps it for the route's own readBody, which then gets it at once (held to the route's
 * limit). For the few requests whose destination depends on their body (a secondary's token create: local or global).
 * As readJsonObject does, the caller is resolved first: a secret that names no live token is refused before a byte
 * is read, and an anonymous caller's body counts against the anonymous budget.
 */
export async function readBodyAhead(ctx: ApiContext): Promise<Buffer> {
  const caller = await callerOf(ctx)
  const body = await readBody(ctx, caller.token.AccessorID === ANONYMOUS_TOKEN_ID ? ANONYMOUS_BODY : {})
  ;(ctx.state as ReadAhead)[READ_AHEAD] = body
  return body
}

export function readBody(ctx: Context, limits: BodyLimits = {}): Promise<Buffer> {
  const { limit = BODY_BYTES_MAX, timeoutMs = BODY_TIMEOUT_MS, inFlightMax = BODIES_IN_FLIGHT_BYTES_MAX } = limits
  // A context without state (a bare Koa context in tests) has nothing read ahead.
  const ahead = (ctx.state as ReadAhead | undefined)?.[READ_AHEAD]
  if (ahead !== undefined) return ahead.length > limit ? Promise.reject(tooLarge(limit)) : Promise.resolve(ahead)
  const budget = limits.anonymous === true ? anonymousBudget : sharedBudget
  // Bodies are read as sent: a compressed one would be parsed as garbage (and quoted back in the error).
  const encoding = ctx.get('content-encoding').trim().toLowerCase()
  if (encoding !== '' && encoding !== 'identity') return Promise.reject(new InvalidInputError('Content-Encoding', `${JSON.stringify(encoding.slice(0, 64))} is not supported: send the body uncompressed`))
  const declared = Number(ctx.get('content-length') || '0')
  if (declared > limit) {
    closeAfterAnswer(ctx)
    return Promise.reject(tooLarge(limit))
  }
  const request = ctx.req
  // A request destroyed (the client hung up) or read before this call would never emit another event.
  if (request.destroyed || request.readableEnded) return Promise.reject(endedEarly())
  // Listeners rather than an async iterator: this runs on every write, and the iterator's machinery cost several
  // times the read itself for the small bodies writes have.
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const cleanup = (): void => {
      clearTimeout(timer)
      budget.used -= size
      request.off('data', onData)
      request.off('end', onEnd)
      request.off('error', onError)
      request.off('close', onClose)
    }
    // Nothing more is kept; the connection closes after the answer, and what still comes meanwhile is dropped.
    const refuse = (error: WardenError): void => {
      cleanup()
      chunks.length = 0
      closeAfterAnswer(ctx)
      reject(error)
    }
    const timer = setTimeout(() => refuse(new InvalidInputError('body', `did not arrive within ${timeoutMs / 1000} s`)), timeoutMs)
    const onData = (chunk: Buffer): void => {
      if (size + chunk.length > limit) return refuse(tooLarge(limit))
      if (budget.used + chunk.length > inFlightMax) {
        return refuse(new WardenError('rate_limited', `body: this node is already reading ${inFlightMax} bytes of request bodies; retry later`, 'body'))
      }
      size += chunk.length
      budget.used += chunk.length
      chunks.push(chunk)
    }
    const onEnd = (): void => {
      cleanup()
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
    }
    // The client went away before the body ended: an 'aborted' error, or a close without one.
    const onError = (): void => {
      cleanup()
      reject(endedEarly())
    }
    const onClose = onError
    request.on('data', onData)
    request.once('end', onEnd)
    request.once('error', onError)
    request.once('close', onClose)
  })
}

/**
 * What of a refused body is still read, and for how long, once its answer is on its way: nginx's lingering close
 * (lingering_time, lingering_timeout). The client may still be sending the body, and a socket closed with bytes unread
 * is reset; the reset can reach the client before it has read the answer, which it then never sees (EPIPE on its
 * write instead of the 413).
 */
export const LINGER_BYTES_MAX = 8 * 1024 * 1024
export const LINGER_MS = 5_000

/**
 * The answer says Connection: close; after it, this side is closed (FIN) and the rest of the body is read and dropped
 * until it ends, the client closes, LINGER_BYTES_MAX more bytes came or LINGER_MS passed; then the socket is destroyed.
 * Node would destroy it as soon as the answer is written (its server calls destroySoon for a Connection: close answer),
 * so this socket's destroySoon is replaced by the lingering one.
 */
function closeAfterAnswer(ctx: Context): void {
  ctx.set('Connection', 'close')
  const request = ctx.req
  const socket = request.socket as IncomingMessage['socket'] | undefined
  let dropped = 0
  request.on('data', (chunk: Buffer) => {
    dropped += chunk.length
    if (dropped > LINGER_BYTES_MAX) socket?.destroy()
  })
  request.resume()
  // A request without a socket is a test's stream.
  if (socket === undefined || socket === null) return
  const timer = setTimeout(() => socket.destroy(), LINGER_MS)
  socket.once('close', () => clearTimeout(timer))
  socket.destroySoon = () => {
    socket.end()
    const destroyOnceWritten = (): void => {
      if (socket.writableFinished) socket.destroy()
      else socket.once('finish', () => socket.destroy())
    }
    if (request.complete || request.destroyed) destroyOnceWritten()
    else {
      request.once('end', destroyOnceWritten)
      request.once('close', destroyOnceWritten)
    }
  }
}

function endedEarly(): WardenError {
  return new InvalidInputError('body', 'ended early: the connection closed before the whole body arrived')
}

function tooLarge(limit: number): WardenError {
  return new WardenError('payload_too_large', `body: must be at most ${limit} bytes`, 'body')
}

const UTF8 = new TextDecoder('utf-8', { fatal: true })
/** A UTF-16 code unit of a surrogate pair standing alone: with the `u` flag, a whole pair is one code point, not Cs. */
const LONE_SURROGATE = /\p{Cs}/u
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/
/** A number that may overflow a double: an exponent of three or more digits, or 309 digits in a row. */
const OVERFLOW_CANDIDATE = /[eE][+]?\d{3}|\d{309}/

/**
 * The parsed JSON body; an empty body reads as `undefined`. The body must be UTF-8 and its strings valid Unicode:
 * a lone surrogate (`"\udbff"`) would be stored as U+FFFD by LevelDB's UTF-8 keys and msgpack's strings, so the
 * record read back would differ from the one acknowledged and hashed; it is a 400 naming the field instead.
 */
export async function readJson(ctx: Context, limits?: BodyLimits): Promise<unknown> {
  return parseJson(await readBody(ctx, limits))
}

export function parseJson(bytes: Buffer): unknown {
  let text: string
  try {
    text = UTF8.decode(bytes).trim()
  } catch {
    throw new InvalidInputError('body', 'is not valid UTF-8')
  }
  if (text === '') return undefined
  let value: unknown
  try {
    value = JSON.parse(text) as unknown
  } catch (error) {
    throw new InvalidInputError('body', `is not valid JSON (${(error as Error).message})`)
  }
  // A surrogate can only come from a \u escape (the UTF-8 decoding refused any other way), and JSON.parse turns only
  // a number of more than 308 digits or exponent into Infinity: walk only when the text holds either. Go's decoder
  // (Consul's) refuses such a number; stored, it would read back as null.
  const unicode = SURROGATE_ESCAPE.test(text)
  const finite = OVERFLOW_CANDIDATE.test(text)
  if (unicode || finite) checkValues(value, { unicode, finite })
  return value
}

/** A field path as an error names it: a path 100,000 levels deep is cut, not quoted whole. */
function shortPath(path: string): string {
  return path.length <= 256 ? path : `${path.slice(0, 256)}…`
}

/**
 * Throws naming the first key or string value holding a lone surrogate. Walks with a stack of its own, not by
 * recursion: this runs before any route bounds the depth, and a body of 100,000 nested arrays must be a 400, not a
 * stack overflow.
 */
function checkValues(root: unknown, check: { unicode: boolean; finite: boolean }): void {
  const pending: Array<{ value: unknown; path: string }> = [{ value: root, path: '' }]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value, path } = next
    if (typeof value === 'string') {
      if (check.unicode && LONE_SURROGATE.test(value)) throw new InvalidInputError(path === '' ? 'body' : shortPath(path), 'must be valid Unicode text (it holds a lone surrogate)')
    } else if (typeof value === 'number') {
      if (check.finite && !Number.isFinite(value)) throw new InvalidInputError(path === '' ? 'body' : shortPath(path), 'must be a number within the range of a 64-bit float')
    } else if (Array.isArray(value)) {
      // Pushed in reverse, so the first element is looked at first, as the message should name the first problem.
      for (let index = value.length - 1; index >= 0; index--) pending.push({ value: value[index], path: `${path}[${index}]` })
    } else if (typeof value === 'object' && value !== null) {
      const entries = Object.entries(value)
      for (const [key] of check.unicode ? entries : []) {
        if (LONE_SURROGATE.test(key)) throw new InvalidInputError(shortPath(path === '' ? key : `${path}.${key}`), 'must be valid Unicode text (a key holds a lone surrogate)')
      }
      for (let index = entries.length - 1; index >= 0; index--) {
        const [key, item] = entries[index]!
        pending.push({ value: item, path: path === '' ? key : `${path}.${key}` })
      }
    }
  }
}

/**
 * The body as a JSON object (empty means `{}`), read for the request's caller. On a route anyone may call
 * (ANONYMOUS_BODY) there is no caller to speak of. On every other route the caller is resolved first, so a secret
 * that names no live token is refused before a byte of its body is read, and a request acting as the anonymous token
 * reads its body as the anonymous routes do (ANONYMOUS_BODY: 64 KiB within 10 s, against their own budget): were
 * anonymous bodies read against the budget every authenticated write reads against, 64 anonymous connections each
 * trickling 1 MiB would refuse every write on the node for as long as they trickle. Once the body has arrived, the
 * caller is authorized again (request.ts authorizeAfterBody) before the body is even parsed.
 */
export async function readJsonObject(ctx: ApiContext, limits?: BodyLimits): Promise<Record<string, unknown>> {
  let value: unknown
  if (limits?.anonymous === true) value = await readJson(ctx, limits)
  else {
    const caller = await callerOf(ctx)
    const bytes = await readBody(ctx, caller.token.AccessorID === ANONYMOUS_TOKEN_ID ? ANONYMOUS_BODY : limits)
    await authorizeAfterBody(ctx)
    value = parseJson(bytes)
  }
  if (value === undefined) return {}
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidInputError('body', 'must be a JSON object')
  }
  return value as Record<string, unknown>
}
