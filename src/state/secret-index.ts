/**
 * The token secret index, held in memory: which token holds a secret, by the secret's digest (tables.ts
 * secretDigest). The state's database holds no such index. Its keys are hashes, so in LevelDB every memtable flush
 * spanned the whole key space and each compaction rewrote level 1 with every other table in it: at a few hundred
 * thousand tokens that index cost 40–60 µs of a token create's CPU over a cluster (docs/benchmarks.md, issue 22,
 * tenth and eleventh sessions). The token records already hold every secret, so the index is rebuilt from them when
 * a state is opened or replaced (fill), and kept up to date from each applied batch's writes (written).
 *
 * What the rest of the state sees does not change: the transaction code still writes and reads `u<token><secret>`
 * entries; the store takes them out of each batch before LevelDB does (stored), and readers answer those keys from
 * here (resolve), checked against the token record as they read it.
 *
 * Layout, for a small footprint: an open-addressing table (linear probing) of 24 bytes per slot, the digest's first
 * 60 bits and the AccessorID's 16 bytes (every AccessorID a server makes is a UUID), between half and three quarters
 * full: 32–48 MB per million tokens. An AccessorID that is not a UUID (a restored archive could hold one) is kept in a
 * map by the whole digest.
 *
 * Every node must give the same answers from the same records, whatever its history (a node that restarted filled its
 * index from the records; one that did not built it batch by batch), since apply's uniqueness checks read it:
 * - The index holds every (digest, token) pair of the records, and may hold entries that are no longer right: 60 bits
 *   can be shared by two digests (about once in 10^6 states of a million tokens), and a removal cannot tell which of
 *   two entries sharing them it was for. So resolve reads each candidate's record and compares its secret's whole
 *   digest, and a digest written or removed by a batch has its entries checked against the records once LevelDB has
 *   the batch (prune), which drops those whose record is gone or holds another secret.
 * - Two records may hold one secret (an archive restored as it was, a state that digested a secret as it was given
 *   beside one that lower-cased it): resolve then names the one with the smallest AccessorID, on every node.
 */
import { decode, stringField } from './codec.js'
import { prefixEnd, recordKey, recordPrefix, SECRET_INDEX_PREFIX, uniqueTarget, uniqueValue } from './keys.js'
import type { BatchOp, StateDb } from './reader.js'
import { secretDigest } from './tables.js'

const INITIAL_SLOTS = 1024
const MAX_LOAD = 0.75
const GROWTH = 1.5
/** A slot's high fingerprint word when the slot is empty: fingerprints' words are 30 bits, so never this. */
const EMPTY = 0xffffffff
/** The AccessorID of a UUID, as uniqueValue stores it. */
const UUID_BYTES = 16
/** Token records the fill takes from LevelDB at a time, and the bytes it asks LevelDB to read ahead. */
const FILL_ENTRIES = 1000
const FILL_READ_BYTES = 1024 * 1024

