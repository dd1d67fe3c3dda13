/**
 * Golden interaction traces for the production driver: a small script language run against RaftReplica, ClusterNode,
 * LevelRaftStorage and StateStore in the simulated world (world.ts), after etcd-io/raft's datadriven interaction
 * tests (`interaction_test.go`, `testdata/*.txt`). A script file is also its golden output: each command is followed
 * by `----` and what it printed; the test runs the commands and compares the regenerated file with the stored one
 * (`REWRITE=1` writes it back instead). Everything runs on the world's one clock from one seed, so a script gives
 * one transcript, byte for byte; a change in the driver's behaviour shows up as a readable diff.
 *
 * File format: `# comment` lines, then a command, then `----`, then its output up to a blank line.
 *
 * The world: messages take 1 to 5 ms and are neither lost nor duplicated (cuts aside); a disk write takes 1 to 2 ms;
 * the driver's timeouts are the production defaults unless set; its info and warn logs are part of the transcript.
 *
 * Commands (durations as 500ms or 2s; servers named n1, n2, ...):
 *   world [seed=N] [election=D] [heartbeat=D] [snapshot-threshold=N] [delay=D-D] [disk=D] [leader-wait=D]
 *         [apply-wait=D] [logs=info|warn|silent] [links=ordered|unordered]    the world's settings; before any other
 *         command (ordered links: messages on a link arrive in the order sent, each still delayed by up to D; what a
 *         paused server was held back from receiving reaches it at resume, possibly after later messages)
 *   start NAME [--peer A,B] [--join [A,B]] [--election D] [--snapshot-threshold N] [&]    first start, with these
 *        flags (remembered for restart; the last two override the world's settings for this server); with &, the
 *        start is only scheduled, so that servers started in a row start at the same moment
 *   run D | run until COND [within D]    advance the world; events on the way (roles, driver logs, disk changes,
 *        operations settling) are printed with their time. COND: leader [NAME] | NAME voter | NAME learner (in the
 *        leader's configuration) | NAME stored>=N (its durable log) | NAME commit>=N | NAME applied>=N | NAME joined
 *        (its record's voteFrom known) | NAME disk has|lacks DB | settled (no operation in the background)
 *   write NAME KEY VALUE [--pad SIZE] [--cas N] [--ahead] [&]    ClusterNode.propose of a config.apply of
 *        service-defaults KEY (Value VALUE, padded with dots to SIZE bytes; with --cas, only if the entry's ModifyIndex
 *        is N, 0 for absent; with --ahead, answerBeforeLocalApply, as the HTTP API's writes, and the outcome says the
 *        index and NAME's applied index when it came); waits for the outcome, or with & prints it when it comes
 *   policy NAME POLICY [&]    ClusterNode.propose of an acl.policy.create named POLICY (its ID the world's next)
 *   read NAME KEY [consistent|leader|stale] [&]    ClusterNode.readBarrier, then the value in NAME's state
 *   remove TARGET [via NAME] [&]    ClusterNode.removeServer on NAME (default: the leader)
 *   kill NAME | power-loss NAME | wipe NAME | restart NAME    kill -9; power loss (unsynced writes lost); data dir
 *        deleted (stays down); restart with the flags of its first start (killing it first if it runs)
 *   pause NAME D | resume NAME    SIGSTOP for D; SIGCONT now
 *   clock-jump NAME [+|-]D    move NAME's wall clock (only join proofs read it)
 *   contact NAME    ClusterNode.lastContactMs (what ?max_stale compares) and the leader NAME knows
 *   cut A [B] | heal [A [B]]    cut the links between A and B (both ways; without B, between A and everyone) or
 *        restore them (without arguments, all)
 *   status    one line per server: role, term, leader, commit, applied, last index, voters, learners, voteFrom (from
 *        its membership record: `?` while unknown)
 *   log NAME | disk NAME | state NAME    its Raft log (index/term type); the databases in its data dir; its applied
 *        index and config entries
 *   shipped NAME    how many commands NAME applied, since it started, from the writes a leader shipped and by running
 *        them (not as leader)
 */
import { pino, type Logger } from 'pino'
import { WardenError } from '../../../src/lib/errors.js'
import { SeededRng } from '../../../src/lib/rng.js'
import { decodeConfiguration, type Entry } from '../../../src/raft/index.js'
import { LevelRaftStorage, type RaftDb } from '../../../src/raft/storage/level-storage.js'
import { VOTE_INDEX_UNKNOWN, type MembershipRecord } from '../../../src/raft/storage/raft-storage.js'
import { RaftReplica } from '../../../src/replica/raft-replica.js'
import { ClusterNode } from '../../../src/rpc/cluster-node.js'
import { COMMAND_VERSION } from '../../../src/state/commands.js'
import { configEntryKey } from '../../../src/state/config-entries.js'
import { openNode } from '../../../src/rpc/open-node.js'
import { decodeCommand, StateStore } from '../../../src/state/store.js'
import { configSpec, getRecord, listRecords } from '../../../src/state/tables.js'
import { Process, SimDisk, SimLinks, SimNetwork, World } from './world.js'

