/**
 * Read headers, consistency modes and blocking queries on the ACL endpoints, per the contract's Blocking and
 * Consistency columns and warden's readings: every response carries X-Service-Default-ACL-Policy; reads carry
 * X-Service-Index (the table's max index, never 0), X-Service-KnownLeader, X-Service-LastContact and
 * X-Service-Effective-Consistency. `?index=N&wait=D` on a list returns after the wait when nothing changed and sooner
 * when its table changes; on a single read, sooner only when that record changes. `?stale&consistent` is a 400.
 * Waits are 1 s where a test must sit out the whole wait, so the file stays quick.
 */
import { expect } from 'chai'
import { performance } from 'node:perf_hooks'
import { startAgent, type AgentProcess, type ApiResponse } from '../support/agent.js'
import { expectError, ok, secretWithRules, sleep, tokenWithRules, unique } from '../support/api.js'

function indexOf(response: ApiResponse): number {
  const header = response.headers.get('X-Service-Index')
  expect(header, `X-Service-Index on ${response.status} ${response.text.slice(0, 200)}`).to.match(/^\d+$/)
  return Number(header)
}

/** Starts a request, then runs `during` after `delayMs`, and reports the response with how long it took. */
async function timed(request: () => Promise<ApiResponse>, delayMs?: number, during?: () => Promise<unknown>): Promise<{ response: ApiResponse; elapsed: number }> {
  const started = performance.now()
  const pending = request().then((response) => ({ response, elapsed: performance.now() - started }))
  if (during !== undefined) {
    await sleep(delayMs ?? 0)
    await during()
  }
  return pending
}

