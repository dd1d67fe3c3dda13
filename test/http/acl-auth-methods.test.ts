/**
 * ACL auth methods over HTTP, against the contract (api.md, "Auth methods") and the rules for Config per type:
 * kubernetes needs a Host URL, a PEM CACert and a ServiceAccountJWT; jwt exactly one of JWTValidationPubKeys, JWKSURL
 * and OIDCDiscoveryURL; oidc its discovery URL, client ID and secret, redirect URIs and a nonzero MaxTokenTTL; an unknown
 * type or Config key is a 400. Also read, list (without Config), update (Name and Type must match, PUT replaces,
 * indexes), delete (true; its binding rules go with it), name rules and uniqueness per namespace.
 */
import { expect } from 'chai'
import { generateKeyPairSync } from 'node:crypto'
import { startAgent, type AgentProcess, type ApiResponse } from '../support/agent.js'
import { expectError, listed, ok, secretWithRules, unique } from '../support/api.js'

/** A self-signed P-256 CA certificate (valid until 2126), only ever parsed, never trusted. */
const CA_CERT = `-----BEGIN CERTIFICATE-----
MIIBiTCCAS+gAwIBAgIUSl3rC1nWnhAIm0uiDBPnnEEqmPYwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwOd2FyZGVuLXRlc3QtY2EwIBcNMjYxMTIxMDYzNzMzWhgPMjEy
NjEwMjgwNjM3MzNaMBkxFzAVBgNVBAMMDndhcmRlbi10ZXN0LWNhMFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAE9ZUXF08Wkey4rvLSumYgycvkcqptbp1jm29etdQK
1w+JmBs1tVqvxXIM6J/skTIIDTfrfTg7AXjsjnKr6YPjQ6NTMFEwHQYDVR0OBBYE
FM2g1Z8frLVFI+R7bGEYdKDjqCmnMB8GA1UdIwQYMBaAFM2g1Z8frLVFI+R7bGEY
dKDjqCmnMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIhANS2pWGY
/Gj8M6MkYUAMcb1RnGpTrl5mCqe+kOekjQUeAiAJ5R7ms12/8dtzfMqRuDmj0+QJ
k2+XsZ0LYRyRa1MMIw==
-----END CERTIFICATE-----
`

const base64url = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')
/** A reviewer JWT as Kubernetes issues them: three base64url parts (the signature is never checked on create). */
const SERVICE_ACCOUNT_JWT = `${base64url({ alg: 'RS256', typ: 'JWT' })}.${base64url({ iss: 'kubernetes/serviceaccount', sub: 'system:serviceaccount:default:reviewer' })}.c2lnbmF0dXJl`
const PUBLIC_KEY = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString()

const kubernetesConfig = (): Record<string, unknown> => ({ Host: 'https://kubernetes.example.com:6443', CACert: CA_CERT, ServiceAccountJWT: SERVICE_ACCOUNT_JWT })
const oidcConfig = (): Record<string, unknown> => ({
  OIDCDiscoveryURL: 'https://issuer.example.com/',
  OIDCClientID: 'client-id',
  OIDCClientSecret: 'client-secret',
  AllowedRedirectURIs: ['http://localhost:8550/oidc/callback'],
})

