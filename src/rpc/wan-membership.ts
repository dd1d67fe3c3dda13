/**
 * Which servers of which datacenters exist (issue 19): the WAN membership every server keeps, learned over WAN links
 * from `--join-wan` addresses and from each other, so one address is enough and a datacenter added later becomes
 * known to all (what Consul's WAN gossip pool does, without gossip: the few servers of a federation link directly).
 *
 * - Each server knows itself (its WAN name NODE.DC, datacenter, advertised cluster address, and `since`, the time it
 *   started, which orders two records of one server: the later start wins, with its address).
 * - When a WAN link opens, each side sends the other every member it knows; when a side learns a member or a newer
 *   record, it tells every server it has a link with. Members are the WAN transport's peers, so it links with all.
 * - A `--join-wan` address is dialed (introduce) with backoff until a server there answers; then it is a member and
 *   the rest follows. An address that never answers is retried for as long as the agent runs, as Consul's
 *   retry_join_wan.
 *
 * Bounded: at most MEMBERS_MAX members (the WAN transport's own bound), and a members message larger than that is
 * refused whole. A member this server has not been linked with for `reapAfterMs` (default 72 h, Consul's
 * reconnect_timeout_wan) is dropped, and the same record of it is not taken back from others; a later start of that
 * server (a larger `since`) is.
 */
import type { Logger } from 'pino'
import { randomInt } from 'node:crypto'
import { Backoff } from '../lib/backoff.js'
import { clusterAddressProblem } from '../lib/cluster-address.js'
import { LogLimiter } from '../lib/log-limiter.js'
import { datacenterOfWanName } from '../transport/frames.js'
import type { PeerTransport } from '../transport/index.js'

/** As the WAN transport's peersMax default: a federation of many datacenters of a few servers each. */
export const MEMBERS_MAX = 512
/** Clocks of servers differ: a start this far in the future is still believed. */
const SINCE_SLACK_MS = 5 * 60_000

export interface Member {
  /** NODE.DC */
  name: string
  datacenter: string
  /** Its advertised cluster address. */
  address: string
  /** When it started, in ms since the epoch: of two records of one server, the later start holds. */
  since: number
}

/** What travels on WAN links as a message. */
export interface MembersMessage {
  type: 'wan.members'
  members: Member[]
}

export interface MembershipOptions {
  transport: PeerTransport
  self: Member
  join: readonly string[]
  log: Logger
  /** Redial delays of --join-wan addresses. */
  backoff?: { initialMs: number; maxMs: number; jitter: number }
  /** How long a member may stay unlinked before it is dropped. Default 72 h. */
  reapAfterMs?: number
  /** How often members are checked for that. Default 1 min. */
  sweepIntervalMs?: number
}

const REAP_AFTER_MS_DEFAULT = 72 * 3_600_000
const SWEEP_INTERVAL_MS_DEFAULT = 60_000

export interface DatacenterServer {
  name: string
  datacenter: string
  /** Whether this server has an open WAN link with it now. */
  connected: boolean
  rttMs: number | undefined
}

export class WanMembership {
  private readonly members = new Map<string, Member>()
  private readonly warnings = new LogLimiter()
  private readonly joinTimers = new Set<NodeJS.Timeout>()
  /** When each member other than this server was last linked with (or learned of). Keys: the members'. */
  private readonly lastSeen = new Map<string, number>()
  /** Members dropped, by name, with the start of the record dropped: that record is not taken back. Bounded. */
  private readonly reaped = new Map<string, number>()
  private sweepTimer: NodeJS.Timeout | undefined
  private stopped = false

  constructor(private readonly options: MembershipOptions) {
    this.members.set(options.self.name, options.self)
  }

  start(): void {
    const { transport } = this.options
    transport.onPeerState((peer, connected) => {
      if (this.stopped) return
      if (this.members.has(peer)) this.lastSeen.set(peer, Date.now())
      if (!connected) return
      // A server that dialed us is a member from now on, at the address it advertised, until a record says better.
      if (!this.members.has(peer)) this.adoptConnected(peer)
      transport.send(peer, this.message())
    })
    transport.onMessage((from, message) => this.onMessage(from, message))
    for (const address of this.options.join) this.join(address)
    this.sweepTimer = setInterval(() => this.sweep(), this.options.sweepIntervalMs ?? SWEEP_INTERVAL_MS_DEFAULT)
  }

