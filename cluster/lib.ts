/**
 * A local cluster of real `warden agent` processes that scripts can start, watch and break: the library behind
 * `npm run cluster`, `npm start`, the chaos runner and the cluster tests.
 *
 * Everything about a running cluster lives in one state file (`<root>/state.json`, mode 0600: it holds the management
 * token and the cluster key), so any process can `attach` and act on a cluster another process started. Every method
 * reads the file again before acting and writes it after, because a second terminal may have killed or restarted a
 * node since. Nodes and the link proxy are detached processes that write their output to `<root>/logs/`, so they
 * live on after the starting process exits (background mode) and a log can be followed from anywhere.
 *
 * Partitions happen at the transport: each directed peer link A→B runs through a loopback TCP proxy (cluster/proxy.ts)
 * that node A dials instead of B. Nodes prove their names in the peer handshake, so they keep their identity while
 * their bytes take the detour, and cutting the proxies of every link touching a node isolates it.
 *
 * Process safety: a pid from the state file is signalled only while its command line still names what we started (a
 * node's data dir, the proxy's ready file), so a pid the system has since reused for something else is never touched.
 *
 * TLS (`up --tls`): a CA, a server certificate per node and one client certificate are issued into `<root>/tls/`
 * (keys mode 0600); the nodes link over mutual TLS and serve their API over HTTPS only, asking every client for a
 * certificate, and this library's own client presents the client certificate. The state file records the files, so
 * every later verb (from any process) speaks HTTPS. The proxies pass TLS through like any other bytes.
 *
 * Federation (`up --datacenters dc1,dc2`): each datacenter is its own Raft group of N nodes (`dc1-n1`..), the first
 * datacenter is the primary, and every node of a secondary joins the primary's nodes over WAN links (`--join-wan`)
 * with the primary's management token as its replication token. WAN links are dialed at the address each server
 * advertises, which is its own `--cluster-addr` (the agent has no separate advertise address), so `--peer` cannot
 * send them through the proxies. Instead every node runs with a dial hook (`<root>/dial-routes.mjs`, loaded with
 * `node --import`): before a TCP connection leaves the process, a destination that is another node's real cluster
 * address is replaced by the proxy of the link from this node to that one. Every connection between two nodes, Raft
 * or WAN, then crosses the proxies, so `partition NODE` isolates a node from its datacenter and from the others, and
 * `partitionDatacenter(dc)` cuts exactly the links between DC and every other datacenter.
 */
import { execFileSync, spawn } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs'
import { chmod, mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import type { IncomingHttpHeaders } from 'node:http'
import { createRequire } from 'node:module'
import { createServer } from 'node:net'
import { join, resolve, sep } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Client, type TlsOptions } from '../src/api/index.js'
import type { ProxyReady } from './proxy.js'

const REPO_ROOT = resolve(import.meta.dirname, '..')
/** The agent to run: the repository's build, or another one (a build of another commit, say) named in the environment. */
export const AGENT_CLI = resolve(process.env.WARDEN_AGENT_CLI ?? join(REPO_ROOT, 'dist', 'cli', 'main.js'))
export const DEFAULT_ROOT = join(REPO_ROOT, 'cluster', '.run')
const PROXY_SCRIPT = join(REPO_ROOT, 'cluster', 'proxy.ts')
/**
 * tsx's loader, for running proxy.ts in its own process. Resolved with require from the repository (not
 * import.meta.resolve, which tsx leaves out when it loads this file as CommonJS, as mocha does).
 */
const TSX_LOADER = pathToFileURL(createRequire(join(REPO_ROOT, 'package.json')).resolve('tsx')).href

const NODE_READY_MS = 20_000
const CLUSTER_READY_MS = 20_000
/** How long a node gets to stop after SIGTERM before it is killed. */
const STOP_GRACE_MS = 10_000
const REQUEST_MS = 2_000
/** The agents' default datacenter, which their server certificates must name (`server.dc1.warden`). */
const DATACENTER = 'dc1'
/** As the agent's datacenter names (src/agent/config.ts). */
const DATACENTER_NAME = /^[a-z0-9_-]{1,64}$/
/** The environment variable through which a node of a federation gets its dial routes (see DIAL_HOOK). */
const DIAL_ROUTES_VARIABLE = 'WARDEN_CLUSTER_TOOL_DIAL_ROUTES'
/**
 * The dial hook of a federation's nodes, written to `<root>/dial-routes.mjs` and loaded with `node --import` before
 * the agent. It replaces the destination of a TCP connection (net.connect, net.createConnection, tls.connect: what
 * the WebSocket client of peer links calls) whose `host:port` is in the route table of the environment, and nothing
 * else: the agent's own code is the build's, unchanged; only where its bytes go changes, as a NAT rule would.
 */
const DIAL_HOOK = `// Written by cluster/lib.ts (npm run cluster): routes a node's dials of other nodes through the link proxies.
import net from 'node:net'
import tls from 'node:tls'
const routes = new Map(Object.entries(JSON.parse(process.env.${DIAL_ROUTES_VARIABLE} ?? '{}')))
delete process.env.${DIAL_ROUTES_VARIABLE}
function routed(connect) {
  return function (...args) {
    const options = args[0]
    if (typeof options === 'object' && options !== null && !Array.isArray(options) && options.port !== undefined) {
      const to = routes.get(\`\${options.host ?? 'localhost'}:\${options.port}\`)
      if (to !== undefined) {
        const colon = to.lastIndexOf(':')
        args[0] = { ...options, host: to.slice(0, colon), port: Number(to.slice(colon + 1)) }
      }
    }
    return connect.apply(this, args)
  }
}
net.connect = routed(net.connect)
net.createConnection = routed(net.createConnection)
tls.connect = routed(tls.connect)
`

export interface NodeState {
  /** 0 while the node is not running (never started, killed, or stopped by `down`). */
  pid: number
  /** host:port of plain HTTP; '' when the node serves HTTPS only (a TLS cluster without `plainHttp`). */
  httpAddress: string
  /** host:port of HTTPS; present exactly when the cluster runs with TLS (`ClusterState.tls`). */
  httpsAddress?: string
  /** The node's server certificate and its key (TLS only). */
  certFile?: string
  keyFile?: string
  clusterAddress: string
  dataDir: string
  /**
   * Peer name → the proxy address this node dials for that peer. In a federation, every other node of every
   * datacenter: the peers of its own datacenter through `--peer`, all of them through the dial hook.
   */
  proxies: Record<string, string>
  /** The node's datacenter, in a federation (`ClusterState.datacenters`). */
  datacenter?: string
}

export interface ClusterState {
  nodes: Record<string, NodeState>
  managementToken: string
  clusterKey: string
  root: string
  proxyPid?: number
  /** host:port of the proxy process's control API (see cluster/proxy.ts). */
  proxyControlAddress?: string
  /** Extra agent flags every node was started with; `restart` passes them again. */
  args?: string[]
  /** Present when the cluster runs with TLS: peer links over mutual TLS, the API over HTTPS with client certificates. */
  tls?: ClusterTls
  /**
   * Present for a federation (`up --datacenters`): its datacenters, the primary first. The management token is the
   * primary's (its nodes get it as initial management token, the secondaries' nodes as replication token).
   */
  datacenters?: string[]
}

