/**
 * The leader validates what peers send (issue 18): a follower forwards a write to the leader as an encoded command
 * (`propose`, or `propose-batch` for the writes of one turn of its event loop), and the leader decodes and checks it
 * (known version and type, the shape apply reads) before proposing it. Without that, a peer could send a command no
 * replica can apply: it would commit, every replica would stop when applying it, and stop again at every restart, since
 * the entry stays in the log.
 *
 * Method: a one-voter group (n1, which leads) over real Raft storage and state in a temporary data dir, whose peer
 * links hand the test the replica's request handler, so the test plays a peer n2 and sends requests as the transport
 * delivers them. For each kind of malformed command, the leader refuses it with invalid_input naming what is wrong,
 * nothing enters the log, the node reports no fatal error, still applies writes, and restarts on its data dir. The
 * node's own commands (built by its HTTP layer, agent and controllers) are checked the same way.
 */
import { expect } from 'chai'
import { join } from 'node:path'
import { WardenError } from '../../../src/lib/errors.js'
import { LevelRaftStorage } from '../../../src/raft/storage/level-storage.js'
import type { PeerLinks } from '../../../src/replica/peer-links.js'
import type { RaftReplica } from '../../../src/replica/raft-replica.js'
import type { ClusterNode } from '../../../src/rpc/cluster-node.js'
import { namesCurrent, type ProposeResponse, type ReplicaResponse } from '../../../src/rpc/forward.js'
import { encode } from '../../../src/state/codec.js'
import { COMMAND_VERSION, type Command } from '../../../src/state/commands.js'
import { StateStore } from '../../../src/state/store.js'
import { getRecord, policySpec, tokenSpec } from '../../../src/state/tables.js'
import { buildTokenCreate, commands, createSingleNode, NO_LINKS } from '../../support/state.js'
import { useTempDirs, type TempDirs } from '../../support/temp-dir.js'

type RequestHandler = (from: string, request: unknown) => Promise<unknown>

interface Leader {
  storage: LevelRaftStorage
  state: StateStore
  replica: RaftReplica
  cluster: ClusterNode
  /** A request from peer n2, as the transport hands it to the replica. */
  fromPeer(request: Record<string, unknown>): Promise<unknown>
  stop(): Promise<void>
}

/**
 * Opens `dataDir` and starts n1 alone on it with links that keep the replica's request handler; resolves once it
 * leads, or once it stopped (its failures go to `fatal`).
 */
async function startLeader(dirs: TempDirs, dataDir: string, fatal: unknown[]): Promise<Leader> {
  let handler: RequestHandler | undefined
  const links: PeerLinks = { ...NO_LINKS, onRequest: (registered) => (handler = registered) }
  const storage = await LevelRaftStorage.open(join(dataDir, 'raft'))
  const state = await StateStore.open(join(dataDir, 'state'))
  const { replica, cluster } = await createSingleNode('n1', storage, state, (error) => fatal.push(error), { links })
  let stopped: Promise<void> | undefined
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      await replica.stop({ transferLeadership: false })
      await state.close()
      await storage.close()
    })())
  dirs.defer(stop)
  await replica.start()
  await cluster.readBarrier('consistent').catch(() => undefined)
  return {
    storage,
    state,
    replica,
    cluster,
    fromPeer: (request) => {
      if (handler === undefined) throw new Error('the replica registered no request handler')
      return handler('n2', request)
    },
    stop,
  }
}

const token = (n: number) =>
  buildTokenCreate({
    AccessorID: `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`,
    SecretID: `00000000-0000-4000-9000-${n.toString(16).padStart(12, '0')}`,
    CreateTime: '2026-01-01T00:00:00Z',
  })

