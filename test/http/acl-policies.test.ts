/**
 * ACL policies over HTTP, against the contract (api.md, "Policies") and warden's readings: create, read by ID and by
 * name, update (PUT replaces, indexes), delete (answers true, also for what never existed), list (without Rules), the
 * built-in global-management policy, name rules and uniqueness per namespace, namespace precedence, and the shape of
 * every error (Error, Code, Field) for bad bodies, bad UUIDs and oversized bodies, with nothing written on error.
 */
import { expect } from 'chai'
import { connect } from 'node:net'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError, GLOBAL_MANAGEMENT_ID, listed, ok, unique, UUID } from '../support/api.js'

describe('ACL policies', () => {
  let agent: AgentProcess
  let readToken: string

  const createPolicy = (body: Record<string, unknown>, path = '/v1/acl/policy'): Promise<any> => ok(agent, 'PUT', path, body)
  const policyNames = (query = ''): Promise<string[]> => listed(agent, `/v1/acl/policies${query}`, 'Name')

  before(async () => {
    agent = await startAgent()
    // A token holding acl:read only (enforcement has landed, so the read grant is an explicit policy).
    const reader = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'acl-reader', Rules: 'acl = "read"' } })
    expect(reader.status, reader.text).to.equal(200)
    const token = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'reader', Policies: [{ Name: 'acl-reader' }] } })
    expect(token.status, token.text).to.equal(200)
    readToken = token.body.SecretID
  })
  after(async () => {
    await agent.stop()
  })

  describe('create and read', () => {
    it('create returns the stored policy with a UUID ID, defaults, Hash and equal CreateIndex and ModifyIndex', async () => {
      const name = unique('create')
      const policy = await createPolicy({ Name: name, Rules: 'acl = "read"' })
      expect(policy.ID).to.match(UUID)
      expect(policy.Name).to.equal(name)
      expect(policy.Description).to.equal('')
      expect(policy.Rules).to.equal('acl = "read"')
      expect(policy.Hash).to.be.a('string').that.is.not.empty
      expect(policy.CreateIndex).to.be.a('number').above(0)
      expect(policy.ModifyIndex).to.equal(policy.CreateIndex)
    })

    it('Rules default to "" when omitted', async () => {
      const policy = await createPolicy({ Name: unique('norules') })
      expect(policy.Rules).to.equal('')
    })

    it('Datacenters and Description are stored as given', async () => {
      const policy = await createPolicy({ Name: unique('dcs'), Description: 'two dcs', Datacenters: ['dc1', 'dc2'] })
      const read = await agent.request('GET', `/v1/acl/policy/${policy.ID}`)
      expect(read.body.Datacenters).to.deep.equal(['dc1', 'dc2'])
      expect(read.body.Description).to.equal('two dcs')
    })

    it('read by ID returns the policy with its Rules', async () => {
      const created = await createPolicy({ Name: unique('byid'), Rules: 'operator = "read"' })
      const read = await agent.request('GET', `/v1/acl/policy/${created.ID}`)
      expect(read.status, read.text).to.equal(200)
      expect(read.body).to.deep.include({ ID: created.ID, Name: created.Name, Rules: 'operator = "read"', Hash: created.Hash })
      expect(read.body.CreateIndex).to.equal(created.CreateIndex)
      expect(read.body.ModifyIndex).to.equal(created.ModifyIndex)
    })

    it('read by name returns the same policy as read by ID', async () => {
      const created = await createPolicy({ Name: unique('byname'), Rules: 'keyring = "read"' })
      const byName = await agent.request('GET', `/v1/acl/policy/name/${created.Name}`)
      expect(byName.status, byName.text).to.equal(200)
      const byId = await agent.request('GET', `/v1/acl/policy/${created.ID}`)
      expect(byName.body).to.deep.equal(byId.body)
    })

    it('read of a missing ID is a 404 not_found', async () => {
      const response = await agent.request('GET', '/v1/acl/policy/6f0a5a3e-3f3c-4c4f-9a57-1b2a3c4d5e6f')
      expectError(response, 404, 'not_found')
    })

    it('read of a missing name is a 404 not_found', async () => {
      const response = await agent.request('GET', `/v1/acl/policy/name/${unique('nosuch')}`)
      expectError(response, 404, 'not_found')
    })

    it('a read by name with the name left out is a 400 naming name, for policies and roles', async () => {
      for (const path of ['/v1/acl/policy/name/', '/v1/acl/policy/name', '/v1/acl/role/name/']) {
        expectError(await agent.request('GET', path), 400, 'invalid_input', 'name')
      }
    })

    it('a malformed UUID in the path is a 400 invalid_input', async () => {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const response = await agent.request(method, '/v1/acl/policy/not-a-uuid', method === 'PUT' ? { body: { Name: unique('baduuid') } } : {})
        expectError(response, 400, 'invalid_input')
      }
      expect(await policyNames()).to.not.satisfy((names: string[]) => names.some((name) => name.startsWith('baduuid')))
    })

    it('list returns every policy without Rules, including the built-in global-management', async () => {
      const created = await createPolicy({ Name: unique('listed'), Rules: 'acl = "read"' })
      const response = await agent.request('GET', '/v1/acl/policies')
      expect(response.status, response.text).to.equal(200)
      const list = response.body as Array<Record<string, unknown>>
      const mine = list.find((policy) => policy.ID === created.ID)
      expect(mine).to.include({ Name: created.Name, Hash: created.Hash })
      const builtin = list.find((policy) => policy.ID === GLOBAL_MANAGEMENT_ID)
      expect(builtin).to.include({ Name: 'global-management' })
      for (const policy of list) expect(policy).to.not.have.property('Rules')
    })
  })

  describe('validation (4xx, nothing written, the server still answers)', () => {
    it('Name is required', async () => {
      const response = await agent.request('PUT', '/v1/acl/policy', { body: { Rules: '' } })
      expectError(response, 400, 'invalid_input', 'Name')
    })

    it('Name allows only alphanumerics, "-" and "_"', async () => {
      const name = `bad name/${process.pid}`
      const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: name } })
      expectError(response, 400, 'invalid_input', 'Name')
      expect(await policyNames()).to.not.include(name)
    })

    it('names are unique: a second policy with the same name is a 400 naming Name', async () => {
      const name = unique('dup')
      const first = await createPolicy({ Name: name })
      const second = await agent.request('PUT', '/v1/acl/policy', { body: { Name: name, Description: 'second' } })
      expectError(second, 400, 'invalid_input', 'Name')
      const read = await agent.request('GET', `/v1/acl/policy/name/${name}`)
      expect(read.body.ID).to.equal(first.ID)
      expect(read.body.Description).to.equal('')
    })

    it('malformed JSON is a 400 and writes nothing', async () => {
      const before = await policyNames()
      const response = await agent.request('PUT', '/v1/acl/policy', { raw: '{"Name": "half', headers: { 'Content-Type': 'application/json' } })
      expectError(response, 400, 'invalid_input')
      expect(await policyNames()).to.deep.equal(before)
    })

    it('a body that is not a JSON object is a 400', async () => {
      const response = await agent.request('PUT', '/v1/acl/policy', { body: ['Name'] })
      expectError(response, 400, 'invalid_input')
    })

    it('a field of the wrong type is a 400 naming the field', async () => {
      const name = unique('types')
      expectError(await agent.request('PUT', '/v1/acl/policy', { body: { Name: 42 } }), 400, 'invalid_input', 'Name')
      expectError(await agent.request('PUT', '/v1/acl/policy', { body: { Name: name, Rules: ['x'] } }), 400, 'invalid_input', 'Rules')
      expectError(await agent.request('PUT', '/v1/acl/policy', { body: { Name: name, Datacenters: 'dc1' } }), 400, 'invalid_input', 'Datacenters')
      expectError(await agent.request('PUT', '/v1/acl/policy', { body: { Name: name, Description: false } }), 400, 'invalid_input', 'Description')
      expect(await policyNames()).to.not.include(name)
    })

    it('an unknown field is a 400 naming it', async () => {
      const name = unique('unknown')
      const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: name, Colour: 'blue' } })
      expectError(response, 400, 'invalid_input', 'Colour')
      expect(await policyNames()).to.not.include(name)
    })

    it('Rules that do not parse are a 400 naming Rules', async () => {
      const name = unique('badrules')
      const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: name, Rules: 'service "web" { policy = ' } })
      expectError(response, 400, 'invalid_input', 'Rules')
      expect(await policyNames()).to.not.include(name)
    })

    it('a body over 1 MiB is a 413 payload_too_large, nothing is written, and the server still answers', async () => {
      const name = unique('huge')
      const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: name, Description: 'x'.repeat(1024 * 1024 + 10) } })
      expectError(response, 413, 'payload_too_large')
      expect(await policyNames()).to.not.include(name)
      const after = await agent.request('GET', '/v1/acl/policies')
      expect(after.status).to.equal(200)
    })

    it('a client that hangs up halfway through a body writes nothing, and the server still answers', async () => {
      const name = unique('halfway')
      const [host, port] = agent.httpAddress.split(':')
      const body = JSON.stringify({ Name: name, Description: 'x'.repeat(5_000) })
      await new Promise<void>((resolve, reject) => {
        const socket = connect({ host, port: Number(port) }, () => {
          socket.write(
            `PUT /v1/acl/policy HTTP/1.1\r\nHost: ${agent.httpAddress}\r\nX-Service-Token: ${agent.managementToken}\r\n` +
              `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 100)}`,
            () => setTimeout(() => socket.destroy(), 50),
          )
        })
        socket.on('close', () => resolve())
        socket.on('error', reject)
      })
      expect(await policyNames()).to.not.include(name)
      const after = await agent.request('GET', '/v1/acl/policies')
      expect(after.status).to.equal(200)
    })

    it('the server still answers after a run of bad requests', async () => {
      for (const raw of ['', 'null', '[]', '{"Name":', '"x"', '{"Name":"a","Name":}']) {
        const response = await agent.request('PUT', '/v1/acl/policy', { raw, headers: { 'Content-Type': 'application/json' } })
        expect(response.status, `${raw} -> ${response.text}`).to.be.within(400, 499)
      }
      const list = await agent.request('GET', '/v1/acl/policies')
      expect(list.status).to.equal(200)
    })
  })

  describe('update', () => {
    it('update replaces the policy: omitted optional fields take their defaults', async () => {
      const created = await createPolicy({ Name: unique('replace'), Description: 'old', Rules: 'acl = "read"', Datacenters: ['dc1'] })
      const updated = await agent.request('PUT', `/v1/acl/policy/${created.ID}`, { body: { Name: created.Name } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.Description).to.equal('')
      expect(updated.body.Rules).to.equal('')
      expect(updated.body.Datacenters ?? []).to.deep.equal([])
      const read = await agent.request('GET', `/v1/acl/policy/${created.ID}`)
      expect(read.body.Description).to.equal('')
      expect(read.body.Rules).to.equal('')
    })

    it('update raises ModifyIndex and keeps CreateIndex', async () => {
      const created = await createPolicy({ Name: unique('indexes') })
      const updated = await agent.request('PUT', `/v1/acl/policy/${created.ID}`, { body: { Name: created.Name, Description: 'changed' } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.CreateIndex).to.equal(created.CreateIndex)
      expect(updated.body.ModifyIndex).to.be.above(created.ModifyIndex)
      expect(updated.body.Hash).to.not.equal(created.Hash)
    })

    it('a body ID that differs from the path is a 400 naming ID, and nothing changes', async () => {
      const created = await createPolicy({ Name: unique('idmismatch') })
      const other = await createPolicy({ Name: unique('idother') })
      const response = await agent.request('PUT', `/v1/acl/policy/${created.ID}`, { body: { ID: other.ID, Name: created.Name, Description: 'changed' } })
      expectError(response, 400, 'invalid_input', 'ID')
      const read = await agent.request('GET', `/v1/acl/policy/${created.ID}`)
      expect(read.body.Description).to.equal('')
      expect(read.body.ModifyIndex).to.equal(created.ModifyIndex)
    })

    it('a body ID equal to the path is accepted', async () => {
      const created = await createPolicy({ Name: unique('idsame') })
      const response = await agent.request('PUT', `/v1/acl/policy/${created.ID}`, { body: { ID: created.ID, Name: created.Name, Description: 'ok' } })
      expect(response.status, response.text).to.equal(200)
      expect(response.body.Description).to.equal('ok')
    })

    it('Name is required on update', async () => {
      const created = await createPolicy({ Name: unique('noname') })
      const response = await agent.request('PUT', `/v1/acl/policy/${created.ID}`, { body: { Description: 'x' } })
      expectError(response, 400, 'invalid_input', 'Name')
    })

    it('response-only fields sent back by read-modify-write clients are accepted and ignored', async () => {
      const created = await createPolicy({ Name: unique('rmw') })
      const read = await agent.request('GET', `/v1/acl/policy/${created.ID}`)
      const body = { ...read.body, Description: 'via read-modify-write', CreateIndex: 999999, ModifyIndex: 999999, Hash: 'bogus' }
      const updated = await agent.request('PUT', `/v1/acl/policy/${created.ID}`, { body })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.Description).to.equal('via read-modify-write')
      expect(updated.body.CreateIndex).to.equal(created.CreateIndex)
      expect(updated.body.ModifyIndex).to.not.equal(999999)
      expect(updated.body.Hash).to.not.equal('bogus')
    })

    it('renaming a policy to a name another policy has is a 400', async () => {
      const first = await createPolicy({ Name: unique('taken') })
      const second = await createPolicy({ Name: unique('renamer') })
      const response = await agent.request('PUT', `/v1/acl/policy/${second.ID}`, { body: { Name: first.Name } })
      expectError(response, 400, 'invalid_input', 'Name')
    })

    it('update of a policy that does not exist is a 4xx and creates nothing', async () => {
      const id = '0b7d2d33-5c55-4d7f-8a55-aaaaaaaaaaaa'
      const name = unique('ghost')
      const response = await agent.request('PUT', `/v1/acl/policy/${id}`, { body: { Name: name } })
      expect(response.status, response.text).to.be.within(400, 499)
      expect(response.body.Code).to.be.a('string')
      expect((await agent.request('GET', `/v1/acl/policy/${id}`)).status).to.equal(404)
    })

    it('renaming a policy keeps tokens linked; they show the current Name', async () => {
      const policy = await createPolicy({ Name: unique('before') })
      const token = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ Name: policy.Name }] } })
      expect(token.status, token.text).to.equal(200)
      expect(token.body.Policies).to.deep.equal([{ ID: policy.ID, Name: policy.Name }])
      const newName = unique('after')
      const renamed = await agent.request('PUT', `/v1/acl/policy/${policy.ID}`, { body: { Name: newName } })
      expect(renamed.status, renamed.text).to.equal(200)
      const read = await agent.request('GET', `/v1/acl/token/${token.body.AccessorID}`)
      expect(read.body.Policies).to.deep.equal([{ ID: policy.ID, Name: newName }])
    })
  })

  describe('delete', () => {
    it('delete answers JSON true and the policy is gone', async () => {
      const created = await createPolicy({ Name: unique('del') })
      const response = await agent.request('DELETE', `/v1/acl/policy/${created.ID}`)
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.equal(true)
      expect((await agent.request('GET', `/v1/acl/policy/${created.ID}`)).status).to.equal(404)
      expect(await policyNames()).to.not.include(created.Name)
    })

    it('delete of a policy that never existed answers true', async () => {
      const response = await agent.request('DELETE', '/v1/acl/policy/3a4b5c6d-0000-4000-8000-123456789abc')
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.equal(true)
    })

    it('global-management cannot be deleted', async () => {
      const response = await agent.request('DELETE', `/v1/acl/policy/${GLOBAL_MANAGEMENT_ID}`)
      expect(response.status, response.text).to.be.within(400, 499)
      expect(response.body.Code).to.be.a('string')
      expect(response.body.Error).to.be.a('string')
      const read = await agent.request('GET', `/v1/acl/policy/${GLOBAL_MANAGEMENT_ID}`)
      expect(read.status).to.equal(200)
      expect(read.body.Name).to.equal('global-management')
    })

    it('the Rules of global-management cannot be changed', async () => {
      const before = await agent.request('GET', `/v1/acl/policy/${GLOBAL_MANAGEMENT_ID}`)
      const response = await agent.request('PUT', `/v1/acl/policy/${GLOBAL_MANAGEMENT_ID}`, {
        body: { Name: before.body.Name, Description: before.body.Description, Rules: 'acl = "read"' },
      })
      expect(response.status, response.text).to.be.within(400, 499)
      expect(response.body.Error).to.be.a('string')
      const after = await agent.request('GET', `/v1/acl/policy/${GLOBAL_MANAGEMENT_ID}`)
      expect(after.body.Rules).to.equal(before.body.Rules)
      expect(after.body.ModifyIndex).to.equal(before.body.ModifyIndex)
      // The management token still manages.
      const write = await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('stillmanage') } })
      expect(write.status).to.equal(200)
    })
  })

  describe('authorization', () => {
    it('without a token, reads and writes are 403 permission_denied', async () => {
      expectError(await agent.request('GET', '/v1/acl/policies', { token: null }), 403, 'permission_denied')
      expectError(await agent.request('GET', `/v1/acl/policy/${GLOBAL_MANAGEMENT_ID}`, { token: null }), 403, 'permission_denied')
      const name = unique('anon')
      expectError(await agent.request('PUT', '/v1/acl/policy', { token: null, body: { Name: name } }), 403, 'permission_denied')
      expect(await policyNames()).to.not.include(name)
    })

    it('a token with only acl:read may list and read but not write (403 permission_denied)', async () => {
      const created = await createPolicy({ Name: unique('readable') })
      const list = await agent.request('GET', '/v1/acl/policies', { token: readToken })
      expect(list.status, list.text).to.equal(200)
      const read = await agent.request('GET', `/v1/acl/policy/${created.ID}`, { token: readToken })
      expect(read.status).to.equal(200)
      const byName = await agent.request('GET', `/v1/acl/policy/name/${created.Name}`, { token: readToken })
      expect(byName.status).to.equal(200)
      const name = unique('readerwrite')
      expectError(await agent.request('PUT', '/v1/acl/policy', { token: readToken, body: { Name: name } }), 403, 'permission_denied')
      expectError(await agent.request('PUT', `/v1/acl/policy/${created.ID}`, { token: readToken, body: { Name: created.Name, Description: 'x' } }), 403, 'permission_denied')
      expectError(await agent.request('DELETE', `/v1/acl/policy/${created.ID}`, { token: readToken }), 403, 'permission_denied')
      expect((await agent.request('GET', `/v1/acl/policy/${created.ID}`)).body.Description).to.equal('')
      expect(await policyNames()).to.not.include(name)
    })

    it('an unknown secret is a 403 acl_not_found', async () => {
      const response = await agent.request('GET', '/v1/acl/policies', { token: '11111111-2222-4333-8444-555555555555' })
      expectError(response, 403, 'acl_not_found')
    })
  })

  describe('namespaces', () => {
    it('a body Namespace on create places the policy there', async () => {
      const policy = await createPolicy({ Name: unique('nsbody'), Namespace: 'team-a' })
      expect(policy.Namespace).to.equal('team-a')
    })

    it('without any namespace source the policy is in "default"', async () => {
      const policy = await createPolicy({ Name: unique('nsdefault') })
      expect(policy.Namespace).to.equal('default')
    })

    it('names are unique per namespace: the same name may exist in two namespaces', async () => {
      const name = unique('shared')
      const inDefault = await createPolicy({ Name: name })
      const inOther = await createPolicy({ Name: name, Namespace: 'team-b' })
      expect(inOther.ID).to.not.equal(inDefault.ID)
      const readOther = await agent.request('GET', `/v1/acl/policy/name/${name}?ns=team-b`)
      expect(readOther.body.ID).to.equal(inOther.ID)
      const readDefault = await agent.request('GET', `/v1/acl/policy/name/${name}`)
      expect(readDefault.body.ID).to.equal(inDefault.ID)
    })

    it('the body Namespace wins over ?ns on create', async () => {
      const policy = await createPolicy({ Name: unique('bodywins'), Namespace: 'ns-body' }, '/v1/acl/policy?ns=ns-query')
      expect(policy.Namespace).to.equal('ns-body')
    })

    it('?ns wins over the X-Service-Namespace header', async () => {
      const response = await agent.request('PUT', '/v1/acl/policy?ns=ns-query', { body: { Name: unique('querywins') }, headers: { 'X-Service-Namespace': 'ns-header' } })
      expect(response.status, response.text).to.equal(200)
      expect(response.body.Namespace).to.equal('ns-query')
    })

    it('the X-Service-Namespace header is used when no body Namespace or ?ns is given', async () => {
      const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: unique('header') }, headers: { 'X-Service-Namespace': 'ns-header' } })
      expect(response.status, response.text).to.equal(200)
      expect(response.body.Namespace).to.equal('ns-header')
      const list = await agent.request('GET', '/v1/acl/policies', { headers: { 'X-Service-Namespace': 'ns-header' } })
      expect((list.body as Array<{ Name: string }>).map((p) => p.Name)).to.include(response.body.Name)
    })

    it("the token's namespace is used when nothing else names one", async () => {
      const name = unique('tokenns')
      await createPolicy({ Name: name, Namespace: 'ns-token' })
      const reader = await createPolicy({ Name: unique('nsreader'), Rules: 'acl = "read"', Namespace: 'ns-token' })
      const token = await agent.request('PUT', '/v1/acl/token', { body: { Namespace: 'ns-token', Policies: [{ ID: reader.ID }] } })
      expect(token.status, token.text).to.equal(200)
      expect(token.body.Namespace).to.equal('ns-token')
      const list = await agent.request('GET', '/v1/acl/policies', { token: token.body.SecretID })
      expect(list.status, list.text).to.equal(200)
      const list_ = list.body as Array<{ Name: string; Namespace: string }>
      expect(list_.map((p) => p.Name)).to.include(name)
      for (const policy of list_) expect(policy.Namespace).to.equal('ns-token')
      const byName = await agent.request('GET', `/v1/acl/policy/name/${name}`, { token: token.body.SecretID })
      expect(byName.status, byName.text).to.equal(200)
    })

    it('a list is scoped to one namespace; ns=* lists all namespaces', async () => {
      const a = await createPolicy({ Name: unique('scope'), Namespace: 'ns-x' })
      const b = await createPolicy({ Name: unique('scope'), Namespace: 'ns-y' })
      const x = (await agent.request('GET', '/v1/acl/policies?ns=ns-x')).body as Array<{ ID: string; Namespace: string }>
      expect(x.map((p) => p.ID)).to.include(a.ID).and.not.include(b.ID)
      for (const policy of x) expect(policy.Namespace).to.equal('ns-x')
      const all = (await agent.request('GET', '/v1/acl/policies?ns=*')).body as Array<{ ID: string }>
      expect(all.map((p) => p.ID)).to.include.members([a.ID, b.ID, GLOBAL_MANAGEMENT_ID])
      const plain = (await agent.request('GET', '/v1/acl/policies')).body as Array<{ ID: string }>
      expect(plain.map((p) => p.ID)).to.not.include(a.ID)
    })

    it('update addressed with ?ns of the policy\'s namespace keeps it there', async () => {
      const policy = await createPolicy({ Name: unique('keepns'), Namespace: 'ns-keep' })
      const updated = await agent.request('PUT', `/v1/acl/policy/${policy.ID}?ns=ns-keep`, { body: { Name: policy.Name, Description: 'x' } })
      expect(updated.status, updated.text).to.equal(200)
      expect(updated.body.Namespace).to.equal('ns-keep')
    })
  })
})
