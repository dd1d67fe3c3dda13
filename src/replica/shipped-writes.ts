/**
 * Shipped writes: a leader sends its followers what its apply of each committed command wrote, and a follower that has
 * them applies those writes instead of running the command again (StateStore ApplyOptions). Apply is deterministic,
 * so the writes a command produces on the leader are the ones it would produce on any server that applied the same
 * log before it; a follower skips decoding, checking, reading and building records, which was most of its CPU per
 * write (docs/benchmarks.md).
 *
 * They are an optimization and nothing depends on them arriving: a follower applies a command itself whenever it
 * lacks its writes (lost with a message, dropped at a bound, sent by a leader of an older build, an entry it proposed
 * while it led). Writes are keyed by index AND term: only a committed entry is applied, and every log holds the same
 * entry at a committed index, so writes for (index, term) from any leader are the writes for that entry.
 *
 * So that the writes reach a follower no later than the commit index that lets it apply them, the leader announces
 * only what it has applied (RaftConfig.announceAppliedCommit) and the writes ride on the first message that carries
 * that commit index, an AppendEntries or a heartbeat (a follower of an older build reads them on AppendEntries only,
 * and runs the commands a heartbeat lets it apply).
 */
import { decode, encode } from '../state/codec.js'
import { ownedBytes } from '../lib/owned-bytes.js'
import type { Shipped, ShippedWrites } from '../state/store.js'

/**
 * Wire format version of a batch; a follower ignores batches of a version it does not know, and applies their entries
 * itself. Version 2 since the state's token secret index took a shorter form (state/tables.ts secretDigest): a follower
 * of either build that took the other's writes would hold index entries it cannot read, where applying the command
 * itself writes its own form.
 */
export const BATCH_VERSION = 2
/** Bytes of encoded writes per batch, at most (one entry's writes always fit, however large). */
const BATCH_BYTES_MAX = 256 * 1024
/** Batches a leader keeps for followers that have not been sent them yet. */
const OUTBOX_BATCHES_MAX = 256
/** Bytes a leader keeps, and attaches to one message (an AppendEntries or a heartbeat), at most. */
const OUTBOX_BYTES_MAX = 16 * 1024 * 1024
const ATTACHED_BYTES_MAX = 2 * 1024 * 1024
/** sentThrough after a message could not be sent: an AppendEntries sends everything again, a heartbeat nothing. */
const UNSENT = -1
/** Entries' writes a follower holds for entries it has not applied yet, and their bytes, at most. */
const INBOX_ENTRIES_MAX = 16_384
const INBOX_BYTES_MAX = 32 * 1024 * 1024

/** One encoded batch: the writes of the entries first..last that shipped (some in between may not have). */
interface Batch {
  readonly first: number
  readonly last: number
  readonly bytes: Uint8Array
}

/** A leader's side: the writes its applies produced, encoded once per batch for every follower. */
export class ShippedWritesOutbox {
  private batches: Batch[] = []
  private bytes = 0
  /** Per entry: index, term, command version, command type, writes. */
  private pending: Array<[number, number, number, string, ShippedWrites]> = []
  private pendingBytes = 0
  /** Per follower, the last index whose writes were attached to a message to it; UNSENT after one that failed. */
  private readonly sentThrough = new Map<string, number>()

  /** Called by the store for each command it applied, in log order. */
  produced(index: number, term: number, shipped: Shipped): void {
    this.pending.push([index, term, shipped.v, shipped.type, shipped.writes])
    this.pendingBytes += writesBytes(shipped.writes)
    if (this.pendingBytes >= BATCH_BYTES_MAX) this.seal()
  }

  /** Encodes what the last apply produced into a batch (called after each apply). */
  seal(): void {
    if (this.pending.length === 0) return
    const bytes = encode([BATCH_VERSION, this.pending])
    this.batches.push({ first: this.pending[0]![0], last: this.pending[this.pending.length - 1]![0], bytes })
    this.bytes += bytes.length
    this.pending = []
    this.pendingBytes = 0
    while (this.batches.length > OUTBOX_BATCHES_MAX || this.bytes > OUTBOX_BYTES_MAX) this.bytes -= this.batches.shift()!.bytes.length
  }

  /**
   * The batches to attach to an AppendEntries to `to` whose entries follow `prevLogIndex` and that lets it apply up
   * to `through`: those it was not sent yet with writes at or below that index. Each batch goes to each follower
   * once; one that is lost costs the follower an apply of its own. A message that sends entries again from an earlier
   * index (a retry, a probe, a restarted follower) sends their writes again too.
   */
  attach(to: string, prevLogIndex: number, through: number): Uint8Array[] | undefined {
    const sent = Math.min(this.sentThrough.get(to) ?? 0, prevLogIndex)
    let attached: Uint8Array[] | undefined
    let bytes = 0
    let last = sent
    for (const batch of this.batches) {
      if (batch.last <= sent || batch.first > through) continue
      // Past the bound the rest are skipped, not kept for later: they would only grow the next message.
      last = Math.max(last, batch.last)
      if (bytes + batch.bytes.length > ATTACHED_BYTES_MAX && attached !== undefined) continue
      ;(attached ??= []).push(batch.bytes)
      bytes += batch.bytes.length
    }
    if (last > sent) this.sentThrough.set(to, last)
    return attached
  }