const BASE64URL = new Int8Array(128).fill(-1)
for (const [at, char] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'].entries()) BASE64URL[char.charCodeAt(0)] = at

/** A digest's first 60 bits as two 30-bit words, or undefined for a key that is not a digest in base64url. */
function fingerprint(digest: string): [number, number] | undefined {
  if (digest.length !== 22) return undefined
  let high = 0
  let low = 0
  for (let n = 0; n < 10; n++) {
    const code = digest.charCodeAt(n)
    const bits = code < 128 ? BASE64URL[code]! : -1
    if (bits < 0) return undefined
    if (n < 5) high = high * 64 + bits
    else low = low * 64 + bits
  }
  return [high, low]
}

/** The digest of the secret the token `accessor` holds now; undefined when there is no such token. */
export type HeldDigest = (accessor: string) => string | undefined

/** HeldDigest over a state's token records, as `readRecord` reads them. */
export function heldDigests(readRecord: (key: string) => Buffer | undefined): HeldDigest {
  return (accessor) => {
    const bytes = readRecord(recordKey('token', accessor))
    return bytes === undefined ? undefined : recordDigest(bytes)
  }
}

/** The digest of the secret an encoded token record holds, read without decoding the rest (codec.ts stringField). */
function recordDigest(bytes: Buffer): string {
  return secretDigest(stringField(bytes, 'SecretID') ?? decode<{ SecretID: string }>(bytes).SecretID)
}

export class SecretIndex {
  private slots = INITIAL_SLOTS
  /** Two words per slot: the fingerprint's high and low 30 bits; EMPTY in the first word marks a free slot. */
  private prints = new Uint32Array(2 * INITIAL_SLOTS).fill(EMPTY)
  /** Four words per slot: the AccessorID's 16 bytes, big-endian. */
  private accessors = new Uint32Array(4 * INITIAL_SLOTS)
  private used = 0
  /** Entries the table cannot hold (an AccessorID that is not a UUID, a key that is not a digest), by digest. */
  private readonly others = new Map<string, Buffer[]>()
  private otherEntries = 0

  /** Entries held. */
  get size(): number {
    return this.used + this.otherEntries
  }

  /**
   * Fills the index from every token record of `db` (a state just opened or switched to: nothing else writes it). Each
   * record's SecretID is read without decoding the rest (codec.ts stringField), and its AccessorID from its key.
   */
  static async fill(db: StateDb): Promise<SecretIndex> {
    const index = new SecretIndex()
    const prefix = recordPrefix('token')
    const iterator = db.iterator({ gte: prefix, lt: prefixEnd(prefix), highWaterMarkBytes: FILL_READ_BYTES })
    try {
      for (let entries = await iterator.nextv(FILL_ENTRIES); entries.length > 0; entries = await iterator.nextv(FILL_ENTRIES)) {
        for (const [key, bytes] of entries) index.put(recordDigest(bytes), uniqueValue('token', 'secret', key.slice(prefix.length)))
      }
    } finally {
      await iterator.close()
    }
    return index
  }

  /** `ops` without the index's entries: what LevelDB is to write of a batch. */
  static stored(ops: readonly BatchOp[]): BatchOp[] {
    return ops.filter((op) => !op.key.startsWith(SECRET_INDEX_PREFIX))
  }

  /**
   * Takes in the index's entries among a batch's writes, once LevelDB has the rest: each put is added, and each digest
   * removed, or put beside another entry that may be its, has its entries checked against the tokens as they are now
   * (prune).
   */
  written(ops: readonly BatchOp[], held: HeldDigest): void {
    let check: Set<string> | undefined
    for (const op of ops) {
      if (!op.key.startsWith(SECRET_INDEX_PREFIX)) continue
      const digest = op.key.slice(SECRET_INDEX_PREFIX.length)
      if (op.type === 'del' || this.put(digest, op.value)) (check ??= new Set()).add(digest)
    }
    if (check !== undefined) for (const digest of check) this.prune(digest, held)
  }

  /**
   * The index entry's value (as uniqueValue gives it) of the token whose secret has `digest`, or undefined: each
   * candidate token's secret's digest is compared whole; of two tokens that hold the secret, the one with the smallest
   * AccessorID.
   */
  resolve(digest: string, held: HeldDigest): Buffer | undefined {
    let found: { value: Buffer; accessor: string } | undefined
    for (const value of this.candidates(digest)) {
      const accessor = uniqueTarget('token', 'secret', value)
      if (found !== undefined && found.accessor <= accessor) continue
      if (held(accessor) === digest) found = { value, accessor }
    }
    return found?.value
  }

  /** The values of every entry that may be `digest`'s. */
  candidates(digest: string): Buffer[] {
    const found: Buffer[] = [...(this.others.get(digest) ?? [])]
    const print = fingerprint(digest)
    if (print === undefined) return found
    for (let slot = print[0] % this.slots; this.prints[2 * slot] !== EMPTY; slot = (slot + 1) % this.slots) {
      if (this.prints[2 * slot] === print[0] && this.prints[2 * slot + 1] === print[1]) found.push(this.valueAt(slot))
    }
    return found
  }

  /** Adds an entry; whether another entry that may be `digest`'s was held beside it (it may be stale: see prune). */
  put(digest: string, value: Buffer): boolean {
    const print = fingerprint(digest)
    if (print === undefined || value.length !== UUID_BYTES) {
      const held = this.others.get(digest) ?? []
      if (held.some((other) => other.equals(value))) return false
      this.others.set(digest, [...held, value])
      this.otherEntries += 1
      return held.length > 0
    }
    let shared = false
    let slot = print[0] % this.slots
    for (; this.prints[2 * slot] !== EMPTY; slot = (slot + 1) % this.slots) {
      if (this.prints[2 * slot] !== print[0] || this.prints[2 * slot + 1] !== print[1]) continue
      // Written again (a token's record rewritten with its secret): held already, and nothing changed.
      if (this.holdsValue(slot, value)) return false
      shared = true
    }
    this.setSlot(slot, print[0], print[1], value)
    this.used += 1
    if (this.used > this.slots * MAX_LOAD) this.grow()
    return shared
  }

  /**
   * Drops the entries that may be `digest`'s but are no longer right for any digest: their record is gone, or its
   * secret's digest is not one they may be (another fingerprint, or for an entry held by its whole digest, another
   * digest). An entry shared with another digest's fingerprint stays while that digest's token holds it.
   */
  prune(digest: string, held: HeldDigest): void {
    const others = this.others.get(digest)
    if (others !== undefined) {
      const kept = others.filter((value) => held(uniqueTarget('token', 'secret', value)) === digest)
      this.otherEntries -= others.length - kept.length
      if (kept.length === 0) this.others.delete(digest)
      else this.others.set(digest, kept)
    }
    const print = fingerprint(digest)
    if (print === undefined) return
    const stale: Buffer[] = []
    for (let slot = print[0] % this.slots; this.prints[2 * slot] !== EMPTY; slot = (slot + 1) % this.slots) {
      if (this.prints[2 * slot] !== print[0] || this.prints[2 * slot + 1] !== print[1]) continue
      const value = this.valueAt(slot)
      const recordDigest = held(uniqueTarget('token', 'secret', value))
      const recordPrint = recordDigest === undefined ? undefined : fingerprint(recordDigest)
      if (recordPrint === undefined || recordPrint[0] !== print[0] || recordPrint[1] !== print[1]) stale.push(value)
    }
    // Removed one at a time: a removal moves the entries after it (clearSlot), so each is found again.
    for (const value of stale) {
      for (let slot = print[0] % this.slots; this.prints[2 * slot] !== EMPTY; slot = (slot + 1) % this.slots) {
        if (this.prints[2 * slot] === print[0] && this.prints[2 * slot + 1] === print[1] && this.holdsValue(slot, value)) {
          this.clearSlot(slot)
          break
        }
      }
    }
  }

  private valueAt(slot: number): Buffer {
    const value = Buffer.allocUnsafe(UUID_BYTES)
    for (let word = 0; word < 4; word++) value.writeUInt32BE(this.accessors[4 * slot + word]!, 4 * word)
    return value
  }

  private holdsValue(slot: number, value: Buffer): boolean {
    for (let word = 0; word < 4; word++) if (this.accessors[4 * slot + word] !== value.readUInt32BE(4 * word)) return false
    return true
  }

  private setSlot(slot: number, high: number, low: number, value: Buffer): void {
    this.prints[2 * slot] = high
    this.prints[2 * slot + 1] = low
    for (let word = 0; word < 4; word++) this.accessors[4 * slot + word] = value.readUInt32BE(4 * word)
  }

  /** Empties `slot`, and moves back the entries after it that probing would no longer reach (linear probing's delete). */
  private clearSlot(slot: number): void {
    this.prints[2 * slot] = EMPTY
    this.used -= 1
    let hole = slot
    for (let next = (slot + 1) % this.slots; this.prints[2 * next] !== EMPTY; next = (next + 1) % this.slots) {
      const home = this.prints[2 * next]! % this.slots
      // The entry at `next` stays unless the hole lies on its probe path, from its home slot up to `next`.
      const reachable = hole <= next ? home > hole && home <= next : home > hole || home <= next
      if (reachable) continue
      this.prints[2 * hole] = this.prints[2 * next]!
      this.prints[2 * hole + 1] = this.prints[2 * next + 1]!
      this.accessors.copyWithin(4 * hole, 4 * next, 4 * next + 4)
      this.prints[2 * next] = EMPTY
      hole = next
    }
  }

  private grow(): void {
    const { slots, prints, accessors } = this
    this.slots = Math.ceil(slots * GROWTH)
    this.prints = new Uint32Array(2 * this.slots).fill(EMPTY)
    this.accessors = new Uint32Array(4 * this.slots)
    for (let from = 0; from < slots; from++) {
      const high = prints[2 * from]!
      if (high === EMPTY) continue
      let slot = high % this.slots
      while (this.prints[2 * slot] !== EMPTY) slot = (slot + 1) % this.slots
      this.prints[2 * slot] = high
      this.prints[2 * slot + 1] = prints[2 * from + 1]!
      this.accessors.set(accessors.subarray(4 * from, 4 * from + 4), 4 * slot)
    }
  }
}
