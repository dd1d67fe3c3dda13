/**
 * Real `warden agent` processes of two builds (an earlier release and this tree) on the same data dirs and loopback
 * ports, for the upgrade test. A node keeps its name, ports and data dir across restarts, whichever build runs it; it
 * is started with the flags test/support/cluster.ts uses (--node-name, --http-addr, --cluster-addr, --cluster-key,
 * --initial-management-token, --data-dir, and --peer for every founder, or --join, or neither for a server alone).
 *
 * The cluster key is the cluster's own (`clusterKey`, CLUSTER_KEY unless `create` is given one) and may be changed
 * between runs, as an operator changes it during a full stop. `startToExit` runs a node that is expected to refuse to
 * start, and returns its exit code and output.
 *
 * `stop` is SIGTERM and waits for the exit (which must be 0); every process still running is SIGKILLed by `destroy`
 * (the suite's afterEach, so a failing test leaks nothing), and, as a last resort, when the mocha process exits.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fetchTarget, freePort } from '../../cluster/lib.js'
import { WardenClient } from '../../src/api/index.js'

/** A key as `warden keygen` makes one (32 random bytes in base64): valid for the builds before keys were checked too. */
export const CLUSTER_KEY = randomBytes(32).toString('base64')
export const MANAGEMENT_TOKEN = '7d0c5b1e-3a2f-4c6d-9e8f-1a2b3c4d5e6f'

export type Release = 'old' | 'new'

/** How a node is started: a founder of the cluster (--peer for every founder), a joiner (--join), or alone. */
export type Role = { kind: 'founder' } | { kind: 'joiner'; through: string[] } | { kind: 'alone' }

export interface Answer {
  status: number
  body: any
  text: string
}

/** Every child process started and not yet seen exiting, killed at exit whatever happened. */
const live = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})

const LOG_LINES_KEPT = 4_000

export class UpgradeNode {
  /** The build running now, or undefined while stopped. */
  release: Release | undefined
  child: ChildProcess | undefined
  private exited: Promise<number | null> | undefined
  /** Every log line of every run of this node, each prefixed with the build that wrote it (bounded). */
  readonly logs: string[] = []
  /** Set from SIGTERM (or SIGKILL) until the process is ready again: its requests may fail meanwhile. */
  downSince: number | undefined = 0
  /** Closed periods this node was down (from SIGTERM or SIGKILL until ready again), in Date.now() milliseconds. */
  readonly downtimes: Array<{ from: number; to: number }> = []
  /** The API client for this node's HTTP address (kept across restarts); closed once a run has exited. */
  private client: WardenClient | undefined

  constructor(
    readonly name: string,
    readonly httpPort: number,
    readonly clusterPort: number,
    readonly dataDir: string,
    public role: Role,
  ) {}

  get httpAddress(): string {
    return `127.0.0.1:${this.httpPort}`
  }

  get clusterAddress(): string {
    return `127.0.0.1:${this.clusterPort}`
  }

  get running(): boolean {
    return this.child !== undefined
  }

  /** Whether this node was down at any moment between `from` and `to`. */
  wasDown(from: number, to: number): boolean {
    if (this.downSince !== undefined && this.downSince <= to) return true
    return this.downtimes.some((period) => period.from <= to && period.to >= from)
  }

  /** The log lines of the current (or last) run only. */
  currentRun(): string[] {
    const start = this.logs.findLastIndex((line) => line.includes('--- starting '))
    return start === -1 ? [] : this.logs.slice(start)
  }

  /** Log lines of this node's runs that contain `text` (and were written by `release`, if given). */
  logged(text: string, release?: Release): string[] {
    return this.logs.filter((line) => line.includes(text) && (release === undefined || line.startsWith(`[${release}] `)))
  }

  record(release: Release, line: string): void {
    this.logs.push(`[${release}] ${line}`)
    if (this.logs.length > LOG_LINES_KEPT) this.logs.splice(0, this.logs.length - LOG_LINES_KEPT)
  }

