/**
 * warden clusters for the benchmark: LocalCluster (cluster/lib.ts) on a temporary root, default agent settings, data
 * dirs on disk, fsync on.
 *
 * Peer links: LocalCluster runs every peer link through a loopback TCP proxy process (so that it can partition
 * them). That proxy leaves Nagle's algorithm on, and a small Raft frame held back by Nagle waits for the peer's
 * delayed ACK (40 ms on Linux): measured through it, one-connection writes take 3-4x longer than warden takes, and
 * etcd, run without a proxy, would be compared with the proxy rather than with warden. So by default the nodes are
 * restarted once, one at a time, with `--peer` flags naming each other's real cluster addresses (a later --peer
 * for a name overrides the proxy one), and the proxy idles. `viaProxy` keeps the proxies in the path (and reports
 * the proxy's CPU).
 *
 * With `tls`, the nodes link over mutual TLS and serve HTTPS (client certificates required) beside plain HTTP, which
 * stays on so that one node can be read both ways (the links workload); the benchmark's own calls use plain HTTP.
 *
 * With `profileDir`, every agent runs V8's CPU profiler (cpu-profile-hook.mjs, preloaded through NODE_OPTIONS) and
 * writes CPU.<pid>.cpuprofile there when it stops; `pids-<cluster>.json` there says which pid was which node.
 *
 * WardenFederation: datacenters of their own Raft group each (cluster/lib.ts `datacenters`), the first the primary, the
 * others joined to it over WAN links and replicating with the management token. LocalCluster sends every link of a
 * federation, Raft and WAN, through the proxies (a dial hook reroutes dials of a node's real cluster address); linked
 * directly here, each node's proxy addresses are rewritten to the real ones, so that its --peer flags and its dial
 * routes name its peers themselves, and every node is restarted once.
 */
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve, sep } from 'node:path'
import { pathToFileURL } from 'node:url'
import { LocalCluster, type ClusterState } from '../../cluster/lib.js'
import { HTTP_CONNECTIONS_MAX } from '../../src/agent/limits.js'
import type { CannonTls } from './cannon.js'
import { isOurs, registerCleanup, signalIfOurs } from './children.js'
import { httpCall, keepAliveClients, type ClientPool, type HttpAnswer, type HttpOptions } from './http-client.js'
import type { Watched } from './procfs.js'

/**
 * Every connection the bench opens comes from 127.0.0.1, and loopback counts like any client address: 10,000 parked
 * blocking queries and 256 writers need more than the agent's 200 per client. Raised to the node's own bound on
 * connections (agent/limits.ts), which still holds.
 */
const AGENT_ARGS = ['--http-max-conns-per-client', String(HTTP_CONNECTIONS_MAX)]

export interface StartOptions {
  profileDir?: string
  viaProxy?: boolean
  /** TLS peer links and HTTPS beside plain HTTP (cluster/lib.ts `tls` and `plainHttp`). */
  tls?: boolean
  /** Agent flags beyond the bench's own (e.g. `--unsealed-peer-links-for-benchmark`). */
  args?: string[]
}

/**
 * What every benchmark cluster handle has: its LocalCluster under a temporary root, API clients, the management
 * token, calls with it, restarts (profiled when asked), and its stop, registered with children.ts so that the run
 * stops it also on failure and on Ctrl-C.
 */
abstract class ClusterHandle {
  /** 64 keep-alive sockets to each node at most. */
  readonly clients: ClientPool = keepAliveClients(64)
  private readonly unregister: () => void
  private readonly profiledPids: Array<{ node: string; pid: number }> = []

  protected constructor(
    readonly label: string,
    readonly cluster: LocalCluster,
    readonly root: string,
    protected readonly profileDir: string | undefined,
    /** Peer traffic goes through LocalCluster's proxy process (else the nodes dial each other directly). */
    readonly viaProxy: boolean,
  ) {
    this.unregister = registerCleanup({ stop: () => this.stop(), killNow: () => this.killNow() })
  }

  get token(): string {
    return this.cluster.state().managementToken
  }

  nodes(): string[] {
    return this.cluster.nodeNames()
  }

