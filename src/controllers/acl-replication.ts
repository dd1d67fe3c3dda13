/**
 * ACL replication into a secondary datacenter (issue 19): on the secondary's leader, one loop per stream (policies,
 * roles) pulls the primary's list with a blocking query (stale, any server of the primary, over WAN links through
 * rpc/dc-forward.ts, with the replication token), diffs it against the local records by ID and Hash, fetches the
 * records that differ, and proposes `acl.replicate` batches through the secondary's own Raft log, so its followers
 * get them like any write and a new leader resumes from the replicated index kept in the state.
 *
 * As Consul's (reference 2i), with these choices: it starts as soon as the secondary has a leader (not a minute
 * later); a round runs after every change of the primary's list and at least every WAIT_MS; a primary index that went
 * backwards (a restore) is a full resynchronisation, which the diff by ID and Hash is anyway; batches are bounded
 * (UPSERTS_MAX records, DELETES_MAX IDs) and paced (`applyRate` records a second, default 1,000, ten times Consul's
 * 100); errors back off up to 64 s and are reported in the status, never retried in a tight loop.
 */
import type { Logger } from 'pino'
import { Backoff } from '../lib/backoff.js'
import { WardenError } from '../lib/errors.js'
import type { Cluster } from '../rpc/index.js'
import type { DatacenterForwarder, ForwardedAnswer } from '../rpc/dc-forward.js'
import { COMMAND_VERSION, type Command, type ConfigEntryWrite, type PolicyWrite, type RoleWrite, type TokenCreate } from '../state/commands.js'
import { configSpec, listRecords, policySpec, roleSpec, tokenSpec } from '../state/tables.js'
import { CONFIG_KINDS, configEntryKey } from '../state/config-entries.js'
import { configDeleteKey, LOCAL_CONFIG_KINDS, replicationRecords, REPLICATED_STREAMS, type ReplicatedStream } from '../state/replication.js'
import type { StateStore } from '../state/store.js'

/** The blocking wait of a list round, as Consul's replication (which waits up to 5 min). */
const WAIT_MS = 5 * 60_000
export const UPSERTS_MAX = 256
export const DELETES_MAX = 4_096
/** Bytes of upserts a batch carries at most (Consul's batches are about 256 KB). */
export const UPSERT_BYTES_MAX = 1024 * 1024
/** Records fetched from the primary at once. */
const FETCH_CONCURRENCY = 8

export interface ReplicationSettings {
  primary: string
  /** The replication token (acl.tokens.replication); without one every round fails with a message saying so. */
  token: string | undefined
  /** Records applied a second at most (acl_replication_apply_limit). */
  applyRate: number
  /** Whether global tokens replicate (acl.enable_token_replication); without, they are resolved at the primary. */
  tokens: boolean
}

export interface StreamStatus {
  lastErrorAt: number | undefined
  lastErrorMessage: string
}

export interface ReplicationStatus {
  running: boolean
  /**
   * How long the oldest change seen at the primary and not yet applied here has waited, in seconds (0 when caught
   * up): from when a round first saw the primary ahead until a round applied everything it saw.
   */
  lagSeconds: number
  /** Whether global tokens replicate: Consul's ReplicationType `tokens`, else `policies`. */
  tokens: boolean
  streams: Map<ReplicatedStream, StreamStatus>
}

interface ListedRecord {
  ID: string
  Hash: string
  Namespace: string
  Local: boolean
}

/** Where each stream lists and reads at the primary, and the field its records are keyed by. */
const PATHS: Record<ReplicatedStream, { list: string; read: (id: string) => string; key: 'ID' | 'AccessorID' }> = {
  policies: { list: '/v1/acl/policies', read: (id) => `/v1/acl/policy/${id}`, key: 'ID' },
  roles: { list: '/v1/acl/roles', read: (id) => `/v1/acl/role/${id}`, key: 'ID' },
  // Global tokens only: the primary filters its local tokens out, so none crosses (a local token never leaves its
  // datacenter, not even in a list).
  tokens: { list: `/v1/acl/tokens?filter=${encodeURIComponent('Local == false')}`, read: (id) => `/v1/acl/token/${id}`, key: 'AccessorID' },
  // Config entries are listed per kind (configRound); this list is the one a round blocks on: every kind's list
  // carries the config table's index, so it wakes on a change of any kind.
  config: { list: '/v1/config/proxy-defaults', read: () => '', key: 'ID' },
}

