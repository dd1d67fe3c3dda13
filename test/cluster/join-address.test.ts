/**
 * A join whose Address is not host:port must be refused at the door and leave the cluster as it was. The join
 * carries a valid cluster-key proof, so only the address is wrong; before the fix the leader committed a
 * `raft.member.set` entry with it, and applying that entry threw in every node's Ready loop, so the whole cluster
 * exited (and exited again on each restart, the entry being in the log). Each case sends one bad Address, to the
 * leader or to a follower, and checks that the answer is a 400 in the one JSON error shape naming `Address`, that
 * every node is still running and answering, that the cluster keeps a leader and takes writes, and that the joiner
 * never became a member.
 */
import { expect } from 'chai'
import { makeJoinRequest } from '../../src/lib/join-proof.js'
import type { ApiResponse } from '../support/agent.js'
import { CLUSTER_KEY, TestCluster } from '../support/cluster.js'

/** Long enough for applying a bad entry to have taken a node down: before the fix they exited within ~300 ms. */
const SETTLE_MS = 1_000

/** Dotted labels of valid characters, longer in all than any address may be (256) but under the old schema's 300. */
const LONG_HOST = Array.from({ length: 5 }, () => 'a'.repeat(54)).join('.')

const BAD_ADDRESSES: Array<{ what: string; address: string; to: 'leader' | 'follower' }> = [
  { what: 'no port', address: 'not-an-address', to: 'leader' },
  { what: 'port 0', address: 'host:0', to: 'follower' },
  { what: 'a port above 65535', address: 'host:99999', to: 'leader' },
  { what: 'an empty address', address: '', to: 'leader' },
  { what: 'a space in the host', address: 'bad host:8300', to: 'leader' },
  { what: 'a path after the port', address: 'host:8300/x', to: 'follower' },
  { what: 'an IPv4-looking host out of range', address: '999.1.1.1:8300', to: 'leader' },
  { what: 'a bracketed host that is not IPv6', address: '[:::::]:8300', to: 'leader' },
  { what: 'more than 256 characters', address: `${LONG_HOST}:8300`, to: 'leader' },
  { what: 'ten thousand characters', address: `${'a'.repeat(10_000)}:8300`, to: 'follower' },
]

describe('a join with a bad Address', function () {
  this.timeout(120_000)
  let cluster: TestCluster

  before(async () => {
    cluster = await TestCluster.start()
  })
  after(async () => {
    await cluster?.stop()
  })

  /** Every node's process still runs; a node that exited is named with the end of its log. */
  function expectAllRunning(): void {
    const exited = cluster.running().filter((agent) => agent.child.exitCode !== null || agent.child.signalCode !== null)
    const report = exited.map((agent) => `${agent.httpAddress} exited (${agent.child.exitCode ?? agent.child.signalCode}):\n${agent.logs.slice(-5).join('\n')}`)
    expect(report, 'nodes that exited').to.deep.equal([])
  }

  async function expectHealthy(name: string): Promise<void> {
    expectAllRunning()
    const leader = await cluster.leader(10_000)
    for (const agent of cluster.running()) {
      const state = await agent.request('GET', '/v1/operator/raft/state')
      expect(state.status, `${agent.httpAddress}: ${state.text}`).to.equal(200)
    }
    const write = await cluster.node(leader).request('PUT', '/v1/acl/policy', { body: { Name: `after-bad-join-${name}` } })
    expect(write.status, write.text).to.equal(200)
    const configuration = await cluster.node(leader).request('GET', '/v1/operator/raft/configuration')
    expect(configuration.status, configuration.text).to.equal(200)
    expect((configuration.body.Servers as Array<{ ID: string }>).map((server) => server.ID).sort()).to.deep.equal(['n1', 'n2', 'n3'])
  }

  BAD_ADDRESSES.forEach(({ what, address, to }, n) => {
    it(`refuses ${what} (${JSON.stringify(address.length > 40 ? `${address.slice(0, 40)}…` : address)}, sent to the ${to}) with a 400 naming Address, and the cluster keeps working`, async () => {
      const leader = await cluster.leader()
      const target = cluster.node(to === 'leader' ? leader : cluster.followers(leader)[0]!)
      const joiner = `bad-joiner-${n}`
      let response: ApiResponse | undefined
      let failure: unknown
      try {
        response = await target.request('POST', '/v1/operator/raft/join', { token: null, body: makeJoinRequest(CLUSTER_KEY, joiner, address, Date.now()) })
      } catch (error) {
        failure = error
      }
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
      // The cluster's health first: it is what the defect broke, and the clearest failure to read.
      expectAllRunning()
      expect(failure, 'the join request itself failed').to.equal(undefined)
      expect(response!.status, response!.text).to.equal(400)
      expect(response!.body).to.have.all.keys('Error', 'Code', 'Field')
      expect(response!.body.Code).to.equal('invalid_input')
      expect(response!.body.Field).to.equal('Address')
      expect(response!.body.Error).to.match(/^Address: /)
      await expectHealthy(`${n}`)
    })
  })
})
