/**
 * `npm run cluster -- <verb>`: run, watch and break a local cluster (cluster/lib.ts does the work). `npm start` is
 * `up --foreground`. Exit codes: 0 done, 2 usage (an unknown verb, option or node), 1 anything that failed, with one
 * line saying what.
 */
import { relative } from 'node:path'
import { DEFAULT_ROOT, LocalCluster, type NodeStatus } from './lib.js'

const USAGE = `usage: npm run cluster -- [--root DIR] <verb>
  up [--foreground] [--nodes N] [--tls]
                                  start n1..nN (default 3) on free loopback ports; --foreground streams their
                                  logs and Ctrl-C stops them (npm start); --tls issues a CA and certificates into
                                  <root>/tls/ and runs peer links over mutual TLS and the API over HTTPS only,
                                  with client certificates required (the later verbs follow the state file)
  status [--json]                 each node's process, role, term, commit and applied index, last contact
  kill NODE|leader                SIGKILL
  restart NODE                    start again on the same data dir and ports (stops it first if running)
  wipe NODE|leader                SIGKILL, delete its data dir, start again with the same flags and ports: it
                                  rejoins as a non-voter and becomes a voter once caught up
  pause NODE|leader               SIGSTOP
  resume NODE                     SIGCONT
  partition NODE                  cut every peer link to and from NODE at the proxies
  heal                            reopen every link
  down                            stop every node and the proxy (data, logs and state file stay)
--root DIR: where the state file, data dirs and logs live (default cluster/.run)`

class UsageError extends Error {}

interface Options {
  root: string
  json: boolean
  foreground: boolean
  nodes: number | undefined
  tls: boolean
  positional: string[]
}

function parse(argv: string[]): Options {
  const options: Options = { root: DEFAULT_ROOT, json: false, foreground: false, nodes: undefined, tls: false, positional: [] }
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
    else if (argument === '--nodes') {
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
  const number = Number(node.slice(1))
  const name = paint(COLORS[(number - 1) % COLORS.length] ?? '', node.padEnd(3))
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

function displayPath(path: string): string {
  const shown = relative(process.cwd(), path)
  return shown.startsWith('..') || shown === '' ? path : shown
}

function printAddresses(cluster: LocalCluster): void {
  const state = cluster.state()
  for (const [name, node] of Object.entries(state.nodes)) {
    process.stdout.write(`${name}  ${cluster.apiAddress(name)}  (cluster ${node.clusterAddress}, pid ${node.pid})\n`)
  }
  process.stdout.write(`Management token: ${state.managementToken}\n`)
  const first = cluster.nodeNames()[0]
  if (first === undefined) return
  const address = cluster.apiAddress(first)
  const { tls } = state
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

async function resolveNode(cluster: LocalCluster, name: string | undefined, allowLeader: boolean): Promise<string> {
  if (name === undefined) throw new UsageError(`a node is required: ${cluster.nodeNames().join(', ')}${allowLeader ? ' or leader' : ''}`)
  if (allowLeader && name === 'leader') return cluster.leader(5_000)
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
  })
  printAddresses(cluster)
  process.stdout.write(`Leader: ${await cluster.leader()}\n`)
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
  const arity: Record<string, number> = { up: 0, status: 0, kill: 1, restart: 1, wipe: 1, pause: 1, resume: 1, partition: 1, heal: 0, down: 0 }
  const wanted = arity[verb]
  if (wanted === undefined) throw new UsageError(`unknown verb ${JSON.stringify(verb)}`)
  if ((wanted === 0 && argument !== undefined) || extra !== undefined) throw new UsageError(`${verb}: too many arguments`)
  if (options.tls && verb !== 'up') throw new UsageError(`--tls: only with up (${verb} follows what the state file says)`)
  if (verb === 'up') return up(options)
  const cluster = await LocalCluster.attach(options.root)
  switch (verb) {
    case 'status': {
      const statuses = await cluster.status()
      const proxyUp = cluster.proxyUp()
      const partitioned = proxyUp ? await cluster.partitioned() : []
      const leaders = statuses.filter((status) => status.role === 'leader').map((status) => status.node)
      if (options.json) {
        const state = cluster.state()
        const tls = state.tls === undefined ? {} : { tls: { caFile: state.tls.caFile, clientCertFile: state.tls.clientCertFile, clientKeyFile: state.tls.clientKeyFile } }
        process.stdout.write(`${JSON.stringify({ nodes: statuses, leaders, partitioned, proxy: { pid: state.proxyPid ?? 0, up: proxyUp }, managementToken: state.managementToken, ...tls }, null, 2)}\n`)
      } else {
        process.stdout.write(statusTable(statuses, partitioned, proxyUp))
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