/** The files of a TLS cluster, all under `<root>/tls/`; the keys are mode 0600. */
export interface ClusterTls {
  caFile: string
  /** Kept so that a later `up --tls` on the same root issues from the same CA (clients keep trusting it). */
  caKeyFile: string
  /** The certificate (and key) clients present: the cluster tool's own, and the one to give `warden` (-client-cert). */
  clientCertFile: string
  clientKeyFile: string
}

export interface NodeStatus {
  node: string
  /** The process exists (it may be paused). */
  up: boolean
  paused: boolean
  /** The node's Raft role (leader, follower, candidate, ...); `down`, or `unknown` when it cannot be asked. */
  role: string
  /** 0 when unknown (a paused node, or an agent without /v1/operator/raft/state). */
  term: number
  commitIndex: number
  appliedIndex: number
  lastContactMs: number
  httpAddress: string
  /** Set in a TLS cluster (NodeState.httpsAddress). */
  httpsAddress?: string
  /** The node this one believes leads, '' for none or unknown. */
  leader: string
  /** In a federation: the node's datacenter. */
  datacenter?: string
}

/** One datacenter of a federation, as `datacenters()` reports it. */
export interface DatacenterStatus {
  datacenter: string
  primary: boolean
  nodes: string[]
  /** The node that says it leads and that a majority of the datacenter's nodes name; '' for none. */
  leader: string
  /** Its WAN links are cut at the proxies (`partitionDatacenter`). */
  wanCut: boolean
  /** `GET /v1/catalog/datacenters` as the leader (or else any node that answers) sees it; [] when none answered. */
  known: string[]
  /** A secondary's `GET /v1/acl/replication`, from its leader (where the loop runs); absent for the primary or unknown. */
  replication?: ReplicationStatus
}

/** The fields of `GET /v1/acl/replication` the tool shows. */
export interface ReplicationStatus {
  enabled: boolean
  running: boolean
  sourceDatacenter: string
  replicatedIndex: number
  replicatedRoleIndex: number
  lastSuccess: string
  lastError: string
  lastErrorMessage: string
}

export interface UpOptions {
  /** Number of nodes, named n1..nN. Default 3. */
  nodes?: number
  /** Directory of the state file, data dirs and logs. Default cluster/.run. */
  root?: string
  /**
   * The cluster belongs to this process: SIGINT, SIGTERM or SIGHUP stops it (then the process exits 0, or 1 if stopping
   * failed), and whatever is still running when the process exits is killed.
   */
  foreground?: boolean
  /** Called with every line the nodes write, from the start of this `up` on, until `down`. */
  logs?: (node: string, line: string) => void
  /** Extra flags for every agent (e.g. `--log-level debug`). */
  args?: string[]
  /**
   * Issue certificates into `<root>/tls/` and run the nodes with TLS peer links and an HTTPS-only API that requires a
   * client certificate (plain HTTP off). The CA of an earlier `up --tls` on the same root is used again.
   */
  tls?: boolean
  /** With `tls`: serve plain HTTP as well, on a port of its own (the benchmark compares the two on one node). */
  plainHttp?: boolean
  /**
   * A federation: one Raft group of `nodes` nodes per datacenter, named `<dc>-n1`.., the first datacenter the primary
   * and the others joined to it over WAN links. Without it, one datacenter (the agents' default, dc1) of `n1`...
   */
  datacenters?: string[]
}

/** An answer in the shape the cluster tool's callers read (a fetch `Headers`; the body parsed when it is JSON). */
export interface ApiResponse {
  status: number
  headers: Headers
  body: unknown
  text: string
}

/** An answer's headers (node:http's) as a fetch `Headers`, read with `headers.get(name)` in any case. */
export function fetchHeaders(headers: IncomingHttpHeaders): Headers {
  const result = new Headers()
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue
    for (const item of Array.isArray(value) ? value : [value]) result.append(name, item)
  }
  return result
}

/**
 * The request target fetch would send for `path` on `origin`: parsed as a URL (dot segments resolved, spaces and
 * quotes escaped), without a fragment. The API client sends its path as given, so callers written against fetch
 * pass their paths through this.
 */
export function fetchTarget(origin: string, path: string): string {
  const url = new URL(origin + path)
  return url.pathname + url.search
}

// -------------------------------------------------------------------------------------------------------------------
// Processes.

type ProcessState = 'running' | 'stopped' | 'gone'

/** The command line of `pid` (arguments joined by spaces), or undefined when there is no such process. */
function commandLine(pid: number): string | undefined {
  if (pid <= 0) return undefined
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ')
  } catch {
    // No /proc (macOS), or no such process: ask ps, which answers for both.
  }
  if (existsSync('/proc/self')) return undefined
  try {
    return execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' }).trim() || undefined
  } catch {
    return undefined // ps exits 1 when the process does not exist.
  }
}

function processState(pid: number, marker: string): ProcessState {
  const command = commandLine(pid)
  if (command === undefined || !command.includes(marker)) return 'gone'
  let code: string | undefined
  try {
    // Field 3 of /proc/PID/stat, after the parenthesized name (which may itself contain spaces or parentheses).
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    code = stat.slice(stat.lastIndexOf(')') + 2)[0]
  } catch {
    try {
      code = execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' }).trim()[0]
    } catch {
      return 'gone'
    }
  }
  // A zombie has exited; only its parent's bookkeeping is left.
  if (code === 'Z' || code === 'X' || code === undefined) return 'gone'
  return code === 'T' || code === 't' ? 'stopped' : 'running'
}

/** Sends `signal` to `pid` only if it is still the process we started; says whether it did. */
function signalOwn(pid: number, marker: string, signal: NodeJS.Signals): boolean {
  if (processState(pid, marker) === 'gone') return false
  try {
    process.kill(pid, signal)
    return true
  } catch {
    return false // It exited between the check and the signal.
  }
}

async function sleep(ms: number): Promise<void> {
  await new Promise((resolvePromise) => setTimeout(resolvePromise, ms))
}

async function waitForState(pid: number, marker: string, wanted: (state: ProcessState) => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (wanted(processState(pid, marker))) return true
    if (Date.now() > deadline) return false
    await sleep(20)
  }
}

/** SIGTERM (and SIGCONT, since a paused process cannot act on it), then SIGKILL after `graceMs`. */
async function stopProcess(pid: number, marker: string, graceMs: number): Promise<void> {
  if (!signalOwn(pid, marker, 'SIGTERM')) return
  signalOwn(pid, marker, 'SIGCONT')
  if (await waitForState(pid, marker, (state) => state === 'gone', graceMs)) return
  signalOwn(pid, marker, 'SIGKILL')
  if (!(await waitForState(pid, marker, (state) => state === 'gone', 5_000))) throw new Error(`process ${pid} did not exit after SIGKILL`)
}

