/**
 * Lines about one failure logged at most once per interval; the next one admitted says how many were left out. For
 * failures anyone can cause (a login while an identity service is down, a connection to the peer port), so that they
 * cannot flood the log.
 */
import type { Logger } from 'pino'

export class LogLimiter {
  private readonly last = new Map<string, { atMs: number; suppressed: number }>()

  constructor(
    private readonly intervalMs = 10_000,
    private readonly now: () => number = Date.now,
    private readonly keysMax = 256,
  ) {}

  /** Whether to log the line with this key now, and how many like it were suppressed since the last one logged. */
  admit(key: string): { log: boolean; suppressed: number } {
    const nowMs = this.now()
    const seen = this.last.get(key)
    if (seen !== undefined && nowMs - seen.atMs < this.intervalMs) {
      seen.suppressed += 1
      return { log: false, suppressed: 0 }
    }
    // Bounded: when full, the oldest key is forgotten (its next line is logged, which errs on the side of the log).
    if (seen === undefined && this.last.size >= this.keysMax) this.last.delete(this.last.keys().next().value!)
    this.last.delete(key)
    this.last.set(key, { atMs: nowMs, suppressed: 0 })
    return { log: true, suppressed: seen?.suppressed ?? 0 }
  }

  /** Logs a warning unless one with this key was logged within the interval; the next one carries `suppressed`. */
  warn(log: Logger, key: string, fields: Record<string, unknown>, message: string): void {
    const { log: admitted, suppressed } = this.admit(key)
    if (admitted) log.warn(suppressed > 0 ? { ...fields, suppressed } : fields, message)
  }
}
