/**
 * Rotating the cluster key without downtime (issue 18), the way the README tells operators to: three rolling
 * restarts, one node at a time, each waiting for the cluster to be whole again before the next:
 *   1. every node: --cluster-key OLD --cluster-key-accept NEW   (accept the new key before anyone proves with it)
 *   2. every node: --cluster-key NEW --cluster-key-accept OLD   (prove with the new key; the others accept it)
 *   3. every node: --cluster-key NEW                             (the old key is no longer accepted)
 * After each restart the restarted node must be linked again (it serves a write through the leader and a consistent
 * read), and no handshake may have been refused along the way. At the end a server holding only the old key is
 * refused by every node.
 *
 * Method: a TestCluster of real processes; each node is stopped (SIGTERM) and started again on its data dir and
 * ports with the phase's key flags.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { CLUSTER_KEY, MANAGEMENT_TOKEN, TestCluster } from '../support/cluster.js'

const NEW_KEY = randomBytes(32).toString('base64')

describe('cluster key rotation, one restart at a time', function () {
  this.timeout(180_000)
  let cluster: TestCluster

  before(async () => {
    cluster = await TestCluster.start()
  })
  after(async () => {
    await cluster.stop()
  })

  /** Starts `name` again on its data dir and ports with `keyArgs` instead of the cluster's key. */
  async function restartWith(name: string, keyArgs: string[]): Promise<AgentProcess> {
    await cluster.node(name).stop()
    const spec = cluster.specs.find((candidate) => candidate.name === name)!
    const agent = await startAgent({
      dev: false,
      dataDir: spec.dataDir,
      keepDataDir: true,
      args: [
        '--node-name', name,
        '--http-addr', `127.0.0.1:${spec.httpPort}`,
        '--cluster-addr', `127.0.0.1:${spec.clusterPort}`,
        ...keyArgs,
        '--initial-management-token', MANAGEMENT_TOKEN,
        ...cluster.specs.flatMap((other) => ['--peer', `${other.name}=127.0.0.1:${other.clusterPort}`]),
      ],
    })
    agent.managementToken = MANAGEMENT_TOKEN
    cluster.nodes.set(name, agent)
    return agent
  }

  /** The restarted node takes part again: a write through it commits, and a consistent read on it sees the write. */
  async function expectLinked(agent: AgentProcess, what: string): Promise<void> {
    await cluster.leader(20_000)
    const deadline = Date.now() + 20_000
    for (;;) {
      const write = await agent.request('PUT', '/v1/acl/policy', { body: { Name: `rotation-${what}` } }).catch(() => undefined)
      if (write?.status === 200) break
      if (Date.now() > deadline) throw new Error(`${what}: no write through the restarted node: ${write?.text}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    const read = await agent.request('GET', `/v1/acl/policy/name/rotation-${what}?consistent`)
    expect(read.status, read.text).to.equal(200)
  }

  const phases: Array<{ what: string; keyArgs: string[] }> = [
    { what: 'accept-new', keyArgs: ['--cluster-key', CLUSTER_KEY, '--cluster-key-accept', NEW_KEY] },
    { what: 'prove-new', keyArgs: ['--cluster-key', NEW_KEY, '--cluster-key-accept', CLUSTER_KEY] },
    { what: 'new-only', keyArgs: ['--cluster-key', NEW_KEY] },
  ]

  for (const { what, keyArgs } of phases) {
    it(`${what}: each node restarted with ${keyArgs.filter((arg) => arg.startsWith('--')).join(' ')} rejoins at once, no handshake refused`, async () => {
      for (const spec of cluster.specs) {
        const agent = await restartWith(spec.name, keyArgs)
        await expectLinked(agent, `${what}-${spec.name}`)
      }
      for (const agent of cluster.running()) {
        const refused = agent.logs.filter((line) => line.includes('peer handshake refused') || line.includes('peer refused the handshake'))
        expect(refused, agent.httpAddress).to.deep.equal([])
      }
    })
  }

  it('refuses a server that still proves with the old key once the rotation is done', async () => {
    const agent = await restartWith('n3', ['--cluster-key', CLUSTER_KEY])
    const others = cluster.specs.filter((spec) => spec.name !== 'n3').map((spec) => cluster.node(spec.name))
    const deadline = Date.now() + 15_000
    while (!others.every((other) => other.logs.some((line) => line.includes('peer did not prove the cluster key')))) {
      if (Date.now() > deadline) throw new Error('the old-key server was not refused by both others')
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    const write = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'from-the-old-key' }, timeoutMs: 10_000 }).catch(() => undefined)
    expect(write?.status).to.not.equal(200)
    // Back on the new key, it rejoins.
    await expectLinked(await restartWith('n3', ['--cluster-key', NEW_KEY]), 'back')
  })
})