/**
 * A loopback port free right now, for a process started later that must keep it across restarts. Chosen below the
 * kernel's ephemeral range: a port from that range (what listening on port 0 gives) can be taken in the meantime as
 * the local end of any outgoing connection, and the node started on it then fails with EADDRINUSE; a port below it is
 * only ever taken by something binding it on purpose.
 */
export async function freePort(): Promise<number> {
  const [ephemeralLow, ephemeralHigh] = ephemeralRange()
  // Ports from 10000 up that lie outside the ephemeral range: below it, above it, or both.
  const spans = [
    [10_000, Math.min(ephemeralLow, 65_536)],
    [Math.max(ephemeralHigh + 1, 10_000), 65_536],
  ].filter(([low, high]) => high! > low!) as Array<[number, number]>
  const total = spans.reduce((sum, [low, high]) => sum + high - low, 0)
  for (let attempt = 0; total > 0 && attempt < 64; attempt++) {
    let pick = Math.floor(Math.random() * total)
    let port = 0
    for (const [low, high] of spans) {
      if (pick < high - low) {
        port = low + pick
        break
      }
      pick -= high - low
    }
    // Nothing listens on a port handed out a moment ago until its node starts: never hand it out twice.
    if (handedOut.has(port) || !(await canBind(port))) continue
    if (handedOut.size >= 4_096) handedOut.clear()
    handedOut.add(port)
    return port
  }
  // No room outside the ephemeral range (a range that spans nearly every port): an ephemeral port, with its race.
  return bindAny()
}

const handedOut = new Set<number>()

function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number)
    if (low !== undefined && high !== undefined && low > 0 && high >= low) return [low, high]
  } catch {
    // Not Linux, or no procfs: assume Linux's default range.
  }
  return [32_768, 60_999]
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const server = createServer()
    server.once('error', () => resolvePromise(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolvePromise(true)))
  })
}

function bindAny(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolvePromise(port))
    })
  })
}

// -------------------------------------------------------------------------------------------------------------------
// Logs.

/**
 * Follows a log file by polling (fs.watch misses appends on some file systems) and hands out whole lines. It
 * survives the file being appended to by a restarted node, since it only ever reads past its own offset.
 */
class LogFollower {
  private partial = ''
  private reading = false
  private readonly timer: NodeJS.Timeout

  constructor(
    private readonly path: string,
    private offset: number,
    private readonly onLine: (line: string) => void,
  ) {
    // A failed read (the file removed under us) is retried on the next tick; the follower never takes its host down.
    this.timer = setInterval(() => void this.poll().catch(() => undefined), 100)
  }

  async poll(): Promise<void> {
    if (this.reading) return
    this.reading = true
    try {
      const file = await open(this.path, 'r').catch(() => undefined)
      if (file === undefined) return
      try {
        const buffer = Buffer.alloc(64 * 1024)
        for (;;) {
          const { bytesRead } = await file.read(buffer, 0, buffer.length, this.offset)
          if (bytesRead === 0) break
          this.offset += bytesRead
          const lines = (this.partial + buffer.subarray(0, bytesRead).toString('utf8')).split('\n')
          this.partial = lines.pop() ?? ''
          for (const line of lines) if (line !== '') this.onLine(line)
        }
      } finally {
        await file.close()
      }
    } finally {
      this.reading = false
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer)
    while (this.reading) await sleep(10)
    await this.poll()
    if (this.partial !== '') this.onLine(this.partial)
  }
}

async function fileSize(path: string): Promise<number> {
  return stat(path).then((info) => info.size, () => 0)
}

/** The last lines of a log, for error messages about a node that would not start. */
async function logTail(path: string, lines = 15): Promise<string> {
  const text = await readFile(path, 'utf8').catch(() => '')
  return text.trimEnd().split('\n').slice(-lines).join('\n')
}

/** The node that says it leads and that a majority of `statuses`' nodes name as leader; '' for none. */
function majorityLeader(statuses: NodeStatus[]): string {
  const majority = Math.floor(statuses.length / 2) + 1
  for (const candidate of statuses) {
    if (candidate.role !== 'leader') continue
    if (statuses.filter((status) => status.leader === candidate.node).length >= majority) return candidate.node
  }
  return ''
}

// -------------------------------------------------------------------------------------------------------------------
// The cluster.

export class LocalCluster {
  private followers: LogFollower[] = []
  private removeForegroundHooks: (() => void) | undefined
  private saving: Promise<void> = Promise.resolve()
  /** API clients by address (a node keeps its HTTP address across restarts); closed by `down`. */
  private readonly clients = new Map<string, Client>()

  private constructor(private current: ClusterState) {}

  /** Starts a cluster under `root` (reusing the data, token and key of a cluster stopped there by `down`). */
  static async up(options: UpOptions = {}): Promise<LocalCluster> {
    if (!existsSync(AGENT_CLI)) throw new Error(`${AGENT_CLI} is missing: run npm run build first`)
    const root = resolve(options.root ?? DEFAULT_ROOT)
    const count = options.nodes ?? 3
    if (!Number.isInteger(count) || count < 1 || count > 9) throw new Error(`nodes: must be an integer from 1 to 9, not ${count}`)
    const datacenters = options.datacenters
    if (datacenters !== undefined) {
      if (datacenters.length === 0 || datacenters.length > 9) throw new Error(`datacenters: from 1 to 9, not ${datacenters.length}`)
      for (const datacenter of datacenters) {
        if (!DATACENTER_NAME.test(datacenter)) throw new Error(`datacenters: ${JSON.stringify(datacenter)} is not a datacenter name (lowercase letters, digits, "-" or "_")`)
      }
      if (new Set(datacenters).size !== datacenters.length) throw new Error(`datacenters: ${datacenters.join(',')} names one twice`)
    }
    await mkdir(join(root, 'logs'), { recursive: true, mode: 0o700 })
    // The datacenter of each node: a federation's nodes are named after theirs; a single datacenter's are n1...
    const datacenterOf = new Map<string, string | undefined>(
      (datacenters ?? [undefined]).flatMap((datacenter) =>
        Array.from({ length: count }, (_, position) => [datacenter === undefined ? `n${position + 1}` : `${datacenter}-n${position + 1}`, datacenter] as const),
      ),
    )
    const names = [...datacenterOf.keys()]
    const previous = await readState(root).catch(() => undefined)
    if (previous !== undefined) {
      const cluster = new LocalCluster(previous)
      if (cluster.runningPids().length > 0) throw new Error(`a cluster is already running under ${root} (stop it with: npm run cluster -- down)`)
      if (Object.keys(previous.nodes).sort().join() !== [...names].sort().join() || (previous.datacenters ?? []).join() !== (datacenters ?? []).join()) {
        const held = previous.datacenters === undefined ? '' : ` in ${previous.datacenters.join(', ')}`
        throw new Error(`${root} holds a cluster of ${Object.keys(previous.nodes).join(', ')}${held}: remove it first for a cluster of ${count}${datacenters === undefined ? '' : ` per datacenter in ${datacenters.join(', ')}`}`)
      }
    }
    if (options.plainHttp === true && options.tls !== true) throw new Error('plainHttp: only with tls (without TLS the API is plain HTTP anyway)')
    const tls = options.tls === true ? await issueCertificates(root, names.map((name) => ({ name, datacenter: datacenterOf.get(name) ?? DATACENTER })), datacenters?.[0] ?? DATACENTER) : undefined
    const nodes: Record<string, NodeState> = {}
    for (const name of names) {
      const datacenter = datacenterOf.get(name)
      nodes[name] = {
        pid: 0,
        httpAddress: tls === undefined || options.plainHttp === true ? `127.0.0.1:${await freePort()}` : '',
        ...(tls === undefined ? {} : { httpsAddress: `127.0.0.1:${await freePort()}`, ...tls.nodes[name]! }),
        clusterAddress: `127.0.0.1:${await freePort()}`,
        dataDir: join(root, name),
        proxies: {},
        ...(datacenter === undefined ? {} : { datacenter }),
      }
    }
    const cluster = new LocalCluster({
      nodes,
      // A restarted cluster keeps its secrets: its data already holds the token, and operators' scripts hold both.
      managementToken: previous?.managementToken ?? randomUUID(),
      clusterKey: previous?.clusterKey ?? randomBytes(24).toString('hex'),
      root,
      args: options.args ?? [],
      ...(tls === undefined ? {} : { tls: tls.cluster }),
      ...(datacenters === undefined ? {} : { datacenters }),
    })
    // Saved at once: from here on every method reloads the file, which must describe this cluster, not the last one.
    await cluster.save()
    if (options.logs !== undefined) await cluster.follow(options.logs)
    if (options.foreground === true) cluster.installForegroundHooks()
    try {
      await cluster.startProxy()
      await Promise.all(names.map((name) => cluster.startNode(name)))
      await cluster.ready()
    } catch (error) {
      await cluster.down().catch(() => undefined) // The start error is the one worth reporting.
      throw error
    }
    return cluster
  }