  /**
   * The batches to attach to a heartbeat to `to` that lets it apply up to `through`: only those after what it was
   * already sent. A heartbeat sends no entries, so it sends no writes again; and after a message to `to` could not be
   * sent it leaves the writes to the next AppendEntries, so that a follower whose link refuses messages does not cost
   * the leader an encoding of the outbox's oldest batches per heartbeat.
   */
  attachNew(to: string, through: number): Uint8Array[] | undefined {
    const sent = this.sentThrough.get(to) ?? 0
    return sent === UNSENT ? undefined : this.attach(to, sent, through)
  }

  /** The last message to `to` could not be sent: what it carried goes with the next AppendEntries. */
  unsent(to: string): void {
    this.sentThrough.set(to, UNSENT)
  }

  /** Forgets everything: this server stopped leading (a later term starts with nothing sent). */
  clear(): void {
    this.batches = []
    this.bytes = 0
    this.pending = []
    this.pendingBytes = 0
    this.sentThrough.clear()
  }
}

/** A follower's side: the writes it was sent, by index, until it applies those entries. */
export class ShippedWritesInbox {
  private readonly byIndex = new Map<number, { term: number; shipped: Shipped; bytes: number }>()
  private bytes = 0

  get size(): number {
    return this.byIndex.size
  }

  /**
   * Takes in batches attached to an AppendEntries or a heartbeat; a batch or an entry not in the shape a leader sends
   * is ignored.
   */
  receive(batches: unknown, appliedIndex: number): void {
    if (!Array.isArray(batches)) return
    for (const bytes of batches) {
      if (!(bytes instanceof Uint8Array)) continue
      let batch: unknown
      try {
        // Its own bytes: the writes decode to views into them, and the inbox keeps them until their entries apply,
        // which as views into the frame (lib/owned-bytes.ts) would keep its entries' bytes too.
        batch = decode(ownedBytes(bytes))
      } catch {
        continue
      }
      if (!Array.isArray(batch) || batch[0] !== BATCH_VERSION || !Array.isArray(batch[1])) continue
      for (const item of batch[1] as unknown[]) {
        const parsed = parseItem(item)
        if (parsed === undefined || parsed.index <= appliedIndex) continue
        const bytes = writesBytes(parsed.shipped.writes)
        this.delete(parsed.index)
        if (this.byIndex.size >= INBOX_ENTRIES_MAX || this.bytes + bytes > INBOX_BYTES_MAX) return
        this.byIndex.set(parsed.index, { term: parsed.term, shipped: parsed.shipped, bytes })
        this.bytes += bytes
      }
    }
  }

  /** The writes for the entry (index, term), once: undefined when none were received for that very entry. */
  take(index: number, term: number): Shipped | undefined {
    const found = this.byIndex.get(index)
    if (found === undefined) return undefined
    this.delete(index)
    return found.term === term ? found.shipped : undefined
  }

  /** Drops what is at or below `index`: applied, or skipped by a snapshot. */
  dropThrough(index: number): void {
    if (this.byIndex.size === 0) return
    for (const key of this.byIndex.keys()) if (key <= index) this.delete(key)
  }

  private delete(index: number): void {
    const found = this.byIndex.get(index)
    if (found === undefined) return
    this.byIndex.delete(index)
    this.bytes -= found.bytes
  }
}

/** About the bytes writes take, encoded or held (keys counted in characters). */
function writesBytes(writes: ShippedWrites): number {
  let bytes = 0
  for (const [key, value] of writes) bytes += key.length + (value?.length ?? 0) + 8
  return bytes
}

function parseItem(item: unknown): { index: number; term: number; shipped: Shipped } | undefined {
  if (!Array.isArray(item) || item.length !== 5) return undefined
  const [index, term, v, type, writes] = item as [unknown, unknown, unknown, unknown, unknown]
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(term) || !Number.isSafeInteger(v) || typeof type !== 'string' || !Array.isArray(writes)) return undefined
  const checked: Array<readonly [string, Buffer | null]> = []
  for (const write of writes as unknown[]) {
    if (!Array.isArray(write) || write.length !== 2 || typeof write[0] !== 'string') return undefined
    const value: unknown = write[1]
    if (value === null) checked.push([write[0], null])
    else if (value instanceof Uint8Array) checked.push([write[0], Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength)])
    else return undefined
  }
  return { index: index as number, term: term as number, shipped: { v: v as number, type, writes: checked } }
}
