/**
 * Login through an aws-iam auth method, from outside. The agent is real; STS and IAM are stand-ins on loopback that
 * the methods name as STSEndpoint and IAMEndpoint (warden keeps the signed Host header and path when it sends there),
 * and answer as AWS does, in XML. The client's signed requests are built here: what the stand-in answers depends on
 * the X-Amz-Security-Token they carry, standing for whose credentials signed them. What the tests check is warden's
 * side: which requests it forwards and which it refuses without asking, and what identity it takes from the answers.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError } from '../support/api.js'
import { startDouble, type Double } from '../support/identity-doubles.js'

const ACCOUNT = '123456789012'
const STS_BODY = 'Action=GetCallerIdentity&Version=2011-06-15'

/** Whose credentials a request was signed with (its X-Amz-Security-Token) and what STS says of them. */
const CALLERS: Record<string, { arn: string; userId: string }> = {
  'web-session': { arn: `arn:aws:sts::${ACCOUNT}:assumed-role/web-role/i-0abc`, userId: 'AROAWEB:i-0abc' },
  'alice-keys': { arn: `arn:aws:iam::${ACCOUNT}:user/alice`, userId: 'AIDAALICE' },
  'other-session': { arn: `arn:aws:sts::${ACCOUNT}:assumed-role/other-role/i-0def`, userId: 'AROAOTHER:i-0def' },
  // An assumed role's UserId is the role's ID and the session name (what STS answers).
  'api-session': { arn: `arn:aws:sts::${ACCOUNT}:assumed-role/api/i-0123`, userId: 'AROAAPI:i-0123' },
}

/** iam:GetRole answers, by role name. */
const ROLES: Record<string, { arn: string; path: string; roleId: string; tags: Record<string, string> }> = {
  api: { arn: `arn:aws:iam::${ACCOUNT}:role/apps/api`, path: '/apps/', roleId: 'AROAAPI', tags: { team: 'payments', cost: 'x&y' } },
  impostor: { arn: `arn:aws:iam::${ACCOUNT}:role/apps/impostor`, path: '/apps/', roleId: 'AROAIMPOSTOR', tags: { team: 'root' } },
}

interface SignedRequest {
  url?: string
  method?: string
  body?: string
  headers?: Record<string, string[]>
}

const base64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64')

/** A signed request's headers: SigV4's, with the names in `signed` (lower case) listed as signed. */
function signedHeaders(securityToken: string, extra: Record<string, string[]> = {}, signed: string[] = []): Record<string, string[]> {
  const names = ['content-type', 'host', 'x-amz-date', 'x-amz-security-token', ...signed].sort().join(';')
  return {
    Authorization: [`AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20261121/us-east-1/sts/aws4_request, SignedHeaders=${names}, Signature=00ff`],
    'Content-Type': ['application/x-www-form-urlencoded; charset=utf-8'],
    'X-Amz-Date': ['20261121T150000Z'],
    'X-Amz-Security-Token': [securityToken],
    ...extra,
  }
}

function bearerToken(request: SignedRequest): string {
  return JSON.stringify({
    iam_http_request_method: request.method ?? 'POST',
    iam_request_url: base64(request.url ?? 'https://sts.amazonaws.com/'),
    iam_request_headers: base64(JSON.stringify(request.headers ?? signedHeaders('web-session'))),
    iam_request_body: base64(request.body ?? STS_BODY),
  })
}

const escapeXml = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

