/**
 * The OIDC browser login of an oidc auth method (/v1/acl/oidc/auth-url, then /v1/acl/oidc/callback), from outside.
 * The agent is real; so is the provider: an HTTPS server on loopback (discovery, JWKS, token endpoint) that the auth
 * method names as its CA. The user's trip through the provider's login page is played by the test: it reads the
 * nonce, state and redirect URI from the authorization URL, and registers an authorization code the token endpoint
 * will redeem once for an ID token it signs.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { SignJWT } from 'jose'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError } from '../support/api.js'
import { keyPair, makeCertificate, startDouble, type Double, type KeyPair } from '../support/identity-doubles.js'

const CLIENT_ID = 'warden-client'
const CLIENT_SECRET = 'client-secret-0f3a9c'
const CLI_REDIRECT = 'http://localhost:8550/oidc/callback'
const UI_REDIRECT = 'https://ui.example.test/ui/oidc/callback'

describe('OIDC browser login', function () {
  this.timeout(30_000)
  let agent: AgentProcess
  let provider: Double
  let key: KeyPair
  /** Codes the token endpoint redeems (once each): the claims of the ID token and the redirect URI it was issued for. */
  const codes = new Map<string, { claims: Record<string, unknown>; redirectUri: string }>()
  const tokenRequests: Array<{ authorization: unknown; form: Record<string, string> }> = []

  const nowSeconds = (): number => Math.floor(Date.now() / 1000)

  async function put(path: string, body: unknown): Promise<any> {
    const response = await agent.request('PUT', path, { body })
    expect(response.status, `${path}: ${response.text}`).to.equal(200)
    return response.body
  }

  function authUrl(body: Record<string, unknown>) {
    return agent.request('POST', '/v1/acl/oidc/auth-url', { token: null, body })
  }

  function callback(body: Record<string, unknown>) {
    return agent.request('POST', '/v1/acl/oidc/callback', { token: null, body })
  }

  /** Starts a login and plays the user at the provider: the state and a code for an ID token with these claims. */
  async function startLogin(
    options: { method?: string; clientNonce?: string; meta?: Record<string, string>; claims?: Record<string, unknown>; nonce?: string; redirectUri?: string } = {},
  ): Promise<{ state: string; code: string; url: URL }> {
    const response = await authUrl({
      AuthMethod: options.method ?? 'sso',
      RedirectURI: options.redirectUri ?? CLI_REDIRECT,
      ClientNonce: options.clientNonce ?? 'client-nonce-1',
      ...(options.meta === undefined ? {} : { Meta: options.meta }),
    })
    expect(response.status, response.text).to.equal(200)
    const url = new URL(response.body.AuthURL)
    const code = randomBytes(12).toString('hex')
    const claims = {
      iss: provider.url,
      aud: CLIENT_ID,
      sub: 'alice',
      groups: ['eng'],
      iat: nowSeconds(),
      exp: nowSeconds() + 300,
      nonce: options.nonce ?? url.searchParams.get('nonce'),
      ...options.claims,
    }
    codes.set(code, { claims, redirectUri: url.searchParams.get('redirect_uri') ?? '' })
    return { state: url.searchParams.get('state') ?? '', code, url }
  }

  before(async () => {
    const tls = makeCertificate()
    key = await keyPair('oidc-key')
    provider = await startDouble(tls, (method, path, body, headers) => {
      if (method === 'GET' && path === '/.well-known/openid-configuration') {
        return {
          status: 200,
          body: { issuer: provider.url, jwks_uri: `${provider.url}/jwks`, authorization_endpoint: `${provider.url}/authorize`, token_endpoint: `${provider.url}/token` },
        }
      }
      if (method === 'GET' && path === '/jwks') return { status: 200, body: { keys: [key.jwk] } }
      if (method === 'POST' && path === '/token') {
        tokenRequests.push({ authorization: headers.authorization, form: body })
        if (headers.authorization !== `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64')}`) return { status: 401, body: { error: 'invalid_client' } }
        // A provider that takes its time: such codes are refused, late.
        if (String(body?.code).startsWith('slow-')) return { status: 400, body: { error: 'invalid_grant' }, delayMs: 1_500 }
        const grant = codes.get(body?.code)
        // A code is redeemed once, for the redirect URI it was issued with (RFC 6749 4.1.3).
        if (body?.grant_type !== 'authorization_code' || grant === undefined || grant.redirectUri !== body.redirect_uri) return { status: 400, body: { error: 'invalid_grant' } }
        codes.delete(body.code)
        return { status: 200, body: { access_token: 'at', token_type: 'Bearer', id_token: signed(grant.claims) } }
      }
      return { status: 404, body: { error: 'not found' } }
    })
    // Signing is synchronous for the double's sake: tokens are signed ahead, when a code is registered.
    agent = await startAgent()
    const config = {
      OIDCDiscoveryURL: provider.url,
      OIDCDiscoveryCACert: tls.cert,
      OIDCClientID: CLIENT_ID,
      OIDCClientSecret: CLIENT_SECRET,
      AllowedRedirectURIs: [CLI_REDIRECT, UI_REDIRECT],
      OIDCScopes: ['email'],
      ClaimMappings: { sub: 'name' },
      ListClaimMappings: { groups: 'groups' },
    }
    await put('/v1/acl/auth-method', { Name: 'sso', Type: 'oidc', MaxTokenTTL: '10m', Config: config })
    await put('/v1/acl/auth-method', { Name: 'sso-other', Type: 'oidc', MaxTokenTTL: '10m', Config: config })
    await put('/v1/acl/auth-method', { Name: 'plain-jwt', Type: 'jwt', Config: { OIDCDiscoveryURL: provider.url, OIDCDiscoveryCACert: tls.cert } })
    for (const method of ['sso', 'sso-other']) await put('/v1/acl/binding-rule', { AuthMethod: method, BindType: 'service', BindName: '${value.name}', Selector: '"eng" in list.groups' })
  })

  after(async () => {
    await agent?.stop()
    await provider?.close()
  })

  const signedTokens = new Map<string, string>()
  function signed(claims: Record<string, unknown>): string {
    const token = signedTokens.get(JSON.stringify(claims))
    if (token === undefined) throw new Error('an ID token was asked for before it was signed')
    return token
  }

  /** Signs the ID token of every registered code that has none yet: the double answers synchronously. */
  async function signCodes(): Promise<void> {
    for (const { claims } of codes.values()) {
      const text = JSON.stringify(claims)
      if (!signedTokens.has(text)) signedTokens.set(text, await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'oidc-key' }).sign(key.privateKey))
    }
  }

  it("auth-url answers the provider's authorization URL with the flow's parameters, and needs no ACL token", async () => {
    const { url, state } = await startLogin()
    expect(`${url.origin}${url.pathname}`).to.equal(`${provider.url}/authorize`)
    expect(url.searchParams.get('client_id')).to.equal(CLIENT_ID)
    expect(url.searchParams.get('response_type')).to.equal('code')
    expect(url.searchParams.get('scope')).to.equal('openid email')
    expect(url.searchParams.get('redirect_uri')).to.equal(CLI_REDIRECT)
    expect(url.searchParams.get('nonce')).to.match(/^[0-9a-f]{40}$/)
    // The state is sealed: neither the nonce nor the client's nonce can be read from it.
    expect(state).to.match(/^[A-Za-z0-9_-]{40,}$/)
    expect(Buffer.from(state, 'base64url').toString('latin1')).not.to.include('client-nonce-1')
  })

  it('takes only an allowed redirect URI: exactly, or a loopback one on any port', async () => {
    const loopback = await authUrl({ AuthMethod: 'sso', RedirectURI: 'http://localhost:49152/oidc/callback' })
    expect(loopback.status, loopback.text).to.equal(200)
    for (const uri of ['https://ui.example.test/ui/oidc/other', 'http://evil.test/oidc/callback', 'https://ui.example.test:8443/ui/oidc/callback', 'not a url']) {
      expectError(await authUrl({ AuthMethod: 'sso', RedirectURI: uri }), 400, 'invalid_input', 'RedirectURI')
    }
  })

  it("the callback redeems the code and logs in as the ID token's identity, with the Meta given at the start", async () => {
    const { state, code } = await startLogin({ meta: { host: 'laptop-7' } })
    await signCodes()
    const startedMs = Date.now()
    const response = await callback({ AuthMethod: 'sso', State: state, Code: code, ClientNonce: 'client-nonce-1' })
    expect(response.status, response.text).to.equal(200)
    const token = response.body
    expect(token.ServiceIdentities).to.deep.equal([{ ServiceName: 'alice' }])
    expect(token.AuthMethod).to.equal('sso')
    expect(token.Local).to.equal(true)
    expect(token.Description).to.equal('token created via login: {"host":"laptop-7"}')
    expect(Date.parse(token.ExpirationTime) - startedMs).to.be.within(9 * 60_000, 11 * 60_000)
    const self = await agent.request('GET', '/v1/acl/token/self', { token: token.SecretID })
    expect(self.status, self.text).to.equal(200)
    // The code went to the token endpoint with the client's credentials and the redirect URI the flow started with.
    expect(tokenRequests.at(-1)?.form).to.deep.equal({ grant_type: 'authorization_code', code, redirect_uri: CLI_REDIRECT })
  })

  it('refuses a callback whose state was changed, is for another method, or comes with another client nonce', async () => {
    const { state, code } = await startLogin()
    await signCodes()
    const flipped = `${state.slice(0, 20)}${state[20] === 'A' ? 'B' : 'A'}${state.slice(21)}`
    const refusals = [
      await callback({ AuthMethod: 'sso', State: flipped, Code: code, ClientNonce: 'client-nonce-1' }),
      await callback({ AuthMethod: 'sso', State: 'not-a-state', Code: code, ClientNonce: 'client-nonce-1' }),
      await callback({ AuthMethod: 'sso-other', State: state, Code: code, ClientNonce: 'client-nonce-1' }),
      await callback({ AuthMethod: 'sso', State: state, Code: code, ClientNonce: 'someone-else' }),
    ]
    for (const response of refusals) {
      expectError(response, 403, 'permission_denied')
      expect(response.body.Error).to.match(/^Permission denied: OIDC login failed: /)
    }
    // None of them reached the provider: the code is still good for the real callback.
    expect(codes.has(code)).to.equal(true)
    const good = await callback({ AuthMethod: 'sso', State: state, Code: code, ClientNonce: 'client-nonce-1' })
    expect(good.status, good.text).to.equal(200)
  })

  it('refuses an ID token without the login nonce or for another client, and a code the provider will not redeem', async () => {
    const wrongNonce = await startLogin({ nonce: 'another-login' })
    const wrongAudience = await startLogin({ claims: { aud: 'another-client' } })
    const expired = await startLogin({ claims: { iat: nowSeconds() - 900, exp: nowSeconds() - 600 } })
    await signCodes()
    for (const [login, reason] of [
      [wrongNonce, 'does not carry the nonce of this login'],
      [wrongAudience, 'is not accepted'],
      [expired, 'expired'],
    ] as const) {
      const response = await callback({ AuthMethod: 'sso', State: login.state, Code: login.code, ClientNonce: 'client-nonce-1' })
      expectError(response, 403, 'permission_denied')
      expect(response.body.Error).to.include(reason)
    }
    // A code is good once: the second callback with it is refused by the provider.
    const once = await startLogin()
    await signCodes()
    expect((await callback({ AuthMethod: 'sso', State: once.state, Code: once.code, ClientNonce: 'client-nonce-1' })).status).to.equal(200)
    const again = await callback({ AuthMethod: 'sso', State: once.state, Code: once.code, ClientNonce: 'client-nonce-1' })
    expectError(again, 403, 'permission_denied')
    expect(again.body.Error).to.include('would not redeem the authorization code (400, invalid_grant)')
  })

  it("refuses a callback whose redirect URI the method no longer allows, and a client nonce that is too long", async () => {
    const { state, code } = await startLogin({ redirectUri: UI_REDIRECT })
    await signCodes()
    const method = (await agent.request('GET', '/v1/acl/auth-method/sso')).body
    await put('/v1/acl/auth-method/sso', { ...method, Config: { ...method.Config, AllowedRedirectURIs: [CLI_REDIRECT] } })
    try {
      const response = await callback({ AuthMethod: 'sso', State: state, Code: code, ClientNonce: 'client-nonce-1' })
      expectError(response, 403, 'permission_denied')
      expect(response.body.Error).to.include('no longer allowed')
      expect(codes.has(code), 'the code went to the provider').to.equal(true)
    } finally {
      await put('/v1/acl/auth-method/sso', method)
    }
    expectError(await authUrl({ AuthMethod: 'sso', RedirectURI: CLI_REDIRECT, ClientNonce: 'n'.repeat(257) }), 400, 'invalid_input', 'ClientNonce')
  })

  it('lets at most 32 logins per method wait on the provider at once; the others are told to retry', async () => {
    const { state } = await startLogin()
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, n) => callback({ AuthMethod: 'sso', State: state, Code: `slow-${n}`, ClientNonce: 'client-nonce-1' })),
    )
    const statuses = answers.map((answer) => answer.status)
    expect(statuses.filter((status) => status === 429)).to.have.length(8)
    expect(statuses.filter((status) => status === 403)).to.have.length(32)
    for (const answer of answers.filter((answer) => answer.status === 429)) expectError(answer, 429, 'rate_limited')
    // Once they are answered, logins go through again.
    const next = await startLogin()
    await signCodes()
    expect((await callback({ AuthMethod: 'sso', State: next.state, Code: next.code, ClientNonce: 'client-nonce-1' })).status).to.equal(200)
  })

  it('refuses a login that binds nothing, like any login', async () => {
    const { state, code } = await startLogin({ claims: { groups: ['sales'] } })
    await signCodes()
    const response = await callback({ AuthMethod: 'sso', State: state, Code: code, ClientNonce: 'client-nonce-1' })
    expectError(response, 403, 'permission_denied')
    expect(response.body.Error).to.include('yields no privilege')
  })

  it('keeps each kind of method to its own way in, and answers bad requests with the field', async () => {
    expectError(await authUrl({ AuthMethod: 'plain-jwt', RedirectURI: CLI_REDIRECT }), 400, 'invalid_input', 'AuthMethod')
    expectError(await callback({ AuthMethod: 'plain-jwt', State: 'x', Code: 'y' }), 400, 'invalid_input', 'AuthMethod')
    const bearer = await agent.request('POST', '/v1/acl/login', { token: null, body: { AuthMethod: 'sso', BearerToken: 'x.y.z' } })
    expectError(bearer, 400, 'invalid_input', 'AuthMethod')
    expect(bearer.body.Error).to.include('/v1/acl/oidc/auth-url')
    expectError(await authUrl({ AuthMethod: 'missing', RedirectURI: CLI_REDIRECT }), 403, 'acl_not_found')
    expectError(await authUrl({ AuthMethod: 'sso' }), 400, 'invalid_input', 'RedirectURI')
    expectError(await callback({ AuthMethod: 'sso', State: 'x' }), 400, 'invalid_input', 'Code')
    expectError(await authUrl({ AuthMethod: 'sso', RedirectURI: CLI_REDIRECT, Extra: 1 }), 400, 'invalid_input')
    // Meta travels in the state through the browser: bounded.
    const meta = Object.fromEntries(Array.from({ length: 8 }, (_, n) => [`key-${n}`, 'v'.repeat(400)]))
    expectError(await authUrl({ AuthMethod: 'sso', RedirectURI: CLI_REDIRECT, Meta: meta }), 400, 'invalid_input', 'Meta')
  })
})
