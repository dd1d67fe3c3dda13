/**
 * A crash between commands: a real child process opens a data dir with the stores the agent uses (the Raft log in
 * LevelRaftStorage at `<data-dir>/raft`, the StateStore at `<data-dir>/state`), runs on them the one-voter Raft group a
 * server without peers is (RaftReplica), proposes commands in concurrent batches, and is SIGKILLed at a random moment.
 * The test then reopens the data dir and starts the node again: once it leads it commits its own log and applies what
 * the state had not applied. The recovered state is compared with a reference built by applying the log's entries one
 * by one, from the first, to a fresh StateStore: the LevelDB contents must be byte-identical, lastApplied must equal the
 * log's lastIndex, every acknowledged write and every entry logged before the restart must still be in the log, the
 * index entries must describe exactly the records, and each record's CreateIndex must point at the log entry that
 * created it (so nothing was applied twice). Several kill/restart rounds run on one data dir, so records of earlier
 * rounds get updated and deleted by later ones; the rounds stay far below the snapshot threshold, so the log is never
 * compacted and the reference can start at index 1 (asserted). A last group puts a command entry this build cannot
 * decode into the Raft log and checks that applying it stops the node with UnknownCommandError and a message naming the
 * index and version, leaving the state as it was; and that a malformed entry, which no build could apply, is applied
 * as a no-op instead.
 */
import { expect } from 'chai'
import { spawn, type ChildProcess } from 'node:child_process'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { LevelRaftStorage } from '../../../src/raft/storage/level-storage.js'
import type { Entry as RaftEntry } from '../../../src/raft/types.js'
import type { RaftReplica } from '../../../src/replica/raft-replica.js'
import type { ClusterNode } from '../../../src/rpc/cluster-node.js'
import { ANONYMOUS_TOKEN_ID, GLOBAL_MANAGEMENT_POLICY_ID } from '../../../src/state/builtins.js'
import { encode } from '../../../src/state/codec.js'
import { COMMAND_VERSION, type Command, type LinkInput, type TokenCreate } from '../../../src/state/commands.js'
import { TABLES } from '../../../src/state/keys.js'
import type { AclAuthMethod, AclPolicy, AclRole, AclToken } from '../../../src/state/records.js'
import { decodeCommand, encodeCommand, StateStore, UnknownCommandError } from '../../../src/state/store.js'
import { authMethodSpec, getRecord, listRecords, memberSpec, policySpec, roleSpec, tokenSpec } from '../../../src/state/tables.js'
import { buildTokenCreate, createSingleNode, dump, expectSameContents, indexProblems, openStores, startSingleNode, type Entry } from '../../support/state.js'
import { useTempDirs, type TempDirs } from '../../support/temp-dir.js'

const ROOT = resolve(import.meta.dirname, '../../..')
const ROUNDS = 4
const READY_TIMEOUT_MS = 15_000
/** The node's name in every round, the child's and the parent's: the one voter its membership record names. */
const NODE = 'crash-node'

/** Set in the child's environment: this file then runs `runChild` instead of registering tests. */
const CHILD_ENV = 'WARDEN_CRASH_TEST_CHILD'
const THIS_FILE = fileURLToPath(import.meta.url)
const CHILD_NOW = '2024-05-01T12:00:00Z'

/**
 * The child: starts the single node on the data dir (which recovers it), writes the built-ins if the state has none,
 * then proposes random batches of commands until it is killed, printing `acked <lastApplied>` after each batch
 * resolves. IDs embed the round number, so rounds on one data dir never collide; records of earlier rounds are read
 * back from the state, and updated or deleted too. It is typed code in this file (not a string) so that it follows the
 * stores' signatures as they change.
 */