// ---------------------------------------------------------------------------------------------------------------
// The file format (etcd-io/raft's datadriven, reduced).

export interface Directive {
  /** Comment lines (and blank lines between them) before the command. */
  comments: string[]
  command: string
  /** The output recorded in the file; undefined when the command has none yet. */
  expected: string[] | undefined
}

export interface ParsedScript {
  directives: Directive[]
  /** Comment lines after the last command. */
  trailing: string[]
}

function trimBlank(lines: string[]): string[] {
  let start = 0
  let end = lines.length
  while (start < end && lines[start]!.trim() === '') start += 1
  while (end > start && lines[end - 1]!.trim() === '') end -= 1
  return lines.slice(start, end)
}

export function parseScript(text: string): ParsedScript {
  const lines = text.replace(/\r\n/g, '\n').split('\n')
  const directives: Directive[] = []
  let pending: string[] = []
  for (let i = 0; i < lines.length; ) {
    const line = lines[i]!
    if (line.trim() === '' || line.startsWith('#')) {
      pending.push(line.trimEnd())
      i += 1
      continue
    }
    const directive: Directive = { comments: trimBlank(pending), command: line.trim(), expected: undefined }
    pending = []
    i += 1
    if (lines[i] === '----') {
      i += 1
      const expected: string[] = []
      while (i < lines.length && lines[i]!.trim() !== '') expected.push(lines[i++]!)
      directive.expected = expected
    }
    directives.push(directive)
  }
  return { directives, trailing: trimBlank(pending) }
}

export function renderScript(script: ParsedScript, outputs: readonly string[][]): string {
  const out: string[] = []
  script.directives.forEach((directive, n) => {
    out.push(...directive.comments, directive.command, '----', ...(outputs[n] ?? []), '')
  })
  if (script.trailing.length > 0) out.push(...script.trailing, '')
  return out.join('\n')
}

/** Runs every command of `text` in a new world and returns the file as it should read: commands and their output. */
export async function runScript(text: string): Promise<string> {
  const script = parseScript(text)
  const runner = new ScriptRunner()
  const outputs: string[][] = []
  try {
    for (const directive of script.directives) {
      let output: string[]
      try {
        output = await runner.execute(directive.command)
      } catch (error) {
        throw new Error(`command "${directive.command}": ${error instanceof Error ? error.message : String(error)}`, { cause: error })
      }
      outputs.push(output.length === 0 ? ['ok'] : output.map((line) => (line.trim() === '' ? '.' : line)))
    }
  } finally {
    runner.close()
  }
  return renderScript(script, outputs)
}

// ---------------------------------------------------------------------------------------------------------------
// The world and its servers.

interface ScriptOptions {
  seed: number
  electionTimeoutMs: number
  heartbeatIntervalMs: number
  snapshotThreshold: number
  delayMinMs: number
  delayMaxMs: number
  diskLatencyMaxMs: number
  leaderWaitMs: number | undefined
  applyWaitMs: number | undefined
  logLevel: 'info' | 'warn' | 'silent'
  orderedLinks: boolean
}

const DEFAULTS: ScriptOptions = {
  seed: 1,
  electionTimeoutMs: 500,
  heartbeatIntervalMs: 50,
  snapshotThreshold: 8192,
  delayMinMs: 1,
  delayMaxMs: 5,
  diskLatencyMaxMs: 2,
  leaderWaitMs: undefined,
  applyWaitMs: undefined,
  logLevel: 'info',
  orderedLinks: false,
}

const KIND = 'service-defaults'
/** How long a command that waits for an outcome lets the world run at most. */
const SETTLE_LIMIT_MS = 60_000
/** Driver log lines left out of transcripts: the role events say the same. */
const QUIET_MESSAGES = new Set(['leader known', 'no leader', 'became leader'])

class Server {
  readonly process: Process
  readonly disk: SimDisk
  peers: string[] = []
  joining = false
  /** Whom a --join asks (in turn); empty: every other server started so far. */
  joinThrough: string[] = []
  electionTimeoutMs: number | undefined
  snapshotThreshold: number | undefined
  replica: RaftReplica | undefined
  cluster: ClusterNode | undefined
  storage: LevelRaftStorage | undefined
  state: StateStore | undefined
  links: SimLinks | undefined
  /** What the transcript last said of it (role line, databases), to print changes only. */
  shownRole = ''
  shownDisk: string[] = []