describe('ACL read headers, consistency and blocking queries', () => {
  let agent: AgentProcess
  let readPolicy: any
  let readToken: any

  const createPolicy = (name = unique('p')): Promise<any> => ok(agent, 'PUT', '/v1/acl/policy', { Name: name })

  before(async () => {
    agent = await startAgent()
    // Nothing is written to the auth-method or binding-rule tables here: one test reads them empty.
    const reader = await tokenWithRules(agent, 'acl = "read"', 'acl-reader')
    readPolicy = reader.policy
    readToken = reader.token
  })
  after(async () => {
    await agent.stop()
  })

  describe('headers', () => {
    it('X-Service-Index is never 0, even for a table nothing was written to', async () => {
      for (const path of ['/v1/acl/binding-rules', '/v1/acl/auth-methods']) {
        const response = await agent.request('GET', path)
        expect(response.status, response.text).to.equal(200)
        expect(response.body).to.deep.equal([])
        expect(indexOf(response), path).to.be.at.least(1)
      }
    })

    it('every ACL read carries X-Service-Index, X-Service-KnownLeader, X-Service-LastContact and X-Service-Effective-Consistency', async () => {
      const method = await agent.request('PUT', '/v1/acl/auth-method', { body: { Name: unique('m'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } } })
      expect(method.status, method.text).to.equal(200)
      const rule = await agent.request('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: method.body.Name, BindType: 'service', BindName: 'web' } })
      expect(rule.status, rule.text).to.equal(200)
      const role = await agent.request('PUT', '/v1/acl/role', { body: { Name: unique('r') } })
      expect(role.status, role.text).to.equal(200)
      const paths = [
        '/v1/acl/policies',
        `/v1/acl/policy/${readPolicy.ID}`,
        `/v1/acl/policy/name/${readPolicy.Name}`,
        '/v1/acl/tokens',
        `/v1/acl/token/${readToken.AccessorID}`,
        '/v1/acl/token/self',
        '/v1/acl/roles',
        `/v1/acl/role/${role.body.ID}`,
        `/v1/acl/role/name/${role.body.Name}`,
        '/v1/acl/auth-methods',
        `/v1/acl/auth-method/${method.body.Name}`,
        '/v1/acl/binding-rules',
        `/v1/acl/binding-rule/${rule.body.ID}`,
      ]
      for (const path of paths) {
        const response = await agent.request('GET', path)
        expect(response.status, `${path}: ${response.text}`).to.equal(200)
        expect(indexOf(response), path).to.be.at.least(1)
        expect(response.headers.get('X-Service-KnownLeader'), path).to.equal('true')
        expect(response.headers.get('X-Service-LastContact'), path).to.match(/^\d+$/)
        expect(response.headers.get('X-Service-Effective-Consistency'), path).to.equal('leader')
      }
    })

    it('X-Service-Default-ACL-Policy is on every response: reads, writes, errors and unknown paths', async () => {
      const responses = [
        await agent.request('GET', '/v1/acl/policies'),
        await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('hdr') } }),
        await agent.request('PUT', '/v1/acl/policy', { body: { Name: 7 } }),
        await agent.request('GET', '/v1/acl/policies', { token: null }),
        await agent.request('GET', '/v1/acl/policies', { token: 'c0ffee00-0000-4000-8000-000000000000' }),
        await agent.request('GET', '/v1/acl/policy/00000000-0000-4000-8000-00000000abcd'),
        await agent.request('GET', '/v1/acl/nothing-here'),
        await agent.request('DELETE', '/v1/acl/policies'),
        await agent.request('GET', '/v1/status/leader', { token: null }),
      ]
      expect(responses.map((response) => response.status)).to.deep.equal([200, 200, 400, 403, 403, 404, 404, 405, 200])
      for (const response of responses) expect(response.headers.get('X-Service-Default-ACL-Policy'), response.text).to.equal('deny')
    })

    it("X-Service-Index is the table's max index, raised by create, update and delete", async () => {
      const created = await createPolicy()
      expect(indexOf(await agent.request('GET', '/v1/acl/policies'))).to.equal(created.ModifyIndex)
      const updated = await agent.request('PUT', `/v1/acl/policy/${created.ID}`, { body: { Name: created.Name, Description: 'changed' } })
      expect(updated.status, updated.text).to.equal(200)
      expect(indexOf(await agent.request('GET', '/v1/acl/policies'))).to.equal(updated.body.ModifyIndex)
      const deleted = await agent.request('DELETE', `/v1/acl/policy/${created.ID}`)
      expect(deleted.body).to.equal(true)
      expect(indexOf(await agent.request('GET', '/v1/acl/policies'))).to.be.above(updated.body.ModifyIndex)
    })

    it("a read of one record reports its table's max index, not the record's own", async () => {
      const first = await createPolicy()
      const second = await createPolicy()
      const read = await agent.request('GET', `/v1/acl/policy/${first.ID}`)
      expect(read.body.ModifyIndex).to.equal(first.ModifyIndex)
      expect(indexOf(read)).to.equal(second.ModifyIndex)
    })

    it("a write to another table does not raise a table's index", async () => {
      await createPolicy()
      const before = indexOf(await agent.request('GET', '/v1/acl/policies'))
      const token = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'other table' } })
      expect(token.status, token.text).to.equal(200)
      expect(indexOf(await agent.request('GET', '/v1/acl/policies'))).to.equal(before)
      expect(indexOf(await agent.request('GET', '/v1/acl/tokens'))).to.equal(token.body.ModifyIndex)
    })

    it('?stale and ?consistent are reported in X-Service-Effective-Consistency', async () => {
      const stale = await agent.request('GET', '/v1/acl/policies?stale')
      expect(stale.status, stale.text).to.equal(200)
      expect(stale.headers.get('X-Service-Effective-Consistency')).to.equal('stale')
      const consistent = await agent.request('GET', '/v1/acl/policies?consistent')
      expect(consistent.status, consistent.text).to.equal(200)
      expect(consistent.headers.get('X-Service-Effective-Consistency')).to.equal('consistent')
    })

    it('?stale together with ?consistent on a read is a 400', async () => {
      expectError(await agent.request('GET', '/v1/acl/policies?stale&consistent'), 400, 'invalid_input')
      expectError(await agent.request('GET', `/v1/acl/token/${readToken.AccessorID}?consistent&stale`), 400, 'invalid_input')
    })

    it('?stale together with ?consistent on a write is a 400 too, and nothing is written', async () => {
      // readings.md: stale/consistent are ignored where the Consistency column says none, but "both at once is a 400".
      const name = unique('conflict')
      expectError(await agent.request('PUT', '/v1/acl/policy?stale&consistent', { body: { Name: name } }), 400, 'invalid_input')
      expect((await agent.request('GET', `/v1/acl/policy/name/${name}`)).status).to.equal(404)
    })

    it('a malformed index or wait is a 400 naming the parameter', async () => {
      expectError(await agent.request('GET', '/v1/acl/policies?index=abc'), 400, 'invalid_input', 'index')
      expectError(await agent.request('GET', '/v1/acl/policies?index=-1'), 400, 'invalid_input', 'index')
      expectError(await agent.request('GET', '/v1/acl/policies?index=1&wait=soon'), 400, 'invalid_input', 'wait')
    })
  })

  describe('blocking lists', () => {
    it('a blocking list returns after the wait when nothing changed, with the same index', async () => {
      const index = indexOf(await agent.request('GET', '/v1/acl/policies'))
      const { response, elapsed } = await timed(() => agent.request('GET', `/v1/acl/policies?index=${index}&wait=1s`))
      expect(response.status, response.text).to.equal(200)
      expect(elapsed).to.be.at.least(950).and.below(3000)
      expect(indexOf(response)).to.equal(index)
    })

    it('a blocking list returns sooner when its table changes, with the new index and record', async () => {
      const index = indexOf(await agent.request('GET', '/v1/acl/policies'))
      let created: any
      const { response, elapsed } = await timed(() => agent.request('GET', `/v1/acl/policies?index=${index}&wait=10s`), 300, async () => {
        created = await createPolicy()
      })
      expect(response.status, response.text).to.equal(200)
      expect(elapsed).to.be.below(5000)
      expect(indexOf(response)).to.be.above(index)
      expect((response.body as Array<{ ID: string }>).map((policy) => policy.ID)).to.include(created.ID)
    })

    it('a blocking list is not woken by a write to another table', async () => {
      const index = indexOf(await agent.request('GET', '/v1/acl/policies'))
      const { response, elapsed } = await timed(() => agent.request('GET', `/v1/acl/policies?index=${index}&wait=1s`), 200, async () => {
        expect((await agent.request('PUT', '/v1/acl/token', { body: {} })).status).to.equal(200)
      })
      expect(response.status).to.equal(200)
      expect(elapsed).to.be.at.least(950)
      expect(indexOf(response)).to.equal(index)
    })

    it('tokens, roles, auth-methods and binding-rules lists each wake on a write to their table', async () => {
      const method = await agent.request('PUT', '/v1/acl/auth-method', { body: { Name: unique('wake'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } } })
      expect(method.status, method.text).to.equal(200)
      const writes: Array<[string, () => Promise<ApiResponse>]> = [
        ['/v1/acl/tokens', () => agent.request('PUT', '/v1/acl/token', { body: {} })],
        ['/v1/acl/roles', () => agent.request('PUT', '/v1/acl/role', { body: { Name: unique('wake') } })],
        ['/v1/acl/auth-methods', () => agent.request('PUT', '/v1/acl/auth-method', { body: { Name: unique('wake'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } } })],
        ['/v1/acl/binding-rules', () => agent.request('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: method.body.Name, BindType: 'service', BindName: 'web' } })],
      ]
      for (const [path, write] of writes) {
        const index = indexOf(await agent.request('GET', path))
        const { response, elapsed } = await timed(() => agent.request('GET', `${path}?index=${index}&wait=10s`), 200, async () => {
          const written = await write()
          expect(written.status, `${path}: ${written.text}`).to.equal(200)
        })
        expect(response.status, path).to.equal(200)
        expect(elapsed, path).to.be.below(5000)
        expect(indexOf(response), path).to.be.above(index)
      }
    })

    it('an index above the current one returns at once', async () => {
      const index = indexOf(await agent.request('GET', '/v1/acl/policies'))
      const { response, elapsed } = await timed(() => agent.request('GET', `/v1/acl/policies?index=${index + 1000}&wait=10s`))
      expect(response.status).to.equal(200)
      expect(elapsed).to.be.below(1000)
    })

    it('on waking, the token is checked again: a token deleted during the wait gets 403 acl_not_found', async () => {
      const token = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: readPolicy.ID }] } })
      expect(token.status, token.text).to.equal(200)
      const index = indexOf(await agent.request('GET', '/v1/acl/tokens', { token: token.body.SecretID }))
      const { response, elapsed } = await timed(() => agent.request('GET', `/v1/acl/tokens?index=${index}&wait=10s`, { token: token.body.SecretID }), 200, async () => {
        expect((await agent.request('DELETE', `/v1/acl/token/${token.body.AccessorID}`)).body).to.equal(true)
      })
      expect(elapsed).to.be.below(5000)
      expectError(response, 403, 'acl_not_found')
    })

    it('a ?stale query whose wait runs out checks its token again: one deleted during the wait (another table) gets 403', async () => {
      const token = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: readPolicy.ID }] } })
      expect(token.status, token.text).to.equal(200)
      const index = indexOf(await agent.request('GET', '/v1/acl/policies', { token: token.body.SecretID }))
      // Deleting the token writes the token table, which does not wake a query on policies: only the deadline ends it.
      const { response, elapsed } = await timed(() => agent.request('GET', `/v1/acl/policies?stale&index=${index}&wait=1s`, { token: token.body.SecretID }), 200, async () => {
        expect((await agent.request('DELETE', `/v1/acl/token/${token.body.AccessorID}`)).body).to.equal(true)
      })
      expect(elapsed).to.be.at.least(900)
      expectError(response, 403, 'acl_not_found')
    })
  })

  describe('queries woken together (one shared run per identical read)', () => {
    it('callers woken by one write each get what their own token allows: secrets for acl:write, hidden for acl:read', async () => {
      const index = indexOf(await agent.request('GET', '/v1/acl/tokens'))
      const path = `/v1/acl/tokens?index=${index}&wait=10s`
      const parked = [
        ...Array.from({ length: 10 }, () => agent.request('GET', path)),
        ...Array.from({ length: 10 }, () => agent.request('GET', path, { token: readToken.SecretID })),
      ]
      await sleep(300)
      const created = await ok(agent, 'PUT', '/v1/acl/token', { Description: unique('woken') })
      const answers = await Promise.all(parked)
      for (const [n, response] of answers.entries()) {
        expect(response.status, response.text).to.equal(200)
        expect(indexOf(response)).to.be.above(index)
        const listedToken = (response.body as Array<{ AccessorID: string; SecretID: string }>).find((token) => token.AccessorID === created.AccessorID)
        expect(listedToken, `answer ${n}`).to.not.equal(undefined)
        expect(listedToken?.SecretID, `answer ${n}`).to.equal(n < 10 ? created.SecretID : '<hidden>')
      }
    })

    it('identical reads sent at once by callers with different rights are answered per caller', async () => {
      const denied = await secretWithRules(agent, 'service_prefix "" { policy = "read" }')
      const path = `/v1/acl/policy/${readPolicy.ID}`
      const answers = await Promise.all(Array.from({ length: 30 }, (_, n) => agent.request('GET', path, { token: n % 2 === 0 ? readToken.SecretID : denied })))
      for (const [n, response] of answers.entries()) {
        if (n % 2 === 0) {
          expect(response.status, response.text).to.equal(200)
          expect(response.body.ID).to.equal(readPolicy.ID)
          expect(response.headers.get('Content-Type')).to.match(/^application\/json/)
        } else expectError(response, 403, 'permission_denied')
      }
    })

    it('?pretty still indents a read that others share', async () => {
      const path = `/v1/acl/policy/${readPolicy.ID}`
      const [plain, pretty] = await Promise.all([agent.request('GET', path), agent.request('GET', `${path}?pretty`)])
      expect(plain.status).to.equal(200)
      expect(pretty.status).to.equal(200)
      expect(plain.text).to.not.include('\n')
      expect(pretty.text).to.include('\n    "ID"')
      expect(JSON.parse(pretty.text)).to.deep.equal(plain.body)
    })
  })

  describe('blocking reads of one record', () => {
    it('a blocking read returns after the wait when its record did not change, even if others in its table did', async () => {
      const watched = await createPolicy()
      const other = await createPolicy()
      const index = indexOf(await agent.request('GET', `/v1/acl/policy/${watched.ID}`))
      const { response, elapsed } = await timed(() => agent.request('GET', `/v1/acl/policy/${watched.ID}?index=${index}&wait=1s`), 200, async () => {
        const updated = await agent.request('PUT', `/v1/acl/policy/${other.ID}`, { body: { Name: other.Name, Description: 'not the watched one' } })
        expect(updated.status, updated.text).to.equal(200)
      })
      expect(response.status).to.equal(200)
      expect(elapsed).to.be.at.least(950)
      expect(response.body.ModifyIndex).to.equal(watched.ModifyIndex)
    })

    it('a blocking read returns sooner when its record changes', async () => {
      const watched = await createPolicy()
      const index = indexOf(await agent.request('GET', `/v1/acl/policy/${watched.ID}`))
      const { response, elapsed } = await timed(() => agent.request('GET', `/v1/acl/policy/${watched.ID}?index=${index}&wait=10s`), 300, async () => {
        const updated = await agent.request('PUT', `/v1/acl/policy/${watched.ID}`, { body: { Name: watched.Name, Description: 'changed' } })
        expect(updated.status, updated.text).to.equal(200)
      })
      expect(response.status, response.text).to.equal(200)
      expect(elapsed).to.be.below(5000)
      expect(response.body.Description).to.equal('changed')
      expect(response.body.ModifyIndex).to.be.above(index)
      expect(indexOf(response)).to.be.above(index)
    })

    it('a blocking read by name returns sooner when that record changes', async () => {
      const role = await agent.request('PUT', '/v1/acl/role', { body: { Name: unique('watched') } })
      expect(role.status, role.text).to.equal(200)
      const index = indexOf(await agent.request('GET', `/v1/acl/role/name/${role.body.Name}`))
      const { response, elapsed } = await timed(() => agent.request('GET', `/v1/acl/role/name/${role.body.Name}?index=${index}&wait=10s`), 300, async () => {
        const updated = await agent.request('PUT', `/v1/acl/role/${role.body.ID}`, { body: { Name: role.body.Name, Description: 'changed' } })
        expect(updated.status, updated.text).to.equal(200)
      })
      expect(response.status, response.text).to.equal(200)
      expect(elapsed).to.be.below(5000)
      expect(response.body.Description).to.equal('changed')
    })

    it('a blocking token read returns sooner when that token changes', async () => {
      const token = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'before' } })
      expect(token.status, token.text).to.equal(200)
      const index = indexOf(await agent.request('GET', `/v1/acl/token/${token.body.AccessorID}`))
      const { response, elapsed } = await timed(() => agent.request('GET', `/v1/acl/token/${token.body.AccessorID}?index=${index}&wait=10s`), 300, async () => {
        const updated = await agent.request('PUT', `/v1/acl/token/${token.body.AccessorID}`, { body: { Description: 'after' } })
        expect(updated.status, updated.text).to.equal(200)
      })
      expect(response.status, response.text).to.equal(200)
      expect(elapsed).to.be.below(5000)
      expect(response.body.Description).to.equal('after')
    })

    it('a blocking read returns sooner when its record is deleted, with a 404', async () => {
      const watched = await createPolicy()
      const index = indexOf(await agent.request('GET', `/v1/acl/policy/${watched.ID}`))
      const { response, elapsed } = await timed(() => agent.request('GET', `/v1/acl/policy/${watched.ID}?index=${index}&wait=10s`), 300, async () => {
        expect((await agent.request('DELETE', `/v1/acl/policy/${watched.ID}`)).body).to.equal(true)
      })
      expect(elapsed).to.be.below(5000)
      expectError(response, 404, 'not_found')
    })
  })
})
