/**
 * Go-style durations ("90s", "1h30m", "1.5s", "250ms"), as the contract writes them, and their canonical Go form
 * ("1m30s", "0s") for responses, so clients written for Consul parse what warden returns.
 */
const UNIT_NS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  µs: 1_000n,
  μs: 1_000n,
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
}
const PART = /(\d*)(?:\.(\d*))?(ns|us|µs|μs|ms|s|m|h)/y
/** Go durations are int64 nanoseconds. */
const DURATION_NS_MAX = 2n ** 63n - 1n

/**
 * Milliseconds, or undefined when `text` is not a Go duration or is beyond Go's range. Computed in integer
 * nanoseconds as Go does ("2.3h" is exactly 8280000 ms), so a fraction never turns into binary rounding noise.
 */
export function parseDuration(text: string): number | undefined {
  if (text === '0' || text === '+0' || text === '-0') return 0
  let rest = text
  let negative = false
  if (rest.startsWith('-') || rest.startsWith('+')) {
    negative = rest.startsWith('-')
    rest = rest.slice(1)
  }
  if (rest === '') return undefined
  let totalNs = 0n
  PART.lastIndex = 0
  while (PART.lastIndex < rest.length) {
    const start = PART.lastIndex
    const match = PART.exec(rest)
    if (match === null || match.index !== start) return undefined
    const whole = match[1] ?? ''
    const fraction = match[2] ?? ''
    if (whole === '' && fraction === '') return undefined
    const unitNs = UNIT_NS[match[3] ?? ''] ?? 0n
    totalNs += BigInt(whole || '0') * unitNs
    if (fraction !== '') totalNs += fractionNs(fraction, unitNs)
    if (totalNs > DURATION_NS_MAX) return undefined
  }
  const ms = Number(totalNs / 1_000_000n) + Number(totalNs % 1_000_000n) / 1e6
  return negative ? -ms : ms
}

/**
 * Go's leadingFraction and scaling: digits are taken while they fit in int64 (later ones are dropped), then the
 * fraction is scaled by unit/scale in float64 and truncated, which is what makes "0.3333333333333333333h" exactly 20m.
 */
function fractionNs(digits: string, unitNs: bigint): bigint {
  let fraction = 0n
  let scale = 1
  for (const digit of digits) {
    if (fraction > DURATION_NS_MAX / 10n) break
    const next = fraction * 10n + BigInt(digit)
    if (next > DURATION_NS_MAX) break
    fraction = next
    scale *= 10
  }
  return BigInt(Math.trunc(Number(fraction) * (Number(unitNs) / scale)))
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
