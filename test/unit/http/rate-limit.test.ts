/**
 * Rate limits (issue 18, src/http/rate-limit.ts): the token bucket refills at its rate up to a burst equal to the
 * rate, and answers how long until the next token; requests are sorted into reads, writes and exempt paths; the
 * limiter logs and serves in permissive mode, refuses with a Retry-After of whole seconds in enforcing mode, and
 * keeps one login bucket per auth method whatever the mode.
 *
 * Method: a hand-driven clock (milliseconds), so no test sleeps and every answer is exact.
 */
import { expect } from 'chai'
import pino from 'pino'
import { RateLimitedError } from '../../../src/lib/errors.js'
import { RateLimiter, requestKind, retryAfterSeconds, type RateLimitSettings } from '../../../src/http/rate-limit.js'
import { TokenBucket } from '../../../src/lib/token-bucket.js'

function thrown(run: () => void): unknown {
  try {
    run()
  } catch (error) {
    return error
  }
  return undefined
}

function recordingLog(): { log: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = []
  const log = pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) })
  return { log, lines }
}

describe('http/rate-limit: TokenBucket', () => {
  it('starts full: a burst of `burst` requests is served at once, the next waits 1/rate seconds', () => {
    let clock = 0
    const bucket = new TokenBucket(2, 2, () => clock)
    expect(bucket.take()).to.equal(0)
    expect(bucket.take()).to.equal(0)
    expect(bucket.take()).to.equal(500)
    // A refused take spends nothing: asking again at the same instant gives the same wait.
    expect(bucket.take()).to.equal(500)
  })

  it('refills at its rate, never above the burst', () => {
    let clock = 0
    const bucket = new TokenBucket(2, 2, () => clock)
    bucket.take()
    bucket.take()
    clock = 250
    expect(bucket.take()).to.equal(250)
    clock = 500
    expect(bucket.take()).to.equal(0)
    clock = 60_000
    expect(bucket.take()).to.equal(0)
    expect(bucket.take()).to.equal(0)
    expect(bucket.take()).to.be.above(0)
  })

  it('a clock that goes back adds no tokens and takes none away', () => {
    let clock = 1_000
    const bucket = new TokenBucket(1, 1, () => clock)
    expect(bucket.take()).to.equal(0)
    clock = 0
    expect(bucket.take()).to.equal(1_000)
    clock = 1_000
    expect(bucket.take()).to.equal(0)
  })

  it('a fractional rate waits more than a second: 0.5 a second is one every 2 s', () => {
    let clock = 0
    const bucket = new TokenBucket(0.5, 1, () => clock)
    expect(bucket.take()).to.equal(0)
    expect(bucket.take()).to.equal(2_000)
  })

  it('an infinite rate always serves', () => {
    const bucket = new TokenBucket(Infinity, 1, () => 0)
    for (let n = 0; n < 1_000; n++) expect(bucket.take()).to.equal(0)
  })
})

describe('http/rate-limit: retryAfterSeconds', () => {
  it('rounds up to whole seconds, at least 1', () => {
    expect(retryAfterSeconds(0)).to.equal(1)
    expect(retryAfterSeconds(1)).to.equal(1)
    expect(retryAfterSeconds(1_000)).to.equal(1)
    expect(retryAfterSeconds(1_001)).to.equal(2)
  })
})

describe('http/rate-limit: requestKind', () => {
  it('GET, HEAD and OPTIONS are reads; PUT, POST and DELETE writes, logins and logouts included', () => {
    expect(requestKind('GET', '/v1/acl/tokens')).to.equal('read')
    expect(requestKind('HEAD', '/v1/acl/tokens')).to.equal('read')
    expect(requestKind('OPTIONS', '/v1/acl/token')).to.equal('read')
    expect(requestKind('PUT', '/v1/acl/token')).to.equal('write')
    expect(requestKind('DELETE', '/v1/acl/token/x')).to.equal('write')
    expect(requestKind('POST', '/v1/acl/login')).to.equal('write')
    expect(requestKind('POST', '/v1/acl/logout')).to.equal('write')
  })

  it('POST /v1/internal/acl/authorize only asks: a read, however the router would match its path', () => {
    for (const path of ['/v1/internal/acl/authorize', '/v1/internal/acl/authorize/', '/V1/Internal/ACL/Authorize']) expect(requestKind('POST', path), path).to.equal('read')
    expect(requestKind('PUT', '/v1/internal/acl/authorize')).to.equal('write')
  })

  it('the templated-policy preview changes nothing: a read', () => {
    expect(requestKind('POST', '/v1/acl/templated-policy/preview/builtin/service')).to.equal('read')
  })

  it('/v1/status/* and the internal join are exempt', () => {
    expect(requestKind('GET', '/v1/status/leader')).to.equal('exempt')
    expect(requestKind('GET', '/v1/status/peers')).to.equal('exempt')
    expect(requestKind('POST', '/v1/operator/raft/join')).to.equal('exempt')
    expect(requestKind('POST', '/v1/operator/raft/transfer-leader')).to.equal('write')
  })
})

