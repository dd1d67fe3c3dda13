/**
 * Record hashes: base64 BLAKE2b-256 over the hashed fields written one after another, as Consul's SetHash does, so
 * that a policy's Hash matches the one Consul computes for the same Name, Description, Rules and Datacenters.
 */
import { blake2b } from '@noble/hashes/blake2.js'

export function blake2bBase64(parts: readonly string[]): string {
  // One call over the joined bytes: half the cost of an update per part (a token create hashes on every node).
  return Buffer.from(blake2b(Buffer.from(parts.join(''), 'utf8'), { dkLen: 32 })).toString('base64')
}