async function runChild(dataDir: string, round: number, seed: number): Promise<never> {
  let state32 = seed >>> 0
  const random = (n: number): number => {
    state32 = (Math.imul(state32, 1_103_515_245) + 12_345) >>> 0
    return (state32 >>> 8) % n
  }
  const pick = <T>(list: readonly T[]): T | undefined => (list.length === 0 ? undefined : list[random(list.length)])
  let counter = 0
  const uuid = (kind: string): string => `${kind}-${round.toString(16).padStart(4, '0')}-4000-8000-${(++counter).toString(16).padStart(12, '0')}`

  const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
  const state = await StateStore.open(join(dataDir, 'state'))
  const { cluster } = await startSingleNode(NODE, storage, state, (error) => {
    process.stderr.write(`fatal: ${error instanceof Error ? error.stack : String(error)}\n`)
    process.exit(3)
  })
  // Leading means it applied its whole log and its own first entry: what the last round logged is recovered.
  const recovered = state.lastApplied
  const v = COMMAND_VERSION
  const tokenFields = (extra: Partial<TokenCreate>): TokenCreate =>
    buildTokenCreate({ AccessorID: uuid('aaaaaaaa'), SecretID: uuid('55555555'), Description: `round ${round}`, CreateTime: CHILD_NOW, ...extra })
  if ((await getRecord(state.reader, policySpec, GLOBAL_MANAGEMENT_POLICY_ID)) === undefined) await cluster.propose({ v, type: 'acl.init', bootstrapToken: tokenFields({ Description: 'bootstrap' }) })

  const tokens = (await listRecords<AclToken>(state.reader, tokenSpec)).map((token) => token.AccessorID).filter((id) => id !== ANONYMOUS_TOKEN_ID)
  const policies = (await listRecords<AclPolicy>(state.reader, policySpec)).map((policy) => ({ ID: policy.ID, Name: policy.Name }))
  const roles = (await listRecords<AclRole>(state.reader, roleSpec)).map((role) => role.ID)
  const methods = (await listRecords<AclAuthMethod>(state.reader, authMethodSpec)).map((method) => method.Name)
  process.stdout.write(`ready ${recovered}\n`)

  const someLinks = (): LinkInput[] => {
    const policy = pick(policies)
    if (policy === undefined) return []
    return [random(2) === 0 ? { ID: policy.ID } : { Name: policy.Name }]
  }
  const policyFields = { Description: '', Rules: 'acl = "read"', Datacenters: [], Namespace: 'default' }
  const next = (): Command => {
    switch (random(17)) {
      case 0:
      case 1: {
        const policy = { ID: uuid('bbbbbbbb'), Name: `p-${round}-${counter}` }
        policies.push(policy)
        return { v, type: 'acl.policy.create', policy: { ...policy, ...policyFields } }
      }
      case 2: {
        const policy = pick(policies)
        if (policy === undefined || policy.ID === GLOBAL_MANAGEMENT_POLICY_ID) return { v, type: 'noop' }
        policy.Name = `${policy.Name}r`
        return { v, type: 'acl.policy.update', policy: { ...policy, ...policyFields, Description: 'renamed', Rules: 'acl = "write"' } }
      }
      case 3:
        return { v, type: 'acl.policy.delete', ID: pick(policies)?.ID ?? uuid('bbbbbbbb') }
      case 4: {
        const ID = uuid('cccccccc')
        roles.push(ID)
        const role = { ID, Name: `r-${round}-${counter}`, Description: '', Policies: someLinks(), TemplatedPolicies: [], ServiceIdentities: [], NodeIdentities: [], Namespace: 'default' }
        return { v, type: 'acl.role.create', role }
      }
      case 5:
      case 6:
      case 7: {
        const roleID = pick(roles)
        const expiry = random(4) === 0 ? { ExpirationTime: random(2) === 0 ? '2000-01-01T00:00:00Z' : '2100-01-01T00:00:00Z' } : {}
        const token = tokenFields({ Policies: someLinks(), Roles: roleID === undefined || random(2) === 0 ? [] : [{ ID: roleID }], ServiceIdentities: [{ ServiceName: `svc${random(4)}` }], ...expiry })
        tokens.push(token.AccessorID)
        return { v, type: 'acl.token.create', token }
      }
      case 8: {
        const token = { AccessorID: pick(tokens) ?? uuid('aaaaaaaa'), Description: `updated in round ${round}`, Policies: someLinks(), Roles: [], TemplatedPolicies: [], ServiceIdentities: [{ ServiceName: 'updated' }], NodeIdentities: [], Local: false, Namespace: 'default' }
        return { v, type: 'acl.token.update', token }
      }
      case 9: {
        const { AccessorID, SecretID } = tokenFields({})
        const sourceAccessorID = pick(tokens) ?? ''
        tokens.push(AccessorID)
        return { v, type: 'acl.token.clone', sourceAccessorID, token: { AccessorID, SecretID, Description: 'clone', CreateTime: CHILD_NOW, Namespace: 'default' } }
      }
      case 10:
        return { v, type: 'acl.token.delete', AccessorID: pick(tokens) ?? uuid('aaaaaaaa') }
      case 11: {
        const Name = `m-${round}-${counter}`
        methods.push(Name)
        const method = { Name, Type: 'jwt', DisplayName: '', Description: '', MaxTokenTTLMs: 60_000, TokenLocality: '', Config: { JWTValidationPubKeys: ['k'] }, NamespaceRules: [], Namespace: 'default' }
        return { v, type: 'acl.auth-method.create', method }
      }
      case 12: {
        const rule = { ID: uuid('dddddddd'), Description: '', AuthMethod: pick(methods) ?? 'none', Selector: '', BindType: 'service' as const, BindName: 'web', Namespace: 'default' }
        return { v, type: 'acl.binding-rule.create', rule }
      }
      case 13: {
        const method = pick(methods)
        if (method === undefined) return { v, type: 'noop' }
        const token = tokenFields({ AuthMethod: method, Local: true, ExpirationTime: '2100-01-01T00:00:00Z' })
        tokens.push(token.AccessorID)
        return { v, type: 'acl.token.create', token }
      }
      case 14:
        return random(3) === 0
          ? { v, type: 'acl.auth-method.delete', Namespace: 'default', Name: pick(methods) ?? 'none' }
          : { v, type: 'acl.token.delete-expired', AccessorIDs: [pick(tokens) ?? '', pick(tokens) ?? ''], now: CHILD_NOW }
      case 15:
        return { v, type: 'config.apply', entry: { Kind: 'service-defaults', Name: `svc${random(5)}`, Namespace: 'default', Protocol: pick(['http', 'grpc', 'tcp']) } }
      default:
        return { v, type: 'config.delete', Kind: 'service-defaults', Name: `svc${random(5)}`, Namespace: 'default' }
    }
  }

  for (;;) {
    const batch = Array.from({ length: 1 + random(8) }, next)
    // Proposed in one tick, so that they share group commits; awaited together.
    await Promise.all(batch.map((command) => cluster.propose(command)))
    process.stdout.write(`acked ${state.lastApplied}\n`)
  }
}

