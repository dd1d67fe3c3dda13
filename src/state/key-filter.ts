/**
 * An in-memory Bloom filter over the live state's keys that a token create looks up expecting to find none: the
 * token's record (its AccessorID). Each such lookup is a LevelDB miss, which searches the memtables and every level's
 * table (index block and on-disk filter) before it answers: on a loaded leader it and the secret's lookup cost about
 * 8 µs of a token create's 130 µs of main-thread CPU (docs/benchmarks.md, issue 22, sixth session). The filter answers
 * most of them in a few hundred nanoseconds. (The secret's lookup no longer reaches LevelDB: its index is held in
 * memory, secret-index.ts.)
 *
 * It may answer "maybe" for a key that is absent (about 0.3% per layer), never "absent" for a key that is present:
 * every key of the database was either seen by the scan that fills it, or added by the store before the batch that
 * wrote it was issued (StateStore). The scan's iterator reads a snapshot taken after the filter began taking adds, so
 * no key falls between the two. Until the scan is done the filter is not ready, and every lookup goes to LevelDB.
 *
 * Only a node that runs token creates looks these keys up: a leader, or a follower that applies a command itself
 * rather than its leader's shipped writes. So the filter starts (takes adds, and scans the state, which reads every
 * token record once) only after such a lookup asked for it, when the store next begins an apply batch, with no batch
 * in flight. A follower that applies its leader's shipped writes never pays for the scan, nor for mapping the state
 * into memory when restarted.
 *
 * It grows in layers of doubling capacity as keys are added: a key it may already hold (an update rewrites a token's
 * record) is not added again. Deleted keys stay in it (a Bloom filter cannot remove one), so once
 * the keys deleted since it was filled are more than half of those it holds (tokens created and deleted, logins come
 * and gone), it is filled again from LevelDB beside the old layers, which answer meanwhile, and the new layers
 * replace them: its size follows the live state's, 2–4 bytes per key held (16 bits each once rounded to a power of
 * two, in layers up to twice what they hold), 2–4 MB at a million tokens.
 *
 * Keys are hashed as LevelDB will return them: a string with a lone surrogate is stored as UTF-8 with U+FFFD in its
 * place, so it is hashed in that form (no AccessorID or digest can hold one today; a restore archive could).
 */
import { prefixEnd, recordPrefix } from './keys.js'
import type { StateDb } from './reader.js'

/** The key prefixes the filter holds. */
export const FILTERED_PREFIXES: readonly string[] = [recordPrefix('token')]

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
  // As LevelDB gives the key back after a restart (UTF-8 has no lone surrogates): the fill must hash what adds hashed.
  // (String's well-formedness methods are ES2024, in every Node this runs on; the compiler's library is older.)
  const text = key as string & { isWellFormed(): boolean; toWellFormed(): string }
  const stored = text.isWellFormed() ? key : text.toWellFormed()
  let h = 0x811c9dc5
  for (let n = 0; n < stored.length; n++) {
    h ^= stored.charCodeAt(n)
    h = Math.imul(h, 0x01000193)
  }
  let step = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  step = Math.imul(step ^ (step >>> 13), 0xc2b2ae35)
  step ^= step >>> 16
  // An odd step visits distinct positions in a power-of-two table.
  return [h >>> 0, (step | 1) >>> 0]
}

