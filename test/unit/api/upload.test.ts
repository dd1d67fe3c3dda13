/**
 * The client's streamed request body (src/api, Exchange.source and Client.upload: PUT /v1/snapshot's archive) against
 * a bare node:http server on loopback: the body arrives whole and in order, chunked or with the Content-Length given;
 * it is read only as fast as the server takes it (never held whole); an error answer is the usual ApiError, and one
 * given before the body is read stops the sending; a source is never read before the connection is up, and a failure
 * once it has been read is `reached: 'maybe'`, so nothing retries it elsewhere.
 */
import { expect } from 'chai'
import { createHash } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { ApiError, type Client, ConnectionError } from '../../../src/api/index.js'
import { madeClients, until } from './clients.js'

interface Loopback {
  address: string
  /** Every request's method, path and headers, in order of arrival. */
  requests: IncomingMessage[]
  close(): Promise<void>
}

async function startServer(handle: (request: IncomingMessage, response: ServerResponse) => void): Promise<Loopback> {
  const requests: IncomingMessage[] = []
  const sockets = new Set<Socket>()
  const server: Server = createServer((request, response) => {
    requests.push(request)
    handle(request, response)
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  return {
    address: `127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}

/** Reads a request's body to its end: its length and SHA-256, never the bytes themselves. */
async function digest(request: IncomingMessage, onChunk?: (bytes: number) => Promise<void> | void): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256')
  let bytes = 0
  for await (const chunk of request as AsyncIterable<Buffer>) {
    hash.update(chunk)
    bytes += chunk.length
    await onChunk?.(bytes)
  }
  return { bytes, sha256: hash.digest('hex') }
}

/**
 * `count` chunks of `size` bytes, each different (its number, repeated), so a chunk lost, repeated or moved
 * changes the digest. `pulled` counts the bytes the transport has taken so far.
 */
function generated(count: number, size: number): { source: AsyncIterable<Buffer>; pulled: () => number; expected: () => string } {
  let pulled = 0
  const chunk = (n: number): Buffer => {
    const pattern = Buffer.alloc(4)
    pattern.writeUInt32BE(n)
    return Buffer.alloc(size, pattern)
  }
  return {
    source: (async function* () {
      for (let n = 0; n < count; n++) {
        const next = chunk(n)
        pulled += next.length
        yield next
      }
    })(),
    pulled: () => pulled,
    expected: () => {
      const hash = createHash('sha256')
      for (let n = 0; n < count; n++) hash.update(chunk(n))
      return hash.digest('hex')
    },
  }
}

function json(response: ServerResponse, status: number, value: unknown): void {
  response.statusCode = status
  response.setHeader('Content-Type', 'application/json')
  response.end(JSON.stringify(value))
}

const MiB = 1024 * 1024

describe('api client: streamed request bodies (upload)', function () {
  this.timeout(30_000)
  let loopback: Loopback | undefined
  const make = madeClients()
  const client = (address: string, options: Omit<ConstructorParameters<typeof Client>[0] & object, 'address'> = {}): Client => make({ address, ...options })

  afterEach(async function () {
    await loopback?.close()
    loopback = undefined
  })

  it('sends the source whole and in order, chunked, with the token, and answers X-Service-Index', async function () {
    let received: { bytes: number; sha256: string } | undefined
    loopback = await startServer((request, response) => {
      void digest(request).then((result) => {
        received = result
        response.setHeader('X-Service-Index', '4321')
        response.end()
      })
    })
    const body = generated(64, 64 * 1024 + 3)
    const meta = await client(loopback.address, { token: 'secret-token' }).upload('/v1/snapshot', body.source)
    expect(meta.index).to.equal(4321)
    expect(received).to.deep.equal({ bytes: 64 * (64 * 1024 + 3), sha256: body.expected() })
    const [request] = loopback.requests
    expect(request?.method).to.equal('PUT')
    expect(request?.url).to.equal('/v1/snapshot')
    expect(request?.headers['transfer-encoding']).to.equal('chunked')
    expect(request?.headers['content-length']).to.equal(undefined)
    expect(request?.headers['x-service-token']).to.equal('secret-token')
  })

  it('sends the Content-Length given, and fails a source shorter or longer than it without sending it whole', async function () {
    const seen: Array<{ bytes: number; sha256: string } | 'aborted'> = []
    loopback = await startServer((request, response) => {
      digest(request).then(
        (result) => {
          seen.push(result)
          response.end()
        },
        () => seen.push('aborted'),
      )
    })
    const api = client(loopback.address)
    const exact = generated(8, 1000)
    await api.upload('/v1/snapshot', exact.source, { bytes: 8000 })
    expect(loopback.requests[0]?.headers['content-length']).to.equal('8000')
    expect(seen[0]).to.deep.equal({ bytes: 8000, sha256: exact.expected() })

    // 4 MiB each, more than the socket takes at once, so the server has begun to read each before it breaks off.
    const size = 64 * 64 * 1024
    for (const [bytes, what] of [[size + 1, /ended after 4194304 of the 4194305 bytes announced/], [size - 1, /longer than the 4194303 bytes announced/]] as const) {
      const error = await api.upload('/v1/snapshot', generated(64, 64 * 1024).source, { bytes }).then(
        () => undefined,
        (caught: unknown) => caught,
      )
      expect(error, String(bytes)).to.be.instanceOf(ConnectionError)
      expect((error as ConnectionError).reason).to.equal('source')
      expect((error as ConnectionError).reached).to.equal('maybe')
      expect((error as Error).message).to.match(what)
    }
    // The server never took either for a whole body: both requests broke off.
    await until(() => seen.length === 3, 'the server saw the two requests end')
    expect(seen.slice(1)).to.deep.equal(['aborted', 'aborted'])
  })

  it('reads the source only as fast as the server takes it: a 256 MiB body is never more than a few MiB ahead', async function () {
    // The server reads slowly (a pause every 8 MiB), so a client that buffered would run far ahead of it.
    let taken = 0
    let received: { bytes: number; sha256: string } | undefined
    let lead = 0
    const body = generated(256, MiB)
    loopback = await startServer((request, response) => {
      void digest(request, async (bytes) => {
        taken = bytes
        lead = Math.max(lead, body.pulled() - taken)
        if (Math.floor(bytes / (8 * MiB)) !== Math.floor((bytes - 1) / (8 * MiB))) await new Promise((resolve) => setTimeout(resolve, 20))
      }).then((result) => {
        received = result
        response.setHeader('X-Service-Index', '7')
        response.end()
      })
    })
    const meta = await client(loopback.address).upload('/v1/snapshot', body.source, { bytes: 256 * MiB })
    expect(meta.index).to.equal(7)
    expect(received).to.deep.equal({ bytes: 256 * MiB, sha256: body.expected() })
    // Loopback socket buffers and node:http's own hold a few MiB; the whole body would be 256.
    expect(lead).to.be.below(32 * MiB)
  })

  it('an error answer is the ApiError its JSON names (409: a restore in progress)', async function () {
    loopback = await startServer((request, response) => {
      void digest(request).then(() => json(response, 409, { Error: 'a restore is in progress', Code: 'conflict' }))
    })
    const api = client(loopback.address)
    const error = await api.upload('/v1/snapshot', generated(4, 1024).source).then(
      () => undefined,
      (caught: unknown) => caught,
    )
    expect(error).to.be.instanceOf(ApiError)
    expect((error as ApiError).status).to.equal(409)
    expect((error as ApiError).code).to.equal('conflict')
    expect((error as ApiError).message).to.equal('a restore is in progress')
  })

  it('an answer before the body was read (413) stops the sending, and is the ApiError', async function () {
    loopback = await startServer((_request, response) => json(response, 413, { Error: 'the archive is over the limit of 1048576 bytes', Code: 'payload_too_large' }))
    const body = generated(1024, MiB)
    const api = client(loopback.address)
    const error = await api.upload('/v1/snapshot', body.source, { bytes: 1024 * MiB }).then(
      () => undefined,
      (caught: unknown) => caught,
    )
    expect(error).to.be.instanceOf(ApiError)
    expect((error as ApiError).status).to.equal(413)
    expect((error as ApiError).code).to.equal('payload_too_large')
    expect(body.pulled()).to.be.below(64 * MiB)
    // The next request works: a fresh connection, not the one whose body was cut short.
    const after = await api.request('GET', '/v1/status/leader')
    expect(after.status).to.equal(413)
    expect(loopback.requests).to.have.length(2)
  })

  it('a connection refused leaves the source unread and is reached "no"; a connection lost mid-body is "maybe", sent once', async function () {
    // Refused: take a free port by binding and closing a server on it.
    const closed = await startServer(() => undefined)
    const refusedAddress = closed.address
    await closed.close()
    const untouched = generated(4, 1024)
    const refused = await client(refusedAddress).upload('/v1/snapshot', untouched.source).then(
      () => undefined,
      (caught: unknown) => caught,
    )
    expect(refused).to.be.instanceOf(ConnectionError)
    expect((refused as ConnectionError).reached).to.equal('no')
    expect(untouched.pulled()).to.equal(0)

    // Lost after the first MiB arrived: the server drops the connection.
    loopback = await startServer((request) => {
      void digest(request, (bytes) => {
        if (bytes >= MiB) request.socket.destroy()
      }).catch(() => undefined)
    })
    const body = generated(64, MiB)
    const lost = await client(loopback.address).upload('/v1/snapshot', body.source).then(
      () => undefined,
      (caught: unknown) => caught,
    )
    expect(lost).to.be.instanceOf(ConnectionError)
    expect((lost as ConnectionError).reached).to.equal('maybe')
    expect(body.pulled()).to.be.below(64 * MiB)
    expect(loopback.requests).to.have.length(1)
  })

  it('a source that fails while read fails the request with its reason, and a timeout ends a body the server never reads', async function () {
    loopback = await startServer((request, response) => {
      void digest(request).then(
        () => response.end(),
        () => undefined,
      )
    })
    const broken = (async function* () {
      yield Buffer.alloc(1024)
      throw new Error('EIO: the disk went away')
    })()
    const error = await client(loopback.address).upload('/v1/snapshot', broken).then(
      () => undefined,
      (caught: unknown) => caught,
    )
    expect(error).to.be.instanceOf(ConnectionError)
    expect((error as ConnectionError).reason).to.equal('source')
    expect((error as Error).message).to.include('reading the body failed: EIO: the disk went away')

    await loopback.close()
    // Never reads: the client's writes stop at the socket buffers until the timeout.
    loopback = await startServer((request) => request.pause())
    const body = generated(1024, MiB)
    const started = Date.now()
    const timedOut = await client(loopback.address).upload('/v1/snapshot', body.source, { timeoutMs: 500 }).then(
      () => undefined,
      (caught: unknown) => caught,
    )
    expect(timedOut).to.be.instanceOf(ConnectionError)
    expect((timedOut as ConnectionError).reason).to.equal('timeout')
    expect((timedOut as ConnectionError).reached).to.equal('maybe')
    expect(Date.now() - started).to.be.below(5_000)
    expect(body.pulled()).to.be.below(64 * MiB)
  })
})
