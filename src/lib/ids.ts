/** UUIDs and timestamps: generated from node:crypto and the clock, outside apply, and carried in commands. */
import { randomBytes, randomUUID } from 'node:crypto'

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

export function isUuid(value: string): boolean {
  return UUID.test(value)
}

export function newUuid(): string {
  return randomUUID()
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/

/** Milliseconds since the epoch of an RFC 3339 timestamp, or undefined when it is not one. */
export function parseTime(text: string): number | undefined {
  if (!RFC3339.test(text)) return undefined
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