describe('ACL auth methods', () => {
  let agent: AgentProcess
  let readToken: string

  const createMethod = (body: Record<string, unknown>): Promise<any> => ok(agent, 'PUT', '/v1/acl/auth-method', body)
  const methodNames = (query = ''): Promise<string[]> => listed(agent, `/v1/acl/auth-methods${query}`, 'Name')

  /** Creation must fail with a 400 naming `field`, and nothing may be written. */
  async function expectRejected(body: Record<string, unknown>, field: string | RegExp): Promise<ApiResponse> {
    const response = await agent.request('PUT', '/v1/acl/auth-method', { body })
    expectError(response, 400, 'invalid_input', field)
    if (typeof body.Name === 'string') expect(await methodNames('?ns=*')).to.not.include(body.Name)
    return response
  }

  before(async () => {
    agent = await startAgent()
    readToken = await secretWithRules(agent, 'acl = "read"', 'acl-reader')
  })
  after(async () => {
    await agent.stop()
  })

  describe('types and Config', () => {
    it('a kubernetes method with Host, CACert and ServiceAccountJWT is created and returned with defaults and indexes', async () => {
      const name = unique('k8s')
      const method = await createMethod({ Name: name, Type: 'kubernetes', Config: kubernetesConfig() })
      expect(method).to.include({ Name: name, Type: 'kubernetes' })
      expect(method.Description ?? '').to.equal('')
      expect(method.DisplayName ?? '').to.equal('')
      expect(method.TokenLocality ?? '').to.equal('')
      expect(method.Config).to.deep.equal(kubernetesConfig())
      expect(method.CreateIndex).to.be.a('number').above(0)
      expect(method.ModifyIndex).to.equal(method.CreateIndex)
    })

    it('kubernetes: Host is required and must be a URL', async () => {
      const { Host: _host, ...withoutHost } = kubernetesConfig()
      await expectRejected({ Name: unique('k8s'), Type: 'kubernetes', Config: withoutHost }, /Host/)
      await expectRejected({ Name: unique('k8s'), Type: 'kubernetes', Config: { ...kubernetesConfig(), Host: 'not a url' } }, /Host/)
    })

    it('kubernetes: CACert is required and must be a PEM certificate', async () => {
      const { CACert: _cert, ...withoutCert } = kubernetesConfig()
      await expectRejected({ Name: unique('k8s'), Type: 'kubernetes', Config: withoutCert }, /CACert/)
      await expectRejected({ Name: unique('k8s'), Type: 'kubernetes', Config: { ...kubernetesConfig(), CACert: 'not a certificate' } }, /CACert/)
      await expectRejected({ Name: unique('k8s'), Type: 'kubernetes', Config: { ...kubernetesConfig(), CACert: PUBLIC_KEY } }, /CACert/)
    })

    it('kubernetes: ServiceAccountJWT is required', async () => {
      const { ServiceAccountJWT: _jwt, ...withoutJwt } = kubernetesConfig()
      await expectRejected({ Name: unique('k8s'), Type: 'kubernetes', Config: withoutJwt }, /ServiceAccountJWT/)
    })

    it('jwt: JWTValidationPubKeys alone is accepted', async () => {
      const method = await createMethod({ Name: unique('jwt'), Type: 'jwt', Config: { JWTValidationPubKeys: [PUBLIC_KEY], BoundIssuer: 'issuer' } })
      expect(method.Config.JWTValidationPubKeys).to.deep.equal([PUBLIC_KEY])
    })

    it('jwt: JWTSupportedAlgs takes asymmetric algorithms only; none and HS256 are a 400 naming the entry', async () => {
      const method = await createMethod({ Name: unique('jwt'), Type: 'jwt', Config: { JWTValidationPubKeys: [PUBLIC_KEY], JWTSupportedAlgs: ['ES256', 'RS256'] } })
      expect(method.Config.JWTSupportedAlgs).to.deep.equal(['ES256', 'RS256'])
      for (const algorithms of [['none'], ['ES256', 'HS256']]) {
        const response = await agent.request('PUT', '/v1/acl/auth-method', { body: { Name: unique('jwt'), Type: 'jwt', Config: { JWTValidationPubKeys: [PUBLIC_KEY], JWTSupportedAlgs: algorithms } } })
        expectError(response, 400, 'invalid_input', `Config.JWTSupportedAlgs[${algorithms.length - 1}]`)
      }
    })

    it('jwt: JWKSURL alone is accepted', async () => {
      const method = await createMethod({ Name: unique('jwt'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      expect(method.Config.JWKSURL).to.equal('https://issuer.example.com/jwks')
    })

    it('jwt: OIDCDiscoveryURL alone is accepted', async () => {
      const method = await createMethod({ Name: unique('jwt'), Type: 'jwt', Config: { OIDCDiscoveryURL: 'https://issuer.example.com/' } })
      expect(method.Config.OIDCDiscoveryURL).to.equal('https://issuer.example.com/')
    })

    it('jwt: none of the three key sources is a 400', async () => {
      await expectRejected({ Name: unique('jwt'), Type: 'jwt', Config: { BoundIssuer: 'issuer' } }, /JWTValidationPubKeys|JWKSURL|OIDCDiscoveryURL|Config/)
    })

    it('jwt: two of the three key sources at once is a 400', async () => {
      await expectRejected(
        { Name: unique('jwt'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks', OIDCDiscoveryURL: 'https://issuer.example.com/' } },
        /JWTValidationPubKeys|JWKSURL|OIDCDiscoveryURL|Config/,
      )
      await expectRejected(
        { Name: unique('jwt'), Type: 'jwt', Config: { JWTValidationPubKeys: [PUBLIC_KEY], JWKSURL: 'https://issuer.example.com/jwks' } },
        /JWTValidationPubKeys|JWKSURL|OIDCDiscoveryURL|Config/,
      )
    })

    it('oidc: discovery URL, client ID, client secret, redirect URIs and a nonzero MaxTokenTTL are accepted', async () => {
      const method = await createMethod({ Name: unique('oidc'), Type: 'oidc', MaxTokenTTL: '10m', Config: oidcConfig() })
      expect(method.Type).to.equal('oidc')
      expect(method.Config).to.deep.equal(oidcConfig())
      expect(method.MaxTokenTTL).to.be.oneOf(['10m', '10m0s'])
    })

    it('oidc: each of OIDCDiscoveryURL, OIDCClientID, OIDCClientSecret and AllowedRedirectURIs is required', async () => {
      for (const key of ['OIDCDiscoveryURL', 'OIDCClientID', 'OIDCClientSecret', 'AllowedRedirectURIs']) {
        const config = oidcConfig()
        delete config[key]
        await expectRejected({ Name: unique('oidc'), Type: 'oidc', MaxTokenTTL: '10m', Config: config }, new RegExp(key))
      }
    })

    it('oidc: a missing or zero MaxTokenTTL is a 400 naming MaxTokenTTL', async () => {
      await expectRejected({ Name: unique('oidc'), Type: 'oidc', Config: oidcConfig() }, 'MaxTokenTTL')
      await expectRejected({ Name: unique('oidc'), Type: 'oidc', MaxTokenTTL: '0s', Config: oidcConfig() }, 'MaxTokenTTL')
    })

    it('an unknown Type is a 400 listing the valid types', async () => {
      const response = await expectRejected({ Name: unique('bogus'), Type: 'ldap', Config: {} }, 'Type')
      for (const type of ['kubernetes', 'jwt', 'oidc']) expect(response.body.Error).to.include(type)
    })

    it('Type is required', async () => {
      await expectRejected({ Name: unique('notype'), Config: kubernetesConfig() }, 'Type')
    })

    it('Config is required', async () => {
      await expectRejected({ Name: unique('noconfig'), Type: 'jwt' }, 'Config')
    })

    it('an unknown Config key is a 400 naming the key', async () => {
      await expectRejected({ Name: unique('extra'), Type: 'kubernetes', Config: { ...kubernetesConfig(), Colour: 'blue' } }, /Colour/)
      await expectRejected({ Name: unique('extra'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks', Host: 'https://x' } }, /Host/)
    })

    it('a Config key named like an inherited property (constructor, __proto__, toString, hasOwnProperty) is a 400 naming it as unknown', async () => {
      for (const key of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
        const name = unique('inherited')
        // Raw JSON: an object literal's __proto__ would set its prototype instead of sending the key.
        const raw = `{"Name":${JSON.stringify(name)},"Type":"jwt","Config":{"JWKSURL":"https://issuer.example.com/jwks",${JSON.stringify(key)}:"x"}}`
        const response = await agent.request('PUT', '/v1/acl/auth-method', { raw, headers: { 'Content-Type': 'application/json' } })
        expectError(response, 400, 'invalid_input', `Config.${key}`)
        expect(response.body.Error, key).to.include('is not a known setting')
        expect(await methodNames('?ns=*')).to.not.include(name)
      }
    })

    it('MaxTokenTTL outside 1m to 24h is a 400', async () => {
      await expectRejected({ Name: unique('ttl'), Type: 'jwt', MaxTokenTTL: '30s', Config: { JWKSURL: 'https://issuer.example.com/jwks' } }, 'MaxTokenTTL')
      await expectRejected({ Name: unique('ttl'), Type: 'jwt', MaxTokenTTL: '25h', Config: { JWKSURL: 'https://issuer.example.com/jwks' } }, 'MaxTokenTTL')
      await expectRejected({ Name: unique('ttl'), Type: 'jwt', MaxTokenTTL: 'forever', Config: { JWKSURL: 'https://issuer.example.com/jwks' } }, 'MaxTokenTTL')
    })

    it('TokenLocality is "", local or global; anything else is a 400', async () => {
      const local = await createMethod({ Name: unique('loc'), Type: 'jwt', TokenLocality: 'local', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      expect(local.TokenLocality).to.equal('local')
      const global = await createMethod({ Name: unique('glob'), Type: 'jwt', TokenLocality: 'global', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      expect(global.TokenLocality).to.equal('global')
      await expectRejected({ Name: unique('loc'), Type: 'jwt', TokenLocality: 'everywhere', Config: { JWKSURL: 'https://issuer.example.com/jwks' } }, 'TokenLocality')
    })

    it('DisplayName and Description are stored', async () => {
      const method = await createMethod({ Name: unique('shown'), Type: 'jwt', DisplayName: 'Corporate SSO', Description: 'the one', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      const read = await agent.request('GET', `/v1/acl/auth-method/${method.Name}`)
      expect(read.body).to.include({ DisplayName: 'Corporate SSO', Description: 'the one' })
    })
  })

  describe('names and bodies', () => {
    it('Name is required', async () => {
      await expectRejected({ Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } }, 'Name')
    })

    it('Name allows only alphanumerics, "-" and "_"', async () => {
      await expectRejected({ Name: `bad.name.${process.pid}`, Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } }, 'Name')
    })

    it('names are unique: a second method with the same name is a 400', async () => {
      const name = unique('dup')
      await createMethod({ Name: name, Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      const response = await agent.request('PUT', '/v1/acl/auth-method', { body: { Name: name, Type: 'kubernetes', Config: kubernetesConfig() } })
      expectError(response, 400, 'invalid_input', 'Name')
      expect((await agent.request('GET', `/v1/acl/auth-method/${name}`)).body.Type).to.equal('jwt')
    })

    it('an unknown field or a wrong type is a 400 naming the field', async () => {
      await expectRejected({ Name: unique('shape'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' }, Rules: '' }, 'Rules')
      await expectRejected({ Name: unique('shape'), Type: 'jwt', Config: 'JWKSURL=https://x' }, 'Config')
      await expectRejected({ Name: unique('shape'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' }, Description: 5 }, 'Description')
    })

    it('malformed JSON and a body over 1 MiB are rejected and nothing is written', async () => {
      const before = await methodNames('?ns=*')
      expectError(await agent.request('PUT', '/v1/acl/auth-method', { raw: '{"Name":"x","Type":', headers: { 'Content-Type': 'application/json' } }), 400, 'invalid_input')
      const big = await agent.request('PUT', '/v1/acl/auth-method', {
        body: { Name: unique('big'), Type: 'jwt', Description: 'd'.repeat(1024 * 1024 + 1), Config: { JWKSURL: 'https://issuer.example.com/jwks' } },
      })
      expectError(big, 413, 'payload_too_large')
      expect(await methodNames('?ns=*')).to.deep.equal(before)
    })
  })

  describe('read and list', () => {
    it('read by name returns the method with its Config', async () => {
      const created = await createMethod({ Name: unique('read'), Type: 'kubernetes', Config: kubernetesConfig() })
      const read = await agent.request('GET', `/v1/acl/auth-method/${created.Name}`)
      expect(read.status, read.text).to.equal(200)
      expect(read.body).to.deep.equal(created)
    })

    it('read of a missing name is a 404 not_found', async () => {
      expectError(await agent.request('GET', `/v1/acl/auth-method/${unique('missing')}`), 404, 'not_found')
    })

    it('list returns the methods without Config', async () => {
      const created = await createMethod({ Name: unique('listed'), Type: 'jwt', Description: 'listed', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      const response = await agent.request('GET', '/v1/acl/auth-methods')
      expect(response.status, response.text).to.equal(200)
      const list = response.body as Array<Record<string, unknown>>
      expect(list.find((method) => method.Name === created.Name)).to.include({ Type: 'jwt', Description: 'listed', CreateIndex: created.CreateIndex })
      for (const method of list) expect(method).to.not.have.property('Config')
    })
  })

  describe('update', () => {
    it('update replaces the method: omitted optional fields take their defaults; Type absent is filled in', async () => {
      const created = await createMethod({ Name: unique('upd'), Type: 'jwt', Description: 'old', DisplayName: 'Old', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      const updated = await agent.request('PUT', `/v1/acl/auth-method/${created.Name}`, { body: { Config: { OIDCDiscoveryURL: 'https://issuer.example.com/' } } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.Type).to.equal('jwt')
      expect(updated.body.Name).to.equal(created.Name)
      expect(updated.body.Description ?? '').to.equal('')
      expect(updated.body.DisplayName ?? '').to.equal('')
      expect(updated.body.Config).to.deep.equal({ OIDCDiscoveryURL: 'https://issuer.example.com/' })
    })

    it('a read method sent back as the update body (read-modify-write) is accepted; indexes in it are ignored', async () => {
      const created = await createMethod({ Name: unique('rmw'), Type: 'kubernetes', Config: kubernetesConfig() })
      const read = await agent.request('GET', `/v1/acl/auth-method/${created.Name}`)
      const updated = await agent.request('PUT', `/v1/acl/auth-method/${created.Name}`, { body: { ...read.body, Description: 'rmw', CreateIndex: 1, ModifyIndex: 1 } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.Description).to.equal('rmw')
      expect(updated.body.Config).to.deep.equal(kubernetesConfig())
      expect(updated.body.CreateIndex).to.equal(created.CreateIndex)
    })

    it('update raises ModifyIndex and keeps CreateIndex', async () => {
      const created = await createMethod({ Name: unique('idx'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      const updated = await agent.request('PUT', `/v1/acl/auth-method/${created.Name}`, { body: { Type: 'jwt', Description: 'new', Config: { JWKSURL: 'https://issuer.example.com/jwks' } } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.ModifyIndex).to.be.above(created.ModifyIndex)
      expect(updated.body.CreateIndex).to.equal(created.CreateIndex)
    })

    it('a body Name that differs from the path is a 400 naming Name', async () => {
      const created = await createMethod({ Name: unique('nm'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      const response = await agent.request('PUT', `/v1/acl/auth-method/${created.Name}`, { body: { Name: unique('other'), Config: { JWKSURL: 'https://issuer.example.com/jwks' } } })
      expectError(response, 400, 'invalid_input', 'Name')
      expect((await agent.request('GET', `/v1/acl/auth-method/${created.Name}`)).body.ModifyIndex).to.equal(created.ModifyIndex)
    })

    it('Type is immutable: a different Type is a 400 naming Type', async () => {
      const created = await createMethod({ Name: unique('ty'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      const response = await agent.request('PUT', `/v1/acl/auth-method/${created.Name}`, { body: { Type: 'kubernetes', Config: kubernetesConfig() } })
      expectError(response, 400, 'invalid_input', 'Type')
      expect((await agent.request('GET', `/v1/acl/auth-method/${created.Name}`)).body.Type).to.equal('jwt')
    })

    it('Config is required on update', async () => {
      const created = await createMethod({ Name: unique('cfg'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      expectError(await agent.request('PUT', `/v1/acl/auth-method/${created.Name}`, { body: { Description: 'x' } }), 400, 'invalid_input', 'Config')
    })

    it('Config is validated on update as on create', async () => {
      const created = await createMethod({ Name: unique('val'), Type: 'kubernetes', Config: kubernetesConfig() })
      const response = await agent.request('PUT', `/v1/acl/auth-method/${created.Name}`, { body: { Config: { ...kubernetesConfig(), Host: 'nope' } } })
      expectError(response, 400, 'invalid_input', /Host/)
      expect((await agent.request('GET', `/v1/acl/auth-method/${created.Name}`)).body.Config).to.deep.equal(kubernetesConfig())
    })

    it('update of a method that does not exist is a 4xx and creates nothing', async () => {
      const name = unique('ghost')
      const response = await agent.request('PUT', `/v1/acl/auth-method/${name}`, { body: { Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } } })
      expect(response.status, response.text).to.be.within(400, 499)
      expect(response.body.Code).to.be.a('string')
      expect((await agent.request('GET', `/v1/acl/auth-method/${name}`)).status).to.equal(404)
    })
  })

  describe('delete', () => {
    it('delete answers JSON true and the method is gone', async () => {
      const created = await createMethod({ Name: unique('del'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      const response = await agent.request('DELETE', `/v1/acl/auth-method/${created.Name}`)
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.equal(true)
      expectError(await agent.request('GET', `/v1/acl/auth-method/${created.Name}`), 404, 'not_found')
    })

    it('delete of a method that never existed answers true', async () => {
      const response = await agent.request('DELETE', `/v1/acl/auth-method/${unique('never')}`)
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.equal(true)
    })

    it('deleting an auth method deletes its binding rules, and only its own', async () => {
      const doomed = await createMethod({ Name: unique('doomed'), Type: 'kubernetes', Config: kubernetesConfig() })
      const kept = await createMethod({ Name: unique('kept'), Type: 'kubernetes', Config: kubernetesConfig() })
      const rule = async (method: string): Promise<string> => {
        const response = await agent.request('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: method, BindType: 'service', BindName: 'web' } })
        expect(response.status, response.text).to.equal(200)
        return response.body.ID
      }
      const doomedRules = [await rule(doomed.Name), await rule(doomed.Name)]
      const keptRule = await rule(kept.Name)
      const response = await agent.request('DELETE', `/v1/acl/auth-method/${doomed.Name}`)
      expect(response.body).to.equal(true)
      for (const id of doomedRules) expectError(await agent.request('GET', `/v1/acl/binding-rule/${id}`), 404, 'not_found')
      const remaining = await agent.request('GET', `/v1/acl/binding-rules?authmethod=${doomed.Name}`)
      expect(remaining.body).to.deep.equal([])
      expect((await agent.request('GET', `/v1/acl/binding-rule/${keptRule}`)).status).to.equal(200)
    })
  })

  describe('authorization', () => {
    it('without a token, reads and writes are 403 permission_denied', async () => {
      const name = unique('anon')
      expectError(await agent.request('GET', '/v1/acl/auth-methods', { token: null }), 403, 'permission_denied')
      expectError(await agent.request('PUT', '/v1/acl/auth-method', { token: null, body: { Name: name, Type: 'jwt', Config: { JWKSURL: 'https://x.example.com/j' } } }), 403, 'permission_denied')
      expect(await methodNames()).to.not.include(name)
    })

    it('an acl:read token may list and read methods but not write them', async () => {
      const created = await createMethod({ Name: unique('readable'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      expect((await agent.request('GET', '/v1/acl/auth-methods', { token: readToken })).status).to.equal(200)
      expect((await agent.request('GET', `/v1/acl/auth-method/${created.Name}`, { token: readToken })).status).to.equal(200)
      const name = unique('readerwrite')
      expectError(await agent.request('PUT', '/v1/acl/auth-method', { token: readToken, body: { Name: name, Type: 'jwt', Config: { JWKSURL: 'https://x.example.com/j' } } }), 403, 'permission_denied')
      expectError(await agent.request('DELETE', `/v1/acl/auth-method/${created.Name}`, { token: readToken }), 403, 'permission_denied')
      expect(await methodNames()).to.include(created.Name).and.not.include(name)
    })
  })

  describe('namespaces', () => {
    it('names are unique per namespace: the same name may exist in another namespace', async () => {
      const name = unique('shared')
      const inDefault = await createMethod({ Name: name, Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      const inOther = await createMethod({ Name: name, Type: 'kubernetes', Namespace: 'methods-ns', Config: kubernetesConfig() })
      expect(inDefault.Namespace ?? 'default').to.equal('default')
      expect(inOther.Namespace).to.equal('methods-ns')
      expect((await agent.request('GET', `/v1/acl/auth-method/${name}?ns=methods-ns`)).body.Type).to.equal('kubernetes')
      expect((await agent.request('GET', `/v1/acl/auth-method/${name}`)).body.Type).to.equal('jwt')
    })

    it('a list is scoped to one namespace; ns=* lists all', async () => {
      const a = await createMethod({ Name: unique('scoped'), Type: 'jwt', Namespace: 'methods-a', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      const b = await createMethod({ Name: unique('scoped'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/jwks' } })
      expect(await methodNames('?ns=methods-a')).to.deep.equal([a.Name])
      expect(await methodNames('?ns=*')).to.include.members([a.Name, b.Name])
      expect(await methodNames()).to.include(b.Name).and.not.include(a.Name)
    })
  })
})