  async start(release: Release, cli: string, args: string[]): Promise<void> {
    if (this.child !== undefined) throw new Error(`${this.name} is already running`)
    this.record(release, `--- starting ${cli} ${args.join(' ')}`)
    const child = spawn(process.execPath, [cli, 'agent', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    live.add(child)
    this.child = child
    this.release = release
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        live.delete(child)
        this.record(release, `--- exited with ${code ?? signal}`)
        resolve(code)
      }),
    )
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.name} (${release}) was not ready within 20 s`)), 20_000)
      createInterface({ input: child.stdout! }).on('line', (line) => {
        this.record(release, line)
        if (line.includes('"agent ready"')) {
          clearTimeout(timer)
          resolve()
        }
      })
      createInterface({ input: child.stderr! }).on('line', (line) => this.record(release, line))
      child.once('exit', (code, signal) => {
        clearTimeout(timer)
        reject(new Error(`${this.name} (${release}) exited with ${code ?? signal} before it was ready:\n${this.logs.slice(-30).join('\n')}`))
      })
    })
    try {
      await ready
      if (this.downSince !== undefined && this.downSince > 0) this.downtimes.push({ from: this.downSince, to: Date.now() })
      this.downSince = undefined
    } catch (error) {
      await this.kill()
      throw error
    }
  }

  /**
   * Runs `cli agent args` expecting it to exit before it is ready (a refused setting): resolves with the exit code and
   * the lines it wrote (stdout and stderr); rejects if it became ready or did not exit within `timeoutMs`.
   */
  async startToExit(release: Release, cli: string, args: string[], timeoutMs = 20_000): Promise<{ code: number | null; lines: string[] }> {
    if (this.child !== undefined) throw new Error(`${this.name} is already running`)
    this.record(release, `--- starting ${cli} ${args.join(' ')} (expected to exit)`)
    const child = spawn(process.execPath, [cli, 'agent', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    live.add(child)
    const lines: string[] = []
    const onLine = (line: string): void => {
      lines.push(line)
      this.record(release, line)
    }
    const out = createInterface({ input: child.stdout! })
    const err = createInterface({ input: child.stderr! })
    out.on('line', onLine)
    err.on('line', onLine)
    const outClosed = new Promise((resolve) => out.once('close', resolve))
    const errClosed = new Promise((resolve) => err.once('close', resolve))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)))
    clearTimeout(timer)
    live.delete(child)
    await Promise.all([outClosed, errClosed])
    this.record(release, `--- exited with ${code}`)
    if (lines.some((line) => line.includes('"agent ready"'))) throw new Error(`${this.name} (${release}) became ready; it was expected to refuse to start`)
    if (code === null) throw new Error(`${this.name} (${release}) did not exit within ${timeoutMs} ms`)
    return { code, lines }
  }

  /** SIGTERM, and waits for the exit; returns the exit code. */
  async stop(): Promise<number | null> {
    const child = this.child
    if (child === undefined) return null
    this.downSince ??= Date.now()
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
    const code = (await this.exited) ?? null
    clearTimeout(timer)
    this.closeClient()
    this.child = undefined
    this.release = undefined
    return code
  }

  async kill(): Promise<void> {
    const child = this.child
    if (child === undefined) return
    this.downSince ??= Date.now()
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await this.exited
    this.closeClient()
    this.child = undefined
    this.release = undefined
  }

  /**
   * A request with the management token (unless `token` says otherwise), given up after `timeoutMs`. Rejects only
   * when no answer came (a ConnectionError from src/api).
   */
  async request(method: string, path: string, options: { body?: unknown; token?: string; timeoutMs?: number } = {}): Promise<Answer> {
    // Unbounded sockets, as fetch had.
    this.client ??= new WardenClient({ address: this.httpAddress, maxSockets: Infinity })
    const answer = await this.client.request(method, fetchTarget(`http://${this.httpAddress}`, path), {
      token: options.token ?? MANAGEMENT_TOKEN,
      ...(options.body === undefined ? {} : { body: options.body }),
      timeoutMs: options.timeoutMs ?? 20_000,
    })
    return { status: answer.status, body: answer.body, text: answer.text }
  }

  private closeClient(): void {
    this.client?.close()
    this.client = undefined
  }
}

export interface Builds {
  old: string
  new: string
}

/** A set of nodes under one temporary root (their data dirs), started and restarted on either build. */
export class UpgradeCluster {
  readonly nodes = new Map<string, UpgradeNode>()

  private constructor(
    readonly root: string,
    readonly builds: Builds,
    private readonly configFile: string | undefined,
    /** The --cluster-key every node is started with from now on (an operator changes it while the cluster is stopped). */
    public clusterKey: string,
  ) {}

  /**
   * Nodes named `names`, ports picked free now and kept; `raft` settings go to every node's config file; the cluster
   * key is `clusterKey` (default CLUSTER_KEY, valid for both builds).
   */
  static async create(builds: Builds, options: { raft?: Record<string, unknown>; clusterKey?: string } = {}): Promise<UpgradeCluster> {
    const root = await mkdtemp(join(tmpdir(), 'warden-upgrade-'))
    let configFile: string | undefined
    if (options.raft !== undefined) {
      configFile = join(root, 'config.json')
      await writeFile(configFile, JSON.stringify({ raft: options.raft }))
    }
    return new UpgradeCluster(root, builds, configFile, options.clusterKey ?? CLUSTER_KEY)
  }

  async add(name: string, role: Role): Promise<UpgradeNode> {
    const node = new UpgradeNode(name, await freePort(), await freePort(), join(this.root, name), role)
    this.nodes.set(name, node)
    return node
  }

  node(name: string): UpgradeNode {
    const node = this.nodes.get(name)
    if (node === undefined) throw new Error(`no node ${name}`)
    return node
  }

