import { assert } from './assert.js'

/**
 * A token bucket: `ratePerSecond` tokens a second, at most `burst` held. take() spends one token if there is one and
 * answers 0, or answers how many milliseconds until one will be there (and spends nothing).
 */
export class TokenBucket {
  /** Invariant: 0 <= tokens <= burst. */
  private tokens: number
  private refilledAtMs: number

  constructor(
    readonly ratePerSecond: number,
    readonly burst: number,
    private readonly now: () => number,
  ) {
    assert(ratePerSecond > 0, 'a bucket fills at a positive rate')
    assert(burst >= 1, 'a bucket holds at least one token')
    this.tokens = burst
    this.refilledAtMs = now()
  }

  take(): number {
    if (this.ratePerSecond === Infinity) return 0
    const nowMs = this.now()
    // A clock that went back (it is monotonic, but injected) adds nothing rather than removing tokens.
    const elapsedMs = Math.max(0, nowMs - this.refilledAtMs)
    this.tokens = Math.min(this.burst, this.tokens + (elapsedMs * this.ratePerSecond) / 1000)
    this.refilledAtMs = nowMs
    if (this.tokens >= 1) {
      this.tokens -= 1
      return 0
    }
    return ((1 - this.tokens) * 1000) / this.ratePerSecond
  }
}
