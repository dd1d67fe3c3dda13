/**
 * The client's connection options and per-request hooks that the benchmarks need (src/api, ClientOptions and
 * RequestOptions), against a bare node:http server on loopback that counts connections: keep-alive by default and a
 * connection per request with `keepAlive: false`; idle sockets kept up to `maxFreeSockets`; `discardBody` drops the
 * answer's body; `onSent` fires once the request is written and before the answer; and the body of an answer is
 * parsed only when first read.
 */
import { expect } from 'chai'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { madeClients, until } from './clients.js'

interface Loopback {
  server: Server
  address: string
  /** Every connection accepted, open or closed. */
  sockets: Socket[]
  /** The Connection header of every request, in order. */
  connectionHeaders: Array<string | undefined>
  close(): Promise<void>
}

async function startServer(handle: (request: IncomingMessage, response: ServerResponse) => void): Promise<Loopback> {
  const sockets: Socket[] = []
  const connectionHeaders: Array<string | undefined> = []
  const server = createServer((request, response) => {
    connectionHeaders.push(request.headers.connection)
    handle(request, response)
  })
  server.on('connection', (socket) => sockets.push(socket))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  return {
    server,
    address: `127.0.0.1:${port}`,
    sockets,
    connectionHeaders,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

function json(response: ServerResponse, value: unknown): void {
  response.setHeader('Content-Type', 'application/json')
  response.end(JSON.stringify(value))
}

describe('api client: connections, discarded bodies, sent hooks, lazy parsing', function () {
  let loopback: Loopback | undefined
  const client = madeClients()

  afterEach(async function () {
    await loopback?.close()
    loopback = undefined
  })

  it('reuses one connection by default, and opens one per request (Connection: close) with keepAlive false', async function () {
    loopback = await startServer((_request, response) => json(response, { ok: true }))
    const reusing = client({ address: loopback.address })
    for (let n = 0; n < 3; n++) expect((await reusing.request('GET', '/v1/x')).status).to.equal(200)
    expect(loopback.sockets).to.have.length(1)
    expect(loopback.connectionHeaders).to.deep.equal(['keep-alive', 'keep-alive', 'keep-alive'])

    const fresh = client({ address: loopback.address, keepAlive: false })
    for (let n = 0; n < 3; n++) expect((await fresh.request('GET', '/v1/x')).status).to.equal(200)
    expect(loopback.sockets).to.have.length(4)
    expect(loopback.connectionHeaders.slice(3)).to.deep.equal(['close', 'close', 'close'])
    await until(() => loopback!.sockets.slice(1).every((socket) => socket.destroyed), 'the fresh connections are closed')
  })

  it('keeps maxFreeSockets idle sockets open after a burst and closes the rest', async function () {
    const waiting: ServerResponse[] = []
    loopback = await startServer((_request, response) => {
      waiting.push(response)
      // Answer once all eight are in, so that eight sockets are open at once.
      if (waiting.length === 8) for (const held of waiting) json(held, true)
    })
    const burst = client({ address: loopback.address, maxSockets: 8, maxFreeSockets: 3 })
    const answers = await Promise.all(Array.from({ length: 8 }, () => burst.request('GET', '/v1/x')))
    expect(answers.map((answer) => answer.status)).to.deep.equal(Array(8).fill(200))
    expect(loopback.sockets).to.have.length(8)
    await until(() => loopback!.sockets.filter((socket) => socket.destroyed).length === 5, 'five of eight sockets closed')
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(loopback.sockets.filter((socket) => !socket.destroyed)).to.have.length(3)
  })

  it('drops the body with discardBody, keeping status and headers', async function () {
    loopback = await startServer((_request, response) => {
      response.setHeader('X-Service-Index', '7')
      json(response, { big: 'x'.repeat(100_000) })
    })
    const answer = await client({ address: loopback.address }).request('GET', '/v1/x', { discardBody: true })
    expect(answer).to.include({ status: 200, text: '' })
    expect(answer.body).to.equal(undefined)
    expect(answer.meta.index).to.equal(7)
  })

  it('calls onSent once the request is written, before the answer comes', async function () {
    let release: () => void = () => undefined
    const answered = new Promise<void>((resolve) => (release = resolve))
    loopback = await startServer((request, response) => {
      request.resume()
      void answered.then(() => json(response, true))
    })
    let sent = 0
    const pending = client({ address: loopback.address }).request('PUT', '/v1/x', { body: { Name: 'x' }, onSent: () => (sent += 1) })
    await until(() => sent === 1, 'onSent was called')
    release()
    expect((await pending).body).to.equal(true)
    expect(sent).to.equal(1)
  })

  it('parses the body when it is first read, and only once', async function () {
    loopback = await startServer((_request, response) => json(response, { Name: 'parsed' }))
    const parse = JSON.parse
    let parses = 0
    JSON.parse = ((...args: Parameters<typeof JSON.parse>) => {
      parses += 1
      return parse(...args)
    }) as typeof JSON.parse
    try {
      const answer = await client({ address: loopback.address }).request<{ Name: string }>('GET', '/v1/x')
      expect(parses).to.equal(0)
      expect(answer.body.Name).to.equal('parsed')
      expect(answer.body).to.deep.equal({ Name: 'parsed' })
      expect(parses).to.equal(1)
      expect(answer.text).to.equal('{"Name":"parsed"}')
    } finally {
      JSON.parse = parse
    }
  })
})