  running(): UpgradeNode[] {
    return [...this.nodes.values()].filter((node) => node.running)
  }

  private args(node: UpgradeNode): string[] {
    const founders = [...this.nodes.values()].filter((other) => other.role.kind === 'founder')
    const membership =
      node.role.kind === 'founder'
        ? founders.flatMap((other) => ['--peer', `${other.name}=${other.clusterAddress}`])
        : node.role.kind === 'joiner'
          ? node.role.through.flatMap((address) => ['--join', address])
          : []
    return [
      '--node-name', node.name,
      '--http-addr', node.httpAddress,
      '--cluster-addr', node.clusterAddress,
      ...(node.role.kind === 'alone' ? [] : ['--cluster-key', this.clusterKey]),
      '--initial-management-token', MANAGEMENT_TOKEN,
      ...membership,
      '--data-dir', node.dataDir,
      ...(this.configFile === undefined ? [] : ['--config-file', this.configFile]),
    ]
  }

  async start(name: string, release: Release): Promise<UpgradeNode> {
    const node = this.node(name)
    await node.start(release, this.builds[release], this.args(node))
    return node
  }

  /** Starts `name` on `release` expecting it to refuse to start: its exit code and output. */
  async startToExit(name: string, release: Release): Promise<{ code: number | null; lines: string[] }> {
    const node = this.node(name)
    return node.startToExit(release, this.builds[release], this.args(node))
  }

  /** SIGTERM, wait for the exit (it must be a clean one). */
  async stop(name: string): Promise<void> {
    const node = this.node(name)
    const code = await node.stop()
    if (code !== 0) throw new Error(`${name} exited with ${code} after SIGTERM:\n${node.logs.slice(-30).join('\n')}`)
  }

  /** The name of the node every running node names as leader, waiting up to `timeoutMs` for them to agree. */
  async leader(timeoutMs = 15_000): Promise<string> {
    const deadline = Date.now() + timeoutMs
    let answers: string[] = []
    for (;;) {
      const running = this.running()
      answers = await Promise.all(
        running.map(async (node) => {
          try {
            return String((await node.request('GET', '/v1/status/leader', { timeoutMs: 2_000 })).body ?? '')
          } catch {
            return ''
          }
        }),
      )
      const first = answers[0]
      if (first !== undefined && first !== '' && answers.every((answer) => answer === first)) {
        const leader = running.find((node) => node.clusterAddress === first)
        if (leader !== undefined) return leader.name
      }
      if (Date.now() > deadline) throw new Error(`no agreed leader within ${timeoutMs} ms: ${JSON.stringify(answers)}`)
      await sleep(50)
    }
  }

  /** Waits until the management token works on every running node (the leader writes it after its election). */
  async ready(timeoutMs = 20_000): Promise<string> {
    const deadline = Date.now() + timeoutMs
    const leader = await this.leader(timeoutMs)
    for (const node of this.running()) {
      for (;;) {
        const self = await node.request('GET', '/v1/acl/token/self?stale', { timeoutMs: 2_000 }).catch(() => undefined)
        if (self?.status === 200) break
        if (Date.now() > deadline) throw new Error(`the management token did not work on ${node.name} in time`)
        await sleep(50)
      }
    }
    return leader
  }

  /** The servers of the Raft configuration as `node` sees them. */
  async servers(name: string): Promise<Array<{ ID: string; Voter: boolean; Leader: boolean }>> {
    const answer = await this.node(name).request('GET', '/v1/operator/raft/configuration')
    if (answer.status !== 200) throw new Error(`configuration on ${name}: ${answer.status} ${answer.text}`)
    return (answer.body as { Servers: Array<{ ID: string; Voter: boolean; Leader: boolean }> }).Servers
  }

  /** Waits until `name`'s view of the configuration has exactly `voters` as voters and no other server. */
  async waitForVoters(voters: string[], timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    const wanted = [...voters].sort().join(',')
    let seen = ''
    for (;;) {
      const views = await Promise.all(
        this.running().map(async (node) => {
          const servers = await this.servers(node.name).catch(() => [])
          return servers.length === voters.length && servers.every((server) => server.Voter) ? servers.map((server) => server.ID).sort().join(',') : JSON.stringify(servers)
        }),
      )
      seen = JSON.stringify(views)
      if (views.every((view) => view === wanted)) return
      if (Date.now() > deadline) throw new Error(`the voters did not become ${wanted} within ${timeoutMs} ms: ${seen}`)
      await sleep(100)
    }
  }

  /** The last `lines` log lines of every node, for a failure's report. */
  logTail(lines = 25): string {
    return [...this.nodes.values()].map((node) => `== ${node.name}\n${node.logs.slice(-lines).join('\n')}`).join('\n')
  }

  /** Kills every process still running and removes the data dirs. */
  async destroy(): Promise<void> {
    await Promise.all([...this.nodes.values()].map((node) => node.kill()))
    await rm(this.root, { recursive: true, force: true })
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
