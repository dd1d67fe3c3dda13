/**
 * `warden recover`: the offline, one-shot way back for a cluster that lost a majority of its servers for good (two
 * data dirs of three wiped, machines gone), after hashicorp/raft's RecoverCluster (Consul's `peers.json`) and etcd's
 * `--force-new-cluster`. Run on a survivor's data dir while its agent is stopped, it makes that server a cluster of
 * one that holds everything the survivor held:
 *
 * 1. finish (or discard) a snapshot switch a crash interrupted, exactly as the agent does at start;
 * 2. apply to the state every entry of the log after the state's applied index, committed or not (no server is left
 *    to say which were), and sync the state;
 * 3. in one synced Raft write: a snapshot at that index carrying the configuration `{ voters: [this node] }`, which
 *    replaces the whole log, and a hard state with no vote and everything committed;
 * 4. keep the membership record's founding voters (founding.ts compares the --peer flags against them, so the node
 *    restarts with its usual flags) but let the node vote and campaign at once (`voteFromIndex: 0`).
 *
 * The agent started afterwards leads alone. The other servers come back with empty data dirs: with their original
 * --peer flags they find the cluster exists and rejoin as non-voters until caught up (membership.ts), or with --join.
 *
 * Steps 2 to 4 are each durable before the next begins and each can be run again, so a crash part-way leaves a data
 * dir that running recover again completes. The state is synced before the snapshot that claims it is written.
 */
import { pathExists } from '../lib/files.js'
import { NODE_NAME_PATTERN } from '../lib/ids.js'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline/promises'
import { parseArgs } from 'node:util'
import { decodeConfiguration, type Configuration, type HardState } from '../raft/index.js'
import { LevelRaftStorage } from '../raft/storage/level-storage.js'
import type { MembershipRecord } from '../raft/storage/raft-storage.js'
import { holdsRaftState } from '../replica/founding.js'
import { directoryFiles } from '../state/files.js'
import { finishStateSwitch } from '../state/snapshot.js'
import { StateStore, UnknownCommandError } from '../state/store.js'

/** A reason not to touch the data dir; the command exits 1 with its message as one line. */
export class RecoveryRefused extends Error {
  override readonly name = 'RecoveryRefused'
}

/** What the survivor holds, shown in the warning before anything changes. */
export interface RecoverySummary {
  nodeName: string
  hardState: HardState
  /** The log's first and last index (first - 1 is the snapshot's index when the log was compacted). */
  firstIndex: number
  lastIndex: number
  /** The latest configuration in the log (or its snapshot, or the founding voters). */
  configuration: Configuration
  membership: MembershipRecord | null
}

export interface RecoveryResult {
  /** The index and term of the snapshot the node now starts from. */
  index: number
  term: number
  /** Entries the state applied during recovery (the log's tail it had not applied yet). */
  appliedNow: number
}


/** A LevelDB that a running agent holds fails to open with LEVEL_LOCKED as the cause (classic-level's binding). */
function isLocked(error: unknown): boolean {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause
  return cause?.code === 'LEVEL_LOCKED'
}

function inUse(dataDir: string): RecoveryRefused {
  return new RecoveryRefused(`${dataDir} is in use (its LevelDB is locked): stop the agent on this data dir first, then run recover again`)
}

/** The configuration in force at the end of the log: its last configuration entry, else the snapshot's, else the founders. */
function latestConfiguration(storage: LevelRaftStorage): Configuration {
  const first = storage.firstIndex()
  const last = storage.lastIndex()
  for (let hi = last + 1; hi > first; hi -= 1024) {
    const lo = Math.max(first, hi - 1024)
    const entries = storage.entries(lo, hi)
    for (let n = entries.length - 1; n >= 0; n -= 1) {
      const entry = entries[n]!
      if (entry.type === 'configuration') return decodeConfiguration(entry.data)
    }
  }
  const snapshot = storage.snapshot()
  if (snapshot !== null) return snapshot.configuration
  return { voters: [...(storage.membershipRecord()?.voters ?? [])].sort(), learners: [] }
}

