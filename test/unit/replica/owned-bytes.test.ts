/**
 * Bytes decoded from a peer's frame are views into it (src/transport/frames.ts); what is kept long is copied first
 * (src/lib/owned-bytes.ts), so that it does not keep its frame alive: a follower's log entries, which stay until a
 * snapshot compacts them, a forwarded command, which the leader's log keeps as long, and a shipped-writes batch, whose
 * writes a follower keeps until their entries apply.
 *
 * Method: the frame codec itself for the views, then an AppendEntries and a forwarded command whose bytes are views
 * into a 1 MiB buffer, standing in for a frame.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import type { AppendEntries } from '../../../src/raft/index.js'
import { withOwnedEntries } from '../../../src/replica/raft-replica.js'
import { commandBytes } from '../../../src/rpc/forward.js'
import { BATCH_VERSION, ShippedWritesInbox } from '../../../src/replica/shipped-writes.js'
import { encode } from '../../../src/state/codec.js'
import { decodeFrame, encodeFrame } from '../../../src/transport/frames.js'

const FRAME_BYTES = 1024 * 1024

/** `count` slices of one large buffer, as the fields of a decoded frame are. */
function viewsOfOneFrame(count: number): { frame: Buffer; views: Buffer[] } {
  const frame = randomBytes(FRAME_BYTES)
  return { frame, views: Array.from({ length: count }, (_, n) => frame.subarray(n * 300, n * 300 + 300)) }
}

describe('replica: bytes kept from a frame do not keep the frame', function () {
  it('a decoded frame hands out views into its bytes, not copies', () => {
    const data = randomBytes(300)
    const bytes = encodeFrame({ type: 'message', payload: { type: 'appendEntries', entries: [{ index: 1, term: 1, type: 'command', data }] } })
    const frame = decodeFrame(bytes) as unknown as { payload: { entries: Array<{ data: Uint8Array }> } }
    const decoded = frame.payload.entries[0]!.data
    expect(Buffer.from(decoded).equals(data)).to.equal(true)
    expect(decoded.buffer).to.equal(bytes.buffer)
  })

  it("a follower's log entries hold their data in bytes of their own, equal to what came", () => {
    const { frame, views } = viewsOfOneFrame(40)
    const message: AppendEntries = {
      type: 'appendEntries',
      from: 'n1',
      to: 'n2',
      term: 3,
      prevLogIndex: 9,
      prevLogTerm: 3,
      leaderCommit: 9,
      entries: views.map((data, n) => ({ index: 10 + n, term: 3, type: 'command' as const, data })),
    }
    const owned = withOwnedEntries(message)
    expect(owned.entries).to.have.length(40)
    for (const [n, entry] of owned.entries.entries()) {
      expect(entry).to.include({ index: 10 + n, term: 3, type: 'command' })
      expect(Buffer.from(entry.data).equals(views[n]!)).to.equal(true)
      expect(entry.data.buffer).to.not.equal(frame.buffer)
      expect(entry.data.buffer.byteLength).to.be.below(FRAME_BYTES)
    }
    expect(owned).to.include({ prevLogIndex: 9, prevLogTerm: 3, leaderCommit: 9, term: 3 })
  })

  it('a forwarded command is proposed from bytes of its own', () => {
    const { frame, views } = viewsOfOneFrame(1)
    const command = commandBytes(views[0])
    expect(Buffer.from(command).equals(views[0]!)).to.equal(true)
    expect(command.buffer).to.not.equal(frame.buffer)
    expect(command.buffer.byteLength).to.be.below(FRAME_BYTES)
  })

  it("a follower keeps a shipped batch's writes in bytes of their own, not in the frame's", () => {
    const value = randomBytes(200)
    const batch = encode([BATCH_VERSION, [[7, 2, 1, 'token.create', [['t/record', value]]]]])
    const frame = Buffer.alloc(FRAME_BYTES)
    batch.copy(frame, 5000)
    const inbox = new ShippedWritesInbox()
    inbox.receive([frame.subarray(5000, 5000 + batch.length)], 0)
    const shipped = inbox.take(7, 2)
    const kept = shipped?.writes[0]?.[1]
    expect(kept !== undefined && kept !== null && kept.equals(value)).to.equal(true)
    expect(kept!.buffer).to.not.equal(frame.buffer)
  })
})
