/**
 * Membership: the address book (who is dialed where), changes the leader makes (join, promotion, removal, a rebuilt
 * server's re-add), and a new server's way in (discovery for a founding server with an empty data dir).
 *
 * Addresses: a server named by this node's flags (--peer) is dialed where the flags say, whatever it advertises (it may
 * sit behind a proxy); every other member is dialed at the address the replicated member table records.
 *
 * Joining (Thesis §4.2.1): a new server is added as a non-voter and promoted once its log has reached the leader's
 * commit index. A server that asks to join while it is a voter lost its data (or never heard the answer to its join):
 * it is removed and added again as a non-voter, and told the index of that re-add, before which it neither votes nor
 * campaigns (founding.ts, MembershipRecord).
 */
import { assert } from '../lib/assert.js'
import type { Timer } from '../lib/environment.js'
import { WardenError } from '../lib/errors.js'
import { decodeConfiguration, type Entry } from '../raft/index.js'
import type { MembershipRecord } from '../raft/storage/raft-storage.js'
import { VOTE_INDEX_UNKNOWN } from '../raft/storage/raft-storage.js'
import { COMMAND_VERSION, type Command } from '../state/commands.js'
import { encodeCommand } from '../state/store.js'
import { getRecord, listRecords, memberSpec } from '../state/tables.js'
import { decideFounding, type ClusterStateAnswer } from './founding.js'
import type { RaftReplica } from './raft-replica.js'

/** How often a server asks a peer for the addresses it knows (see gossip). */
const GOSSIP_INTERVAL_MS = 3_000

/** How often a leader looks for learners to promote. */
const PROMOTION_CHECK_MS = 1_000

/** How long the leader waits for a joining server to catch up before leaving it a non-voter. */
const PROMOTION_WAIT_MS = 120_000

/** What a server that asked to join hears back: every member's address, and the index before which it may not vote. */
export interface JoinAnswer {
  members: Record<string, string>
  voteFromIndex: number
}

/** Checks a cluster address from a join before it goes into the log; returns the problem, or undefined. */
export type AddressCheck = (address: string) => string | undefined