function holds(layers: readonly Layer[], h: number, step: number): boolean {
  for (const layer of layers) {
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

/** Sets a key's bits in the last layer, opening a layer of twice the capacity when that one is full. */
function insert(layers: Layer[], h: number, step: number): void {
  let layer = layers[layers.length - 1]!
  if (layer.count >= layer.capacity) {
    layer = newLayer(layer.capacity * 2)
    layers.push(layer)
  }
  for (let n = 0, at = h; n < PROBES; n++, at = (at + step) >>> 0) {
    const bit = at & layer.mask
    layer.bits[bit >>> 5]! |= 1 << (bit & 31)
  }
  layer.count++
}

function keysIn(layers: readonly Layer[]): number {
  let keys = 0
  for (const layer of layers) keys += layer.count
  return keys
}

export class KeyFilter {
  private layers: Layer[] = [newLayer(FIRST_LAYER_KEYS)]
  /** A lookup asked for the filter (want); it starts at the store's next apply batch (startIfWanted). */
  private wanted = false
  /** Taking adds and filling, or filled: from startIfWanted on. */
  private started = false
  /** The fill under way or done, once started. */
  private filling: Promise<void> | undefined
  /** Layers being filled again while the current ones answer (refill); every add goes to both. */
  private next: Layer[] | undefined
  /** Covered keys deleted since the layers in use were filled: they stay in them, and past half of them a refill. */
  private deletedKeys = 0
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

  /** A lookup of a covered key went to LevelDB because the filter was not ready: start it at the next batch. */
  want(): void {
    this.wanted = true
  }

  /**
   * Starts the filter if a lookup wanted it: from here it takes every add, and it fills from `db` in the background.
   * The store calls this as an apply batch begins, when no write of its own to `db` is in flight, so every key is
   * either in the fill's snapshot or added afterwards.
   */
  startIfWanted(db: StateDb): void {
    if (!this.wanted || this.started || this.closed) return
    this.started = true
    this.filling = this.fill(db)
  }

  /** Resolves once the fill started by startIfWanted is done (at once when none was started): whether ready (tests). */
  async whenFilled(): Promise<boolean> {
    await this.filling
    return this.ready
  }

  /** Takes a key of the database (one it covers). Called before the write that puts it is issued. */
  add(key: string): void {
    // Before it starts the filter holds nothing; its fill reads the keys written until then.
    if (!this.started) return
    const [h, step] = hashes(key)
    if (!holds(this.layers, h, step)) insert(this.layers, h, step)
    if (this.next !== undefined && !holds(this.next, h, step)) insert(this.next, h, step)
  }

  /** False only when `key` is certainly not in the database (once ready); true when it may be. */
  mightHold(key: string): boolean {
    const [h, step] = hashes(key)
    return holds(this.layers, h, step)
  }

  /**
   * Adds every covered key of `db` and then marks the filter ready. The caller makes the filter before any write to
   * `db` can be issued, and adds each covered key of every write from then on; the iterators here read a snapshot
   * taken after that. Yields to the event loop between LevelDB's batches of keys; stops when closed (the database was
   * replaced or closed), and then never becomes ready.
   */
  async fill(db: StateDb): Promise<void> {
    this.started = true
    if (await this.scan(db, this.layers)) this.filled = true
  }

  /**
   * Takes what a batch about to be issued writes: each covered key it puts is added, each it deletes counted (it stays
   * in the layers, see refillIfOvergrown). Called before the batch is issued: from then on a lookup may find the key.
   */
  beforeWrite(ops: Iterable<{ readonly type: 'put' | 'del'; readonly key: string }>): void {
    if (!this.started) return
    for (const { type, key } of ops) {
      if (!this.covers(key)) continue
      if (type === 'put') this.add(key)
      else this.deletedKeys++
    }
  }

  /**
   * Fills the filter again from `db` once the keys deleted since its layers were filled are more than half of what
   * they hold (and more than a first layer's worth); the current layers answer until the new ones are complete. A
   * growing state never causes one. Called by the store after its writes; resolves when the refill it started is
   * done (tests), or is undefined when none was needed.
   */
  refillIfOvergrown(db: StateDb): Promise<void> | undefined {
    const held = keysIn(this.layers)
    if (!this.ready || this.next !== undefined || this.deletedKeys <= Math.max(held / 2, FIRST_LAYER_KEYS)) return undefined
    // Sized for the live keys, so that a large state is held in one layer.
    let capacity = FIRST_LAYER_KEYS
    while (capacity < held - this.deletedKeys) capacity *= 2
    const next = [newLayer(capacity)]
    this.next = next
    // Deletions from here on may be of keys the new layers' snapshot still holds: they count against those.
    const deletedBefore = this.deletedKeys
    return this.scan(db, next).then((complete) => {
      if (this.next !== next) return
      this.next = undefined
      if (!complete) return
      this.layers = next
      this.deletedKeys -= deletedBefore
    })
  }

  /** Adds every covered key of `db` to `layers`; false if the filter was closed or the database failed meanwhile. */
  private async scan(db: StateDb, layers: Layer[]): Promise<boolean> {
    try {
      for (const prefix of FILTERED_PREFIXES) {
        for await (const key of db.keys({ gte: prefix, lt: prefixEnd(prefix) })) {
          if (this.closed) return false
          const [h, step] = hashes(key)
          if (!holds(layers, h, step)) insert(layers, h, step)
        }
      }
      return !this.closed
    } catch {
      // The database closed under the scan (a snapshot install replaced it, or the node is stopping): this filter is
      // of no further use, and lookups keep going to LevelDB.
      this.closed = true
      return false
    }
  }

  /** The filter's database is gone: it stops filling and is never ready again. */
  close(): void {
    this.closed = true
  }

  /** Layers, keys taken and bytes held (tests). */
  get size(): { layers: number; keys: number; bytes: number } {
    let bytes = 0
    for (const layer of this.layers) bytes += layer.bits.byteLength
    return { layers: this.layers.length, keys: keysIn(this.layers), bytes }
  }
}
