/**
 * Go-style durations ("90s", "1h30m", "1.5s", "250ms"), as the contract writes them, and their canonical Go form
 * ("1m30s", "0s") for responses, so clients written for Consul parse what warden returns.
 */
const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 }
const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y

/** Milliseconds, or undefined when `text` is not a Go duration. A bare "0" is zero, as in Go. */
export function parseDuration(text: string): number | undefined {
  if (text === '0' || text === '+0' || text === '-0') return 0
  let rest = text
  let sign = 1
  if (rest.startsWith('-') || rest.startsWith('+')) {
    sign = rest.startsWith('-') ? -1 : 1
    rest = rest.slice(1)
  }
  if (rest === '') return undefined
  let total = 0
  PART.lastIndex = 0
  while (PART.lastIndex < rest.length) {
    const start = PART.lastIndex
    const match = PART.exec(rest)
    if (match === null || match.index !== start) return undefined
    total += Number(match[1]) * (UNIT_MS[match[2] ?? ''] ?? Number.NaN)
  }
  return Number.isFinite(total) ? sign * total : undefined
}

/** Go's time.Duration.String() for a whole number of milliseconds (sub-millisecond parts are rounded away). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s'
  const sign = ms < 0 ? '-' : ''
  let rest = Math.round(Math.abs(ms))
  if (rest < 1000) return `${sign}${rest}ms`
  const hours = Math.floor(rest / 3_600_000)
  rest -= hours * 3_600_000
  const minutes = Math.floor(rest / 60_000)
  rest -= minutes * 60_000
  const seconds = rest / 1000
  const secondsText = `${Number(seconds.toFixed(3))}s`
  if (hours > 0) return `${sign}${hours}h${minutes}m${secondsText}`
  if (minutes > 0) return `${sign}${minutes}m${secondsText}`
  return `${sign}${secondsText}`
}
