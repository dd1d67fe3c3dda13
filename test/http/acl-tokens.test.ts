/**
 * ACL tokens over HTTP, against the contract (api.md, "Tokens", "Authentication") and warden's readings: create with
 * links by name or ID (resolved when written, current names shown when read, missing targets a 400), read and expanded
 * read, read self, update (PUT replaces; immutable SecretID, AuthMethod, ExpirationTime and Local), clone, delete
 * (true, built-in and self guards), list with its filters, SecretID redaction for acl:read callers, and expiry: bounded
 * by the agent's settings and, once past ExpirationTime, the token is gone from reads and lists and refused when used.
 * The agent runs with token_min_expiration_ttl 1s and token_max_expiration_ttl 1h so expiry takes seconds.
 */
import { expect } from 'chai'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { ANONYMOUS_ID, expectError, GLOBAL_MANAGEMENT_ID, listed, MISSING_ID, ok, sleep, unique, UUID } from '../support/api.js'

describe('ACL tokens', () => {
  let agent: AgentProcess
  let configDir: string
  let readPolicy: any
  let readToken: any
  let policy: any
  let role: any

  const create = (body: Record<string, unknown>): Promise<any> => ok(agent, 'PUT', '/v1/acl/token', body)
  const accessorIds = (query = ''): Promise<string[]> => listed(agent, `/v1/acl/tokens${query}`, 'AccessorID')

  async function tokenCount(): Promise<number> {
    return (await accessorIds('?ns=*')).length
  }

  before(async () => {
    configDir = await mkdtemp(join(tmpdir(), 'warden-tokens-config-'))
    const configFile = join(configDir, 'config.json')
    await writeFile(configFile, JSON.stringify({ acl: { token_min_expiration_ttl: '1s', token_max_expiration_ttl: '1h' } }))
    agent = await startAgent({ args: ['--config-file', configFile] })
    const reader = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'acl-reader', Rules: 'acl = "read"' } })
    expect(reader.status, reader.text).to.equal(200)
    readPolicy = reader.body
    readToken = await create({ Description: 'reader', Policies: [{ ID: readPolicy.ID }] })
    const policyResponse = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'token-test-policy', Rules: 'service_prefix "" { policy = "read" }' } })
    expect(policyResponse.status, policyResponse.text).to.equal(200)
    policy = policyResponse.body
    const roleResponse = await agent.request('PUT', '/v1/acl/role', { body: { Name: 'token-test-role', Policies: [{ ID: policy.ID }] } })
    expect(roleResponse.status, roleResponse.text).to.equal(200)
    role = roleResponse.body
  })
  after(async () => {
    await agent.stop()
    await rm(configDir, { recursive: true, force: true })
  })

  describe('create', () => {
    it('create generates UUID AccessorID and SecretID and returns defaults, CreateTime, Hash and indexes', async () => {
      const token = await create({})
      expect(token.AccessorID).to.match(UUID)
      expect(token.SecretID).to.match(UUID)
      expect(token.SecretID).to.not.equal(token.AccessorID)
      expect(token.Description).to.equal('')
      expect(token.Local).to.equal(false)
      expect(token.AuthMethod ?? '').to.equal('')
      expect(Date.parse(token.CreateTime)).to.be.closeTo(Date.now(), 60_000)
      expect(token.Hash).to.be.a('string').that.is.not.empty
      expect(token.CreateIndex).to.be.a('number').above(0)
      expect(token.ModifyIndex).to.equal(token.CreateIndex)
      expect(token.ExpirationTime ?? '').to.equal('')
    })

    it('a supplied AccessorID and SecretID are used', async () => {
      const AccessorID = '1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e01'
      const SecretID = '1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e02'
      const token = await create({ AccessorID, SecretID, Description: 'supplied' })
      expect(token).to.include({ AccessorID, SecretID })
      const self = await agent.request('GET', '/v1/acl/token/self', { token: SecretID })
      expect(self.status, self.text).to.equal(200)
      expect(self.body.AccessorID).to.equal(AccessorID)
    })

    it('a SecretID supplied in upper case works as sent and in lower case, and is in use in either case', async () => {
      // UUIDs compare without regard to case (macOS uuidgen prints upper case); Consul indexes them as bytes.
      const SecretID = '1C2D3E4F-5A6B-4C7D-8E9F-0A1B2C3D4E0A'
      const token = await create({ SecretID, Description: 'upper case secret' })
      for (const sent of [SecretID, SecretID.toLowerCase()]) {
        const self = await agent.request('GET', '/v1/acl/token/self', { token: sent })
        expect(self.status, self.text).to.equal(200)
        expect(self.body.AccessorID).to.equal(token.AccessorID)
      }
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { SecretID: SecretID.toLowerCase() } }), 400, 'invalid_input', 'SecretID')
      // An update may restate the secret in either case.
      const restated = await agent.request('PUT', `/v1/acl/token/${token.AccessorID}`, { body: { SecretID, Description: 'restated' } })
      expect(restated.status, restated.text).to.equal(200)
    })

    it('an AccessorID already in use is a 400 naming AccessorID', async () => {
      const first = await create({})
      const response = await agent.request('PUT', '/v1/acl/token', { body: { AccessorID: first.AccessorID, Description: 'dup' } })
      expectError(response, 400, 'invalid_input', 'AccessorID')
      const read = await agent.request('GET', `/v1/acl/token/${first.AccessorID}`)
      expect(read.body.Description).to.equal('')
    })

    it('a SecretID already in use is a 400 naming SecretID', async () => {
      const first = await create({})
      const before = await tokenCount()
      const response = await agent.request('PUT', '/v1/acl/token', { body: { SecretID: first.SecretID } })
      expectError(response, 400, 'invalid_input', 'SecretID')
      expect(await tokenCount()).to.equal(before)
    })

    it('a malformed AccessorID or SecretID in the body is a 400 naming it', async () => {
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { AccessorID: 'not-a-uuid' } }), 400, 'invalid_input', 'AccessorID')
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { SecretID: 'not-a-uuid' } }), 400, 'invalid_input', 'SecretID')
    })

    it('policy links by Name resolve to the ID; links by ID show the Name', async () => {
      const byName = await create({ Policies: [{ Name: policy.Name }] })
      expect(byName.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
      const byId = await create({ Policies: [{ ID: policy.ID }] })
      expect(byId.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
    })

    it('role links by Name resolve to the ID; links by ID show the Name', async () => {
      const byName = await create({ Roles: [{ Name: role.Name }] })
      expect(byName.Roles).to.deep.equal([{ ID: role.ID, Name: role.Name }])
      const byId = await create({ Roles: [{ ID: role.ID }] })
      expect(byId.Roles).to.deep.equal([{ ID: role.ID, Name: role.Name }])
    })

    it('renaming a role keeps tokens linked; they show the current Name', async () => {
      const renamable = await agent.request('PUT', '/v1/acl/role', { body: { Name: unique('role-before') } })
      expect(renamable.status, renamable.text).to.equal(200)
      const token = await create({ Roles: [{ Name: renamable.body.Name }] })
      const newName = unique('role-after')
      const renamed = await agent.request('PUT', `/v1/acl/role/${renamable.body.ID}`, { body: { Name: newName } })
      expect(renamed.status, renamed.text).to.equal(200)
      const read = await agent.request('GET', `/v1/acl/token/${token.AccessorID}`)
      expect(read.body.Roles).to.deep.equal([{ ID: renamable.body.ID, Name: newName }])
    })

    it('a link to a policy that does not exist (by Name or by ID) is a 400 and nothing is written', async () => {
      const before = await tokenCount()
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ Name: unique('nopolicy') }] } }), 400, 'invalid_input', /Policies/)
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: MISSING_ID }] } }), 400, 'invalid_input', /Policies/)
      expect(await tokenCount()).to.equal(before)
    })

    it('a link to a role that does not exist (by Name or by ID) is a 400 and nothing is written', async () => {
      const before = await tokenCount()
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { Roles: [{ Name: unique('norole') }] } }), 400, 'invalid_input', /Roles/)
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { Roles: [{ ID: MISSING_ID }] } }), 400, 'invalid_input', /Roles/)
      expect(await tokenCount()).to.equal(before)
    })

    it('a link with a malformed UUID is a 400', async () => {
      const before = await tokenCount()
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: 'policy-one' }] } }), 400, 'invalid_input', /Policies/)
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { Roles: [{ ID: '1234' }] } }), 400, 'invalid_input', /Roles/)
      expect(await tokenCount()).to.equal(before)
    })

    it('service identities: valid names are kept with their Datacenters', async () => {
      const longest = 'a'.repeat(256)
      const token = await create({ ServiceIdentities: [{ ServiceName: 'web-api_2', Datacenters: ['dc1'] }, { ServiceName: longest }] })
      expect(token.ServiceIdentities).to.deep.include({ ServiceName: 'web-api_2', Datacenters: ['dc1'] })
      expect(token.ServiceIdentities.map((identity: { ServiceName: string }) => identity.ServiceName)).to.include(longest)
    })

    it('service identities: a ServiceName breaking the character or length rules is a 400', async () => {
      const before = await tokenCount()
      for (const name of ['Web', '-web', 'web-', 'we b', 'a'.repeat(257), '']) {
        const response = await agent.request('PUT', '/v1/acl/token', { body: { ServiceIdentities: [{ ServiceName: name }] } })
        expectError(response, 400, 'invalid_input', /ServiceIdentities|ServiceName/)
      }
      expect(await tokenCount()).to.equal(before)
    })

    it('node identities need a valid NodeName and a Datacenter', async () => {
      const token = await create({ NodeIdentities: [{ NodeName: 'node-1', Datacenter: 'dc1' }] })
      expect(token.NodeIdentities).to.deep.equal([{ NodeName: 'node-1', Datacenter: 'dc1' }])
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { NodeIdentities: [{ NodeName: 'node-1' }] } }), 400, 'invalid_input', /Datacenter/)
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { NodeIdentities: [{ NodeName: 'Node_1', Datacenter: 'dc1' }] } }), 400, 'invalid_input', /NodeIdentities|NodeName/)
    })

    it('templated policies are linked by TemplateName and answered with their TemplateID', async () => {
      const token = await create({ TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { name: 'api' } }, { TemplateName: 'builtin/dns' }] })
      expect(token.TemplatedPolicies).to.have.length(2)
      for (const link of token.TemplatedPolicies) expect(link.TemplateID).to.be.a('string').that.is.not.empty
      const service = token.TemplatedPolicies.find((link: { TemplateName: string }) => link.TemplateName === 'builtin/service')
      expect(service.TemplateVariables).to.deep.equal({ name: 'api' })
    })

    it('a templated policy that does not exist, or lacks its variable, is a 400', async () => {
      const before = await tokenCount()
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { TemplatedPolicies: [{ TemplateName: 'builtin/nope' }] } }), 400, 'invalid_input', /TemplatedPolicies|TemplateName/)
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { TemplatedPolicies: [{ TemplateName: 'builtin/service' }] } }), 400, 'invalid_input', /TemplatedPolicies|TemplateVariables|[Nn]ame/)
      expect(await tokenCount()).to.equal(before)
    })

    it('AuthMethod cannot be set on create (only login sets it)', async () => {
      const before = await tokenCount()
      const response = await agent.request('PUT', '/v1/acl/token', { body: { AuthMethod: 'some-method' } })
      expectError(response, 400, 'invalid_input', 'AuthMethod')
      expect(await tokenCount()).to.equal(before)
    })

    it('an unknown field, a wrong type or malformed JSON is a 400 and writes nothing', async () => {
      const before = await tokenCount()
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { Secret: 'x' } }), 400, 'invalid_input', 'Secret')
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { Local: 'yes' } }), 400, 'invalid_input', 'Local')
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { Policies: { ID: policy.ID } } }), 400, 'invalid_input', 'Policies')
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.ID, Colour: 'x' }] } }), 400, 'invalid_input', /Colour/)
      expectError(await agent.request('PUT', '/v1/acl/token', { raw: '{"Description": ', headers: { 'Content-Type': 'application/json' } }), 400, 'invalid_input')
      expect(await tokenCount()).to.equal(before)
    })

    it('a body over 1 MiB is a 413 payload_too_large and the server still answers', async () => {
      const before = await tokenCount()
      const response = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'y'.repeat(2 * 1024 * 1024) } })
      expectError(response, 413, 'payload_too_large')
      expect(await tokenCount()).to.equal(before)
    })
  })

  describe('expiry (settings: min 1s, max 1h)', () => {
    it('ExpirationTTL sets ExpirationTime to CreateTime + ExpirationTTL', async () => {
      const token = await create({ ExpirationTTL: '10m' })
      expect(Date.parse(token.ExpirationTime) - Date.parse(token.CreateTime)).to.be.closeTo(600_000, 1000)
    })

    it('an ExpirationTime within the bounds is kept as given', async () => {
      const expiration = new Date(Date.now() + 30 * 60_000)
      const token = await create({ ExpirationTime: expiration.toISOString() })
      expect(Date.parse(token.ExpirationTime)).to.be.closeTo(expiration.getTime(), 1000)
    })

    it('ExpirationTTL and ExpirationTime together are a 400', async () => {
      const before = await tokenCount()
      const response = await agent.request('PUT', '/v1/acl/token', { body: { ExpirationTTL: '10m', ExpirationTime: new Date(Date.now() + 600_000).toISOString() } })
      expectError(response, 400, 'invalid_input', /^Expiration(TTL|Time)$/)
      expect(await tokenCount()).to.equal(before)
    })

    it('an ExpirationTTL below token_min_expiration_ttl or above token_max_expiration_ttl is a 400', async () => {
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { ExpirationTTL: '500ms' } }), 400, 'invalid_input', 'ExpirationTTL')
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { ExpirationTTL: '2h' } }), 400, 'invalid_input', 'ExpirationTTL')
    })

    it('an ExpirationTime in the past or beyond the maximum is a 400', async () => {
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { ExpirationTime: new Date(Date.now() - 60_000).toISOString() } }), 400, 'invalid_input', 'ExpirationTime')
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { ExpirationTime: new Date(Date.now() + 3 * 3_600_000).toISOString() } }), 400, 'invalid_input', 'ExpirationTime')
    })

    it('a malformed ExpirationTTL or ExpirationTime is a 400', async () => {
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { ExpirationTTL: 'soon' } }), 400, 'invalid_input', 'ExpirationTTL')
      expectError(await agent.request('PUT', '/v1/acl/token', { body: { ExpirationTime: 'tomorrow' } }), 400, 'invalid_input', 'ExpirationTime')
    })

    it('from ExpirationTime on, a token is absent: 404 on read, gone from lists, 403 acl_not_found when used', async () => {
      const token = await create({ ExpirationTTL: '2s', Policies: [{ ID: readPolicy.ID }], Description: 'short-lived' })
      const usable = await agent.request('GET', '/v1/acl/token/self', { token: token.SecretID })
      expect(usable.status, usable.text).to.equal(200)
      expect(await accessorIds()).to.include(token.AccessorID)
      const wait = Date.parse(token.ExpirationTime) - Date.now() + 100
      await sleep(Math.max(wait, 0))
      expectError(await agent.request('GET', `/v1/acl/token/${token.AccessorID}`), 404, 'not_found')
      expect(await accessorIds()).to.not.include(token.AccessorID)
      const used = await agent.request('GET', '/v1/acl/policies', { token: token.SecretID })
      expectError(used, 403, 'acl_not_found')
      expect(used.body.Error).to.equal('ACL not found')
      expectError(await agent.request('GET', '/v1/acl/token/self', { token: token.SecretID }), 403, 'acl_not_found')
    })
  })

  describe('read', () => {
    it('read by AccessorID returns the token with its real SecretID to the management token', async () => {
      const created = await create({ Description: 'readable', Policies: [{ ID: policy.ID }] })
      const read = await agent.request('GET', `/v1/acl/token/${created.AccessorID}`)
      expect(read.status, read.text).to.equal(200)
      expect(read.body).to.deep.include({ AccessorID: created.AccessorID, SecretID: created.SecretID, Description: 'readable', Hash: created.Hash })
      expect(read.body.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
      expect(read.body.CreateIndex).to.equal(created.CreateIndex)
    })

    it('read of a missing AccessorID is a 404 not_found', async () => {
      expectError(await agent.request('GET', `/v1/acl/token/${MISSING_ID}`), 404, 'not_found')
    })

    it('a malformed AccessorID in the path is a 400', async () => {
      expectError(await agent.request('GET', '/v1/acl/token/xyz'), 400, 'invalid_input')
      expectError(await agent.request('PUT', '/v1/acl/token/xyz', { body: {} }), 400, 'invalid_input')
      expectError(await agent.request('DELETE', '/v1/acl/token/xyz'), 400, 'invalid_input')
      expectError(await agent.request('PUT', '/v1/acl/token/xyz/clone', { body: {} }), 400, 'invalid_input')
    })

    it('without expanded=true the read carries no expanded fields', async () => {
      const created = await create({ Policies: [{ ID: policy.ID }] })
      const read = await agent.request('GET', `/v1/acl/token/${created.AccessorID}`)
      expect(read.body).to.not.have.property('ExpandedPolicies')
      expect(read.body).to.not.have.property('ExpandedRoles')
    })

    it('expanded takes the spellings of Go strconv.ParseBool, and a bare expanded means true', async () => {
      const created = await create({ Policies: [{ ID: policy.ID }] })
      for (const value of ['TRUE', 'True', 't', 'T', '1', '']) {
        const read = await agent.request('GET', `/v1/acl/token/${created.AccessorID}?expanded=${value}`)
        expect(read.status, `expanded=${value}: ${read.text}`).to.equal(200)
        expect(read.body, `expanded=${value}`).to.have.property('ExpandedPolicies')
      }
      for (const value of ['FALSE', 'False', 'f', 'F', '0']) {
        const read = await agent.request('GET', `/v1/acl/token/${created.AccessorID}?expanded=${value}`)
        expect(read.status, `expanded=${value}: ${read.text}`).to.equal(200)
        expect(read.body, `expanded=${value}`).not.to.have.property('ExpandedPolicies')
      }
      expectError(await agent.request('GET', `/v1/acl/token/${created.AccessorID}?expanded=yes`), 400, 'invalid_input', 'expanded')
    })

    it('expanded read adds full policies and roles and the agent fields', async () => {
      const created = await create({ Policies: [{ ID: policy.ID }], Roles: [{ ID: role.ID }] })
      const read = await agent.request('GET', `/v1/acl/token/${created.AccessorID}?expanded=true`)
      expect(read.status, read.text).to.equal(200)
      const expandedPolicy = (read.body.ExpandedPolicies as Array<Record<string, unknown>>).find((item) => item.ID === policy.ID)
      expect(expandedPolicy).to.include({ Name: policy.Name, Rules: policy.Rules, Hash: policy.Hash })
      expect(expandedPolicy).to.include.keys('Description', 'Datacenters', 'CreateIndex', 'ModifyIndex')
      const expandedRole = (read.body.ExpandedRoles as Array<Record<string, unknown>>).find((item) => item.ID === role.ID)
      expect(expandedRole).to.include({ Name: role.Name })
      expect(expandedRole?.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
      expect(expandedRole).to.include.keys('Description', 'Hash', 'CreateIndex', 'ModifyIndex')
      expect(read.body.NamespaceDefaultPolicies).to.deep.equal([])
      expect(read.body.NamespaceDefaultRoles).to.deep.equal([])
      expect(read.body.AgentACLDefaultPolicy).to.equal(read.headers.get('X-Service-Default-ACL-Policy'))
      expect(read.body.AgentACLDownPolicy).to.equal('extend-cache')
      expect(read.body.ResolvedByAgent).to.equal('test-node')
    })
  })

  describe('read self', () => {
    it('self returns the caller token with its real SecretID, needing no ACL permission', async () => {
      const bare = await create({ Description: 'no policies' })
      const self = await agent.request('GET', '/v1/acl/token/self', { token: bare.SecretID })
      expect(self.status, self.text).to.equal(200)
      expect(self.body).to.include({ AccessorID: bare.AccessorID, SecretID: bare.SecretID, Description: 'no policies' })
    })

    it('self shows an acl:read-only caller its real SecretID', async () => {
      const self = await agent.request('GET', '/v1/acl/token/self', { token: readToken.SecretID })
      expect(self.status, self.text).to.equal(200)
      expect(self.body.SecretID).to.equal(readToken.SecretID)
    })

    it('the token may be given as the ?token= query parameter', async () => {
      const self = await agent.request('GET', `/v1/acl/token/self?token=${readToken.SecretID}`, { token: null })
      expect(self.status, self.text).to.equal(200)
      expect(self.body.AccessorID).to.equal(readToken.AccessorID)
      const list = await agent.request('GET', `/v1/acl/tokens?token=${agent.managementToken}`, { token: null })
      expect(list.status, list.text).to.equal(200)
    })

    it('self with an unknown secret is a 403 acl_not_found', async () => {
      expectError(await agent.request('GET', '/v1/acl/token/self', { token: '0f0e0d0c-0b0a-4909-8807-060504030201' }), 403, 'acl_not_found')
    })
  })

  describe('update', () => {
    it('update replaces the token: omitted fields take their defaults, the SecretID is kept', async () => {
      const created = await create({ Description: 'before', Policies: [{ ID: policy.ID }], ServiceIdentities: [{ ServiceName: 'web' }] })
      const updated = await agent.request('PUT', `/v1/acl/token/${created.AccessorID}`, { body: { Roles: [{ Name: role.Name }] } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.Description).to.equal('')
      expect(updated.body.Policies ?? []).to.deep.equal([])
      expect(updated.body.ServiceIdentities ?? []).to.deep.equal([])
      expect(updated.body.Roles).to.deep.equal([{ ID: role.ID, Name: role.Name }])
      expect(updated.body.SecretID).to.equal(created.SecretID)
      expect(updated.body.AccessorID).to.equal(created.AccessorID)
      const self = await agent.request('GET', '/v1/acl/token/self', { token: created.SecretID })
      expect(self.status).to.equal(200)
    })

    it('a read token sent back as the update body (read-modify-write) is accepted; response-only fields are ignored', async () => {
      const created = await create({ Description: 'rmw', Policies: [{ ID: policy.ID }], ServiceIdentities: [{ ServiceName: 'web' }] })
      const read = await agent.request('GET', `/v1/acl/token/${created.AccessorID}`)
      const body = { ...read.body, Description: 'rmw changed', CreateIndex: 1, ModifyIndex: 1, Hash: 'bogus', CreateTime: '2000-01-01T00:00:00Z' }
      const updated = await agent.request('PUT', `/v1/acl/token/${created.AccessorID}`, { body })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.Description).to.equal('rmw changed')
      expect(updated.body.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
      expect(updated.body.CreateIndex).to.equal(created.CreateIndex)
      expect(updated.body.CreateTime).to.equal(created.CreateTime)
      expect(updated.body.Hash).to.not.equal('bogus')
    })

    it('update raises ModifyIndex and keeps CreateIndex and CreateTime', async () => {
      const created = await create({})
      const updated = await agent.request('PUT', `/v1/acl/token/${created.AccessorID}`, { body: { Description: 'changed' } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.ModifyIndex).to.be.above(created.ModifyIndex)
      expect(updated.body.CreateIndex).to.equal(created.CreateIndex)
      expect(updated.body.CreateTime).to.equal(created.CreateTime)
    })

    it('a body AccessorID that differs from the path is a 400 naming AccessorID', async () => {
      const created = await create({})
      const other = await create({})
      const response = await agent.request('PUT', `/v1/acl/token/${created.AccessorID}`, { body: { AccessorID: other.AccessorID, Description: 'x' } })
      expectError(response, 400, 'invalid_input', 'AccessorID')
      expect((await agent.request('GET', `/v1/acl/token/${created.AccessorID}`)).body.Description).to.equal('')
      expect((await agent.request('GET', `/v1/acl/token/${other.AccessorID}`)).body.Description).to.equal('')
    })

    it('SecretID is immutable: a different one is a 400, the same one is accepted', async () => {
      const created = await create({})
      const changed = await agent.request('PUT', `/v1/acl/token/${created.AccessorID}`, { body: { SecretID: '9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d' } })
      expectError(changed, 400, 'invalid_input', 'SecretID')
      const same = await agent.request('PUT', `/v1/acl/token/${created.AccessorID}`, { body: { SecretID: created.SecretID, Description: 'same secret' } })
      expect(same.status, same.text).to.equal(200)
      expect(same.body.SecretID).to.equal(created.SecretID)
    })

    it('AuthMethod is immutable: a different one is a 400', async () => {
      const created = await create({})
      const response = await agent.request('PUT', `/v1/acl/token/${created.AccessorID}`, { body: { AuthMethod: 'some-method' } })
      expectError(response, 400, 'invalid_input', 'AuthMethod')
    })

    it('ExpirationTime is immutable: a different one is a 400; absent it is kept', async () => {
      const created = await create({ ExpirationTTL: '30m' })
      const other = new Date(Date.parse(created.ExpirationTime) + 60_000).toISOString()
      expectError(await agent.request('PUT', `/v1/acl/token/${created.AccessorID}`, { body: { ExpirationTime: other } }), 400, 'invalid_input', 'ExpirationTime')
      const kept = await agent.request('PUT', `/v1/acl/token/${created.AccessorID}`, { body: { Description: 'kept expiry' } })
      expect(kept.status, kept.text).to.equal(200)
      expect(Date.parse(kept.body.ExpirationTime)).to.equal(Date.parse(created.ExpirationTime))
      const same = await agent.request('PUT', `/v1/acl/token/${created.AccessorID}`, { body: { ExpirationTime: created.ExpirationTime } })
      expect(same.status, same.text).to.equal(200)
    })

    it('Local cannot change: toggling it is a 400 naming Local', async () => {
      const local = await create({ Local: true })
      expect(local.Local).to.equal(true)
      expectError(await agent.request('PUT', `/v1/acl/token/${local.AccessorID}`, { body: { Local: false } }), 400, 'invalid_input', 'Local')
      const global = await create({})
      expectError(await agent.request('PUT', `/v1/acl/token/${global.AccessorID}`, { body: { Local: true } }), 400, 'invalid_input', 'Local')
      expect((await agent.request('GET', `/v1/acl/token/${local.AccessorID}`)).body.Local).to.equal(true)
      expect((await agent.request('GET', `/v1/acl/token/${global.AccessorID}`)).body.Local).to.equal(false)
    })

    it('a link to something that does not exist is a 400 on update too, and nothing changes', async () => {
      const created = await create({ Policies: [{ ID: policy.ID }] })
      expectError(await agent.request('PUT', `/v1/acl/token/${created.AccessorID}`, { body: { Policies: [{ Name: unique('missing') }] } }), 400, 'invalid_input', /Policies/)
      const read = await agent.request('GET', `/v1/acl/token/${created.AccessorID}`)
      expect(read.body.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
      expect(read.body.ModifyIndex).to.equal(created.ModifyIndex)
    })

    it('update of a token that does not exist is a 4xx and creates nothing', async () => {
      const response = await agent.request('PUT', `/v1/acl/token/${MISSING_ID}`, { body: { Description: 'ghost' } })
      expect(response.status, response.text).to.be.within(400, 499)
      expect(response.body.Code).to.be.a('string')
      expect((await agent.request('GET', `/v1/acl/token/${MISSING_ID}`)).status).to.equal(404)
    })
  })

  describe('clone', () => {
    it('clone makes a new AccessorID and SecretID with the source links and the given Description', async () => {
      const source = await create({ Description: 'source', Policies: [{ ID: policy.ID }], Roles: [{ ID: role.ID }], ServiceIdentities: [{ ServiceName: 'db' }] })
      const response = await agent.request('PUT', `/v1/acl/token/${source.AccessorID}/clone`, { body: { Description: 'the clone' } })
      expect(response.status, response.text).to.equal(200)
      const clone = response.body
      expect(clone.AccessorID).to.match(UUID).and.not.equal(source.AccessorID)
      expect(clone.SecretID).to.match(UUID).and.not.equal(source.SecretID)
      expect(clone.Description).to.equal('the clone')
      expect(clone.Policies).to.deep.equal(source.Policies)
      expect(clone.Roles).to.deep.equal(source.Roles)
      expect(clone.ServiceIdentities).to.deep.equal(source.ServiceIdentities)
      const read = await agent.request('GET', `/v1/acl/token/${clone.AccessorID}`)
      expect(read.status).to.equal(200)
      const sourceRead = await agent.request('GET', `/v1/acl/token/${source.AccessorID}`)
      expect(sourceRead.body.Description).to.equal('source')
    })

    it('clone without a Description gives ""', async () => {
      const source = await create({ Description: 'has one' })
      const response = await agent.request('PUT', `/v1/acl/token/${source.AccessorID}/clone`, { body: {} })
      expect(response.status, response.text).to.equal(200)
      expect(response.body.Description).to.equal('')
    })

    it('clone of a token that does not exist is a 4xx', async () => {
      const before = await tokenCount()
      const response = await agent.request('PUT', `/v1/acl/token/${MISSING_ID}/clone`, { body: { Description: 'x' } })
      expect(response.status, response.text).to.be.within(400, 499)
      expect(response.body.Code).to.be.a('string')
      expect(await tokenCount()).to.equal(before)
    })
  })

  describe('delete', () => {
    it('delete answers JSON true and the token is gone and unusable', async () => {
      const created = await create({ Policies: [{ ID: readPolicy.ID }] })
      const response = await agent.request('DELETE', `/v1/acl/token/${created.AccessorID}`)
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.equal(true)
      expectError(await agent.request('GET', `/v1/acl/token/${created.AccessorID}`), 404, 'not_found')
      expectError(await agent.request('GET', '/v1/acl/policies', { token: created.SecretID }), 403, 'acl_not_found')
    })

    it('delete of a token that never existed answers true', async () => {
      const response = await agent.request('DELETE', `/v1/acl/token/${MISSING_ID}`)
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.equal(true)
    })

    it('the anonymous token cannot be deleted', async () => {
      const response = await agent.request('DELETE', `/v1/acl/token/${ANONYMOUS_ID}`)
      expect(response.status, response.text).to.be.within(400, 499)
      expect(response.body.Error).to.be.a('string')
      expect(response.body.Code).to.be.a('string')
      expect((await agent.request('GET', `/v1/acl/token/${ANONYMOUS_ID}`)).status).to.equal(200)
    })

    it('a token cannot delete itself', async () => {
      const manager = await create({ Description: 'second manager', Policies: [{ ID: GLOBAL_MANAGEMENT_ID }] })
      const response = await agent.request('DELETE', `/v1/acl/token/${manager.AccessorID}`, { token: manager.SecretID })
      expect(response.status, response.text).to.be.within(400, 499)
      expect(response.body.Error).to.be.a('string')
      expect(response.body.Code).to.be.a('string')
      expect((await agent.request('GET', `/v1/acl/token/${manager.AccessorID}`)).status).to.equal(200)
    })
  })

  describe('list', () => {
    it('the list contains the anonymous token and the management token', async () => {
      const response = await agent.request('GET', '/v1/acl/tokens')
      expect(response.status, response.text).to.equal(200)
      const list = response.body as Array<Record<string, any>>
      expect(list.find((token) => token.AccessorID === ANONYMOUS_ID)).to.include({ Description: 'Anonymous Token' })
      const management = list.find((token) => token.SecretID === agent.managementToken)
      expect(management?.Policies).to.deep.include({ ID: GLOBAL_MANAGEMENT_ID, Name: 'global-management' })
    })

    it('?policy= lists only tokens linked to that policy ID', async () => {
      const linked = await create({ Policies: [{ ID: policy.ID }] })
      const unlinked = await create({})
      const ids = await accessorIds(`?policy=${policy.ID}`)
      expect(ids).to.include(linked.AccessorID).and.not.include(unlinked.AccessorID)
      const list = (await agent.request('GET', `/v1/acl/tokens?policy=${policy.ID}`)).body as Array<{ Policies: Array<{ ID: string }> }>
      for (const token of list) expect(token.Policies.map((link) => link.ID)).to.include(policy.ID)
    })

    it('?role= lists only tokens linked to that role ID', async () => {
      const linked = await create({ Roles: [{ ID: role.ID }] })
      const unlinked = await create({ Policies: [{ ID: policy.ID }] })
      const list = (await agent.request('GET', `/v1/acl/tokens?role=${role.ID}`)).body as Array<{ AccessorID: string; Roles: Array<{ ID: string }> }>
      const ids = list.map((token) => token.AccessorID)
      expect(ids).to.include(linked.AccessorID).and.not.include(unlinked.AccessorID)
      for (const token of list) expect(token.Roles.map((link) => link.ID)).to.include(role.ID)
    })

    it('?policy= and ?role= of a deleted policy or role list no token: the links it had are gone from every read', async () => {
      const doomedPolicy = (await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('doomed') } })).body
      const doomedRole = (await agent.request('PUT', '/v1/acl/role', { body: { Name: unique('doomed') } })).body
      const linked = await create({ Policies: [{ ID: doomedPolicy.ID }], Roles: [{ ID: doomedRole.ID }] })
      expect(await accessorIds(`?policy=${doomedPolicy.ID}`)).to.deep.equal([linked.AccessorID])
      expect(await accessorIds(`?role=${doomedRole.ID}`)).to.deep.equal([linked.AccessorID])
      expect((await agent.request('DELETE', `/v1/acl/policy/${doomedPolicy.ID}`)).status).to.equal(200)
      expect((await agent.request('DELETE', `/v1/acl/role/${doomedRole.ID}`)).status).to.equal(200)
      const read = (await agent.request('GET', `/v1/acl/token/${linked.AccessorID}`)).body
      expect([read.Policies, read.Roles]).to.deep.equal([[], []])
      expect(await accessorIds(`?policy=${doomedPolicy.ID}`)).to.deep.equal([])
      expect(await accessorIds(`?role=${doomedRole.ID}`)).to.deep.equal([])
    })

    it('?servicename= lists only tokens with a service identity of that name', async () => {
      const service = unique('svc')
      const linked = await create({ ServiceIdentities: [{ ServiceName: service }] })
      const other = await create({ ServiceIdentities: [{ ServiceName: `${service}-other` }] })
      const ids = await accessorIds(`?servicename=${service}`)
      expect(ids).to.deep.equal([linked.AccessorID])
      expect(ids).to.not.include(other.AccessorID)
    })

    it('?authmethod= lists only tokens created by that auth method', async () => {
      const method = await agent.request('PUT', '/v1/acl/auth-method', {
        body: { Name: unique('method'), Type: 'jwt', Config: { JWKSURL: 'https://issuer.example.com/.well-known/jwks.json' } },
      })
      expect(method.status, method.text).to.equal(200)
      const ids = await accessorIds(`?authmethod=${method.body.Name}`)
      expect(ids).to.deep.equal([])
      expect((await accessorIds()).length).to.be.above(0)
    })

    it('a link filter with a malformed UUID is a 400', async () => {
      expectError(await agent.request('GET', '/v1/acl/tokens?policy=nope'), 400, 'invalid_input', 'policy')
      expectError(await agent.request('GET', '/v1/acl/tokens?role=nope'), 400, 'invalid_input', 'role')
    })

    it('a list is scoped to one namespace; ns=* lists all', async () => {
      const inTeam = await create({ Namespace: 'team-tokens' })
      const inDefault = await create({})
      const team = await accessorIds('?ns=team-tokens')
      expect(team).to.deep.equal([inTeam.AccessorID])
      expect(await accessorIds()).to.include(inDefault.AccessorID).and.not.include(inTeam.AccessorID)
      expect(await accessorIds('?ns=*')).to.include.members([inTeam.AccessorID, inDefault.AccessorID])
    })
  })

  describe('authorization and redaction', () => {
    it('without a token, list, read and create are 403 permission_denied', async () => {
      const before = await tokenCount()
      expectError(await agent.request('GET', '/v1/acl/tokens', { token: null }), 403, 'permission_denied')
      expectError(await agent.request('GET', `/v1/acl/token/${readToken.AccessorID}`, { token: null }), 403, 'permission_denied')
      expectError(await agent.request('PUT', '/v1/acl/token', { token: null, body: {} }), 403, 'permission_denied')
      expect(await tokenCount()).to.equal(before)
    })

    it('a permission_denied message names the permission lacked', async () => {
      const response = await agent.request('PUT', '/v1/acl/token', { token: readToken.SecretID, body: {} })
      expectError(response, 403, 'permission_denied')
      expect(response.body.Error).to.include('acl:write')
    })

    it('an acl:read caller sees SecretID as <hidden> in list and read', async () => {
      const target = await create({ Description: 'redacted' })
      const list = await agent.request('GET', '/v1/acl/tokens', { token: readToken.SecretID })
      expect(list.status, list.text).to.equal(200)
      for (const token of list.body as Array<{ SecretID: string }>) expect(token.SecretID).to.equal('<hidden>')
      expect(list.text).to.not.include(target.SecretID)
      expect(list.text).to.not.include(agent.managementToken)
      const read = await agent.request('GET', `/v1/acl/token/${target.AccessorID}`, { token: readToken.SecretID })
      expect(read.status, read.text).to.equal(200)
      expect(read.body.SecretID).to.equal('<hidden>')
      const expanded = await agent.request('GET', `/v1/acl/token/${target.AccessorID}?expanded=true`, { token: readToken.SecretID })
      expect(expanded.body.SecretID).to.equal('<hidden>')
    })

    it('a management caller sees real SecretIDs in the list', async () => {
      const target = await create({})
      const list = (await agent.request('GET', '/v1/acl/tokens')).body as Array<{ AccessorID: string; SecretID: string }>
      expect(list.find((token) => token.AccessorID === target.AccessorID)?.SecretID).to.equal(target.SecretID)
    })

    it('an acl:read caller cannot create, update, clone or delete tokens (403 permission_denied)', async () => {
      const target = await create({ Description: 'untouched' })
      const before = await tokenCount()
      const as = { token: readToken.SecretID }
      expectError(await agent.request('PUT', '/v1/acl/token', { ...as, body: {} }), 403, 'permission_denied')
      expectError(await agent.request('PUT', `/v1/acl/token/${target.AccessorID}`, { ...as, body: { Description: 'x' } }), 403, 'permission_denied')
      expectError(await agent.request('PUT', `/v1/acl/token/${target.AccessorID}/clone`, { ...as, body: {} }), 403, 'permission_denied')
      expectError(await agent.request('DELETE', `/v1/acl/token/${target.AccessorID}`, as), 403, 'permission_denied')
      expect(await tokenCount()).to.equal(before)
      expect((await agent.request('GET', `/v1/acl/token/${target.AccessorID}`)).body.Description).to.equal('untouched')
    })

    it('an unknown secret is a 403 acl_not_found with the message "ACL not found"', async () => {
      const response = await agent.request('GET', '/v1/acl/tokens', { token: 'a1b2c3d4-0000-4000-8000-000000000000' })
      expectError(response, 403, 'acl_not_found')
      expect(response.body.Error).to.equal('ACL not found')
    })
  })
})
