/**
 * Login and logout through auth methods, from outside. The agent is real; so are the services that vouch for bearer
 * tokens: a JWKS and OIDC discovery server and a Kubernetes TokenReview server, both HTTPS on loopback with a
 * certificate made for this run (openssl) that the auth methods name as their CA. Signing keys are generated here
 * with jose, so each kind of bad bearer token (expired, wrong key, wrong issuer, wrong audience) is made on purpose.
 *
 * Covered: every BindType, selectors that match and that do not, interpolation (and a result that is not a valid
 * name), roles named by rules but missing, MaxTokenTTL and TokenLocality, namespace rules, static keys, JWKS (with a
 * refresh when the provider rotates), OIDC discovery, kubernetes, logout, clone refusal, the token list's
 * `authmethod` filter and the auth-method delete cascade with real login tokens.
 */
import { expect } from 'chai'
import { exportSPKI, SignJWT, type JWK } from 'jose'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectErrorShape } from '../support/api.js'
import { keyPair, makeCertificate, startDouble, type Double, type KeyPair } from '../support/identity-doubles.js'

const ISSUER = 'https://issuer.test'
const nowSeconds = (): number => Math.floor(Date.now() / 1000)

describe('login and logout through auth methods', function () {
  this.timeout(30_000)
  let agent: AgentProcess
  let tls: { cert: string; key: string }
  let jwks: Double
  let tokenReview: Double
  let keyA: KeyPair
  let keyB: KeyPair
  let stranger: KeyPair
  let servedKeys: JWK[]
  let jwksFetches = 0
  let reviewer: string
  /** Service account tokens the TokenReview double knows: token → username, uid (or a refusal). */
  const accounts = new Map<string, { username: string; uid: string } | { error: string }>()

  async function jwt(claims: Record<string, unknown>, options: { key?: KeyPair; kid?: string; omitTimes?: boolean } = {}): Promise<string> {
    const key = options.key ?? keyA
    const base = options.omitTimes === true ? {} : { iat: nowSeconds(), exp: nowSeconds() + 300 }
    return new SignJWT({ iss: ISSUER, aud: 'warden', ...base, ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: options.kid ?? key.jwk.kid ?? 'a' })
      .sign(key.privateKey)
  }

  async function put(path: string, body: unknown): Promise<any> {
    const response = await agent.request('PUT', path, { body })
    expect(response.status, `${path}: ${response.text}`).to.equal(200)
    return response.body
  }

  /** Waits (bounded) for an agent log line that contains `text`: the log reaches the test through a pipe. */
  async function logLine(text: string): Promise<void> {
    for (let waited = 0; waited < 5_000; waited += 20) {
      if (agent.logs.some((line) => line.includes(text))) return
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    expect.fail(`no log line includes ${text}`)
  }

  function login(method: string, bearerToken: string, extra: Record<string, unknown> = {}) {
    return agent.request('POST', '/v1/acl/login', { token: null, body: { AuthMethod: method, BearerToken: bearerToken, ...extra } })
  }

  async function loginOk(method: string, bearerToken: string, extra: Record<string, unknown> = {}): Promise<any> {
    const response = await login(method, bearerToken, extra)
    expect(response.status, response.text).to.equal(200)
    return response.body
  }

  before(async () => {
    tls = makeCertificate()
    ;[keyA, keyB, stranger] = await Promise.all([keyPair('a'), keyPair('b'), keyPair('a')])
    servedKeys = [keyA.jwk]
    jwks = await startDouble(tls, (method, path) => {
      if (method === 'GET' && path === '/jwks') {
        jwksFetches += 1
        return { status: 200, body: { keys: servedKeys } }
      }
      if (method === 'GET' && path === '/.well-known/openid-configuration') return { status: 200, body: { issuer: jwks.url, jwks_uri: `${jwks.url}/jwks` } }
      return { status: 404, body: { error: 'not found' } }
    })
    reviewer = await jwt({ sub: 'system:serviceaccount:kube-system:warden-reviewer' })
    tokenReview = await startDouble(tls, (method, path, body, headers) => {
      if (method !== 'POST' || path !== '/apis/authentication.k8s.io/v1/tokenreviews') return { status: 404, body: { message: 'not found' } }
      if (headers.authorization !== `Bearer ${reviewer}`) return { status: 403, body: { kind: 'Status', message: 'the reviewer is not allowed' } }
      const account = accounts.get(body?.spec?.token)
      const status =
        account === undefined ? { authenticated: false } : 'error' in account ? { authenticated: false, error: account.error } : { authenticated: true, user: account }
      return { status: 201, body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', status } }
    })
    agent = await startAgent()

    await put('/v1/acl/role', { Name: 'ops-role' })
    await put('/v1/acl/auth-method', {
      Name: 'jwks',
      Type: 'jwt',
      MaxTokenTTL: '10m',
      TokenLocality: 'global',
      Config: {
        JWKSURL: `${jwks.url}/jwks`,
        JWKSCACert: tls.cert,
        BoundIssuer: ISSUER,
        BoundAudiences: ['warden'],
        ClaimMappings: { sub: 'name', '/org/team': 'team' },
        ListClaimMappings: { groups: 'groups' },
      },
    })
    for (const rule of [
      { BindType: 'service', BindName: '${value.name}', Selector: '"engineering" in list.groups' },
      { BindType: 'node', BindName: '${value.name}-node', Selector: 'value.team == "ops"' },
      { BindType: 'role', BindName: '${value.team}-role' },
      { BindType: 'templated-policy', BindName: 'builtin/service', BindVars: { name: '${value.name}-tpl' }, Selector: 'value.team == "ops"' },
      { BindType: 'service', BindName: 'never', Selector: 'value.team == "nobody"' },
    ]) {
      await put('/v1/acl/binding-rule', { AuthMethod: 'jwks', ...rule })
    }
    await put('/v1/acl/auth-method', {
      Name: 'static',
      Type: 'jwt',
      Config: { JWTValidationPubKeys: [await exportSPKI(keyA.publicKey)], BoundIssuer: ISSUER, BoundAudiences: ['warden'], ClaimMappings: { sub: 'name' } },
    })
    await put('/v1/acl/binding-rule', { AuthMethod: 'static', BindType: 'service', BindName: 'admin-tools', Selector: 'value.name == "admin"' })
  })

  after(async () => {
    await agent?.stop()
    await jwks?.close()
    await tokenReview?.close()
  })

  describe('jwt through a JWKS', () => {
    it('applies every matching binding rule: service, node, role and templated policy, interpolated from the claims', async () => {
      const token = await loginOk('jwks', await jwt({ sub: 'web', org: { team: 'ops' }, groups: ['engineering'] }), { Meta: { pod: 'default/web' } })
      expect(token.AuthMethod).to.equal('jwks')
      expect(token.Description).to.equal('token created via login: {"pod":"default/web"}')
      expect(token.ServiceIdentities).to.deep.equal([{ ServiceName: 'web' }])
      expect(token.NodeIdentities).to.deep.equal([{ NodeName: 'web-node', Datacenter: 'dc1' }])
      expect(token.Roles.map((role: { Name: string }) => role.Name)).to.deep.equal(['ops-role'])
      expect(token.TemplatedPolicies).to.have.length(1)
      expect(token.TemplatedPolicies[0]).to.include({ TemplateName: 'builtin/service' })
      expect(token.TemplatedPolicies[0].TemplateVariables).to.deep.equal({ name: 'web-tpl' })
      expect(token.Policies).to.deep.equal([])
      const self = await agent.request('GET', '/v1/acl/token/self', { token: token.SecretID })
      expect(self.status, self.text).to.equal(200)
      expect(self.body.AccessorID).to.equal(token.AccessorID)
    })

    it('expires login tokens MaxTokenTTL after their CreateTime, and makes them global when TokenLocality is global', async () => {
      const token = await loginOk('jwks', await jwt({ sub: 'web', org: { team: 'ops' }, groups: [] }))
      expect(Date.parse(token.ExpirationTime) - Date.parse(token.CreateTime)).to.equal(10 * 60_000)
      expect(token.Local).to.equal(false)
    })

    it('skips rules whose selector does not match, and drops a role binding to a role that does not exist', async () => {
      const token = await loginOk('jwks', await jwt({ sub: 'web', org: { team: 'dev' }, groups: ['engineering'] }))
      expect(token.ServiceIdentities).to.deep.equal([{ ServiceName: 'web' }])
      expect(token.NodeIdentities).to.deep.equal([])
      expect(token.TemplatedPolicies).to.deep.equal([])
      expect(token.Roles).to.deep.equal([])
    })

    it('refuses a login whose only binding names a missing role: it yields no privilege', async () => {
      const response = await login('jwks', await jwt({ sub: 'web', org: { team: 'dev' }, groups: ['sales'] }))
      expect(response.status, response.text).to.equal(403)
      expect(response.body.Code).to.equal('permission_denied')
      expect(response.body.Error).to.include('yields no privilege').and.include('dev-role')
    })

    it('fails a rule whose interpolated BindName is not a valid name; the log says which rule and what it gave', async () => {
      const response = await login('jwks', await jwt({ sub: 'Web Server', org: { team: 'dev' }, groups: ['engineering'] }))
      expect(response.status, response.text).to.equal(403)
      expect(response.body.Code).to.equal('permission_denied')
      // Binding rules need acl:read: the caller is not shown the rule's template.
      expect(response.body.Error).to.include('a binding rule that matches the identity cannot apply to it').and.not.include('${value.name}')
      await logLine('\\"${value.name}\\" gives \\"Web Server\\", which is not a valid service name')
    })

    it('fetches the JWKS again when a token names a key id it does not have (the provider rotated its keys)', async () => {
      await loginOk('jwks', await jwt({ sub: 'web', groups: ['engineering'] }))
      const before = jwksFetches
      servedKeys = [keyA.jwk, keyB.jwk]
      const token = await loginOk('jwks', await jwt({ sub: 'rotated', groups: ['engineering'] }, { key: keyB }))
      expect(token.ServiceIdentities).to.deep.equal([{ ServiceName: 'rotated' }])
      expect(jwksFetches).to.equal(before + 1)
      // The refreshed set is cached: a second token with the new key costs no fetch.
      await loginOk('jwks', await jwt({ sub: 'rotated', groups: ['engineering'] }, { key: keyB }))
      expect(jwksFetches).to.equal(before + 1)
    })

    it('needs no ACL token, and ignores one that is presented', async () => {
      const response = await agent.request('POST', '/v1/acl/login', {
        token: 'not-a-known-secret',
        body: { AuthMethod: 'jwks', BearerToken: await jwt({ sub: 'web', groups: ['engineering'] }) },
      })
      expect(response.status, response.text).to.equal(200)
    })
  })

  describe('invalid bearer tokens are a 403 that says why', () => {
    const cases: Array<[string, () => Promise<string>, string]> = [
      ['an expired token', () => jwt({ sub: 'web', iat: nowSeconds() - 900, exp: nowSeconds() - 600 }, { omitTimes: true }), 'expired'],
      ['a token signed by another key with the same key id', () => jwt({ sub: 'web' }, { key: stranger }), 'signature does not verify'],
      ['a token from another issuer', () => jwt({ sub: 'web', iss: 'https://elsewhere.test' }), 'is not the bound issuer'],
      ['a token for another audience', () => jwt({ sub: 'web', aud: 'someone-else' }), 'its audience (aud) ["someone-else"] is not accepted'],
      ['a token whose key id no key set has', () => jwt({ sub: 'web' }, { kid: 'unknown-kid' }), 'no key in the JWKS'],
      ['something that is not a JWT', async () => 'not.a.jwt', 'not a JWT'],
    ]
    for (const [name, make, reason] of cases) {
      it(`refuses ${name}`, async () => {
        const response = await login('jwks', await make())
        expect(response.status, response.text).to.equal(403)
        expect(response.body.Code).to.equal('permission_denied')
        expect(response.body.Error).to.match(/^Permission denied: invalid bearer token: /)
        expect(response.body.Error).to.include(reason)
      })
    }

    it('refuses a token signed by a key that is not among the static JWTValidationPubKeys', async () => {
      const response = await login('static', await jwt({ sub: 'admin' }, { key: stranger }))
      expect(response.status, response.text).to.equal(403)
      expect(response.body.Error).to.equal("Permission denied: invalid bearer token: the signature does not verify with the auth method's keys")
    })

    it('logs a kind of refusal once per interval, however the caller varies what it sends', async () => {
      const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')
      for (let n = 0; n < 20; n++) {
        const token = `${b64({ alg: `XA${n}`, kid: 'a' })}.${b64({ sub: 'web' })}.c2ln`
        expectErrorShape(await login('jwks', token), 403, 'permission_denied')
      }
      await new Promise((resolve) => setTimeout(resolve, 200))
      const lines = agent.logs.filter((line) => line.includes('signing algorithm \\"XA'))
      expect(lines.length, lines.join('\n')).to.equal(1)
    })

    it("tells a caller without a token why, but not the auth method's settings; the log has them", async () => {
      // Auth methods need acl:read; the caller of a login may hold nothing at all.
      const issuer = await login('jwks', await jwt({ sub: 'web', iss: 'https://elsewhere.test' }))
      const audience = await login('jwks', await jwt({ sub: 'web', aud: 'someone-else' }))
      for (const response of [issuer, audience]) {
        expect(response.status, response.text).to.equal(403)
        for (const setting of [ISSUER, 'warden']) expect(response.body.Error).not.to.include(setting)
      }
      await logLine('matches none of the bound audiences [\\"warden\\"]')
      await logLine(`is not the bound issuer \\"${ISSUER}\\"`)
    })
  })

  describe('jwt with static keys', () => {
    it('makes a local token without expiry when the method has neither TokenLocality global nor MaxTokenTTL', async () => {
      const token = await loginOk('static', await jwt({ sub: 'admin' }))
      expect(token.ServiceIdentities).to.deep.equal([{ ServiceName: 'admin-tools' }])
      expect(token.Local).to.equal(true)
      expect(token).not.to.have.property('ExpirationTime')
      expect(token.Description).to.equal('token created via login')
    })

    it('refuses a login no binding rule matches: it yields no privilege', async () => {
      const response = await login('static', await jwt({ sub: 'bob' }))
      expect(response.status, response.text).to.equal(403)
      expect(response.body.Code).to.equal('permission_denied')
      expect(response.body.Error).to.include('yields no privilege: no binding rule matches the identity')
      expect(response.body.Error).not.to.include('1 binding rule')
    })
  })

  describe('jwt through OIDC discovery', () => {
    it('finds the JWKS through the discovery document and binds the token', async () => {
      await put('/v1/acl/auth-method', {
        Name: 'discovery',
        Type: 'jwt',
        Config: { OIDCDiscoveryURL: jwks.url, OIDCDiscoveryCACert: tls.cert, BoundAudiences: ['warden'], ClaimMappings: { sub: 'name' } },
      })
      await put('/v1/acl/binding-rule', { AuthMethod: 'discovery', BindType: 'service', BindName: '${value.name}' })
      const token = await loginOk('discovery', await jwt({ sub: 'discovered', iss: jwks.url }))
      expect(token.ServiceIdentities).to.deep.equal([{ ServiceName: 'discovered' }])
      const wrongIssuer = await login('discovery', await jwt({ sub: 'discovered' }))
      expect(wrongIssuer.status, wrongIssuer.text).to.equal(403)
      expect(wrongIssuer.body.Error).to.include('is not the bound issuer')
    })
  })

  describe('kubernetes', () => {
    before(async () => {
      await put('/v1/acl/auth-method', {
        Name: 'k8s',
        Type: 'kubernetes',
        Config: { Host: tokenReview.url, CACert: tls.cert, ServiceAccountJWT: reviewer },
      })
      await put('/v1/acl/binding-rule', { AuthMethod: 'k8s', BindType: 'service', BindName: '${serviceaccount.name}', Selector: 'serviceaccount.namespace == "default"' })
    })

    it('reviews the token with TokenReview and binds the service account', async () => {
      const bearer = await jwt({ sub: 'system:serviceaccount:default:api' })
      accounts.set(bearer, { username: 'system:serviceaccount:default:api', uid: 'uid-1' })
      const token = await loginOk('k8s', bearer)
      expect(token.ServiceIdentities).to.deep.equal([{ ServiceName: 'api' }])
      expect(token.AuthMethod).to.equal('k8s')
    })

    it('refuses a service account whose namespace no selector matches', async () => {
      const bearer = await jwt({ sub: 'system:serviceaccount:other:api' })
      accounts.set(bearer, { username: 'system:serviceaccount:other:api', uid: 'uid-2' })
      const response = await login('k8s', bearer)
      expect(response.status, response.text).to.equal(403)
      expect(response.body.Error).to.include('yields no privilege')
    })

    it('refuses a token the TokenReview does not authenticate, with the review\'s reason', async () => {
      const bearer = await jwt({ sub: 'system:serviceaccount:default:gone' })
      accounts.set(bearer, { error: 'token has been invalidated' })
      const response = await login('k8s', bearer)
      expect(response.status, response.text).to.equal(403)
      expect(response.body.Error).to.include('invalid bearer token').and.include('token has been invalidated')
    })

    /** Waits up to 2 s for an agent log line (its output reaches agent.logs a moment after the answer). */
    async function expectLogged(matches: (line: string) => boolean, what: string): Promise<void> {
      const logged = (): boolean => agent.logs.some(matches)
      for (let waited = 0; !logged() && waited < 2_000; waited += 20) await new Promise((resolve) => setTimeout(resolve, 20))
      expect(logged(), what).to.equal(true)
    }

    /** A login while the method's reviewer credential is one the API server refuses; the method is restored after. */
    async function loginWithRefusedReviewer(): Promise<Awaited<ReturnType<typeof login>>> {
      await put('/v1/acl/auth-method/k8s', {
        Type: 'kubernetes',
        Config: { Host: tokenReview.url, CACert: tls.cert, ServiceAccountJWT: await jwt({ sub: 'not-the-reviewer' }) },
      })
      try {
        return await login('k8s', await jwt({ sub: 'system:serviceaccount:default:api' }))
      } finally {
        await put('/v1/acl/auth-method/k8s', { Type: 'kubernetes', Config: { Host: tokenReview.url, CACert: tls.cert, ServiceAccountJWT: reviewer } })
      }
    }

    it('refuses the login, naming the API server\'s status, when the reviewer credential is refused', async () => {
      const response = await loginWithRefusedReviewer()
      expect(response.status, response.text).to.equal(403)
      expect(response.body.Error).to.include('cannot verify the bearer token').and.include('answered 403')
      // The API server's own message names the reviewer's service account: it goes to the agent's log only.
      expect(response.body.Error).to.not.include('the reviewer is not allowed')
      await expectLogged((line) => line.includes('the reviewer is not allowed'), 'a log line with the API server\'s message')
    })

    it('does not tell the caller where the API server is: its address goes to the agent log only', async () => {
      expect(tokenReview.url).to.match(/127\.0\.0\.1:\d+/)
      const address = /127\.0\.0\.1:\d+/.exec(tokenReview.url)![0]
      const response = await loginWithRefusedReviewer()
      expect(response.status, response.text).to.equal(403)
      expect(response.body.Error).to.include('cannot verify the bearer token')
      expect(response.text).to.not.include(address)
      expect(response.text).to.not.include('127.0.0.1')
      await expectLogged((line) => line.includes('cannot verify the bearer token') && line.includes(address), 'a log line naming the API server')
    })
  })

  describe('namespace rules', () => {
    it('puts the token in the namespace of the first matching rule, else in the method\'s namespace', async () => {
      await put('/v1/acl/auth-method', {
        Name: 'namespaced',
        Type: 'jwt',
        Config: { JWKSURL: `${jwks.url}/jwks`, JWKSCACert: tls.cert, BoundAudiences: ['warden'], ClaimMappings: { sub: 'name', '/org/team': 'team' } },
        NamespaceRules: [
          { Selector: 'value.team == "ops"', BindNamespace: 'team-${value.team}' },
          { Selector: '', BindNamespace: 'never-reached' },
        ],
      })
      await put('/v1/acl/binding-rule', { AuthMethod: 'namespaced', BindType: 'service', BindName: '${value.name}' })
      const ops = await loginOk('namespaced', await jwt({ sub: 'web', org: { team: 'ops' } }))
      expect(ops.Namespace).to.equal('team-ops')
      await put('/v1/acl/auth-method/namespaced', {
        Type: 'jwt',
        Config: { JWKSURL: `${jwks.url}/jwks`, JWKSCACert: tls.cert, BoundAudiences: ['warden'], ClaimMappings: { sub: 'name', '/org/team': 'team' } },
        NamespaceRules: [{ Selector: 'value.team == "ops"', BindNamespace: 'team-${value.team}' }],
      })
      const dev = await loginOk('namespaced', await jwt({ sub: 'web', org: { team: 'dev' } }))
      expect(dev.Namespace).to.equal('default')

      // The authmethod filter finds the method's tokens in whichever namespace the rules put them.
      const all = await agent.request('GET', '/v1/acl/tokens?authmethod=namespaced&ns=*')
      expect(all.body.map((token: { AccessorID: string }) => token.AccessorID).sort()).to.deep.equal([ops.AccessorID, dev.AccessorID].sort())
      const inDefault = await agent.request('GET', '/v1/acl/tokens?authmethod=namespaced')
      expect(inDefault.body.map((token: { AccessorID: string }) => token.AccessorID)).to.deep.equal([dev.AccessorID])

      // The cascade reaches both.
      expect((await agent.request('DELETE', '/v1/acl/auth-method/namespaced')).body).to.equal(true)
      for (const token of [ops, dev]) expect((await agent.request('GET', `/v1/acl/token/${token.AccessorID}`)).status).to.equal(404)
    })

    it('refuses namespace rules on an auth method outside the default namespace', async () => {
      const response = await agent.request('PUT', '/v1/acl/auth-method', {
        body: { Name: 'elsewhere', Type: 'jwt', Namespace: 'team-a', Config: { JWKSURL: `${jwks.url}/jwks` }, NamespaceRules: [{ BindNamespace: 'x' }] },
      })
      expect(response.status, response.text).to.equal(400)
      expect(response.body.Field).to.equal('NamespaceRules')
    })
  })

  describe('logout', () => {
    it('deletes the login token presented', async () => {
      const token = await loginOk('static', await jwt({ sub: 'admin' }))
      const response = await agent.request('POST', '/v1/acl/logout', { token: token.SecretID })
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.equal(true)
      const self = await agent.request('GET', '/v1/acl/token/self', { token: token.SecretID })
      expect(self.status).to.equal(403)
      expect(self.body.Code).to.equal('acl_not_found')
    })

    it('refuses a token that login did not create', async () => {
      const response = await agent.request('POST', '/v1/acl/logout')
      expect(response.status).to.equal(403)
      expect(response.body.Code).to.equal('permission_denied')
      expect(response.body.Error).to.equal("Permission denied: token wasn't created via login")
    })

    it('answers acl_not_found without a token or with an unknown one', async () => {
      for (const token of [null, '3f1c3c9e-0000-4000-8000-000000000000']) {
        const response = await agent.request('POST', '/v1/acl/logout', { token })
        expect(response.status).to.equal(403)
        expect(response.body.Code).to.equal('acl_not_found')
      }
    })
  })

  describe('login tokens among other tokens', () => {
    it('refuses to clone a login token', async () => {
      const token = await loginOk('static', await jwt({ sub: 'admin' }))
      const response = await agent.request('PUT', `/v1/acl/token/${token.AccessorID}/clone`, { body: {} })
      expect(response.status, response.text).to.equal(400)
      expect(response.body.Error).to.include('auth method')
    })

    it('lists only the tokens of one auth method with ?authmethod=, and deletes them with the method', async () => {
      await put('/v1/acl/auth-method', { Name: 'cascade', Type: 'jwt', Config: { JWTValidationPubKeys: [await exportSPKI(keyA.publicKey)], BoundAudiences: ['warden'] } })
      const rule = await put('/v1/acl/binding-rule', { AuthMethod: 'cascade', BindType: 'service', BindName: 'cascaded' })
      const first = await loginOk('cascade', await jwt({}))
      const second = await loginOk('cascade', await jwt({}))
      const other = await loginOk('static', await jwt({ sub: 'admin' }))
      const listed = await agent.request('GET', '/v1/acl/tokens?authmethod=cascade')
      expect(listed.status).to.equal(200)
      expect(listed.body.map((token: { AccessorID: string }) => token.AccessorID).sort()).to.deep.equal([first.AccessorID, second.AccessorID].sort())

      expect((await agent.request('DELETE', '/v1/acl/auth-method/cascade')).body).to.equal(true)
      for (const token of [first, second]) {
        expect((await agent.request('GET', `/v1/acl/token/${token.AccessorID}`)).status).to.equal(404)
        expect((await agent.request('GET', '/v1/acl/token/self', { token: token.SecretID })).status).to.equal(403)
      }
      expect((await agent.request('GET', `/v1/acl/binding-rule/${rule.ID}`)).status).to.equal(404)
      expect((await agent.request('GET', '/v1/acl/tokens?authmethod=cascade')).body).to.deep.equal([])
      expect((await agent.request('GET', `/v1/acl/token/${other.AccessorID}`)).status).to.equal(200)
    })
  })

  describe('requests that cannot be a login', () => {
    it('answers acl_not_found for an auth method that does not exist', async () => {
      const response = await login('no-such-method', await jwt({ sub: 'web' }))
      expect(response.status, response.text).to.equal(403)
      expect(response.body.Code).to.equal('acl_not_found')
      expect(response.body.Error).to.include('auth method "no-such-method"')
    })

    it('answers 400 for a body without a BearerToken', async () => {
      const response = await agent.request('POST', '/v1/acl/login', { token: null, body: { AuthMethod: 'jwks' } })
      expect(response.status).to.equal(400)
      expect(response.body.Field).to.equal('BearerToken')
    })
  })
})
