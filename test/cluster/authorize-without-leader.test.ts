/**
 * POST /v1/internal/acl/authorize only asks: it is answered from the server's own state, as Consul's ACLAuthorize is,
 * so a server that has lost its leader still tells the web UI which controls to enable.
 */
import { expect } from 'chai'
import { TestCluster } from '../support/cluster.js'

describe('POST /v1/internal/acl/authorize without a leader', function () {
  this.timeout(60_000)
  let cluster: TestCluster

  before(async () => {
    cluster = await TestCluster.start()
  })
  after(async () => {
    await cluster?.stop()
  })

  it('is answered by a server whose quorum is gone, while a write there is refused', async () => {
    const leader = await cluster.leader()
    const [survivor, other] = cluster.followers(leader)
    await cluster.kill(leader)
    await cluster.kill(other!)
    const agent = cluster.node(survivor!)
    const answer = await agent.request('POST', '/v1/internal/acl/authorize', { body: [{ Resource: 'acl', Access: 'write' }], timeoutMs: 20_000 })
    expect(answer.status, answer.text).to.equal(200)
    expect(answer.body).to.deep.equal([{ Resource: 'acl', Access: 'write', Allow: true }])
    const write = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'no-quorum' }, timeoutMs: 20_000 })
    expect(write.status).to.equal(503)
  })
})