  constructor(
    readonly name: string,
    world: World,
    diskLatencyMaxMs: number,
  ) {
    this.process = new Process(name)
    this.disk = new SimDisk(world, this.process, { latencyMaxMs: diskLatencyMaxMs, slowFactor: 40 })
  }

  get running(): boolean {
    return this.process.up && this.replica !== undefined
  }
}

interface PendingOperation {
  label: string
  done: boolean
  outcome: string
}

function parseDuration(text: string | undefined): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s)$/.exec(text ?? '')
  if (match === null) throw new Error(`not a duration: ${text} (say 500ms or 2s)`)
  return Math.round(Number(match[1]) * (match[2] === 's' ? 1000 : 1))
}

function parseSize(text: string | undefined): number {
  const match = /^(\d+)(k?)$/.exec(text ?? '')
  if (match === null) throw new Error(`not a size: ${text} (say 300000 or 300k)`)
  return Number(match[1]) * (match[2] === 'k' ? 1000 : 1)
}

function showValue(value: unknown): string {
  if (typeof value !== 'string') return value === undefined || value === null ? '(none)' : JSON.stringify(value)
  if (value.length <= 32) return value
  return `${value.replace(/\.+$/, '')}(${value.length} bytes)`
}

function showError(error: unknown): string {
  if (error instanceof WardenError) return `error ${error.code}: ${error.message}`
  return `error: ${error instanceof Error ? error.message : String(error)}`
}

function showVoteFrom(record: MembershipRecord | null): string {
  if (record === null) return '-'
  return record.voteFromIndex === VOTE_INDEX_UNKNOWN ? '?' : String(record.voteFromIndex)
}

function showList(names: readonly string[]): string {
  return names.length === 0 ? '-' : names.join(',')
}

function describeEntry(entry: Entry): string {
  const head = `${entry.index}/${entry.term} ${entry.type}`
  if (entry.type === 'configuration') {
    const configuration = decodeConfiguration(entry.data)
    return `${head} voters=${showList(configuration.voters)} learners=${showList(configuration.learners)}`
  }
  if (entry.type !== 'command') return head
  try {
    const command = decodeCommand(entry.data, entry.index)
    switch (command.type) {
      case 'config.apply':
        return `${head} config.apply ${command.entry.Name}=${showValue(command.entry['Value'])}`
      case 'raft.member.set':
        return `${head} ${command.type} ${command.Node}${command.Incarnation === undefined ? '' : ` incarnation ${command.Incarnation}`}`
      case 'raft.member.delete':
        return `${head} ${command.type} ${command.Node}`
      default:
        return `${head} ${command.type}`
    }
  } catch {
    return `${head} (undecodable)`
  }
}

/** Formats one driver log line (pino JSON) for the transcript: level, message, fields; undefined to leave it out. */
function formatLog(line: string): string | undefined {
  const { level, msg, ...fields } = JSON.parse(line) as { level: number; msg?: string } & Record<string, unknown>
  if (msg !== undefined && QUIET_MESSAGES.has(msg)) return undefined
  const label = level >= 50 ? 'ERROR' : level >= 40 ? 'WARN' : level >= 30 ? 'INFO' : 'DEBUG'
  const parts = Object.entries(fields).map(([key, value]) => {
    if (key === 'err' && typeof value === 'object' && value !== null) return `err="${String((value as { message?: unknown }).message)}"`
    if (Array.isArray(value)) return `${key}=${showList(value.map(String))}`
    return `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`
  })
  return `${label} ${msg ?? ''}${parts.length > 0 ? ` ${parts.join(' ')}` : ''}`
}

export class ScriptRunner {
  private options: ScriptOptions = { ...DEFAULTS }
  private world: World | undefined
  private network: SimNetwork | undefined
  private readonly servers = new Map<string, Server>()
  private readonly operations = new Set<PendingOperation>()
  /** What happened since the last command's output was taken. */
  private events: string[] = []
  private failure: unknown
  /** The leader of each term seen so far: two would be a broken driver (Election Safety). */
  private readonly leaders = new Map<number, string>()

  async execute(line: string): Promise<string[]> {
    const [command, ...args] = line.split(/\s+/)
    if (command === 'world') {
      if (this.world !== undefined) throw new Error('world must come before every other command')
      this.configure(args)
      this.ensureWorld()
      return [`seed ${this.options.seed}, election ${this.options.electionTimeoutMs}ms, heartbeat ${this.options.heartbeatIntervalMs}ms, snapshot threshold ${this.options.snapshotThreshold}${this.options.orderedLinks ? ', ordered links' : ''}`]
    }
    this.ensureWorld()
    const result = await this.dispatch(command ?? '', args)
    this.observe()
    if (this.failure !== undefined) throw this.failure
    const output = [...this.events, ...result]
    this.events = []
    return output
  }

