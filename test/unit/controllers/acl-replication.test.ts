/**
 * The replicator (controllers/acl-replication.ts) against a primary served in process, for the interleavings a real
 * pair of agents cannot be made to show on demand. Both datacenters are real single-node replicas (LevelDB log and
 * state); the primary's endpoint GET /v1/internal/acl/replication/:stream answers as the route does
 * (state/replication-pages.ts replicationPage, the table's index read before the run, a blocking wait on `index`),
 * with a hook to make the primary change between requests or to cut the WAN link for one request.
 *
 * Each case is a defect a review found in the first paged version: a walk answered with a delta (deleting every
 * unchanged record), and records taken for applied that never were.
 */
import { expect } from 'chai'
import { pino } from 'pino'
import { AclReplicator } from '../../../src/controllers/acl-replication.js'
import { WardenError } from '../../../src/lib/errors.js'
import type { DatacenterForwarder, ForwardedAnswer, ForwardedRequest } from '../../../src/rpc/dc-forward.js'
import { changeFeedOf } from '../../../src/state/change-feed.js'
import type { PolicyWrite } from '../../../src/state/commands.js'
import { PAGE_ITEMS_DEFAULT, replicationPage, STREAM_TABLES } from '../../../src/state/replication-pages.js'
import { replicationRecords, type ReplicatedStream } from '../../../src/state/replication.js'
import { getRecord, policySpec } from '../../../src/state/tables.js'
import { recordKey } from '../../../src/state/keys.js'
import type { ReplicaFixture } from '../../support/state.js'
import { commands, useReplica } from '../../support/state.js'

const uuid = (first: string, n: number): string => `${first.repeat(8)}-0000-4000-8000-${n.toString(16).padStart(12, '0')}`
const policy = (id: string, name: string, fields: Partial<PolicyWrite> = {}): PolicyWrite => ({ ID: id, Name: name, Description: '', Rules: '', Datacenters: [], Namespace: 'default', ...fields })

type Hook = (request: { stream: ReplicatedStream; since: number; cursor: string; index: number | undefined }) => Promise<void>

/** The primary's route, in process: what routes/acl-replication.ts answers to a request forwarded over the WAN. */
function primaryForwarder(primary: ReplicaFixture, hook: Hook): DatacenterForwarder {
  const feed = changeFeedOf(primary.state)
  const forward = async (_dc: string, request: ForwardedRequest): Promise<ForwardedAnswer> => {
    const url = new URL(request.path, 'http://primary')
    const stream = url.pathname.split('/').at(-1) as ReplicatedStream
    const since = Number(url.searchParams.get('since') ?? '0')
    const cursor = url.searchParams.get('cursor') ?? ''
    const indexText = url.searchParams.get('index')
    const index = indexText === null ? undefined : Number(indexText)
    await hook({ stream, since, cursor, index })
    const table = STREAM_TABLES[stream]
    const reported = (): number => Math.max(1, primary.state.tableIndex(table))
    // Blocking: until the table moves past `index` (a short wait stands for the 5 minutes).
    if (index !== undefined) for (let waited = 0; waited < 200 && reported() <= index; waited += 20) await new Promise((resolve) => setTimeout(resolve, 20))
    const indexAtRun = reported()
    const body = await replicationPage(primary.state.db, feed, stream, { since, cursor, limit: PAGE_ITEMS_DEFAULT, delta: url.searchParams.get('mode') === 'delta' })
    return { status: 200, headers: { 'x-service-index': String(indexAtRun) }, body: Buffer.from(JSON.stringify(body), 'utf8') }
  }
  return { forward } as unknown as DatacenterForwarder
}