  /** A handle on the cluster whose state file is under `root`, started by this or another process. */
  static async attach(root: string = DEFAULT_ROOT): Promise<LocalCluster> {
    return new LocalCluster(await readState(resolve(root)))
  }

  state(): ClusterState {
    return structuredClone(this.current)
  }

  nodeNames(): string[] {
    return Object.keys(this.current.nodes)
  }

  /** A federation's datacenters, the primary first; undefined for a cluster of one datacenter. */
  datacenterNames(): string[] | undefined {
    return this.current.datacenters === undefined ? undefined : [...this.current.datacenters]
  }

  /** The nodes of `datacenter` in a federation (an error for a datacenter it does not have). */
  nodesOf(datacenter: string): string[] {
    if (this.current.datacenters === undefined) throw new Error(`not a federation: no datacenter ${JSON.stringify(datacenter)} (start one with up --datacenters)`)
    if (!this.current.datacenters.includes(datacenter)) throw new Error(`no datacenter ${JSON.stringify(datacenter)} (datacenters: ${this.current.datacenters.join(', ')})`)
    return this.nodeNames().filter((name) => this.node(name).datacenter === datacenter)
  }

  /** Where this library reaches `node`'s API: `https://host:port` in a TLS cluster, else `http://host:port`. */
  apiAddress(node: string): string {
    const spec = this.node(node)
    return spec.httpsAddress === undefined ? `http://${spec.httpAddress}` : `https://${spec.httpsAddress}`
  }

  /**
   * What a client needs to reach a TLS cluster's HTTPS API (the CA, the client certificate and its key, read from the
   * files now); undefined for a cluster without TLS.
   */
  clientTls(): TlsOptions | undefined {
    const tls = this.current.tls
    if (tls === undefined) return undefined
    return { ca: readFileSync(tls.caFile), cert: readFileSync(tls.clientCertFile), key: readFileSync(tls.clientKeyFile) }
  }

  /**
   * A request to one node with the management token (`token: null` for none), with a timeout. Rejects only when no
   * answer came (a ConnectionError from src/api).
   */
  async request(node: string, method: string, path: string, options: { body?: unknown; token?: string | null; timeoutMs?: number } = {}): Promise<ApiResponse> {
    const address = this.apiAddress(node)
    const answer = await this.client(address, this.current.tls !== undefined).request(method, fetchTarget(address, path), {
      token: options.token === undefined ? this.current.managementToken : options.token,
      ...(options.body === undefined ? {} : { body: options.body }),
      timeoutMs: options.timeoutMs ?? REQUEST_MS,
    })
    return { status: answer.status, headers: fetchHeaders(answer.headers), body: answer.body, text: answer.text }
  }

  async status(): Promise<NodeStatus[]> {
    await this.reload()
    return this.statusOf(this.nodeNames())
  }

  private async statusOf(names: string[]): Promise<NodeStatus[]> {
    return Promise.all(names.map((name) => this.nodeStatus(name)))
  }

  /**
   * The node that says it leads and that a majority of all nodes name as leader, waiting up to `timeoutMs`. In a
   * federation, of `datacenter`'s nodes (required there: each datacenter has a leader of its own).
   */
  async leader(timeoutMs = 10_000, datacenter?: string): Promise<string> {
    await this.reload()
    if (datacenter === undefined && this.current.datacenters !== undefined) {
      throw new Error(`a federation has a leader per datacenter: name one (${this.current.datacenters.join(', ')})`)
    }
    const names = datacenter === undefined ? this.nodeNames() : this.nodesOf(datacenter)
    const deadline = Date.now() + timeoutMs
    for (;;) {
      await this.reload() // Another process may have restarted a node since (a new pid).
      const statuses = await this.statusOf(names)
      const leader = majorityLeader(statuses)
      if (leader !== '') return leader
      if (Date.now() > deadline) {
        const seen = statuses.map((status) => `${status.node}: ${status.role}${status.leader === '' ? '' : ` (leader ${status.leader})`}`)
        throw new Error(`no leader named by a majority${datacenter === undefined ? '' : ` of ${datacenter}`} within ${timeoutMs} ms (${seen.join('; ')})`)
      }
      await sleep(50)
    }
  }