export class AclReplicator {
  private stopped = false
  private readonly loops: Promise<void>[] = []
  private readonly statuses = new Map<ReplicatedStream, StreamStatus>(REPLICATED_STREAMS.map((stream) => [stream, { lastErrorAt: undefined, lastErrorMessage: '' }]))
  private readonly aborts = new Set<AbortController>()
  /** Per stream, when a round first saw the primary ahead of what is applied here; gone once caught up. */
  private readonly behindSince = new Map<ReplicatedStream, number>()
  /** Per stream, the primary's Hash of each record this leader applied: bounded by the records of the stream. */
  private readonly applied = new Map<ReplicatedStream, Map<string, string>>()

  constructor(
    private readonly state: StateStore,
    private readonly cluster: Cluster,
    private readonly forwarder: DatacenterForwarder,
    private readonly settings: ReplicationSettings,
    private readonly log: Logger,
    private readonly now: () => number,
    private readonly random: () => number,
  ) {}

  start(): void {
    for (const stream of REPLICATED_STREAMS) if (stream !== 'tokens' || this.settings.tokens) this.loops.push(this.loop(stream))
  }

  async stop(): Promise<void> {
    this.stopped = true
    for (const abort of this.aborts) abort.abort()
    await Promise.all(this.loops)
  }

  status(): ReplicationStatus {
    const since = Math.min(...this.behindSince.values())
    const lagSeconds = Number.isFinite(since) ? Math.max(0, (this.now() - since) / 1000) : 0
    return { running: !this.stopped && this.cluster.isLeader(), lagSeconds, tokens: this.settings.tokens, streams: new Map(this.statuses) }
  }

  private async loop(stream: ReplicatedStream): Promise<void> {
    const backoff = new Backoff({ initialMs: 1_000, maxMs: 64_000, jitter: 0.2 }, this.random)
    // The primary's index this leader has diffed against; a new leadership diffs once whatever the index says.
    let seenIndex: number | undefined
    let wasLeader = false
    while (!this.stopped) {
      if (!this.cluster.isLeader()) {
        wasLeader = false
        // Another leader measures its own lag and knows what it applied.
        this.behindSince.delete(stream)
        this.applied.delete(stream)
        await this.sleep(250)
        continue
      }
      if (!wasLeader) seenIndex = undefined
      wasLeader = true
      try {
        seenIndex = await this.round(stream, seenIndex)
        backoff.reset()
        const status = this.statuses.get(stream)
        if (status !== undefined) status.lastErrorMessage = ''
      } catch (error) {
        if (this.stopped) return
        const message = (error as Error).message
        this.statuses.set(stream, { lastErrorAt: this.now(), lastErrorMessage: message })
        this.log.warn({ stream, err: message }, 'ACL replication round failed; retrying with backoff')
        await this.sleep(backoff.next())
      }
    }
  }

