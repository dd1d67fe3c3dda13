/**
 * `GET /v1/operator/cluster` across two datacenters (issue 21): a single-server primary dc1 and a single-server
 * secondary dc2 joined over WAN links. Both list both datacenters; the primary shows no replication; the secondary
 * shows GET /v1/acl/replication's status, with its loop's part (running, lag, last error) from its leader.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { eventually } from '../cluster/eventually.js'
import { startAgent, type AgentProcess } from '../support/agent.js'

describe('the cluster view of two datacenters', function () {
  this.timeout(60_000)
  const key = randomBytes(32).toString('base64')
  const MANAGEMENT = 'a1b2c3d4-0000-4000-8000-00000000c1a5'
  const agents: AgentProcess[] = []

  after(async () => {
    await Promise.all(agents.splice(0).map((agent) => agent.stop()))
  })

  it('lists the datacenters, and in the secondary the replication status from its leader', async () => {
    const dc1 = await startAgent({ args: ['--datacenter', 'dc1', '--node-name', 'dc1-s1'], env: { WARDEN_CLUSTER_KEY: key, WARDEN_INITIAL_MANAGEMENT_TOKEN: MANAGEMENT } })
    agents.push(dc1)
    const dc2 = await startAgent({
      args: ['--datacenter', 'dc2', '--primary-datacenter', 'dc1', '--node-name', 'dc2-s1', '--join-wan', dc1.clusterAddress],
      env: { WARDEN_CLUSTER_KEY: key, WARDEN_ACL_REPLICATION_TOKEN: MANAGEMENT },
    })
    agents.push(dc2)
    const view = async (agent: AgentProcess, query = ''): Promise<{ body: any; index: string | null }> => {
      const response = await agent.request('GET', `/v1/operator/cluster${query}`, { token: MANAGEMENT })
      expect(response.status, response.text).to.equal(200)
      return { body: response.body, index: response.headers.get('X-Service-Index') }
    }
    await eventually(async () => (await view(dc2)).body.Replication?.Running === true, 'the secondary reports its replication running')
    const secondary = (await view(dc2)).body
    expect(secondary).to.include({ Datacenter: 'dc2', PrimaryDatacenter: 'dc1', Leader: 'dc2-s1' })
    expect([...secondary.Datacenters].sort()).to.deep.equal(['dc1', 'dc2'])
    expect(secondary.Replication).to.include({ Enabled: true, SourceDatacenter: 'dc1', ReplicationType: 'tokens', LastErrorMessage: '' })
    expect(secondary.Replication.ReplicationLagSeconds).to.be.a('number')
    const primary = (await view(dc1)).body
    expect(primary.Replication).to.equal(null)
    await eventually(async () => [...(await view(dc1)).body.Datacenters].sort().join() === 'dc1,dc2', 'the primary knows dc2')
  })
})