  /**
   * Each datacenter of a federation: its leader, whether its WAN links are cut, the datacenters it knows, and for a
   * secondary its leader's replication status. Never waits for a leader; what cannot be asked is left out.
   */
  async datacenters(): Promise<DatacenterStatus[]> {
    await this.reload()
    const datacenters = this.current.datacenters
    if (datacenters === undefined) throw new Error('not a federation (start one with up --datacenters)')
    const cut = this.proxyUp() ? await this.partitionedDatacenters().catch(() => []) : []
    const statuses = await this.statusOf(this.nodeNames())
    return Promise.all(
      datacenters.map(async (datacenter, position): Promise<DatacenterStatus> => {
        const nodes = this.nodesOf(datacenter)
        const leader = majorityLeader(statuses.filter((status) => nodes.includes(status.node)))
        const askable = statuses.filter((status) => nodes.includes(status.node) && status.up && !status.paused).map((status) => status.node)
        const order = leader === '' ? askable : [leader, ...askable.filter((name) => name !== leader)]
        let known: string[] = []
        for (const node of order) {
          const answer = await this.request(node, 'GET', '/v1/catalog/datacenters').catch(() => undefined)
          if (answer?.status === 200 && Array.isArray(answer.body)) {
            known = answer.body as string[]
            break
          }
        }
        const status: DatacenterStatus = { datacenter, primary: position === 0, nodes, leader, wanCut: cut.includes(datacenter), known }
        if (position === 0 || leader === '') return status
        const answer = await this.request(leader, 'GET', '/v1/acl/replication').catch(() => undefined)
        if (answer?.status !== 200 || typeof answer.body !== 'object' || answer.body === null) return status
        const body = answer.body as Record<string, unknown>
        const text = (key: string): string => (typeof body[key] === 'string' ? (body[key] as string) : '')
        const number = (key: string): number => (typeof body[key] === 'number' ? (body[key] as number) : 0)
        status.replication = {
          enabled: body.Enabled === true,
          running: body.Running === true,
          sourceDatacenter: text('SourceDatacenter'),
          replicatedIndex: number('ReplicatedIndex'),
          replicatedRoleIndex: number('ReplicatedRoleIndex'),
          lastSuccess: text('LastSuccess'),
          lastError: text('LastError'),
          lastErrorMessage: text('LastErrorMessage'),
        }
        return status
      }),
    )
  }

  async kill(node: string): Promise<void> {
    await this.reload()
    const spec = this.node(node)
    if (!signalOwn(spec.pid, spec.dataDir, 'SIGKILL')) throw new Error(`${node} is not running`)
    if (!(await waitForState(spec.pid, spec.dataDir, (state) => state === 'gone', 5_000))) throw new Error(`${node} (pid ${spec.pid}) did not exit after SIGKILL`)
    spec.pid = 0
    await this.save()
  }

  /** Starts the node again on its data dir and ports, stopping it first (SIGTERM) if it still runs. */
  async restart(node: string): Promise<void> {
    await this.reload()
    const spec = this.node(node)
    await stopProcess(spec.pid, spec.dataDir, STOP_GRACE_MS)
    spec.pid = 0
    await this.save()
    await this.startNode(node)
  }

  /**
   * Rebuilds `node` from nothing: SIGKILL if it runs (paused or not), delete its data dir, and start it again with the
   * same flags and ports. With an empty data dir and its --peer flags the agent finds its cluster running and asks the
   * leader to re-add it: the leader removes it, adds it back as a non-voter and promotes it once it has caught up; it
   * neither votes nor campaigns before. Returns the pid it killed (0 if the node was not running). Refused for a cluster
   * of one, which has nobody to rejoin: the node would found a new, empty cluster.
   */
  async wipe(node: string): Promise<number> {
    await this.reload()
    const spec = this.node(node)
    if (spec.datacenter === undefined ? this.nodeNames().length === 1 : this.nodesOf(spec.datacenter).length === 1) {
      const where = spec.datacenter === undefined ? '' : ` of ${spec.datacenter}`
      throw new Error(`${node} is the only node${where}: wiping it would lose every write (there is no cluster to rejoin)`)
    }
    // The state file names the directory to delete: only ever one inside this cluster's root.
    const dataDir = resolve(spec.dataDir)
    const root = resolve(this.current.root)
    if (!dataDir.startsWith(root + sep)) throw new Error(`${node}'s data dir ${dataDir} is not under ${root}: not deleting it`)
    let killed = 0
    if (signalOwn(spec.pid, spec.dataDir, 'SIGKILL')) {
      if (!(await waitForState(spec.pid, spec.dataDir, (state) => state === 'gone', 5_000))) throw new Error(`${node} (pid ${spec.pid}) did not exit after SIGKILL`)
      killed = spec.pid
    }
    spec.pid = 0
    await this.save()
    await rm(dataDir, { recursive: true, force: true })
    await this.startNode(node)
    return killed
  }

  async pause(node: string): Promise<void> {
    await this.reload()
    const spec = this.node(node)
    if (processState(spec.pid, spec.dataDir) !== 'running') throw new Error(`${node} is not running (or is already paused)`)
    signalOwn(spec.pid, spec.dataDir, 'SIGSTOP')
    if (!(await waitForState(spec.pid, spec.dataDir, (state) => state !== 'running', 2_000))) throw new Error(`${node} did not stop on SIGSTOP`)
  }

  async resume(node: string): Promise<void> {
    await this.reload()
    const spec = this.node(node)
    if (processState(spec.pid, spec.dataDir) !== 'stopped') throw new Error(`${node} is not paused`)
    signalOwn(spec.pid, spec.dataDir, 'SIGCONT')
    if (!(await waitForState(spec.pid, spec.dataDir, (state) => state !== 'stopped', 2_000))) throw new Error(`${node} did not continue on SIGCONT`)
  }

  /** Cuts every link to and from `node` at the proxies: open connections are reset and new ones refused. */
  async partition(node: string): Promise<void> {
    await this.reload()
    this.node(node)
    await this.proxyControl('POST', `/partition?node=${encodeURIComponent(node)}`)
  }

  /**
   * In a federation: cuts every link between a node of `datacenter` and a node of another datacenter at the proxies
   * (open connections reset, new ones refused); the links inside each datacenter stay open. `heal` reopens them.
   */
  async partitionDatacenter(datacenter: string): Promise<void> {
    await this.reload()
    this.nodesOf(datacenter)
    if (this.current.datacenters!.length === 1) throw new Error(`${datacenter} is the only datacenter: it has no WAN link to cut`)
    await this.proxyControl('POST', `/partition-dc?dc=${encodeURIComponent(datacenter)}`)
  }

  /** Reopens every link cut by `partition` or `partitionDatacenter`. */
  async heal(): Promise<void> {
    await this.reload()
    await this.proxyControl('POST', '/heal')
  }

  /** The nodes currently cut off by `partition`. */
  async partitioned(): Promise<string[]> {
    await this.reload()
    const answer = (await this.proxyControl('GET', '/state')) as { partitioned: string[] }
    return answer.partitioned
  }

  /** The datacenters currently cut off by `partitionDatacenter`. */
  async partitionedDatacenters(): Promise<string[]> {
    await this.reload()
    const answer = (await this.proxyControl('GET', '/state')) as { partitionedDatacenters?: string[] }
    return answer.partitionedDatacenters ?? []
  }

  /** Whether the link proxy process is alive (without it no node reaches any other). */
  proxyUp(): boolean {
    const pid = this.current.proxyPid
    return pid !== undefined && processState(pid, this.proxyMarker()) !== 'gone'
  }

