/**
 * A three-node cluster of real `warden agent` processes for cluster tests: free loopback ports, a data dir per node
 * (kept across kill and restart), a shared cluster key and management token. `kill` is SIGKILL; `restart` starts the
 * node again on the same data dir and ports. Every process is stopped by `stop()` or, if a test fails first, by the
 * root hook (test/support/hooks.ts).
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { freePort } from '../../cluster/lib.js'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startAgent, type AgentProcess } from './agent.js'

/** A key as `warden keygen` makes one: 32 random bytes in base64, new for each test process. */
export const CLUSTER_KEY = randomBytes(32).toString('base64')
export const MANAGEMENT_TOKEN = '5c1e7f9a-2b3d-4e5f-8a9b-0c1d2e3f4a5b'

export { freePort }

export interface NodeSpec {
  name: string
  httpPort: number
  clusterPort: number
  dataDir: string
}

export class TestCluster {
  readonly nodes = new Map<string, AgentProcess | undefined>()

  private constructor(
    readonly specs: NodeSpec[],
    private readonly root: string,
    private readonly extraArgs: string[],
  ) {}

  static async start(options: { size?: number; args?: string[] } = {}): Promise<TestCluster> {
    const root = await mkdtemp(join(tmpdir(), 'warden-cluster-'))
    const specs: NodeSpec[] = []
    for (let n = 1; n <= (options.size ?? 3); n += 1) {
      specs.push({ name: `n${n}`, httpPort: await freePort(), clusterPort: await freePort(), dataDir: join(root, `n${n}`) })
    }
    const cluster = new TestCluster(specs, root, options.args ?? [])
    await Promise.all(specs.map((spec) => cluster.startNode(spec.name)))
    await cluster.ready()
    return cluster
  }

  /**
   * Waits until a leader is agreed and the management token works on every node: the leader writes the built-ins
   * just after its election, so a cluster that has a leader may not know the token for a few milliseconds more.
   */
  async ready(timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    await this.leader(timeoutMs)
    for (const agent of this.running()) {
      for (;;) {
        const self = await agent.request('GET', '/v1/acl/token/self?stale').catch(() => undefined)
        if (self?.status === 200) break
        if (Date.now() > deadline) throw new Error(`the management token did not work on ${agent.httpAddress} in time`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }
  }

  private spec(name: string): NodeSpec {
    const spec = this.specs.find((candidate) => candidate.name === name)
    if (spec === undefined) throw new Error(`no node ${name}`)
    return spec
  }

  async startNode(name: string): Promise<AgentProcess> {
    const spec = this.spec(name)
    const peers = this.specs.flatMap((other) => ['--peer', `${other.name}=127.0.0.1:${other.clusterPort}`])
    const agent = await startAgent({
      dev: false,
      dataDir: spec.dataDir,
      keepDataDir: true,
      args: [
        '--node-name', spec.name,
        '--http-addr', `127.0.0.1:${spec.httpPort}`,
        '--cluster-addr', `127.0.0.1:${spec.clusterPort}`,
        '--cluster-key', CLUSTER_KEY,
        '--initial-management-token', MANAGEMENT_TOKEN,
        ...peers,
        ...this.extraArgs,
      ],
    })
    agent.managementToken = MANAGEMENT_TOKEN
    this.nodes.set(name, agent)
    return agent
  }

  node(name: string): AgentProcess {
    const agent = this.nodes.get(name)
    if (agent === undefined) throw new Error(`node ${name} is not running`)
    return agent
  }

  running(): AgentProcess[] {
    return [...this.nodes.values()].filter((agent): agent is AgentProcess => agent !== undefined)
  }

  /** The name of the node every running node agrees leads, waiting up to `timeoutMs` for agreement. */
  async leader(timeoutMs = 10_000): Promise<string> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const answers = await Promise.all(
        this.running().map(async (agent) => {
          try {
            return (await agent.request('GET', '/v1/status/leader', { token: null })).body as string
          } catch {
            return ''
          }
        }),
      )
      const first = answers[0]
      if (first !== undefined && first !== '' && answers.every((answer) => answer === first)) {
        const spec = this.specs.find((candidate) => `127.0.0.1:${candidate.clusterPort}` === first)
        if (spec !== undefined && this.nodes.get(spec.name) !== undefined) return spec.name
      }
      if (Date.now() > deadline) throw new Error(`no agreed leader within ${timeoutMs} ms: ${JSON.stringify(answers)}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  followers(leader: string): string[] {
    return this.specs.map((spec) => spec.name).filter((name) => name !== leader && this.nodes.get(name) !== undefined)
  }

  async kill(name: string): Promise<void> {
    await this.node(name).kill()
    this.nodes.set(name, undefined)
  }

  async restart(name: string): Promise<AgentProcess> {
    return this.startNode(name)
  }

  async stop(): Promise<void> {
    await Promise.all(this.running().map((agent) => agent.stop()))
    await rm(this.root, { recursive: true, force: true })
  }
}
