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
})
