/**
 * Fixtures for tests that run the state machine on real LevelDB stores (test/unit/state, test/unit/controllers):
 *
 * - opening a data dir's Raft storage and StateStore, or a whole single-node replica over a fresh temporary data dir, with
 *   their closing registered on a `TempDirs` (support/temp-dir.ts), so a failing test leaves nothing open or on disk;
 * - builders for commands and for the TokenCreate they carry, which fill in what a test does not care about;
 * - byte-level reads of a store: its dump, a comparison of two dumps that names the first difference, and a check that
 *   the secondary-index entries describe exactly the records.
 *
 * Nothing here calls mocha at import time (only `useReplica`, when a suite calls it), so the crash test's child process
 * may import it too.
 */
import { expect } from 'chai'
import { join } from 'node:path'
import { pino } from 'pino'
import { realEnvironment } from '../../src/lib/environment.js'
import { LevelRaftStorage } from '../../src/raft/storage/level-storage.js'
import type { PeerLinks } from '../../src/replica/peer-links.js'
import { RaftReplica } from '../../src/replica/raft-replica.js'
import { ClusterNode } from '../../src/rpc/cluster-node.js'
import {
  COMMAND_VERSION,
  type AuthMethodWrite,
  type BindingRuleWrite,
  type Command,
  type ConfigEntryWrite,
  type LinkStatusWrite,
  type LinkWrite,
  type LoginWrite,
  type PolicyWrite,
  type RoleWrite,
  type TokenCreate,
  type TokenUpdate,
} from '../../src/state/commands.js'
import { indexKey, SECRET_INDEX_PREFIX, uniqueKey, uniqueTarget, type Table } from '../../src/state/keys.js'
import { linkSpec } from '../../src/state/link.js'
import { COMPLETE_MARKER, switchToStagedState } from '../../src/state/snapshot.js'
import { StateStore } from '../../src/state/store.js'
import { authMethodSpec, bindingRuleSpec, configSpec, listRecords, policySpec, roleSpec, tokenSpec, type TableSpec } from '../../src/state/tables.js'
import { useTempDirs, type TempDirs } from './temp-dir.js'

// ---- stores and replicas ---------------------------------------------------------------------------------------------

/** Opens `<dataDir>/raft` and `<dataDir>/state` as the agent lays them out; `dirs` closes them (state first) at cleanup. */
export async function openStores(dirs: TempDirs, dataDir: string): Promise<{ storage: LevelRaftStorage; state: StateStore }> {
  const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
  const state = await StateStore.open(join(dataDir, 'state'))
  dirs.defer(() => storage.close())
  dirs.defer(() => state.close())
  return { storage, state }
}

/** Peer links for a server alone: nothing to send to, nobody to ask. */
export const NO_LINKS: PeerLinks = {
  send: () => false,
  request: (to) => Promise.reject(new Error(`no peer ${to}`)),
  onMessage: () => undefined,
  onRequest: () => undefined,
  onPeerState: () => undefined,
  setPeers: () => undefined,
  advertisedAddress: () => undefined,
}

/**
 * A one-voter Raft group (the agent's path for a server without peers) over already opened stores, built but not
 * started: for a test that must be able to stop it whatever the start does (register `replica.stop()` first, then
 * `replica.start()`), for instance a start expected to fail through `onFatal`, or one that may never lead. Saves the
 * membership record of a founder of one if the storage has none. `links` replaces NO_LINKS, for a test that plays a
 * peer (its `onRequest` receives the replica's handler of peer requests).
 */
