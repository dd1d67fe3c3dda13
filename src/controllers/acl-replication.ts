/**
 * ACL replication into a secondary datacenter (issue 19): on the secondary's leader, one loop per stream (policies,
 * roles, global tokens, config entries) reads what changed at the primary (GET /v1/internal/acl/replication/:stream
 * over the WAN links through rpc/dc-forward.ts, with the replication token, served consistently by any server of the
 * primary), and proposes `acl.replicate` batches through the secondary's own Raft log, so its followers get them like
 * any write and a new leader resumes from the replicated index kept in the state.
 *
 * As Consul's (reference 2i), with these choices:
 * - It starts as soon as the secondary has a leader (not a minute later).
 * - A round blocks until the primary's stream moves past the last round, then reads the delta of what changed since
 *   the replicated index (the primary's change feed), or walks the whole stream in pages (IDs and hashes; records
 *   whole only when changed since) when the feed does not reach back, at the first round of a leadership, and every
 *   FULL_WALK_EVERY_MS. Consul lists every record each round.
 * - A primary index that went backwards (a restore) is a full resynchronisation.
 * - Rounds are limited per stream by a token bucket (`rate` a second, `burst`: Consul's acl_replication_rate and
 *   _burst); batches are bounded (UPSERTS_MAX records, UPSERT_BYTES_MAX bytes, DELETES_MAX IDs) and paced
 *   (`applyRate` records a second, acl.replication_apply_limit).
 * - Errors back off up to 64 s and are reported in the status, never retried in a tight loop.
 */
import type { Logger } from 'pino'
import { Backoff } from '../lib/backoff.js'
import { pacer } from '../lib/pace.js'
import { WardenError } from '../lib/errors.js'
import { TokenBucket } from '../lib/token-bucket.js'
import type { Cluster, ReplicationDetail, StatusDetail } from '../rpc/index.js'
import type { DatacenterForwarder, ForwardedAnswer } from '../rpc/dc-forward.js'
import { COMMAND_VERSION, type Command, type ConfigEntryWrite, type PolicyWrite, type RoleWrite, type TokenCreate } from '../state/commands.js'
import { configSpec, getByUnique, getRecord, listRecords, policySpec, roleSpec, tokenSpec } from '../state/tables.js'
import { REPLICATED_ITEMS_MAX } from '../state/validate.js'
import { configEntryKey } from '../state/config-entries.js'
import { configContentHash, type StreamItem, type StreamPage } from '../state/replication-pages.js'
import { configDeleteAddress, configDeleteKey, LOCAL_CONFIG_KINDS, replicationRecords, REPLICATED_STREAMS, type ReplicatedStream } from '../state/replication.js'
import { nsKey, recordPrefix } from '../state/keys.js'
import type { StateStore } from '../state/store.js'

/** The blocking wait of a round, as Consul's replication (which waits up to 5 min). */
const WAIT_MS = 5 * 60_000
/** A full walk at least this often, whatever the deltas say: the walk repairs anything the deltas missed. */
export const FULL_WALK_EVERY_MS = 10 * 60_000
/**
 * Records a batch carries at most. Small, because a batch applies on every node of the secondary in one turn of its
 * loop, and its own writes wait behind it: with 256, their p99 during an initial sync was 3.5 times the idle one; with
 * 64, 1.6 times (docs/benchmarks.md, replication).
 */
export const UPSERTS_MAX = 64
/** Records a page of a walk carries at most (the primary's default is 2,000): about 300 KB of tokens to parse at once. */
export const PAGE_ITEMS = 500
export const DELETES_MAX = 4_096
/** Bytes of upserts a batch carries at most (Consul's batches are about 256 KB). */
export const UPSERT_BYTES_MAX = 1024 * 1024

export interface ReplicationSettings {
  primary: string
  /** The replication token (acl.tokens.replication); without one every round fails with a message saying so. */
  token: string | undefined
  /** Records applied a second at most (acl.replication_apply_limit). */
  applyRate: number
  /** Rounds a second per stream at most (acl.replication_rate), and rounds that may run back to back (acl.replication_burst). */
  rate: number
  burst: number
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

export class AclReplicator {
  private stopped = false
  private readonly loops: Promise<void>[] = []
  private readonly statuses = new Map<ReplicatedStream, StreamStatus>(REPLICATED_STREAMS.map((stream) => [stream, { lastErrorAt: undefined, lastErrorMessage: '' }]))
  private readonly aborts = new Set<AbortController>()
  /** Per stream, when a round first saw the primary ahead of what is applied here; gone once caught up. */
  private readonly behindSince = new Map<ReplicatedStream, number>()
  /** Per stream, when the next full walk is due. */
  private readonly walkDueAt = new Map<ReplicatedStream, number>()
  /** Streams whose next walk brings every record whole. */
  private readonly wholeNext = new Set<ReplicatedStream>()
  private readonly limiters = new Map<ReplicatedStream, TokenBucket>()
  /** When the next batch may be proposed (applyRate). */
  private paceAt = 0
  /** Per stream, rounds that failed on this server since it started (metrics). */
  private readonly failures = new Map<ReplicatedStream, number>()
  /** Takes this loop's detail out of the cluster view (set by start). */
  private removeDetail: (() => void) | undefined

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
    // The cluster view (GET /v1/operator/cluster) is the leader's, and so must be this loop's part of the status.
    this.removeDetail = this.cluster.addStatusDetail('replication', () => this.detail())
  }

