/**
 * Tests for serving blocking reads (src/http/read.ts) with a stand-in request context: the parts of a blocking query
 * that a black-box test cannot see, such as how many queries hold a waiting slot. Each test bounds its own wait and
 * releases whatever it started through the agent's closing signal.
 */
import { EventEmitter } from 'node:events'
import { expect } from 'chai'
import type { ApiContext } from '../../../src/http/context.js'
import { serveRead, WAKES_PER_TURN, waitingQueryCount } from '../../../src/http/read.js'
import { callerOf } from '../../../src/http/request.js'
import { Watches } from '../../../src/state/watch.js'

function blockingContext(closing: AbortSignal, watches: Watches, response: EventEmitter, tableIndex: () => number = () => 5): ApiContext {
  const app = {
    state: { tableIndex, watches, generation: 0, whenReplaced: async () => {} },
    cluster: { readBarrier: async () => {}, leaderAddress: () => '127.0.0.1:8300', lastContactMs: () => 0 },
    resolver: { resolve: async () => ({}) },
    settings: { blockingQueriesMax: 10_000 },
    now: () => 0,
    closing,
  }
  return { query: { index: '5', wait: '10m' }, state: { app }, res: response, get: () => '', set: () => {} } as unknown as ApiContext
}

describe('serveRead: blocking queries', function () {
  it('does not wait for a client that hung up before the query began to wait', async function () {
    const closing = new AbortController()
    const watches = new Watches()
    // The client's connection closed while the first run of the query was reading: 'close' has already fired.
    const response = Object.assign(new EventEmitter(), { destroyed: true })
    const ctx = blockingContext(closing.signal, watches, response)
    const served = serveRead(ctx, { table: 'policy', consistency: 'all', blocking: true }, async () => ({ body: [] }))
    const outcome = await Promise.race([
      served.then(() => 'returned'),
      new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), 300)),
    ])
    const heldWhileWaiting = { queries: waitingQueryCount(), watches: watches.size }
    closing.abort()
    await served
    expect(outcome).to.equal('returned')
    expect(heldWhileWaiting).to.deep.equal({ queries: 0, watches: 0 })
  })

  it('holds no slot, watch or close listener once a change has answered a thousand waiting queries', async function () {
    const closing = new AbortController()
    const watches = new Watches()
    let index = 5
    const responses = Array.from({ length: 1000 }, () => Object.assign(new EventEmitter(), { destroyed: false }))
    const served = responses.map((response) =>
      serveRead(blockingContext(closing.signal, watches, response, () => index), { table: 'policy', consistency: 'all', blocking: true }, async () => ({ body: [] })),
    )
    await new Promise((resolve) => setTimeout(resolve, 50))
    const whileWaiting = { queries: waitingQueryCount(), watches: watches.size }
    index = 6
    watches.notify(['policy'], [])
    await Promise.all(served)
    closing.abort()
    expect(whileWaiting).to.deep.equal({ queries: 1000, watches: 1000 })
    expect({ queries: waitingQueryCount(), watches: watches.size }).to.deep.equal({ queries: 0, watches: 0 })
    expect(responses.every((response) => response.listenerCount('close') === 0)).to.equal(true)
  })

  it('answers the queries one change woke WAKES_PER_TURN per turn of the event loop, all of them in the end', async function () {
    const closing = new AbortController()
    const watches = new Watches()
    let index = 5
    const count = WAKES_PER_TURN * 2 + 50
    let answered = 0
    const served = Array.from({ length: count }, () =>
      serveRead(blockingContext(closing.signal, watches, Object.assign(new EventEmitter(), { destroyed: false }), () => index), { table: 'policy', consistency: 'all', blocking: true }, async () => ({
        body: [],
      })).then(() => (answered += 1)),
    )
    await new Promise((resolve) => setTimeout(resolve, 50))
    index = 6
    watches.notify(['policy'], [])
    // The first turn after the change answers one batch; without the queue every query would answer in it.
    await new Promise((resolve) => setImmediate(resolve))
    const afterFirstTurn = answered
    await Promise.all(served)
    closing.abort()
    expect(afterFirstTurn).to.be.greaterThan(0).and.at.most(WAKES_PER_TURN)
    expect(answered).to.equal(count)
  })

  it('a run resolves the caller afresh: one resolved before the read barrier (an older index) is not used', async function () {
    const closing = new AbortController()
    const ctx = blockingContext(closing.signal, new Watches(), Object.assign(new EventEmitter(), { destroyed: false }))
    const fresh = { accessorID: 'fresh' }
    ;(ctx.state.app as unknown as { resolver: unknown }).resolver = { resolve: async () => fresh }
    ;(ctx as unknown as { query: unknown }).query = {}
    // What namespaceOf left behind before the barrier, resolved at an older applied index.
    ctx.state.caller = { accessorID: 'stale' } as never
    let seen: unknown
    await serveRead(ctx, { table: 'policy', consistency: 'all', blocking: true }, async () => {
      seen = await callerOf(ctx)
      return { body: [] }
    })
    closing.abort()
    expect(seen).to.equal(fresh)
  })

  it("runs a route's prepare again when a snapshot install replaced the state under it, as it runs the read", async function () {
    const closing = new AbortController()
    const ctx = blockingContext(closing.signal, new Watches(), Object.assign(new EventEmitter(), { destroyed: false }))
    ;(ctx as unknown as { query: unknown }).query = {}
    const state = ctx.state.app.state as unknown as { generation: number }
    let prepares = 0
    await serveRead(
      ctx,
      {
        table: 'config',
        consistency: 'all',
        blocking: false,
        prepare: async () => {
          prepares += 1
          if (prepares === 1) {
            // An install replaced the state while the namespace was read: the database closed under the read.
            state.generation += 1
            throw new Error('Database is not open')
          }
          return { scope: 'team' }
        },
      },
      async () => ({ body: [] }),
    )
    closing.abort()
    expect(prepares).to.equal(2)
  })

  it("resolves a route's prepare (its namespace through the token) after the read barrier, and keys on what it returns", async function () {
    const closing = new AbortController()
    const ctx = blockingContext(closing.signal, new Watches(), Object.assign(new EventEmitter(), { destroyed: false }))
    ;(ctx as unknown as { query: unknown }).query = {}
    const order: string[] = []
    const cluster = ctx.state.app.cluster as unknown as { readBarrier: () => Promise<void> }
    cluster.readBarrier = async () => {
      await new Promise((resolve) => setTimeout(resolve, 20))
      order.push('barrier')
    }
    let namespace = ''
    await serveRead(
      ctx,
      {
        table: 'config',
        consistency: 'all',
        blocking: true,
        prepare: async () => {
          order.push('prepare')
          namespace = 'team'
          return { scope: namespace }
        },
      },
      async () => {
        order.push(`run in ${namespace}`)
        return { body: [] }
      },
    )
    closing.abort()
    expect(order).to.deep.equal(['barrier', 'prepare', 'run in team'])
  })
})
