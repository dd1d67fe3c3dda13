/**
 * ACL bootstrap, per warden's readings: an agent started without --dev and without an initial management token has
 * no management token; `PUT /v1/acl/bootstrap` creates one (linked to global-management) exactly once, and every later
 * call is a 403 bootstrap_done, also after a restart on the same data dir. An agent in --dev already has its
 * management token, so bootstrap there is done from the start.
 */
import { expect } from 'chai'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { ANONYMOUS_ID, expectError, GLOBAL_MANAGEMENT_ID, UUID } from '../support/api.js'

describe('ACL bootstrap', () => {
  describe('on an agent without --dev and without an initial management token', () => {
    let agent: AgentProcess
    let dataDir: string
    let bootstrapped: any

    before(async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'warden-bootstrap-'))
      agent = await startAgent({ dev: false, dataDir, keepDataDir: true })
    })
    after(async () => {
      await agent.stop()
      await rm(dataDir, { recursive: true, force: true })
    })

    it('prints no management token', () => {
      expect(agent.managementToken).to.equal('')
      expect(agent.logs.some((line) => line.startsWith('Management token:'))).to.equal(false)
    })

    it('before bootstrap, ACL reads without a token are 403 permission_denied', async () => {
      expectError(await agent.request('GET', '/v1/acl/tokens', { token: null }), 403, 'permission_denied')
    })

    it('refuses a BootstrapSecret that is not a UUID or lies in the built-in range, and bootstraps nothing', async () => {
      for (const secret of ['not-a-uuid', '00000000-0000-0000-0000-000000000005']) {
        const refused = await agent.request('PUT', '/v1/acl/bootstrap', { token: null, body: { BootstrapSecret: secret } })
        expectError(refused, 400, 'invalid_input', 'BootstrapSecret')
      }
      expectError(await agent.request('GET', '/v1/acl/tokens', { token: '00000000-0000-0000-0000-000000000005' }), 403, 'acl_not_found')
    })

    it('the first bootstrap, needing no token, creates a token linked to the built-in global-management', async () => {
      const response = await agent.request('PUT', '/v1/acl/bootstrap', { token: null })
      expect(response.status, response.text).to.equal(200)
      bootstrapped = response.body
      expect(bootstrapped.Policies).to.deep.equal([{ ID: GLOBAL_MANAGEMENT_ID, Name: 'global-management' }])
    })

    it('bootstrap answers a new token with real UUID AccessorID and SecretID', () => {
      expect(bootstrapped.AccessorID).to.match(UUID)
      expect(bootstrapped.SecretID).to.match(UUID)
      expect(bootstrapped.CreateIndex).to.be.a('number').above(0)
    })

    it('the bootstrap token is a management token: it may read and write everything', async () => {
      const secret = bootstrapped.SecretID as string
      const policy = await agent.request('PUT', '/v1/acl/policy', { token: secret, body: { Name: 'after-bootstrap' } })
      expect(policy.status, policy.text).to.equal(200)
      const tokens = await agent.request('GET', '/v1/acl/tokens', { token: secret })
      expect(tokens.status, tokens.text).to.equal(200)
      const list = tokens.body as Array<{ AccessorID: string; SecretID: string }>
      expect(list.find((token) => token.AccessorID === bootstrapped.AccessorID)?.SecretID).to.equal(secret)
      expect(list.map((token) => token.AccessorID)).to.include(ANONYMOUS_ID)
      const self = await agent.request('GET', '/v1/acl/token/self', { token: secret })
      expect(self.body.AccessorID).to.equal(bootstrapped.AccessorID)
    })

    it('a second bootstrap is a 403 bootstrap_done and creates nothing', async () => {
      const before = await agent.request('GET', '/v1/acl/tokens', { token: bootstrapped.SecretID })
      expectError(await agent.request('PUT', '/v1/acl/bootstrap', { token: null }), 403, 'bootstrap_done')
      expectError(await agent.request('PUT', '/v1/acl/bootstrap', { token: bootstrapped.SecretID }), 403, 'bootstrap_done')
      const after = await agent.request('GET', '/v1/acl/tokens', { token: bootstrapped.SecretID })
      expect((after.body as unknown[]).length).to.equal((before.body as unknown[]).length)
    })

    it('after a restart on the same data dir, bootstrap stays done and the bootstrap token still works', async () => {
      await agent.stop()
      agent = await startAgent({ dev: false, dataDir, keepDataDir: true })
      expectError(await agent.request('PUT', '/v1/acl/bootstrap', { token: null }), 403, 'bootstrap_done')
      const policy = await agent.request('GET', '/v1/acl/policy/name/after-bootstrap', { token: bootstrapped.SecretID })
      expect(policy.status, policy.text).to.equal(200)
    })
  })

  describe('on an agent in --dev', () => {
    let agent: AgentProcess
    before(async () => {
      agent = await startAgent()
    })
    after(async () => {
      await agent.stop()
    })

    it('bootstrap is already done: 403 bootstrap_done', async () => {
      expectError(await agent.request('PUT', '/v1/acl/bootstrap', { token: null }), 403, 'bootstrap_done')
    })
  })
})
