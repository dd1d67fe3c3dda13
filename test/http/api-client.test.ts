/**
 * The client library (src/api) against a real agent: each resource group round-trips through the contract's
 * endpoints, answers outside 2xx come back as ApiErrors with the server's code and field, a request that reached no
 * server says so (and one that may have reached it says that instead), `watch` yields on each change and ends on
 * abort, and TLS options verify the server against the CA given.
 */
import { expect } from 'chai'
import { ApiError, ConnectionError, WardenClient, watch, type Policy } from '../../src/api/index.js'
import { freePort } from '../../cluster/lib.js'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { makeCertificate, startDouble, type Double } from '../support/identity-doubles.js'
import { unique } from '../support/api.js'
import { generateKeyPairSync } from 'node:crypto'

describe('api client against a real agent', function () {
  let agent: AgentProcess
  let client: WardenClient

  before(async function () {
    agent = await startAgent()
    client = new WardenClient({ address: agent.httpAddress, token: agent.managementToken })
  })

  after(async function () {
    client?.close()
    await agent?.stop()
  })

  it('creates, reads, updates, lists and deletes policies, roles and tokens, links by name', async function () {
    const policy = await client.acl.policies.create({ Name: unique('p'), Rules: 'acl = "read"' })
    expect((await client.acl.policies.readByName(policy.Name)).ID).to.equal(policy.ID)
    const updated = await client.acl.policies.update(policy.ID, { Name: policy.Name, Description: 'now described', Rules: 'acl = "read"' })
    expect(updated.Description).to.equal('now described')
    const role = await client.acl.roles.create({ Name: unique('r'), Policies: [{ Name: policy.Name }] })
    expect(role.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
    const token = await client.acl.tokens.create({ Description: 'client test', Roles: [{ ID: role.ID }] })
    expect((await client.acl.tokens.read(token.AccessorID)).Roles[0]?.Name).to.equal(role.Name)
    const expanded = await client.acl.tokens.read(token.AccessorID, { expanded: true })
    expect(expanded.ExpandedPolicies?.map((item) => item.ID)).to.include(policy.ID)
    expect((await client.acl.tokens.list({ role: role.ID })).map((item) => item.AccessorID)).to.deep.equal([token.AccessorID])
    const self = await client.acl.tokens.self({ token: token.SecretID })
    expect(self.AccessorID).to.equal(token.AccessorID)
    const clone = await client.acl.tokens.clone(token.AccessorID, 'the clone')
    expect(clone).to.include({ Description: 'the clone' }).and.not.include({ AccessorID: token.AccessorID })
    expect(await client.acl.tokens.delete(clone.AccessorID)).to.equal(true)
    expect(await client.acl.roles.delete(role.ID)).to.equal(true)
    expect((await client.acl.policies.list()).map((item) => item.ID)).to.include(policy.ID)
  })

  it('writes auth methods and binding rules, lists and previews templated policies', async function () {
    const name = unique('jwt')
    const method = await client.acl.authMethods.create({ Name: name, Type: 'jwt', Config: { JWTValidationPubKeys: [makeKey()], BoundAudiences: ['warden'] } })
    expect(method.Type).to.equal('jwt')
    const rule = await client.acl.bindingRules.create({ AuthMethod: name, BindType: 'service', BindName: 'web' })
    expect((await client.acl.bindingRules.list({ authMethod: name })).map((item) => item.ID)).to.deep.equal([rule.ID])
    expect(await client.acl.bindingRules.delete(rule.ID)).to.equal(true)
    expect((await client.acl.authMethods.list()).map((item) => item.Name)).to.include(name)
    expect(await client.acl.authMethods.delete(name)).to.equal(true)
    const templates = await client.acl.templatedPolicies.list()
    expect(Object.keys(templates)).to.include('builtin/service')
    expect((await client.acl.templatedPolicies.read('builtin/service')).TemplateName).to.equal('builtin/service')
    const preview = await client.acl.templatedPolicies.preview('builtin/service', { name: 'api' })
    expect(preview.Rules).to.include('"api"')
  })

  it('applies, reads, lists and deletes config entries, with compare-and-set', async function () {
    const name = unique('svc')
    expect(await client.config.apply({ Kind: 'service-defaults', Name: name, Protocol: 'http' })).to.equal(true)
    const entry = await client.config.get('service-defaults', name)
    expect(entry.Protocol).to.equal('http')
    expect(await client.config.apply({ Kind: 'service-defaults', Name: name, Protocol: 'grpc' }, { cas: entry.ModifyIndex! + 1000 })).to.equal(false)
    expect((await client.config.list('service-defaults', { filter: `Name == "${name}"` })).map((item) => item.Name)).to.deep.equal([name])
    expect(await client.config.delete('service-defaults', name, { cas: entry.ModifyIndex! })).to.equal(true)
    expect(await rejection(client.config.get('service-defaults', name))).to.be.instanceOf(ApiError).and.include({ status: 404, code: 'not_found' })
  })

  it('reads status and the Raft configuration, and the query metadata of reads', async function () {
    expect(await client.status.leader()).to.equal(agent.clusterAddress)
    const configuration = await client.operator.raft.configuration()
    expect(configuration.Servers.map((server) => server.Node)).to.deep.equal(['test-node'])
    const { meta } = await client.query<Policy[]>('/v1/acl/policies', { consistency: 'stale' })
    expect(meta.index).to.be.greaterThan(0)
    expect(meta.effectiveConsistency).to.equal('stale')
  })

  it('rebuilds the server error: an unknown token is acl_not_found, bad input names its field', async function () {
    const denied = await rejection(client.acl.policies.list({ token: '11111111-2222-4333-8444-555555555555' }))
    expect(denied).to.be.instanceOf(ApiError).and.include({ status: 403, code: 'acl_not_found' })
    const invalid = await rejection(client.acl.policies.create({ Name: 'bad name!' }))
    expect(invalid).to.be.instanceOf(ApiError).and.include({ status: 400, code: 'invalid_input', field: 'Name' })
  })

  it('request() answers any status without throwing, with the parsed body and headers', async function () {
    const answer = await client.request('GET', '/v1/acl/policy/not-a-uuid')
    expect(answer.status).to.equal(400)
    expect(answer.body).to.include({ Code: 'invalid_input' })
    expect(answer.headers['content-type']).to.match(/json/)
  })

  it('watch yields the first answer, then each change, and ends when aborted', async function () {
    const abort = new AbortController()
    const seen: number[] = []
    const loop = (async () => {
      for await (const { value, meta } of watch<Policy[]>(client, '/v1/acl/policies', { signal: abort.signal, wait: '10s' })) {
        seen.push(meta.index)
        if (seen.length === 1) await client.acl.policies.create({ Name: unique('watched') })
        if (seen.length === 2) {
          expect(value.length).to.be.greaterThan(0)
          abort.abort()
        }
      }
    })()
    await loop
    expect(seen).to.have.length(2)
    expect(seen[1]).to.be.greaterThan(seen[0]!)
  })

  it('says a request never reached a server when nothing listens, and maybe when the answer timed out', async function () {
    const nowhere = new WardenClient({ address: `127.0.0.1:${await freePort()}` })
    try {
      const refused = await rejection(nowhere.acl.policies.list())
      expect(refused).to.be.instanceOf(ConnectionError).and.include({ reached: 'no', reason: 'ECONNREFUSED' })
      expect((refused as Error).message).to.match(/connection refused/)
    } finally {
      nowhere.close()
    }
    const { meta } = await client.query('/v1/acl/policies')
    const late = await rejection(client.query('/v1/acl/policies', { index: meta.index, wait: '5s', timeoutMs: 200 }))
    expect(late).to.be.instanceOf(ConnectionError).and.include({ reached: 'maybe', reason: 'timeout' })
  })
})

describe('api client over TLS', function () {
  let double: Double | undefined
  const certificate = makeCertificate()

  before(async function () {
    double = await startDouble(certificate, () => ({ status: 200, body: 'leader:8300' }))
  })

  after(async function () {
    await double?.close()
  })

  it('verifies the server against the CA given, and refuses one it cannot verify before sending anything', async function () {
    const address = double!.url.replace(/\/$/, '')
    const trusting = new WardenClient({ address, tls: { ca: certificate.cert } })
    const doubting = new WardenClient({ address })
    try {
      expect(await trusting.status.leader()).to.equal('leader:8300')
      const refused = await rejection(doubting.status.leader())
      expect(refused).to.be.instanceOf(ConnectionError).and.include({ reached: 'no' })
      expect((refused as ConnectionError).reason).to.match(/CERT|SELF_SIGNED|UNABLE/)
    } finally {
      trusting.close()
      doubting.close()
    }
  })
})

/** A PEM public key for a jwt auth method's config; the method is never logged into here. */
function makeKey(): string {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString()
}

/** The error a promise rejects with; fulfilling fails the test. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error('expected the call to fail')
}