  /** One round: waits for the primary's list to move past `seenIndex`, then brings the local records to it. */
  private async round(stream: ReplicatedStream, seenIndex: number | undefined): Promise<number | undefined> {
    if (this.settings.token === undefined) throw new Error('no replication token: set acl.tokens.replication (or --acl-replication-token-file, WARDEN_ACL_REPLICATION_TOKEN)')
    if (stream === 'config') return this.configRound(seenIndex)
    const replicated = (await replicationRecords(this.state.reader)).get(stream)?.RemoteIndex ?? 0
    // Not ?stale: a lagging server of the primary would list fewer records, and the diff would delete here what the
    // primary still has. The primary's leader answers (its default consistency), as for the reads of each record.
    const query = seenIndex === undefined ? 'ns=*' : `ns=*&index=${seenIndex}&wait=${WAIT_MS}ms`
    const list = PATHS[stream].list
    const listed = await this.get(`${list}${list.includes('?') ? '&' : '?'}${query}`, seenIndex === undefined ? 60_000 : WAIT_MS)
    const remoteIndex = Number(listed.headers['x-service-index'] ?? '0')
    if (!Number.isSafeInteger(remoteIndex) || remoteIndex < 0) throw new Error(`the primary answered ${PATHS[stream].list} without an index`)
    if (seenIndex !== undefined && remoteIndex === seenIndex) return remoteIndex
    if (remoteIndex !== replicated && !this.behindSince.has(stream)) this.behindSince.set(stream, this.now())
    if (remoteIndex < replicated && seenIndex === undefined) this.log.warn({ stream, remoteIndex, replicated }, "the primary's index is below the one replicated (a restore?): resynchronising in full")
    const remote = parseList(listed.body, stream).filter((record) => !record.Local)
    const local = await this.localRecords(stream)
    const localHash = new Map(local.map((record) => [record.ID, record.Hash]))
    const remoteIds = new Set(remote.map((record) => record.ID))
    // A record whose read does not show every link its Hash covers (a link to a policy deleted since) never matches
    // here: once applied, the same remote Hash is not fetched again by this leader.
    const applied = this.appliedHashes(stream)
    const changed = remote.filter((record) => localHash.get(record.ID) !== record.Hash && applied.get(record.ID) !== record.Hash)
    const deletes = local.map((record) => record.ID).filter((id) => !remoteIds.has(id))
    const upserts: Array<PolicyWrite | RoleWrite | TokenCreate> = []
    let missed = 0
    for (let start = 0; start < changed.length; start += FETCH_CONCURRENCY) {
      const fetched = await Promise.all(changed.slice(start, start + FETCH_CONCURRENCY).map((record) => this.fetch(stream, record)))
      for (const record of fetched) {
        if (record !== undefined) upserts.push(record)
        else missed += 1
      }
    }
    // A record listed but gone when read (deleted on the primary meanwhile): what was fetched is applied, but the
    // round does not claim the list's index, and the next one lists again at once rather than wait for a change.
    const complete = missed === 0
    await this.apply(stream, upserts, deletes, complete ? remoteIndex : replicated, replicated)
    const remoteHash = new Map(remote.map((record) => [record.ID, record.Hash]))
    for (const upsert of upserts) {
      const id = 'AccessorID' in upsert ? (upsert.AccessorID as string) : (upsert as { ID: string }).ID
      const hash = remoteHash.get(id)
      if (hash !== undefined) applied.set(id, hash)
    }
    for (const id of deletes) applied.delete(id)
    if (upserts.length + deletes.length > 0) this.log.info({ stream, upserts: upserts.length, deletes: deletes.length, remoteIndex, complete }, 'replicated from the primary')
    if (!complete) {
      await this.sleep(250)
      return undefined
    }
    this.behindSince.delete(stream)
    return remoteIndex
  }

