/**
 * Request/response over the peer link (what write forwarding and follower ReadIndex use): answers correlated by id,
 * the handler's operating errors rebuilt on the caller's side by code (never by text), and every failure of the
 * transport itself a TransportError that says whether the peer may have seen the request: the difference between
 * "retry or answer no_leader" and "outcome unknown" for a forwarded write.
 */
import { expect } from 'chai'
import { InvalidInputError, WardenError } from '../../../src/lib/errors.js'
import { TransportError } from '../../../src/transport/index.js'
import { addressOf, connectAll, deadAddress, isConnected, startNode, useCleanup, waitFor, type TestNode } from './harness.js'

describe('transport: requests', () => {
  const cleanup = useCleanup()

  async function pair(options: Parameters<typeof startNode>[2] = {}): Promise<[TestNode, TestNode]> {
    const [a, b] = await Promise.all([startNode(cleanup, 'a', options), startNode(cleanup, 'b', options)])
    connectAll([a, b])
    await waitFor('a and b connected', () => isConnected(a, 'b') && isConnected(b, 'a'))
    return [a, b]
  }

  async function failure(promise: Promise<unknown>): Promise<unknown> {
    return promise.then(
      (value) => {
        throw new Error(`expected a rejection, got ${JSON.stringify(value)}`)
      },
      (error: unknown) => error,
    )
  }

  it('answers a request with what the handler returns, naming the caller by its node name', async () => {
    const [a, b] = await pair()
    b.transport.onRequest(async (from, message) => ({ from, echo: message }))
    a.transport.onRequest(async (from, message) => ({ from, echo: message }))
    const answers = await Promise.all([
      a.transport.request('b', { write: 1 }, 2000),
      a.transport.request('b', { write: 2 }, 2000),
      b.transport.request('a', 'read-index', 2000),
    ])
    expect(answers).to.deep.equal([
      { from: 'a', echo: { write: 1 } },
      { from: 'a', echo: { write: 2 } },
      { from: 'b', echo: 'read-index' },
    ])
    expect(a.transport.stats().requestsInFlight).to.equal(0)
  })

  it("rebuilds the handler's WardenError from its code and field, and hides anything else as internal", async () => {
    const [a, b] = await pair()
    b.transport.onRequest(async (_, message) => {
      if (message === 'invalid') throw new InvalidInputError('Name', 'must not be empty')
      throw new Error('secret detail of a bug')
    })
    const invalid = await failure(a.transport.request('b', 'invalid', 2000))
    expect(invalid).to.be.instanceOf(WardenError).and.include({ code: 'invalid_input', field: 'Name', message: 'Name: must not be empty' })
    const internal = await failure(a.transport.request('b', 'bug', 2000))
    expect(internal).to.be.instanceOf(WardenError).and.include({ code: 'internal', message: 'internal error' })
    expect(b.log.records.some((record) => record['msg'] === 'peer request handler failed')).to.equal(true)
  })

  it('times out a request the peer took but did not answer, as maybe delivered', async () => {
    const [a, b] = await pair()
    b.transport.onRequest(() => new Promise(() => {}))
    const startedMs = Date.now()
    const error = await failure(a.transport.request('b', 'slow', 200))
    expect(error).to.be.instanceOf(TransportError).and.include({ code: 'timeout', delivered: 'maybe', peer: 'b' })
    expect(Date.now() - startedMs).to.be.within(150, 1500)
    expect(a.transport.stats().requestsInFlight).to.equal(0)
  })

  it('fails a request whose link is lost before the answer as maybe delivered', async () => {
    const [a, b] = await pair()
    let received = false
    b.transport.onRequest(() => {
      received = true
      return new Promise(() => {})
    })
    const pending = failure(a.transport.request('b', 'lost', 5000))
    await waitFor('b received the request', () => received)
    await b.transport.stop()
    expect(await pending).to.be.instanceOf(TransportError).and.include({ code: 'disconnected', delivered: 'maybe' })
  })

  it('fails a request to a peer that cannot be reached as not delivered', async () => {
    const a = await startNode(cleanup, 'a', { peers: new Map([['b', await deadAddress()]]) })
    const error = await failure(a.transport.request('b', 'write', 2000))
    expect(error).to.be.instanceOf(TransportError).and.include({ delivered: 'no' })
    expect((error as TransportError).code).to.be.oneOf(['disconnected', 'timeout'])
  })

  it('refuses at once a request to an unknown peer, or beyond requestsInFlightMax', async () => {
    const [a, b] = await pair({ requestsInFlightMax: 3 })
    b.transport.onRequest(() => new Promise(() => {}))
    expect(await failure(a.transport.request('nobody', 'x', 1000))).to.include({ code: 'unknown_peer', delivered: 'no' })
    const waiting = [1, 2, 3].map((n) => failure(a.transport.request('b', n, 300)))
    expect(await failure(a.transport.request('b', 4, 300))).to.include({ code: 'too_many_requests', delivered: 'no' })
    for (const error of await Promise.all(waiting)) expect(error).to.include({ code: 'timeout' })
    // Once those are settled there is room again.
    b.transport.onRequest(async () => 'ok')
    expect(await a.transport.request('b', 5, 1000)).to.equal('ok')
  })

  it('answers rate_limited beyond requestsServingMax instead of queueing work without bound', async () => {
    const [a, b] = await pair({ requestsServingMax: 2 })
    const release: Array<() => void> = []
    b.transport.onRequest(() => new Promise((resolve) => release.push(() => resolve('done'))))
    const first = a.transport.request('b', 1, 2000)
    const second = a.transport.request('b', 2, 2000)
    await waitFor('two requests being served', () => release.length === 2)
    expect(await failure(a.transport.request('b', 3, 2000))).to.be.instanceOf(WardenError).and.include({ code: 'rate_limited' })
    for (const resolve of release) resolve()
    expect(await Promise.all([first, second])).to.deep.equal(['done', 'done'])
  })

  it('refuses a request larger than frameBytesMax without sending it', async () => {
    const [a] = await pair({ frameBytesMax: 64 * 1024, sendQueueBytesMax: 64 * 1024 })
    expect(await failure(a.transport.request('b', Buffer.alloc(80 * 1024), 1000))).to.include({ code: 'frame_too_large', delivered: 'no' })
    expect(a.transport.stats().framesOversized).to.equal(1)
  })

  it('keeps answering after the peer restarts', async () => {
    const [a, b] = await pair()
    b.transport.onRequest(async () => 'first life')
    expect(await a.transport.request('b', 'x', 1000)).to.equal('first life')
    const port = b.transport.address.port
    await b.transport.stop()
    const restarted = await startNode(cleanup, 'b', { listen: { host: '127.0.0.1', port }, peers: new Map([['a', addressOf(a.transport)]]) })
    restarted.transport.onRequest(async () => 'second life')
    await waitFor('reconnected', () => isConnected(a, 'b'))
    expect(await a.transport.request('b', 'x', 1000)).to.equal('second life')
  })
})
