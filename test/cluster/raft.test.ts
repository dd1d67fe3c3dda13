/**
 * Three real `warden agent` processes on loopback, replicating through Raft: they elect one leader, accept writes on
 * any node, serve every read mode, survive kill -9 of a follower and of the leader during writes without losing an
 * acknowledged write, and a restarted node catches up. Writes whose outcome a client could not learn (504, or a
 * dropped connection) are allowed either way; every 200 must be in the final state.
 */
import { expect } from 'chai'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { TestCluster } from '../support/cluster.js'
import type { AgentProcess } from '../support/agent.js'

async function createPolicy(agent: AgentProcess, name: string): Promise<'ok' | 'failed' | 'unknown'> {
  try {
    const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: name } })
    if (response.status === 200) return 'ok'
    return response.status === 504 ? 'unknown' : 'failed'
  } catch {
    // The connection dropped (the node was killed): the write may or may not have been applied.
    return 'unknown'
  }
}

async function policyNames(agent: AgentProcess, mode: string): Promise<Set<string>> {
  const response = await agent.request('GET', `/v1/acl/policies?${mode}`)
  expect(response.status, response.text).to.equal(200)
  return new Set((response.body as Array<{ Name: string }>).map((policy) => policy.Name))
}

async function eventually(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** A counter's value in the node's Prometheus metrics (0 when absent). */
async function promCounter(agent: AgentProcess, name: string): Promise<number> {
  const response = await agent.request('GET', '/v1/agent/metrics?format=prometheus')
  expect(response.status, response.text).to.equal(200)
  const line = response.text.split('\n').find((text) => text.startsWith(`${name} `))
  return line === undefined ? 0 : Number(line.slice(name.length + 1))
}

describe('a three-node Raft cluster of real processes', function () {
  this.timeout(60_000)
  let cluster: TestCluster

  before(async () => {
    cluster = await TestCluster.start()
  })
  after(async () => {
    await cluster.stop()
  })

  it('elects one leader that every node reports, and lists three voters', async () => {
    const leader = await cluster.leader()
    const configuration = await cluster.node(leader).request('GET', '/v1/operator/raft/configuration')
    expect(configuration.body.Servers).to.have.length(3)
    expect(configuration.body.Servers.filter((server: { Leader: boolean }) => server.Leader)).to.have.length(1)
    expect(configuration.body.Servers.every((server: { Voter: boolean }) => server.Voter)).to.equal(true)
  })

  it('reports the Raft state of each node on /v1/operator/raft/state', async () => {
    const leader = await cluster.leader()
    for (const agent of cluster.running()) {
      const response = await agent.request('GET', '/v1/operator/raft/state')
      expect(response.status, response.text).to.equal(200)
      expect(response.body.Leader).to.equal(leader)
      expect(response.body.Role).to.equal(response.body.Node === leader ? 'leader' : 'follower')
      expect(response.body.Term).to.be.above(0)
      expect(response.body.AppliedIndex).to.be.at.most(response.body.LastIndex)
    }
    expect((await cluster.node(leader).request('GET', '/v1/operator/raft/state', { token: null })).status).to.equal(403)
  })

  it('writes the built-ins once: one global-management policy and one management token', async () => {
    const leader = cluster.node(await cluster.leader())
    const tokens = await leader.request('GET', '/v1/acl/tokens?consistent')
    const management = (tokens.body as Array<{ SecretID: string }>).filter((token) => token.SecretID === leader.managementToken)
    expect(management).to.have.length(1)
    expect([...(await policyNames(leader, 'consistent'))].filter((name) => name === 'global-management')).to.have.length(1)
  })

  it('accepts a write on a follower and answers with the leader result, visible on the follower at once', async () => {
    const leader = await cluster.leader()
    const follower = cluster.node(cluster.followers(leader)[0]!)
    const response = await follower.request('PUT', '/v1/acl/policy', { body: { Name: 'written-on-follower' } })
    expect(response.status, response.text).to.equal(200)
    expect(response.body.Name).to.equal('written-on-follower')
    expect((await policyNames(follower, 'stale')).has('written-on-follower')).to.equal(true)
    const refused = await follower.request('PUT', '/v1/acl/policy', { body: { Name: 'written-on-follower' } })
    expect(refused.status).to.equal(400)
    expect(refused.body.Field).to.equal('Name')
  })

  it('a burst of writes on a follower, forwarded together, gets one outcome each: a duplicate name in it is refused once', async () => {
    const leader = await cluster.leader()
    const follower = cluster.node(cluster.followers(leader)[0]!)
    const prefix = `forwarded-${Date.now()}`
    // Reads first open the connections, so the writes then arrive together over them and the follower forwards
    // them to the leader in a few batches (on fresh connections they would trickle in, one per turn).
    await Promise.all(Array.from({ length: 32 }, () => follower.request('GET', '/v1/acl/policies?stale')))
    const forwarded = async (): Promise<{ writes: number; requests: number }> => {
      const state = (await follower.request('GET', '/v1/operator/raft/state')).body
      return { writes: state.ForwardedWrites, requests: state.ForwardedRequests }
    }
    const before = await forwarded()
    const names = [...Array.from({ length: 30 }, (_, n) => `${prefix}-${n}`), `${prefix}-dup`, `${prefix}-dup`]
    const responses = await Promise.all(names.map((name) => follower.request('PUT', '/v1/acl/policy', { body: { Name: name } })))
    const created = responses.filter((response) => response.status === 200)
    const refused = responses.filter((response) => response.status !== 200)
    expect(created).to.have.length(31)
    expect(refused).to.have.length(1)
    expect(refused[0]!.status, refused[0]!.text).to.equal(400)
    expect(refused[0]!.body.Field).to.equal('Name')
    // Each caller got its own write's result, not a neighbour's.
    for (const [n, response] of responses.entries()) if (response.status === 200) expect(response.body.Name).to.equal(names[n])
    expect(new Set(created.map((response) => response.body.CreateIndex as number)).size).to.equal(31)
    const visible = await policyNames(follower, 'stale')
    for (const name of new Set(names)) expect(visible.has(name), name).to.equal(true)
    // Every write was forwarded, in fewer requests than writes.
    const after = await forwarded()
    expect(after.writes - before.writes).to.equal(names.length)
    expect(after.requests - before.requests).to.be.above(0).and.below(names.length)
  })

  it('followers apply the writes the leader shipped instead of running the commands, and hold the same records', async () => {
    const leader = await cluster.leader()
    const shippedBefore = new Map<string, number>()
    for (const id of cluster.followers(leader)) shippedBefore.set(id, await promCounter(cluster.node(id), 'warden_raft_applied_shipped_total'))
    const names = Array.from({ length: 40 }, (_, n) => `shipped-${n}`)
    const answers = await Promise.all(names.map((name) => cluster.node(leader).request('PUT', '/v1/acl/policy', { body: { Name: name, Rules: `key_prefix "${name}" { policy = "read" }` } })))
    for (const answer of answers) expect(answer.status, answer.text).to.equal(200)
    const expected = await cluster.node(leader).request('GET', '/v1/acl/policies?consistent')
    for (const id of cluster.followers(leader)) {
      const follower = cluster.node(id)
      // A default read on the follower waits until it applied everything committed before it.
      const listed = await follower.request('GET', '/v1/acl/policies')
      expect(listed.status, listed.text).to.equal(200)
      expect(listed.body, `the policies on ${id}`).to.deep.equal(expected.body)
      const shipped = (await promCounter(follower, 'warden_raft_applied_shipped_total')) - (shippedBefore.get(id) ?? 0)
      expect(shipped, `commands ${id} applied from shipped writes`).to.be.at.least(names.length / 2)
    }
  })

  it('a write on a follower is authorized by the token as the leader knows it: deleted tokens are refused, new ones found', async () => {
    const leader = cluster.node(await cluster.leader())
    const follower = cluster.node(cluster.followers(await cluster.leader())[0]!)
    const management = (await leader.request('GET', '/v1/acl/policy/name/global-management')).body.ID as string
    // Writes through the leader in the background keep the followers' apply busy, so that they lag the leader by a
    // batch now and then, as under load: that is when a follower's own state would answer wrongly.
    let loading = true
    const load = Promise.all(
      Array.from({ length: 8 }, async (_, worker) => {
        for (let n = 0; loading; n++) await leader.request('PUT', '/v1/acl/token', { body: { Description: `load-${worker}-${n}` } })
      }),
    )
    try {
      for (let round = 0; round < 30; round++) {
        const created = await leader.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: management }] } })
        expect(created.status, created.text).to.equal(200)
        // Acknowledged by the leader, then used at once on the follower: it must be found there.
        const fresh = await follower.request('PUT', '/v1/acl/policy', { token: created.body.SecretID, body: { Name: `fresh-${round}-${Date.now()}` } })
        expect(fresh.status, `round ${round}: ${fresh.text}`).to.equal(200)
        const deleted = await leader.request('DELETE', `/v1/acl/token/${created.body.AccessorID}`)
        expect(deleted.body).to.equal(true)
        // Deleted and acknowledged: no write may pass with it any more, on any node.
        const name = `revoked-${round}-${Date.now()}`
        const revoked = await follower.request('PUT', '/v1/acl/policy', { token: created.body.SecretID, body: { Name: name } })
        expect(revoked.status, `round ${round}: ${revoked.text}`).to.equal(403)
        expect((await leader.request('GET', `/v1/acl/policy/name/${name}?consistent`)).status).to.equal(404)
      }
    } finally {
      loading = false
      await load
    }
  })

  it('a write whose body is still arriving on a follower when its token is deleted on the leader is refused', async () => {
    // The body arrives in two parts, so the write's first barrier is fixed before its last byte and the follower must
    // take a second one (app.ts catchUp, request.ts authorizeAfterBody) that sees the delete.
    const leader = cluster.node(await cluster.leader())
    const follower = cluster.node(cluster.followers(await cluster.leader())[0]!)
    const management = (await leader.request('GET', '/v1/acl/policy/name/global-management')).body.ID as string
    const created = await leader.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: management }] } })
    expect(created.status, created.text).to.equal(200)
    const name = `slow-body-${Date.now()}`
    const body = Buffer.from(JSON.stringify({ Name: name, Description: 'x'.repeat(500) }))
    const head = `PUT /v1/acl/policy HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\nX-Service-Token: ${created.body.SecretID}\r\n\r\n`
    const socket = connect({ host: '127.0.0.1', port: Number(new URL(`http://${follower.httpAddress}`).port) })
    try {
      const answer = new Promise<string>((resolve) => {
        const chunks: Buffer[] = []
        socket.on('data', (chunk: Buffer) => chunks.push(chunk))
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')))
        socket.on('error', () => resolve(Buffer.concat(chunks).toString('utf8')))
      })
      await new Promise<void>((resolve) => socket.write(Buffer.concat([Buffer.from(head), body.subarray(0, 20)]), () => resolve()))
      await new Promise((resolve) => setTimeout(resolve, 300))
      const deleted = await leader.request('DELETE', `/v1/acl/token/${created.body.AccessorID}`)
      expect(deleted.body).to.equal(true)
      socket.write(body.subarray(20))
      const text = await answer
      expect(text.split('\r\n')[0], text).to.match(/^HTTP\/1\.1 403 /)
      expect(text).to.include('acl_not_found')
    } finally {
      socket.destroy()
    }
    expect((await leader.request('GET', `/v1/acl/policy/name/${name}?consistent`)).status).to.equal(404)
  })

  it('serves stale, default and consistent reads on every node with the consistency headers', async () => {
    const leader = await cluster.leader()
    for (const agent of cluster.running()) {
      for (const mode of ['stale', 'consistent', '']) {
        const response = await agent.request('GET', `/v1/acl/policies?${mode}`)
        expect(response.status).to.equal(200)
        expect(response.headers.get('x-service-knownleader')).to.equal('true')
        expect(Number(response.headers.get('x-service-index'))).to.be.above(0)
        expect(response.headers.get('x-service-effective-consistency')).to.equal(mode === '' ? 'leader' : mode)
      }
      const contact = Number((await agent.request('GET', '/v1/acl/policies?stale')).headers.get('x-service-lastcontact'))
      if (agent === cluster.node(leader)) expect(contact).to.equal(0)
      else expect(contact).to.be.at.least(0)
    }
  })

  it('a burst of default and consistent reads on a follower, sent together, each sees a write acknowledged before it', async () => {
    const leader = await cluster.leader()
    const follower = cluster.node(cluster.followers(leader)[0]!)
    for (let round = 0; round < 5; round++) {
      const name = `burst-${round}-${Date.now()}`
      const created = await cluster.node(leader).request('PUT', '/v1/acl/policy', { body: { Name: name } })
      expect(created.status, created.text).to.equal(200)
      // Sent in one go: the follower asks the leader for one read index for all of those that arrive together.
      const reads = await Promise.all(
        Array.from({ length: 40 }, (_, n) => follower.request('GET', `/v1/acl/policy/name/${name}${n % 2 === 0 ? '?consistent' : ''}`)),
      )
      for (const read of reads) expect(read.status, read.text).to.equal(200)
    }
  })

  it('serves ?max_stale from a follower in touch with the leader, and from the leader view when the bound is tighter', async () => {
    const leader = await cluster.leader()
    const follower = cluster.node(cluster.followers(leader)[0]!)
    const relaxed = await follower.request('GET', '/v1/acl/policies?max_stale=10s')
    expect(relaxed.status).to.equal(200)
    expect(relaxed.headers.get('x-service-effective-consistency')).to.equal('stale')
    const strict = await follower.request('GET', '/v1/acl/policies?max_stale=0s')
    expect(strict.status).to.equal(200)
    expect(strict.headers.get('x-service-effective-consistency')).to.equal('leader')
  })

  it('wakes a blocking query on a follower when a write lands through the leader', async () => {
    const leader = await cluster.leader()
    const follower = cluster.node(cluster.followers(leader)[0]!)
    const first = await follower.request('GET', '/v1/acl/roles?stale')
    const index = Number(first.headers.get('x-service-index'))
    const started = Date.now()
    const waiting = follower.request('GET', `/v1/acl/roles?stale&index=${index}&wait=20s`)
    await new Promise((resolve) => setTimeout(resolve, 200))
    const created = await cluster.node(leader).request('PUT', '/v1/acl/role', { body: { Name: 'wakes-the-follower' } })
    expect(created.status, created.text).to.equal(200)
    const woken = await waiting
    expect(Date.now() - started).to.be.below(15_000)
    expect(Number(woken.headers.get('x-service-index'))).to.be.above(index)
    expect((woken.body as Array<{ Name: string }>).map((role) => role.Name)).to.include('wakes-the-follower')
  })

  it('a write sent to a follower just after kill -9 of the leader waits for the next leader instead of failing', async () => {
    const leader = await cluster.leader()
    const follower = cluster.node(cluster.followers(leader)[0]!)
    await cluster.kill(leader)
    // The follower still believes in the dead leader for up to an election timeout: its forwards fail as not
    // delivered, which must lead to a retry within the leader wait (7 s), not to a 503.
    const started = Date.now()
    const results = await Promise.all(Array.from({ length: 5 }, (_, n) => createPolicy(follower, `after-leader-kill-${started}-${n}`)))
    expect(results).to.deep.equal(['ok', 'ok', 'ok', 'ok', 'ok'])
    expect(Date.now() - started).to.be.below(7_000)
    await cluster.restart(leader)
  })

  it('keeps writing through kill -9 of a follower, and the restarted follower catches up', async () => {
    const leader = await cluster.leader()
    const victim = cluster.followers(leader)[0]!
    await cluster.kill(victim)
    const leaderAgent = cluster.node(leader)
    for (let n = 0; n < 20; n += 1) expect(await createPolicy(leaderAgent, `while-follower-down-${n}`)).to.equal('ok')
    const restarted = await cluster.restart(victim)
    await eventually(async () => (await policyNames(restarted, 'stale')).has('while-follower-down-19'))
    expect((await policyNames(restarted, 'stale')).has('while-follower-down-0')).to.equal(true)
  })

  it('loses no acknowledged write when the leader is killed with -9 during concurrent writes', async () => {
    const leader = await cluster.leader()
    const outcomes = new Map<string, 'ok' | 'failed' | 'unknown'>()
    let stop = false
    const writers = cluster.running().map(async (agent, writer) => {
      for (let n = 0; !stop; n += 1) {
        const name = `during-failover-${writer}-${n}`
        outcomes.set(name, await createPolicy(agent, name))
      }
    })
    await new Promise((resolve) => setTimeout(resolve, 300))
    const killedAt = Date.now()
    await cluster.kill(leader)
    const newLeader = await cluster.leader(10_000)
    expect(newLeader).to.not.equal(leader)
    // Keep writing on the survivors until one write succeeds after the kill.
    const survivor = cluster.node(newLeader)
    await eventually(async () => (await createPolicy(survivor, `after-failover-${Date.now()}`)) === 'ok', 10_000)
    const failoverMs = Date.now() - killedAt
    stop = true
    await Promise.all(writers)
    const acknowledged = [...outcomes].filter(([, outcome]) => outcome === 'ok').map(([name]) => name)
    expect(acknowledged.length).to.be.above(0)
    const restarted = await cluster.restart(leader)
    for (const agent of [survivor, restarted]) {
      await eventually(async () => {
        const names = await policyNames(agent, 'stale')
        return acknowledged.every((name) => names.has(name))
      })
    }
    const names = await policyNames(survivor, 'consistent')
    const lost = acknowledged.filter((name) => !names.has(name))
    expect(lost, `acknowledged but lost (failover took ${failoverMs} ms)`).to.deep.equal([])
  })
})