  address(node: string): string {
    const spec = this.cluster.state().nodes[node]
    if (spec === undefined) throw new Error(`no node ${node}`)
    return spec.httpAddress
  }

  origin(node: string): string {
    return `http://${this.address(node)}`
  }

  pid(node: string): number {
    return this.cluster.state().nodes[node]?.pid ?? 0
  }

  call(node: string, method: string, path: string, options: Omit<HttpOptions, 'token'> & { token?: string } = {}): Promise<HttpAnswer> {
    return httpCall(this.clients, this.address(node), method, path, { token: this.token, ...options })
  }

  /** A call that must answer 200; its JSON body. */
  async json<T>(node: string, method: string, path: string, body?: unknown): Promise<T> {
    const answer = await this.call(node, method, path, { body, timeoutMs: 30_000 })
    if (answer.status !== 200) throw new Error(`${method} ${path} on ${node}: ${answer.status} ${answer.text.slice(0, 300)}`)
    return JSON.parse(answer.text) as T
  }

  async restart(node: string): Promise<void> {
    await withProfiling(this.profileDir, () => this.cluster.restart(node))
    this.recordProfiledPids()
  }

  async stop(): Promise<void> {
    this.unregister()
    this.clients.close()
    try {
      await this.cluster.down()
    } finally {
      if (this.profileDir !== undefined) await writeFile(join(this.profileDir, `pids-${this.label.replace(/\W+/g, '-')}.json`), JSON.stringify(this.profiledPids, null, 2))
      await rm(this.root, { recursive: true, force: true })
    }
  }

  protected recordProfiledPids(): void {
    if (this.profileDir === undefined) return
    for (const node of this.nodes()) {
      const pid = this.pid(node)
      if (pid !== 0 && !this.profiledPids.some((entry) => entry.pid === pid)) this.profiledPids.push({ node, pid })
    }
  }

