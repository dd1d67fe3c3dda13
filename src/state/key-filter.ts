/**
 * An in-memory Bloom filter over the live state's keys that a token create looks up expecting to find none: the
 * token's record (its AccessorID) and its secret's unique index entry. Each of those lookups is a LevelDB miss, which
 * searches the memtables and every level's table (index block and on-disk filter) before it answers: on a loaded
 * leader the two cost about 8 µs of a token create's 130 µs of main-thread CPU (docs/benchmarks.md, issue 22, sixth
 * session). The filter answers most of them in a few hundred nanoseconds.
 *
 * It may answer "maybe" for a key that is absent (about 0.3% per layer), never "absent" for a key that is present:
 * every key of the database was either seen by the scan that fills it, or added by the store before the batch that
 * wrote it was issued (StateStore). The scan's iterator reads a snapshot taken after the filter began taking adds, so
 * no key falls between the two. Until the scan is done the filter is not ready, and every lookup goes to LevelDB.
 *
 * Deleted keys stay in it (a Bloom filter cannot remove one); they only make "maybe" a little more frequent. It grows
 * in layers of doubling capacity, so it needs no second scan as the state grows: about 1.5 bytes per key held, 3 MB
 * at a million tokens.
 */
import { prefixEnd, recordPrefix, uniqueKey } from './keys.js'
import type { StateDb } from './reader.js'

/** The key prefixes the filter holds. */
export const FILTERED_PREFIXES: readonly string[] = [recordPrefix('token'), uniqueKey('token', 'secret', '')]

/** Keys the first layer holds at its designed rate; each later layer holds twice the one before. */
const FIRST_LAYER_KEYS = 1 << 16
/** At least this many bits per key: with 7 probes, a false "maybe" rate of about 0.3% per full layer. */
const BITS_PER_KEY = 12
const PROBES = 7

interface Layer {
  readonly bits: Uint32Array
  /** Bit positions are hashes masked to the layer's size, a power of two. */
  readonly mask: number
  readonly capacity: number
  count: number
}

function newLayer(capacity: number): Layer {
  let size = 32
  while (size < capacity * BITS_PER_KEY) size *= 2
  return { bits: new Uint32Array(size / 32), mask: size - 1, capacity, count: 0 }
}

/** Two 32-bit hashes of a key: FNV-1a over its UTF-16 code units, and a mix of it for the probe step. */
function hashes(key: string): [number, number] {
  let h = 0x811c9dc5
  for (let n = 0; n < key.length; n++) {
    h ^= key.charCodeAt(n)
    h = Math.imul(h, 0x01000193)
  }
  let step = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  step = Math.imul(step ^ (step >>> 13), 0xc2b2ae35)
  step ^= step >>> 16
  // An odd step visits distinct positions in a power-of-two table.
  return [h >>> 0, (step | 1) >>> 0]
}

export class KeyFilter {
  private readonly layers: Layer[] = [newLayer(FIRST_LAYER_KEYS)]
  private filled = false
  private closed = false

  /** Whether the filter holds every key of its database, so that `mightHold` can be trusted. */
  get ready(): boolean {
    return this.filled && !this.closed
  }

  /** Whether `key` is of the kind the filter holds. */
  covers(key: string): boolean {
    for (const prefix of FILTERED_PREFIXES) if (key.startsWith(prefix)) return true
    return false
  }

  /** Takes a key of the database (one it covers). Called before the write that puts it is issued. */
  add(key: string): void {
    let layer = this.layers[this.layers.length - 1]!
    if (layer.count >= layer.capacity) {
      layer = newLayer(layer.capacity * 2)
      this.layers.push(layer)
    }
    const [h, step] = hashes(key)
    for (let n = 0, at = h; n < PROBES; n++, at = (at + step) >>> 0) {
      const bit = at & layer.mask
      layer.bits[bit >>> 5]! |= 1 << (bit & 31)
    }
    layer.count++
  }

  /** False only when `key` is certainly not in the database (once ready); true when it may be. */
  mightHold(key: string): boolean {
    const [h, step] = hashes(key)
    for (const layer of this.layers) {
      let all = true
      for (let n = 0, at = h; n < PROBES; n++, at = (at + step) >>> 0) {
        const bit = at & layer.mask
        if ((layer.bits[bit >>> 5]! & (1 << (bit & 31))) === 0) {
          all = false
          break
        }
      }
      if (all) return true
    }
    return false
  }

  /**
   * Adds every covered key of `db` and then marks the filter ready. The caller makes the filter before any write to
   * `db` can be issued, and adds each covered key of every write from then on; the iterators here read a snapshot
   * taken after that. Yields to the event loop between LevelDB's batches of keys; stops when closed (the database was
   * replaced or closed), and then never becomes ready.
   */
  async fill(db: StateDb): Promise<void> {
    try {
      for (const prefix of FILTERED_PREFIXES) {
        for await (const key of db.keys({ gte: prefix, lt: prefixEnd(prefix) })) {
          if (this.closed) return
          this.add(key)
        }
      }
      this.filled = true
    } catch {
      // The database closed under the scan (a snapshot install replaced it, or the node is stopping): this filter is
      // of no further use, and lookups keep going to LevelDB.
      this.closed = true
    }
  }

  /** The filter's database is gone: it stops filling and is never ready again. */
  close(): void {
    this.closed = true
  }

  /** Layers, keys taken and bytes held (tests). */
  get size(): { layers: number; keys: number; bytes: number } {
    let keys = 0
    let bytes = 0
    for (const layer of this.layers) {
      keys += layer.count
      bytes += layer.bits.byteLength
    }
    return { layers: this.layers.length, keys, bytes }
  }
}