  close(): void {
    for (const server of this.servers.values()) {
      server.process.up = false
      server.process.epoch += 1
      server.disk.crash(false)
    }
  }

  private configure(args: string[]): void {
    for (const arg of args) {
      const [key, value] = arg.split('=')
      switch (key) {
        case 'seed':
          this.options.seed = Number(value)
          break
        case 'election':
          this.options.electionTimeoutMs = parseDuration(value)
          break
        case 'heartbeat':
          this.options.heartbeatIntervalMs = parseDuration(value)
          break
        case 'snapshot-threshold':
          this.options.snapshotThreshold = Number(value)
          break
        case 'delay': {
          const [low, high] = (value ?? '').split('-')
          this.options.delayMinMs = parseDuration(low)
          this.options.delayMaxMs = parseDuration(high)
          break
        }
        case 'disk':
          this.options.diskLatencyMaxMs = parseDuration(value)
          break
        case 'leader-wait':
          this.options.leaderWaitMs = parseDuration(value)
          break
        case 'apply-wait':
          this.options.applyWaitMs = parseDuration(value)
          break
        case 'links':
          if (value !== 'ordered' && value !== 'unordered') throw new Error(`links=${value}: say ordered or unordered`)
          this.options.orderedLinks = value === 'ordered'
          break
        case 'logs':
          if (value !== 'info' && value !== 'warn' && value !== 'silent') throw new Error(`logs=${value}: say info, warn or silent`)
          this.options.logLevel = value
          break
        default:
          throw new Error(`unknown world setting ${arg}`)
      }
    }
  }

  private ensureWorld(): void {
    if (this.world !== undefined) return
    this.world = new World(new SeededRng(this.options.seed))
    this.network = new SimNetwork(this.world, { delayMinMs: this.options.delayMinMs, delayMaxMs: this.options.delayMaxMs, lossProbability: 0, duplicateProbability: 0, ordered: this.options.orderedLinks })
  }

  private get w(): World {
    return this.world!
  }

  private server(name: string | undefined): Server {
    const server = this.servers.get(name ?? '')
    if (server === undefined) throw new Error(`no server ${name} (start it first)`)
    return server
  }

  private running(name: string | undefined): Server {
    const server = this.server(name)
    if (!server.running) throw new Error(`${server.name} is not running`)
    return server
  }

  private note(text: string): void {
    this.events.push(`${String(this.w.now).padStart(6)}ms ${text}`)
  }