export class Membership {
  /** Where each member is dialed (name → address), this node included (its advertised address). */
  private readonly addresses: Map<string, string>
  /** Addresses peers advertised in their handshakes, which may differ from the addresses dialed (proxies). */
  private readonly advertised = new Map<string, string>()
  private readonly promoting = new Set<string>()
  /** Servers whose join this leader is processing: not promoted before their incarnation's entry is in (joinAsLeader). */
  private readonly joining = new Set<string>()
  private stopped = false
  private gossipTimer: Timer | undefined
  private promotionTimer: Timer | undefined
  constructor(
    private readonly replica: RaftReplica,
    private readonly dialAddresses: ReadonlyMap<string, string>,
    private record: MembershipRecord,
    /** Checks a joining server's address (the agent passes the transport's rule). */
    private readonly addressCheck: AddressCheck,
  ) {
    this.addresses = new Map(dialAddresses)
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The address book.

  /** Reads the member table (at start, and after a snapshot replaced the state); learned addresses fill the gaps. */
  async loadAddresses(): Promise<void> {
    for (const [node, address] of Object.entries(this.replica.storage.learnedAddresses())) {
      if (this.dialsFromTable(node) && !this.addresses.has(node)) this.addresses.set(node, address)
    }
    for (const member of await listRecords(this.replica.state.reader, memberSpec)) {
      if (this.dialsFromTable(member.Node)) this.addresses.set(member.Node, member.Address)
      this.noticeOwnEntry(member, member.ModifyIndex)
    }
    this.updatePeers()
  }

  /** Whether this node dials `node` at the address the member table records (see the file's comment). */
  private dialsFromTable(node: string): boolean {
    return node !== this.replica.nodeName && !this.dialAddresses.has(node)
  }

  private updatePeers(): void {
    const peers = new Map([...this.addresses].filter(([node, address]) => node !== this.replica.nodeName && address !== ''))
    this.replica.links.setPeers(peers)
  }

  onPeerState(peer: string, connected: boolean): void {
    if (connected) this.noticeAdvertised(peer)
  }

  /**
   * At start, right after the replica registered its onPeerState handler: the links already open then (the transport
   * dials the --peer servers before the replica exists) are never reported, so their advertised addresses are read here.
   */
  noticeOpenLinks(): void {
    for (const peer of this.addresses.keys()) if (peer !== this.replica.nodeName) this.noticeAdvertised(peer)
  }

  /** Keeps the address `peer` advertised on its open link, if it has one; the last one is kept once the link is lost. */
  private noticeAdvertised(peer: string): void {
    const advertised = this.replica.links.advertisedAddress(peer)
    if (advertised !== undefined) this.advertised.set(peer, advertised)
  }

  /**
   * Whether this node's peer link to `peer` is open now. Asked of the links rather than tracked from onPeerState,
   * which reports only the changes after the replica started (a link may be open before).
   */
  linkOpen(peer: string): boolean {
    return this.replica.links.advertisedAddress(peer) !== undefined
  }

  addressOf(node: string): string {
    if (node === this.replica.nodeName) return this.addresses.get(node) ?? ''
    return this.advertised.get(node) ?? this.addresses.get(node) ?? ''
  }

  /** Every member's address as this node knows it. */
  knownAddresses(): Record<string, string> {
    return Object.fromEntries(this.addresses)
  }

  /** Adds addresses a join answer gave (for members this node's flags do not name), and keeps them for a restart. */
  learnAddresses(members: Record<string, string>): void {
    for (const [node, address] of Object.entries(members)) if (this.dialsFromTable(node)) this.addresses.set(node, address)
    this.updatePeers()
    this.saveLearned()
  }

  private saveLearned(): void {
    const learned = Object.fromEntries([...this.addresses].filter(([node]) => this.dialsFromTable(node)))
    this.replica.storage.saveLearnedAddresses(learned).catch((error: unknown) => {
      if (!this.stopped) this.replica.log.warn({ err: error }, 'could not keep the addresses learned; a restart asks again')
    })
  }

  /**
   * What an applied entry changes in the address book. Never throws: a committed entry is applied by every server, and
   * an address no server can dial must not stop them all (it is skipped with a warning).
   */
  afterApply(entry: Entry, command: Command): void {
    try {
      if (command.type === 'raft.member.set') this.noticeOwnEntry(command, entry.index)
      if (command.type === 'raft.member.set' && this.dialsFromTable(command.Node)) {
        this.addresses.set(command.Node, command.Address)
        this.updatePeers()
      } else if (command.type === 'raft.member.delete' && this.dialsFromTable(command.Node)) {
        this.addresses.delete(command.Node)
        this.updatePeers()
      } else if (entry.type === 'configuration') {
        const configuration = decodeConfiguration(entry.data)
        this.replica.log.info({ index: entry.index, voters: configuration.voters, learners: configuration.learners }, 'membership changed')
      }
    } catch (error) {
      this.replica.log.warn({ err: error, index: entry.index }, 'a membership entry could not be acted on; skipped')
    }
  }

  membership(): { index: number; servers: Array<{ id: string; address: string; voter: boolean }> } {
    const status = this.replica.status()
    return {
      index: status.configurationIndex,
      servers: [
        ...status.configuration.voters.map((id) => ({ id, address: this.addressOf(id), voter: true })),
        ...status.configuration.learners.map((id) => ({ id, address: this.addressOf(id), voter: false })),
      ],
    }
  }

  peerAddresses(): string[] {
    return this.replica.status().configuration.voters.map((id) => this.addressOf(id)).filter((address) => address !== '')
  }

  // ---------------------------------------------------------------------------------------------------------------
  // On the leader.

  /**
   * On the leader, every second: learners whose log has reached the commit index become voters. Every server that is
   * a learner asked to join, so none is meant to stay one; a join whose leader stepped down before promoting it is
   * finished by the next leader (Consul's autopilot does the same).
   */
  private promoteLearners(): void {
    if (this.stopped || !this.replica.isLeader()) return
    for (const learner of this.replica.status().configuration.learners) void this.promoteWhenCaughtUp(learner)
  }

  /** On a new leader: every member's address recorded, addresses of servers no longer members forgotten. */
  onBecomeLeader(): void {
    this.promoteLearners()
    this.replica
      .readIndex()
      .then(async (confirmed) => {
        if (confirmed === 'confirmed') await this.recordKnownMembers()
      })
      .catch((error: unknown) => this.replica.log.debug({ err: error }, 'recording members failed; the next leader retries'))
  }

  /**
   * Every member of the configuration has its address recorded, and addresses of servers no longer in it (a leader
   * that removed itself) are forgotten. A server between its address and its configuration change (a join under way)
   * loses its address too; its join is retried and records it again.
   */
  private async recordKnownMembers(): Promise<void> {
    const recorded = new Map((await listRecords(this.replica.state.reader, memberSpec)).map((member) => [member.Node, member.Address]))
    const configuration = this.replica.status().configuration
    const inConfiguration = new Set([...configuration.voters, ...configuration.learners])
    for (const [node, address] of this.addresses) {
      if (address !== '' && inConfiguration.has(node) && recorded.get(node) !== address) {
        await this.propose({ v: COMMAND_VERSION, type: 'raft.member.set', Node: node, Address: address })
      }
    }
    for (const node of recorded.keys()) {
      if (!inConfiguration.has(node)) await this.propose({ v: COMMAND_VERSION, type: 'raft.member.delete', Node: node })
    }
  }

  private async propose(command: Command): Promise<void> {
    const { result } = await this.replica.proposeLocally(encodeCommand(command))
    if (!result.ok) throw new WardenError('invalid_input', `${command.type} was refused: ${JSON.stringify(result)}`)
  }

  /**
   * Adds `node` (or re-adds it without a vote, if it asks while a voter); the leader only. The address is recorded
   * after the configuration changes, with the joining data dir's incarnation, so that a server whose answer is lost
   * learns from that entry that its re-add is behind it (noticeOwnEntry). This leader dials it meanwhile.
   */
  async joinAsLeader(node: string, address: string, incarnation?: string): Promise<JoinAnswer> {
    const problem = this.addressCheck(address)
    if (problem !== undefined) throw new WardenError('invalid_input', `Address: ${problem}`, 'Address')
    if (node === this.replica.nodeName) throw new WardenError('invalid_input', `Node: ${node} is the leader itself and cannot join again`, 'Node')
    if (incarnation !== undefined && (typeof incarnation !== 'string' || incarnation.length > 64)) throw new WardenError('invalid_input', 'Incarnation: must be a string of at most 64 characters', 'Incarnation')
    if (this.dialsFromTable(node)) {
      this.addresses.set(node, address)
      this.updatePeers()
    }
    this.joining.add(node)
    try {
      return await this.changeForJoin(node, address, incarnation)
    } finally {
      this.joining.delete(node)
      void this.promoteWhenCaughtUp(node)
    }
  }

  private async changeForJoin(node: string, address: string, incarnation: string | undefined): Promise<JoinAnswer> {
    if (this.replica.status().configuration.voters.includes(node)) {
      // A voter asking to join lost its log and its votes (a rebuilt server): it must not count until caught up again.
      await this.replica.proposeConfChange({ type: 'removeServer', nodeId: node })
      this.replica.log.warn({ node }, 'a voter asked to join again (its data was lost): removed, re-adding it as a non-voter')
    }
    let voteFromIndex: number
    const configuration = this.replica.status()
    if (configuration.configuration.learners.includes(node)) {
      // Already a non-voter (a join retried): it was added at or before the latest configuration.
      voteFromIndex = configuration.configurationIndex
    } else {
      // Thesis §4.2.1: a new server joins without a vote, so that it cannot slow down commits while it catches up.
      voteFromIndex = await this.replica.proposeConfChange({ type: 'addLearner', nodeId: node })
      this.replica.log.info({ node, address }, 'server joined as a non-voter')
    }
    await this.propose({ v: COMMAND_VERSION, type: 'raft.member.set', Node: node, Address: address, ...(incarnation === undefined ? {} : { Incarnation: incarnation }) })
    return { members: this.knownAddresses(), voteFromIndex }
  }

  /** Promotes a learner once its log has reached the leader's commit index, checking for a bounded time. */
  private async promoteWhenCaughtUp(node: string): Promise<void> {
    if (this.promoting.has(node)) return
    this.promoting.add(node)
    const { environment } = this.replica
    try {
      const deadline = environment.now() + PROMOTION_WAIT_MS
      while (!this.stopped && this.replica.isLeader() && environment.now() < deadline) {
        const status = this.replica.status()
        if (!status.configuration.learners.includes(node)) return
        if (this.joining.has(node)) {
          await this.replica.pause(100)
          continue
        }
        const progress = status.progress?.[node]
        // The entry recording its incarnation tells a server that missed its join's answer where it may vote from:
        // it must be committed and in the server's log before the promotion makes it a voter, or it would count as a
        // voter that cannot vote (the promotion carries that commit index with it).
        const recorded = await getRecord(this.replica.state.reader, memberSpec, node)
        const told = recorded?.Incarnation === undefined ? 0 : recorded.ModifyIndex
        // And its own answers must count: a learner still waiting for its join's answer marks them `rebuilt`. The
        // member entry may be an earlier incarnation's (the server was wiped since, and its new join's entry was lost
        // with a leader): promoted then, it would be a voter that counts for nothing until its join is answered, and a
        // second such voter (a wiped one) leaves four voters without a quorum (seed 0x18869fa9).
        const vouches = progress !== undefined && progress.vouchedIndex >= status.commitIndex
        if (recorded !== undefined && progress !== undefined && vouches && progress.matchIndex >= status.commitIndex && status.commitIndex >= told && progress.matchIndex >= told) {
          await this.replica.proposeConfChange({ type: 'addVoter', nodeId: node })
          this.replica.log.info({ node }, 'server caught up and became a voter')
          return
        }
        await this.replica.pause(100)
      }
      if (!this.stopped && this.replica.isLeader()) this.replica.log.warn({ node }, 'a joining server did not catch up in time; it stays a non-voter for now')
    } catch (error) {
      this.replica.log.warn({ err: error, node }, 'promoting a joining server failed')
    } finally {
      this.promoting.delete(node)
    }
  }

  /** Removes a server (Thesis §4.2.2: the leader may remove itself; it steps down once the change commits). */
  async removeAsLeader(node: string): Promise<void> {
    await this.replica.proposeConfChange({ type: 'removeServer', nodeId: node })
    this.replica.log.info({ node }, 'server removed')
    // The address goes after the configuration change, so the links the change needs stay up until it commits. A
    // leader that removed itself has stepped down and is out of the cluster: the next leader forgets its address.
    if (node !== this.replica.nodeName) await this.propose({ v: COMMAND_VERSION, type: 'raft.member.delete', Node: node })
  }

  // ---------------------------------------------------------------------------------------------------------------
  // A new server's way in.

  /**
   * Every few seconds, asks a random peer for the addresses it knows and dials any member this node has no address for.
   * A follower that lags behind the member entry of a server that joined later (and may lead now) could otherwise
   * never answer it: the transport keeps links only to servers it knows, and the entry that would tell it is exactly
   * what that server is trying to send it.
   */
  private gossip(): void {
    const { links } = this.replica
    const peers = [...this.addresses.keys()].filter((name) => name !== this.replica.nodeName)
    const peer = peers[Math.floor(this.replica.random() * peers.length)]
    if (peer === undefined) return
    links
      .request(peer, { kind: 'addresses' }, 2_000)
      .then((answer) => {
        const known = (answer as { members?: unknown } | undefined)?.members
        if (typeof known !== 'object' || known === null || this.stopped) return
        let learned = false
        for (const [node, address] of Object.entries(known as Record<string, unknown>)) {
          if (typeof address !== 'string' || this.addresses.has(node) || !this.dialsFromTable(node)) continue
          if (this.addressCheck(address) !== undefined) continue
          this.addresses.set(node, address)
          learned = true
        }
        if (learned) {
          this.updatePeers()
          this.saveLearned()
        }
      })
      .catch(() => undefined)
  }

  afterStart(): void {
    this.gossipTimer = this.replica.environment.setInterval(() => this.gossip(), GOSSIP_INTERVAL_MS)
    this.promotionTimer = this.replica.environment.setInterval(() => this.promoteLearners(), PROMOTION_CHECK_MS)
    if (this.record.voteFromIndex === VOTE_INDEX_UNKNOWN && this.record.voters.length > 0) {
      // Only the storage can fail here (a peer that does not answer is retried): the node cannot go on without it.
      this.discover().catch((error: unknown) => this.replica.reportFatal(error))
    }
  }

  /**
   * A founding server with an empty data dir: asks its peers whether the cluster exists, then founds it or rejoins it
   * (founding.ts). Until one of the two is recorded it neither votes nor campaigns.
   */
  private async discover(): Promise<void> {
    const founders = this.record.voters
    const { links, log } = this.replica
    for (let attempt = 0; !this.stopped; attempt += 1) {
      const answers = new Map<string, ClusterStateAnswer>()
      await Promise.all(
        founders
          .filter((peer) => peer !== this.replica.nodeName)
          .map(async (peer) => {
            try {
              const answer = (await links.request(peer, { kind: 'cluster-state' }, 1_000)) as Partial<ClusterStateAnswer> | undefined
              if (typeof answer?.existing === 'boolean') answers.set(peer, { existing: answer.existing })
            } catch {
              // Not reachable yet, or a build that does not know the question: no answer counts either way.
            }
          }),
      )
      if (this.stopped) return
      const decision = this.replica.holdsRaftState() ? 'rejoin' : decideFounding(founders, answers)
      if (decision === 'found') {
        await this.recordVoteFrom(0)
        log.info({ founders }, 'founded the cluster: none of its founding members holds Raft state')
        return
      }
      if (decision === 'rejoin') {
        log.warn('this server has an empty data dir but its cluster already exists (founded without it, or it lost its data): joining as a non-voter until it has caught up')
        await this.rejoinThroughPeers()
        return
      }
      await this.replica.pause(Math.min(2_000, 100 * 2 ** Math.min(attempt, 5)))
    }
  }

  /** Asks any peer to have the leader re-add this server, until one answers. */
  private async rejoinThroughPeers(): Promise<void> {
    const { links, log } = this.replica
    const address = this.addressOf(this.replica.nodeName)
    for (let attempt = 0; !this.stopped && this.awaitingJoin(); attempt += 1) {
      for (const peer of this.addresses.keys()) {
        if (peer === this.replica.nodeName || this.stopped || !this.awaitingJoin()) continue
        try {
          const join = { kind: 'join', node: this.replica.nodeName, address, ...(this.record.incarnation === undefined ? {} : { incarnation: this.record.incarnation }) }
          const answer = (await links.request(peer, join, this.replica.applyWaitMs)) as Partial<JoinAnswer>
          if (typeof answer?.voteFromIndex !== 'number') throw new Error('the answer to the join names no index')
          if (answer.members !== undefined) this.learnAddresses(answer.members)
          await this.recordVoteFrom(answer.voteFromIndex)
          // The index recorded may be a later one, learned from this server's own member entry before the answer came.
          log.info({ through: peer, voteFromIndex: this.record.voteFromIndex }, 'rejoined the cluster')
          return
        } catch (error) {
          log.debug({ err: error, through: peer, attempt }, 'rejoin attempt failed; retrying')
        }
      }
      await this.replica.pause(Math.min(2_000, 100 * 2 ** Math.min(attempt, 5)))
    }
  }

  /** Records the index from which this server may vote (once its join was answered, or it founded). */
  async recordVoteFrom(voteFromIndex: number): Promise<void> {
    assert(voteFromIndex !== VOTE_INDEX_UNKNOWN, 'recording an unknown vote index')
    if (!this.awaitingJoin()) return
    this.record = { ...this.record, voteFromIndex }
    await this.replica.saveMembership(this.record)
  }

  /**
   * A server waiting for the answer to its join learns it from the log too: the leader records the server's address
   * with its incarnation after (re-)adding it, so an applied member entry naming this incarnation means the re-add is
   * behind it. The answer may have been lost; the entry is not (it is committed, or in the snapshot that carried it).
   */
  private noticeOwnEntry(member: { Node: string; Incarnation?: string }, index: number): void {
    if (member.Node !== this.replica.nodeName || this.record.incarnation === undefined || member.Incarnation !== this.record.incarnation) return
    if (!this.awaitingJoin()) return
    this.recordVoteFrom(index).catch((error: unknown) => this.replica.reportFatal(error))
  }

  /** This data dir's incarnation (sent with a join), if its record has one. */
  get incarnation(): string | undefined {
    return this.record.incarnation
  }

  /** Whether this server still waits for the cluster to answer its join (or its discovery). */
  awaitingJoin(): boolean {
    return this.record.voteFromIndex === VOTE_INDEX_UNKNOWN
  }

  stop(): void {
    this.stopped = true
    this.gossipTimer?.cancel()
    this.promotionTimer?.cancel()
  }
}