  stop(): void {
    this.stopped = true
    clearInterval(this.sweepTimer)
    for (const timer of this.joinTimers) clearTimeout(timer)
    this.joinTimers.clear()
  }

  /** Every member, this server included, by name. */
  list(): Member[] {
    return [...this.members.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  }

  /**
   * The datacenters known: this server's first, then the others by the best round-trip time of a linked server of
   * theirs (those with none linked last), then by name (Consul: sorted by round-trip time estimates).
   */
  datacenters(): string[] {
    const best = new Map<string, number>()
    for (const server of this.servers()) {
      if (server.datacenter === this.options.self.datacenter) continue
      const rtt = server.connected ? (server.rttMs ?? Number.MAX_SAFE_INTEGER - 1) : Number.MAX_SAFE_INTEGER
      best.set(server.datacenter, Math.min(best.get(server.datacenter) ?? Number.MAX_SAFE_INTEGER, rtt))
    }
    const others = [...best.entries()].sort(([a, rttA], [b, rttB]) => rttA - rttB || (a < b ? -1 : a > b ? 1 : 0)).map(([datacenter]) => datacenter)
    return [this.options.self.datacenter, ...others]
  }

  /** The servers of `datacenter` (this one excluded), linked ones first by round-trip time. */
  serversOf(datacenter: string): DatacenterServer[] {
    return this.servers()
      .filter((server) => server.datacenter === datacenter && server.name !== this.options.self.name)
      .sort((a, b) => Number(b.connected) - Number(a.connected) || (a.rttMs ?? Infinity) - (b.rttMs ?? Infinity) || (a.name < b.name ? -1 : 1))
  }

  private servers(): DatacenterServer[] {
    const peers = this.options.transport.stats().peers
    return [...this.members.values()].map((member) => {
      const stats = peers.get(member.name)
      return { name: member.name, datacenter: member.datacenter, connected: stats?.connected === true, rttMs: stats?.rttMs }
    })
  }

  /** Drops the members not linked with for reapAfterMs, and stops linking with them. */
  private sweep(): void {
    const now = Date.now()
    const reapAfterMs = this.options.reapAfterMs ?? REAP_AFTER_MS_DEFAULT
    const peers = this.options.transport.stats().peers
    let dropped = false
    for (const member of [...this.members.values()]) {
      if (member.name === this.options.self.name) continue
      if (peers.get(member.name)?.connected === true) {
        this.lastSeen.set(member.name, now)
        continue
      }
      const seen = this.lastSeen.get(member.name) ?? now
      if (!this.lastSeen.has(member.name)) this.lastSeen.set(member.name, now)
      if (now - seen < reapAfterMs) continue
      this.members.delete(member.name)
      this.lastSeen.delete(member.name)
      this.reaped.delete(member.name)
      if (this.reaped.size >= MEMBERS_MAX) this.reaped.delete(this.reaped.keys().next().value as string)
      this.reaped.set(member.name, member.since)
      this.options.log.info({ member: member.name, unlinkedForMs: now - seen }, 'WAN member dropped: not linked with for too long')
      dropped = true
    }
    if (!dropped) return
    const kept = new Map([...this.members.values()].filter((member) => member.name !== this.options.self.name).map((member) => [member.name, member.address]))
    this.options.transport.setPeers(kept)
  }

  private message(): MembersMessage {
    return { type: 'wan.members', members: this.list() }
  }

  /** Dials a --join-wan address until a server there answers. */
  private join(address: string): void {
    const backoff = new Backoff(this.options.backoff ?? { initialMs: 250, maxMs: 30_000, jitter: 0.5 }, () => randomInt(2 ** 32) / 2 ** 32)
    const attempt = (): void => {
      if (this.stopped) return
      this.options.transport.introduce(address).then(
        (name) => this.options.log.info({ address, server: name }, 'joined the WAN through a server of another datacenter'),
        (error: unknown) => {
          if (this.stopped) return
          this.warnings.warn(this.options.log, `join-wan\u0000${address}`, { address, err: (error as Error).message }, 'WAN join attempt failed; retrying')
          const timer = setTimeout(() => {
            this.joinTimers.delete(timer)
            attempt()
          }, backoff.next())
          this.joinTimers.add(timer)
        },
      )
    }
    attempt()
  }

  private adoptConnected(name: string): void {
    const datacenter = datacenterOfWanName(name)
    const address = this.options.transport.stats().peers.get(name)?.advertiseAddress
    if (datacenter === undefined || address === undefined) return
    // `since` 0: any record the server sends of itself is newer.
    this.merge([{ name, datacenter, address, since: 0 }])
  }

  private onMessage(from: string, message: unknown): void {
    if (this.stopped) return
    const members = membersOf(message)
    if (members === undefined) {
      this.warnings.warn(this.options.log, 'bad members message', { from }, 'a WAN message that is not a members list was ignored')
      return
    }
    this.merge(members, from)
  }

  /**
   * Takes what is new; when anything was, the transport links with every member and every linked server hears.
   * `from`: the server that sent the records. What a server says of a server this one is linked with counts only when
   * it says it of itself (first-hand beats hearsay), and a record started in the future (past clock slack) is refused:
   * without both, one server could move every other's address away for good with a large `since`.
   */
  private merge(records: readonly Member[], from?: string): void {
    let changed = false
    const linked = this.options.transport.stats().peers
    const latestSince = Date.now() + SINCE_SLACK_MS
    for (const record of records) {
      if (record.name === this.options.self.name || record.since > latestSince) continue
      if (from !== undefined && record.name !== from && linked.get(record.name)?.connected === true) continue
      // The record of a member dropped here: others may still hold it; only that server itself (linked again) or a
      // later start of it brings it back.
      const reapedSince = this.reaped.get(record.name)
      if (reapedSince !== undefined && record.since <= reapedSince && record.name !== from) continue
      const known = this.members.get(record.name)
      if (known !== undefined && known.since >= record.since) continue
      if (known === undefined && this.members.size >= MEMBERS_MAX) {
        this.warnings.warn(this.options.log, 'members full', { member: record.name, max: MEMBERS_MAX }, 'WAN membership is full; a server was not added')
        continue
      }
      if (known === undefined) this.options.log.info({ member: record.name, datacenter: record.datacenter, address: record.address }, 'WAN member added')
      this.members.set(record.name, record)
      this.reaped.delete(record.name)
      if (!this.lastSeen.has(record.name)) this.lastSeen.set(record.name, Date.now())
      changed = true
    }
    if (!changed) return
    const { transport } = this.options
    // The transport adopts servers that dial it before they are members here: keep them as peers as well.
    const peers = new Map([...this.members.values()].filter((member) => member.name !== this.options.self.name).map((member) => [member.name, member.address]))
    for (const [name, stats] of transport.stats().peers) if (!peers.has(name)) peers.set(name, stats.address)
    transport.setPeers(peers)
    const message = this.message()
    for (const [name, stats] of transport.stats().peers) if (stats.connected) transport.send(name, message)
  }
}

/** The members of a message, each checked, or undefined when it is not a members message a server would send. */
export function membersOf(message: unknown): Member[] | undefined {
  if (typeof message !== 'object' || message === null) return undefined
  const { type, members } = message as { type?: unknown; members?: unknown }
  if (type !== 'wan.members' || !Array.isArray(members) || members.length > MEMBERS_MAX) return undefined
  const checked: Member[] = []
  for (const entry of members) {
    if (typeof entry !== 'object' || entry === null) return undefined
    const { name, datacenter, address, since } = entry as Record<string, unknown>
    if (typeof name !== 'string' || typeof datacenter !== 'string' || datacenterOfWanName(name) !== datacenter) return undefined
    if (clusterAddressProblem(address) !== undefined || typeof address !== 'string') return undefined
    if (typeof since !== 'number' || !Number.isSafeInteger(since) || since < 0) return undefined
    checked.push({ name, datacenter, address, since })
  }
  return checked
}
