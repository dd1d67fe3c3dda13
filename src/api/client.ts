/**
 * The core of the client: one request with the caller's defaults (address, token, namespace, datacenter, TLS) and
 * the per-call options of Consul's API clients (consistency, blocking index and wait, filter). Every caller of the
 * HTTP API outside an agent goes through here: the CLI, the cluster tool, the benchmarks, chaos and the tests.
 *
 * Three levels: `request` answers whatever the server said (tests look at statuses and headers); `call` throws an
 * ApiError for anything outside 2xx and returns the parsed body with the query metadata; the resource groups
 * (acl.ts, config.ts, operator.ts) name every endpoint of the contract.
 */
import type { IncomingHttpHeaders } from 'node:http'
import { parseDuration } from '../lib/duration.js'
import { ApiError, errorFromAnswer } from './errors.js'
import { Transport, type TlsOptions } from './transport.js'

export const DEFAULT_ADDRESS = '127.0.0.1:8500'
/** How long a call may wait for its answer, unless it says otherwise (a blocking query adds its own wait). */
export const DEFAULT_TIMEOUT_MS = 60_000
const RESPONSE_BYTES_MAX = 256 * 1024 * 1024

export interface ClientOptions {
  /** `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT`; 127.0.0.1:8500 when absent. */
  address?: string
  /** Sent as X-Service-Token unless a call gives its own. */
  token?: string
  namespace?: string
  datacenter?: string
  tls?: TlsOptions
  timeoutMs?: number
  /** Sockets the client keeps open to the server at most (keep-alive); 64 by default. */
  maxSockets?: number
  /** Idle sockets kept open for the next request at most; min(maxSockets, 256) by default. */
  maxFreeSockets?: number
  /**
   * false: every request on a connection of its own, closed after the answer, as a client that has just started
   * (the failover benchmark's probe). maxSockets and maxFreeSockets do not apply. true by default.
   */
  keepAlive?: boolean
  /** See ConnectionOptions.idleTimeoutMs (transport.ts): 4 s by default. */
  idleTimeoutMs?: number
  /** See ConnectionOptions.createConnection (transport.ts). */
  createConnection?: () => import('node:stream').Duplex
  responseBytesMax?: number
}

type QueryValue = string | number | boolean | undefined | null

export interface RequestOptions {
  /** The call's token; `null` sends none, even when the client has one. */
  token?: string | null
  namespace?: string
  datacenter?: string
  /** Query parameters; `true` is sent as a bare flag (`?expanded`), false, undefined and null not at all. */
  query?: Record<string, QueryValue>
  /** Sent as JSON. */
  body?: unknown
  /** Sent as it is, with `Content-Type: application/json` unless `headers` names another. */
  raw?: string | Buffer
  headers?: Record<string, string>
  timeoutMs?: number
  signal?: AbortSignal
  /**
   * Read the answer's body and drop it (`text` is '', `body` undefined): for drivers that time answers by the
   * thousand and need only their status (the blocking-query benchmark).
   */
  discardBody?: boolean
  /**
   * Called once the whole request has been handed to the operating system: for drivers that pace their requests.
   * Called again for a GET sent again on a fresh connection (transport.ts).
   */
  onSent?: () => void
}

/** `upload`'s options: a request's, without a body of its own (the source is the body). */
export interface UploadOptions extends Omit<RequestOptions, 'body' | 'raw' | 'discardBody'> {
  /** PUT unless said otherwise. */
  method?: string
  /** The source's length in bytes, sent as Content-Length; the body is chunked when absent. */
  bytes?: number
}

export type Consistency = 'default' | 'stale' | 'consistent'

export interface QueryOptions extends RequestOptions {
  consistency?: Consistency
  /** Blocking query: answer once the index passes this one (or `wait` runs out). */
  index?: number
  /** A duration (`30s`, `5m`) or milliseconds; the server's default (5m) when absent. */
  wait?: string | number
  /** The filter expression language, on lists that take one. */
  filter?: string
}

/** What read answers say about themselves (Consul's QueryMeta). */
export interface QueryMeta {
  index: number
  knownLeader: boolean
  lastContactMs: number
  effectiveConsistency: string | undefined
  defaultAclPolicy: string | undefined
  resultsFilteredByAcls: boolean
}

export interface Answer<T = unknown> {
  status: number
  headers: IncomingHttpHeaders
  /**
   * The body parsed as JSON, or undefined when it is empty or not JSON (`text` has it). Parsed when first read, so
   * a caller that times answers and reads only the status does not pay for parsing.
   */
  body: T
  text: string
  meta: QueryMeta
}

export interface Result<T> {
  value: T
  meta: QueryMeta
}

export class Client {
  private readonly transport: Transport