describe('the replicator against a primary served in process', function () {
  this.timeout(60_000)
  const primary = useReplica('warden-repl-dc1-')
  const secondary = useReplica('warden-repl-dc2-')
  const replicators: AclReplicator[] = []

  afterEach(async () => {
    await Promise.all(replicators.splice(0).map((replicator) => replicator.stop()))
  })

  function replicate(hook: Hook, now: () => number = () => Date.now()): AclReplicator {
    const replicator = new AclReplicator(
      secondary.state,
      secondary.replica,
      primaryForwarder(primary, hook),
      { primary: 'dc1', token: 'replication-token', applyRate: 5_000, rate: 10, burst: 20, tokens: false },
      pino({ level: 'silent' }),
      now,
      () => 0.5,
    )
    replicators.push(replicator)
    replicator.start()
    return replicator
  }

  const heldHere = async (id: string): Promise<string | undefined> => (await getRecord(secondary.state.reader, policySpec, id))?.Name
  const settle = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

  it('the walk due every ten minutes keeps every record the primary still has', async () => {
    const ids = [1, 2, 3].map((n) => uuid('d', n))
    for (const [n, id] of ids.entries()) expect((await primary.replica.propose(commands.policyCreate(policy(id, `kept-${n}`)))).ok).to.equal(true)
    let offsetMs = 0
    replicate(async () => {}, () => Date.now() + offsetMs)
    const deadline = Date.now() + 8_000
    while (Date.now() < deadline && (await heldHere(ids[2]!)) === undefined) await settle(50)
    for (const id of ids) expect(await heldHere(id), 'replicated at first').to.be.a('string')
    // Caught up; one more change at the primary, then ten minutes pass: the next round of each stream walks.
    expect((await primary.replica.propose(commands.policyCreate(policy(uuid('d', 9), 'later')))).ok).to.equal(true)
    await settle(1_000)
    offsetMs = 11 * 60_000
    await settle(1_500)
    const missing: string[] = []
    for (const id of ids) if ((await heldHere(id)) === undefined) missing.push(id)
    expect(missing, 'policies the primary still has, deleted in the secondary by the periodic walk').to.deep.equal([])
  })

  it('a walk cut off by the WAN after its first page applies that page later: nothing it read and did not apply is taken for applied', async () => {
    // Twelve policies of about 400 KB: a walk page carries at most 4 MiB of records, so two pages at least.
    const ids = Array.from({ length: 12 }, (_, n) => uuid('c', n + 1))
    for (const [n, id] of ids.entries()) {
      const result = await primary.replica.propose(commands.policyCreate(policy(id, `big-${n}`, { Description: `${n} ${'x'.repeat(400_000)}` })))
      expect(result.ok, JSON.stringify(result).slice(0, 300)).to.equal(true)
    }
    let cut = 0
    replicate(async ({ stream, cursor }) => {
      // The WAN link breaks once, as the second page of the policies' first walk is asked for.
      if (stream === 'policies' && cursor !== '' && cut === 0) {
        cut += 1
        throw new WardenError('no_path_to_datacenter', 'dc: no path to datacenter "dc1": the link broke')
      }
    })
    // The round fails, backs off (about 1 s) and walks again.
    const deadline = Date.now() + 8_000
    while (Date.now() < deadline && (await replicationRecords(secondary.state.reader)).get('policies') === undefined) await settle(50)
    await settle(1_500)
    expect(cut).to.equal(1)
    const missing: string[] = []
    for (const id of ids) if ((await heldHere(id)) === undefined) missing.push(id)
    const claimed = (await replicationRecords(secondary.state.reader)).get('policies')?.RemoteIndex
    expect(missing, `policies of the primary missing in the secondary, which claims RemoteIndex ${claimed}`).to.deep.equal([])
  })

  it("a walk's record upserted under a name that another record held keeps that other record in the end", async () => {
    // B before A in key order, three fillers of about 1 MB between: the first walk (since 0, every record whole) holds
    // B and two fillers on its first page (4 MiB at most), A on the second.
    const b = uuid('1', 1)
    const a = uuid('f', 1)
    const description = 'x'.repeat(1_100_000)
    expect((await primary.replica.propose(commands.policyCreate(policy(b, 'x', { Description: description })))).ok).to.equal(true)
    for (let n = 1; n <= 3; n++) expect((await primary.replica.propose(commands.policyCreate(policy(uuid('8', n), `filler-${n}`, { Description: 'y'.repeat(1_050_000) })))).ok).to.equal(true)
    expect((await primary.replica.propose(commands.policyCreate(policy(a, 'a')))).ok).to.equal(true)
    let step = 0
    replicate(async ({ stream, cursor, index }) => {
      if (stream !== 'policies') return
      if (step === 0 && cursor !== '') {
        // Between the walk's two pages the primary swaps the name "x" from B to A...
        step = 1
        expect((await primary.replica.propose(commands.policyUpdate(policy(b, 'b', { Description: description })))).ok).to.equal(true)
        expect((await primary.replica.propose(commands.policyUpdate(policy(a, 'x')))).ok).to.equal(true)
      } else if (step === 1 && index !== undefined) {
        // ...and back, before the next round's delta.
        step = 2
        expect((await primary.replica.propose(commands.policyUpdate(policy(a, 'a2')))).ok).to.equal(true)
        expect((await primary.replica.propose(commands.policyUpdate(policy(b, 'x', { Description: description })))).ok).to.equal(true)
      }
    })
    const deadline = Date.now() + 8_000
    while (Date.now() < deadline && (step < 2 || (await heldHere(a)) !== 'a2')) await settle(50)
    await settle(1_000)
    expect(await heldHere(a)).to.equal('a2')
    // The primary holds B (named "x") throughout; nothing deleted it there.
    expect((await getRecord(primary.state.reader, policySpec, b))?.Name).to.equal('x')
    expect(await heldHere(b), 'B in the secondary').to.equal('x')
  })

  it('two policies swapping names are never missing in the secondary, even with many changes between them', async () => {
    const a = uuid('a', 1)
    const b = uuid('b', 1)
    expect((await primary.replica.propose(commands.policyCreate(policy(a, 'first')))).ok).to.equal(true)
    expect((await primary.replica.propose(commands.policyCreate(policy(b, 'second')))).ok).to.equal(true)
    const fillers = Array.from({ length: 70 }, (_, n) => uuid('9', n + 1))
    for (const [n, id] of fillers.entries()) expect((await primary.replica.propose(commands.policyCreate(policy(id, `filler-${n}`)))).ok).to.equal(true)
    // The policies' blocking rounds wait at this gate while the primary changes, so one delta sees every change.
    let openGate: () => void = () => undefined
    let gate: Promise<void> = Promise.resolve()
    replicate(async ({ stream, index }) => {
      if (stream === 'policies' && index !== undefined) await gate
    })
    const deadline = Date.now() + 8_000
    while (Date.now() < deadline && (await heldHere(fillers.at(-1)!)) === undefined) await settle(50)
    expect(await heldHere(b)).to.equal('second')
    gate = new Promise((resolve) => (openGate = resolve))
    await settle(300)
    // Watched from here on: after every command the secondary applies, both are there.
    const missing: string[] = []
    const present = (id: string): boolean => secondary.state.db.getSync(recordKey('policy', id)) !== undefined
    secondary.state.changeListeners.add(() => {
      for (const id of [a, b]) if (!present(id)) missing.push(id)
    })
    // At the primary: B moves aside, seventy other changes, A takes B's name, B takes A's old one. A delta lists
    // records in the order of their first change: B, the others, A, more than a batch (64) apart. In the secondary
    // B then takes "first", which A still holds there.
    expect((await primary.replica.propose(commands.policyUpdate(policy(b, 'aside')))).ok).to.equal(true)
    for (const [n, id] of fillers.entries()) expect((await primary.replica.propose(commands.policyUpdate(policy(id, `filler-${n}`, { Description: 'changed' })))).ok).to.equal(true)
    expect((await primary.replica.propose(commands.policyUpdate(policy(a, 'second')))).ok).to.equal(true)
    expect((await primary.replica.propose(commands.policyUpdate(policy(b, 'first')))).ok).to.equal(true)
    openGate()
    const until = Date.now() + 8_000
    while (Date.now() < until && (await heldHere(a)) !== 'second') await settle(50)
    expect(await heldHere(a)).to.equal('second')
    expect(await heldHere(b)).to.equal('first')
    expect(missing, 'a policy the primary held throughout, missing in the secondary after a batch').to.deep.equal([])
  })
})
