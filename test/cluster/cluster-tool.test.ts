/**
 * The cluster tool as an operator uses it: every verb runs `cluster/cli.ts` as a subprocess against a temporary
 * `--root`, and the test checks what the verb claims through the tool's own `status --json`, the nodes' HTTP API and
 * the process table. One cluster serves the whole file, in order: up, status, kill and restart, pause and resume,
 * partition and heal, wipe, usage errors, down; a one-node cluster of its own shows wipe refusing it. Waiting (for a
 * leader, for a node to catch up) goes through the library attached to the same state file, which is what a second
 * terminal would do. Whatever the file started is stopped in `after`, by the library and then by pid, even when a test
 * failed half-way.
 */
import { expect } from 'chai'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LocalCluster, type ClusterState, type NodeStatus } from '../../cluster/lib.js'
import { alive, runClusterTool, type CliResult } from './cluster-tool-run.js'



interface StatusJson {
  nodes: NodeStatus[]
  leaders: string[]
  partitioned: string[]
  proxy: { pid: number; up: boolean }
}

async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms`)
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 50))
  }
}


describe('the cluster tool (npm run cluster)', function () {
  this.timeout(60_000)
  let root: string
  let cluster: LocalCluster | undefined
  let everyPid: number[] = []

  const cli = (...args: string[]): Promise<CliResult> => runClusterTool(root, ...args)


  async function status(): Promise<StatusJson> {
    const result = await cli('status', '--json')
    expect(result.code, result.stderr).to.equal(0)
    return JSON.parse(result.stdout) as StatusJson
  }

  async function state(): Promise<ClusterState> {
    const current = JSON.parse(await readFile(join(root, 'state.json'), 'utf8')) as ClusterState
    // Remember every process the tool ever started, so `after` can make sure none outlives the file.
    everyPid.push(...Object.values(current.nodes).map((node) => node.pid), current.proxyPid ?? 0)
    return current
  }

  async function policyNames(node: string): Promise<Set<string>> {
    const response = await cluster!.request(node, 'GET', '/v1/acl/policies?stale')
    expect(response.status, response.text).to.equal(200)
    return new Set((response.body as Array<{ Name: string }>).map((policy) => policy.Name))
  }

  async function createPolicy(node: string, name: string): Promise<void> {
    const response = await cluster!.request(node, 'PUT', '/v1/acl/policy', { body: { Name: name }, timeoutMs: 15_000 })
    expect(response.status, response.text).to.equal(200)
  }

  /**
   * What `node` reports as each server's address, once it sees all three alive (its links open): the address each
   * advertises (--cluster-addr), never the proxy `node` dials it through, in /v1/operator/servers,
   * /v1/operator/raft/configuration and /v1/status/peers alike.
   */
  async function expectAdvertisedAddresses(node: string): Promise<void> {
    const advertised = Object.fromEntries(Object.entries((await state()).nodes).map(([name, spec]) => [name, spec.clusterAddress]))
    const byName = (servers: Array<{ name: string; address: string }>): Record<string, string> => Object.fromEntries(servers.map((server) => [server.name, server.address]))
    let servers: Array<{ Name: string; Address: string; Status: string }> = []
    await eventually(async () => {
      const response = await cluster!.request(node, 'GET', '/v1/operator/servers')
      servers = response.status === 200 ? (response.body as typeof servers) : []
      return servers.length === 3 && servers.every((server) => server.Status === 'alive')
    }, `${node} seeing all three alive`)
    expect(byName(servers.map((server) => ({ name: server.Name, address: server.Address }))), `${node}: /v1/operator/servers`).to.deep.equal(advertised)
    const configuration = await cluster!.request(node, 'GET', '/v1/operator/raft/configuration')
    const configured = (configuration.body as { Servers: Array<{ Node: string; Address: string }> }).Servers
    expect(byName(configured.map((server) => ({ name: server.Node, address: server.Address }))), `${node}: /v1/operator/raft/configuration`).to.deep.equal(advertised)
    const peers = await cluster!.request(node, 'GET', '/v1/status/peers')
    expect([...(peers.body as string[])].sort(), `${node}: /v1/status/peers`).to.deep.equal(Object.values(advertised).sort())
  }

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'warden-cluster-tool-'))
  })

  after(async () => {
    await cluster?.down().catch(() => undefined) // Belt and braces below: every pid this file ever saw is killed.
    await state().catch(() => undefined)
    for (const pid of new Set(everyPid)) {
      if (pid > 0 && alive(pid)) process.kill(pid, 'SIGKILL')
    }
    await rm(root, { recursive: true, force: true })
  })

  it('up starts three nodes on loopback and prints their HTTP addresses and the management token', async () => {
    const result = await cli('up')
    await state().catch(() => undefined)
    expect(result.code, result.stderr).to.equal(0)
    cluster = await LocalCluster.attach(root)
    const current = await state()
    expect(Object.keys(current.nodes)).to.deep.equal(['n1', 'n2', 'n3'])
    for (const node of Object.values(current.nodes)) {
      expect(result.stdout).to.include(`http://${node.httpAddress}`)
      expect(node.httpAddress).to.match(/^127\.0\.0\.1:\d+$/)
      expect(alive(node.pid)).to.equal(true)
      // Each node dials its two peers through proxies, never at their real cluster addresses.
      expect(Object.keys(node.proxies).sort()).to.have.length(2)
      for (const [peer, proxy] of Object.entries(node.proxies)) expect(proxy).to.not.equal(current.nodes[peer]!.clusterAddress)
    }
    expect(result.stdout).to.include(`Management token: ${current.managementToken}`)
    expect(alive(current.proxyPid!)).to.equal(true)
  })

  it('status --json shows three running nodes, one leader, and every node naming it', async () => {
    const shown = await status()
    expect(shown.nodes.map((node) => node.node)).to.deep.equal(['n1', 'n2', 'n3'])
    expect(shown.nodes.every((node) => node.up && !node.paused)).to.equal(true)
    expect(shown.leaders).to.have.length(1)
    expect(shown.nodes.every((node) => node.leader === shown.leaders[0])).to.equal(true)
    expect(shown.nodes.every((node) => node.term > 0 && node.appliedIndex > 0)).to.equal(true)
    expect(shown.proxy.up).to.equal(true)
    const table = await cli('status')
    expect(table.stdout).to.match(/^NODE\s+PROCESS\s+ROLE/)
  })

  it('every node reports each server at the address it advertises, not at the proxy it dials it through', async () => {
    // A node dials its --peer servers before its replica starts: links open by then count as much as later ones.
    for (const node of cluster!.nodeNames()) await expectAdvertisedAddresses(node)
  })

  it('kill leader SIGKILLs the leader, and the other two elect a new one', async () => {
    const old = await cluster!.leader()
    const pid = (await state()).nodes[old]!.pid
    const result = await cli('kill', 'leader')
    expect(result.code, result.stderr).to.equal(0)
    expect(result.stdout).to.include(`killed ${old}`)
    expect(alive(pid)).to.equal(false)
    const next = await cluster!.leader(10_000)
    expect(next).to.not.equal(old)
    const shown = await status()
    expect(shown.nodes.find((node) => node.node === old)).to.include({ up: false, role: 'down' })
    await createPolicy(next, 'written-while-one-was-down')
  })

  it('restart starts the killed node on its data dir and ports, and it catches up', async () => {
    const down = (await status()).nodes.find((node) => !node.up)!
    const result = await cli('restart', down.node)
    expect(result.code, result.stderr).to.equal(0)
    const shown = await status()
    const restarted = shown.nodes.find((node) => node.node === down.node)!
    expect(restarted).to.include({ up: true, httpAddress: down.httpAddress })
    await eventually(async () => (await policyNames(down.node)).has('written-while-one-was-down'), `${down.node} catching up`)
    // Its peers were running: its links to them opened while it was still opening its data.
    await expectAdvertisedAddresses(down.node)
  })

  it('pause stops a node (SIGSTOP) while the others go on, and resume lets it catch up', async () => {
    const leader = await cluster!.leader()
    const follower = cluster!.nodeNames().find((name) => name !== leader)!
    const paused = await cli('pause', follower)
    expect(paused.code, paused.stderr).to.equal(0)
    expect((await status()).nodes.find((node) => node.node === follower)).to.include({ up: true, paused: true })
    await createPolicy(leader, 'written-while-one-was-paused')
    const resumed = await cli('resume', follower)
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect((await status()).nodes.find((node) => node.node === follower)).to.include({ up: true, paused: false })
    await eventually(async () => (await policyNames(follower)).has('written-while-one-was-paused'), `${follower} catching up`)
  })

  it('partition cuts a node off at the proxies: the majority commits without it until heal', async () => {
    const leader = await cluster!.leader()
    const follower = cluster!.nodeNames().find((name) => name !== leader)!
    const cut = await cli('partition', follower)
    expect(cut.code, cut.stderr).to.equal(0)
    expect((await status()).partitioned).to.deep.equal([follower])
    await createPolicy(leader, 'written-during-partition')
    // Long enough for a heartbeat or two to carry the entry, were the link still there.
    const deadline = Date.now() + 1_000
    while (Date.now() < deadline) {
      expect((await policyNames(follower)).has('written-during-partition'), 'the partitioned node saw the write').to.equal(false)
      await new Promise((resolvePromise) => setTimeout(resolvePromise, 100))
    }
    const healed = await cli('heal')
    expect(healed.code, healed.stderr).to.equal(0)
    expect((await status()).partitioned).to.deep.equal([])
    await eventually(async () => (await policyNames(follower)).has('written-during-partition'), `${follower} catching up after heal`)
  })

  it('wipe deletes a node\'s data dir and starts it again: it rejoins, becomes a voter again and holds what was written before', async () => {
    const leader = await cluster!.leader()
    const node = cluster!.nodeNames().find((name) => name !== leader)!
    await createPolicy(leader, 'written-before-wipe')
    await eventually(async () => (await policyNames(node)).has('written-before-wipe'), `${node} holding the write before the wipe`)
    const configuration = async (): Promise<{ Index: number; Servers: Array<{ ID: string; Voter: boolean }> }> => {
      const answer = await cluster!.request(await cluster!.leader(), 'GET', '/v1/operator/raft/configuration')
      expect(answer.status, answer.text).to.equal(200)
      return answer.body as { Index: number; Servers: Array<{ ID: string; Voter: boolean }> }
    }
    const indexBefore = (await configuration()).Index
    const before = (await state()).nodes[node]!
    // Something only the old data dir holds: it must be gone, not merely shadowed.
    const marker = join(before.dataDir, 'written-before-wipe.marker')
    await writeFile(marker, 'x')
    const result = await cli('wipe', node)
    expect(result.code, result.stderr).to.equal(0)
    expect(result.stdout.trim().split('\n')).to.have.length(1)
    expect(result.stdout).to.match(new RegExp(`^wiped ${node} \\(pid ${before.pid} killed, data dir deleted\\) and started it again as pid \\d+ `))
    const after = (await state()).nodes[node]!
    expect(alive(before.pid)).to.equal(false)
    expect(alive(after.pid)).to.equal(true)
    expect(after.pid).to.not.equal(before.pid)
    expect(after).to.include({ httpAddress: before.httpAddress, clusterAddress: before.clusterAddress, dataDir: before.dataDir })
    expect(after.proxies).to.deep.equal(before.proxies)
    expect(existsSync(marker)).to.equal(false)
    // The leader removes it, adds it back as a non-voter and promotes it: a newer configuration with three voters (the
    // configuration of before the wipe, still in force for a moment, has them too, but at its old index).
    await eventually(
      async () => {
        const current = await configuration()
        return current.Index > indexBefore && current.Servers.length === 3 && current.Servers.every((server) => server.Voter)
      },
      `${node} a voter again`,
      30_000,
    )
    await eventually(async () => (await policyNames(node)).has('written-before-wipe'), `${node} holding the write made before the wipe`)
    expect((await status()).nodes.find((shown) => shown.node === node)).to.include({ up: true, paused: false })
  })

  it('exits 2 for usage errors and 1 for failures, with one line saying why', async () => {
    for (const args of [['bogus'], ['kill'], ['kill', 'n9'], ['wipe'], ['wipe', 'n9'], ['wipe', 'n1', 'n2'], ['status', '--colour'], ['heal', 'n1']]) {
      const result = await cli(...args)
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(2)
      expect(result.stderr).to.match(/^cluster: /)
    }
    const notPaused = await cli('resume', 'n1')
    expect(notPaused.code).to.equal(1)
    expect(notPaused.stderr).to.equal('cluster: n1 is not paused\n')
    const nowhere = await cli('--root', join(root, 'missing'), 'status')
    expect(nowhere.code).to.equal(1)
    expect(nowhere.stderr.trim().split('\n')).to.have.length(1)
  })

  it('wipe refuses a cluster of one, which has nobody to rejoin, and leaves its node and data as they were', async () => {
    const single = join(root, 'single')
    const started = await cli('--root', single, 'up', '--nodes', '1')
    const current = JSON.parse(await readFile(join(single, 'state.json'), 'utf8').catch(() => '{"nodes":{}}')) as ClusterState
    everyPid.push(...Object.values(current.nodes).map((node) => node.pid), current.proxyPid ?? 0)
    try {
      expect(started.code, started.stderr).to.equal(0)
      const node = current.nodes['n1']!
      const result = await cli('--root', single, 'wipe', 'n1')
      expect(result.code).to.equal(1)
      expect(result.stderr).to.equal('cluster: n1 is the only node: wiping it would lose every write (there is no cluster to rejoin)\n')
      expect(alive(node.pid)).to.equal(true)
      expect(existsSync(node.dataDir)).to.equal(true)
    } finally {
      await cli('--root', single, 'down')
    }
  })

  it('down stops every process it started and keeps the data and the state file', async () => {
    const before = await state()
    const pids = [...Object.values(before.nodes).map((node) => node.pid), before.proxyPid!]
    expect(pids.every(alive)).to.equal(true)
    const result = await cli('down')
    expect(result.code, result.stderr).to.equal(0)
    await eventually(async () => !pids.some(alive), 'every process gone', 5_000)
    const after = await state()
    expect(Object.values(after.nodes).every((node) => node.pid === 0)).to.equal(true)
    expect(after.proxyPid).to.equal(undefined)
    expect(after.managementToken).to.equal(before.managementToken)
    expect((await status()).nodes.every((node) => !node.up)).to.equal(true)
  })
})