  constructor(readonly options: ClientOptions = {}) {
    this.transport = new Transport(options.address ?? DEFAULT_ADDRESS, {
      ...(options.tls === undefined ? {} : { tls: options.tls }),
      ...(options.maxSockets === undefined ? {} : { maxSockets: options.maxSockets }),
      ...(options.maxFreeSockets === undefined ? {} : { maxFreeSockets: options.maxFreeSockets }),
      ...(options.keepAlive === undefined ? {} : { keepAlive: options.keepAlive }),
      ...(options.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: options.idleTimeoutMs }),
      ...(options.createConnection === undefined ? {} : { createConnection: options.createConnection }),
    })
  }

  /** The address as given, for messages. */
  get address(): string {
    return this.transport.endpoint.text
  }

  /** Closes idle connections; call it when done, or the process keeps its sockets until they time out. */
  close(): void {
    this.transport.close()
  }

  /** Any answer; throws only a ConnectionError (no answer). */
  async request<T = any>(method: string, path: string, options: QueryOptions = {}): Promise<Answer<T>> {
    const headers: Record<string, string> = { Accept: 'application/json' }
    const token = options.token === undefined ? this.options.token : options.token
    if (token !== undefined && token !== null && token !== '') headers['X-Service-Token'] = token
    let body: string | Buffer | undefined = options.raw
    if (options.body !== undefined) body = JSON.stringify(options.body)
    if (body !== undefined) headers['Content-Type'] = 'application/json'
    for (const [name, value] of Object.entries(options.headers ?? {})) {
      // The caller's header replaces a default of the same name in any case ('content-type' and 'Content-Type').
      for (const existing of Object.keys(headers)) if (existing.toLowerCase() === name.toLowerCase()) delete headers[existing]
      headers[name] = value
    }
    const timeoutMs = options.timeoutMs ?? this.options.timeoutMs ?? defaultTimeout(options)
    const raw = await this.transport.send({
      method,
      path: withQuery(path, this.queryOf(options)),
      headers,
      ...(body === undefined ? {} : { body }),
      timeoutMs,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      responseBytesMax: this.options.responseBytesMax ?? RESPONSE_BYTES_MAX,
      ...(options.discardBody === undefined ? {} : { discardBody: options.discardBody }),
      ...(options.onSent === undefined ? {} : { onSent: options.onSent }),
    })
    return answerOf<T>(raw.status, raw.headers, raw.text)
  }

  /**
   * A GET whose 2xx body goes to `sink` as it arrives (GET /v1/snapshot): answers its metadata; anything else is thrown
   * as an ApiError. `options.timeoutMs` bounds the whole exchange.
   */
  async download(path: string, sink: (chunk: Buffer) => void | Promise<void>, options: QueryOptions = {}): Promise<QueryMeta> {
    const headers: Record<string, string> = {}
    const token = options.token === undefined ? this.options.token : options.token
    if (token !== undefined && token !== null && token !== '') headers['X-Service-Token'] = token
    const raw = await this.transport.send({
      method: 'GET',
      path: withQuery(path, this.queryOf(options)),
      headers,
      timeoutMs: options.timeoutMs ?? this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      responseBytesMax: this.options.responseBytesMax ?? RESPONSE_BYTES_MAX,
      sink,
    })
    if (raw.status < 200 || raw.status > 299) throw errorFromAnswer(raw.status, parseJson(raw.text), raw.text)
    return metaOf(raw.headers)
  }

  /**
   * A PUT whose body is `source`, sent a chunk at a time as the connection takes it and never held whole (PUT
   * /v1/snapshot, the counterpart of `download`): answers the write's metadata (`index` is X-Service-Index); anything
   * else is thrown as an ApiError. `options.timeoutMs` bounds the whole exchange. Never retried, here or by a caller
   * that goes by ConnectionError.reached: the source is first read once the connection is up, and any failure after
   * that is `reached: 'maybe'` (see Exchange.source).
   */
  async upload(path: string, source: AsyncIterable<Buffer | Uint8Array>, options: UploadOptions = {}): Promise<QueryMeta> {
    const headers: Record<string, string> = { Accept: 'application/json', 'Content-Type': 'application/octet-stream' }
    const token = options.token === undefined ? this.options.token : options.token
    if (token !== undefined && token !== null && token !== '') headers['X-Service-Token'] = token
    for (const [name, value] of Object.entries(options.headers ?? {})) {
      for (const existing of Object.keys(headers)) if (existing.toLowerCase() === name.toLowerCase()) delete headers[existing]
      headers[name] = value
    }
    const raw = await this.transport.send({
      method: options.method ?? 'PUT',
      path: withQuery(path, this.queryOf(options)),
      headers,
      source,
      ...(options.bytes === undefined ? {} : { sourceBytes: options.bytes }),
      timeoutMs: options.timeoutMs ?? this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      responseBytesMax: this.options.responseBytesMax ?? RESPONSE_BYTES_MAX,
      ...(options.onSent === undefined ? {} : { onSent: options.onSent }),
    })
    if (raw.status < 200 || raw.status > 299) throw errorFromAnswer(raw.status, parseJson(raw.text), raw.text)
    return metaOf(raw.headers)
  }

  /** A 2xx answer's body and metadata; anything else is thrown as an ApiError rebuilt from its body. */
  async call<T>(method: string, path: string, options: QueryOptions = {}): Promise<Result<T>> {
    const answer = await this.request<T>(method, path, options)
    if (answer.status < 200 || answer.status > 299) throw errorFromAnswer(answer.status, answer.body, answer.text)
    return { value: answer.body, meta: answer.meta }
  }

  /** A read with its metadata, for blocking loops (see watch.ts). */
  query<T>(path: string, options: QueryOptions = {}): Promise<Result<T>> {
    return this.call<T>('GET', path, options)
  }

  async get<T>(path: string, options: QueryOptions = {}): Promise<T> {
    return (await this.call<T>('GET', path, options)).value
  }

  async put<T>(path: string, body: unknown, options: RequestOptions = {}): Promise<T> {
    return (await this.call<T>('PUT', path, { ...options, ...(body === undefined ? {} : { body }) })).value
  }

  async post<T>(path: string, body: unknown, options: RequestOptions = {}): Promise<T> {
    return (await this.call<T>('POST', path, { ...options, ...(body === undefined ? {} : { body }) })).value
  }

  async delete<T>(path: string, options: RequestOptions = {}): Promise<T> {
    return (await this.call<T>('DELETE', path, options)).value
  }

  private queryOf(options: QueryOptions): Record<string, QueryValue> {
    const query: Record<string, QueryValue> = {}
    const namespace = options.namespace ?? this.options.namespace
    const datacenter = options.datacenter ?? this.options.datacenter
    if (namespace !== undefined && namespace !== '') query['ns'] = namespace
    if (datacenter !== undefined && datacenter !== '') query['dc'] = datacenter
    if (options.consistency === 'stale') query['stale'] = true
    if (options.consistency === 'consistent') query['consistent'] = true
    if (options.index !== undefined) query['index'] = options.index
    if (options.wait !== undefined) query['wait'] = typeof options.wait === 'number' ? `${Math.round(options.wait)}ms` : options.wait
    if (options.filter !== undefined && options.filter !== '') query['filter'] = options.filter
    return { ...query, ...options.query }
  }
}

