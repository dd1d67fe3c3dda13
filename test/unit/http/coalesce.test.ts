/**
 * Tests for read coalescing (src/http/coalesce.ts): identical reads share one run within a turn of the event loop and
 * never across turns, and the key tells apart everything a read's answer depends on.
 */
import { expect } from 'chai'
import type { ApiContext } from '../../../src/http/context.js'
import { coalesceKey, ReadCoalescer, serializedBody } from '../../../src/http/coalesce.js'
import type { ReadResult } from '../../../src/http/read.js'

function context(path: string, querystring: string, headers: Record<string, string> = {}, method = 'GET'): ApiContext {
  // As Koa 3 parses a query (lib/search-params.js): a repeated parameter becomes an array of its values.
  const params = new URLSearchParams(querystring)
  const query = Object.fromEntries([...new Set(params.keys())].map((name) => {
    const values = params.getAll(name)
    return [name, values.length <= 1 ? values[0] : values]
  }))
  const lower = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]))
  return { method, path, querystring, query, state: {}, get: (name: string) => lower[name.toLowerCase()] ?? '' } as unknown as ApiContext
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

describe('read coalescing', function () {
  it('identical reads in one turn share one run; the next turn runs again', async function () {
    const coalescer = new ReadCoalescer()
    let runs = 0
    const run = async (): Promise<ReadResult> => ({ body: { run: ++runs } })
    const first = await Promise.all([coalescer.run('k', run), coalescer.run('k', run), coalescer.run('k', run)])
    expect(runs).to.equal(1)
    expect(first[0]).to.equal(first[2])
    await turn()
    await coalescer.run('k', run)
    expect(runs).to.equal(2)
  })

  it('nextTurn: every read of a turn waits for the same point after the turn\'s I/O, and the next turn gets a new one', async function () {
    const coalescer = new ReadCoalescer()
    const order: string[] = []
    const first = coalescer.nextTurn()
    const second = coalescer.nextTurn()
    expect(first).to.equal(second)
    const released = first.then(() => order.push('released'))
    // Microtasks of this turn run before it: the batch is only released after what the turn already queued.
    await Promise.resolve()
    order.push('microtask')
    await released
    expect(order).to.deep.equal(['microtask', 'released'])
    expect(coalescer.nextTurn()).to.not.equal(first)
    await coalescer.nextTurn()
  })

  it('different keys, and reads without a key, run alone', async function () {
    const coalescer = new ReadCoalescer()
    let runs = 0
    const run = async (): Promise<ReadResult> => ({ body: ++runs })
    await Promise.all([coalescer.run('a', run), coalescer.run('b', run), coalescer.run(undefined, run), coalescer.run(undefined, run)])
    expect(runs).to.equal(4)
  })

  it('a failed run fails every read that joined it, and the next turn retries', async function () {
    const coalescer = new ReadCoalescer()
    let runs = 0
    const failing = async (): Promise<ReadResult> => {
      runs++
      throw new Error('denied')
    }
    const outcomes = await Promise.allSettled([coalescer.run('k', failing), coalescer.run('k', failing)])
    expect(outcomes.map((outcome) => outcome.status)).to.deep.equal(['rejected', 'rejected'])
    expect(runs).to.equal(1)
    await turn()
    await coalescer.run('k', failing).catch(() => undefined)
    expect(runs).to.equal(2)
  })

  it('holds at most 1,024 shared runs in one turn; beyond that reads run alone', async function () {
    const coalescer = new ReadCoalescer()
    let runs = 0
    const run = async (): Promise<ReadResult> => ({ body: ++runs })
    await Promise.all(Array.from({ length: 1100 }, (_, n) => coalescer.run(`k${n}`, run)))
    expect(coalescer.size).to.equal(1024)
    await coalescer.run('k1099', run)
    expect(runs).to.equal(1101)
    await turn()
    expect(coalescer.size).to.equal(0)
  })

  it('the key holds the parameters that can change the answer, and ignores the others and parameters no route reads', function () {
    const base = coalesceKey(context('/v1/acl/tokens', 'policy=p&role=r'), 7, [])
    expect(coalesceKey(context('/v1/acl/tokens', 'index=3&policy=p&wait=5s&stale&role=r&pretty'), 7, [])).to.equal(base)
    // A parameter no route reads cannot split identical reads into runs of their own.
    expect(coalesceKey(context('/v1/acl/tokens', 'policy=p&role=r&x=1'), 7, [])).to.equal(base)
    expect(coalesceKey(context('/v1/acl/tokens', 'role=r&policy=p'), 7, [])).to.equal(base)
    expect(coalesceKey(context('/v1/acl/tokens', 'policy=p&role=r&ns=team'), 7, [])).to.not.equal(base)
    expect(coalesceKey(context('/v1/acl/tokens', 'policy=q&role=r'), 7, [])).to.not.equal(base)
    // Repeated: the first value counts, so the order of the values matters.
    expect(coalesceKey(context('/v1/acl/tokens', 'policy=p&policy=q'), 7, [])).to.not.equal(coalesceKey(context('/v1/acl/tokens', 'policy=q&policy=p'), 7, []))
    // Names are compared as the routes read them, decoded.
    expect(coalesceKey(context('/v1/config/service-defaults', 'fil%74er=Name%3D%3Dx'), 7, [])).to.equal(coalesceKey(context('/v1/config/service-defaults', 'filter=Name==x'), 7, []))
    expect(coalesceKey(context('/v1/config/service-defaults', 'filter=Name==x'), 7, [])).to.not.equal(coalesceKey(context('/v1/config/service-defaults', 'filter=Name==y'), 7, []))
  })

  it('the key tells apart the secret (from any of its three places), the namespace header, the path, the scope and the applied index', function () {
    const keys = [
      coalesceKey(context('/v1/acl/tokens', ''), 7, []),
      coalesceKey(context('/v1/acl/tokens', ''), 8, []),
      coalesceKey(context('/v1/acl/roles', ''), 7, []),
      coalesceKey(context('/v1/acl/tokens', '', { 'X-Service-Token': 'a' }), 7, []),
      coalesceKey(context('/v1/acl/tokens', '', { 'X-Service-Token': 'b' }), 7, []),
      coalesceKey(context('/v1/acl/tokens', 'token=c'), 7, []),
      coalesceKey(context('/v1/acl/tokens', '', { Authorization: 'Bearer d' }), 7, []),
      coalesceKey(context('/v1/acl/tokens', '', { 'X-Service-Namespace': 'team' }), 7, []),
    ]
    keys.push(coalesceKey(context('/v1/config/service-defaults', ''), 7, ['', 'team']))
    keys.push(coalesceKey(context('/v1/config/service-defaults', ''), 7, ['', 'default']))
    // Parts that would read the same run together stay apart.
    keys.push(coalesceKey(context('/v1/config/service-defaults', ''), 7, ['a b', '']))
    keys.push(coalesceKey(context('/v1/config/service-defaults', ''), 7, ['a', 'b']))
    expect(new Set(keys).size).to.equal(keys.length)
    expect(coalesceKey(context('/v1/acl/tokens', '', { 'X-Service-Token': 'a' }), 7, [])).to.equal(keys[3])
  })

  it('the key reads the token and namespace as the routes do: Consul\'s header names as aliases, the contract\'s winning', function () {
    const key = (headers: Record<string, string>): string | undefined => coalesceKey(context('/v1/acl/tokens', '', headers), 7, [])
    // The same secret or namespace under either name is the same caller asking the same thing.
    expect(key({ 'X-Consul-Token': 'a' })).to.equal(key({ 'X-Service-Token': 'a' }))
    expect(key({ 'X-Consul-Namespace': 'team' })).to.equal(key({ 'X-Service-Namespace': 'team' }))
    // Both sent: the contract's counts, whatever Consul's says.
    expect(key({ 'X-Service-Token': 'a', 'X-Consul-Token': 'b' })).to.equal(key({ 'X-Service-Token': 'a' }))
    expect(key({ 'X-Service-Namespace': 'team', 'X-Consul-Namespace': 'other' })).to.equal(key({ 'X-Service-Namespace': 'team' }))
    // Different values under Consul's names still run apart.
    expect(key({ 'X-Consul-Token': 'a' })).to.not.equal(key({ 'X-Consul-Token': 'b' }))
    expect(key({ 'X-Consul-Namespace': 'team' })).to.not.equal(key({ 'X-Consul-Namespace': 'other' }))
    expect(key({ 'X-Consul-Namespace': 'team' })).to.not.equal(key({}))
  })

  it('only GETs coalesce', function () {
    expect(coalesceKey(context('/v1/acl/token', '', {}, 'PUT'), 7, [])).to.equal(undefined)
    expect(coalesceKey(context('/v1/acl/tokens', '', {}, 'HEAD'), 7, [])).to.equal(undefined)
  })

  it('serializes a shared body once', function () {
    const result: ReadResult = { body: { a: 1 } }
    const text = serializedBody(result)
    ;(result.body as { a: number }).a = 2
    expect(serializedBody(result)).to.equal(text)
    expect(JSON.parse(text)).to.deep.equal({ a: 1 })
  })
})