export async function createSingleNode(
  name: string,
  storage: LevelRaftStorage,
  state: StateStore,
  onFatal: (error: unknown) => void,
  options: { snapshotThreshold?: number; snapshotBytesThreshold?: number; trailingBytesMax?: number; applyQueueEntriesMax?: number; links?: PeerLinks } = {},
): Promise<{ replica: RaftReplica; cluster: ClusterNode }> {
  if (storage.membershipRecord() === null) await storage.saveMembershipRecord({ voters: [name], voteFromIndex: 0 })
  const replica = new RaftReplica({
    nodeName: name,
    dialAddresses: new Map([[name, '127.0.0.1:1']]),
    membership: storage.membershipRecord()!,
    storage,
    state,
    links: options.links ?? NO_LINKS,
    environment: realEnvironment,
    log: pino({ level: 'silent' }),
    onFatal,
    heartbeatIntervalMs: 50,
    electionTimeoutMs: 500,
    snapshotThreshold: options.snapshotThreshold ?? 8192,
    ...(options.snapshotBytesThreshold === undefined ? {} : { snapshotBytesThreshold: options.snapshotBytesThreshold }),
    ...(options.trailingBytesMax === undefined ? {} : { trailingBytesMax: options.trailingBytesMax }),
    ...(options.applyQueueEntriesMax === undefined ? {} : { applyQueueEntriesMax: options.applyQueueEntriesMax }),
  })
  return { replica, cluster: new ClusterNode(replica, undefined) }
}

/**
 * `createSingleNode`, started; resolves once it leads. The caller stops the replica before closing the stores; a start
 * that fails stops it here.
 */
export async function startSingleNode(name: string, storage: LevelRaftStorage, state: StateStore, onFatal: (error: unknown) => void, options: { snapshotThreshold?: number; links?: PeerLinks } = {}): Promise<{ replica: RaftReplica; cluster: ClusterNode }> {
  const { replica, cluster } = await createSingleNode(name, storage, state, onFatal, options)
  await replica.start()
  try {
    await cluster.readBarrier('consistent')
  } catch (error) {
    // Never leave a ticking replica behind a failed start: mocha would not exit.
    await replica.stop()
    throw error
  }
  return { replica, cluster }
}

export interface ReplicaFixture {
  dir: string
  storage: LevelRaftStorage
  state: StateStore
  replica: ClusterNode
}

/**
 * A single-node replica (node `n1`) over stores in a fresh temporary data dir, with the built-ins written (`acl.init`).
 * A fatal error of the replica is thrown. At cleanup `dirs` stops the replica, closes the state, then the log, and
 * removes the dir.
 */
export async function openReplica(dirs: TempDirs, prefix: string): Promise<ReplicaFixture> {
  const dir = await dirs.make(prefix)
  const { storage, state } = await openStores(dirs, dir)
  const { replica, cluster } = await startSingleNode('n1', storage, state, (error) => {
    throw error
  })
  dirs.defer(() => replica.stop())
  await cluster.propose(commands.init())
  return { dir, storage, state, replica: cluster }
}

/**
 * For a suite whose every test runs against a fresh replica: registers a `beforeEach` that opens one with
 * `openReplica` (and, through `useTempDirs`, its cleanup after each test). The object answered is filled in anew before
 * each test, so tests read `node.state` and `node.replica` from it.
 */
export function useReplica(prefix: string): ReplicaFixture {
  const dirs = useTempDirs()
  const node = {} as ReplicaFixture
  beforeEach(async () => {
    Object.assign(node, await openReplica(dirs, prefix))
  })
  return node
}

// ---- builders --------------------------------------------------------------------------------------------------------

/**
 * A token as a create command carries it: no links or identities, not local, from no auth method, in the default
 * namespace, with an empty Description unless `fields` say otherwise.
 */
export function buildTokenCreate(fields: Pick<TokenCreate, 'AccessorID' | 'SecretID' | 'CreateTime'> & Partial<TokenCreate>): TokenCreate {
  const { AccessorID, SecretID, CreateTime, ...rest } = fields
  return {
    AccessorID,
    SecretID,
    Description: '',
    Policies: [],
    Roles: [],
    TemplatedPolicies: [],
    ServiceIdentities: [],
    NodeIdentities: [],
    Local: false,
    AuthMethod: '',
    CreateTime,
    Namespace: 'default',
    ...rest,
  }
}

