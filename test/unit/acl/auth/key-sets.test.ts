/**
 * The JWKS cache: fetched once and reused, fetched again when a token names an unknown key id (a rotation) but at
 * most once per cooldown, shared by concurrent logins, refetched after its maximum age, and never caching a failed
 * fetch. A plain HTTP server on loopback serves the key set and counts fetches; the cache's clock is a variable.
 */
import { expect } from 'chai'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { CompactSign, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose'
import { InvalidBearerTokenError, IdentityServiceError } from '../../../../src/acl/auth/errors.js'
import { JwksCache } from '../../../../src/acl/auth/key-sets.js'

interface Key {
  privateKey: CryptoKey
  jwk: JWK
}

async function key(kid: string): Promise<Key> {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true })
  return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256' } }
}

function sign(with_: Key, payload: object): Promise<string> {
  return new CompactSign(Buffer.from(JSON.stringify(payload))).setProtectedHeader({ alg: 'ES256', kid: with_.jwk.kid ?? '' }).sign(with_.privateKey)
}

describe('JWKS cache', () => {
  let server: Server
  let url: string
  let served: { status: number; keys: JWK[] }
  let fetches = 0
  let clock = 0
  let first: Key
  let second: Key

  before(async () => {
    ;[first, second] = await Promise.all([key('one'), key('two')])
    server = createServer((_request, response) => {
      fetches += 1
      response.writeHead(served.status, { 'Content-Type': 'application/json' })
      response.end(JSON.stringify({ keys: served.keys }))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`
  })

  after(async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })

  beforeEach(() => {
    served = { status: 200, keys: [first.jwk] }
    fetches = 0
    clock = 1_000_000
  })

  const cache = (): JwksCache => new JwksCache({ now: () => clock, maxAgeMs: 60_000, refreshCooldownMs: 5_000 })

  it('fetches once and verifies later tokens from the cached set', async () => {
    const keys = cache()
    const payload = await keys.verify(await sign(first, { n: 1 }), { url }, ['ES256'])
    expect(JSON.parse(Buffer.from(payload).toString('utf8'))).to.deep.equal({ n: 1 })
    await keys.verify(await sign(first, { n: 2 }), { url }, ['ES256'])
    expect(fetches).to.equal(1)
  })

  it('fetches again for an unknown key id, then at most once per cooldown', async () => {
    const keys = cache()
    await keys.verify(await sign(first, {}), { url }, ['ES256'])
    served.keys = [first.jwk, second.jwk]
    await keys.verify(await sign(second, {}), { url }, ['ES256'])
    expect(fetches).to.equal(2)
    const unknown = await sign({ ...second, jwk: { ...second.jwk, kid: 'three' } }, {})
    let error: unknown
    await keys.verify(unknown, { url }, ['ES256']).catch((caught: unknown) => (error = caught))
    expect(error).to.be.instanceOf(InvalidBearerTokenError)
    expect((error as Error).message).to.include('refreshed too recently')
    expect(fetches).to.equal(2)
    clock += 5_000
    await keys.verify(unknown, { url }, ['ES256']).catch((caught: unknown) => (error = caught))
    expect((error as Error).message).to.include('even after fetching the key set again')
    expect(fetches).to.equal(3)
  })

  it('shares one fetch among concurrent logins', async () => {
    const keys = cache()
    const tokens = await Promise.all([1, 2, 3, 4].map((n) => sign(first, { n })))
    await Promise.all(tokens.map((token) => keys.verify(token, { url }, ['ES256'])))
    expect(fetches).to.equal(1)
  })

  it('fetches again once the set is older than its maximum age', async () => {
    const keys = cache()
    await keys.verify(await sign(first, {}), { url }, ['ES256'])
    clock += 60_000
    await keys.verify(await sign(first, {}), { url }, ['ES256'])
    expect(fetches).to.equal(2)
  })

  it('does not cache a failed fetch', async () => {
    const keys = cache()
    served.status = 503
    let error: unknown
    await keys.verify(await sign(first, {}), { url }, ['ES256']).catch((caught: unknown) => (error = caught))
    expect(error).to.be.instanceOf(IdentityServiceError)
    expect((error as Error).message).to.include('answered 503')
    served.status = 200
    await keys.verify(await sign(first, {}), { url }, ['ES256'])
    expect(fetches).to.equal(2)
  })

  it('refuses a token whose algorithm is not allowed', async () => {
    const keys = cache()
    let error: unknown
    await keys.verify(await sign(first, {}), { url }, ['RS256']).catch((caught: unknown) => (error = caught))
    expect(error).to.be.instanceOf(InvalidBearerTokenError)
  })
})