  /**
   * Config entries: waits for the config table to move at the primary, lists every kind but those each datacenter
   * writes on its own (exported-services), and brings the local entries to them. Entries have no Hash: they are
   * compared by content (every field but the indexes). The round claims the lowest index of its lists, each of which is
   * no newer than its own answer.
   */
  private async configRound(seenIndex: number | undefined): Promise<number | undefined> {
    const replicated = (await replicationRecords(this.state.reader)).get('config')?.RemoteIndex ?? 0
    if (seenIndex !== undefined) {
      const waited = await this.get(`${PATHS.config.list}?ns=*&index=${seenIndex}&wait=${WAIT_MS}ms`, WAIT_MS)
      if (Number(waited.headers['x-service-index'] ?? '0') === seenIndex) return seenIndex
    }
    let remoteIndex = Number.MAX_SAFE_INTEGER
    const remote = new Map<string, Record<string, unknown>>()
    for (const kind of CONFIG_KINDS_REPLICATED) {
      const listed = await this.get(`/v1/config/${kind}?ns=*`, 60_000)
      remoteIndex = Math.min(remoteIndex, Number(listed.headers['x-service-index'] ?? '0'))
      if (!Array.isArray(listed.body)) throw new Error(`the primary's ${kind} list is not a list`)
      for (const entry of listed.body as Array<Record<string, unknown>>) remote.set(configEntryKey(entry as ConfigEntryWrite), entry)
    }
    if (remoteIndex !== replicated && !this.behindSince.has('config')) this.behindSince.set('config', this.now())
    const local = (await listRecords(this.state.reader, configSpec)).filter((entry) => !LOCAL_CONFIG_KINDS.has(entry.Kind))
    const localContent = new Map(local.map((entry) => [configEntryKey(entry), contentOf(entry)]))
    const upserts = [...remote.entries()].filter(([key, entry]) => localContent.get(key) !== contentOf(entry)).map(([, entry]) => withoutIndexes(entry))
    const deletes = local.filter((entry) => !remote.has(configEntryKey(entry))).map((entry) => configDeleteKey(entry))
    await this.apply('config', upserts, deletes, remoteIndex, replicated)
    if (upserts.length + deletes.length > 0) this.log.info({ stream: 'config', upserts: upserts.length, deletes: deletes.length, remoteIndex }, 'replicated from the primary')
    this.behindSince.delete('config')
    return remoteIndex
  }

  /** What this datacenter holds of a stream, by ID and Hash: for tokens, its global ones only (its local ones are its own). */
  private async localRecords(stream: ReplicatedStream): Promise<Array<{ ID: string; Hash: string }>> {
    if (stream === 'policies') return listRecords(this.state.reader, policySpec)
    if (stream === 'roles') return listRecords(this.state.reader, roleSpec)
    const tokens = await listRecords(this.state.reader, tokenSpec)
    return tokens.filter((token) => !token.Local).map((token) => ({ ID: token.AccessorID, Hash: token.Hash }))
  }

  private appliedHashes(stream: ReplicatedStream): Map<string, string> {
    let hashes = this.applied.get(stream)
    if (hashes === undefined) {
      hashes = new Map()
      this.applied.set(stream, hashes)
    }
    return hashes
  }

  /** Proposes the changes in bounded, paced batches; the last one records `remoteIndex`. */
  private async apply(stream: ReplicatedStream, upserts: Array<PolicyWrite | RoleWrite | TokenCreate | ConfigEntryWrite>, deletes: string[], remoteIndex: number, replicated: number): Promise<void> {
    const batches: Array<{ upserts: Array<PolicyWrite | RoleWrite | TokenCreate | ConfigEntryWrite>; deletes: string[] }> = []
    for (let start = 0; start < deletes.length; start += DELETES_MAX) batches.push({ upserts: [], deletes: deletes.slice(start, start + DELETES_MAX) })
    // At most UPSERTS_MAX records and UPSERT_BYTES_MAX bytes (as JSON, about what msgpack takes) a batch: a config
    // entry may be 1 MiB, and a command larger than a peer frame (8 MiB) could never replicate.
    let batch: Array<PolicyWrite | RoleWrite | TokenCreate | ConfigEntryWrite> = []
    let bytes = 0
    for (const upsert of upserts) {
      const size = JSON.stringify(upsert).length
      if (batch.length > 0 && (batch.length >= UPSERTS_MAX || bytes + size > UPSERT_BYTES_MAX)) {
        batches.push({ upserts: batch, deletes: [] })
        batch = []
        bytes = 0
      }
      batch.push(upsert)
      bytes += size
    }
    if (batch.length > 0) batches.push({ upserts: batch, deletes: [] })
    // Nothing to change but the index moved: one empty batch records it, so a new leader need not diff again.
    if (batches.length === 0 && remoteIndex !== replicated) batches.push({ upserts: [], deletes: [] })
    for (const [position, batch] of batches.entries()) {
      if (this.stopped || !this.cluster.isLeader()) throw new Error('no longer the leader')
      const last = position === batches.length - 1
      const command = {
        v: COMMAND_VERSION,
        type: 'acl.replicate',
        stream,
        upserts: batch.upserts,
        deletes: batch.deletes,
        // Earlier batches claim no progress: a leader that stops between batches diffs again from the last index.
        remoteIndex: last ? remoteIndex : replicated,
        now: new Date(this.now()).toISOString(),
      } as Command
      const result = await this.cluster.propose(command)
      if (!result.ok) throw new Error(`a replication batch was refused: ${result.error.message}`)
      const records = batch.upserts.length + batch.deletes.length
      if (!last && records > 0) await this.sleep((1_000 * records) / this.settings.applyRate)
    }
  }