/** Shorthands for commands, one per command type (but `acl.token.clone`); `v` is always the current version. */
export const commands = {
  init: (bootstrapToken?: TokenCreate): Command =>
    bootstrapToken === undefined ? { v: COMMAND_VERSION, type: 'acl.init' } : { v: COMMAND_VERSION, type: 'acl.init', bootstrapToken },
  bootstrap: (token: TokenCreate): Command => ({ v: COMMAND_VERSION, type: 'acl.bootstrap', token }),
  ensure: (token: TokenCreate): Command => ({ v: COMMAND_VERSION, type: 'acl.token.ensure', token }),
  tokenCreate: (token: TokenCreate): Command => ({ v: COMMAND_VERSION, type: 'acl.token.create', token }),
  tokenUpdate: (token: TokenUpdate): Command => ({ v: COMMAND_VERSION, type: 'acl.token.update', token }),
  tokenDelete: (AccessorID: string): Command => ({ v: COMMAND_VERSION, type: 'acl.token.delete', AccessorID }),
  tokenDeleteExpired: (AccessorIDs: string[], now: string): Command => ({ v: COMMAND_VERSION, type: 'acl.token.delete-expired', AccessorIDs, now }),
  policyCreate: (policy: PolicyWrite): Command => ({ v: COMMAND_VERSION, type: 'acl.policy.create', policy }),
  policyUpdate: (policy: PolicyWrite): Command => ({ v: COMMAND_VERSION, type: 'acl.policy.update', policy }),
  policyDelete: (ID: string): Command => ({ v: COMMAND_VERSION, type: 'acl.policy.delete', ID }),
  roleCreate: (role: RoleWrite): Command => ({ v: COMMAND_VERSION, type: 'acl.role.create', role }),
  roleUpdate: (role: RoleWrite): Command => ({ v: COMMAND_VERSION, type: 'acl.role.update', role }),
  roleDelete: (ID: string): Command => ({ v: COMMAND_VERSION, type: 'acl.role.delete', ID }),
  methodCreate: (method: AuthMethodWrite): Command => ({ v: COMMAND_VERSION, type: 'acl.auth-method.create', method }),
  methodUpdate: (method: AuthMethodWrite): Command => ({ v: COMMAND_VERSION, type: 'acl.auth-method.update', method }),
  methodDelete: (Name: string, Namespace = 'default'): Command => ({ v: COMMAND_VERSION, type: 'acl.auth-method.delete', Namespace, Name }),
  ruleCreate: (rule: BindingRuleWrite): Command => ({ v: COMMAND_VERSION, type: 'acl.binding-rule.create', rule }),
  ruleUpdate: (rule: BindingRuleWrite): Command => ({ v: COMMAND_VERSION, type: 'acl.binding-rule.update', rule }),
  ruleDelete: (ID: string): Command => ({ v: COMMAND_VERSION, type: 'acl.binding-rule.delete', ID }),
  configApply: (entry: ConfigEntryWrite, cas?: number): Command =>
    cas === undefined ? { v: COMMAND_VERSION, type: 'config.apply', entry } : { v: COMMAND_VERSION, type: 'config.apply', entry, cas },
  configDelete: (Name: string, cas?: number, Kind = 'service-defaults'): Command =>
    cas === undefined
      ? { v: COMMAND_VERSION, type: 'config.delete', Kind, Namespace: 'default', Name }
      : { v: COMMAND_VERSION, type: 'config.delete', Kind, Namespace: 'default', Name, cas },
  linkSet: (link: LinkWrite, version?: number): Command =>
    version === undefined ? { v: COMMAND_VERSION, type: 'link.set', link } : { v: COMMAND_VERSION, type: 'link.set', link, version },
  linkDelete: (version?: number): Command =>
    version === undefined ? { v: COMMAND_VERSION, type: 'link.delete' } : { v: COMMAND_VERSION, type: 'link.delete', version },
  linkStatus: (status: LinkStatusWrite): Command => ({ v: COMMAND_VERSION, type: 'link.status', status }),
  login: (login: LoginWrite): Command => ({ v: COMMAND_VERSION, type: 'acl.login', login }),
  noop: (): Command => ({ v: COMMAND_VERSION, type: 'noop' }),
}

// ---- store contents --------------------------------------------------------------------------------------------------

export type Entry = [key: string, value: Buffer]

/** Every key and value of the state's LevelDB, in key order. */
export async function dump(store: StateStore): Promise<Entry[]> {
  const entries: Entry[] = []
  for await (const [key, value] of store.db.iterator()) entries.push([key, Buffer.from(value)])
  return entries
}

