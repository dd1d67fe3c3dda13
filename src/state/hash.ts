/**
 * Record hashes: base64 BLAKE2b-256 over the hashed fields written one after another, as Consul's SetHash does, so
 * that a policy's Hash matches the one Consul computes for the same Name, Description, Rules and Datacenters.
 */
import { blake2b } from '@noble/hashes/blake2.js'

const encoder = new TextEncoder()

export function blake2bBase64(parts: readonly string[]): string {
  const hasher = blake2b.create({ dkLen: 32 })
  for (const part of parts) hasher.update(encoder.encode(part))
  return Buffer.from(hasher.digest()).toString('base64')
}
