/**
 * Consul's header names beside the contract's (src/http/headers.ts), from outside: a real agent, requests that carry
 * only Consul's `X-Consul-Token` or `X-Consul-Namespace`, requests that carry both names with different values (the
 * contract's `X-Service-*` must win), and responses, whose every `X-Service-*` header must come with its `X-Consul-*`
 * twin holding the same value, on reads, writes and errors alike.
 */
import { expect } from 'chai'
import { exportSPKI, SignJWT } from 'jose'
import { startAgent, type AgentProcess, type ApiResponse } from '../support/agent.js'
import { expectError, MISSING_ID, unique } from '../support/api.js'
import { keyPair, type KeyPair } from '../support/identity-doubles.js'

const TWINS = ['Index', 'KnownLeader', 'LastContact', 'Effective-Consistency', 'Default-ACL-Policy', 'Results-Filtered-By-ACLs']

/** Every response header pair: the contract's and Consul's name carry the same value, or are both absent. */
function expectTwins(response: ApiResponse): void {
  for (const name of TWINS) {
    expect(response.headers.get(`x-consul-${name}`), `X-Consul-${name}`).to.equal(response.headers.get(`x-service-${name}`))
  }
}

describe('Consul header aliases: X-Consul-Token, X-Consul-Namespace and the X-Consul-* response headers', function () {
  this.timeout(30_000)
  let agent: AgentProcess
  let signing: KeyPair

  before(async () => {
    agent = await startAgent()
    signing = await keyPair('k')
  })
  after(async () => {
    await agent.stop()
  })

  /** A token holding only `rules`, created with the management token. */
  async function secretWithRules(rules: string): Promise<string> {
    const policy = await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('rules'), Rules: rules } })
    expect(policy.status, policy.text).to.equal(200)
    const token = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.body.ID }] } })
    expect(token.status, token.text).to.equal(200)
    return token.body.SecretID
  }

  describe('request headers', () => {
    it('X-Consul-Token alone authorizes a request as X-Service-Token does', async () => {
      const self = await agent.request('GET', '/v1/acl/token/self', { token: null, headers: { 'X-Consul-Token': agent.managementToken } })
      expect(self.status, self.text).to.equal(200)
      expect(self.body.SecretID).to.equal(agent.managementToken)
      const policies = await agent.request('GET', '/v1/acl/policies', { token: null, headers: { 'X-Consul-Token': agent.managementToken } })
      expect(policies.status, policies.text).to.equal(200)
      const write = await agent.request('PUT', '/v1/acl/policy', { token: null, headers: { 'X-Consul-Token': agent.managementToken }, body: { Name: unique('consul-token') } })
      expect(write.status, write.text).to.equal(200)
      // The same request with no token at all is refused: the alias is what authorized it.
      expectError(await agent.request('GET', '/v1/acl/policies', { token: null }), 403, 'permission_denied')
    })

    it('an unknown secret under X-Consul-Token is refused as under X-Service-Token (403 acl_not_found)', async () => {
      expectError(await agent.request('GET', '/v1/acl/token/self', { token: null, headers: { 'X-Consul-Token': MISSING_ID } }), 403, 'acl_not_found')
    })

    it('where both token headers are sent, X-Service-Token wins', async () => {
      const contractWins = await agent.request('GET', '/v1/acl/token/self', { token: agent.managementToken, headers: { 'X-Consul-Token': MISSING_ID } })
      expect(contractWins.status, contractWins.text).to.equal(200)
      expect(contractWins.body.SecretID).to.equal(agent.managementToken)
      const unknownWins = await agent.request('GET', '/v1/acl/token/self', { token: MISSING_ID, headers: { 'X-Consul-Token': agent.managementToken } })
      expectError(unknownWins, 403, 'acl_not_found')
    })

    it('?token= still comes before either header', async () => {
      const response = await agent.request('GET', `/v1/acl/token/self?token=${agent.managementToken}`, { token: null, headers: { 'X-Consul-Token': MISSING_ID } })
      expect(response.status, response.text).to.equal(200)
      expect(response.body.SecretID).to.equal(agent.managementToken)
    })

    it('X-Consul-Namespace alone selects the namespace of a list and of a create', async () => {
      const name = unique('in-team')
      const created = await agent.request('PUT', '/v1/acl/policy', { body: { Name: name }, headers: { 'X-Consul-Namespace': 'consul-team' } })
      expect(created.status, created.text).to.equal(200)
      expect(created.body.Namespace).to.equal('consul-team')
      const inTeam = await agent.request('GET', '/v1/acl/policies', { headers: { 'X-Consul-Namespace': 'consul-team' } })
      expect(inTeam.body.map((policy: { Name: string }) => policy.Name)).to.deep.equal([name])
      const inDefault = await agent.request('GET', '/v1/acl/policies')
      expect(inDefault.body.map((policy: { Name: string }) => policy.Name)).to.not.include(name)
    })

    it('where both namespace headers are sent, X-Service-Namespace wins', async () => {
      const name = unique('contract-ns')
      const created = await agent.request('PUT', '/v1/acl/policy', { body: { Name: name }, headers: { 'X-Service-Namespace': 'contract-ns', 'X-Consul-Namespace': 'consul-ns' } })
      expect(created.status, created.text).to.equal(200)
      expect(created.body.Namespace).to.equal('contract-ns')
      const listed = await agent.request('GET', '/v1/acl/policies', { headers: { 'X-Service-Namespace': 'contract-ns', 'X-Consul-Namespace': 'consul-ns' } })
      expect(listed.body.map((policy: { Name: string }) => policy.Name)).to.deep.equal([name])
    })

    it('a malformed X-Consul-Namespace is a 400 that names the header sent', async () => {
      expectError(await agent.request('GET', '/v1/acl/policies', { headers: { 'X-Consul-Namespace': 'no spaces' } }), 400, 'invalid_input', 'X-Consul-Namespace')
      expectError(await agent.request('GET', '/v1/acl/policies', { headers: { 'X-Service-Namespace': 'no spaces', 'X-Consul-Namespace': 'fine' } }), 400, 'invalid_input', 'X-Service-Namespace')
    })

    it('login finds its auth method through X-Consul-Namespace, and logout takes the token from X-Consul-Token', async () => {
      const method = unique('consul-jwt')
      const config = { JWTValidationPubKeys: [await exportSPKI(signing.publicKey)], BoundAudiences: ['warden'], ClaimMappings: { sub: 'name' } }
      const created = await agent.request('PUT', '/v1/acl/auth-method', { body: { Name: method, Type: 'jwt', Config: config, Namespace: 'login-team' } })
      expect(created.status, created.text).to.equal(200)
      const rule = await agent.request('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: method, BindType: 'service', BindName: 'web', Namespace: 'login-team' } })
      expect(rule.status, rule.text).to.equal(200)
      const now = Math.floor(Date.now() / 1000)
      const bearer = await new SignJWT({ sub: 'alice', aud: 'warden', iat: now, exp: now + 300 }).setProtectedHeader({ alg: 'RS256' }).sign(signing.privateKey)
      const body = { AuthMethod: method, BearerToken: bearer }
      // In the default namespace there is no such method.
      expectError(await agent.request('POST', '/v1/acl/login', { token: null, body }), 403, 'acl_not_found')
      const login = await agent.request('POST', '/v1/acl/login', { token: null, body, headers: { 'X-Consul-Namespace': 'login-team' } })
      expect(login.status, login.text).to.equal(200)
      expect(login.body.AuthMethod).to.equal(method)
      expect(login.body.ServiceIdentities).to.deep.equal([{ ServiceName: 'web' }])
      const logout = await agent.request('POST', '/v1/acl/logout', { token: null, headers: { 'X-Consul-Token': login.body.SecretID } })
      expect(logout.status, logout.text).to.equal(200)
      expect(logout.body).to.equal(true)
      expectError(await agent.request('GET', `/v1/acl/token/${login.body.AccessorID}`), 404, 'not_found')
    })
  })

  describe('response headers', () => {
    it('a read carries every X-Service-* header with its X-Consul-* twin, equal in value', async () => {
      const response = await agent.request('GET', '/v1/acl/policies')
      expect(response.status).to.equal(200)
      expectTwins(response)
      expect(Number(response.headers.get('x-consul-index'))).to.be.above(0)
      expect(response.headers.get('x-consul-knownleader')).to.equal('true')
      expect(response.headers.get('x-consul-lastcontact')).to.equal('0')
      expect(response.headers.get('x-consul-effective-consistency')).to.equal('leader')
      expect(response.headers.get('x-consul-default-acl-policy')).to.equal('deny')
      const stale = await agent.request('GET', '/v1/acl/policies?stale')
      expectTwins(stale)
      expect(stale.headers.get('x-consul-effective-consistency')).to.equal('stale')
      const consistent = await agent.request('GET', '/v1/acl/policies?consistent')
      expectTwins(consistent)
      expect(consistent.headers.get('x-consul-effective-consistency')).to.equal('consistent')
    })

    it('a list that left entries out says so under both names', async () => {
      const kind = 'service-router'
      for (const name of ['twin-visible', 'twin-hidden']) {
        const written = await agent.request('PUT', '/v1/config', { body: { Kind: kind, Name: name } })
        expect(written.status, written.text).to.equal(200)
      }
      const token = await secretWithRules('service "twin-visible" { policy = "read" }')
      const filtered = await agent.request('GET', `/v1/config/${kind}`, { token: null, headers: { 'X-Consul-Token': token } })
      expect(filtered.body.map((entry: { Name: string }) => entry.Name)).to.deep.equal(['twin-visible'])
      expect(filtered.headers.get('x-consul-results-filtered-by-acls')).to.equal('true')
      expectTwins(filtered)
      const whole = await agent.request('GET', `/v1/config/${kind}`)
      expect(whole.headers.get('x-consul-results-filtered-by-acls')).to.equal(null)
      expectTwins(whole)
    })

    it('writes, errors and unknown paths carry X-Consul-Default-ACL-Policy beside X-Service-Default-ACL-Policy', async () => {
      const write = await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('twin-write') } })
      const denied = await agent.request('GET', '/v1/acl/policies', { token: null })
      const unknown = await agent.request('GET', '/v1/no/such/path')
      for (const response of [write, denied, unknown]) {
        expect(response.headers.get('x-consul-default-acl-policy')).to.equal('deny')
        expectTwins(response)
      }
    })

    it('a blocking query takes the index X-Consul-Index gave, and wakes on a change with a higher one', async () => {
      const first = await agent.request('GET', '/v1/acl/roles', { token: null, headers: { 'X-Consul-Token': agent.managementToken } })
      const index = first.headers.get('x-consul-index')
      expect(index).to.equal(first.headers.get('x-service-index'))
      const started = Date.now()
      const waiting = agent.request('GET', `/v1/acl/roles?index=${index}&wait=10s`, { token: null, headers: { 'X-Consul-Token': agent.managementToken } })
      await new Promise((resolve) => setTimeout(resolve, 200))
      const role = await agent.request('PUT', '/v1/acl/role', { body: { Name: unique('wake') } })
      expect(role.status, role.text).to.equal(200)
      const woken = await waiting
      expect(Date.now() - started).to.be.below(5_000)
      expect(Number(woken.headers.get('x-consul-index'))).to.be.above(Number(index))
      expect(woken.body.map((entry: { Name: string }) => entry.Name)).to.include(role.body.Name)
      expectTwins(woken)
    })
  })
})
