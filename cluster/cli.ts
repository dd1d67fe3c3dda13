/**
 * `npm run cluster -- <verb>`: run, watch and break a local cluster (cluster/lib.ts does the work). `npm start` is
 * `up --foreground`. Exit codes: 0 done, 2 usage (an unknown verb, option or node), 1 anything that failed, with one
 * line saying what.
 */
import { relative } from 'node:path'
import { DEFAULT_ROOT, LocalCluster, type DatacenterStatus, type NodeStatus, type ReplicationStatus } from './lib.js'

const USAGE = `usage: npm run cluster -- [--root DIR] <verb>
  up [--foreground] [--nodes N] [--tls] [--datacenters DC,DC..]
                                  start n1..nN (default 3) on free loopback ports; --foreground streams their
                                  logs and Ctrl-C stops them (npm start); --tls issues a CA and certificates into
                                  <root>/tls/ and runs peer links over mutual TLS and the API over HTTPS only,
                                  with client certificates required (the later verbs follow the state file);
                                  --datacenters runs N nodes per datacenter (dc1-n1..), the first the primary,
                                  the others joined to it over WAN links and replicating its ACLs
  status [--json]                 each node's process, role, term, commit and applied index, last contact; in a
                                  federation also each datacenter's leader, WAN links and replication
  kill NODE|leader                SIGKILL (leader: the node a majority names; DC/leader in a federation)
  restart NODE                    start again on the same data dir and ports (stops it first if running)
  wipe NODE|leader                SIGKILL, delete its data dir, start again with the same flags and ports: it
                                  rejoins as a non-voter and becomes a voter once caught up
  pause NODE|leader               SIGSTOP
  resume NODE                     SIGCONT
  partition NODE                  cut every peer link to and from NODE at the proxies
  partition-dc DC                 cut every link between DC and the other datacenters at the proxies
  heal                            reopen every link
  down                            stop every node and the proxy (data, logs and state file stay)
In a federation, leader is DC/leader (dc2/leader): each datacenter has its own.
--root DIR: where the state file, data dirs and logs live (default cluster/.run)`

class UsageError extends Error {}

interface Options {
  root: string
  json: boolean
  foreground: boolean
  nodes: number | undefined
  tls: boolean
  datacenters: string[] | undefined
  positional: string[]
}

