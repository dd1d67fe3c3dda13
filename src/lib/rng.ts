/**
 * Seeded pseudo-random numbers. Code that must be deterministic (the Raft core, the simulator) takes an `Rng` as a
 * parameter and never calls `Math.random`, so that one seed replays one run exactly.
 *
 * The generator is xoshiro128** (Blackman and Vigna, https://prng.di.unimi.it/xoshiro128starstar.c): 128 bits of
 * state, 32-bit output, fast with `Math.imul`. Its state is filled from the seed by splitmix32, as the authors advise,
 * so that nearby seeds give unrelated streams. It is not cryptographic: never use it for secrets or IDs.
 */
import { assert } from './assert.js'

export interface Rng {
  /** A uniformly drawn integer in [0, maxExclusive). maxExclusive is a positive integer at most 2^32. */
  nextInt(maxExclusive: number): number
}

const TWO_POW_32 = 4_294_967_296

export class SeededRng implements Rng {
  // Invariant: the four words are never all zero (xoshiro's one fixed point).
  private s0: number
  private s1: number
  private s2: number
  private s3: number

  constructor(seed: number) {
    assert(Number.isInteger(seed) && seed >= 0 && seed < TWO_POW_32, `seed must be a 32-bit unsigned integer, got ${seed}`)
    let state = seed
    const splitmix32 = (): number => {
      state = (state + 0x9e3779b9) | 0
      let z = state
      z = Math.imul(z ^ (z >>> 16), 0x21f0aaad)
      z = Math.imul(z ^ (z >>> 15), 0x735a2d97)
      return (z ^ (z >>> 15)) >>> 0
    }
    this.s0 = splitmix32()
    this.s1 = splitmix32()
    this.s2 = splitmix32()
    this.s3 = splitmix32()
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1
  }

  /** The next 32-bit output, as an unsigned integer. */
  nextUint32(): number {
    const result = Math.imul(rotateLeft(Math.imul(this.s1, 5), 7), 9) >>> 0
    const t = this.s1 << 9
    this.s2 ^= this.s0
    this.s3 ^= this.s1
    this.s1 ^= this.s2
    this.s0 ^= this.s3
    this.s2 ^= t
    this.s3 = rotateLeft(this.s3, 11)
    return result
  }

  nextInt(maxExclusive: number): number {
    assert(Number.isInteger(maxExclusive) && maxExclusive > 0 && maxExclusive <= TWO_POW_32, `nextInt bound must be in [1, 2^32], got ${maxExclusive}`)
    // Multiply-and-shift (Lemire) without the rejection step: the bias is below 2^-32 * maxExclusive, far below
    // anything a simulation or an election timeout can notice, and one draw per call keeps replays simple.
    return Math.floor((this.nextUint32() * maxExclusive) / TWO_POW_32)
  }

  /** An integer in [low, high], both inclusive. */
  between(low: number, high: number): number {
    assert(high >= low, `between: high ${high} < low ${low}`)
    return low + this.nextInt(high - low + 1)
  }

  /** True with probability `probability` (a number in [0, 1]). */
  chance(probability: number): boolean {
    if (probability <= 0) return false
    if (probability >= 1) return true
    return this.nextUint32() < probability * TWO_POW_32
  }

  /** A new generator whose seed is drawn from this one: an independent stream that is still fixed by the first seed. */
  fork(): SeededRng {
    return new SeededRng(this.nextUint32())
  }
}

function rotateLeft(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k))
}