describe('http/rate-limit: RateLimiter', () => {
  const settings = (overrides: Partial<RateLimitSettings>): RateLimitSettings => ({ mode: 'enforcing', readRate: Infinity, writeRate: Infinity, loginRate: Infinity, ...overrides })

  it('enforcing: over the write rate is a RateLimitedError with Retry-After; reads draw from their own bucket', () => {
    let clock = 0
    const { log, lines } = recordingLog()
    const limiter = new RateLimiter(settings({ writeRate: 2, readRate: 1 }), log, () => clock)
    limiter.admitRequest('PUT', '/v1/acl/token', '127.0.0.1')
    limiter.admitRequest('PUT', '/v1/acl/token', '127.0.0.1')
    const error = thrown(() => limiter.admitRequest('PUT', '/v1/acl/token', '127.0.0.1'))
    expect(error).to.be.instanceOf(RateLimitedError)
    expect((error as RateLimitedError).code).to.equal('rate_limited')
    expect((error as RateLimitedError).retryAfterSeconds).to.equal(1)
    expect((error as RateLimitedError).message).to.include('limits.request_limits.write_rate')
    limiter.admitRequest('GET', '/v1/acl/tokens', '127.0.0.1')
    expect(thrown(() => limiter.admitRequest('GET', '/v1/acl/tokens', '127.0.0.1'))).to.be.instanceOf(RateLimitedError)
    // Exempt paths are never counted.
    for (let n = 0; n < 10; n++) limiter.admitRequest('GET', '/v1/status/leader', '127.0.0.1')
    expect(lines.filter((line) => line.limit_type === 'global/write')).to.have.length(1)
    expect(lines[0]).to.include({ limit_enforced: true, method: 'PUT', path: '/v1/acl/token' })
    clock = 500
    limiter.admitRequest('PUT', '/v1/acl/token', '127.0.0.1')
  })

  it('permissive: over the rate is served and logged, at most one line per kind per 10 s', () => {
    let clock = 0
    const { log, lines } = recordingLog()
    const limiter = new RateLimiter(settings({ mode: 'permissive', writeRate: 1 }), log, () => clock)
    for (let n = 0; n < 5; n++) limiter.admitRequest('PUT', '/v1/acl/token', '127.0.0.1')
    expect(lines).to.have.length(1)
    expect(lines[0]).to.include({ limit_type: 'global/write', limit_enforced: false })
    clock = 10_000
    for (let n = 0; n < 20; n++) limiter.admitRequest('PUT', '/v1/acl/token', '127.0.0.1')
    expect(lines).to.have.length(2)
    expect(lines[1]).to.include({ suppressed: 3 })
  })

  it('disabled: nothing is counted, whatever the rates', () => {
    const { log, lines } = recordingLog()
    const limiter = new RateLimiter(settings({ mode: 'disabled', writeRate: 1, readRate: 1 }), log, () => 0)
    for (let n = 0; n < 100; n++) limiter.admitRequest('PUT', '/v1/acl/token', undefined)
    expect(lines).to.have.length(0)
  })

  it('logins: one bucket per auth method, enforced in every mode', () => {
    let clock = 0
    const { log } = recordingLog()
    const limiter = new RateLimiter(settings({ mode: 'disabled', loginRate: 1 }), log, () => clock)
    limiter.admitLogin('default/a', 'a')
    const error = thrown(() => limiter.admitLogin('default/a', 'a'))
    expect(error).to.be.instanceOf(RateLimitedError)
    expect((error as Error).message).to.include('"a"')
    limiter.admitLogin('default/b', 'b')
    clock = 1_000
    limiter.admitLogin('default/a', 'a')
  })

  it('logins without login_rate are never refused', () => {
    const limiter = new RateLimiter(settings({}), recordingLog().log, () => 0)
    for (let n = 0; n < 100; n++) limiter.admitLogin('default/a', 'a')
  })
})