  /** Writes LocalCluster's state file as it does (atomically): the only way in for what `up` decides (ports, proxies). */
  protected async rewriteState(change: (state: ClusterState) => void): Promise<void> {
    const statePath = join(this.root, 'state.json')
    const state = JSON.parse(await readFile(statePath, 'utf8')) as ClusterState
    change(state)
    const temporary = `${statePath}.${process.pid}.bench.tmp`
    await writeFile(temporary, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 })
    await rename(temporary, statePath)
  }

  /** Until the management token works on `node` (a leader writes it just after its election). */
  protected async waitForToken(node: string, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while ((await this.call(node, 'GET', '/v1/acl/token/self?stale').catch(() => undefined))?.status !== 200) {
      if (Date.now() > deadline) throw new Error(`${node}: the management token did not work after the restart`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  private killNow(): void {
    const state = this.cluster.state()
    for (const spec of Object.values(state.nodes)) signalIfOurs(spec.pid, spec.dataDir, 'SIGKILL')
    if (state.proxyPid !== undefined) signalIfOurs(state.proxyPid, join(state.root, 'proxy.json'), 'SIGKILL')
  }
}

export class WardenCluster extends ClusterHandle {
  leader = ''
  followers: string[] = []
  private roles = new Map<string, string>()

  static async start(label: string, nodes: number, options: StartOptions = {}): Promise<WardenCluster> {
    // Not under the repository: the disk is the same, and a crashed run leaves nothing in the working tree.
    const root = await mkdtemp(join(tmpdir(), 'warden-bench-'))
    const tls = options.tls === true ? { tls: true, plainHttp: true } : {}
    // up() stops what it started when it fails; the root is ours to remove.
    const cluster = await withProfiling(options.profileDir, () => LocalCluster.up({ nodes, root, args: [...AGENT_ARGS, ...(options.args ?? [])], ...tls })).catch(async (error: unknown) => {
      await rm(root, { recursive: true, force: true })
      throw error
    })
    const handle = new WardenCluster(label, cluster, root, options.profileDir, options.viaProxy === true || nodes === 1)
    try {
      if (!handle.viaProxy) await handle.linkDirectly()
      handle.recordProfiledPids()
      await handle.refreshRoles()
    } catch (error) {
      // A node that fails its restart must not leave the others running.
      await handle.stop().catch(() => undefined)
      throw error
    }
    return handle
  }

  /**
   * Restarts every node, one at a time so that a majority always runs, with --peer flags that name the real cluster
   * addresses. LocalCluster keeps extra agent flags in its state file and passes them on every restart; writing them
   * there (atomically, as LocalCluster writes it) is the only way in, since `up` picks the ports.
   */
  private async linkDirectly(): Promise<void> {
    await this.rewriteState((state) => {
      const peers = Object.entries(state.nodes).flatMap(([name, spec]) => ['--peer', `${name}=${spec.clusterAddress}`])
      state.args = [...(state.args ?? []), ...peers]
    })
    for (const node of this.nodes()) {
      await this.restart(node)
      await this.cluster.leader(20_000)
    }
    // As LocalCluster's own readiness check: the management token must work on every node before any load.
    for (const node of this.nodes()) await this.waitForToken(node)
  }

  /** The node's HTTPS origin, in a cluster started with `tls`. */
  httpsOrigin(node: string): string {
    const address = this.cluster.state().nodes[node]?.httpsAddress
    if (address === undefined) throw new Error(`${this.label}: ${node} serves no HTTPS (start the cluster with tls)`)
    return `https://${address}`
  }

  /** The client certificate's files for a load over HTTPS (paths only: autocannon reads them). */
  cannonTls(): CannonTls {
    const tls = this.cluster.state().tls
    if (tls === undefined) throw new Error(`${this.label}: no TLS (start the cluster with tls)`)
    return { caFile: tls.caFile, certFile: tls.clientCertFile, keyFile: tls.clientKeyFile }
  }

  /** Asks the cluster who leads now (after a failover, a restart). */
  async refreshRoles(): Promise<void> {
    this.leader = await this.cluster.leader(20_000)
    const statuses = await this.cluster.status()
    this.roles = new Map(statuses.map((status) => [status.node, status.role]))
    this.followers = this.nodes().filter((node) => node !== this.leader)
  }

  /** The nodes (with their roles) and the link proxy, for a UsageMonitor. */
  watched(): Watched[] {
    const state = this.cluster.state()
    const nodes: Watched[] = this.nodes().map((node) => ({ label: node, role: this.roles.get(node) ?? 'unknown', pid: state.nodes[node]?.pid ?? 0 }))
    if (state.proxyPid !== undefined && this.nodes().length > 1 && this.viaProxy) nodes.push({ label: 'proxy', pid: state.proxyPid })
    return nodes
  }
}

/**
 * A federation (cluster/lib.ts `datacenters`): `nodes` nodes in each of `datacenters`, named `<dc>-n1`.., the first
 * datacenter the primary. A datacenter can be stopped and emptied (`wipeDatacenter`) and started again from nothing
 * (`startDatacenter`), to measure a secondary's initial replication.
 */
export class WardenFederation extends ClusterHandle {
  static async start(label: string, datacenters: string[], nodes: number, options: StartOptions = {}): Promise<WardenFederation> {
    if (options.tls === true) throw new Error('WardenFederation: TLS is not supported')
    const root = await mkdtemp(join(tmpdir(), 'warden-bench-'))
    const cluster = await withProfiling(options.profileDir, () => LocalCluster.up({ nodes, root, datacenters, args: [...AGENT_ARGS, ...(options.args ?? [])] })).catch(async (error: unknown) => {
      await rm(root, { recursive: true, force: true })
      throw error
    })
    const handle = new WardenFederation(label, cluster, root, options.profileDir, options.viaProxy === true)
    try {
      if (!handle.viaProxy) await handle.linkDirectly()
      handle.recordProfiledPids()
    } catch (error) {
      await handle.stop().catch(() => undefined)
      throw error
    }
    return handle
  }

  get datacenters(): string[] {
    return this.cluster.datacenterNames() ?? []
  }

  nodesOf(datacenter: string): string[] {
    return this.cluster.nodesOf(datacenter)
  }

  /** The node a majority of `datacenter` names as leader, waiting up to `timeoutMs`. */
  leaderOf(datacenter: string, timeoutMs = 20_000): Promise<string> {
    return this.cluster.leader(timeoutMs, datacenter)
  }

  /** The nodes of `datacenter` (with their roles now) and the proxy when links cross it, for a UsageMonitor. */
  async watched(datacenters: string[] = this.datacenters): Promise<Watched[]> {
    const statuses = await this.cluster.status()
    const state = this.cluster.state()
    const nodes: Watched[] = datacenters.flatMap((datacenter) =>
      this.nodesOf(datacenter).map((node) => ({ label: node, role: statuses.find((status) => status.node === node)?.role ?? 'unknown', pid: state.nodes[node]?.pid ?? 0 })),
    )
    if (state.proxyPid !== undefined && this.viaProxy) nodes.push({ label: 'proxy', pid: state.proxyPid })
    return nodes
  }

  /** SIGKILL every node of `datacenter` and delete their data dirs: it stays down, empty, until `startDatacenter`. */
  async wipeDatacenter(datacenter: string): Promise<void> {
    const state = this.cluster.state()
    for (const node of this.nodesOf(datacenter)) {
      const spec = state.nodes[node]!
      // The state file names the directory to delete: only ever one inside this federation's root.
      const dataDir = resolve(spec.dataDir)
      if (!dataDir.startsWith(resolve(this.root) + sep)) throw new Error(`${node}'s data dir ${dataDir} is not under ${this.root}: not deleting it`)
      if (isOurs(spec.pid, spec.dataDir)) await this.cluster.kill(node)
      await rm(dataDir, { recursive: true, force: true })
    }
  }

  /** Starts every node of `datacenter` at once (on their data dirs, empty after `wipeDatacenter`). */
  async startDatacenter(datacenter: string): Promise<void> {
    // One profiling scope around them all: withProfiling sets and restores this process's environment.
    await withProfiling(this.profileDir, () => Promise.all(this.nodesOf(datacenter).map((node) => this.cluster.restart(node))))
    this.recordProfiledPids()
  }

  /**
   * Every node's proxy addresses rewritten to its peers' real cluster addresses (its --peer flags and its dial routes
   * are made of them), then every node restarted, one at a time per datacenter, so that each keeps a majority. Ready
   * as LocalCluster's `up` is: a leader in each datacenter, the management token working on every node, and every
   * node knowing every datacenter.
   */
  private async linkDirectly(): Promise<void> {
    await this.rewriteState((state) => {
      for (const spec of Object.values(state.nodes)) {
        for (const peer of Object.keys(spec.proxies)) spec.proxies[peer] = state.nodes[peer]!.clusterAddress
      }
    })
    for (const datacenter of this.datacenters) {
      for (const node of this.nodesOf(datacenter)) {
        await this.restart(node)
        await this.leaderOf(datacenter)
      }
    }
    for (const node of this.nodes()) {
      await this.waitForToken(node)
      const deadline = Date.now() + 20_000
      for (;;) {
        const known = await this.call(node, 'GET', '/v1/catalog/datacenters').catch(() => undefined)
        if (known?.status === 200 && this.datacenters.every((datacenter) => (JSON.parse(known.text) as string[]).includes(datacenter))) break
        if (Date.now() > deadline) throw new Error(`${node} did not know every datacenter (${this.datacenters.join(', ')}) after the restart`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }
  }
}

const PROFILE_HOOK = pathToFileURL(join(import.meta.dirname, 'cpu-profile-hook.mjs')).href

/**
 * NODE_OPTIONS reaches the agents LocalCluster spawns (they inherit this environment while it is set) and nothing
 * started later. Node refuses --cpu-prof there, so a preloaded hook starts the same profiler (cpu-profile-hook.mjs).
 */
async function withProfiling<T>(profileDir: string | undefined, start: () => Promise<T>): Promise<T> {
  if (profileDir === undefined) return start()
  const previous = { options: process.env.NODE_OPTIONS, directory: process.env.WARDEN_BENCH_PROFILE_DIR }
  process.env.NODE_OPTIONS = `${previous.options ?? ''} --import ${PROFILE_HOOK}`.trim()
  process.env.WARDEN_BENCH_PROFILE_DIR = profileDir
  try {
    return await start()
  } finally {
    restore('NODE_OPTIONS', previous.options)
    restore('WARDEN_BENCH_PROFILE_DIR', previous.directory)
  }
}

function restore(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name]
  else process.env[name] = value
}
