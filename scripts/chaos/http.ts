/**
 * One HTTP request of the chaos workload, through the API client (src/api): bounded by a timeout, and telling apart
 * the failures that prove the request never reached a server (connection refused: safe to count as not applied)
 * from those that do not (a timeout, a reset connection: the write may have been applied). That is the client's
 * ConnectionError.reached: 'no' only while no connection was up, so nothing of the request can have been sent.
 */
import { Client, ConnectionError } from '../../src/api/index.js'

export type Answer =
  /** `lagging`: a secondary answered a write it sent to the primary before it had replicated it (X-Service-Replication-Lagging). */
  | { kind: 'response'; status: number; body: unknown; text: string; lagging?: boolean }
  | { kind: 'error'; reached: 'no' | 'maybe'; error: string }

/** API clients by node address: a node comes back on its ports after a restart, so one client serves all its lives. */
export class Clients {
  private readonly byAddress = new Map<string, Client>()

  constructor(private readonly token: string) {}

  for(address: string): Client {
    let client = this.byAddress.get(address)
    if (client === undefined) {
      // Unbounded sockets (as fetch was): every workload client may have a request in flight on the same node.
      client = new Client({ address, token: this.token, maxSockets: Infinity })
      this.byAddress.set(address, client)
    }
    return client
  }

  close(): void {
    for (const client of this.byAddress.values()) client.close()
    this.byAddress.clear()
  }
}

export async function request(
  client: Client,
  method: string,
  path: string,
  options: { body?: unknown; timeoutMs: number; signal?: AbortSignal },
): Promise<Answer> {
  try {
    const answer = await client.request(method, path, {
      ...(options.body === undefined ? {} : { body: options.body }),
      timeoutMs: options.timeoutMs,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    })
    const lagging = answer.headers['x-service-replication-lagging'] === 'true' || answer.headers['x-consul-replication-lagging'] === 'true'
    return { kind: 'response', status: answer.status, body: answer.body, text: answer.text, ...(lagging ? { lagging } : {}) }
  } catch (error) {
    if (!(error instanceof ConnectionError)) throw error // A bug here (a bad address), not a fault of the run.
    return { kind: 'error', reached: error.reached, error: describe(error) }
  }
}

/** The name the history records: the system error code, or TimeoutError / AbortError as the workload wrote them before. */
function describe(error: ConnectionError): string {
  if (error.reason === 'timeout') return 'TimeoutError'
  if (error.reason === 'aborted') return 'AbortError'
  return error.reason
}
