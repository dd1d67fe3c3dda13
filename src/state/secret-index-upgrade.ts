/**
 * Drops the token secret index that earlier builds stored in the state (in either of their forms: the whole SHA-256 of
 * a secret in hex, or its first 16 bytes in base64url), since this build holds it in memory (secret-index.ts). The
 * store runs it each time it opens a state or switches to another, before it fills the index. The entries go in
 * bounded batches; a crash part-way leaves some, and the next open drops them. Once none is left the state is marked
 * (SECRET_INDEX_FORM_KEY), and later opens read that one key instead of scanning the range.
 */
import { encode } from './codec.js'
import { SECRET_INDEX_FORM_KEY, SECRET_INDEX_PREFIX, prefixEnd } from './keys.js'
import type { BatchOp, StateDb } from './reader.js'

/** The mark's value: the state holds no secret index (an earlier build's mark names the form it stored). */
export const SECRET_INDEX_FORM: Buffer = encode('none')

/** Deletions per batch: bounded memory whatever the number of tokens. */
const BATCH_ENTRIES = 10_000

/**
 * Drops what is left of a stored index, and marks the state if it dropped any or held an earlier build's mark; whether
 * the state is marked now. A state with nothing to drop and no mark (a new one) is left as it is, unwritten: the store
 * adds the mark to its next apply batch (StateStore.applyCommands), so that opening a state writes nothing.
 */
export async function dropStoredSecretIndex(db: StateDb): Promise<boolean> {
  const mark = await db.get(SECRET_INDEX_FORM_KEY)
  if (mark !== undefined && mark.equals(SECRET_INDEX_FORM)) return true
  let dropped = 0
  let ops: BatchOp[] = []
  for await (const key of db.keys({ gte: SECRET_INDEX_PREFIX, lt: prefixEnd(SECRET_INDEX_PREFIX) })) {
    ops.push({ type: 'del', key })
    dropped++
    if (ops.length >= BATCH_ENTRIES) {
      await db.batch(ops)
      ops = []
    }
  }
  if (dropped === 0 && mark === undefined) return false
  ops.push({ type: 'put', key: SECRET_INDEX_FORM_KEY, value: SECRET_INDEX_FORM })
  await db.batch(ops)
  return true
}
