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
})