describe('a three-node cluster with raft.ship_writes off', function () {
  this.timeout(60_000)
  let cluster: TestCluster
  let dir: string

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'warden-ship-off-'))
    const config = join(dir, 'config.json')
    await writeFile(config, JSON.stringify({ raft: { ship_writes: false } }))
    cluster = await TestCluster.start({ args: ['--config-file', config] })
  })
  after(async () => {
    await cluster?.stop()
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  it('every follower runs every command itself, and holds the same records', async () => {
    const leader = await cluster.leader()
    const answers = await Promise.all(Array.from({ length: 20 }, (_, n) => cluster.node(leader).request('PUT', '/v1/acl/policy', { body: { Name: `unshipped-${n}` } })))
    for (const answer of answers) expect(answer.status, answer.text).to.equal(200)
    const expected = await cluster.node(leader).request('GET', '/v1/acl/policies?consistent')
    for (const id of cluster.followers(leader)) {
      const follower = cluster.node(id)
      const listed = await follower.request('GET', '/v1/acl/policies')
      expect(listed.body, `the policies on ${id}`).to.deep.equal(expected.body)
      expect(await promCounter(follower, 'warden_raft_applied_shipped_total'), id).to.equal(0)
      expect(await promCounter(follower, 'warden_raft_applied_unshipped_total'), id).to.be.at.least(20)
    }
  })
})

