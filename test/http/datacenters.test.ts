/**
 * Datacenters joined over WAN links (issue 19, first step): servers started with `--join-wan` (a cluster address of
 * a server of another datacenter) learn every datacenter, and `GET /v1/catalog/datacenters` (no token, as Consul)
 * lists the local one first, then the others. One address is enough: a datacenter that joins through another
 * becomes known to the first.
 *
 * Method: single-node datacenters as real agent processes sharing a cluster key, on 127.0.0.1.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runWarden } from '../cli/run.js'
import { eventually } from '../cluster/eventually.js'
import { startAgent, type AgentProcess } from '../support/agent.js'

describe('datacenters over WAN links', function () {
  this.timeout(60_000)
  const key = randomBytes(32).toString('base64')
  const agents: AgentProcess[] = []

  afterEach(async () => {
    await Promise.all(agents.splice(0).map((agent) => agent.stop()))
  })

  async function datacenter(name: string, join: string[] = []): Promise<AgentProcess> {
    const agent = await startAgent({ args: ['--datacenter', name, '--node-name', `${name}-s1`, ...join.flatMap((address) => ['--join-wan', address])], env: { WARDEN_CLUSTER_KEY: key } })
    agents.push(agent)
    return agent
  }

  const datacenters = async (agent: AgentProcess): Promise<string[]> => (await agent.request('GET', '/v1/catalog/datacenters', { token: null })).body as string[]

  it('lists every datacenter, local first, learned from one --join-wan address each', async () => {
    const dc1 = await datacenter('dc1')
    const dc2 = await datacenter('dc2', [dc1.clusterAddress])
    const dc3 = await datacenter('dc3', [dc2.clusterAddress])
    const everywhere = async (): Promise<boolean> => {
      for (const agent of [dc1, dc2, dc3]) if ([...(await datacenters(agent))].sort().join() !== 'dc1,dc2,dc3') return false
      return true
    }
    await eventually(everywhere, 'every datacenter is known everywhere')
    expect((await datacenters(dc1))[0]).to.equal('dc1')
    expect((await datacenters(dc3))[0]).to.equal('dc3')
    const listed = await runWarden(['catalog', 'datacenters', '-http-addr', dc2.httpAddress])
    expect(listed.code, listed.stderr).to.equal(0)
    expect(listed.stdout.split('\n')[0]).to.equal('dc2')
    expect(listed.stdout.trim().split('\n').sort()).to.deep.equal(['dc1', 'dc2', 'dc3'])
  })

  it('a server with another cluster key never joins: its datacenter stays unknown', async () => {
    const dc1 = await datacenter('dc1')
    const stranger = await startAgent({ args: ['--datacenter', 'dc9', '--node-name', 'dc9-s1', '--join-wan', dc1.clusterAddress], env: { WARDEN_CLUSTER_KEY: randomBytes(32).toString('base64') } })
    agents.push(stranger)
    await new Promise((resolve) => setTimeout(resolve, 1500))
    expect(await datacenters(dc1)).to.deep.equal(['dc1'])
    expect(await datacenters(stranger)).to.deep.equal(['dc9'])
  })

  describe('?dc forwarding', () => {
    it('serves a read, a write and a blocking query of another datacenter there, with its status, headers and body', async () => {
      const dc1 = await datacenter('dc1')
      const dc2 = await datacenter('dc2', [dc1.clusterAddress])
      await eventually(async () => (await datacenters(dc2)).includes('dc1'), 'dc2 knows dc1')
      // The management token of dc1 (a --dev token of its own) works against dc1 through dc2.
      const token = dc1.managementToken
      const created = await dc2.request('PUT', '/v1/acl/policy?dc=dc1', { token, body: { Name: 'made-through-dc2', Rules: '' } })
      expect(created.status, created.text).to.equal(200)
      expect((await dc1.request('GET', `/v1/acl/policy/${created.body.ID}`)).status).to.equal(200)
      expect((await dc2.request('GET', `/v1/acl/policy/${created.body.ID}`, { token: dc2.managementToken })).status).to.equal(404)
      const listed = await dc2.request('GET', '/v1/acl/policies?dc=dc1', { token })
      expect(listed.status).to.equal(200)
      expect(listed.body.map((policy: { Name: string }) => policy.Name)).to.include('made-through-dc2')
      const local = await dc1.request('GET', '/v1/acl/policies')
      expect(listed.headers.get('X-Service-Index')).to.equal(local.headers.get('X-Service-Index'))
      // The other datacenter's ACLs decide: dc2's own token means nothing in dc1.
      expect((await dc2.request('GET', '/v1/acl/policies?dc=dc1', { token: dc2.managementToken })).status).to.equal(403)
      // A blocking query held in dc1 through dc2 returns when dc1 changes.
      const index = Number(listed.headers.get('X-Service-Index'))
      const held = dc2.request('GET', `/v1/acl/policies?dc=dc1&index=${index}&wait=20s`, { token })
      await new Promise((resolve) => setTimeout(resolve, 300))
      await dc1.request('PUT', '/v1/acl/policy', { body: { Name: 'wakes-the-query', Rules: '' } })
      const woken = await held
      expect(woken.status).to.equal(200)
      expect(Number(woken.headers.get('X-Service-Index'))).to.be.greaterThan(index)
      expect(woken.body.map((policy: { Name: string }) => policy.Name)).to.include('wakes-the-query')
    })

    it("records a forwarded request in the serving datacenter's audit log as coming from the server that sent it", async () => {
      const dir = await mkdtemp(join(tmpdir(), 'warden-dc-audit-'))
      try {
        const auditFile = join(dir, 'audit.log')
        const dc1 = await startAgent({ args: ['--datacenter', 'dc1', '--node-name', 'dc1-s1', '--audit-log', auditFile], env: { WARDEN_CLUSTER_KEY: key } })
        agents.push(dc1)
        const dc2 = await datacenter('dc2', [dc1.clusterAddress])
        await eventually(async () => (await datacenters(dc2)).includes('dc1'), 'dc2 knows dc1')
        const written = await dc2.request('PUT', '/v1/acl/policy?dc=dc1', { token: dc1.managementToken, body: { Name: 'audited', Rules: '' } })
        expect(written.status).to.equal(200)
        await eventually(async () => (await readFile(auditFile, 'utf8')).includes('"audited"') || (await readFile(auditFile, 'utf8')).includes(written.body.ID), 'the write audited')
        const lines = (await readFile(auditFile, 'utf8')).trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
        const forwarded = lines.filter((line) => line['method'] === 'PUT' && String(line['path']).startsWith('/v1/acl/policy'))
        expect(forwarded.length).to.be.greaterThan(0)
        for (const line of forwarded) expect(line['remote_address']).to.equal('wan:dc2-s1.dc2')
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
    })

    it('unknown datacenter: 404 unknown_datacenter; known but unreachable: 503 no_path_to_datacenter; token self stays local', async () => {
      const dc1 = await datacenter('dc1')
      const dc2 = await datacenter('dc2', [dc1.clusterAddress])
      await eventually(async () => (await datacenters(dc2)).includes('dc1'), 'dc2 knows dc1')
      const unknown = await dc2.request('GET', '/v1/acl/policies?dc=dc7', { token: null })
      expect(unknown.status).to.equal(404)
      expect(unknown.body).to.include({ Code: 'unknown_datacenter', Field: 'dc' })
      const self = await dc2.request('GET', '/v1/acl/token/self?dc=dc1', { token: dc2.managementToken })
      expect(self.status).to.equal(200)
      expect(self.body.SecretID).to.equal(dc2.managementToken)
      await dc1.stop()
      agents.splice(agents.indexOf(dc1), 1)
      await eventually(async () => (await dc2.request('GET', '/v1/acl/policies?dc=dc1', { token: null })).status === 503, 'dc1 unreachable')
      const cut = await dc2.request('PUT', '/v1/acl/policy?dc=dc1', { token: null, body: { Name: 'nowhere', Rules: '' } })
      expect(cut.status).to.equal(503)
      expect(cut.body).to.include({ Code: 'no_path_to_datacenter', Field: 'dc' })
    })
  })

  describe('a secondary datacenter', () => {
    const MANAGEMENT = 'a1b2c3d4-0000-4000-8000-00000000beef'

    async function federation(secondaryArgs: string[] = []): Promise<{ dc1: AgentProcess; dc2: AgentProcess }> {
      const dc1 = await startAgent({ args: ['--datacenter', 'dc1', '--node-name', 'dc1-s1'], env: { WARDEN_CLUSTER_KEY: key, WARDEN_INITIAL_MANAGEMENT_TOKEN: MANAGEMENT } })
      agents.push(dc1)
      const dc2 = await startAgent({
        args: ['--datacenter', 'dc2', '--primary-datacenter', 'dc1', '--node-name', 'dc2-s1', '--join-wan', dc1.clusterAddress, ...secondaryArgs],
        env: { WARDEN_CLUSTER_KEY: key, WARDEN_ACL_REPLICATION_TOKEN: MANAGEMENT },
      })
      agents.push(dc2)
      return { dc1, dc2 }
    }

    const names = async (agent: AgentProcess, path: string): Promise<string[]> => {
      const answer = await agent.request('GET', path, { token: MANAGEMENT })
      return answer.status === 200 ? (answer.body as Array<{ Name: string }>).map((record) => record.Name).sort() : []
    }

    it("replicates the primary's policies and roles, deletions and renames included, and resolves its tokens", async () => {
      const { dc1, dc2 } = await federation()
      const policy = await dc1.request('PUT', '/v1/acl/policy', { token: MANAGEMENT, body: { Name: 'readers', Rules: 'acl = "read"' } })
      const doomed = await dc1.request('PUT', '/v1/acl/policy', { token: MANAGEMENT, body: { Name: 'doomed', Rules: '' } })
      await dc1.request('PUT', '/v1/acl/role', { token: MANAGEMENT, body: { Name: 'ops', Policies: [{ ID: policy.body.ID }] } })
      await eventually(async () => (await names(dc2, '/v1/acl/policies')).join() === 'doomed,global-management,readers', 'the policies replicated')
      await eventually(async () => (await names(dc2, '/v1/acl/roles')).join() === 'ops', 'the role replicated')
      const role = (await dc2.request('GET', '/v1/acl/role/name/ops', { token: MANAGEMENT })).body
      expect(role.Policies).to.deep.equal([{ ID: policy.body.ID, Name: 'readers' }])
      // The primary's token works here (resolved at the primary, its policies from the replicated state).
      expect((await dc2.request('GET', '/v1/acl/token/self', { token: MANAGEMENT })).body.AccessorID).to.be.a('string')
      await dc1.request('DELETE', `/v1/acl/policy/${doomed.body.ID}`, { token: MANAGEMENT })
      await dc1.request('PUT', `/v1/acl/policy/${policy.body.ID}`, { token: MANAGEMENT, body: { ID: policy.body.ID, Name: 'readers-renamed', Rules: 'acl = "read"' } })
      await eventually(async () => (await names(dc2, '/v1/acl/policies')).join() === 'global-management,readers-renamed', 'the deletion and the rename replicated')
      const status = (await dc2.request('GET', '/v1/acl/replication', { token: null })).body
      expect(status).to.include({ Enabled: true, Running: true, SourceDatacenter: 'dc1', ReplicationType: 'tokens', LastErrorMessage: '' })
      expect(status.ReplicatedIndex).to.be.greaterThan(0)
      expect(status.ReplicatedRoleIndex).to.be.greaterThan(0)
      // Caught up: nothing seen at the primary waits to be applied.
      await eventually(async () => (await dc2.request('GET', '/v1/acl/replication', { token: null })).body.ReplicationLagSeconds === 0, 'no lag')
      expect((await dc1.request('GET', '/v1/acl/replication', { token: null })).body.Enabled).to.equal(false)
    })

    it('sends policy and role writes to the primary and answers once they are replicated here', async () => {
      const { dc1, dc2 } = await federation()
      await eventually(async () => (await names(dc2, '/v1/acl/policies')).includes('global-management'), 'replication running')
      const written = await dc2.request('PUT', '/v1/acl/policy', { token: MANAGEMENT, body: { Name: 'from-dc2', Rules: '' } })
      expect(written.status, written.text).to.equal(200)
      expect(written.headers.get('X-Service-Replication-Lagging')).to.equal(null)
      // Read your writes: in the secondary at once, and in the primary, which holds it.
      const readHere = await dc2.request('GET', `/v1/acl/policy/${written.body.ID}`, { token: MANAGEMENT })
      expect(readHere.body.Name, readHere.text + JSON.stringify(written.body)).to.equal('from-dc2')
      expect((await dc1.request('GET', `/v1/acl/policy/${written.body.ID}`, { token: MANAGEMENT })).body.Name).to.equal('from-dc2')
      const deleted = await dc2.request('DELETE', `/v1/acl/policy/${written.body.ID}`, { token: MANAGEMENT })
      expect(deleted.status).to.equal(200)
      expect((await dc2.request('GET', `/v1/acl/policy/${written.body.ID}`, { token: MANAGEMENT })).status).to.equal(404)
      expect((await dc1.request('GET', `/v1/acl/policy/${written.body.ID}`, { token: MANAGEMENT })).status).to.equal(404)
    })

    it('keeps serving replicated policies to a token it resolved once the primary is down (acl.down_policy extend-cache)', async () => {
      const { dc1, dc2 } = await federation()
      await dc1.request('PUT', '/v1/acl/policy', { token: MANAGEMENT, body: { Name: 'survives', Rules: '' } })
      await eventually(async () => (await names(dc2, '/v1/acl/policies')).includes('survives'), 'replicated')
      await dc1.stop()
      agents.splice(agents.indexOf(dc1), 1)
      // Past the 30 s an answer of the primary holds, extend-cache keeps it: read within it here, and the write refused.
      expect(await names(dc2, '/v1/acl/policies')).to.include('survives')
      const refused = await dc2.request('PUT', '/v1/acl/policy', { token: MANAGEMENT, body: { Name: 'nowhere', Rules: '' } })
      expect(refused.status).to.equal(503)
      expect(refused.body.Code).to.equal('no_path_to_datacenter')
    })

    it('a write naming the secondary itself (?dc=dc2) goes to the primary once, never back and forth', async () => {
      const { dc1, dc2 } = await federation()
      await eventually(async () => (await names(dc2, '/v1/acl/policies')).includes('global-management'), 'replication running')
      const anonymous = await dc2.request('PUT', '/v1/acl/policy?dc=dc2', { token: null, body: { Name: 'loop', Rules: '' } })
      expect(anonymous.status, anonymous.text).to.equal(403)
      const written = await dc2.request('PUT', '/v1/acl/policy?dc=dc2', { token: MANAGEMENT, body: { Name: 'named-dc2', Rules: '' } })
      expect(written.status, written.text).to.equal(200)
      expect((await dc1.request('GET', `/v1/acl/policy/${written.body.ID}`, { token: MANAGEMENT })).status).to.equal(200)
    })

    it("refuses the primary's local tokens: they never leave their datacenter", async () => {
      const { dc1, dc2 } = await federation()
      const local = await dc1.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Local: true, Policies: [{ Name: 'global-management' }] } })
      expect(local.status, local.text).to.equal(200)
      await eventually(async () => (await names(dc2, '/v1/acl/policies')).includes('global-management'), 'dc2 up')
      expect((await dc1.request('GET', '/v1/acl/policies', { token: local.body.SecretID })).status).to.equal(200)
      const refused = await dc2.request('GET', '/v1/acl/policies', { token: local.body.SecretID })
      expect(refused.status).to.equal(403)
      expect(refused.body.Code).to.equal('acl_not_found')
    })

    it("stops promptly while its replication waits on the primary's blocking query", async () => {
      const { dc2 } = await federation()
      await eventually(async () => (await dc2.request('GET', '/v1/acl/replication', { token: null })).body.ReplicatedIndex > 0, 'replication caught up')
      const started = Date.now()
      agents.splice(agents.indexOf(dc2), 1)
      expect(await dc2.stop()).to.equal(0)
      expect(Date.now() - started).to.be.below(8_000)
    })

    it('replicates global tokens (and only those); global token writes go to the primary, local ones stay', async () => {
      const { dc1, dc2 } = await federation()
      const global = await dc1.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Description: 'global one', Policies: [{ Name: 'global-management' }] } })
      const primaryLocal = await dc1.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Description: 'dc1 only', Local: true } })
      const held = async (agent: AgentProcess, accessor: string): Promise<number> => (await agent.request('GET', `/v1/acl/token/${accessor}`, { token: MANAGEMENT })).status
      await eventually(async () => (await held(dc2, global.body.AccessorID)) === 200, 'the global token replicated')
      expect(await held(dc2, primaryLocal.body.AccessorID)).to.equal(404)
      expect((await dc2.request('GET', '/v1/acl/replication', { token: null })).body).to.include({ ReplicationType: 'tokens' })
      // Written in the secondary: a global token is the primary's (and back here at once); a local one stays here.
      const viaSecondary = await dc2.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Description: 'made in dc2' } })
      expect(viaSecondary.status, viaSecondary.text).to.equal(200)
      expect(await held(dc1, viaSecondary.body.AccessorID)).to.equal(200)
      expect(await held(dc2, viaSecondary.body.AccessorID)).to.equal(200)
      const secondaryLocal = await dc2.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Description: 'dc2 only', Local: true } })
      expect(secondaryLocal.status, secondaryLocal.text).to.equal(200)
      expect(await held(dc1, secondaryLocal.body.AccessorID)).to.equal(404)
      // A replicated token works in the secondary from its own state; deleting it at the primary removes it here, and
      // replication never deletes the secondary's local token.
      expect((await dc2.request('GET', '/v1/acl/token/self', { token: global.body.SecretID })).body.AccessorID).to.equal(global.body.AccessorID)
      await dc1.request('DELETE', `/v1/acl/token/${global.body.AccessorID}`, { token: MANAGEMENT })
      await eventually(async () => (await held(dc2, global.body.AccessorID)) === 404, 'the deletion replicated')
      expect(await held(dc2, secondaryLocal.body.AccessorID)).to.equal(200)
      // Deleting a global token through the secondary goes to the primary.
      expect((await dc2.request('DELETE', `/v1/acl/token/${viaSecondary.body.AccessorID}`, { token: MANAGEMENT })).status).to.equal(200)
      expect(await held(dc1, viaSecondary.body.AccessorID)).to.equal(404)
      expect(await held(dc2, viaSecondary.body.AccessorID)).to.equal(404)
    })

    it('replicates config entries but exported-services; config writes go to the primary, exported-services stays', async () => {
      const { dc1, dc2 } = await federation()
      const entry = async (agent: AgentProcess, kind: string, name: string): Promise<number> => (await agent.request('GET', `/v1/config/${kind}/${name}`, { token: MANAGEMENT })).status
      expect((await dc1.request('PUT', '/v1/config', { token: MANAGEMENT, body: { Kind: 'service-defaults', Name: 'web', Protocol: 'http' } })).status).to.equal(200)
      expect((await dc1.request('PUT', '/v1/config', { token: MANAGEMENT, body: { Kind: 'exported-services', Name: 'default', Services: [] } })).status).to.equal(200)
      await eventually(async () => (await entry(dc2, 'service-defaults', 'web')) === 200, 'the entry replicated')
      expect((await dc2.request('GET', '/v1/config/service-defaults/web', { token: MANAGEMENT })).body.Protocol).to.equal('http')
      expect(await entry(dc2, 'exported-services', 'default')).to.equal(404)
      // Written through the secondary: a service-defaults is the primary's, back here at once; exported-services stays.
      const written = await dc2.request('PUT', '/v1/config', { token: MANAGEMENT, body: { Kind: 'service-defaults', Name: 'api', Protocol: 'grpc' } })
      expect(written.status, written.text).to.equal(200)
      expect(await entry(dc1, 'service-defaults', 'api')).to.equal(200)
      expect(await entry(dc2, 'service-defaults', 'api')).to.equal(200)
      expect((await dc2.request('PUT', '/v1/config', { token: MANAGEMENT, body: { Kind: 'exported-services', Name: 'default', Services: [{ Name: 'api', Consumers: [{ Peer: 'x' }] }] } })).status).to.equal(200)
      expect((await dc1.request('GET', '/v1/config/exported-services/default', { token: MANAGEMENT })).body.Services).to.deep.equal([])
      // A deletion at the primary reaches the secondary; the secondary's exported-services survives every round.
      await dc1.request('DELETE', '/v1/config/service-defaults/web', { token: MANAGEMENT })
      await eventually(async () => (await entry(dc2, 'service-defaults', 'web')) === 404, 'the deletion replicated')
      expect((await dc2.request('GET', '/v1/config/exported-services/default', { token: MANAGEMENT })).body.Services).to.have.length(1)
      expect((await dc2.request('GET', '/v1/acl/replication', { token: null })).body.ReplicatedConfigEntryIndex).to.be.greaterThan(0)
    })

    it('never offers bootstrap: a secondary takes the primary\'s tokens', async () => {
      const { dc2 } = await federation()
      const refused = await dc2.request('PUT', '/v1/acl/bootstrap', { token: null, body: {} })
      expect(refused.status).to.equal(403)
      expect(refused.body).to.include({ Code: 'permission_denied', Field: 'bootstrap' })
      expect(refused.body.Error).to.include('primary datacenter (dc1)')
    })

    it('with token replication off: global tokens stay at the primary (resolved there), and nothing local can be made', async () => {
      const { dc1, dc2 } = await federation(['--enable-token-replication', 'false'])
      const global = await dc1.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Description: 'stays in dc1', Policies: [{ Name: 'global-management' }] } })
      await eventually(async () => (await dc2.request('GET', '/v1/acl/replication', { token: null })).body.ReplicatedIndex > 0, 'replication running')
      expect((await dc2.request('GET', '/v1/acl/replication', { token: null })).body).to.include({ ReplicationType: 'policies', ReplicatedTokenIndex: 0 })
      // Not replicated, but it works in dc2: resolved at the primary.
      expect((await dc2.request('GET', '/v1/acl/policies', { token: global.body.SecretID })).status).to.equal(200)
      expect((await dc2.request('GET', `/v1/acl/token/${global.body.AccessorID}?stale`, { token: MANAGEMENT })).status).to.equal(404)
      for (const [path, body] of [
        ['/v1/acl/token', { Local: true, Description: 'local' }],
        ['/v1/acl/auth-method', { Name: 'jwt', Type: 'jwt', Config: { JWTValidationPubKeys: ['x'] } }],
      ] as const) {
        const refused = await dc2.request('PUT', path, { token: MANAGEMENT, body })
        expect(refused.status, `${path}: ${refused.text}`).to.equal(403)
        expect(refused.body.Code).to.equal('token_replication_required')
      }
      const login = await dc2.request('POST', '/v1/acl/login', { token: null, body: { AuthMethod: 'jwt', BearerToken: 'x' } })
      expect(login.body.Code).to.equal('token_replication_required')
      // A body that is not JSON is the route's to refuse, as anywhere: a 400, not a refusal for replication.
      const garbled = await dc2.request('PUT', '/v1/acl/token', { token: MANAGEMENT, raw: '{"Local": tru', headers: { 'Content-Type': 'application/json' } })
      expect(garbled.status, garbled.text).to.equal(400)
      // A global token made through the secondary still goes to the primary.
      expect((await dc2.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Description: 'global through dc2' } })).status).to.equal(200)
    })

    it('routes by the path and body as the routes read them: case, trailing slash, duplicate keys; junk secrets refused first', async () => {
      const { dc1, dc2 } = await federation()
      await eventually(async () => (await names(dc2, '/v1/acl/policies')).includes('global-management'), 'dc2 up')
      const held = async (agent: AgentProcess, accessor: string): Promise<number> => (await agent.request('GET', `/v1/acl/token/${accessor}`, { token: MANAGEMENT })).status
      const local = await dc2.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Local: true } })
      expect(local.status).to.equal(200)
      // Deleted through another spelling of its path: still the secondary's own token, deleted here.
      expect((await dc2.request('DELETE', `/V1/ACL/TOKEN/${local.body.AccessorID.toUpperCase()}/`, { token: MANAGEMENT })).status).to.equal(200)
      expect(await held(dc2, local.body.AccessorID)).to.equal(404)
      // "Local" spelled exactly wins over "local", as the route reads it: a global token, made at the primary.
      const global = await dc2.request('PUT', '/v1/acl/token/', { token: MANAGEMENT, raw: '{"local":true,"Local":false,"Description":"global after all"}', headers: { 'Content-Type': 'application/json' } })
      expect(global.status, global.text).to.equal(200)
      expect(global.body.Local).to.equal(false)
      expect(await held(dc1, global.body.AccessorID)).to.equal(200)
      // A secret that names no token is refused before any body is read or anything is sent anywhere.
      const junk = await dc2.request('PUT', '/v1/acl/token', { token: '6e0c2f4a-0000-4000-8000-00000000dead', body: { Local: false } })
      expect(junk.status).to.equal(403)
      expect(junk.body.Code).to.equal('acl_not_found')
    })

    it('before it has reached the primary, a write the primary holds is a 503 no_path_to_datacenter, never unknown', async () => {
      const dc2 = await startAgent({
        args: ['--datacenter', 'dc2', '--primary-datacenter', 'dc1', '--node-name', 'dc2-s1', '--join-wan', '127.0.0.1:1'],
        env: { WARDEN_CLUSTER_KEY: key, WARDEN_ACL_REPLICATION_TOKEN: MANAGEMENT },
      })
      agents.push(dc2)
      const answer = await dc2.request('PUT', '/v1/acl/policy', { token: null, body: { Name: 'nowhere', Rules: '' } })
      expect(answer.status).to.equal(503)
      expect(answer.body.Code).to.equal('no_path_to_datacenter')
    })

    it('refuses an initial management token of its own (exit 2)', async () => {
      const started = await startAgent({ args: ['--datacenter', 'dc2', '--primary-datacenter', 'dc1'], env: { WARDEN_INITIAL_MANAGEMENT_TOKEN: MANAGEMENT } }).then(
        () => 'started',
        (error: Error) => error.message,
      )
      expect(started).to.match(/exited with 2/)
      expect(started).to.include('a secondary datacenter')
    })
  })
})