/**
 * A survivor's data dir opened for recovery: the Raft storage is open (so LevelDB's lock keeps an agent from starting
 * on it meanwhile) and checked, nothing is changed yet. `recover()` rewrites it; `close()` releases it either way.
 */
export class PendingRecovery {
  private closed = false

  private constructor(
    readonly dataDir: string,
    private readonly storage: LevelRaftStorage,
    readonly summary: RecoverySummary,
  ) {}

  /** Opens and checks `dataDir`; throws RecoveryRefused when it holds no Raft state, is in use or is not this node's. */
  static async open(dataDir: string, nodeName: string): Promise<PendingRecovery> {
    const raftDir = join(dataDir, 'raft')
    if (!(await pathExists(raftDir))) {
      // A single server of a release before one Raft path keeps its log in log/; the agent upgrades it at start, and a
      // single server has no majority to lose.
      if (await pathExists(join(dataDir, 'log'))) {
        throw new RecoveryRefused(`${dataDir} is a single server's data dir of an earlier release (log/, no raft/): it needs no recovery; start the agent on it`)
      }
      throw new RecoveryRefused(`${dataDir} holds no Raft state (no ${raftDir}): nothing to recover from`)
    }
    let storage: LevelRaftStorage
    try {
      storage = await LevelRaftStorage.open(raftDir)
    } catch (error) {
      if (isLocked(error)) throw inUse(dataDir)
      const cause = (error as { cause?: Error }).cause
      throw new RecoveryRefused(`cannot open the Raft storage in ${raftDir}: ${(cause ?? (error as Error)).message}`)
    }
    try {
      if (!holdsRaftState(storage)) throw new RecoveryRefused(`${dataDir} holds no Raft state (no term, entry or snapshot): nothing to recover from`)
      const configuration = latestConfiguration(storage)
      const members = [...configuration.voters, ...configuration.learners]
      if (!members.includes(nodeName)) {
        // A wrong name would make a configuration the agent is not part of: it would never lead. The agent's own name
        // defaults to the host name, as this command's does, so a name given to the agent only must be given here too.
        throw new RecoveryRefused(
          `${nodeName} is not a member of the cluster this data dir last knew (${members.join(', ') || 'no members'}): pass the --node-name the agent runs with`,
        )
      }
      const summary: RecoverySummary = {
        nodeName,
        hardState: storage.hardState(),
        firstIndex: storage.firstIndex(),
        lastIndex: storage.lastIndex(),
        configuration,
        membership: storage.membershipRecord(),
      }
      return new PendingRecovery(dataDir, storage, summary)
    } catch (error) {
      await storage.close()
      throw error
    }
  }