  private async fetch(stream: ReplicatedStream, listed: ListedRecord): Promise<PolicyWrite | RoleWrite | TokenCreate | undefined> {
    const answer = await this.get(`${PATHS[stream].read(listed.ID)}?ns=${encodeURIComponent(listed.Namespace)}`, 60_000, [404])
    // Deleted on the primary since it was listed: the next round deletes it here.
    if (answer.status === 404) return undefined
    if (stream === 'policies') return policyOf(answer.body)
    if (stream === 'roles') return roleOf(answer.body)
    return tokenOf(answer.body)
  }

  /** A GET of the primary with the replication token; anything but 200 (or an allowed status) is an error. */
  private async get(path: string, waitMs: number, allowed: number[] = []): Promise<{ status: number; headers: Record<string, string>; body: unknown }> {
    const answer: ForwardedAnswer = await this.forwarder.forward(this.settings.primary, { method: 'GET', path, headers: { 'x-service-token': this.settings.token ?? '' } }, waitMs)
    const text = answer.body.toString('utf8')
    if (answer.status !== 200 && !allowed.includes(answer.status)) {
      const detail = safeError(text)
      const hint = answer.status === 403 ? ' (the replication token needs acl:read)' : ''
      throw new WardenError('internal', `the primary answered ${path.split('?')[0]} with ${answer.status}${hint}: ${detail}`)
    }
    return { status: answer.status, headers: answer.headers, body: answer.status === 200 ? JSON.parse(text) : undefined }
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve()
    const abort = new AbortController()
    this.aborts.add(abort)
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms)
      function done(): void {
        clearTimeout(timer)
        resolve()
      }
      abort.signal.addEventListener('abort', done, { once: true })
    }).finally(() => this.aborts.delete(abort))
  }
}

function parseList(body: unknown, stream: ReplicatedStream): ListedRecord[] {
  if (!Array.isArray(body)) throw new Error(`the primary's ${stream} list is not a list`)
  const key = PATHS[stream].key
  return body.map((item: unknown) => {
    const record = (item ?? {}) as Record<string, unknown>
    const { Hash, Namespace } = record
    const ID = record[key]
    if (typeof ID !== 'string' || typeof Hash !== 'string') throw new Error(`the primary's ${stream} list holds an entry without ${key} and Hash`)
    return { ID, Hash, Namespace: typeof Namespace === 'string' ? Namespace : 'default', Local: record['Local'] === true }
  })
}

/** A global token as the primary shows it to a replication token with acl:write (its SecretID included). */
function tokenOf(body: unknown): TokenCreate {
  const record = body as Record<string, unknown>
  const secret = record['SecretID']
  if (typeof secret !== 'string' || secret === '<hidden>') throw new Error('the primary hid a token\'s SecretID: the replication token needs acl:write to replicate tokens')
  const links = (name: string): Array<{ ID: string }> =>
    (Array.isArray(record[name]) ? (record[name] as Array<{ ID?: unknown }>) : []).filter((link) => typeof link.ID === 'string').map((link) => ({ ID: link.ID as string }))
  const role = roleOf({ ...record, ID: record['AccessorID'], Name: '' })
  return {
    AccessorID: String(record['AccessorID']),
    SecretID: secret,
    Description: String(record['Description'] ?? ''),
    Policies: links('Policies'),
    Roles: links('Roles'),
    TemplatedPolicies: role.TemplatedPolicies,
    ServiceIdentities: role.ServiceIdentities,
    NodeIdentities: role.NodeIdentities,
    Local: false,
    AuthMethod: String(record['AuthMethod'] ?? ''),
    ...(typeof record['ExpirationTime'] === 'string' && record['ExpirationTime'] !== '' ? { ExpirationTime: record['ExpirationTime'] } : {}),
    CreateTime: String(record['CreateTime'] ?? new Date(0).toISOString()),
    Namespace: String(record['Namespace'] ?? 'default'),
  }
}

