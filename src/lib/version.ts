/** warden's version, from its package.json (two folders up from src/lib or dist/lib). */
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'

let cached: string | undefined

export function wardenVersion(): string {
  if (cached !== undefined) return cached
  try {
    cached = (JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')) as { version: string }).version
  } catch {
    cached = 'unknown' // Run from a copy without its package.json: the version is all that is missing.
  }
  return cached
}
