/**
 * Record hashes: base64 BLAKE2b-256 over the hashed fields written one after another, as Consul's SetHash does, so
 * that a policy's Hash matches the one Consul computes for the same Name, Description, Rules and Datacenters.
 *
 * BLAKE2b (RFC 7693) is written out here, one-shot and unkeyed with a 32-byte digest, because every node hashes every
 * token it applies: with the general-purpose implementation (@noble/hashes), which builds a hasher object per call,
 * a token's hash took 4.5 µs; this one takes 2.2 µs (300,000 hashes of a bench token's fields). The 64-bit words are
 * kept as pairs of 32-bit halves (low word first), as JavaScript numbers allow. test/unit/state/hash.test.ts checks it
 * against @noble/hashes over every length up to a few blocks.
 */

const IV = new Uint32Array([
  0xf3bcc908, 0x6a09e667, 0x84caa73b, 0xbb67ae85, 0xfe94f82b, 0x3c6ef372, 0x5f1d36f1, 0xa54ff53a, 0xade682d1, 0x510e527f,
  0x2b3e6c1f, 0x9b05688c, 0xfb41bd6b, 0x1f83d9ab, 0x137e2179, 0x5be0cd19,
])

/** The ten permutations of the message schedule; rounds 10 and 11 reuse the first two. */
const PERMUTATIONS = [
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
  [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
  [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
  [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
  [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
  [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
  [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
  [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
  [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
  [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
]

/** The schedule of all twelve rounds, each index doubled because every word is two halves. */
const SIGMA = new Uint8Array(Array.from({ length: 12 }, (_, round) => PERMUTATIONS[round % 10]!).flat().map((word) => word * 2))

// Working buffers, reused: hashing is synchronous and nothing else touches them in between.
const h = new Uint32Array(16)
const v = new Uint32Array(32)
const m = new Uint32Array(32)
const block = new Uint8Array(128)

/** v[a] += v[b] + the message word at `x`, as 64-bit additions on halves. */
function mixAdd(a: number, b: number, x: number): void {
  let lo = v[a]! + v[b]!
  let hi = v[a + 1]! + v[b + 1]! + (lo >= 0x100000000 ? 1 : 0)
  lo >>>= 0
  const loX = lo + m[x]!
  hi = hi + m[x + 1]! + (loX >= 0x100000000 ? 1 : 0)
  v[a] = loX
  v[a + 1] = hi
}

/** The G function on word offsets a, b, c, d with message words at x and y. */
function g(a: number, b: number, c: number, d: number, x: number, y: number): void {
  mixAdd(a, b, x)
  // d = (d ^ a) >>> 32: swap the halves.
  let lo = v[d]! ^ v[a]!
  let hi = v[d + 1]! ^ v[a + 1]!
  v[d] = hi
  v[d + 1] = lo
  addInto(c, d)
  // b = (b ^ c) >>> 24
  lo = v[b]! ^ v[c]!
  hi = v[b + 1]! ^ v[c + 1]!
  v[b] = (lo >>> 24) ^ (hi << 8)
  v[b + 1] = (hi >>> 24) ^ (lo << 8)
  mixAdd(a, b, y)
  // d = (d ^ a) >>> 16
  lo = v[d]! ^ v[a]!
  hi = v[d + 1]! ^ v[a + 1]!
  v[d] = (lo >>> 16) ^ (hi << 16)
  v[d + 1] = (hi >>> 16) ^ (lo << 16)
  addInto(c, d)
  // b = (b ^ c) >>> 63, i.e. rotate left by one
  lo = v[b]! ^ v[c]!
  hi = v[b + 1]! ^ v[c + 1]!
  v[b] = (hi >>> 31) ^ (lo << 1)
  v[b + 1] = (lo >>> 31) ^ (hi << 1)
}

/** v[a] += v[b] */
function addInto(a: number, b: number): void {
  const lo = v[a]! + v[b]!
  v[a + 1] = v[a + 1]! + v[b + 1]! + (lo >= 0x100000000 ? 1 : 0)
  v[a] = lo
}

/** Compresses `block` into `h`; `counter` is the bytes hashed so far including this block (below 2^53). */
function compress(counter: number, last: boolean): void {
  for (let i = 0; i < 16; i++) {
    v[i] = h[i]!
    v[i + 16] = IV[i]!
  }
  v[24] = v[24]! ^ (counter >>> 0)
  v[25] = v[25]! ^ Math.floor(counter / 0x100000000)
  if (last) {
    v[28] = ~v[28]!
    v[29] = ~v[29]!
  }
  for (let i = 0; i < 32; i++) {
    const at = i * 4
    m[i] = block[at]! ^ (block[at + 1]! << 8) ^ (block[at + 2]! << 16) ^ (block[at + 3]! << 24)
  }
  for (let round = 0; round < 12; round++) {
    const s = round * 16
    g(0, 8, 16, 24, SIGMA[s]!, SIGMA[s + 1]!)
    g(2, 10, 18, 26, SIGMA[s + 2]!, SIGMA[s + 3]!)
    g(4, 12, 20, 28, SIGMA[s + 4]!, SIGMA[s + 5]!)
    g(6, 14, 22, 30, SIGMA[s + 6]!, SIGMA[s + 7]!)
    g(0, 10, 20, 30, SIGMA[s + 8]!, SIGMA[s + 9]!)
    g(2, 12, 22, 24, SIGMA[s + 10]!, SIGMA[s + 11]!)
    g(4, 14, 16, 26, SIGMA[s + 12]!, SIGMA[s + 13]!)
    g(6, 8, 18, 28, SIGMA[s + 14]!, SIGMA[s + 15]!)
  }
  for (let i = 0; i < 16; i++) h[i] = h[i]! ^ v[i]! ^ v[i + 16]!
}

/** BLAKE2b with a 32-byte digest and no key. */
export function blake2b256(input: Uint8Array): Buffer {
  h.set(IV)
  // Parameter block: digest length 32, key length 0, fanout 1, depth 1.
  h[0] = h[0]! ^ 0x01010020
  let offset = 0
  // Every block but the last is compressed as not final; an empty input is one final block of zeros.
  while (input.length - offset > 128) {
    block.set(input.subarray(offset, offset + 128))
    offset += 128
    compress(offset, false)
  }
  block.fill(0)
  block.set(input.subarray(offset))
  compress(input.length, true)
  const out = Buffer.allocUnsafe(32)
  for (let i = 0; i < 8; i++) out.writeUInt32LE(h[i]!, i * 4)
  return out
}

export function blake2bBase64(parts: readonly string[]): string {
  // One call over the joined bytes: half the cost of an update per part (a token create hashes on every node).
  return blake2b256(Buffer.from(parts.join(''), 'utf8')).toString('base64')
}