  /** Rewrites the data dir (see the file's comment). An UnknownCommandError leaves the Raft storage untouched. */
  async recover(): Promise<RecoveryResult> {
    const { storage, summary } = this
    const files = directoryFiles(join(this.dataDir, 'state'))
    // What the agent does before it opens the state: a staged snapshot the log depends on goes in, any other goes.
    try {
      await finishStateSwitch(files, storage.snapshot()?.index ?? 0)
    } catch (error) {
      if (isLocked(error)) throw inUse(this.dataDir)
      throw error
    }
    if (!(await files.exists('live')) && (storage.snapshot()?.index ?? 0) > 0) {
      // Opening would create an empty state, which the log's snapshot says is wrong.
      throw new RecoveryRefused(`${this.dataDir} has no state (state/ is missing) but its log starts from a snapshot: this data dir cannot be recovered`)
    }
    let state: StateStore
    try {
      state = await StateStore.openFiles(files)
    } catch (error) {
      if (isLocked(error)) throw inUse(this.dataDir)
      throw error
    }
    try {
      const applied = state.lastApplied
      const first = storage.firstIndex()
      const last = storage.lastIndex()
      if (applied < first - 1) {
        throw new RecoveryRefused(
          `the state in ${this.dataDir} has applied up to index ${applied}, but the log starts after ${first - 1}: the entries between are gone, so this data dir cannot be recovered`,
        )
      }
      if (applied > last) {
        throw new RecoveryRefused(`the state in ${this.dataDir} has applied up to index ${applied}, beyond the log's last index ${last}: this data dir is inconsistent`)
      }
      // Everything the survivor holds counts now, committed or not (hashicorp/raft's RecoverCluster does the same): no
      // other server is left to say which entries were committed. Raft's own entries only advance the applied index.
      await state.applyEntries(storage.entries(applied + 1, last + 1))
      await state.sync()
      const index = state.lastApplied
      // term(0) is 0 in every log: a snapshot claiming another term at index 0 would fail the log-matching check of
      // the first append to every new follower. Elsewhere the storage knows the term (an entry, or the compacted one).
      const term = index === 0 ? 0 : (storage.term(index) ?? summary.hardState.term)
      const configuration: Configuration = { voters: [summary.nodeName], learners: [] }
      // One synced batch. A snapshot given to persist replaces the whole log (as one received from a leader does), so
      // this is also the compaction: no entry is left, and no configuration entry to override the snapshot's. The
      // vote belonged to the old cluster's elections and is forgotten.
      await storage.persist(
        {
          entries: [],
          snapshot: { index, term, configuration },
          hardState: { term: Math.max(summary.hardState.term, term), votedFor: null, commitIndex: index },
        },
        true,
      )
      // A data dir written before the record existed keeps none: the agent then records its flags' founders, voting.
      const record = storage.membershipRecord()
      if (record !== null) await storage.saveMembershipRecord({ ...record, voteFromIndex: 0 })
      return { index, term, appliedNow: index - applied }
    } finally {
      await state.close()
    }
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.storage.close()
  }
}

