/**
 * The leader's outbox and the follower's inbox of shipped writes (src/replica/shipped-writes.ts): each batch reaches
 * each follower once, only up to what the message lets it apply; a follower takes the writes of an entry only for
 * that very (index, term), and ignores whatever is not in the shape a leader sends.
 */
import { expect } from 'chai'
import { encode } from '../../../src/state/codec.js'
import { BATCH_VERSION, ShippedWritesInbox, ShippedWritesOutbox } from '../../../src/replica/shipped-writes.js'
import type { Shipped } from '../../../src/state/store.js'

const writesOf = (n: number): Shipped => ({
  v: 1,
  type: 'acl.token.create',
  writes: [[`r\u0000token\u0000${n}`, Buffer.from(`record ${n}`)], [`x\u0000token\u0000ns\u0000default\u0000${n}`, null]],
})

function outboxWith(ranges: Array<[number, number]>, term = 2): ShippedWritesOutbox {
  const outbox = new ShippedWritesOutbox()
  for (const [first, last] of ranges) {
    for (let index = first; index <= last; index++) outbox.produced(index, term, writesOf(index))
    outbox.seal()
  }
  return outbox
}

describe('replica: shipped writes', function () {
  it('a follower takes, from what the leader attached, exactly the writes the leader produced', function () {
    const outbox = outboxWith([[1, 3], [4, 6]])
    const inbox = new ShippedWritesInbox()
    inbox.receive(outbox.attach('b', 0, 6), 0)
    for (let index = 1; index <= 6; index++) expect(inbox.take(index, 2)).to.deep.equal(writesOf(index))
    expect(inbox.size).to.equal(0)
  })

  it('attaches each batch once per follower, and none past the index the message lets it apply', function () {
    const outbox = outboxWith([[1, 3], [4, 6]])
    expect(outbox.attach('b', 0, 0)).to.equal(undefined)
    expect(outbox.attach('b', 0, 3)).to.have.length(1)
    expect(outbox.attach('b', 3, 6)).to.have.length(1)
    expect(outbox.attach('b', 6, 6)).to.equal(undefined)
    // Another follower has been sent nothing yet.
    expect(outbox.attach('c', 0, 6)).to.have.length(2)
    outbox.clear()
    expect(outbox.attach('d', 0, 6)).to.equal(undefined)
  })

  it('sends writes again with entries sent again (a retry, a probe), and after a message that could not be sent', function () {
    const outbox = outboxWith([[1, 3], [4, 6]])
    expect(outbox.attach('b', 0, 6)).to.have.length(2)
    expect(outbox.attach('b', 6, 6)).to.equal(undefined)
    expect(outbox.attach('b', 3, 6), 'entries 4.. again').to.have.length(1)
    outbox.unsent('b')
    expect(outbox.attach('b', 6, 6)).to.have.length(2)
  })

  it('attaches to a heartbeat what was not sent yet up to its commit index, and nothing after a failed send', function () {
    const outbox = outboxWith([[1, 3], [4, 6]])
    expect(outbox.attachNew('b', 0), 'nothing committed to tell').to.equal(undefined)
    expect(outbox.attachNew('b', 2), 'a batch goes whole').to.have.length(1)
    expect(outbox.attachNew('b', 6)).to.have.length(1)
    expect(outbox.attachNew('b', 6), 'a heartbeat sends nothing again').to.equal(undefined)
    expect(outbox.attach('b', 6, 6), 'nor does the AppendEntries after it').to.equal(undefined)
    // A message that could not be sent: heartbeats leave the writes to the next AppendEntries, which sends them all.
    outbox.unsent('b')
    expect(outbox.attachNew('b', 6)).to.equal(undefined)
    expect(outbox.attach('b', 6, 6)).to.have.length(2)
    expect(outbox.attachNew('b', 6)).to.equal(undefined)
    // What a heartbeat carried is not sent again by an AppendEntries that follows it, but is with entries sent again.
    expect(outbox.attachNew('c', 6)).to.have.length(2)
    expect(outbox.attach('c', 6, 6)).to.equal(undefined)
    expect(outbox.attach('c', 3, 6)).to.have.length(1)
  })

  it('takes writes only for the same index and term, once', function () {
    const inbox = new ShippedWritesInbox()
    inbox.receive(outboxWith([[5, 5]], 3).attach('b', 0, 5), 0)
    expect(inbox.take(5, 2), 'another term at that index is another entry').to.equal(undefined)
    inbox.receive(outboxWith([[5, 5]], 3).attach('b', 0, 5), 0)
    expect(inbox.take(5, 3)).to.deep.equal(writesOf(5))
    expect(inbox.take(5, 3)).to.equal(undefined)
  })

  it('keeps nothing at or below the applied index, and drops what a snapshot or an apply passed', function () {
    const inbox = new ShippedWritesInbox()
    inbox.receive(outboxWith([[1, 4]]).attach('b', 0, 4), 2)
    expect(inbox.size).to.equal(2)
    inbox.dropThrough(3)
    expect(inbox.size).to.equal(1)
    expect(inbox.take(4, 2)).to.deep.equal(writesOf(4))
  })

  it('ignores batches that are not in the shape a leader sends: another version (an older build\'s: 1), bad items, not bytes', function () {
    const inbox = new ShippedWritesInbox()
    inbox.receive([encode([BATCH_VERSION + 1, [[1, 1, 1, 'acl.token.create', []]]])], 0)
    // An older build's batch, whose token secret index entries are in the form this build converts at open.
    inbox.receive([encode([1, [[1, 1, 1, 'acl.token.create', [['k', Uint8Array.of(1)]]]]])], 0)
    inbox.receive([encode([BATCH_VERSION, [[1, 1, 1, 'acl.token.create', [['k', 'not bytes']]]]])], 0)
    inbox.receive([encode([BATCH_VERSION, [['1', 1, 1, 'acl.token.create', []]]])], 0)
    inbox.receive([encode([BATCH_VERSION, [[1, 1, 1, 7, []]]])], 0)
    inbox.receive([encode([BATCH_VERSION, [[1, 1, []]]])], 0)
    inbox.receive([Uint8Array.of(0xc1)], 0)
    inbox.receive('nothing', 0)
    inbox.receive([42], 0)
    expect(inbox.size).to.equal(0)
    inbox.receive([encode([BATCH_VERSION, [[7, 1, 1, 'acl.token.create', [['k', Uint8Array.of(1, 2)], ['d', null]]]]])], 0)
    const taken = inbox.take(7, 1)
    expect(taken?.writes).to.have.length(2)
    expect(Buffer.isBuffer(taken!.writes[0]![1])).to.equal(true)
  })

  it('bounds the bytes a follower holds: writes past the bound are left for the follower to make itself', function () {
    const inbox = new ShippedWritesInbox()
    const big = (index: number): Uint8Array => encode([BATCH_VERSION, [[index, 1, 1, 'config.apply', [[`r\u0000config\u0000${index}`, Buffer.alloc(20 * 1024 * 1024)]]]]])
    inbox.receive([big(1)], 0)
    inbox.receive([big(2)], 0)
    expect(inbox.size).to.equal(1)
    expect(inbox.take(2, 1)).to.equal(undefined)
    expect(inbox.take(1, 1)?.writes[0]![1]).to.have.length(20 * 1024 * 1024)
    inbox.receive([big(3)], 0)
    expect(inbox.size, 'taking the first made room').to.equal(1)
  })

  it('bounds what the outbox keeps: old batches are dropped and a follower far behind applies those itself', function () {
    const outbox = new ShippedWritesOutbox()
    for (let index = 1; index <= 300; index++) {
      outbox.produced(index, 1, writesOf(index))
      outbox.seal()
    }
    const inbox = new ShippedWritesInbox()
    for (const bytes of outbox.attach('b', 0, 300) ?? []) inbox.receive([bytes], 0)
    expect(inbox.size).to.be.lessThan(300)
    expect(inbox.take(1, 1)).to.equal(undefined)
    expect(inbox.take(300, 1)).to.deep.equal(writesOf(300))
  })
})