describe('login through aws-iam auth methods', function () {
  this.timeout(30_000)
  let agent: AgentProcess
  let aws: Double
  /** What reached the stand-in: the Host each request was signed for, its path and body. */
  const received: Array<{ host: unknown; path: string; body: unknown }> = []
  /** Headers of the last request that reached the stand-in. */
  let lastHeaders: Record<string, unknown> = {}

  function login(method: string, token: string) {
    return agent.request('POST', '/v1/acl/login', { token: null, body: { AuthMethod: method, BearerToken: token } })
  }

  async function put(path: string, body: unknown): Promise<any> {
    const response = await agent.request('PUT', path, { body })
    expect(response.status, `${path}: ${response.text}`).to.equal(200)
    return response.body
  }

  before(async () => {
    aws = await startDouble(undefined, (method, path, body, headers) => {
      received.push({ host: headers.host, path, body })
      lastHeaders = headers
      const caller = CALLERS[String(headers['x-amz-security-token'] ?? '')]
      const xml = (text: string) => ({ status: 200, contentType: 'text/xml', body: text })
      if (method !== 'POST' || caller === undefined) {
        return { status: 403, contentType: 'text/xml', body: '<ErrorResponse><Error><Code>InvalidClientTokenId</Code></Error></ErrorResponse>' }
      }
      if (body?.Action === 'GetCallerIdentity') {
        return xml(
          `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>${caller.arn}</Arn>` +
            `<UserId>${caller.userId}</UserId><Account>${ACCOUNT}</Account></GetCallerIdentityResult></GetCallerIdentityResponse>`,
        )
      }
      const role = ROLES[String(body?.RoleName ?? '')]
      if (body?.Action === 'GetRole' && role !== undefined) {
        const tags = Object.entries(role.tags).map(([key, value]) => `<member><Key>${key}</Key><Value>${escapeXml(value)}</Value></member>`).join('')
        return xml(
          `<GetRoleResponse><GetRoleResult><Role><Path>${role.path}</Path><Arn>${role.arn}</Arn><RoleName>${String(body.RoleName)}</RoleName>` +
            `<RoleId>${role.roleId}</RoleId><Tags>${tags}</Tags></Role></GetRoleResult></GetRoleResponse>`,
        )
      }
      return { status: 400, contentType: 'text/xml', body: '<ErrorResponse><Error><Code>InvalidAction</Code></Error></ErrorResponse>' }
    })
    agent = await startAgent()
    await put('/v1/acl/auth-method', {
      Name: 'aws',
      Type: 'aws-iam',
      Config: {
        BoundIAMPrincipalARNs: [`arn:aws:iam::${ACCOUNT}:role/web-role`, `arn:aws:iam::${ACCOUNT}:user/alice`],
        STSEndpoint: aws.url,
        ServerIDHeaderValue: 'warden.test',
      },
    })
    await put('/v1/acl/binding-rule', { AuthMethod: 'aws', BindType: 'service', BindName: '${entity_name}', Selector: `account_id == "${ACCOUNT}"` })
    await put('/v1/acl/auth-method', {
      Name: 'aws-details',
      Type: 'aws-iam',
      Config: {
        BoundIAMPrincipalARNs: [`arn:aws:iam::${ACCOUNT}:role/apps/*`],
        EnableIAMEntityDetails: true,
        IAMEntityTags: ['team'],
        STSEndpoint: aws.url,
        IAMEndpoint: aws.url,
      },
    })
    await put('/v1/acl/binding-rule', { AuthMethod: 'aws-details', BindType: 'service', BindName: 'svc-${entity_tags.team}', Selector: 'entity_path == "/apps/"' })
    await put('/v1/acl/auth-method', { Name: 'aws-public', Type: 'aws-iam', Config: { BoundIAMPrincipalARNs: [`arn:aws:iam::${ACCOUNT}:role/web-role`] } })
  })

  after(async () => {
    await agent?.stop()
    await aws?.close()
  })

  const serverId = (token: string, extra: Record<string, string[]> = {}) =>
    signedHeaders(token, { 'X-Service-IAM-ServerID': ['warden.test'], ...extra }, ['x-service-iam-serverid'])

  it("logs in as the role of an assumed-role session, STS having been asked with the request's own Host and path", async () => {
    const before = received.length
    const response = await login('aws', bearerToken({ headers: serverId('web-session') }))
    expect(response.status, response.text).to.equal(200)
    expect(response.body.ServiceIdentities).to.deep.equal([{ ServiceName: 'web-role' }])
    expect(response.body.AuthMethod).to.equal('aws')
    expect(received.slice(before)).to.deep.equal([{ host: 'sts.amazonaws.com', path: '/', body: { Action: 'GetCallerIdentity', Version: '2011-06-15' } }])
  })

  it('logs in as an IAM user, and refuses a principal the method does not trust without naming those it does', async () => {
    const alice = await login('aws', bearerToken({ headers: serverId('alice-keys') }))
    expect(alice.status, alice.text).to.equal(200)
    expect(alice.body.ServiceIdentities).to.deep.equal([{ ServiceName: 'alice' }])
    const other = await login('aws', bearerToken({ headers: serverId('other-session') }))
    expectError(other, 403, 'permission_denied')
    expect(other.body.Error).to.include('not one this auth method trusts').and.not.include('web-role')
    // STS refusing the signature (unknown credentials here) is a refusal too.
    expectError(await login('aws', bearerToken({ headers: serverId('stolen') })), 403, 'permission_denied')
  })

  it('checks the server ID it sends: two spellings of the header are one header, and only signed headers go out', async () => {
    // Go's http.Header merges spellings; Node would send the last one. Merged, "warden.test,dev" is not the server ID.
    const twice = serverId('web-session', { 'x-service-iam-serverid': ['dev'] })
    expectError(await login('aws', bearerToken({ headers: twice })), 403, 'permission_denied')
    const decoy = { ...serverId('web-session'), authorization: ['AWS4-HMAC-SHA256 SignedHeaders=x-service-iam-serverid, Signature=00'] }
    expectError(await login('aws', bearerToken({ headers: decoy })), 403, 'permission_denied')
    // Unsigned extras, framing headers above all, never reach STS.
    const extras = serverId('web-session', { 'Transfer-Encoding': ['chunked'], 'X-Unsigned': ['1'] })
    const response = await login('aws', bearerToken({ headers: extras }))
    expect(response.status, response.text).to.equal(200)
    expect(lastHeaders).to.not.have.property('x-unsigned')
    expect(lastHeaders['transfer-encoding']).to.equal(undefined)
    expect(lastHeaders['x-service-iam-serverid']).to.equal('warden.test')
  })

  /** A 403 whose message names each of `fragments`. */
  function expectRefused(response: Awaited<ReturnType<typeof login>>, ...fragments: string[]): void {
    expectError(response, 403, 'permission_denied')
    for (const fragment of fragments) expect(response.body.Error, response.text).to.include(fragment)
  }

  describe("Consul's X-Consul-IAM-* names of the headers", () => {
    /** The server ID under Consul's name, signed as `consul login -type aws-iam` signs it. */
    const consulServerId = (token: string, value = 'warden.test', extra: Record<string, string[]> = {}) =>
      signedHeaders(token, { 'X-Consul-IAM-ServerID': [value], ...extra }, ['x-consul-iam-serverid'])

    it('logs in with X-Consul-IAM-ServerID signed, and sends it to STS', async () => {
      const before = received.length
      const response = await login('aws', bearerToken({ headers: consulServerId('web-session') }))
      expect(response.status, response.text).to.equal(200)
      expect(response.body.ServiceIdentities).to.deep.equal([{ ServiceName: 'web-role' }])
      expect(received.slice(before)).to.have.length(1)
      expect(lastHeaders['x-consul-iam-serverid']).to.equal('warden.test')
    })

    it('refuses X-Consul-IAM-ServerID unsigned or with another value, naming it; with neither name, names both', async () => {
      const before = received.length
      const unsigned = signedHeaders('web-session', { 'X-Consul-IAM-ServerID': ['warden.test'] })
      expectRefused(await login('aws', bearerToken({ headers: unsigned })), 'X-Consul-IAM-ServerID header was not signed')
      // Signed under the other name does not count: the name read is the name that must be signed.
      const otherSigned = signedHeaders('web-session', { 'X-Consul-IAM-ServerID': ['warden.test'] }, ['x-service-iam-serverid'])
      expectRefused(await login('aws', bearerToken({ headers: otherSigned })), 'X-Consul-IAM-ServerID header was not signed')
      const another = await login('aws', bearerToken({ headers: consulServerId('web-session', 'elsewhere') }))
      expectRefused(another, "X-Consul-IAM-ServerID is not this auth method's")
      expect(another.body.Error).to.not.include('elsewhere')
      expectRefused(await login('aws', bearerToken({ headers: signedHeaders('web-session') })), 'X-Service-IAM-ServerID', 'X-Consul-IAM-ServerID')
      expect(received.length, 'a refused request reached STS').to.equal(before)
    })

    it('with both names, X-Service-IAM-ServerID wins, its own signing included', async () => {
      const both = (service: string, consul: string, signed = ['x-consul-iam-serverid', 'x-service-iam-serverid']) =>
        bearerToken({ headers: signedHeaders('web-session', { 'X-Service-IAM-ServerID': [service], 'X-Consul-IAM-ServerID': [consul] }, signed) })
      const right = await login('aws', both('warden.test', 'elsewhere'))
      expect(right.status, right.text).to.equal(200)
      expect(right.body.ServiceIdentities).to.deep.equal([{ ServiceName: 'web-role' }])
      expectRefused(await login('aws', both('elsewhere', 'warden.test')), "X-Service-IAM-ServerID is not this auth method's")
      // X-Consul's signed and right, X-Service's unsigned: the one read is X-Service's, and it was not signed.
      expectRefused(await login('aws', both('warden.test', 'warden.test', ['x-consul-iam-serverid'])), 'X-Service-IAM-ServerID header was not signed')
    })

    /** The embedded iam:GetRole request under `prefix`'s header names (X-Service-IAM or X-Consul-IAM). */
    const entity = (prefix: string, roleName: string, embedded: Record<string, string[]> = signedHeaders('api-session')) => ({
      [`${prefix}-GetEntity-Method`]: ['POST'],
      [`${prefix}-GetEntity-URL`]: ['https://iam.amazonaws.com/'],
      [`${prefix}-GetEntity-Headers`]: [JSON.stringify(embedded)],
      [`${prefix}-GetEntity-Body`]: [`Action=GetRole&RoleName=${roleName}&Version=2010-05-08`],
    })

    it('reads the embedded entity request from the X-Consul-IAM-GetEntity-* headers; with both names, X-Service wins', async () => {
      const consul = await login('aws-details', bearerToken({ headers: signedHeaders('api-session', entity('X-Consul-IAM', 'api')) }))
      expect(consul.status, consul.text).to.equal(200)
      expect(consul.body.ServiceIdentities).to.deep.equal([{ ServiceName: 'svc-payments' }])
      expectRefused(await login('aws-details', bearerToken({ headers: signedHeaders('api-session', entity('X-Consul-IAM', 'impostor')) })), 'X-Consul-IAM-GetEntity-Body')
      // X-Service's names the caller's role, X-Consul's another: X-Service's is the one sent.
      const serviceWins = await login('aws-details', bearerToken({ headers: signedHeaders('api-session', { ...entity('X-Consul-IAM', 'impostor'), ...entity('X-Service-IAM', 'api') }) }))
      expect(serviceWins.status, serviceWins.text).to.equal(200)
      const consulLoses = await login('aws-details', bearerToken({ headers: signedHeaders('api-session', { ...entity('X-Consul-IAM', 'api'), ...entity('X-Service-IAM', 'impostor') }) }))
      expectRefused(consulLoses, "the role in X-Service-IAM-GetEntity-Body is not the caller's")
      // Each header is read under either name on its own; a refusal names the one it read.
      const mixed = { ...entity('X-Consul-IAM', 'api'), 'X-Service-IAM-GetEntity-URL': ['https://iam.evil.test/'] }
      expectRefused(await login('aws-details', bearerToken({ headers: signedHeaders('api-session', mixed) })), 'X-Service-IAM-GetEntity-URL is not')
      const { 'X-Consul-IAM-GetEntity-Method': _, ...noMethod } = entity('X-Consul-IAM', 'api')
      expectRefused(await login('aws-details', bearerToken({ headers: signedHeaders('api-session', noMethod) })), 'X-Service-IAM-GetEntity-Method (or X-Consul-IAM-GetEntity-Method)')
    })

    it("logs in with a request shaped as Consul's client signs it: server ID and entity request under Consul's names", async () => {
      await put('/v1/acl/auth-method', {
        Name: 'aws-consul',
        Type: 'aws-iam',
        Config: { BoundIAMPrincipalARNs: [`arn:aws:iam::${ACCOUNT}:role/apps/*`], EnableIAMEntityDetails: true, IAMEntityTags: ['team'], ServerIDHeaderValue: 'warden.test', STSEndpoint: aws.url, IAMEndpoint: aws.url },
      })
      await put('/v1/acl/binding-rule', { AuthMethod: 'aws-consul', BindType: 'service', BindName: 'svc-${entity_tags.team}', Selector: 'entity_path == "/apps/"' })
      const request = (embeddedServerId: string) =>
        bearerToken({ headers: consulServerId('api-session', 'warden.test', entity('X-Consul-IAM', 'api', consulServerId('api-session', embeddedServerId))) })
      const response = await login('aws-consul', request('warden.test'))
      expect(response.status, response.text).to.equal(200)
      expect(response.body.ServiceIdentities).to.deep.equal([{ ServiceName: 'svc-payments' }])
      expect(lastHeaders['x-consul-iam-serverid'], 'the embedded request went to IAM with its server ID').to.equal('warden.test')
      // The embedded request's server ID is checked as the outer one's.
      expectRefused(await login('aws-consul', request('elsewhere')), "X-Consul-IAM-ServerID is not this auth method's")
      const unsignedEmbedded = consulServerId('api-session', 'warden.test', entity('X-Consul-IAM', 'api', signedHeaders('api-session', { 'X-Consul-IAM-ServerID': ['warden.test'] })))
      expectRefused(await login('aws-consul', bearerToken({ headers: unsignedEmbedded })), 'X-Consul-IAM-ServerID header was not signed')
    })
  })

  it('refuses, without asking STS, a request that is not exactly a signed sts:GetCallerIdentity for this cluster', async () => {
    const before = received.length
    const cases: Array<[string, string]> = [
      ['not JSON', 'x.y.z'],
      ['GET', bearerToken({ method: 'GET', headers: serverId('web-session') })],
      ['another action', bearerToken({ body: 'Action=GetSessionToken&Version=2011-06-15', headers: serverId('web-session') })],
      ['an extra field', bearerToken({ body: `${STS_BODY}&DurationSeconds=900`, headers: serverId('web-session') })],
      ['the action twice', bearerToken({ body: `${STS_BODY}&Action=GetCallerIdentity`, headers: serverId('web-session') })],
      ['an X-Amz- header outside the signing ones', bearerToken({ headers: serverId('web-session', { 'X-Amz-Target': ['x'] }) })],
      ['no server ID', bearerToken({ headers: signedHeaders('web-session') })],
      ['another server ID', bearerToken({ headers: signedHeaders('web-session', { 'X-Service-IAM-ServerID': ['elsewhere'] }, ['x-service-iam-serverid']) })],
      ['an unsigned server ID', bearerToken({ headers: signedHeaders('web-session', { 'X-Service-IAM-ServerID': ['warden.test'] }) })],
    ]
    for (const [what, token] of cases) {
      const response = await login('aws', token)
      expect(response.status, `${what}: ${response.text}`).to.equal(403)
      expectError(response, 403, 'permission_denied')
    }
    // Only https://<an STS host>/ is contacted, with or without STSEndpoint.
    for (const url of ['https://sts.evil.test/', aws.url, 'http://sts.amazonaws.com/', 'https://sts.amazonaws.com:8443/', 'https://sts.amazonaws.com/x', 'https://sts.amazonaws.com/?Action=x']) {
      expectError(await login('aws-public', bearerToken({ url, headers: signedHeaders('web-session') })), 403, 'permission_denied')
      expectError(await login('aws', bearerToken({ url, headers: serverId('web-session') })), 403, 'permission_denied')
    }
    expect(received.length, 'a refused request reached STS').to.equal(before)
  })

  it("with entity details: the role's path and tags bind, a wildcard ARN matches, and only the caller's own role counts", async () => {
    const entity = (roleName: string) => ({
      'X-Service-IAM-GetEntity-Method': ['POST'],
      'X-Service-IAM-GetEntity-URL': ['https://iam.amazonaws.com/'],
      'X-Service-IAM-GetEntity-Headers': [JSON.stringify(signedHeaders('api-session'))],
      'X-Service-IAM-GetEntity-Body': [`Action=GetRole&RoleName=${roleName}&Version=2010-05-08`],
    })
    const response = await login('aws-details', bearerToken({ headers: signedHeaders('api-session', entity('api')) }))
    expect(response.status, response.text).to.equal(200)
    expect(response.body.ServiceIdentities).to.deep.equal([{ ServiceName: 'svc-payments' }])
    // The embedded request names another role: its unique ID is not the caller's.
    expectError(await login('aws-details', bearerToken({ headers: signedHeaders('api-session', entity('impostor')) })), 403, 'permission_denied')
    // GetUser with a RoleName is no entity request.
    const mixed = { ...entity('api'), 'X-Service-IAM-GetEntity-Body': ['Action=GetUser&RoleName=api'] }
    expectError(await login('aws-details', bearerToken({ headers: signedHeaders('api-session', mixed) })), 403, 'permission_denied')
    // Without the embedded request, a method with entity details refuses.
    expectError(await login('aws-details', bearerToken({ headers: signedHeaders('api-session') })), 403, 'permission_denied')
  })

  it('checks the Config when the method is written, naming the setting', async () => {
    const write = (config: Record<string, unknown>) => agent.request('PUT', '/v1/acl/auth-method', { body: { Name: 'aws-bad', Type: 'aws-iam', Config: config } })
    const role = `arn:aws:iam::${ACCOUNT}:role/web-role`
    expectError(await write({}), 400, 'invalid_input', 'Config.BoundIAMPrincipalARNs')
    expectError(await write({ BoundIAMPrincipalARNs: [`arn:aws:iam::${ACCOUNT}:role/*`] }), 400, 'invalid_input', 'Config.BoundIAMPrincipalARNs[0]')
    expectError(await write({ BoundIAMPrincipalARNs: [`arn:aws:iam::*:role/web`], EnableIAMEntityDetails: true }), 400, 'invalid_input', 'Config.BoundIAMPrincipalARNs[0]')
    expectError(await write({ BoundIAMPrincipalARNs: ['arn:aws:s3:::bucket'] }), 400, 'invalid_input', 'Config.BoundIAMPrincipalARNs[0]')
    expectError(await write({ BoundIAMPrincipalARNs: [role], IAMEntityTags: ['team'] }), 400, 'invalid_input', 'Config.IAMEntityTags')
    expectError(await write({ BoundIAMPrincipalARNs: [role], MaxRetries: -1 }), 400, 'invalid_input', 'Config.MaxRetries')
    expectError(await write({ BoundIAMPrincipalARNs: [role], Region: 'x' }), 400, 'invalid_input', 'Config.Region')
    const rule = await agent.request('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: 'aws', BindType: 'service', BindName: '${entity_tags.team}' } })
    expectError(rule, 400, 'invalid_input', 'BindName')
  })
})