describe('a three-node cluster that loses its quorum, or its leader stops cleanly', function () {
  this.timeout(60_000)
  let cluster: TestCluster
  let configDir: string

  before(async () => {
    const { mkdtemp, writeFile } = await import('node:fs/promises')
    const { tmpdir } = await import('node:os')
    const { join } = await import('node:path')
    configDir = await mkdtemp(join(tmpdir(), 'warden-quorum-'))
    const configFile = join(configDir, 'config.json')
    await writeFile(configFile, JSON.stringify({ raft: { leader_wait: '1s' } }))
    cluster = await TestCluster.start({ args: ['--config-file', configFile] })
  })
  after(async () => {
    await cluster.stop()
    const { rm } = await import('node:fs/promises')
    await rm(configDir, { recursive: true, force: true })
  })

  it('hands leadership to a follower when the leader stops on SIGTERM', async () => {
    const leader = await cluster.leader()
    const agent = cluster.node(leader)
    expect(await agent.stop()).to.equal(0)
    cluster.nodes.set(leader, undefined)
    expect(agent.logs.join('\n')).to.include('handed leadership over before stopping')
    const next = await cluster.leader()
    expect(next).to.not.equal(leader)
    const write = await cluster.node(next).request('PUT', '/v1/acl/policy', { body: { Name: 'after-clean-stop' } })
    expect(write.status, write.text).to.equal(200)
    await cluster.restart(leader)
    await cluster.ready()
  })

  it('a blocking query whose node loses its quorum while it waits is a 503 at the end of its wait, unless it is stale', async () => {
    const leader = await cluster.leader()
    const [survivor, other] = cluster.followers(leader)
    const agent = cluster.node(survivor!)
    const index = Number((await agent.request('GET', '/v1/acl/policies')).headers.get('x-service-index'))
    const queries = ['', '&consistent', '&stale'].map((mode) => agent.request('GET', `/v1/acl/policies?index=${index}&wait=1s${mode}`))
    // The queries passed their first barrier and wait; then the node is left alone.
    await new Promise((resolve) => setTimeout(resolve, 300))
    await cluster.kill(leader)
    await cluster.kill(other!)
    const [byDefault, consistent, stale] = await Promise.all(queries)
    for (const answer of [byDefault!, consistent!]) {
      expect(answer.status, answer.text).to.equal(503)
      expect(answer.body.Code).to.equal('no_leader')
    }
    expect(stale!.status).to.equal(200)
    expect(stale!.headers.get('x-service-effective-consistency')).to.equal('stale')
    await cluster.restart(leader)
    await cluster.restart(other!)
    await cluster.ready()
  })

  it('without a quorum, refuses writes and non-stale reads with 503 no_leader after raft.leader_wait, and serves stale reads', async () => {
    const leader = await cluster.leader()
    const [survivor, other] = cluster.followers(leader)
    await cluster.kill(leader)
    await cluster.kill(other!)
    const agent = cluster.node(survivor!)
    const write = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'without-quorum' } })
    expect(write.status).to.be.oneOf([503, 504])
    if (write.status === 503) expect(write.body.Code).to.equal('no_leader')
    const read = await agent.request('GET', '/v1/acl/policies?consistent')
    expect(read.status).to.equal(503)
    expect(read.body.Code).to.equal('no_leader')
    const stale = await agent.request('GET', '/v1/acl/policies?stale')
    expect(stale.status).to.equal(200)
    expect(stale.headers.get('x-service-effective-consistency')).to.equal('stale')
    await cluster.restart(leader)
    await cluster.restart(other!)
    await cluster.ready()
    const names = await policyNames(cluster.node(await cluster.leader()), 'consistent')
    expect(names.has('after-clean-stop')).to.equal(true)
  })
})

describe('a multi-node agent without a cluster key', () => {
  it('refuses to start with one line naming the cluster key, exit code 2', async () => {
    const { spawnSync } = await import('node:child_process')
    const { mkdtemp, rm } = await import('node:fs/promises')
    const { tmpdir } = await import('node:os')
    const { join } = await import('node:path')
    const { CLI } = await import('../support/agent.js')
    const dir = await mkdtemp(join(tmpdir(), 'warden-nokey-'))
    try {
      const result = spawnSync(process.execPath, [CLI, 'agent', '--data-dir', dir, '--node-name', 'n1', '--http-addr', '127.0.0.1:0', '--cluster-addr', '127.0.0.1:0', '--peer', 'n2=127.0.0.1:1'], {
        encoding: 'utf8',
        timeout: 15_000,
        env: { ...process.env, WARDEN_CLUSTER_KEY: '' },
      })
      expect(result.status).to.equal(2)
      const lines = result.stderr.trim().split('\n')
      expect(lines).to.have.length(1)
      expect(lines[0]).to.include('--cluster-key')
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
