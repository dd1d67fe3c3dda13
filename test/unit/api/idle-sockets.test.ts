/**
 * Idle keep-alive sockets and servers that close them (src/api/transport.ts). A server closes a connection it has
 * kept idle for its keep-alive time; a client that sends a request on such a socket as it closes gets the connection
 * reset, and for a write that is an unknown outcome. The client lets idle sockets go a second before the time the
 * server announces (`Keep-Alive: timeout=N`), and after `idleTimeoutMs` when it announces none; a GET or HEAD that
 * still meets a reused socket reset before any answer is sent again on a fresh one, while a write is never sent twice.
 */
import { expect } from 'chai'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { ConnectionError } from '../../../src/api/index.js'
import { rejection } from '../../support/thrown.js'
import { madeClients, until } from './clients.js'

interface Loopback {
  server: Server
  address: string
  /** Every connection accepted, open or closed. */
  sockets: Socket[]
  /** Each request as `METHOD path #socket` (the socket's position in `sockets`). */
  requests: string[]
  close(): Promise<void>
}

async function startServer(keepAliveTimeoutMs: number, handle: (request: IncomingMessage, response: ServerResponse, socketNumber: number, onSocket: number) => void): Promise<Loopback> {
  const sockets: Socket[] = []
  const requests: string[] = []
  const perSocket = new Map<Socket, number>()
  const server = createServer((request, response) => {
    const socket = request.socket
    const number = sockets.indexOf(socket)
    const onSocket = (perSocket.get(socket) ?? 0) + 1
    perSocket.set(socket, onSocket)
    requests.push(`${request.method ?? ''} ${request.url ?? ''} #${number}`)
    request.resume()
    request.on('end', () => handle(request, response, number, onSocket))
  })
  server.keepAliveTimeout = keepAliveTimeoutMs
  server.on('connection', (socket) => sockets.push(socket))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  return {
    server,
    address: `127.0.0.1:${port}`,
    sockets,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

function answer(response: ServerResponse): void {
  response.setHeader('Content-Type', 'application/json')
  response.end('{"ok":true}')
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

describe('api client: idle sockets and servers that close them', function () {
  this.timeout(15_000)
  let loopback: Loopback | undefined
  const client = madeClients()

  afterEach(async function () {
    await loopback?.close()
    loopback = undefined
  })

  it("lets an idle socket go a second before the server's announced keep-alive time runs out", async function () {
    // node:http announces `Keep-Alive: timeout=2` and closes the connection after 2 s idle.
    loopback = await startServer(2_000, (_request, response) => answer(response))
    const caller = client({ address: loopback.address })
    expect((await caller.request('GET', '/v1/a')).status).to.equal(200)
    expect((await caller.request('GET', '/v1/b')).status).to.equal(200)
    // Still in use within the announced time less a second: one connection.
    expect(loopback.sockets).to.have.length(1)
    // Past that, before the server's own close: the client has closed it, and the next request opens another.
    await until(() => loopback!.sockets[0]!.destroyed, 'the client closed the idle socket', 1_800)
    expect((await caller.request('GET', '/v1/c')).status).to.equal(200)
    expect(loopback.requests).to.deep.equal(['GET /v1/a #0', 'GET /v1/b #0', 'GET /v1/c #1'])
  })

  it('lets an idle socket go after idleTimeoutMs when the server announces no keep-alive time', async function () {
    // keepAliveTimeout 0: no Keep-Alive header, and the server never closes an idle connection itself.
    loopback = await startServer(0, (_request, response) => answer(response))
    const caller = client({ address: loopback.address, idleTimeoutMs: 300 })
    expect((await caller.request('GET', '/v1/a')).status).to.equal(200)
    await until(() => loopback!.sockets[0]!.destroyed, 'the client closed the idle socket', 2_000)
    expect((await caller.request('PUT', '/v1/b', { body: {} })).status).to.equal(200)
    expect(loopback.requests).to.deep.equal(['GET /v1/a #0', 'PUT /v1/b #1'])
  })

  it('keeps a request that waits longer than idleTimeoutMs for its answer (a blocking query), on a new or a reused socket', async function () {
    loopback = await startServer(0, (request, response) => (request.url === '/v1/now' ? answer(response) : void sleep(800).then(() => answer(response))))
    const caller = client({ address: loopback.address, idleTimeoutMs: 300 })
    for (const first of [true, false]) {
      const started = Date.now()
      const held = await caller.request('GET', '/v1/kv?index=5')
      expect(held.status, first ? 'a new socket' : 'a reused socket').to.equal(200)
      expect(Date.now() - started).to.be.at.least(750)
      // The next blocking query takes this socket again: it went idle with the idle time set on it.
      if (first) expect((await caller.request('GET', '/v1/now')).status).to.equal(200)
    }
    expect(loopback.requests).to.deep.equal(['GET /v1/kv?index=5 #0', 'GET /v1/now #0', 'GET /v1/kv?index=5 #0'])
  })

  it('sends a GET again on a fresh connection when its reused socket is reset before any answer', async function () {
    // The second request on the first connection meets a reset, as one sent while the server closes the socket does.
    loopback = await startServer(0, (request, response, socketNumber, onSocket) => {
      if (socketNumber === 0 && onSocket === 2) request.socket.resetAndDestroy()
      else answer(response)
    })
    const caller = client({ address: loopback.address })
    expect((await caller.request('GET', '/v1/a')).status).to.equal(200)
    const again = await caller.request('GET', '/v1/b')
    expect(again.status).to.equal(200)
    expect(loopback.requests).to.deep.equal(['GET /v1/a #0', 'GET /v1/b #0', 'GET /v1/b #1'])
  })

  it('never sends a write twice: a PUT on a reused socket reset before any answer fails with reached maybe', async function () {
    loopback = await startServer(0, (request, response, socketNumber, onSocket) => {
      if (socketNumber === 0 && onSocket === 2) request.socket.resetAndDestroy()
      else answer(response)
    })
    const caller = client({ address: loopback.address })
    expect((await caller.request('GET', '/v1/a')).status).to.equal(200)
    const failed = await rejection(caller.request('PUT', '/v1/acl/token', { body: { Description: 'x' } }), ConnectionError)
    expect(failed.reached).to.equal('maybe')
    expect(failed.reason).to.equal('ECONNRESET')
    expect(loopback.requests).to.deep.equal(['GET /v1/a #0', 'PUT /v1/acl/token #0'])
  })

  it('sends a GET again only after a reused socket failed: a fresh connection reset is the answer', async function () {
    // Every request after the first is reset, on any connection: the retry on a fresh connection is reset too, and
    // a fresh connection's failure is the server's, not a stale socket's, so it is not tried again.
    let served = 0
    loopback = await startServer(0, (request, response) => {
      served += 1
      if (served === 1) answer(response)
      else request.socket.resetAndDestroy()
    })
    const caller = client({ address: loopback.address })
    expect((await caller.request('GET', '/v1/a')).status).to.equal(200)
    const failed = await rejection(caller.request('GET', '/v1/b'), ConnectionError)
    expect(failed.reason).to.equal('ECONNRESET')
    expect(loopback.requests).to.deep.equal(['GET /v1/a #0', 'GET /v1/b #0', 'GET /v1/b #1'])
  })

  it('fails a GET whose reused socket close() shut, and never sends it again', async function () {
    loopback = await startServer(0, (request, response) => {
      // The held request is never answered: only close() can end it.
      if (request.url !== '/v1/held') answer(response)
    })
    const caller = client({ address: loopback.address })
    expect((await caller.request('GET', '/v1/a')).status).to.equal(200)
    const held = rejection(caller.request('GET', '/v1/held'), ConnectionError)
    await until(() => loopback!.requests.length === 2, 'the held request reached the server')
    const closedAt = Date.now()
    caller.close()
    await held
    expect(Date.now() - closedAt).to.be.below(1_000)
    await sleep(100)
    expect(loopback.requests).to.deep.equal(['GET /v1/a #0', 'GET /v1/held #0'])
  })

  it('sends a GET at most three times, however many reused sockets fail it', async function () {
    // Four idle sockets, each of which the server resets at its next request.
    const waiting: ServerResponse[] = []
    loopback = await startServer(0, (request, response, _socketNumber, onSocket) => {
      if (onSocket > 1) return request.socket.resetAndDestroy()
      waiting.push(response)
      if (waiting.length === 4) for (const held of waiting) answer(held)
    })
    const caller = client({ address: loopback.address })
    const first = await Promise.all(Array.from({ length: 4 }, () => caller.request('GET', '/v1/a')))
    expect(first.map((answered) => answered.status)).to.deep.equal([200, 200, 200, 200])
    const failed = await rejection(caller.request('GET', '/v1/b'), ConnectionError)
    expect(failed.reason).to.equal('ECONNRESET')
    expect(loopback.requests.filter((request) => request.startsWith('GET /v1/b'))).to.have.length(3)
  })
})