/** A key with its NUL separators shown as `/`, quoted. */
export function printable(key: string): string {
  return JSON.stringify(key.replaceAll('\u0000', '/'))
}

/** Asserts two dumps are byte-identical, naming the first key where they differ. */
export function expectSameContents(actual: Entry[], expected: Entry[]): void {
  const length = Math.max(actual.length, expected.length)
  for (let position = 0; position < length; position += 1) {
    const a = actual[position]
    const b = expected[position]
    expect(a?.[0], `key #${position}: ${printable(a?.[0] ?? '<none>')} vs ${printable(b?.[0] ?? '<none>')}`).to.equal(b?.[0])
    expect(a?.[1].equals(b![1]), `value of ${printable(a![0])} differs`).to.equal(true)
  }
}

/** Replaces `store`'s state, as a snapshot install or a restore build does, with a copy of the pairs `keep` keeps. */
export async function replaceWithCopy(store: StateStore, keep: (key: string) => boolean = () => true): Promise<void> {
  const staged = await store.files.openDb('incoming')
  await staged.batch((await dump(store)).filter(([key]) => keep(key)).map(([key, value]) => ({ type: 'put' as const, key, value })))
  await staged.close()
  await store.files.mark('incoming', COMPLETE_MARKER)
  await store.replace((files) => switchToStagedState(files, 'incoming'))
}

/** The record key a unique index entry names, by the table and index its key names. */
function uniqueTargetOf(key: string, value: Buffer): string {
  const [, table, index] = key.split('\u0000')
  return uniqueTarget(table as Table, index ?? '', value)
}

/**
 * Index entries that do not match the records, over every table with records (tokens, policies, roles, auth methods,
 * binding rules, config entries, the link): every unique and non-unique entry a record implies must exist, and no
 * other entry may. Returns one line per problem (empty when consistent).
 */
export async function indexProblems(store: StateStore): Promise<string[]> {
  const specs: Array<TableSpec<any>> = [tokenSpec, policySpec, roleSpec, authMethodSpec, bindingRuleSpec, configSpec, linkSpec]
  const expected = new Map<string, string>()
  for (const spec of specs) {
    for (const record of await listRecords(store.reader, spec)) {
      const key = spec.key(record)
      for (const [index, valueOf] of Object.entries(spec.unique)) {
        const value = valueOf(record)
        if (value !== undefined) expected.set(uniqueKey(spec.table, index, value), key)
      }
      for (const [index, valuesOf] of Object.entries(spec.multi)) {
        for (const value of valuesOf(record)) expected.set(indexKey(spec.table, index, value, key), '')
      }
    }
  }
  const problems: string[] = []
  // The token secret index is held in memory (src/state/secret-index.ts): each entry is looked up through the reader,
  // and the database must store none.
  for (const [key, want] of expected) {
    if (!key.startsWith(SECRET_INDEX_PREFIX)) continue
    const value = await store.reader.get(key)
    if (value === undefined) problems.push(`secret index misses ${printable(key)}`)
    else if (uniqueTarget('token', 'secret', value) !== want) problems.push(`${printable(key)} names ${printable(uniqueTarget('token', 'secret', value))}, expected ${JSON.stringify(want)}`)
    expected.delete(key)
  }
  for (const [key, value] of await dump(store)) {
    if (key.startsWith(SECRET_INDEX_PREFIX)) {
      problems.push(`stored secret index entry ${printable(key)}`)
      continue
    }
    if (!key.startsWith('u\u0000') && !key.startsWith('x\u0000')) continue
    const want = expected.get(key)
    if (want === undefined) problems.push(`stray index entry ${printable(key)}`)
    else if (key.startsWith('u\u0000') ? uniqueTargetOf(key, value) !== want : value.length !== 0) {
      problems.push(`${printable(key)} names ${printable(uniqueTargetOf(key, value))}, expected ${JSON.stringify(want)}`)
    }
    expected.delete(key)
  }
  for (const key of expected.keys()) problems.push(`missing index entry ${printable(key)}`)
  return problems
}