/** Malformed commands a peer could send, each with the field the refusal must name. */
const MALFORMED: Array<{ what: string; bytes: Uint8Array; field: string }> = [
  { what: 'bytes that are not MessagePack (a map cut short)', bytes: Buffer.from([0x81, 0xa1]), field: 'command' },
  { what: 'a MessagePack nil', bytes: encode(null), field: 'command' },
  { what: 'a MessagePack value that is not a map', bytes: encode('acl.token.create'), field: 'command' },
  { what: 'a map without a version', bytes: encode({ type: 'acl.token.create', token: token(1) }), field: 'v' },
  { what: 'a command of a newer version', bytes: encode({ v: COMMAND_VERSION + 1, type: 'acl.token.create', token: token(1) }), field: 'v' },
  { what: 'an unknown command type', bytes: encode({ v: COMMAND_VERSION, type: 'acl.token.mint', token: token(1) }), field: 'type' },
  {
    what: 'a token create whose IDs are numbers',
    bytes: encode({ v: COMMAND_VERSION, type: 'acl.token.create', token: { ...token(1), AccessorID: 5, SecretID: 7 } }),
    field: 'token.AccessorID',
  },
  {
    what: 'a token create with only its IDs',
    bytes: encode({ v: COMMAND_VERSION, type: 'acl.token.create', token: { AccessorID: token(1).AccessorID, SecretID: token(1).SecretID } }),
    field: 'token.Description',
  },
  {
    what: 'a token create whose Policies is a string',
    bytes: encode({ v: COMMAND_VERSION, type: 'acl.token.create', token: { ...token(1), Policies: 'global-management' } }),
    field: 'token.Policies',
  },
  {
    what: 'a policy create whose Datacenters is a string (apply would store it)',
    bytes: encode({
      v: COMMAND_VERSION,
      type: 'acl.policy.create',
      policy: { ID: '00000000-0000-4000-8000-0000000000aa', Name: 'p', Description: '', Rules: '', Datacenters: 'dc1', Namespace: 'default' },
    }),
    field: 'policy.Datacenters',
  },
]

/** How many entries after `after` hold exactly `bytes`. */
function logged(storage: LevelRaftStorage, after: number, bytes: Uint8Array): number {
  return storage.entries(after + 1, storage.lastIndex() + 1).filter((entry) => Buffer.from(entry.data).equals(bytes)).length
}

/** What a request to the leader came to: its answer, or the operating error it was refused with. */
async function outcomeOf(request: Promise<unknown>): Promise<{ answer: unknown } | { refused: WardenError }> {
  try {
    return { answer: await request }
  } catch (error) {
    if (error instanceof WardenError) return { refused: error }
    throw error
  }
}