  /**
   * Stops every node (SIGTERM, SIGKILL after a grace period) and the proxy. Data dirs, logs and the state file stay,
   * so `up` on the same root brings the same cluster back; only the pids are cleared.
   */
  async down(): Promise<void> {
    await this.reload()
    const errors: unknown[] = []
    await Promise.all(
      Object.values(this.current.nodes).map(async (spec) => {
        try {
          await stopProcess(spec.pid, spec.dataDir, STOP_GRACE_MS)
          spec.pid = 0
        } catch (error) {
          errors.push(error)
        }
      }),
    )
    if (this.current.proxyPid !== undefined) {
      try {
        await stopProcess(this.current.proxyPid, this.proxyMarker(), 2_000)
        delete this.current.proxyPid
        delete this.current.proxyControlAddress
      } catch (error) {
        errors.push(error)
      }
    }
    await this.save()
    this.closeClients()
    const followers = this.followers.splice(0)
    await Promise.all(followers.map((follower) => follower.stop()))
    this.removeForegroundHooks?.()
    if (errors.length > 0) throw new AggregateError(errors, `down: ${errors.length} process(es) would not stop`)
  }

  // -----------------------------------------------------------------------------------------------------------------
  // Internals.

  private node(name: string): NodeState {
    const spec = this.current.nodes[name]
    if (spec === undefined) throw new Error(`no node ${JSON.stringify(name)} (nodes: ${this.nodeNames().join(', ')})`)
    return spec
  }

  private statePath(): string {
    return join(this.current.root, 'state.json')
  }

  private logPath(name: string): string {
    return join(this.current.root, 'logs', `${name}.log`)
  }

  /** The proxy's ready file path is unique to this root, so it marks the proxy's command line as ours. */
  private proxyMarker(): string {
    return join(this.current.root, 'proxy.json')
  }

  private runningPids(): number[] {
    const nodes = Object.values(this.current.nodes).filter((spec) => processState(spec.pid, spec.dataDir) !== 'gone').map((spec) => spec.pid)
    return this.proxyUp() ? [...nodes, this.current.proxyPid!] : nodes
  }

  private async reload(): Promise<void> {
    const fromFile = await readState(this.current.root).catch(() => undefined)
    if (fromFile !== undefined) this.current = fromFile
  }

  private async save(): Promise<void> {
    // One write at a time, each of the whole state as it is when its turn comes, written aside and renamed into
    // place so that a reader in another process never sees half a file.
    const write = async (): Promise<void> => {
      const temporary = `${this.statePath()}.${process.pid}.tmp`
      await writeFile(temporary, `${JSON.stringify(this.current, null, 2)}\n`, { mode: 0o600 })
      await rename(temporary, this.statePath())
    }
    this.saving = this.saving.then(write, write)
    await this.saving
  }

  private async startProxy(): Promise<void> {
    const names = this.nodeNames()
    // In a federation, a link between every two nodes of any datacenters: Raft links within one, WAN links across
    // (and WAN links within one too: every server links with every member of the WAN, its own datacenter's included).
    const links = names.flatMap((from) =>
      names
        .filter((to) => to !== from)
        .map((to) => {
          const ends = this.node(from).datacenter === undefined ? {} : { fromDatacenter: this.node(from).datacenter!, toDatacenter: this.node(to).datacenter! }
          return { from, to, target: this.node(to).clusterAddress, ...ends }
        }),
    )
    const readyPath = this.proxyMarker()
    await rm(readyPath, { force: true })
    const log = openSync(join(this.current.root, 'logs', 'proxy.log'), 'a')
    const child = spawn(process.execPath, ['--import', TSX_LOADER, PROXY_SCRIPT, '--links', JSON.stringify(links), '--ready', readyPath], {
      cwd: REPO_ROOT,
      detached: true,
      stdio: ['ignore', log, log],
    })
    closeSync(log)
    child.unref()
    if (child.pid === undefined) throw new Error('the link proxy could not be started')
    this.current.proxyPid = child.pid
    await this.save()
    const deadline = Date.now() + NODE_READY_MS
    for (;;) {
      const text = await readFile(readyPath, 'utf8').catch(() => undefined)
      if (text !== undefined) {
        const ready = JSON.parse(text) as ProxyReady
        this.current.proxyControlAddress = ready.controlAddress
        for (const link of ready.links) this.node(link.from).proxies[link.to] = link.address
        await this.save()
        return
      }
      if (processState(child.pid, readyPath) === 'gone' || Date.now() > deadline) {
        throw new Error(`the link proxy did not start (log: ${join(this.current.root, 'logs', 'proxy.log')}):\n${await logTail(join(this.current.root, 'logs', 'proxy.log'))}`)
      }
      await sleep(50)
    }
  }

  /** The proxy process's own control API (not warden's), through the same client. */
  private async proxyControl(method: string, path: string): Promise<unknown> {
    const address = this.current.proxyControlAddress
    if (address === undefined || !this.proxyUp()) throw new Error('the link proxy is not running (start the cluster with up)')
    const answer = await this.client(address).request(method, path, { timeoutMs: REQUEST_MS })
    if (answer.body === undefined) throw new Error(`proxy: ${answer.status}, an answer that is not JSON: ${answer.text.slice(0, 200)}`)
    const body = answer.body as { error?: string }
    if (answer.status !== 200) throw new Error(`proxy: ${body.error ?? answer.status}`)
    return body
  }

  /**
   * One client per address, unbounded in sockets as fetch was; `withTls` for a node's HTTPS API (the proxy's control
   * API is plain HTTP).
   */
  private client(address: string, withTls = false): Client {
    let client = this.clients.get(address)
    if (client === undefined) {
      const tls = withTls ? this.clientTls() : undefined
      client = new Client({ address, maxSockets: Infinity, ...(tls === undefined ? {} : { tls }) })
      this.clients.set(address, client)
    }
    return client
  }

  private closeClients(): void {
    for (const client of this.clients.values()) client.close()
    this.clients.clear()
  }

  private agentArgs(name: string): string[] {
    const spec = this.node(name)
    // The node dials its peers through the proxies and names itself with its real address (ignored as a peer).
    const peerNames = spec.datacenter === undefined ? this.nodeNames() : this.nodesOf(spec.datacenter)
    const peers = peerNames.flatMap((peer) => ['--peer', `${peer}=${peer === name ? spec.clusterAddress : spec.proxies[peer]}`])
    return [
      ...(spec.datacenter === undefined ? [] : ['--import', pathToFileURL(this.dialHookPath()).href]),
      AGENT_CLI, 'agent',
      '--node-name', name,
      '--data-dir', spec.dataDir,
      ...this.listenerArgs(name),
      '--cluster-addr', spec.clusterAddress,
      ...peers,
      ...this.federationArgs(name),
      ...(this.current.args ?? []),
    ]
  }