  async stop(): Promise<void> {
    this.removeDetail?.()
    this.stopped = true
    for (const abort of this.aborts) abort.abort()
    await Promise.all(this.loops)
  }

  status(): ReplicationStatus {
    const since = Math.min(...this.behindSince.values())
    const lagSeconds = Number.isFinite(since) ? Math.max(0, (this.now() - since) / 1000) : 0
    return { running: !this.stopped && this.cluster.isLeader(), lagSeconds, tokens: this.settings.tokens, streams: new Map(this.statuses) }
  }

  /** What the cluster view shows of this loop: a change of anything but the lag wakes its watchers. */
  private detail(): StatusDetail {
    const status = this.status()
    let lastError: StreamStatus | undefined
    for (const stream of status.streams.values()) {
      if (stream.lastErrorAt !== undefined && stream.lastErrorMessage !== '' && (lastError?.lastErrorAt === undefined || stream.lastErrorAt > lastError.lastErrorAt)) lastError = stream
    }
    const value: ReplicationDetail = {
      running: status.running,
      lagSeconds: Math.round(status.lagSeconds * 1000) / 1000,
      tokens: status.tokens,
      ...(lastError?.lastErrorAt === undefined ? {} : { lastErrorAt: lastError.lastErrorAt }),
      lastErrorMessage: lastError?.lastErrorMessage ?? '',
    }
    return { value, changeKey: JSON.stringify([value.running, value.tokens, value.lastErrorAt, value.lastErrorMessage]) }
  }

