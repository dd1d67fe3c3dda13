/** UUIDs and timestamps: generated from node:crypto and the clock, outside apply, and carried in commands. */
import { randomUUID } from 'node:crypto'

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
