/**
 * A small HTTP client over node:http with a keep-alive agent, for the drivers autocannon cannot be (compare-and-set
 * loops that read before they write, failover writers that change target when a node dies, setup that must send
 * distinct bodies). node:http rather than fetch: its agent gives direct control of sockets and of their number.
 */
import { Agent, request as httpRequest } from 'node:http'

export interface HttpAnswer {
  status: number
  headers: Record<string, string | string[] | undefined>
  text: string
}

export function keepAliveAgent(maxSockets: number): Agent {
  return new Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets })
}

export interface HttpOptions {
  token?: string
  body?: unknown
  timeoutMs?: number
}

/**
 * One request; rejects on a network error or timeout (the caller decides whether that is a failed write). `agent:
 * false` is a connection of its own, closed after the answer.
 */
export function httpCall(agent: Agent | false, address: string, method: string, path: string, options: HttpOptions = {}): Promise<HttpAnswer> {
  const colon = address.lastIndexOf(':')
  const body = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body)
  const headers: Record<string, string | number> = {}
  if (options.token !== undefined) headers['X-Service-Token'] = options.token
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json'
    headers['Content-Length'] = Buffer.byteLength(body)
  }
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      { agent, host: address.slice(0, colon), port: Number(address.slice(colon + 1)), method, path, headers, timeout: options.timeoutMs ?? 10_000 },
      (response) => {
        let text = ''
        response.setEncoding('utf8')
        response.on('data', (chunk: string) => (text += chunk))
        response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, text }))
        response.on('error', reject)
      },
    )
    request.on('timeout', () => request.destroy(new Error(`${method} ${path}: no answer within ${options.timeoutMs ?? 10_000} ms`)))
    request.on('error', reject)
    request.end(body)
  })
}

/** Runs `task(n)` for n in [0, count) with at most `concurrency` at once; stops at the first error. */
export async function pool(count: number, concurrency: number, task: (n: number) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < count) {
      const n = next++
      await task(n)
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker))
}

/** Latency percentile (nearest rank) of an unsorted list, in the list's unit. */
export function percentile(values: number[], fraction: number): number {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))] ?? 0
}
