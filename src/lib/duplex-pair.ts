/**
 * Two connected in-memory streams: what one end writes, the other reads, as over a socket (Node 22 has
 * stream.duplexPair; this is for Node 20). The ends also answer the socket methods node:http calls on a connection
 * (timeouts, keep-alive, Nagle), which mean nothing in memory, so an http.Server can serve one end while a client
 * request runs over the other.
 */
import { Duplex } from 'node:stream'

class End extends Duplex {
  other: End | undefined
  readonly remotePort: number | undefined = undefined

  constructor(
    /** What node:http (and the audit log) reads off a connection: who is at the other end, when the caller says. */
    readonly remoteAddress: string | undefined,
  ) {
    super()
  }

  override _read(): void {
    // Data is pushed by the other end's writes.
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.other?.push(chunk)
    done()
  }

  override _final(done: (error?: Error | null) => void): void {
    this.other?.push(null)
    done()
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    // The connection is gone for both: the other end ends, as a socket does when its peer closes.
    const other = this.other
    this.other = undefined
    if (other !== undefined && !other.destroyed) other.destroy()
    done(error)
  }

  setTimeout(_ms: number, callback?: () => void): this {
    if (callback !== undefined) this.once('timeout', callback)
    return this
  }

  setNoDelay(): this {
    return this
  }

  setKeepAlive(): this {
    return this
  }

  ref(): this {
    return this
  }

  unref(): this {
    return this
  }
}

/** `[first, second]`; `secondPeer` is what the second end reports as its remote address (the first's has none). */
export function duplexPair(secondPeer?: string): [Duplex, Duplex] {
  const one = new End(undefined)
  const two = new End(secondPeer)
  one.other = two
  two.other = one
  return [one, two]
}
