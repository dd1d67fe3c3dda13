/**
 * ACL roles over HTTP, against the contract (api.md, "Roles") and warden's readings: create with policy links by name
 * or ID (a missing target is a 400), templated policies and identities, read by ID and by name, update (PUT replaces,
 * ID must match the path, indexes), delete (true, also for what never existed), list with the policy filter, name
 * rules and uniqueness per namespace, and the rule that renaming a policy keeps roles linked to it.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError, listed, MISSING_ID, ok, secretWithRules, unique, UUID } from '../support/api.js'

describe('ACL roles', () => {
  let agent: AgentProcess
  let readToken: string
  let policy: any
  let otherPolicy: any

  const createRole = (body: Record<string, unknown>): Promise<any> => ok(agent, 'PUT', '/v1/acl/role', body)
  const roleNames = (query = ''): Promise<string[]> => listed(agent, `/v1/acl/roles${query}`, 'Name')

  before(async () => {
    agent = await startAgent()
    readToken = await secretWithRules(agent, 'acl = "read"', 'acl-reader')
    policy = (await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'role-test-policy', Rules: 'service_prefix "" { policy = "read" }' } })).body
    otherPolicy = (await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'role-test-other' } })).body
    expect(policy.ID).to.match(UUID)
    expect(otherPolicy.ID).to.match(UUID)
  })
  after(async () => {
    await agent.stop()
  })

  describe('create and read', () => {
    it('create returns the role with a UUID ID, resolved policy names, Hash and equal indexes', async () => {
      const name = unique('create')
      const role = await createRole({ Name: name, Description: 'a role', Policies: [{ Name: policy.Name }] })
      expect(role.ID).to.match(UUID)
      expect(role.Name).to.equal(name)
      expect(role.Description).to.equal('a role')
      expect(role.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
      expect(role.Hash).to.be.a('string').that.is.not.empty
      expect(role.CreateIndex).to.be.a('number').above(0)
      expect(role.ModifyIndex).to.equal(role.CreateIndex)
    })

    it('Description defaults to ""', async () => {
      const role = await createRole({ Name: unique('nodesc') })
      expect(role.Description).to.equal('')
    })

    it('policy links by ID are answered with the Name', async () => {
      const role = await createRole({ Name: unique('byid'), Policies: [{ ID: otherPolicy.ID }] })
      expect(role.Policies).to.deep.equal([{ ID: otherPolicy.ID, Name: otherPolicy.Name }])
    })

    it('service and node identities are stored', async () => {
      const role = await createRole({
        Name: unique('identities'),
        ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1'] }],
        NodeIdentities: [{ NodeName: 'node-a', Datacenter: 'dc1' }],
      })
      expect(role.ServiceIdentities).to.deep.equal([{ ServiceName: 'web', Datacenters: ['dc1'] }])
      expect(role.NodeIdentities).to.deep.equal([{ NodeName: 'node-a', Datacenter: 'dc1' }])
    })

    it('templated policies are accepted and answered with their TemplateID', async () => {
      const role = await createRole({ Name: unique('templated'), TemplatedPolicies: [{ TemplateName: 'builtin/node', TemplateVariables: { name: 'node-a' } }] })
      expect(role.TemplatedPolicies).to.have.length(1)
      expect(role.TemplatedPolicies[0]).to.deep.include({ TemplateName: 'builtin/node', TemplateVariables: { name: 'node-a' } })
      expect(role.TemplatedPolicies[0].TemplateID).to.be.a('string').that.is.not.empty
    })

    it('read by ID returns the role', async () => {
      const created = await createRole({ Name: unique('read'), Policies: [{ ID: policy.ID }] })
      const read = await agent.request('GET', `/v1/acl/role/${created.ID}`)
      expect(read.status, read.text).to.equal(200)
      expect(read.body).to.deep.include({ ID: created.ID, Name: created.Name, Hash: created.Hash, CreateIndex: created.CreateIndex, ModifyIndex: created.ModifyIndex })
      expect(read.body.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
    })

    it('read by name returns the same role as read by ID', async () => {
      const created = await createRole({ Name: unique('byname') })
      const byName = await agent.request('GET', `/v1/acl/role/name/${created.Name}`)
      expect(byName.status, byName.text).to.equal(200)
      const byId = await agent.request('GET', `/v1/acl/role/${created.ID}`)
      expect(byName.body).to.deep.equal(byId.body)
    })

    it('read of a missing ID is a 404 not_found', async () => {
      expectError(await agent.request('GET', `/v1/acl/role/${MISSING_ID}`), 404, 'not_found')
    })

    it('read of a missing name is a 404 not_found', async () => {
      expectError(await agent.request('GET', `/v1/acl/role/name/${unique('missing')}`), 404, 'not_found')
    })

    it('a malformed UUID in the path is a 400', async () => {
      expectError(await agent.request('GET', '/v1/acl/role/12345'), 400, 'invalid_input')
      expectError(await agent.request('PUT', '/v1/acl/role/12345', { body: { Name: unique('bad') } }), 400, 'invalid_input')
      expectError(await agent.request('DELETE', '/v1/acl/role/12345'), 400, 'invalid_input')
    })

    it('list returns the roles with Policies, Hash and indexes', async () => {
      const created = await createRole({ Name: unique('listed'), Description: 'listed', Policies: [{ ID: policy.ID }] })
      const response = await agent.request('GET', '/v1/acl/roles')
      expect(response.status, response.text).to.equal(200)
      const mine = (response.body as Array<Record<string, unknown>>).find((role) => role.ID === created.ID)
      expect(mine).to.deep.include({ Name: created.Name, Description: 'listed', Hash: created.Hash, CreateIndex: created.CreateIndex })
      expect(mine?.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
    })

    it('?policy= lists only roles linked to that policy ID', async () => {
      const linked = await createRole({ Name: unique('linked'), Policies: [{ ID: otherPolicy.ID }] })
      const unlinked = await createRole({ Name: unique('unlinked') })
      const list = (await agent.request('GET', `/v1/acl/roles?policy=${otherPolicy.ID}`)).body as Array<{ ID: string; Policies: Array<{ ID: string }> }>
      const ids = list.map((role) => role.ID)
      expect(ids).to.include(linked.ID).and.not.include(unlinked.ID)
      for (const role of list) expect(role.Policies.map((link) => link.ID)).to.include(otherPolicy.ID)
    })
    it('?policy= of a deleted policy lists no role: the links it had are gone from every read', async () => {
      const doomed = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('doomed') })
      const linked = await createRole({ Name: unique('was-linked'), Policies: [{ ID: doomed.ID }] })
      const before = (await agent.request('GET', `/v1/acl/roles?policy=${doomed.ID}`)).body as Array<{ ID: string }>
      expect(before.map((role) => role.ID)).to.deep.equal([linked.ID])
      expect((await agent.request('DELETE', `/v1/acl/policy/${doomed.ID}`)).status).to.equal(200)
      expect((await agent.request('GET', `/v1/acl/role/${linked.ID}`)).body.Policies).to.deep.equal([])
      const after = await agent.request('GET', `/v1/acl/roles?policy=${doomed.ID}`)
      expect(after.status, after.text).to.equal(200)
      expect(after.body).to.deep.equal([])
    })
  })

  describe('validation (400, nothing written)', () => {
    it('Name is required', async () => {
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Description: 'nameless' } }), 400, 'invalid_input', 'Name')
    })

    it('Name allows only alphanumerics, "-" and "_"', async () => {
      const name = `role with spaces ${process.pid}`
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: name } }), 400, 'invalid_input', 'Name')
      expect(await roleNames()).to.not.include(name)
    })

    it('names are unique: a second role with the same name is a 400', async () => {
      const name = unique('dup')
      const first = await createRole({ Name: name })
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: name, Description: 'second' } }), 400, 'invalid_input', 'Name')
      const read = await agent.request('GET', `/v1/acl/role/name/${name}`)
      expect(read.body.ID).to.equal(first.ID)
    })

    it('a link to a policy that does not exist, by Name or by ID, is a 400', async () => {
      const byName = unique('dangling')
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: byName, Policies: [{ Name: unique('nopolicy') }] } }), 400, 'invalid_input', /Policies/)
      const byId = unique('dangling')
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: byId, Policies: [{ ID: MISSING_ID }] } }), 400, 'invalid_input', /Policies/)
      const names = await roleNames()
      expect(names).to.not.include(byName)
      expect(names).to.not.include(byId)
    })

    it('a policy link with a malformed UUID is a 400', async () => {
      const name = unique('badlink')
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: name, Policies: [{ ID: 'abc' }] } }), 400, 'invalid_input', /Policies/)
      expect(await roleNames()).to.not.include(name)
    })

    it('a service identity breaking the name rules is a 400', async () => {
      for (const serviceName of ['UPPER', '_web', 'web_', 'x'.repeat(257)]) {
        const name = unique('badsvc')
        expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: name, ServiceIdentities: [{ ServiceName: serviceName }] } }), 400, 'invalid_input', /ServiceIdentities|ServiceName/)
        expect(await roleNames()).to.not.include(name)
      }
    })

    it('a node identity without a Datacenter is a 400', async () => {
      const name = unique('badnode')
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: name, NodeIdentities: [{ NodeName: 'node-a' }] } }), 400, 'invalid_input', /Datacenter/)
      expect(await roleNames()).to.not.include(name)
    })

    it('a templated policy that does not exist or lacks its variable is a 400', async () => {
      const first = unique('badtemplate')
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: first, TemplatedPolicies: [{ TemplateName: 'builtin/missing' }] } }), 400, 'invalid_input', /TemplatedPolicies|TemplateName/)
      const second = unique('badtemplate')
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: second, TemplatedPolicies: [{ TemplateName: 'builtin/node' }] } }), 400, 'invalid_input', /TemplatedPolicies|TemplateVariables|[Nn]ame/)
      const names = await roleNames()
      expect(names).to.not.include(first)
      expect(names).to.not.include(second)
    })

    it('an unknown field or a wrong type is a 400 naming the field', async () => {
      const name = unique('shape')
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: name, Rules: 'acl = "read"' } }), 400, 'invalid_input', 'Rules')
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: name, Policies: 'role-test-policy' } }), 400, 'invalid_input', 'Policies')
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: name, ServiceIdentities: [{ ServiceName: 7 }] } }), 400, 'invalid_input', /ServiceName/)
      expect(await roleNames()).to.not.include(name)
    })

    it('malformed JSON and a body over 1 MiB are rejected and the server still answers', async () => {
      const before = await roleNames()
      expectError(await agent.request('PUT', '/v1/acl/role', { raw: '{"Name":"x",', headers: { 'Content-Type': 'application/json' } }), 400, 'invalid_input')
      expectError(await agent.request('PUT', '/v1/acl/role', { body: { Name: unique('big'), Description: 'z'.repeat(1100 * 1024) } }), 413, 'payload_too_large')
      expect(await roleNames()).to.deep.equal(before)
    })
  })

  describe('update', () => {
    it('update replaces the role: omitted fields take their defaults', async () => {
      const created = await createRole({ Name: unique('replace'), Description: 'old', Policies: [{ ID: policy.ID }], ServiceIdentities: [{ ServiceName: 'web' }] })
      const updated = await agent.request('PUT', `/v1/acl/role/${created.ID}`, { body: { Name: created.Name } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.Description).to.equal('')
      expect(updated.body.Policies ?? []).to.deep.equal([])
      expect(updated.body.ServiceIdentities ?? []).to.deep.equal([])
    })

    it('a read role sent back as the update body (read-modify-write) is accepted; response-only fields are ignored', async () => {
      const created = await createRole({ Name: unique('rmw'), Policies: [{ ID: policy.ID }], NodeIdentities: [{ NodeName: 'node-a', Datacenter: 'dc1' }] })
      const read = await agent.request('GET', `/v1/acl/role/${created.ID}`)
      const updated = await agent.request('PUT', `/v1/acl/role/${created.ID}`, { body: { ...read.body, Description: 'rmw', CreateIndex: 1, ModifyIndex: 1, Hash: 'bogus' } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.Description).to.equal('rmw')
      expect(updated.body.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
      expect(updated.body.CreateIndex).to.equal(created.CreateIndex)
      expect(updated.body.Hash).to.not.equal('bogus')
    })

    it('update raises ModifyIndex and keeps CreateIndex', async () => {
      const created = await createRole({ Name: unique('indexes') })
      const updated = await agent.request('PUT', `/v1/acl/role/${created.ID}`, { body: { Name: created.Name, Policies: [{ Name: policy.Name }] } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.ModifyIndex).to.be.above(created.ModifyIndex)
      expect(updated.body.CreateIndex).to.equal(created.CreateIndex)
      expect(updated.body.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
    })

    it('a body ID that differs from the path is a 400 naming ID', async () => {
      const created = await createRole({ Name: unique('mismatch') })
      const response = await agent.request('PUT', `/v1/acl/role/${created.ID}`, { body: { ID: MISSING_ID, Name: created.Name, Description: 'x' } })
      expectError(response, 400, 'invalid_input', 'ID')
      const read = await agent.request('GET', `/v1/acl/role/${created.ID}`)
      expect(read.body.ModifyIndex).to.equal(created.ModifyIndex)
    })

    it('a body ID equal to the path is accepted', async () => {
      const created = await createRole({ Name: unique('sameid') })
      const response = await agent.request('PUT', `/v1/acl/role/${created.ID}`, { body: { ID: created.ID, Name: created.Name, Description: 'same' } })
      expect(response.status, response.text).to.equal(200)
      expect(response.body.Description).to.equal('same')
    })

    it('Name is required on update', async () => {
      const created = await createRole({ Name: unique('noname') })
      expectError(await agent.request('PUT', `/v1/acl/role/${created.ID}`, { body: { Description: 'x' } }), 400, 'invalid_input', 'Name')
    })

    it('a link to a policy that does not exist is a 400 on update, and nothing changes', async () => {
      const created = await createRole({ Name: unique('updlink'), Policies: [{ ID: policy.ID }] })
      expectError(await agent.request('PUT', `/v1/acl/role/${created.ID}`, { body: { Name: created.Name, Policies: [{ ID: MISSING_ID }] } }), 400, 'invalid_input', /Policies/)
      const read = await agent.request('GET', `/v1/acl/role/${created.ID}`)
      expect(read.body.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
    })

    it('a role may be renamed and is then found by its new name only', async () => {
      const created = await createRole({ Name: unique('oldname') })
      const newName = unique('newname')
      const updated = await agent.request('PUT', `/v1/acl/role/${created.ID}`, { body: { Name: newName } })
      expect(updated.status, updated.text).to.equal(200)
      expect((await agent.request('GET', `/v1/acl/role/name/${newName}`)).body.ID).to.equal(created.ID)
      expect((await agent.request('GET', `/v1/acl/role/name/${created.Name}`)).status).to.equal(404)
    })

    it('renaming a policy keeps roles linked; they show the current Name', async () => {
      const renamable = (await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('pol-before') } })).body
      const role = await createRole({ Name: unique('follows'), Policies: [{ Name: renamable.Name }] })
      const newName = unique('pol-after')
      const renamed = await agent.request('PUT', `/v1/acl/policy/${renamable.ID}`, { body: { Name: newName } })
      expect(renamed.status, renamed.text).to.equal(200)
      const read = await agent.request('GET', `/v1/acl/role/${role.ID}`)
      expect(read.body.Policies).to.deep.equal([{ ID: renamable.ID, Name: newName }])
    })

    it('update of a role that does not exist is a 4xx and creates nothing', async () => {
      const name = unique('ghost')
      const response = await agent.request('PUT', `/v1/acl/role/${MISSING_ID}`, { body: { Name: name } })
      expect(response.status, response.text).to.be.within(400, 499)
      expect(response.body.Code).to.be.a('string')
      expect(await roleNames()).to.not.include(name)
    })
  })

  describe('delete', () => {
    it('delete answers JSON true and the role is gone', async () => {
      const created = await createRole({ Name: unique('del') })
      const response = await agent.request('DELETE', `/v1/acl/role/${created.ID}`)
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.equal(true)
      expectError(await agent.request('GET', `/v1/acl/role/${created.ID}`), 404, 'not_found')
      expect(await roleNames()).to.not.include(created.Name)
    })

    it('delete of a role that never existed answers true', async () => {
      const response = await agent.request('DELETE', `/v1/acl/role/${MISSING_ID}`)
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.equal(true)
    })
  })

  describe('authorization', () => {
    it('without a token, reads and writes are 403 permission_denied', async () => {
      const name = unique('anon')
      expectError(await agent.request('GET', '/v1/acl/roles', { token: null }), 403, 'permission_denied')
      expectError(await agent.request('PUT', '/v1/acl/role', { token: null, body: { Name: name } }), 403, 'permission_denied')
      expect(await roleNames()).to.not.include(name)
    })

    it('an acl:read token may list and read roles but not write them', async () => {
      const created = await createRole({ Name: unique('readable') })
      expect((await agent.request('GET', '/v1/acl/roles', { token: readToken })).status).to.equal(200)
      expect((await agent.request('GET', `/v1/acl/role/${created.ID}`, { token: readToken })).status).to.equal(200)
      expect((await agent.request('GET', `/v1/acl/role/name/${created.Name}`, { token: readToken })).status).to.equal(200)
      const name = unique('readerwrite')
      expectError(await agent.request('PUT', '/v1/acl/role', { token: readToken, body: { Name: name } }), 403, 'permission_denied')
      expectError(await agent.request('PUT', `/v1/acl/role/${created.ID}`, { token: readToken, body: { Name: created.Name, Description: 'x' } }), 403, 'permission_denied')
      expectError(await agent.request('DELETE', `/v1/acl/role/${created.ID}`, { token: readToken }), 403, 'permission_denied')
      expect(await roleNames()).to.include(created.Name).and.not.include(name)
    })
  })

  describe('namespaces', () => {
    it('names are unique per namespace: the same name may exist in another namespace', async () => {
      const name = unique('shared')
      const inDefault = await createRole({ Name: name })
      const inOther = await createRole({ Name: name, Namespace: 'roles-ns' })
      expect(inOther.Namespace).to.equal('roles-ns')
      expect(inOther.ID).to.not.equal(inDefault.ID)
      expect((await agent.request('GET', `/v1/acl/role/name/${name}?ns=roles-ns`)).body.ID).to.equal(inOther.ID)
      expect((await agent.request('GET', `/v1/acl/role/name/${name}`)).body.ID).to.equal(inDefault.ID)
    })

    it('a list is scoped to one namespace; ns=* lists all', async () => {
      const a = await createRole({ Name: unique('scoped'), Namespace: 'roles-a' })
      const b = await createRole({ Name: unique('scoped') })
      const scoped = (await agent.request('GET', '/v1/acl/roles?ns=roles-a')).body as Array<{ ID: string }>
      expect(scoped.map((role) => role.ID)).to.deep.equal([a.ID])
      const all = (await agent.request('GET', '/v1/acl/roles?ns=*')).body as Array<{ ID: string }>
      expect(all.map((role) => role.ID)).to.include.members([a.ID, b.ID])
    })

    it('the X-Service-Namespace header places a role when no body Namespace or ?ns is given', async () => {
      const response = await agent.request('PUT', '/v1/acl/role', { body: { Name: unique('hdr') }, headers: { 'X-Service-Namespace': 'roles-hdr' } })
      expect(response.status, response.text).to.equal(200)
      expect(response.body.Namespace).to.equal('roles-hdr')
    })
  })
})
