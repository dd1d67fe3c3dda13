/**
 * The progress line: which step of how many, what it is doing, and for how long. On a terminal it is one line
 * rewritten in place twice a second; elsewhere (a CI log, a pipe) each step is one line, so logs stay readable.
 */
export class Progress {
  private done = 0
  private label = ''
  private stepStartedAt = performance.now()
  private readonly startedAt = performance.now()
  private readonly timer: NodeJS.Timeout | undefined
  private readonly tty = process.stderr.isTTY === true

  constructor(private total: number) {
    if (this.tty) this.timer = setInterval(() => this.render(), 500)
  }

  /** Starts the next step (the previous one is done). */
  step(label: string): void {
    if (this.label !== '') this.done += 1
    this.total = Math.max(this.total, this.done + 1)
    this.label = label
    this.stepStartedAt = performance.now()
    if (this.tty) this.render()
    else process.stderr.write(`${this.prefix()} ${label}\n`)
  }

  /** A line that stays (a finding, a warning), printed above the progress line. */
  note(message: string): void {
    if (this.tty) process.stderr.write('\r\x1b[K')
    process.stderr.write(`${message}\n`)
    if (this.tty) this.render()
  }

  finish(): void {
    if (this.timer !== undefined) clearInterval(this.timer)
    if (this.tty) process.stderr.write('\r\x1b[K')
  }

  private prefix(): string {
    const elapsed = Math.round((performance.now() - this.startedAt) / 1000)
    const width = String(this.total).length
    return `[${String(this.done + 1).padStart(width)}/${this.total} ${Math.floor(elapsed / 60)}m${String(elapsed % 60).padStart(2, '0')}s]`
  }

  private render(): void {
    const stepS = ((performance.now() - this.stepStartedAt) / 1000).toFixed(0)
    const filled = Math.round((this.done / this.total) * 20)
    const bar = `${'#'.repeat(filled)}${'.'.repeat(20 - filled)}`
    const line = `${this.prefix()} ${bar} ${this.label} (${stepS}s)`
    process.stderr.write(`\r\x1b[K${line.slice(0, (process.stderr.columns ?? 120) - 1)}`)
  }
}
