/**
 * The JWKS cache: fetched once and reused, fetched again when a token names an unknown key id (a rotation) but at
 * most once per cooldown, shared by concurrent logins, refetched after its maximum age, and a failed fetch answering
 * for its URL for a cooldown, then tried again. A plain HTTP server on loopback serves the key set and counts fetches; the cache's clock is a variable.
 */
import { expect } from 'chai'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { CompactSign, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose'
import { InvalidBearerTokenError, IdentityServiceError } from '../../../../src/acl/auth/errors.js'
import { DiscoveryCache, JwksCache } from '../../../../src/acl/auth/key-sets.js'

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

  it('answers a failed fetch again for the failure cooldown without fetching, then tries again', async () => {
    const keys = cache()
    served.status = 503
    const failures: unknown[] = []
    for (let n = 0; n < 3; n++) await keys.verify(await sign(first, {}), { url }, ['ES256']).catch((caught: unknown) => failures.push(caught))
    expect(failures).to.have.length(3)
    for (const error of failures) {
      expect(error).to.be.instanceOf(IdentityServiceError)
      expect((error as Error).message).to.include('answered 503')
    }
    expect(fetches, 'one fetch for three logins within the cooldown').to.equal(1)
    served.status = 200
    clock += 4_999
    await keys.verify(await sign(first, {}), { url }, ['ES256']).catch(() => undefined)
    expect(fetches).to.equal(1)
    clock += 1
    await keys.verify(await sign(first, {}), { url }, ['ES256'])
    expect(fetches).to.equal(2)
  })

  it('logs where a failed fetch went without the credentials or query of its URL, and tells the caller neither', async () => {
    const keys = cache()
    served.status = 503
    const withSecrets = new URL(url)
    withSecrets.username = 'user'
    withSecrets.password = 'pass-word'
    withSecrets.search = '?access_token=s3cret'
    const error = await keys.verify(await sign(first, {}), { url: withSecrets.href }, ['ES256']).catch((caught: unknown) => caught)
    expect(error).to.be.instanceOf(IdentityServiceError)
    const { logDetail, message } = error as IdentityServiceError
    expect(logDetail).to.include(`${withSecrets.host}${withSecrets.pathname}`).and.include('answered 503')
    for (const text of [logDetail, message]) expect(text).to.not.match(/pass-word|s3cret|user@/)
    expect(message).to.not.include(withSecrets.host)
    served.status = 200
  })

  it('refuses a token whose algorithm is not allowed', async () => {
    const keys = cache()
    let error: unknown
    await keys.verify(await sign(first, {}), { url }, ['RS256']).catch((caught: unknown) => (error = caught))
    expect(error).to.be.instanceOf(InvalidBearerTokenError)
  })
})

describe('OIDC discovery cache', () => {
  let server: Server
  let base: string
  let status = 200
  let fetches = 0
  let clock = 0

  before(async () => {
    server = createServer((_request, response) => {
      fetches += 1
      response.writeHead(status, { 'Content-Type': 'application/json' })
      response.end(JSON.stringify({ issuer: base, jwks_uri: `${base}/jwks` }))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })

  after(async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })

  beforeEach(() => {
    status = 200
    fetches = 0
    clock = 1_000_000
  })

  const cache = (): DiscoveryCache => new DiscoveryCache({ now: () => clock, maxAgeMs: 60_000, failureCooldownMs: 5_000 })

  it('shares one fetch among concurrent logins and reuses the document until its maximum age', async () => {
    const discovery = cache()
    const providers = await Promise.all([1, 2, 3].map(() => discovery.provider(base, undefined)))
    expect(providers.map((provider) => provider.jwksUri)).to.deep.equal([`${base}/jwks`, `${base}/jwks`, `${base}/jwks`])
    expect(fetches).to.equal(1)
    clock += 60_000
    await discovery.provider(base, undefined)
    expect(fetches).to.equal(2)
  })

  it('answers a failed discovery again for the failure cooldown without fetching, then tries again', async () => {
    const discovery = cache()
    status = 500
    const failures: unknown[] = []
    for (let n = 0; n < 3; n++) await discovery.provider(base, undefined).catch((caught: unknown) => failures.push(caught))
    expect(failures).to.have.length(3)
    expect(failures.every((error) => error instanceof IdentityServiceError && error.message.includes('answered 500'))).to.equal(true)
    expect(fetches).to.equal(1)
    status = 200
    clock += 5_000
    expect((await discovery.provider(base, undefined)).issuer).to.equal(base)
    expect(fetches).to.equal(2)
  })
})