interface Killed {
  /** The last index the child reported as applied after its proposals resolved. */
  ackedIndex: number
  /** The lastApplied the child found after its own recovery. */
  readyIndex: number
  stderr: string
}

function delay(ms: number): Promise<void> {
  return new Promise((resolveDelay) => setTimeout(resolveDelay, ms))
}

/** Starts the child on `dataDir`, lets it write for `runMs` after its first acknowledged batch, then SIGKILLs it. */
async function runAndKill(dirs: TempDirs, dataDir: string, round: number, seed: number, runMs: number): Promise<Killed> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', THIS_FILE, dataDir, String(round), String(seed)], {
    cwd: ROOT,
    env: { ...process.env, [CHILD_ENV]: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  // 'close' comes after the exit and after stdout is drained, so the last acknowledgement is not lost.
  const exited = new Promise<void>((resolveExit) => child.once('close', () => resolveExit()))
  // Whatever happens below, the child does not outlive the test.
  dirs.defer(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))

  const started = Date.now()
  while (!/^acked \d+$/m.test(stdout)) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the child exited early (${child.exitCode ?? child.signalCode}):\n${stderr}`)
    if (Date.now() - started > READY_TIMEOUT_MS) throw new Error(`the child wrote nothing within ${READY_TIMEOUT_MS} ms:\n${stdout}\n${stderr}`)
    await delay(5)
  }
  await delay(runMs)
  expect(child.exitCode, `the child stopped by itself:\n${stderr}`).to.equal(null)
  child.kill('SIGKILL')
  await exited
  expect(child.signalCode).to.equal('SIGKILL')
  const acked = [...stdout.matchAll(/^acked (\d+)$/gm)].map((match) => Number(match[1]))
  const ready = /^ready (\d+)$/m.exec(stdout)
  return { ackedIndex: Math.max(...acked), readyIndex: Number(ready?.[1]), stderr }
}

/** The AccessorIDs a command creates when it succeeds. */
function createdAccessors(command: Command): string[] {
  switch (command.type) {
    case 'acl.init':
      return [ANONYMOUS_TOKEN_ID, ...(command.bootstrapToken === undefined ? [] : [command.bootstrapToken.AccessorID])]
    case 'acl.bootstrap':
    case 'acl.token.ensure':
    case 'acl.token.create':
    case 'acl.token.clone':
      return [command.token.AccessorID]
    default:
      return []
  }
}

/** The fatal errors a replica reports, to check after it stopped (an onFatal that throws goes nowhere). */
interface FatalRecorder {
  errors: unknown[]
  onFatal: (error: unknown) => void
  /** Resolves with the first error reported. */
  reported: Promise<unknown>
}

function fatalRecorder(): FatalRecorder {
  const errors: unknown[] = []
  let report: (error: unknown) => void = () => undefined
  const reported = new Promise<unknown>((resolveReport) => (report = resolveReport))
  return {
    errors,
    onFatal: (error) => {
      errors.push(error)
      report(error)
    },
    reported,
  }
}

/** Resolves `promise`, or rejects after `ms` naming `what`. */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)))
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Starts the single node over `storage` and `state` in the parent, its stop registered on `dirs` before it starts (so
 * a start that fails or never leads leaves nothing running), and waits until it leads and has applied its first entry.
 */
async function startNode(dirs: TempDirs, storage: LevelRaftStorage, state: StateStore, fatal: FatalRecorder): Promise<{ replica: RaftReplica; cluster: ClusterNode }> {
  const node = await createSingleNode(NODE, storage, state, fatal.onFatal)
  dirs.defer(() => node.replica.stop())
  await node.replica.start()
  try {
    await within(READY_TIMEOUT_MS, 'the node leads', node.cluster.readBarrier('consistent'))
  } catch (error) {
    // The replica's own failure says more than the refused read.
    const cause = fatal.errors[0] ?? error
    throw new Error(`the node did not start: ${cause instanceof Error ? cause.message : String(cause)}`, { cause })
  }
  return node
}

/**
 * Waits until the leader wrote and applied everything it writes by itself on leading: its first entry (applied before
 * `startNode` resolves) and its own address in the member table (proposed once it leads, if the table lacks it);
 * after that nothing is proposed, so the log and the state hold still.
 */
async function settled(replica: RaftReplica, storage: LevelRaftStorage, state: StateStore): Promise<void> {
  const started = Date.now()
  for (;;) {
    const member = await getRecord(state.reader, memberSpec, NODE)
    if (member?.Address === replica.leaderAddress() && state.lastApplied === storage.lastIndex()) return
    if (Date.now() - started > READY_TIMEOUT_MS) {
      throw new Error(`the restarted node did not settle: applied ${state.lastApplied} of ${storage.lastIndex()}, member ${JSON.stringify(member)}`)
    }
    await delay(5)
  }
}

/** A log entry as plain values, so deep equality compares bytes. */
function plain(entry: RaftEntry): { index: number; term: number; type: string; data: string } {
  return { index: entry.index, term: entry.term, type: entry.type, data: Buffer.from(entry.data).toString('hex') }
}

/** The tests, registered only when mocha loads this file (not in the child). */
function registerTests(): void {
  describe('state: a crash between commands', function () {
    const dirs = useTempDirs()

    it('after kill -9 at random moments, recovery gives the state of applying the log once, in order', async function () {
      this.timeout(60_000)
      const dataDir = await dirs.make('warden-crash-')
      // The seed of the child's command choices and of the kill moments; printed so a failure can be replayed.
      const seed = Date.now() % 1_000_000
      let previousLastIndex = 0
      for (let round = 1; round <= ROUNDS; round += 1) {
        const context = `seed=${seed} round=${round}`
        const runMs = 20 + ((seed * 7919 + round * 104_729) % 250)
        const killed = await runAndKill(dirs, dataDir, round, seed + round, runMs)
        // The child leads only once it has applied its whole log, and its own first entry after it.
        expect(killed.readyIndex, `${context}: the child recovered everything the last round logged`).to.be.greaterThan(previousLastIndex)

        const { storage, state } = await openStores(dirs, dataDir)
        const appliedBeforeRecovery = state.lastApplied
        const loggedBeforeRecovery = storage.lastIndex()
        const logBeforeRecovery = storage.entries(1, loggedBeforeRecovery + 1).map(plain)
        expect(appliedBeforeRecovery, `${context}: the state never runs ahead of the log`).to.be.at.most(loggedBeforeRecovery)
        expect(killed.ackedIndex, `${context}: every acknowledged write is in the log`).to.be.at.most(loggedBeforeRecovery)
        expect(killed.ackedIndex, `${context}: the round made progress`).to.be.greaterThan(killed.readyIndex)

        const fatal = fatalRecorder()
        const { replica } = await startNode(dirs, storage, state, fatal)
        await settled(replica, storage, state)
        await replica.stop()
        expect(fatal.errors, `${context}: the restarted node reported no fatal error`).to.deep.equal([])
        expect(state.lastApplied, `${context}: lastApplied == log lastIndex`).to.equal(storage.lastIndex())
        expect(storage.lastIndex(), `${context}: the restarted node added its own first entry`).to.be.greaterThan(loggedBeforeRecovery)
        expect(storage.entries(1, loggedBeforeRecovery + 1).map(plain), `${context}: the restart kept every entry logged before it`).to.deep.equal(logBeforeRecovery)
        // The reference below starts at index 1: the log was never compacted behind a snapshot.
        expect(storage.firstIndex(), `${context}: the log is whole`).to.equal(1)
        expect(storage.snapshot(), `${context}: no snapshot was taken`).to.equal(null)

        // The reference: every log entry applied once, in order, to a fresh store (Raft's own entries, noops and
        // configurations, change no record but advance the applied index).
        const entries = storage.entries(1, storage.lastIndex() + 1)
        expect(entries.map((item) => item.index)).to.deep.equal(Array.from({ length: storage.lastIndex() }, (_, offset) => offset + 1))
        const reference = await StateStore.open(await dirs.make('warden-crash-reference-'))
        dirs.defer(() => reference.close())
        await reference.applyEntries(entries)
        const commands = new Map<number, Command>()
        for (const item of entries) if (item.type === 'command') commands.set(item.index, decodeCommand(item.data, item.index))
        expect(reference.lastApplied).to.equal(state.lastApplied)
        expectSameContents(await dump(state), await dump(reference))
        for (const table of TABLES) {
          expect(state.tableIndex(table), `${context}: table index of ${table}`).to.equal(reference.tableIndex(table))
          expect(state.tableIndex(table)).to.be.at.most(state.lastApplied)
        }
        expect(await indexProblems(state), context).to.deep.equal([])

        // Nothing applied twice: each token's CreateIndex is the one log entry that created it, and no AccessorID is
        // created by two entries.
        const creators = new Map<string, number[]>()
        for (const [index, command] of commands) {
          for (const accessorID of createdAccessors(command)) creators.set(accessorID, [...(creators.get(accessorID) ?? []), index])
        }
        for (const [accessorID, indexes] of creators) {
          if (accessorID !== ANONYMOUS_TOKEN_ID) expect(indexes, `${context}: ${accessorID} is created by one entry`).to.have.length(1)
        }
        const tokens = await listRecords<AclToken>(state.reader, tokenSpec)
        expect(tokens.length, `${context}: tokens exist`).to.be.greaterThan(1)
        for (const token of tokens) {
          expect(creators.get(token.AccessorID), `${context}: ${token.AccessorID} has a creating entry`).to.include(token.CreateIndex)
          expect(token.ModifyIndex).to.be.within(token.CreateIndex, state.lastApplied)
        }
        for (const policy of await listRecords(state.reader, policySpec)) {
          const creator = commands.get(policy.CreateIndex)
          const created = creator?.type === 'acl.policy.create' ? creator.policy.ID : creator?.type === 'acl.init' ? GLOBAL_MANAGEMENT_POLICY_ID : undefined
          expect(created, `${context}: policy ${policy.ID} was created at its CreateIndex`).to.equal(policy.ID)
        }

        previousLastIndex = storage.lastIndex()
        await state.close()
        await storage.close()
        await reference.close()
      }
    })

    describe('an entry this build cannot apply', function () {
      this.timeout(20_000)
      /**
       * A data dir whose Raft log a real single node wrote (`acl.init` and a policy, all applied), then `raw` appended
       * after its last entry in its current term, as a leader of that term would have logged them, without applying
       * them: what a node finds after a newer build wrote entries it cannot decode. Answers the dir and the index of
       * the first raw entry.
       */
      async function dataDirWith(raw: Array<Command | Record<string, unknown>>, options: { written?: boolean } = {}): Promise<{ dataDir: string; first: number }> {
        const dataDir = await dirs.make('warden-unknown-')
        if (options.written !== false) {
          const { storage, state } = await openStores(dirs, dataDir)
          const fatal = fatalRecorder()
          const { replica, cluster } = await startNode(dirs, storage, state, fatal)
          await cluster.propose({ v: COMMAND_VERSION, type: 'acl.init' })
          await cluster.propose({ v: COMMAND_VERSION, type: 'acl.policy.create', policy: { ID: 'bbbbbbbb-0000-4000-8000-000000000001', Name: 'before', Description: '', Rules: '', Datacenters: [], Namespace: 'default' } })
          await settled(replica, storage, state)
          await replica.stop()
          expect(fatal.errors, 'the first start reported no fatal error').to.deep.equal([])
          await state.close()
          await storage.close()
        }
        const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
        try {
          if (storage.membershipRecord() === null) await storage.saveMembershipRecord({ voters: [NODE], voteFromIndex: 0 })
          const hard = storage.hardState()
          const term = Math.max(1, hard.term)
          const first = storage.lastIndex() + 1
          const entries: RaftEntry[] = raw.map((command, offset) => ({ index: first + offset, term, type: 'command', data: encode(command) }))
          await storage.persist({ entries, ...(hard.term === term ? {} : { hardState: { term, votedFor: NODE, commitIndex: hard.commitIndex } }) }, true)
          return { dataDir, first }
        } finally {
          await storage.close()
        }
      }

      /** Starts the node on `dataDir` and waits for its fatal error; answers it with the state it left. */
      async function startError(dataDir: string): Promise<{ error: unknown; errors: unknown[]; lastApplied: number; contentsBefore: Entry[]; contents: Entry[] }> {
        const { storage, state } = await openStores(dirs, dataDir)
        const contentsBefore = await dump(state)
        const fatal = fatalRecorder()
        // Not startNode: the node leads, but never serves a read.
        const { replica } = await createSingleNode(NODE, storage, state, fatal.onFatal)
        dirs.defer(() => replica.stop())
        await replica.start()
        const error = await within(READY_TIMEOUT_MS, 'the fatal error', fatal.reported)
        await replica.stop()
        const result = { error, errors: fatal.errors, lastApplied: state.lastApplied, contentsBefore, contents: await dump(state) }
        await state.close()
        await storage.close()
        return result
      }

      it('an unknown command version stops the node with UnknownCommandError naming the index and version', async function () {
        const { dataDir, first } = await dataDirWith([{ v: 2, type: 'acl.token.create', token: {} }, { v: COMMAND_VERSION, type: 'noop' }])
        const once = await startError(dataDir)
        expect(once.error).to.be.instanceOf(UnknownCommandError)
        expect(once.errors).to.have.length(1)
        const message = (once.error as Error).message
        expect(message).to.contain(`log index ${first}`)
        expect(message).to.contain('version 2')
        expect(message).to.contain(`command version ${COMMAND_VERSION}`)
        expect(message).to.match(/upgrade/i)
        // The entries before it are applied; nothing at or after it is, and the state is as it was.
        expect(once.lastApplied).to.equal(first - 1)
        expectSameContents(once.contents, once.contentsBefore)

        // A restart meets the same entry and stops the same way, with the state unchanged: not a loop that
        // applies around it or half-applies it.
        const second = await startError(dataDir)
        expect(second.error).to.be.instanceOf(UnknownCommandError)
        expect((second.error as Error).message).to.equal(message)
        expect(second.lastApplied).to.equal(first - 1)
        expectSameContents(second.contents, once.contents)
      })

      it('an unknown command type of the current version stops the node the same way, naming the type', async function () {
        const { dataDir, first } = await dataDirWith([{ v: COMMAND_VERSION, type: 'acl.token.frobnicate' }], { written: false })
        expect(first).to.equal(1)
        const { error, lastApplied, contents, contentsBefore } = await startError(dataDir)
        expect(error).to.be.instanceOf(UnknownCommandError)
        expect((error as Error).message).to.contain('log index 1').and.contain('acl.token.frobnicate')
        expect(lastApplied).to.equal(0)
        expectSameContents(contents, contentsBefore)
      })

      it('the agent started on such a data dir exits at once with code 3 and one line naming the entry and the fix', async function () {
        const { dataDir, first } = await dataDirWith([{ v: 7, type: 'acl.token.create' }])
        const child = spawn(
          process.execPath,
          ['--import', 'tsx', join(ROOT, 'src/cli/main.ts'), 'agent', '--node-name', NODE, '--data-dir', dataDir, '--http-addr', '127.0.0.1:0', '--cluster-addr', '127.0.0.1:0'],
          { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
        )
        // 'close': after the exit, once stdout and stderr are drained.
        const exited = new Promise<number | null>((resolveExit) => child.once('close', (code) => resolveExit(code)))
        dirs.defer(async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
          await exited
        })
        let stdout = ''
        let stderr = ''
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
        child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
        const code = await within(READY_TIMEOUT_MS, 'the agent must stop, not serve or hang', exited)
        // Exit code 3 (src/cli/main.ts): upgrade this node; restarting it will not help.
        expect(code, `stderr:\n${stderr}\nstdout:\n${stdout}`).to.equal(3)
        const lines = stderr.trim().split('\n')
        expect(lines, `stderr:\n${stderr}\nstdout:\n${stdout}`).to.have.length(1)
        expect(lines[0]).to.contain(`log index ${first}`).and.contain('version 7').and.match(/upgrade/i)
        // Nothing at or after the entry was applied.
        const state = await StateStore.open(join(dataDir, 'state'))
        dirs.defer(() => state.close())
        expect(state.lastApplied).to.equal(first - 1)
      })

      it('a malformed entry (what a leader that checked nothing could have committed) is applied as a no-op, not a crash', async function () {
        const malformed = [
          { v: COMMAND_VERSION, type: 'acl.token.create', token: { AccessorID: 5, SecretID: 7 } },
          { type: 'acl.token.create' },
          { v: COMMAND_VERSION, type: 'acl.policy.create', policy: { ID: 'bbbbbbbb-0000-4000-8000-000000000002', Name: 'bad', Description: '', Rules: '', Datacenters: 'dc1', Namespace: 'default' } },
        ]
        const { dataDir, first } = await dataDirWith(malformed)
        const { storage, state } = await openStores(dirs, dataDir)
        const recordsBefore = (await dump(state)).filter(([key]) => key.startsWith('r\u0000'))
        const noticed: number[] = []
        state.malformedListeners.add((index) => noticed.push(index))
        const fatal = fatalRecorder()
        const { replica, cluster } = await startNode(dirs, storage, state, fatal)
        await settled(replica, storage, state)
        expect(fatal.errors.map(String)).to.deep.equal([])
        expect(noticed).to.deep.equal([first, first + 1, first + 2])
        expect(state.lastApplied).to.be.at.least(first + 2)
        // Nothing of them was written: the records are as before (the node's own member record aside).
        const records = (await dump(state)).filter(([key]) => key.startsWith('r\u0000') && !key.startsWith('r\u0000member\u0000'))
        expectSameContents(records, recordsBefore.filter(([key]) => !key.startsWith('r\u0000member\u0000')))
        // And the node goes on writing.
        const result = await cluster.propose({ v: COMMAND_VERSION, type: 'acl.policy.create', policy: { ID: 'bbbbbbbb-0000-4000-8000-000000000003', Name: 'after', Description: '', Rules: '', Datacenters: [], Namespace: 'default' } })
        expect(result.ok, JSON.stringify(result)).to.equal(true)
        await replica.stop()
      })

      it('decodeCommand accepts what encodeCommand wrote for every known command', function () {
        const command: Command = { v: COMMAND_VERSION, type: 'acl.token.delete', AccessorID: 'x' }
        expect(decodeCommand(encodeCommand(command), 1)).to.deep.equal(command)
      })
    })
  })
}

if (process.env[CHILD_ENV] === undefined) {
  registerTests()
} else {
  const [dataDir, round, seed] = process.argv.slice(2)
  await runChild(dataDir!, Number(round), Number(seed))
}