function policyOf(body: unknown): PolicyWrite {
  const record = body as Record<string, unknown>
  return {
    ID: String(record['ID']),
    Name: String(record['Name']),
    Description: String(record['Description'] ?? ''),
    Rules: String(record['Rules'] ?? ''),
    Datacenters: Array.isArray(record['Datacenters']) ? (record['Datacenters'] as unknown[]).map(String) : [],
    Namespace: String(record['Namespace'] ?? 'default'),
  }
}

function roleOf(body: unknown): RoleWrite {
  const record = body as Record<string, unknown>
  const list = <T>(name: string): T[] => (Array.isArray(record[name]) ? (record[name] as T[]) : [])
  return {
    ID: String(record['ID']),
    Name: String(record['Name']),
    Description: String(record['Description'] ?? ''),
    Policies: list<{ ID?: unknown }>('Policies')
      .filter((link) => typeof link.ID === 'string')
      .map((link) => ({ ID: link.ID as string })),
    // Only the fields a role stores: the read may add others, which the command's shape refuses.
    TemplatedPolicies: list<Record<string, unknown>>('TemplatedPolicies').map((link) => ({
      TemplateName: String(link['TemplateName'] ?? ''),
      TemplateID: String(link['TemplateID'] ?? ''),
      ...(typeof link['TemplateVariables'] === 'object' && link['TemplateVariables'] !== null
        ? { TemplateVariables: { ...(typeof (link['TemplateVariables'] as { name?: unknown }).name === 'string' ? { name: (link['TemplateVariables'] as { name: string }).name } : {}) } }
        : {}),
    })),
    ServiceIdentities: list<Record<string, unknown>>('ServiceIdentities').map((identity) => ({
      ServiceName: String(identity['ServiceName'] ?? ''),
      ...(Array.isArray(identity['Datacenters']) ? { Datacenters: (identity['Datacenters'] as unknown[]).map(String) } : {}),
    })),
    NodeIdentities: list<Record<string, unknown>>('NodeIdentities').map((identity) => ({ NodeName: String(identity['NodeName'] ?? ''), Datacenter: String(identity['Datacenter'] ?? '') })),
    Namespace: String(record['Namespace'] ?? 'default'),
  }
}

/** The primary's error message, without quoting more than a line of it. */
function safeError(text: string): string {
  try {
    const parsed = JSON.parse(text) as { Error?: unknown }
    if (typeof parsed.Error === 'string') return parsed.Error.slice(0, 300)
  } catch {
    // Not the error shape: its first line below.
  }
  return (text.split('\n')[0] ?? '').slice(0, 300)
}

/** The config-entry kinds a secondary replicates: every kind of the contract but those each datacenter writes alone. */
const CONFIG_KINDS_REPLICATED = CONFIG_KINDS.filter((kind) => !LOCAL_CONFIG_KINDS.has(kind))

function withoutIndexes(entry: Record<string, unknown>): ConfigEntryWrite {
  const { CreateIndex: _create, ModifyIndex: _modify, ...fields } = entry
  return fields as ConfigEntryWrite
}

/** An entry's fields but its indexes, as text with keys in order: equal text, equal entry. */
function contentOf(entry: Record<string, unknown>): string {
  return stableText(withoutIndexes(entry))
}

function stableText(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableText).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${stableText((value as Record<string, unknown>)[key])}`)
      .join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}
