/** UUIDs and timestamps: generated from node:crypto and the clock, outside apply, and carried in commands. */
import { randomBytes, randomUUID } from 'node:crypto'

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

export function isUuid(value: string): boolean {
  return UUID.test(value)
}

export function newUuid(): string {
  return randomUUID()
}

/**
 * A UUID of version 7 (RFC 9562 §5.7): 48 bits of milliseconds since the epoch, then 74 random bits from node:crypto,
 * so identifiers made later sort after earlier ones. For identifiers that are keys of large tables and no secret (a
 * token's AccessorID): LevelDB then receives new keys at the end of the key space, where a compaction rewrites little,
 * instead of all over it.
 */
export function newOrderedUuid(nowMs = Date.now()): string {
  // randomUUID draws from a pool node:crypto refills in bulk; randomBytes(16) costs a call into OpenSSL each time, a
  // few µs on every token create. Its version 4 layout keeps the variant bits and 74 random bits where version 7
  // wants them: only the time and the version digit are replaced.
  const random = randomUUID()
  const time = Math.max(0, Math.min(Math.floor(nowMs), 0xffffffffffff)).toString(16).padStart(12, '0')
  return `${time.slice(0, 8)}-${time.slice(8)}-7${random.slice(15)}`
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/

/**
 * Milliseconds since the epoch of an RFC 3339 timestamp, or undefined when it is not one. Each field is checked
 * against its range first, as Go's time.Parse does: Date.parse would take 24:00:00 as the next midnight and roll
 * February 30 over into March.
 */
export function parseTime(text: string): number | undefined {
  // A write checks the same times several times over (its route, the command before the log, the apply), one after
  // another: the last answer is kept, as the function is pure.
  if (text === lastParsed.text) return lastParsed.ms
  const ms = parseTimeUncached(text)
  lastParsed = { text, ms }
  return ms
}

let lastParsed: { text: string | undefined; ms: number | undefined } = { text: undefined, ms: undefined }

function parseTimeUncached(text: string): number | undefined {
  const match = RFC3339.exec(text)
  if (match === null) return undefined
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate()
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) return undefined
  if (match[9] !== undefined && (Number(match[9]) > 23 || Number(match[10]) > 59)) return undefined
  const ms = Date.parse(text.replace(' ', 'T'))
  return Number.isNaN(ms) ? undefined : ms
}

export function formatTime(ms: number): string {
  return new Date(ms).toISOString()
}

const CROCKFORD_BASE32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'

/**
 * A ULID (github.com/ulid/spec): 48 bits of milliseconds then 80 random bits, in 26 characters of Crockford base32,
 * so later identifiers sort after earlier ones. Used for resource generations, as Consul's resource service does.
 */
export function newUlid(nowMs: number): string {
  let time = ''
  let rest = Math.max(0, Math.floor(nowMs))
  for (let position = 0; position < 10; position += 1) {
    time = CROCKFORD_BASE32.charAt(rest % 32) + time
    rest = Math.floor(rest / 32)
  }
  let random = ''
  // 256 is a multiple of 32, so a byte modulo 32 is uniform.
  for (const byte of randomBytes(16)) random += CROCKFORD_BASE32.charAt(byte % 32)
  return time + random
}

/** A server's name (--node-name, --peer, a join's Node): the one rule every place that takes one checks. */
export const NODE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/