  /** Rounds that failed on this server since it started, per stream (a stream never failed is absent). */
  failedRounds(): ReadonlyMap<ReplicatedStream, number> {
    return this.failures
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
        this.failures.set(stream, (this.failures.get(stream) ?? 0) + 1)
        this.log.warn({ stream, err: message }, 'ACL replication round failed; retrying with backoff')
        await this.sleep(backoff.next())
      }
    }
  }

  /**
   * One round: waits (blocking) for the primary's stream to move past `seenIndex`, then brings the local records to
   * it, from the delta of what changed since the replicated index when the primary's feed has it, else by a full walk.
   * The first round of a leadership, and one every FULL_WALK_EVERY_MS, walk in full whatever the index says: the
   * walk compares every record, so whatever went wrong anywhere is repaired by the next one.
   */
  private async round(stream: ReplicatedStream, seenIndex: number | undefined): Promise<number | undefined> {
    if (this.settings.token === undefined) throw new Error('no replication token: set acl.tokens.replication (or --acl-replication-token-file, WARDEN_ACL_REPLICATION_TOKEN)')
    await this.limit(stream)
    const replicated = (await replicationRecords(this.state.reader)).get(stream)?.RemoteIndex ?? 0
    const walkDue = seenIndex === undefined || this.now() >= (this.walkDueAt.get(stream) ?? 0) || this.wholeNext.has(stream)
    if (walkDue) return this.walk(stream, this.wholeNext.has(stream) ? 0 : replicated, replicated)
    const first = await this.page(stream, { since: replicated, delta: true, index: seenIndex, waitMs: WAIT_MS })
    if (first.index === seenIndex) return seenIndex
    this.markBehind(stream, first.index, replicated)
    if (first.index < replicated) return this.resynchronise(stream, first.index, replicated)
    if (first.body.Mode === 'full') return this.walk(stream, replicated, replicated, first)
    const upserts: Upsert[] = []
    const renames: Upsert[] = []
    for (const item of first.body.Records) await this.sort(stream, item, upserts, renames)
    const deletes: string[] = []
    for (const id of first.body.Deleted) if ((await this.localHash(stream, id)) !== undefined) deletes.push(id)
    await this.apply(stream, upserts, deletes, first.index, replicated, renames)
    this.logApplied(stream, upserts.length + renames.length, deletes.length, first.index)
    this.behindSince.delete(stream)
    return first.index
  }

  /**
   * A full walk: every page of the stream from the first (`first` when already read), records changed after `since`
   * whole, the others as ID and Hash. Upserts are applied as pages come; deletions (what this datacenter holds and the
   * walk did not list) and the claim of the first page's index at the end. A record listed without its body that
   * differs here (this datacenter lost it: restored from an older snapshot) makes the next round walk with every
   * record whole, and this one claims nothing.
   */
  private async walk(stream: ReplicatedStream, since: number, replicated: number, first?: { index: number; body: StreamPage }): Promise<number | undefined> {
    const startedAt = this.now()
    let page = first ?? (await this.page(stream, { since }))
    const remoteIndex = page.index
    this.markBehind(stream, remoteIndex, replicated)
    if (remoteIndex < replicated && since > 0) return this.resynchronise(stream, remoteIndex, replicated)
    const listed = new Set<string>()
    // Held back to the last batch, all in one: records whose names move (swapped between pages, say).
    const renames: Upsert[] = []
    let pending: Upsert[] = []
    let upserted = 0
    let unbodied = 0
    for (;;) {
      // A walk's pages are walk pages: anything else would list what changed, not what there is, and the deletions
      // below would take every unchanged record for gone.
      if (page.body.Mode !== 'full') throw new Error(`the primary answered a page of the ${stream} walk with a ${page.body.Mode}`)
      for (const item of page.body.Records) {
        listed.add(item.ID)
        if ((await this.sort(stream, item, pending, renames)) === 'unbodied') unbodied += 1
      }
      if (pending.length >= UPSERTS_MAX) {
        await this.apply(stream, pending, [], replicated, replicated)
        upserted += pending.length
        pending = []
      }
      if (page.body.Next === '') break
      page = await this.page(stream, { since, cursor: page.body.Next })
    }
    const deletes = (await this.localIds(stream)).filter((id) => !listed.has(id))
    const complete = unbodied === 0
    await this.apply(stream, pending, deletes, complete ? remoteIndex : replicated, replicated, renames)
    upserted += pending.length + renames.length
    this.logApplied(stream, upserted, deletes.length, remoteIndex)
    // The walk's bookkeeping changes only once it has gone through: a walk that failed is tried again at once.
    this.walkDueAt.set(stream, startedAt + FULL_WALK_EVERY_MS)
    if (!complete) {
      this.log.warn({ stream, records: unbodied }, 'records the primary has had for a while differ here: the next round brings every record whole')
      this.wholeNext.add(stream)
      return undefined
    }
    this.wholeNext.delete(stream)
    this.behindSince.delete(stream)
    return remoteIndex
  }

  /** A primary whose index went below the one replicated here (restored from a snapshot): a walk with every record whole. */
  private resynchronise(stream: ReplicatedStream, remoteIndex: number, replicated: number): Promise<number | undefined> {
    this.log.warn({ stream, remoteIndex, replicated }, "the primary's index is below the one replicated (a restore?): resynchronising in full")
    return this.walk(stream, 0, replicated)
  }

  /**
   * Puts a listed record that differs here into `upserts`, or into `renames` when it moves a name; answers
   * 'unbodied' for one that differs but came without its body, 'same' for one equal to what is held here.
   */
  private async sort(stream: ReplicatedStream, item: StreamItem, upserts: Upsert[], renames: Upsert[]): Promise<'sorted' | 'unbodied' | 'same'> {
    if (!(await this.differs(stream, item))) return 'same'
    if (item.Record === undefined) return 'unbodied'
    const upsert = commandRecord(stream, item.Record)
    if (await this.renames(stream, upsert)) renames.push(upsert)
    else upserts.push(upsert)
    return 'sorted'
  }

  /** Whether applying `upsert` moves a name: its own changes, or another record here holds the one it takes. */
  private async renames(stream: ReplicatedStream, upsert: Upsert): Promise<boolean> {
    if (stream !== 'policies' && stream !== 'roles') return false
    const record = upsert as PolicyWrite | RoleWrite
    const reader = this.state.reader
    const existing = stream === 'policies' ? await getRecord(reader, policySpec, record.ID) : await getRecord(reader, roleSpec, record.ID)
    if (existing !== undefined && (existing.Name !== record.Name || existing.Namespace !== record.Namespace)) return true
    const name = nsKey(record.Namespace, record.Name)
    const holder = stream === 'policies' ? await getByUnique(reader, policySpec, 'name', name) : await getByUnique(reader, roleSpec, 'name', name)
    return holder !== undefined && holder.ID !== record.ID
  }

  /**
   * Whether a listed record differs from the one held here. Nothing is taken for applied but what the state holds:
   * both sides compute a record's Hash with the same functions over the same fields (a config entry's from its content).
   */
  private async differs(stream: ReplicatedStream, item: StreamItem): Promise<boolean> {
    return (await this.localHash(stream, item.ID)) !== item.Hash
  }

  /** The Hash of this datacenter's record of `id` in the stream, or undefined when it holds none (its local tokens count as none). */
  private async localHash(stream: ReplicatedStream, id: string): Promise<string | undefined> {
    const reader = this.state.reader
    if (stream === 'config') {
      const address = configDeleteAddress(id)
      if (address === undefined || LOCAL_CONFIG_KINDS.has(address.Kind)) return undefined
      const entry = await getRecord(reader, configSpec, configEntryKey(address))
      return entry === undefined ? undefined : configContentHash(entry as unknown as Record<string, unknown>)
    }
    if (stream === 'tokens') {
      const token = await getRecord(reader, tokenSpec, id)
      return token === undefined || token.Local ? undefined : token.Hash
    }
    if (stream === 'policies') return (await getRecord(reader, policySpec, id))?.Hash
    return (await getRecord(reader, roleSpec, id))?.Hash
  }

  /** The IDs this datacenter holds of a stream: for tokens its global ones only, for config every kind but its own. */
  private async localIds(stream: ReplicatedStream): Promise<string[]> {
    const reader = this.state.reader
    // Policies and roles by their keys alone (their IDs): nothing to decode.
    if (stream === 'policies' || stream === 'roles') {
      const prefix = recordPrefix(stream === 'policies' ? 'policy' : 'role')
      return (await reader.keys(prefix)).map((key) => key.slice(prefix.length))
    }
    // Paced (lib/pace.ts): a million tokens decoded in one go would hold this secondary's event loop, its Raft group's
    // heartbeats among the rest, for seconds.
    if (stream === 'tokens') return (await listRecords(reader, tokenSpec, '', pacer())).filter((token) => !token.Local).map((token) => token.AccessorID)
    return (await listRecords(reader, configSpec, '', pacer())).filter((entry) => !LOCAL_CONFIG_KINDS.has(entry.Kind)).map((entry) => configDeleteKey(entry))
  }

  private markBehind(stream: ReplicatedStream, remoteIndex: number, replicated: number): void {
    if (remoteIndex !== replicated && !this.behindSince.has(stream)) this.behindSince.set(stream, this.now())
  }

  private logApplied(stream: ReplicatedStream, upserts: number, deletes: number, remoteIndex: number): void {
    if (upserts + deletes > 0) this.log.info({ stream, upserts, deletes, remoteIndex }, 'replicated from the primary')
  }

  /** Waits for the stream's bucket to allow a round. */
  private async limit(stream: ReplicatedStream): Promise<void> {
    let bucket = this.limiters.get(stream)
    if (bucket === undefined) {
      bucket = new TokenBucket(this.settings.rate, this.settings.burst, this.now)
      this.limiters.set(stream, bucket)
    }
    for (let waitMs = bucket.take(); waitMs > 0 && !this.stopped; waitMs = bucket.take()) await this.sleep(waitMs)
  }

  /** Proposes the changes in bounded, paced batches; the last one records `remoteIndex`. */
  /**
   * Proposes the changes in bounded, paced batches; the last one records `remoteIndex`. `renames` (records whose name
   * another record holds here, or whose own name moves) go together in one batch, bounded by bytes only: applied one
   * by one, the first of two records swapping names would drop the other (its name's holder) until a later batch
   * brought it back, and tokens linked to it would lose its rules meanwhile.
   */
  private async apply(stream: ReplicatedStream, upserts: Upsert[], deletes: string[], remoteIndex: number, replicated: number, renames: Upsert[] = []): Promise<void> {
    const batches: Array<{ upserts: Upsert[]; deletes: string[] }> = []
    for (let start = 0; start < deletes.length; start += DELETES_MAX) batches.push({ upserts: [], deletes: deletes.slice(start, start + DELETES_MAX) })
    // At most UPSERTS_MAX records and UPSERT_BYTES_MAX bytes (as JSON, about what msgpack takes) a batch: a config
    // entry may be 1 MiB, and a command larger than a peer frame (8 MiB) could never replicate.
    const group = (records: Upsert[], countMax: number): void => {
      let batch: Upsert[] = []
      let bytes = 0
      for (const upsert of records) {
        const size = JSON.stringify(upsert).length
        if (batch.length > 0 && (batch.length >= countMax || bytes + size > UPSERT_BYTES_MAX)) {
          batches.push({ upserts: batch, deletes: [] })
          batch = []
          bytes = 0
        }
        batch.push(upsert)
        bytes += size
      }
      if (batch.length > 0) batches.push({ upserts: batch, deletes: [] })
    }
    group(renames, REPLICATED_ITEMS_MAX)
    group(upserts, UPSERTS_MAX)
    // Nothing to change but the index moved: one empty batch records it, so a new leader need not diff again.
    if (batches.length === 0 && remoteIndex !== replicated) batches.push({ upserts: [], deletes: [] })
    for (const [position, batch] of batches.entries()) {
      if (this.stopped || !this.cluster.isLeader()) throw new Error('no longer the leader')
      const records = batch.upserts.length + batch.deletes.length
      // Paced over every batch of every stream, not per call: `applyRate` records a second in all.
      const waitMs = this.paceAt - this.now()
      if (waitMs > 0) await this.sleep(waitMs)
      // Stopped while waiting: nothing more goes out. (Leadership lost meanwhile needs no check: a leaderOnly propose
      // is refused on a node that no longer leads, never forwarded.)
      if (this.stopped) throw new Error('stopping')
      this.paceAt = Math.max(this.now(), this.paceAt) + (1_000 * records) / this.settings.applyRate
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
      // Never forwarded: a deposed leader's batch, built from what it read a moment ago, would land after the new
      // leader's newer ones.
      const result = await this.cluster.propose(command, { leaderOnly: true })
      if (!result.ok) throw new Error(`a replication batch was refused: ${result.error.message}`)
    }
  }

  /**
   * One page of the stream at the primary (GET /v1/internal/acl/replication/:stream over the WAN links, with the
   * replication token): blocking when `index` is given. Anything but 200 is an error naming what the primary said.
   */
  private async page(stream: ReplicatedStream, query: { since: number; delta?: boolean; cursor?: string; index?: number; waitMs?: number }): Promise<{ index: number; body: StreamPage }> {
    const params = new URLSearchParams({ since: String(query.since), limit: String(PAGE_ITEMS) })
    if (query.delta === true) params.set('mode', 'delta')
    if (query.cursor !== undefined) params.set('cursor', query.cursor)
    if (query.index !== undefined) {
      params.set('index', String(query.index))
      params.set('wait', `${query.waitMs ?? WAIT_MS}ms`)
    }
    const path = `/v1/internal/acl/replication/${stream}?${params.toString()}`
    const answer: ForwardedAnswer = await this.forwarder.forward(this.settings.primary, { method: 'GET', path, headers: { 'x-service-token': this.settings.token ?? '' } }, query.waitMs ?? 60_000)
    const text = answer.body.toString('utf8')
    if (answer.status !== 200) {
      const hint = answer.status === 403 ? (stream === 'policies' || stream === 'roles' ? ' (the replication token needs acl:read)' : ' (the replication token needs acl:write)') : ''
      throw new WardenError('internal', `the primary answered ${stream} with ${answer.status}${hint}: ${safeError(text)}`)
    }
    const index = Number(answer.headers['x-service-index'] ?? '')
    if (!Number.isSafeInteger(index) || index < 0) throw new Error(`the primary answered ${stream} without an index`)
    const body = JSON.parse(text) as StreamPage
    if (typeof body !== 'object' || body === null || !Array.isArray(body.Records) || !Array.isArray(body.Deleted) || typeof body.Next !== 'string' || (body.Mode !== 'full' && body.Mode !== 'delta')) {
      throw new Error(`the primary's ${stream} page is not one`)
    }
    for (const item of body.Records) if (typeof item?.ID !== 'string' || typeof item.Hash !== 'string') throw new Error(`the primary's ${stream} page holds an entry without ID and Hash`)
    return { index, body }
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

type Upsert = PolicyWrite | RoleWrite | TokenCreate | ConfigEntryWrite

/** A stored record of the primary as the upsert of an `acl.replicate` batch: the fields its command carries. */
function commandRecord(stream: ReplicatedStream, record: Record<string, unknown>): Upsert {
  if (stream === 'policies') return policyOf(record)
  if (stream === 'roles') return roleOf(record)
  if (stream === 'tokens') return tokenOf(record)
  return withoutIndexes(record)
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

function withoutIndexes(entry: Record<string, unknown>): ConfigEntryWrite {
  const { CreateIndex: _create, ModifyIndex: _modify, ...fields } = entry
  return fields as ConfigEntryWrite
}