/** Opens, checks and rewrites `dataDir` without asking (the command asks first; tests call this). */
export async function recoverDataDir(dataDir: string, nodeName: string): Promise<RecoveryResult> {
  const pending = await PendingRecovery.open(dataDir, nodeName)
  try {
    return await pending.recover()
  } finally {
    await pending.close()
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// The command.

export const RECOVER_USAGE = 'usage: warden recover --data-dir DIR [--node-name NAME] [--yes]'

/** Exit codes, as the agent's: 0 done, 1 refused or failed, 2 usage or not confirmed, 3 a command this build cannot apply. */
const EXIT_REFUSED = 1
const EXIT_USAGE = 2
const EXIT_UNKNOWN_COMMAND = 3

export interface RecoverIo {
  /** One line to stdout (the result). */
  out(line: string): void
  /** Text to stderr (the warning, problems). */
  err(text: string): void
  /** Asks a question on the terminal and returns the answer; undefined when there is no terminal to ask on. */
  ask: ((question: string) => Promise<string>) | undefined
}

/** The process's own streams; it asks only when stdin is a terminal, so a script without --yes never hangs. */
export function processIo(): RecoverIo {
  return {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (text) => process.stderr.write(text),
    ask: process.stdin.isTTY
      ? async (question) => {
          const terminal = createInterface({ input: process.stdin, output: process.stderr })
          try {
            return await terminal.question(question)
          } finally {
            terminal.close()
          }
        }
      : undefined,
  }
}

function list(names: readonly string[]): string {
  return names.length === 0 ? 'none' : names.join(', ')
}

/** The warning, naming what is at stake with this data dir's own numbers. */
function warning(dataDir: string, summary: RecoverySummary): string {
  const { nodeName, hardState, lastIndex, firstIndex, configuration } = summary
  const others = [...configuration.voters, ...configuration.learners].filter((name) => name !== nodeName)
  const committed = Math.max(hardState.commitIndex, firstIndex - 1)
  const bar = '!'.repeat(100)
  return [
    bar,
    `WARNING: warden recover rewrites ${dataDir} so that ${nodeName} forms a NEW cluster of one, on its own.`,
    '',
    `  This node holds the log up to index ${lastIndex} (term ${hardState.term}); it last knew index ${committed} to be committed.`,
    `  Its cluster was: voters ${list(configuration.voters)}; non-voters ${list(configuration.learners)}.`,
    '',
    '  - Writes the lost servers acknowledged (to clients, as committed) that this node never received are LOST for',
    '    good: a majority could commit without this node.',
    `  - Entries this node holds but the cluster may never have committed (after index ${committed}: writes whose clients`,
    '    saw an error or a timeout) become committed.',
    `  - ${list(others)} leave the cluster. Use this only if a majority is gone for good. A server that comes back with`,
    '    its old data could elect a leader of the old cluster with another one: two clusters, diverging. Wipe their',
    '    data dirs before starting them again.',
    '  - Keep a copy of this data dir (cp -a, now, while the agent is stopped) if you may want to undo this.',
    bar,
    '',
  ].join('\n')
}

/** `warden recover [flags]`; returns the exit code. */
export async function runRecover(argv: readonly string[], io: RecoverIo): Promise<number> {
  let values: { 'data-dir'?: string | undefined; 'node-name'?: string | undefined; yes?: boolean | undefined; help?: boolean | undefined }
  try {
    values = parseArgs({
      args: [...argv],
      options: {
        'data-dir': { type: 'string' },
        'node-name': { type: 'string' },
        yes: { type: 'boolean', short: 'y' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }).values
  } catch (error) {
    io.err(`warden recover: ${(error as Error).message}\n${RECOVER_USAGE}\n`)
    return EXIT_USAGE
  }
  if (values.help === true) {
    io.out(RECOVER_USAGE)
    return 0
  }
  const dataDir = values['data-dir']
  if (dataDir === undefined || dataDir === '') {
    io.err(`warden recover: --data-dir is required\n${RECOVER_USAGE}\n`)
    return EXIT_USAGE
  }
  const nodeName = values['node-name'] ?? hostname()
  if (!NODE_NAME_PATTERN.test(nodeName)) {
    io.err(`warden recover: --node-name: "${nodeName}" must be letters, digits, ".", "-" or "_"\n`)
    return EXIT_USAGE
  }
  let pending: PendingRecovery
  try {
    pending = await PendingRecovery.open(dataDir, nodeName)
  } catch (error) {
    if (error instanceof RecoveryRefused) {
      io.err(`warden recover: ${error.message}\n`)
      return EXIT_REFUSED
    }
    throw error
  }
  try {
    io.err(warning(dataDir, pending.summary))
    if (values.yes !== true) {
      const answer = io.ask === undefined ? undefined : await io.ask(`Rewrite ${dataDir} so that ${nodeName} forms a cluster of one? Type y to proceed: `)
      if (answer === undefined || !/^y(es)?$/i.test(answer.trim())) {
        io.err(`warden recover: not confirmed${io.ask === undefined ? ' (pass --yes)' : ''}; nothing was changed\n`)
        return EXIT_USAGE
      }
    }
    const result = await pending.recover()
    io.out(
      `warden recover: ${nodeName} now forms a cluster of one (from a snapshot at index ${result.index}, term ${result.term}; ` +
        `${result.appliedNow} entries applied now). Start it with its usual flags; once it leads, bring each other server ` +
        'back with an empty data dir, either with its original --peer flags (it finds the cluster, rejoins as a non-voter and becomes ' +
        `a voter once caught up) or with --join <${nodeName}'s HTTP address>.`,
    )
    return 0
  } catch (error) {
    if (error instanceof RecoveryRefused) {
      io.err(`warden recover: ${error.message}\n`)
      return EXIT_REFUSED
    }
    if (error instanceof UnknownCommandError) {
      // Entries before it were applied to the state; the Raft storage is untouched, so recover can run again.
      io.err(`warden recover: ${error.message}\n`)
      return EXIT_UNKNOWN_COMMAND
    }
    throw error
  } finally {
    await pending.close()
  }
}