  /**
   * In a federation: the node's datacenter, the primary, and for a secondary's node every node of the primary as
   * `--join-wan` (each retried until it answers; one is enough, several survive a primary node being down). The
   * addresses are the primary nodes' real cluster addresses, which the dial hook sends through the proxies.
   */
  private federationArgs(name: string): string[] {
    const { datacenter } = this.node(name)
    const datacenters = this.current.datacenters
    if (datacenter === undefined || datacenters === undefined) return []
    const primary = datacenters[0]!
    const join = datacenter === primary ? [] : this.nodesOf(primary).flatMap((node) => ['--join-wan', this.node(node).clusterAddress])
    return ['--datacenter', datacenter, '--primary-datacenter', primary, ...join]
  }

  /**
   * The environment of a node: the cluster key, and the management token as what it is to that node: the initial
   * management token of a cluster of one datacenter or of a federation's primary; a secondary's replication token
   * (a secondary refuses an initial management token). In a federation, the dial routes of the hook as well: every
   * other node's real cluster address → the proxy of the link from this node to it.
   */
  private agentEnvironment(name: string): NodeJS.ProcessEnv {
    const spec = this.node(name)
    const environment: NodeJS.ProcessEnv = { ...process.env, WARDEN_CLUSTER_KEY: this.current.clusterKey }
    delete environment.WARDEN_INITIAL_MANAGEMENT_TOKEN
    delete environment.WARDEN_ACL_REPLICATION_TOKEN
    delete environment[DIAL_ROUTES_VARIABLE]
    const datacenters = this.current.datacenters
    if (spec.datacenter === undefined || datacenters === undefined) return { ...environment, WARDEN_INITIAL_MANAGEMENT_TOKEN: this.current.managementToken }
    const routes: Record<string, string> = {}
    for (const [peer, proxy] of Object.entries(spec.proxies)) routes[this.node(peer).clusterAddress] = proxy
    environment[DIAL_ROUTES_VARIABLE] = JSON.stringify(routes)
    if (spec.datacenter === datacenters[0]) environment.WARDEN_INITIAL_MANAGEMENT_TOKEN = this.current.managementToken
    else environment.WARDEN_ACL_REPLICATION_TOKEN = this.current.managementToken
    return environment
  }

  private dialHookPath(): string {
    return join(this.current.root, 'dial-routes.mjs')
  }

  /** Plain HTTP; or, with TLS, the files, HTTPS asking for client certificates, and plain HTTP off unless kept. */
  private listenerArgs(name: string): string[] {
    const spec = this.node(name)
    const tls = this.current.tls
    if (tls === undefined) return ['--http-addr', spec.httpAddress]
    if (spec.httpsAddress === undefined || spec.certFile === undefined || spec.keyFile === undefined) {
      throw new Error(`${name}: the state file says the cluster runs with TLS but names no HTTPS address or certificate for it`)
    }
    return [
      '--http-addr', spec.httpAddress === '' ? 'off' : spec.httpAddress,
      '--https-addr', spec.httpsAddress,
      '--tls-ca-file', tls.caFile,
      '--tls-cert-file', spec.certFile,
      '--tls-key-file', spec.keyFile,
      '--tls-verify-incoming',
    ]
  }

  private async startNode(name: string): Promise<void> {
    const spec = this.node(name)
    const logPath = this.logPath(name)
    const offset = await fileSize(logPath)
    // Written again at every start, so a node started by a later version of this file gets that version's hook.
    if (spec.datacenter !== undefined) await writeFile(this.dialHookPath(), DIAL_HOOK, { mode: 0o644 })
    const log = openSync(logPath, 'a')
    // Secrets go in the environment, not in argv, where every user of this machine could read them with ps.
    const child = spawn(process.execPath, this.agentArgs(name), {
      cwd: REPO_ROOT,
      detached: true,
      stdio: ['ignore', log, log],
      env: this.agentEnvironment(name),
    })
    closeSync(log)
    child.unref()
    if (child.pid === undefined) throw new Error(`${name} could not be started`)
    spec.pid = child.pid
    await this.save()
    await this.waitForReadyLine(name, child.pid, offset)
  }

  /** Waits for the agent's `agent ready` log line, written once its listeners are bound. */
  private async waitForReadyLine(name: string, pid: number, offset: number): Promise<void> {
    const spec = this.node(name)
    const logPath = this.logPath(name)
    const deadline = Date.now() + NODE_READY_MS
    for (;;) {
      const text = await readFile(logPath).then((buffer) => buffer.subarray(offset).toString('utf8'), () => '')
      if (text.includes('"msg":"agent ready"')) return
      if (processState(pid, spec.dataDir) === 'gone') throw new Error(`${name} exited before it was ready (log: ${logPath}):\n${await logTail(logPath)}`)
      if (Date.now() > deadline) throw new Error(`${name} was not ready within ${NODE_READY_MS} ms (log: ${logPath}):\n${await logTail(logPath)}`)
      await sleep(50)
    }
  }

  /**
   * A leader that a majority names, and the management token working on every node: the leader writes the token
   * just after its election, so a cluster with a leader may not know it for a few milliseconds more.
   */
  private async ready(): Promise<void> {
    const deadline = Date.now() + CLUSTER_READY_MS
    const datacenters = this.current.datacenters
    if (datacenters === undefined) await this.leader(CLUSTER_READY_MS)
    else await Promise.all(datacenters.map((datacenter) => this.leader(CLUSTER_READY_MS, datacenter)))
    for (const name of this.nodeNames()) {
      for (;;) {
        const self = await this.request(name, 'GET', '/v1/acl/token/self?stale').catch(() => undefined)
        if (self?.status === 200) break
        if (Date.now() > deadline) throw new Error(`the management token did not work on ${name} within ${CLUSTER_READY_MS} ms`)
        await sleep(50)
      }
    }
    if (datacenters === undefined) return
    // A federation is ready once every node knows every datacenter (its WAN links are up).
    for (const name of this.nodeNames()) {
      for (;;) {
        const known = await this.request(name, 'GET', '/v1/catalog/datacenters').catch(() => undefined)
        if (known?.status === 200 && Array.isArray(known.body) && datacenters.every((datacenter) => (known.body as string[]).includes(datacenter))) break
        if (Date.now() > deadline) throw new Error(`${name} did not know every datacenter (${datacenters.join(', ')}) within ${CLUSTER_READY_MS} ms`)
        await sleep(50)
      }
    }
  }

  private async follow(onLine: (node: string, line: string) => void): Promise<void> {
    for (const name of this.nodeNames()) {
      const path = this.logPath(name)
      this.followers.push(new LogFollower(path, await fileSize(path), (line) => onLine(name, line)))
    }
  }

