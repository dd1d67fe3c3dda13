/**
 * `npm run cluster -- up --tls` as an operator uses it: the tool issues a CA and certificates into the root, the
 * nodes link over mutual TLS and serve HTTPS only with client certificates required, and the tool's own later verbs
 * (run as new processes, which learn all of it from the state file) speak HTTPS. The test runs `cluster/cli.ts` as a
 * subprocess against a temporary `--root`, pastes the flags `up` printed into the built `warden` binary, and checks
 * what must be refused (no client certificate, plain HTTP). One cluster serves the file, in order; whatever it started
 * is stopped in `after`, by the tool and then by pid.
 */
import { expect } from 'chai'
import { statSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client, ConnectionError } from '../../src/api/index.js'
import { LocalCluster, type ClusterState, type NodeStatus } from '../../cluster/lib.js'
import { runWarden } from '../cli/run.js'
import { eventually } from './eventually.js'
import { alive, runClusterTool, type CliResult } from './cluster-tool-run.js'



interface StatusJson {
  nodes: NodeStatus[]
  leaders: string[]
  tls?: { caFile: string; clientCertFile: string; clientKeyFile: string }
}


describe('the cluster tool with TLS (npm run cluster -- up --tls)', function () {
  this.timeout(60_000)
  let root: string
  let upOutput = ''
  const everyPid = new Set<number>()
  const clients: Client[] = []

  const cli = (...args: string[]): Promise<CliResult> => runClusterTool(root, ...args)


  async function state(): Promise<ClusterState> {
    const current = JSON.parse(await readFile(join(root, 'state.json'), 'utf8')) as ClusterState
    for (const pid of [...Object.values(current.nodes).map((node) => node.pid), current.proxyPid ?? 0]) if (pid > 0) everyPid.add(pid)
    return current
  }

  async function status(): Promise<StatusJson> {
    const result = await cli('status', '--json')
    expect(result.code, result.stderr).to.equal(0)
    return JSON.parse(result.stdout) as StatusJson
  }

  /** The flags `up` printed for the command line, as an operator would paste them. */
  function printedFlags(): string[] {
    const line = upOutput.split('\n').find((candidate) => candidate.startsWith('For the command line: warden <command> '))
    expect(line, upOutput).to.not.equal(undefined)
    return line!.slice('For the command line: warden <command> '.length).trim().split(/\s+/)
  }

  function client(options: ConstructorParameters<typeof Client>[0]): Client {
    const made = new Client(options)
    clients.push(made)
    return made
  }

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'warden-cluster-tool-tls-'))
  })

  after(async () => {
    for (const made of clients) made.close()
    await cli('down').catch(() => undefined)
    await state().catch(() => undefined)
    for (const pid of everyPid) if (alive(pid)) process.kill(pid, 'SIGKILL')
    await rm(root, { recursive: true, force: true })
  })

  it('up --tls issues the certificates, starts HTTPS-only nodes and prints their addresses and the warden flags', async () => {
    const result = await cli('up', '--tls')
    await state().catch(() => undefined)
    expect(result.code, result.stderr).to.equal(0)
    upOutput = result.stdout
    const current = await state()
    const tls = current.tls!
    expect(tls, 'the state file records TLS').to.not.equal(undefined)
    for (const [name, node] of Object.entries(current.nodes)) {
      expect(node.httpAddress, `${name}: plain HTTP is off`).to.equal('')
      expect(result.stdout).to.include(`${name}  https://${node.httpsAddress}`)
      expect(alive(node.pid)).to.equal(true)
      expect(statSync(node.keyFile!).mode & 0o777, `${node.keyFile} mode`).to.equal(0o600)
    }
    for (const key of [tls.caKeyFile, tls.clientKeyFile]) expect(statSync(key).mode & 0o777, `${key} mode`).to.equal(0o600)
    expect(printedFlags()).to.deep.equal([
      '-http-addr', `https://${current.nodes['n1']!.httpsAddress}`,
      '-ca-file', tls.caFile,
      '-client-cert', tls.clientCertFile,
      '-client-key', tls.clientKeyFile,
    ])
    // Paths only: no key leaves its file.
    expect(result.stdout).to.not.include('PRIVATE KEY')
    for (const name of Object.keys(current.nodes)) {
      expect(await readFile(join(root, 'logs', `${name}.log`), 'utf8')).to.not.include('PRIVATE KEY')
    }
  })

  it('status (a new process, reading the state file) reaches every node over HTTPS and shows one leader', async () => {
    await eventually(async () => (await status()).leaders.length === 1, 'one leader')
    const shown = await status()
    expect(shown.nodes.every((node) => node.up && node.role !== 'unknown' && node.leader === shown.leaders[0])).to.equal(true)
    expect(shown.tls?.caFile).to.equal((await state()).tls?.caFile)
    const table = await cli('status')
    expect(table.stdout).to.match(/https:\/\/127\.0\.0\.1:\d+/)
  })

  it('a write over HTTPS with the client certificate works, through the printed warden flags and through src/api', async () => {
    const current = await state()
    const environment = { WARDEN_HTTP_TOKEN: current.managementToken }
    const created = await runWarden(['acl', 'policy', 'create', '-name', 'over-https', ...printedFlags()], { env: environment })
    expect(created.code, created.stderr).to.equal(0)
    expect(created.stdout).to.match(/Name:\s+over-https/)
    const cluster = await LocalCluster.attach(root)
    const leader = await cluster.leader()
    const api = client({ address: cluster.apiAddress(leader), token: current.managementToken, tls: cluster.clientTls()! })
    const answer = await api.request('PUT', '/v1/acl/policy', { body: { Name: 'over-https-api' } })
    expect(answer.status, answer.text).to.equal(200)
    for (const node of cluster.nodeNames()) {
      await eventually(async () => {
        const list = await cluster.request(node, 'GET', '/v1/acl/policies?stale')
        return (list.body as Array<{ Name: string }>).some((policy) => policy.Name === 'over-https-api')
      }, `${node} holding the write (replicated over the TLS links)`)
    }
  })

  it('refuses a client without a certificate, and plain HTTP', async () => {
    const current = await state()
    const flags = printedFlags()
    const withoutCert = await runWarden(['acl', 'policy', 'list', ...flags.slice(0, 4)], { env: { WARDEN_HTTP_TOKEN: current.managementToken } })
    expect(withoutCert.code).to.not.equal(0)
    expect(withoutCert.stderr).to.include('client certificate')
    const plain = client({ address: `http://${current.nodes['n1']!.httpsAddress}`, token: current.managementToken })
    const refused = await plain.request('GET', '/v1/status/leader', { timeoutMs: 5_000 }).then(
      (answer) => answer.status,
      (error: unknown) => error,
    )
    expect(refused, 'plain HTTP to the HTTPS port').to.be.instanceOf(ConnectionError)
  })

  it('kill, restart, partition and heal keep working: the restarted node catches up over TLS', async () => {
    const killed = await cli('kill', 'leader')
    expect(killed.code, killed.stderr).to.equal(0)
    const node = /^killed (n\d)/.exec(killed.stdout)?.[1]
    expect(node, killed.stdout).to.not.equal(undefined)
    const cluster = await LocalCluster.attach(root)
    const next = await cluster.leader(10_000)
    expect((await cluster.request(next, 'PUT', '/v1/acl/policy', { body: { Name: 'while-one-was-down' }, timeoutMs: 15_000 })).status).to.equal(200)
    const restarted = await cli('restart', node!)
    expect(restarted.code, restarted.stderr).to.equal(0)
    await state()
    await eventually(async () => {
      const list = await cluster.request(node!, 'GET', '/v1/acl/policies?stale')
      return (list.body as Array<{ Name: string }>).some((policy) => policy.Name === 'while-one-was-down')
    }, `${node} catching up after its restart`)
    const follower = cluster.nodeNames().find((name) => name !== next)!
    expect((await cli('partition', follower)).code).to.equal(0)
    expect((await cli('heal')).code).to.equal(0)
  })

  it('down stops every process it started', async () => {
    const before = await state()
    const pids = [...Object.values(before.nodes).map((node) => node.pid), before.proxyPid!]
    expect(pids.every(alive)).to.equal(true)
    const result = await cli('down')
    expect(result.code, result.stderr).to.equal(0)
    await eventually(async () => !pids.some(alive), 'every process gone', 5_000)
    expect((await status()).nodes.every((node) => !node.up)).to.equal(true)
  })
})
