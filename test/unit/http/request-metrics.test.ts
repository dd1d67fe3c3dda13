/**
 * The middleware that counts every answered request (src/http/request-metrics.ts), with a stand-in context: the
 * route label is the matched pattern or `unmatched`, never the path; a blocking query is counted but not timed; the
 * error answer's Code goes along; and a request that fails past the error mapper is still counted.
 */
import { expect } from 'chai'
import type { Context } from 'koa'
import type { ApiMetrics } from '../../../src/http/context.js'
import { requestMetricsMiddleware } from '../../../src/http/request-metrics.js'

type Recorded = [method: string, route: string, status: number, timed: boolean, errorCode: string | undefined]

function recorder(): { metrics: ApiMetrics; recorded: Recorded[] } {
  const recorded: Recorded[] = []
  const metrics: ApiMetrics = {
    recordRequest: (method, route, status, seconds, errorCode) => recorded.push([method, route, status, seconds !== undefined, errorCode]),
    prometheus: () => Promise.reject(new Error('not used')),
    consul: () => Promise.reject(new Error('not used')),
  }
  return { metrics, recorded }
}

function context(fields: Record<string, unknown>): Context {
  return { method: 'GET', status: 200, body: undefined, state: {}, ...fields } as unknown as Context
}

describe('requestMetricsMiddleware', () => {
  it('labels a request with the route pattern the router matched, and times it', async () => {
    const { metrics, recorded } = recorder()
    const ctx = context({ path: '/v1/acl/token/5d4a', _matchedRoute: '/v1/acl/token/:id' })
    await requestMetricsMiddleware(metrics)(ctx, () => Promise.resolve())
    expect(recorded).to.deep.equal([['GET', '/v1/acl/token/:id', 200, true, undefined]])
  })

  it('labels a request no route took as unmatched, with the error answer\'s Code', async () => {
    const { metrics, recorded } = recorder()
    const ctx = context({ path: '/v1/nothing/here' })
    await requestMetricsMiddleware(metrics)(ctx, () => {
      ctx.status = 404
      ctx.body = { Error: 'Invalid URL path', Code: 'not_found' }
      return Promise.resolve()
    })
    expect(recorded).to.deep.equal([['GET', 'unmatched', 404, true, 'not_found']])
  })

  it('counts a blocking query that waited without timing it', async () => {
    const { metrics, recorded } = recorder()
    const ctx = context({ _matchedRoute: '/v1/acl/tokens', state: { query: { index: '17', wait: '1m' } } })
    await requestMetricsMiddleware(metrics)(ctx, () => Promise.resolve())
    const plain = context({ _matchedRoute: '/v1/acl/tokens', state: { query: { index: '0' } } })
    await requestMetricsMiddleware(metrics)(plain, () => Promise.resolve())
    expect(recorded).to.deep.equal([
      ['GET', '/v1/acl/tokens', 200, false, undefined],
      ['GET', '/v1/acl/tokens', 200, true, undefined],
    ])
  })

  it('counts a request whose handling failed, and passes the failure on', async () => {
    const { metrics, recorded } = recorder()
    const ctx = context({ _matchedRoute: '/v1/acl/policy', method: 'PUT', status: 500 })
    const failure = new Error('boom')
    let caught: unknown
    await requestMetricsMiddleware(metrics)(ctx, () => Promise.reject(failure)).catch((error: unknown) => {
      caught = error
    })
    expect(caught).to.equal(failure)
    expect(recorded).to.deep.equal([['PUT', '/v1/acl/policy', 500, true, undefined]])
  })
})
