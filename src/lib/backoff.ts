/**
 * Jittered exponential backoff for retries (reconnecting a peer link, for one). Jitter matters more than the curve:
 * when a node restarts, every peer notices at the same moment, and without it they would all redial in lockstep.
 *
 * The random source is a parameter so that tests and the simulator can make the delays repeatable.
 */
import { assert } from './assert.js'

export interface BackoffOptions {
  /** The base delay of the first retry. */
  initialMs: number
  /** The base delay never grows past this; with jitter the actual delay is at most this. */
  maxMs: number
  /** How much of each base delay is randomised, from 0 (none) to 1 (anywhere between 0 and the base: "full jitter"). */
  jitter: number
}

/** Doubling stops here: 2 ** 30 times any sensible initialMs is far above any sensible maxMs, and stays finite. */
const ATTEMPT_MAX = 30

export class Backoff {
  /** Invariant: 0 <= attempt <= ATTEMPT_MAX. */
  private attempt = 0

  constructor(
    private readonly options: BackoffOptions,
    private readonly random: () => number,
  ) {
    assert(Number.isFinite(options.initialMs) && options.initialMs >= 0, 'backoff initialMs must be a finite number >= 0')
    assert(Number.isFinite(options.maxMs) && options.maxMs >= options.initialMs, 'backoff maxMs must be >= initialMs')
    assert(options.jitter >= 0 && options.jitter <= 1, 'backoff jitter must be between 0 and 1')
  }

  /** The delay before the next retry; each call doubles the base until maxMs. */
  next(): number {
    const base = Math.min(this.options.maxMs, this.options.initialMs * 2 ** this.attempt)
    if (this.attempt < ATTEMPT_MAX) this.attempt += 1
    const sample = this.random()
    assert(sample >= 0 && sample < 1, 'backoff random source must return a number in [0, 1)')
    // Subtracting the jitter (rather than adding it) keeps every delay at or below maxMs, the bound callers rely on.
    return base * (1 - this.options.jitter * sample)
  }

  /** After a success: the next failure starts again from initialMs. */
  reset(): void {
    this.attempt = 0
  }
}