describe('rpc/cluster-node: the leader validates forwarded commands', function () {
  this.timeout(20_000)
  const dirs = useTempDirs()

  for (const { what, bytes, field } of MALFORMED) {
    it(`refuses ${what} before proposing it, and stays up (propose)`, async () => {
      const dataDir = await dirs.make('warden-forwarded-')
      const fatal: unknown[] = []
      const leader = await startLeader(dirs, dataDir, fatal)
      const lastIndex = leader.storage.lastIndex()

      const outcome = await outcomeOf(leader.fromPeer({ kind: 'propose', data: bytes }))
      await new Promise((resolve) => setTimeout(resolve, 50))
      const proposed = logged(leader.storage, lastIndex, bytes)
      // Whatever happened, the node must survive a restart on its data dir.
      await leader.stop()
      const restarted = await startLeader(dirs, dataDir, fatal)
      const after = await outcomeOf(restarted.cluster.propose(commands.tokenCreate(token(2))))

      expect(fatal.map(String), 'fatal errors (first life, then after the restart)').to.deep.equal([])
      expect(proposed, 'entries of the log holding the malformed command').to.equal(0)
      expect('refused' in outcome && outcome.refused.code, JSON.stringify(outcome)).to.equal('invalid_input')
      const refusal = (outcome as { refused: WardenError }).refused
      expect(refusal.field).to.equal(field)
      expect(refusal.message).to.include(`${field}: `)
      expect('answer' in after && after.answer, 'a write after the restart').to.deep.include({ ok: true })
      await restarted.stop()
    })
  }

  it('refuses the malformed commands of a batch one by one and proposes the others (propose-batch)', async () => {
    const dataDir = await dirs.make('warden-forwarded-')
    const fatal: unknown[] = []
    const leader = await startLeader(dirs, dataDir, fatal)
    const malformed = MALFORMED.find((item) => item.field === 'token.AccessorID')!
    const batch = [encode(commands.tokenCreate(token(3))), malformed.bytes, encode(commands.tokenCreate(token(4)))]

    const outcome = await outcomeOf(leader.fromPeer({ kind: 'propose-batch', commands: batch }))

    expect(fatal.map(String), 'fatal errors').to.deep.equal([])
    expect('answer' in outcome, JSON.stringify(outcome)).to.equal(true)
    const { outcomes } = (outcome as { answer: ProposeResponse }).answer
    expect(outcomes.map((item) => ('error' in item ? item.error.code : item.result.ok))).to.deep.equal([true, 'invalid_input', true])
    expect((outcomes[1] as { error: { field?: string } }).error.field).to.equal('token.AccessorID')
    // A forwarded command is answered once its result is computed, maybe before the leader's state has it (issue 22):
    // a reader there passes the node's barrier first, as every request it serves does.
    await leader.cluster.readBarrier('stale')
    for (const n of [3, 4]) expect(await getRecord(leader.state.reader, tokenSpec, token(n).AccessorID), `token ${n}`).to.not.equal(undefined)
    await leader.stop()
  })

  it("refuses a malformed command of this node's own with an internal error, before it reaches the log", async () => {
    const dataDir = await dirs.make('warden-forwarded-')
    const fatal: unknown[] = []
    const leader = await startLeader(dirs, dataDir, fatal)
    const lastIndex = leader.storage.lastIndex()
    const command = { v: COMMAND_VERSION, type: 'acl.token.create', token: { ...token(5), Local: 'no' } } as unknown as Command
    const outcome = await outcomeOf(leader.cluster.propose(command))
    expect('refused' in outcome && [outcome.refused.code, outcome.refused.message], JSON.stringify(outcome)).to.deep.equal([
      'internal',
      'this node made a malformed acl.token.create command (token.Local: must be a boolean, not the string "no"); it was not applied',
    ])
    expect(logged(leader.storage, lastIndex, encode(command))).to.equal(0)
    expect(fatal).to.deep.equal([])
    await leader.stop()
  })

  it('answers each forwarded write with the last index its policies or roles changed at (namesIndex)', async () => {
    const dataDir = await dirs.make('warden-forwarded-')
    const fatal: unknown[] = []
    const leader = await startLeader(dirs, dataDir, fatal)
    const before = (await leader.fromPeer({ kind: 'propose', data: encode(commands.tokenCreate(token(6))) })) as { index: number; namesIndex?: number }
    expect(before.namesIndex, 'the built-in policies’ index, before the token').to.be.a('number').below(before.index)
    const policy: Command = commands.policyCreate({ ID: '00000000-0000-4000-8000-0000000000bc', Name: 'linked', Description: '', Rules: 'acl = "read"', Datacenters: [], Namespace: 'default' })
    const created = (await leader.fromPeer({ kind: 'propose-batch', commands: [encode(policy), encode(commands.tokenCreate(token(7)))] })) as ProposeResponse
    const [policyOutcome, tokenOutcome] = created.outcomes as Array<{ index: number; namesIndex?: number }>
    // The policy's own answer, and the token's after it, name the policy's index: a follower must have applied it.
    expect(policyOutcome!.namesIndex).to.equal(policyOutcome!.index)
    expect(tokenOutcome!.namesIndex).to.equal(policyOutcome!.index)
    expect(namesCurrent(tokenOutcome as ReplicaResponse, policyOutcome!.index - 1), 'a follower one entry short').to.equal(false)
    expect(namesCurrent(tokenOutcome as ReplicaResponse, policyOutcome!.index), 'a follower that applied the policy').to.equal(true)
    expect(namesCurrent({ result: { ok: true }, index: 9 }, 100), 'an answer without namesIndex (an older leader)').to.equal(false)
    expect(fatal).to.deep.equal([])
    await leader.stop()
  })

  it('proposes a well-formed forwarded command as before', async () => {
    const dataDir = await dirs.make('warden-forwarded-')
    const fatal: unknown[] = []
    const leader = await startLeader(dirs, dataDir, fatal)
    const policy: Command = commands.policyCreate({ ID: '00000000-0000-4000-8000-0000000000bb', Name: 'forwarded', Description: '', Rules: 'acl = "read"', Datacenters: ['dc1'], Namespace: 'default' })
    const answer = (await leader.fromPeer({ kind: 'propose', data: encode(policy) })) as { result: { ok: boolean } }
    expect(answer.result.ok).to.equal(true)
    expect((await getRecord(leader.state.reader, policySpec, '00000000-0000-4000-8000-0000000000bb'))?.Name).to.equal('forwarded')
    expect(fatal).to.deep.equal([])
    await leader.stop()
  })
})