  private async dispatch(command: string, args: string[]): Promise<string[]> {
    const background = args[args.length - 1] === '&'
    if (background) args = args.slice(0, -1)
    switch (command) {
      case 'start':
        return this.startCommand(args, background)
      case 'restart': {
        const server = this.server(args[0])
        if (server.process.up) {
          this.crash(server, false)
          this.note(`${server.name}: killed`)
        }
        return [await this.settle(() => this.start(server))]
      }
      case 'run':
        return this.runCommand(args)
      case 'write': {
        const server = this.running(args[0])
        const key = args[1]
        let value = args[2]
        const usage = 'write NAME KEY VALUE [--pad SIZE] [--cas N] [--ahead]'
        if (key === undefined || value === undefined) throw new Error(usage)
        let cas: number | undefined
        let ahead = false
        for (let n = 3; n < args.length; n += 2) {
          if (args[n] === '--pad') value = value.padEnd(parseSize(args[n + 1]), '.')
          else if (args[n] === '--cas' && /^\d+$/.test(args[n + 1] ?? '')) cas = Number(args[n + 1])
          else if (args[n] === '--ahead') {
            ahead = true
            n -= 1
          } else throw new Error(usage)
        }
        const cluster = server.cluster!
        const label = `${server.name}: write ${key}=${showValue(value)}${cas === undefined ? '' : ` cas ${cas}`}${ahead ? ' ahead' : ''}`
        const entry = { Kind: KIND, Name: key, Namespace: 'default', Value: value }
        return this.operation(label, background, async () => {
          const command = { v: COMMAND_VERSION, type: 'config.apply', entry, ...(cas === undefined ? {} : { cas }) } as const
          const { result, index } = await cluster.proposeIndexed(command, ahead ? { answerBeforeLocalApply: true } : {})
          const at = ahead ? ` (index ${index}, ${server.name} applied ${server.state!.lastApplied})` : ''
          // A compare-and-set that finds another index is no error: its value says whether it wrote (false: not).
          if (result.ok) return (cas === undefined ? 'ok' : `ok ${JSON.stringify(result.value)}`) + at
          return `refused ${JSON.stringify(result.error)}${at}`
        })
      }
      case 'policy': {
        const server = this.running(args[0])
        const name = args[1]
        if (name === undefined) throw new Error('policy NAME POLICY')
        const cluster = server.cluster!
        const policy = { ID: uuidOf(this.w.nextId()), Name: name, Description: '', Rules: '', Datacenters: [], Namespace: 'default' }
        return this.operation(`${server.name}: policy ${name}`, background, async () => {
          const { result, index } = await cluster.proposeIndexed({ v: COMMAND_VERSION, type: 'acl.policy.create', policy })
          return result.ok ? `ok (index ${index})` : `refused ${JSON.stringify(result.error)}`
        })
      }
      case 'read': {
        const server = this.running(args[0])
        const key = args[1]
        const mode = (args[2] ?? 'consistent') as 'consistent' | 'leader' | 'stale'
        if (key === undefined || !['consistent', 'leader', 'stale'].includes(mode)) throw new Error('read NAME KEY [consistent|leader|stale]')
        const cluster = server.cluster!
        const state = server.state!
        return this.operation(`${server.name}: read ${mode} ${key}`, background, async () => {
          await cluster.readBarrier(mode)
          const record = await getRecord(state.reader, configSpec, configEntryKey({ Kind: KIND, Namespace: 'default', Name: key }))
          return `${showValue((record as { Value?: unknown } | undefined)?.Value)} (applied ${state.lastApplied})`
        })
      }
      case 'remove': {
        const target = args[0]
        if (target === undefined) throw new Error('remove TARGET [via NAME]')
        let through: Server | undefined
        if (args[1] === 'via') through = this.running(args[2])
        else through = [...this.servers.values()].find((server) => server.running && server.replica!.isLeader())
        if (through === undefined) return ['no leader to remove through']
        const cluster = through.cluster!
        return this.operation(`${through.name}: remove ${target}`, background, async () => {
          await cluster.removeServer({ id: target })
          return 'ok'
        })
      }
      case 'kill':
      case 'power-loss': {
        const server = this.server(args[0])
        if (!server.process.up) return [`${server.name}: not running`]
        this.crash(server, command === 'power-loss')
        return [`${server.name}: ${command === 'kill' ? 'killed' : 'lost power'}`]
      }
      case 'wipe': {
        const server = this.server(args[0])
        if (server.process.up) this.crash(server, false)
        server.disk.wipe()
        return [`${server.name}: data dir deleted`]
      }
      case 'pause': {
        const server = this.server(args[0])
        this.w.pause(server.process, parseDuration(args[1]))
        return [`${server.name}: paused until ${this.w.now + parseDuration(args[1])}ms`]
      }
      case 'resume': {
        const server = this.server(args[0])
        this.w.resume(server.process)
        return [`${server.name}: resumed`]
      }
      case 'clock-jump': {
        const server = this.server(args[0])
        const sign = args[1]?.startsWith('-') === true ? -1 : 1
        server.process.wallOffsetMs += sign * parseDuration(args[1]?.replace(/^[-+]/, ''))
        return [`${server.name}: wall clock ${sign < 0 ? 'back' : 'forward'} by ${args[1]?.replace(/^[-+]/, '')}`]
      }
      case 'contact': {
        const server = this.running(args[0])
        return [`${server.name}: last contact ${server.cluster!.lastContactMs()}ms, leader ${server.replica!.leader ?? 'none'}`]
      }
      case 'cut':
      case 'heal': {
        const [a, b] = args
        const pairs: Array<[string, string]> = []
        const names = [...this.servers.keys()]
        if (a === undefined) {
          if (command === 'cut') throw new Error('cut A [B]')
          this.network!.cut.clear()
          return ['all links restored']
        }
        for (const other of b === undefined ? names.filter((name) => name !== a) : [b]) pairs.push([a, other])
        for (const [x, y] of pairs) {
          for (const link of [`${x}>${y}`, `${y}>${x}`]) {
            if (command === 'cut') this.network!.cut.add(link)
            else this.network!.cut.delete(link)
          }
        }
        return [`${command === 'cut' ? 'cut' : 'restored'} ${pairs.map(([x, y]) => `${x}-${y}`).join(' ')}`]
      }
      case 'status':
        return [...this.servers.values()].sort((x, y) => x.name.localeCompare(y.name)).map((server) => this.describe(server))
      case 'log':
        return this.logCommand(this.server(args[0]))
      case 'disk': {
        const server = this.server(args[0])
        return [`${server.name}: ${server.disk.names().join(' ') || '(empty)'}`]
      }
      case 'shipped': {
        const { counts } = this.running(args[0]).replica!
        return [`${args[0]}: applied ${counts.appliedShipped} commands from shipped writes, ran ${counts.appliedUnshipped}`]
      }
      case 'state': {
        const server = this.running(args[0])
        const records = await listRecords(server.state!.reader, configSpec)
        const values = records.map((record) => `${record.Name}=${showValue((record as unknown as { Value?: unknown }).Value)}`)
        return [`${server.name}: applied ${server.state!.lastApplied}${values.length > 0 ? ` ${values.join(' ')}` : ''}`]
      }
      default:
        throw new Error(`unknown command ${command}`)
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Running the world.

  /** One task of the world, then what it changed: roles, databases, failures. */
  private async step(): Promise<boolean> {
    const progressed = await this.w.step()
    this.observe()
    if (this.failure !== undefined) throw this.failure
    return progressed
  }

  /** Runs the world until `done()` or for `limitMs`; returns whether done() held. */
  private async runWhile(done: () => boolean, limitMs: number): Promise<boolean> {
    let timeUp = false
    const sentinel = this.w.schedule(limitMs, () => (timeUp = true))
    while (!done()) {
      if (timeUp) return false
      if (!(await this.step())) return done()
    }
    sentinel.cancelled = true
    return true
  }

  private async runCommand(args: string[]): Promise<string[]> {
    const began = this.w.now
    if (args[0] !== 'until') {
      const duration = parseDuration(args[0])
      await this.runWhile(() => false, duration)
      return []
    }
    const withinAt = args.indexOf('within')
    const limit = withinAt === -1 ? SETTLE_LIMIT_MS : parseDuration(args[withinAt + 1])
    const condition = this.condition(withinAt === -1 ? args.slice(1) : args.slice(1, withinAt))
    const reached = await this.runWhile(condition, limit)
    return [reached ? `reached after ${this.w.now - began}ms` : `not reached within ${limit}ms`]
  }

  private condition(words: string[]): () => boolean {
    const [first, second, third, fourth] = words
    const leaderOf = (): Server | undefined => [...this.servers.values()].find((server) => server.running && server.process.pausedUntil <= this.w.now && server.replica!.isLeader())
    if (first === 'settled') return () => [...this.operations].every((operation) => operation.done)
    if (first === 'leader') return () => (second === undefined ? leaderOf() !== undefined : leaderOf()?.name === second)
    const server = this.server(first)
    if (second === 'voter' || second === 'learner') {
      return () => {
        const configuration = leaderOf()?.replica!.status().configuration
        return (second === 'voter' ? configuration?.voters : configuration?.learners)?.includes(server.name) === true
      }
    }
    if (second === 'joined') {
      return () => {
        const voteFrom = server.storage?.membershipRecord()?.voteFromIndex
        return server.running && voteFrom !== undefined && voteFrom !== VOTE_INDEX_UNKNOWN
      }
    }
    if (second === 'disk' && (third === 'has' || third === 'lacks') && fourth !== undefined) {
      return () => server.disk.names().includes(fourth) === (third === 'has')
    }
    const match = /^(stored|commit|applied)>=(\d+)$/.exec(second ?? '')
    if (match !== null) {
      const bound = Number(match[2])
      return () => {
        if (!server.running) return false
        const value = match[1] === 'stored' ? server.storage!.lastIndex() : match[1] === 'commit' ? server.replica!.status().commitIndex : server.state!.lastApplied
        return value >= bound
      }
    }
    throw new Error(`unknown condition: ${words.join(' ')}`)
  }

  /** Starts an operation; waits for its outcome (printed after the events on the way), or lets it run (`background`). */
  private async operation(label: string, background: boolean, run: () => Promise<string>): Promise<string[]> {
    const began = this.w.now
    const operation: PendingOperation = { label, done: false, outcome: '' }
    this.operations.add(operation)
    const finish = (outcome: string): void => {
      operation.done = true
      operation.outcome = outcome
      this.operations.delete(operation)
      if (background) this.note(`${label} -> ${outcome} (after ${this.w.now - began}ms)`)
    }
    run().then(finish, (error: unknown) => finish(showError(error)))
    if (background) return [`${label}: started`]
    if (!(await this.runWhile(() => operation.done, SETTLE_LIMIT_MS))) return [`${label}: no outcome within ${SETTLE_LIMIT_MS}ms`]
    return [`${label} -> ${operation.outcome} (after ${this.w.now - began}ms)`]
  }

  /**
   * Runs `action` as a task of the world, and the world until it settles; in the `background`, only schedules it (its
   * outcome is printed when it comes), so that servers started one after the other start at the same moment.
   */
  private async settle(action: () => Promise<string>, background = false): Promise<string> {
    let outcome: string | undefined
    this.w.schedule(0, () => {
      action().then(
        (text) => {
          outcome = text
          if (background) this.note(text)
        },
        (error: unknown) => (outcome = showError(error)),
      )
    })
    if (background) return 'starting'
    if (!(await this.runWhile(() => outcome !== undefined, SETTLE_LIMIT_MS))) throw new Error('did not settle')
    return outcome!
  }

  /** What changed since the last look: roles and terms of running servers, databases in data dirs. */
  private observe(): void {
    if (this.world === undefined) return
    for (const server of [...this.servers.values()].sort((x, y) => x.name.localeCompare(y.name))) {
      const names = server.disk.names()
      if (names.join(' ') !== server.shownDisk.join(' ')) {
        const added = names.filter((name) => !server.shownDisk.includes(name)).map((name) => `+${name}`)
        const removed = server.shownDisk.filter((name) => !names.includes(name)).map((name) => `-${name}`)
        this.note(`${server.name}: disk ${[...added, ...removed].join(' ')}`)
        server.shownDisk = names
      }
      if (!server.running) continue
      const status = server.replica!.status()
      const role = status.role === 'leader' ? `leader term ${status.term}` : `${status.role} term ${status.term}${status.leader === null ? '' : ` (leader ${status.leader})`}`
      if (role !== server.shownRole) {
        server.shownRole = role
        this.note(`${server.name}: ${role}`)
      }
      if (status.role === 'leader') {
        const known = this.leaders.get(status.term)
        if (known !== undefined && known !== server.name) this.failure ??= new Error(`election safety: ${known} and ${server.name} both lead term ${status.term}`)
        this.leaders.set(status.term, server.name)
      }
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Servers.

  private async startCommand(args: string[], background: boolean): Promise<string[]> {
    const name = args[0]
    if (name === undefined || !/^n\d+$/.test(name)) throw new Error('start NAME [--peer A,B] [--join [A,B]] [--election D] [--snapshot-threshold N]')
    if (this.servers.has(name)) throw new Error(`${name} was started before: use restart`)
    const server = new Server(name, this.w, this.options.diskLatencyMaxMs)
    for (let i = 1; i < args.length; i += 1) {
      const flag = args[i]
      if (flag === '--peer') server.peers = (args[++i] ?? '').split(',').filter((peer) => peer !== '')
      else if (flag === '--join') {
        server.joining = true
        if (args[i + 1] !== undefined && !args[i + 1]!.startsWith('--')) server.joinThrough = args[++i]!.split(',')
      } else if (flag === '--election') server.electionTimeoutMs = parseDuration(args[++i])
      else if (flag === '--snapshot-threshold') server.snapshotThreshold = Number(args[++i])
      else throw new Error(`unknown flag ${flag}`)
    }
    this.servers.set(name, server)
    const outcome = await this.settle(() => this.start(server), background)
    return [background ? `${name}: starting` : outcome]
  }

  /** What the agent does at start, over the simulated disk and links (as driver-simulation.ts does). */
  private async start(server: Server): Promise<string> {
    const process = server.process
    process.epoch += 1
    process.up = true
    process.pausedUntil = 0
    process.held = []
    // The links first: a peer's request while this server opens its disk is refused at once (no handler yet), as a
    // connection to a port nobody listens on yet is, instead of going unanswered until it times out.
    const links = this.network!.links(process)
    const storage = await LevelRaftStorage.openDb((await server.disk.openDb('raft')) as unknown as RaftDb)
    const flags = { nodeName: server.name, peerNames: server.peers, joining: server.joining, incarnation: this.w.nextId() }
    const epoch = process.epoch
    const opened = await openNode({
      storage,
      files: server.disk.stateFiles(),
      flags,
      links,
      dialAddresses: new Map([server.name, ...server.peers].map((name) => [name, `sim:${name}`])),
      clusterKey: undefined,
      settings: {
        environment: this.w.environment(process),
        log: this.logger(server, epoch),
        onFatal: (error) => {
          if (process.epoch === epoch && process.up) this.failure ??= new Error(`${server.name} failed: ${error instanceof Error ? error.stack : String(error)}`)
        },
        heartbeatIntervalMs: this.options.heartbeatIntervalMs,
        electionTimeoutMs: server.electionTimeoutMs ?? this.options.electionTimeoutMs,
        snapshotThreshold: server.snapshotThreshold ?? this.options.snapshotThreshold,
        ...(this.options.leaderWaitMs === undefined ? {} : { leaderWaitMs: this.options.leaderWaitMs }),
        ...(this.options.applyWaitMs === undefined ? {} : { applyWaitMs: this.options.applyWaitMs }),
      },
    })
    if (!opened.ok) {
      await storage.close()
      process.up = false
      return `${server.name}: refused: ${opened.problem}`
    }
    const { state, replica, cluster } = opened
    Object.assign(server, { replica, cluster, storage, state, links })
    await replica.start()
    if (opened.next === 'join') void this.joinLoop(server, epoch)
    const record = storage.membershipRecord()
    return `${server.name}: started (${opened.next}) voters ${showList(record?.voters ?? [])} voteFrom ${showVoteFrom(record)}`
  }

  /** What --join does, over the simulated links: ask a member (in turn) to add this server until one answers. */
  private async joinLoop(server: Server, epoch: number): Promise<void> {
    const replica = server.replica!
    const alive = (): boolean => server.process.epoch === epoch && server.process.up
    for (let attempt = 0; alive(); attempt += 1) {
      const members = server.joinThrough.length > 0 ? server.joinThrough : [...this.servers.keys()].filter((name) => name !== server.name).sort()
      const through = members[attempt % members.length]
      if (through !== undefined) {
        try {
          replica.membershipChanges.learnAddresses({ [through]: `sim:${through}` })
          // Its own member entry, applied, may have told it already (the answer to an earlier attempt was lost).
          if (!replica.membershipChanges.awaitingJoin()) return
          const incarnation = replica.membershipChanges.incarnation
          const join = { kind: 'join', node: server.name, address: `sim:${server.name}`, ...(incarnation === undefined ? {} : { incarnation }) }
          const answer = (await server.links!.request(through, join, 4_000)) as { members?: Record<string, string>; voteFromIndex?: number }
          // The world delivers an answer to a request of a dead incarnation to its successor; a dead process hears nothing.
          if (!alive()) return
          if (typeof answer.voteFromIndex !== 'number') throw new Error('no index in the join answer')
          if (answer.members !== undefined) replica.membershipChanges.learnAddresses(answer.members)
          await replica.membershipChanges.recordVoteFrom(answer.voteFromIndex)
          this.note(`${server.name}: join answered by ${through}: voteFrom ${answer.voteFromIndex} (its record: ${showVoteFrom(server.storage!.membershipRecord())})`)
          return
        } catch (error) {
          if (alive()) this.note(`${server.name}: join through ${through} failed: ${showError(error)}`)
        }
      }
      await replica.pause(200)
    }
  }

  private logger(server: Server, epoch: number): Logger {
    const stream = {
      write: (line: string): void => {
        // A dead incarnation's code may still run (an answer it waited for came in); a real dead process logs nothing.
        if (server.process.epoch !== epoch || !server.process.up) return
        const text = formatLog(line)
        if (text !== undefined) this.note(`${server.name}: ${text}`)
      },
    }
    return pino({ level: this.options.logLevel, base: null, timestamp: false }, stream)
  }

  private crash(server: Server, power: boolean): void {
    server.process.up = false
    server.process.epoch += 1
    server.disk.crash(power)
    server.shownRole = ''
    Object.assign(server, { replica: undefined, cluster: undefined, storage: undefined, state: undefined, links: undefined })
  }

  private describe(server: Server): string {
    if (!server.running) return `${server.name}: down`
    const status = server.replica!.status()
    const paused = server.process.pausedUntil > this.w.now ? ' (paused)' : ''
    return (
      `${server.name}: ${status.role} term ${status.term} leader ${status.leader ?? '-'} commit ${status.commitIndex} applied ${server.state!.lastApplied} ` +
      `last ${status.lastIndex} voters ${showList(status.configuration.voters)} learners ${showList(status.configuration.learners)} ` +
      `voteFrom ${showVoteFrom(server.storage!.membershipRecord())}${paused}`
    )
  }

  private async logCommand(server: Server): Promise<string[]> {
    let storage = server.storage
    let opened = false
    if (storage === undefined) {
      if (!server.disk.names().includes('raft')) return [`${server.name}: (no Raft log)`]
      storage = await LevelRaftStorage.openDb((await server.disk.openDb('raft')) as unknown as RaftDb)
      opened = true
    }
    try {
      const hard = storage.hardState()
      const snapshot = storage.snapshot()
      const head =
        `${server.name}: term ${hard.term} vote ${hard.votedFor ?? '-'} first ${storage.firstIndex()} last ${storage.lastIndex()}` +
        ` snapshot ${snapshot === null ? '-' : `${snapshot.index}/${snapshot.term}`}${opened ? ' (read from its disk)' : ''}`
      const entries = storage.lastIndex() >= storage.firstIndex() ? storage.entries(storage.firstIndex(), storage.lastIndex() + 1) : []
      return [head, ...entries.map((entry) => `  ${describeEntry(entry)}`)]
    } finally {
      if (opened) await storage.close()
    }
  }
}

/** A UUID made from one of the world's ids, so that a script's records are the same in every run. */
function uuidOf(id: string): string {
  let hex = ''
  for (const char of id) hex += char.charCodeAt(0).toString(16).padStart(2, '0')
  hex = hex.padStart(32, '0').slice(-32)
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20)}`
}
