/**
 * The benchmark's own HTTP calls, for the drivers autocannon cannot be (compare-and-set loops that read before they
 * write, failover writers that change target when a node dies, setup that must send distinct bodies), through the API
 * client (src/api), which also speaks to etcd's JSON gateway for the comparison. A `ClientPool` holds one client per
 * address: with keep-alive, at most `maxSockets` sockets to each address, all kept open between calls (as the
 * node:http agent the benchmark used before counted them); without, a connection of its own for every call.
 */
import type { IncomingHttpHeaders } from 'node:http'
import { Client } from '../../src/api/index.js'

export interface HttpAnswer {
  status: number
  headers: IncomingHttpHeaders
  text: string
}

export class ClientPool {
  private readonly clients = new Map<string, Client>()

  constructor(private readonly connections: { keepAlive: true; maxSockets: number } | { keepAlive: false }) {}

  for(address: string): Client {
    let client = this.clients.get(address)
    if (client === undefined) {
      const { connections } = this
      client = new Client(connections.keepAlive ? { address, maxSockets: connections.maxSockets, maxFreeSockets: connections.maxSockets } : { address, keepAlive: false })
      this.clients.set(address, client)
    }
    return client
  }

  close(): void {
    for (const client of this.clients.values()) client.close()
    this.clients.clear()
  }
}

/** At most `maxSockets` keep-alive sockets to each address. */
export function keepAliveClients(maxSockets: number): ClientPool {
  return new ClientPool({ keepAlive: true, maxSockets })
}

/** A connection of its own for every call, closed after the answer. */
export function freshConnections(): ClientPool {
  return new ClientPool({ keepAlive: false })
}

export interface HttpOptions {
  token?: string
  /** Sent as JSON; a string is sent as it is (typed JSON). */
  body?: unknown
  /** The whole call's deadline, 10 s by default (on node:http it was the socket's idle time; the same for these calls, whose answers come in one piece). */
  timeoutMs?: number
}

/** One request; rejects on a network error or timeout (a ConnectionError: the caller decides whether that is a failed write). */
export async function httpCall(clients: ClientPool, address: string, method: string, path: string, options: HttpOptions = {}): Promise<HttpAnswer> {
  const answer = await clients.for(address).request(method, path, {
    ...(options.token === undefined ? {} : { token: options.token }),
    ...(options.body === undefined ? {} : typeof options.body === 'string' ? { raw: options.body } : { body: options.body }),
    timeoutMs: options.timeoutMs ?? 10_000,
  })
  return { status: answer.status, headers: answer.headers, text: answer.text }
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