/** A blocking query may be held for its wait (the server adds up to wait/16 of jitter); anything else gets a minute. */
function defaultTimeout(options: QueryOptions): number {
  if (options.index === undefined) return DEFAULT_TIMEOUT_MS
  const waitMs = options.wait === undefined ? 5 * 60_000 : typeof options.wait === 'number' ? options.wait : durationMs(options.wait)
  return waitMs + waitMs / 16 + 15_000
}

/** Go duration text to milliseconds, for the timeout only; a form it does not know gets the server's maximum wait. */
function durationMs(text: string): number {
  const ms = parseDuration(text)
  return ms === undefined || ms < 0 ? 10 * 60_000 : ms
}

export function withQuery(path: string, query: Record<string, QueryValue>): string {
  const parts: string[] = []
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === false) continue
    parts.push(value === true ? encodeURIComponent(name) : `${encodeURIComponent(name)}=${encodeURIComponent(String(value))}`)
  }
  if (parts.length === 0) return path
  return `${path}${path.includes('?') ? '&' : '?'}${parts.join('&')}`
}

/** An answer whose body is parsed on first read (and once). */
function answerOf<T>(status: number, headers: IncomingHttpHeaders, text: string): Answer<T> {
  const meta = metaOf(headers)
  // Nothing to parse (an empty body, or one discarded): a plain object, since a getter costs microseconds per answer
  // and the blocking-query driver takes answers by the ten thousand.
  if (text === '') return { status, headers, body: undefined as T, text, meta }
  let parsed: { value: T } | undefined
  const answer = { status, headers, text, meta }
  return Object.defineProperty(answer, 'body', {
    enumerable: true,
    get: (): T => (parsed ??= { value: parseJson(text) as T }).value,
  }) as Answer<T>
}

function parseJson(text: string): unknown {
  if (text === '') return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined // Not JSON (a proxy's error page): the caller has `text`.
  }
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  // The contract's X-Service-* first; X-Consul-* lets the client read a Consul-shaped server too.
  const value = headers[`x-service-${name}`] ?? headers[`x-consul-${name}`]
  return Array.isArray(value) ? value[0] : value
}

export function metaOf(headers: IncomingHttpHeaders): QueryMeta {
  return {
    index: Number(header(headers, 'index') ?? 0) || 0,
    knownLeader: header(headers, 'knownleader') === 'true',
    lastContactMs: Number(header(headers, 'lastcontact') ?? 0) || 0,
    effectiveConsistency: header(headers, 'effective-consistency'),
    defaultAclPolicy: header(headers, 'default-acl-policy'),
    resultsFilteredByAcls: header(headers, 'results-filtered-by-acls') === 'true',
  }
}

export { ApiError }
