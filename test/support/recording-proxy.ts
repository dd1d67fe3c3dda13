/**
 * A TCP proxy that records every byte it relays, for tests that look at what crosses a peer link on the wire (what
 * a packet capture would show; the test machines have no tcpdump). It understands nothing of what it relays, so it
 * works as well for TLS as for WebSocket in clear (test/support/relay.ts, which splits WebSocket frames, waits for an
 * HTTP upgrade that a TLS stream never shows).
 *
 * Bytes are kept per connection and per direction, each as one contiguous stream: a secret split across two TCP
 * chunks, with a chunk of the other direction in between, is still found by searching a stream.
 */
import { connect, createServer, type Server, type Socket } from 'node:net'
import { pairSockets } from './socket-pair.js'

/** One direction of one relayed connection, from its first byte. */
export interface RecordedStream {
  /** Which relayed connection, from 1 in the order accepted. */
  connection: number
  direction: 'toAcceptor' | 'toDialer'
  bytes: Buffer
}

export interface RecordingProxy {
  /** 127.0.0.1:PORT, to give the dialer instead of the target. */
  address: string
  /** Connections accepted so far. */
  connections: number
  /** Every connection's two streams, in the order accepted. */
  streams(): RecordedStream[]
  /** How many bytes were recorded, both ways, over every connection. */
  capturedBytes(): number
  /** Resets every open connection at once (both sides see the reset); new connections still go through. */
  cut(): void
  close(): Promise<void>
}

/** Bytes kept at most, over every stream: enough for any test's traffic, bounded all the same. */
const CAPTURE_BYTES_MAX = 64 * 1024 * 1024

export async function startRecordingProxy(target: string): Promise<RecordingProxy> {
  const [host, port] = target.split(':') as [string, string]
  const sockets = new Set<Socket>()
  const recorded: Array<{ connection: number; toAcceptor: Buffer[]; toDialer: Buffer[] }> = []
  let total = 0
  const server: Server = createServer((client) => {
    proxy.connections += 1
    const record = { connection: proxy.connections, toAcceptor: [] as Buffer[], toDialer: [] as Buffer[] }
    recorded.push(record)
    const upstream = connect({ host, port: Number(port) })
    pairSockets(client, upstream, sockets)
    const keep = (chunks: Buffer[], chunk: Buffer): void => {
      if (total + chunk.length > CAPTURE_BYTES_MAX) return
      total += chunk.length
      chunks.push(Buffer.from(chunk))
    }
    client.on('data', (chunk: Buffer) => keep(record.toAcceptor, chunk))
    upstream.on('data', (chunk: Buffer) => keep(record.toDialer, chunk))
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const proxy: RecordingProxy = {
    address: `127.0.0.1:${(server.address() as { port: number }).port}`,
    connections: 0,
    streams: () =>
      recorded.flatMap((record) => [
        { connection: record.connection, direction: 'toAcceptor' as const, bytes: Buffer.concat(record.toAcceptor) },
        { connection: record.connection, direction: 'toDialer' as const, bytes: Buffer.concat(record.toDialer) },
      ]),
    capturedBytes: () => total,
    cut() {
      for (const socket of sockets) socket.resetAndDestroy()
    },
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  return proxy
}