  private installForegroundHooks(): void {
    let stopping = false
    const onSignal = (): void => {
      if (stopping) return // A second Ctrl-C while stopping: the exit hook below kills whatever is left.
      stopping = true
      this.down().then(
        () => process.exit(0),
        (error: unknown) => {
          process.stderr.write(`cluster: ${error instanceof Error ? error.message : String(error)}\n`)
          process.exit(1)
        },
      )
    }
    // Last resort when the process exits without `down` (an uncaught error, process.exit): kill what is left, since
    // a foreground cluster must not outlive its owner. Synchronous, as exit handlers must be.
    const onExit = (): void => {
      const state = readStateSync(this.current.root) ?? this.current
      for (const spec of Object.values(state.nodes)) signalOwn(spec.pid, spec.dataDir, 'SIGKILL')
      if (state.proxyPid !== undefined) signalOwn(state.proxyPid, join(state.root, 'proxy.json'), 'SIGKILL')
    }
    // SIGHUP too: a closed terminal would otherwise end this process without running the exit hook.
    process.on('SIGINT', onSignal)
    process.on('SIGTERM', onSignal)
    process.on('SIGHUP', onSignal)
    process.on('exit', onExit)
    this.removeForegroundHooks = () => {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
      process.off('SIGHUP', onSignal)
      process.off('exit', onExit)
      this.removeForegroundHooks = undefined
    }
  }

  private async nodeStatus(name: string): Promise<NodeStatus> {
    const spec = this.node(name)
    const base = {
      node: name,
      httpAddress: spec.httpAddress,
      ...(spec.httpsAddress === undefined ? {} : { httpsAddress: spec.httpsAddress }),
      ...(spec.datacenter === undefined ? {} : { datacenter: spec.datacenter }),
    }
    const unknown = { term: 0, commitIndex: 0, appliedIndex: 0, lastContactMs: 0, leader: '' }
    const state = processState(spec.pid, spec.dataDir)
    if (state === 'gone') return { ...base, up: false, paused: false, role: 'down', ...unknown }
    // A stopped process would accept the connection and never answer: do not ask it.
    if (state === 'stopped') return { ...base, up: true, paused: true, role: 'unknown', ...unknown }
    try {
      return { ...base, up: true, paused: false, ...(await this.raftState(name)) }
    } catch {
      return { ...base, up: true, paused: false, role: 'unknown', ...unknown } // Starting, stopping, or too busy to answer.
    }
  }

  /** The node's own account from /v1/operator/raft/state, or, on agents without it, what the public API shows. */
  private async raftState(name: string): Promise<Pick<NodeStatus, 'role' | 'term' | 'commitIndex' | 'appliedIndex' | 'lastContactMs' | 'leader'>> {
    const response = await this.request(name, 'GET', '/v1/operator/raft/state')
    if (response.status === 200) {
      const body = response.body as { Role: string; Term: number; CommitIndex: number; AppliedIndex: number; LastContactMs: number; Leader: string }
      return {
        role: body.Role,
        term: body.Term,
        commitIndex: body.CommitIndex,
        appliedIndex: body.AppliedIndex,
        lastContactMs: body.LastContactMs,
        leader: body.Leader ?? '',
      }
    }
    // Fallback: the leader's address as this node knows it, and the index of a stale read (the applied state's
    // newest index of one table: a lower bound of the applied index, and the best the public API offers).
    const leaderAnswer = await this.request(name, 'GET', '/v1/status/leader', { token: null })
    const leader = this.nodeForAddress(name, leaderAnswer.body as string)
    const read = await this.request(name, 'GET', '/v1/acl/policies?stale')
    const index = Number(read.headers.get('X-Service-Index') ?? 0)
    return {
      role: leader === name ? 'leader' : 'follower',
      term: 0,
      commitIndex: index,
      appliedIndex: index,
      lastContactMs: Number(read.headers.get('X-Service-LastContact') ?? 0),
      leader,
    }
  }

  /**
   * The node behind an address as `asking` knows it: its own cluster address, or the proxy address it dials for a
   * peer (a node names its peers by the addresses it was given, and here those are proxies).
   */
  nodeForAddress(asking: string, address: string): string {
    const spec = this.node(asking)
    if (address === '') return ''
    if (address === spec.clusterAddress) return asking
    const viaProxy = Object.entries(spec.proxies).find(([, proxy]) => proxy === address)?.[0]
    if (viaProxy !== undefined) return viaProxy
    return Object.entries(this.current.nodes).find(([, other]) => other.clusterAddress === address)?.[0] ?? ''
  }
}

/**
 * A CA (the one already under `<root>/tls/` when there is one), a server certificate for each node (naming
 * `server.<dc>.warden`, `<node>.server.<dc>.warden`, localhost and 127.0.0.1, where dc is the node's datacenter:
 * dc1 but in a federation) and a client certificate (of dc1, or of a federation's primary). The generator is loaded here, not at the top: it pulls
 * in an X.509 library that clusters without TLS need not load.
 */
async function issueCertificates(
  root: string,
  servers: Array<{ name: string; datacenter: string }>,
  clientDatacenter: string,
): Promise<{ cluster: ClusterTls; nodes: Record<string, { certFile: string; keyFile: string }> }> {
  const { createCa, createCert } = await import('../src/cli/tls/generate.js')
  const directory = join(root, 'tls')
  await mkdir(directory, { recursive: true, mode: 0o700 })
  // The names `warden tls ca create` and `warden tls cert create` give their files.
  const caFile = join(directory, 'warden-agent-ca.pem')
  const caKeyFile = join(directory, 'warden-agent-ca-key.pem')
  const existing = await Promise.all([readFile(caFile, 'utf8'), readFile(caKeyFile, 'utf8')]).then(([cert, key]) => ({ cert, key }), () => undefined)
  const ca = existing ?? (await createCa())
  if (existing === undefined) {
    await writeFile(caFile, ca.cert)
    await writeKey(caKeyFile, ca.key)
  }
  const issue = async (kind: 'server' | 'client', dc: string, stem: string, node?: string): Promise<{ certFile: string; keyFile: string }> => {
    const issued = await createCert({ ca: ca.cert, caKey: ca.key, kind, dc, ...(node === undefined ? {} : { node }) })
    const files = { certFile: join(directory, `${stem}.pem`), keyFile: join(directory, `${stem}-key.pem`) }
    await writeFile(files.certFile, issued.cert)
    await writeKey(files.keyFile, issued.key)
    return files
  }
  const nodes: Record<string, { certFile: string; keyFile: string }> = {}
  for (const { name, datacenter } of servers) nodes[name] = await issue('server', datacenter, `${datacenter}-server-warden-${name}`, name)
  const client = await issue('client', clientDatacenter, `${clientDatacenter}-client-warden`)
  return { cluster: { caFile, caKeyFile, clientCertFile: client.certFile, clientKeyFile: client.keyFile }, nodes }
}

/** A private key: mode 0600 whether the file is new or overwritten (writeFile's mode applies only to a new file). */
async function writeKey(path: string, pem: string): Promise<void> {
  await writeFile(path, pem, { mode: 0o600 })
  await chmod(path, 0o600)
}

async function readState(root: string): Promise<ClusterState> {
  const path = join(root, 'state.json')
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    throw new Error(`no cluster state at ${path} (start one with: npm run cluster -- up)`, { cause: error })
  }
  return JSON.parse(text) as ClusterState
}

function readStateSync(root: string): ClusterState | undefined {
  try {
    return JSON.parse(readFileSync(join(root, 'state.json'), 'utf8')) as ClusterState
  } catch {
    return undefined // No file (or half of one): the caller falls back to what it holds in memory.
  }
}
