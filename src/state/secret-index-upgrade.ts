/**
 * Converts a state's token secret index, in place, from the form earlier builds wrote (the whole SHA-256 of a secret
 * in hex, 64 characters) to the one `secretDigest` gives (its first 16 bytes in base64url): the store runs it each
 * time it opens a state, before anything reads it. The new key is read off the old one, without the secret, and the
 * value is written in `uniqueValue`'s form. Each old entry is deleted in the batch that writes its new one, so a
 * crash part-way leaves every token findable, and the next open goes on where it stopped. Once no old entry is left
 * the state is marked (SECRET_INDEX_FORM_KEY), and later opens read that one key instead of scanning the index.
 */
import { encode } from './codec.js'
import { SECRET_INDEX_FORM_KEY, prefixEnd, uniqueKey, uniqueValue } from './keys.js'
import type { BatchOp, StateDb } from './reader.js'
import { SECRET_DIGEST_BYTES } from './tables.js'

/** The mark's value: the form the index is in. */
export const SECRET_INDEX_FORM: Buffer = encode(`sha256-${SECRET_DIGEST_BYTES}-base64url`)

const OLD_DIGEST = /^[0-9a-f]{64}$/
/** Conversions per batch: bounded memory whatever the number of tokens. */
const BATCH_ENTRIES = 10_000

/**
 * Converts what is left in the old form, and marks the state if it converted any; whether the state is marked now. A
 * state with nothing to convert (a new one, or one this build wrote all along) is left as it is, unwritten: the store
 * adds the mark to its next apply batch (StateStore.applyCommands), so that opening a state writes nothing more.
 */
export async function upgradeSecretIndex(db: StateDb): Promise<boolean> {
  if ((await db.get(SECRET_INDEX_FORM_KEY)) !== undefined) return true
  const prefix = uniqueKey('token', 'secret', '')
  let converted = 0
  let ops: BatchOp[] = []
  // The iterator reads a snapshot of the state as it was when it began: the entries written meanwhile (in the same
  // range) are not seen again.
  for await (const [key, value] of db.iterator({ gte: prefix, lt: prefixEnd(prefix) })) {
    const digest = key.slice(prefix.length)
    if (!OLD_DIGEST.test(digest)) continue
    const shortened = Buffer.from(digest, 'hex').toString('base64url', 0, SECRET_DIGEST_BYTES)
    // That build wrote the AccessorID as text.
    ops.push({ type: 'del', key }, { type: 'put', key: prefix + shortened, value: uniqueValue('token', 'secret', value.toString('utf8')) })
    converted++
    if (ops.length >= 2 * BATCH_ENTRIES) {
      await db.batch(ops)
      ops = []
    }
  }
  if (converted === 0) return false
  ops.push({ type: 'put', key: SECRET_INDEX_FORM_KEY, value: SECRET_INDEX_FORM })
  await db.batch(ops)
  return true
}