function parse(argv: string[]): Options {
  const options: Options = { root: DEFAULT_ROOT, json: false, foreground: false, nodes: undefined, tls: false, datacenters: undefined, positional: [] }
  for (let position = 0; position < argv.length; position += 1) {
    const argument = argv[position]!
    const value = (): string => {
      const next = argv[position + 1]
      if (next === undefined) throw new UsageError(`${argument}: needs a value`)
      position += 1
      return next
    }
    if (argument === '--root') options.root = value()
    else if (argument === '--json') options.json = true
    else if (argument === '--foreground') options.foreground = true
    else if (argument === '--tls') options.tls = true
    else if (argument === '--datacenters') {
      const text = value()
      const datacenters = text.split(',')
      if (datacenters.some((datacenter) => !/^[a-z0-9_-]{1,64}$/.test(datacenter))) {
        throw new UsageError(`--datacenters: a comma-separated list of datacenter names (lowercase letters, digits, "-" or "_"), not ${JSON.stringify(text)}`)
      }
      if (datacenters.length > 9 || new Set(datacenters).size !== datacenters.length) throw new UsageError(`--datacenters: at most 9, each once, not ${JSON.stringify(text)}`)
      options.datacenters = datacenters
    } else if (argument === '--nodes') {
      const text = value()
      options.nodes = Number(text)
      if (!/^[1-9]$/.test(text)) throw new UsageError(`--nodes: must be an integer from 1 to 9, not ${JSON.stringify(text)}`)
    } else if (argument === '--help' || argument === '-h') options.positional.unshift('help')
    else if (argument.startsWith('-')) throw new UsageError(`unknown option ${argument}`)
    else options.positional.push(argument)
  }
  return options
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' }
const COLORS = ['\x1b[36m', '\x1b[35m', '\x1b[33m', '\x1b[32m', '\x1b[34m', '\x1b[96m', '\x1b[95m', '\x1b[93m', '\x1b[92m']
/** Fields every line has, or that the prefix already shows. */
const QUIET_FIELDS = new Set(['level', 'time', 'pid', 'hostname', 'node', 'msg', 'module'])

/** One agent log line (pino JSON) as `12:00:01.234 n1 INFO  [raft] became leader term=2`; other lines as they are. */
export function formatLogLine(node: string, line: string, color: boolean): string {
  const paint = (code: string, text: string): string => (color ? `${code}${text}\x1b[0m` : text)
  const name = paint(COLORS[colorIndex(node)] ?? '', node.padEnd(3))
  let record: Record<string, unknown>
  try {
    record = JSON.parse(line) as Record<string, unknown>
  } catch {
    return `${name} ${line}` // Not a log record (a stack trace from a crash, say): shown as written.
  }
  if (typeof record !== 'object' || record === null) return `${name} ${line}`
  const level = LEVELS[Number(record.level)] ?? String(record.level)
  const levelText = Number(record.level) >= 50 ? paint('\x1b[31m', level.padEnd(5)) : Number(record.level) >= 40 ? paint('\x1b[33m', level.padEnd(5)) : level.padEnd(5)
  const time = typeof record.time === 'string' ? record.time.slice(11, 23) : ''
  const module = typeof record.module === 'string' ? `[${record.module}] ` : ''
  const fields = Object.entries(record)
    .filter(([key]) => !QUIET_FIELDS.has(key))
    .map(([key, value]) => {
      const text = typeof value === 'string' ? value : JSON.stringify(value)
      return `${key}=${text.length > 160 ? `${text.slice(0, 157)}...` : text}`
    })
  return [time, name, levelText, `${module}${String(record.msg ?? '')}`, ...fields].filter((part) => part !== '').join(' ')
}

/** n1..n9 take the colours in order; a federation's nodes (dc2-n1) one by their name, the same in every process. */
function colorIndex(node: string): number {
  const single = /^n(\d+)$/.exec(node)
  if (single !== null) return (Number(single[1]) - 1) % COLORS.length
  let sum = 0
  for (const character of node) sum = (sum * 31 + character.charCodeAt(0)) % 65_521
  return sum % COLORS.length
}

function displayPath(path: string): string {
  const shown = relative(process.cwd(), path)
  return shown.startsWith('..') || shown === '' ? path : shown
}

function printAddresses(cluster: LocalCluster): void {
  const state = cluster.state()
  for (const [name, node] of Object.entries(state.nodes)) {
    process.stdout.write(`${name}  ${cluster.apiAddress(name)}  (cluster ${node.clusterAddress}, pid ${node.pid})\n`)
  }
  const primary = state.datacenters?.[0]
  process.stdout.write(`Management token: ${state.managementToken}${primary === undefined ? '' : ` (${primary}'s, the primary; the secondaries replicate with it and resolve it at ${primary})`}\n`)
  const first = cluster.nodeNames()[0]
  if (first === undefined) return
  const address = cluster.apiAddress(first)
  const { tls } = state
  // Every node serves the UI (src/http/routes/ui.ts); the first one's is printed, as for the command line.
  process.stdout.write(
    `Web UI: ${address}/ui/ (any node's /ui/; sign in with the management token${tls === undefined ? '' : '; the browser must present the client certificate below'})\n`,
  )
  if (tls === undefined) {
    // The command line reads both from the environment (README "Command line"), so one paste makes `warden` work.
    process.stdout.write(`For the command line: export WARDEN_HTTP_ADDR=${address} WARDEN_HTTP_TOKEN=${state.managementToken}\n`)
    return
  }
  // Absolute paths: the lines are meant to be pasted into a shell that may be in another directory. Paths only; the
  // keys stay in their files.
  process.stdout.write(
    'TLS: peer links over mutual TLS 1.3; the API over HTTPS only (plain HTTP off), a client certificate required\n' +
      `  CA ${tls.caFile}\n  client certificate ${tls.clientCertFile}\n  client key ${tls.clientKeyFile}\n` +
      `For the command line: warden <command> -http-addr ${address} -ca-file ${tls.caFile} -client-cert ${tls.clientCertFile} -client-key ${tls.clientKeyFile}\n` +
      `  or: export WARDEN_HTTP_ADDR=${address} WARDEN_CACERT=${tls.caFile} WARDEN_CLIENT_CERT=${tls.clientCertFile} WARDEN_CLIENT_KEY=${tls.clientKeyFile} WARDEN_HTTP_TOKEN=${state.managementToken}\n`,
  )
}

function statusTable(statuses: NodeStatus[], partitioned: string[], proxyUp: boolean): string {
  const rows = [['NODE', 'PROCESS', 'ROLE', 'LEADER', 'TERM', 'COMMIT', 'APPLIED', 'CONTACT', 'HTTP']]
  for (const status of statuses) {
    const process = !status.up ? 'down' : status.paused ? 'paused' : partitioned.includes(status.node) ? 'partitioned' : 'up'
    const known = status.up && !status.paused && status.role !== 'unknown'
    rows.push([
      status.node,
      process,
      status.role,
      status.leader === '' ? '-' : status.leader,
      known ? String(status.term) : '-',
      known ? String(status.commitIndex) : '-',
      known ? String(status.appliedIndex) : '-',
      known ? `${status.lastContactMs}ms` : '-',
      status.httpsAddress === undefined ? status.httpAddress : `https://${status.httpsAddress}`,
    ])
  }
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  const lines = rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd())
  if (!proxyUp) lines.push('link proxy: not running (nodes cannot reach each other)')
  return `${lines.join('\n')}\n`
}

/** A replication error newer than the last success (an older one is history: the loop has succeeded since). */
function lastError(replication: ReplicationStatus): string {
  if (replication.lastErrorMessage === '' || Date.parse(replication.lastError) <= Date.parse(replication.lastSuccess)) return '-'
  return `${replication.lastError} ${replication.lastErrorMessage}`
}

/** `cut` for a datacenter cut off by partition-dc; else `open`, or which datacenters it cannot reach (cut ones). */
function wanColumn(datacenter: DatacenterStatus, datacenters: DatacenterStatus[]): string {
  if (datacenter.wanCut) return 'cut'
  const cut = datacenters.filter((other) => other.wanCut).map((other) => other.datacenter)
  return cut.length === 0 ? 'open' : `open but to ${cut.join(',')}`
}

/** A federation's datacenters: leader, WAN links, the datacenters the leader knows, and a secondary's replication. */
function datacenterTable(datacenters: DatacenterStatus[]): string {
  const rows = [['DATACENTER', 'ROLE', 'LEADER', 'WAN', 'KNOWS', 'REPLICATION', 'REPLICATED', 'LAST ERROR']]
  for (const datacenter of datacenters) {
    const replication = datacenter.replication
    rows.push([
      datacenter.datacenter,
      datacenter.primary ? 'primary' : 'secondary',
      datacenter.leader === '' ? '-' : datacenter.leader,
      wanColumn(datacenter, datacenters),
      datacenter.known.length === 0 ? '-' : datacenter.known.join(','),
      datacenter.primary ? '-' : replication === undefined ? 'unknown' : !replication.enabled ? 'off' : replication.running ? 'running' : 'stopped',
      replication === undefined ? '-' : `${replication.replicatedIndex}`,
      replication === undefined ? '-' : lastError(replication),
    ])
  }
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return `${rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd()).join('\n')}\n`
}

async function resolveNode(cluster: LocalCluster, name: string | undefined, allowLeader: boolean): Promise<string> {
  const datacenters = cluster.datacenterNames()
  const leaderWord = datacenters === undefined ? 'leader' : 'DC/leader'
  if (name === undefined) throw new UsageError(`a node is required: ${cluster.nodeNames().join(', ')}${allowLeader ? ` or ${leaderWord}` : ''}`)
  if (allowLeader && name === 'leader') {
    if (datacenters !== undefined) throw new UsageError(`leader: each datacenter has its own: ${datacenters.map((datacenter) => `${datacenter}/leader`).join(' or ')}`)
    return cluster.leader(5_000)
  }
  const perDatacenter = /^(.+)\/leader$/.exec(name)
  if (allowLeader && perDatacenter !== null) {
    const datacenter = perDatacenter[1]!
    if (datacenters === undefined) throw new UsageError(`${name}: not a federation (its one leader is: leader)`)
    if (!datacenters.includes(datacenter)) throw new UsageError(`no datacenter ${JSON.stringify(datacenter)}: ${datacenters.join(', ')}`)
    return cluster.leader(5_000, datacenter)
  }
  if (!cluster.nodeNames().includes(name)) throw new UsageError(`no node ${JSON.stringify(name)}: ${cluster.nodeNames().join(', ')}`)
  return name
}

async function up(options: Options): Promise<number> {
  const color = process.stdout.isTTY === true
  // Log lines wait until the addresses and token are printed, so those come first and do not drown in start-up logs.
  let held: string[] | undefined = []
  const print = (node: string, line: string): void => {
    const text = `${formatLogLine(node, line, color)}\n`
    if (held === undefined) process.stdout.write(text)
    else held.push(text)
  }
  const cluster = await LocalCluster.up({
    root: options.root,
    foreground: options.foreground,
    ...(options.nodes === undefined ? {} : { nodes: options.nodes }),
    ...(options.foreground ? { logs: print } : {}),
    ...(options.tls ? { tls: true } : {}),
    ...(options.datacenters === undefined ? {} : { datacenters: options.datacenters }),
  })
  printAddresses(cluster)
  const datacenters = cluster.datacenterNames()
  if (datacenters === undefined) process.stdout.write(`Leader: ${await cluster.leader()}\n`)
  else {
    const leaders = await Promise.all(datacenters.map(async (datacenter) => `${datacenter} ${await cluster.leader(10_000, datacenter)}`))
    process.stdout.write(`Leaders: ${leaders.join(', ')} (primary ${datacenters[0]})\n`)
  }
  const root = displayPath(cluster.state().root)
  process.stdout.write(`State: ${root}/state.json  Logs: ${root}/logs/\n`)
  if (!options.foreground) return 0
  process.stdout.write('Streaming the nodes\' logs; Ctrl-C stops the cluster.\n')
  for (const text of held) process.stdout.write(text)
  held = undefined
  // The lib's log followers keep this process alive, and its signal hooks stop the cluster and exit.
  return new Promise<number>(() => undefined)
}

async function run(options: Options): Promise<number> {
  const [verb, argument, extra] = options.positional
  if (verb === undefined || verb === 'help') {
    process.stdout.write(`${USAGE}\n`)
    return verb === undefined ? 2 : 0
  }
  const arity: Record<string, number> = { up: 0, status: 0, kill: 1, restart: 1, wipe: 1, pause: 1, resume: 1, partition: 1, 'partition-dc': 1, heal: 0, down: 0 }
  const wanted = arity[verb]
  if (wanted === undefined) throw new UsageError(`unknown verb ${JSON.stringify(verb)}`)
  if ((wanted === 0 && argument !== undefined) || extra !== undefined) throw new UsageError(`${verb}: too many arguments`)
  if (options.tls && verb !== 'up') throw new UsageError(`--tls: only with up (${verb} follows what the state file says)`)
  if (options.datacenters !== undefined && verb !== 'up') throw new UsageError(`--datacenters: only with up (${verb} follows what the state file says)`)
  if (verb === 'up') return up(options)
  const cluster = await LocalCluster.attach(options.root)
  switch (verb) {
    case 'status': {
      const statuses = await cluster.status()
      const proxyUp = cluster.proxyUp()
      const partitioned = proxyUp ? await cluster.partitioned() : []
      const leaders = statuses.filter((status) => status.role === 'leader').map((status) => status.node)
      const datacenters = cluster.datacenterNames() === undefined ? undefined : await cluster.datacenters()
      if (options.json) {
        const state = cluster.state()
        const tls = state.tls === undefined ? {} : { tls: { caFile: state.tls.caFile, clientCertFile: state.tls.clientCertFile, clientKeyFile: state.tls.clientKeyFile } }
        const federation = datacenters === undefined ? {} : { datacenters }
        process.stdout.write(`${JSON.stringify({ nodes: statuses, leaders, partitioned, proxy: { pid: state.proxyPid ?? 0, up: proxyUp }, managementToken: state.managementToken, ...tls, ...federation }, null, 2)}\n`)
      } else {
        process.stdout.write(statusTable(statuses, partitioned, proxyUp))
        if (datacenters !== undefined) process.stdout.write(`\n${datacenterTable(datacenters)}`)
      }
      return 0
    }
    case 'kill': {
      const node = await resolveNode(cluster, argument, true)
      const pid = cluster.state().nodes[node]?.pid
      await cluster.kill(node)
      process.stdout.write(`killed ${node} (pid ${pid})\n`)
      return 0
    }
    case 'restart': {
      const node = await resolveNode(cluster, argument, false)
      await cluster.restart(node)
      process.stdout.write(`restarted ${node} (pid ${cluster.state().nodes[node]?.pid})\n`)
      return 0
    }
    case 'wipe': {
      const node = await resolveNode(cluster, argument, true)
      const killed = await cluster.wipe(node)
      const pid = cluster.state().nodes[node]?.pid
      process.stdout.write(
        `wiped ${node} (${killed > 0 ? `pid ${killed} killed` : 'was not running'}, data dir deleted) and started it again as pid ${pid} ` +
          'with the same flags: it rejoins as a non-voter and becomes a voter once caught up\n',
      )
      return 0
    }
    case 'pause': {
      const node = await resolveNode(cluster, argument, true)
      await cluster.pause(node)
      process.stdout.write(`paused ${node}\n`)
      return 0
    }
    case 'resume': {
      const node = await resolveNode(cluster, argument, false)
      await cluster.resume(node)
      process.stdout.write(`resumed ${node}\n`)
      return 0
    }
    case 'partition': {
      const node = await resolveNode(cluster, argument, false)
      await cluster.partition(node)
      process.stdout.write(`partitioned ${node}\n`)
      return 0
    }
    case 'partition-dc': {
      const datacenters = cluster.datacenterNames()
      if (datacenters === undefined) throw new UsageError('partition-dc: not a federation (start one with up --datacenters)')
      if (argument === undefined || !datacenters.includes(argument)) throw new UsageError(`partition-dc: a datacenter is required: ${datacenters.join(', ')}`)
      await cluster.partitionDatacenter(argument)
      process.stdout.write(`partitioned ${argument} from ${datacenters.filter((datacenter) => datacenter !== argument).join(', ')}\n`)
      return 0
    }
    case 'heal':
      await cluster.heal()
      process.stdout.write('healed\n')
      return 0
    case 'down':
      await cluster.down()
      process.stdout.write('down\n')
      return 0
    default:
      throw new UsageError(`unknown verb ${JSON.stringify(verb)}`)
  }
}

async function main(): Promise<number> {
  try {
    return await run(parse(process.argv.slice(2)))
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`cluster: ${error.message}\n${USAGE}\n`)
      return 2
    }
    // One line. A failed start's message goes on with the node's log tail; its first line names the log file.
    const message = error instanceof Error ? error.message : String(error)
    process.stderr.write(`cluster: ${message.split('\n')[0]}\n`)
    return 1
  }
}

// Exit explicitly: idle keep-alive sockets from fetch must not hold a finished command open.
main().then((code) => process.exit(code))
