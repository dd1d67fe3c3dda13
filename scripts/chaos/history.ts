/**
 * What the chaos runner records: every operation a client made, with when it was sent, when its answer came (or
 * when the client gave up), and what the client can honestly say about its outcome.
 *
 * Outcomes are decided once, here, from the HTTP answer (readings.md, Errors):
 * - ok: a 200 (or a 404 on a read, which observes absence);
 * - failed: the server said it did not apply it (400, 403, 404 on a write, 409, 413, 429, 503 no_leader), or the
 *   connection was refused, so the request never reached a server;
 * - unknown: a 504 outcome_unknown, a 500, a timeout, or a connection that broke after the request may have been
 *   sent. A write whose outcome is unknown may take effect at any time after it was sent, or never.
 */

export type Outcome = 'ok' | 'failed' | 'unknown'

export type ReadMode = 'stale' | 'default' | 'consistent'

export const READ_MODES: readonly ReadMode[] = ['stale', 'default', 'consistent']

export type OperationKind =
  | 'config.create'
  | 'config.cas'
  | 'config.read'
  | 'policy.create'
  | 'policy.update'
  | 'policy.read'
  | 'token.create'
  | 'token.update'
  | 'token.read'
  /** One key's value as the final ?consistent list read from the leader saw it, after every fault was healed. */
  | 'final.read'

export interface RecordedOperation {
  id: number
  /** The client that made it; -1 for the setup and the final reads. */
  client: number
  node: string
  kind: OperationKind
  /** `config:<name>`, `policy:<name>` or `token:<AccessorID>`: the register the operation reads or writes. */
  key: string
  mode?: ReadMode
  /** Writes: the value written (a config entry's Counter; a policy's or token's Description). */
  value?: string | number
  /** config.cas: the Counter the client had read, which the write expects (null: absent, for config.create). */
  expected?: number | null
  /** ms since the run started (one monotonic clock for the whole run). */
  start: number
  /** When the answer came or the client gave up; for an unknown outcome the write may still land after this. */
  end: number
  outcome: Outcome
  /** Reads: the value seen (null: absent). config.cas and config.create: whether the cas applied. */
  result?: string | number | null | boolean
  /** Config reads: the entry's ModifyIndex. */
  modifyIndex?: number
  status?: number
  error?: string
}

export function isWrite(kind: OperationKind): boolean {
  return kind.endsWith('.create') || kind.endsWith('.update') || kind === 'config.cas'
}

export function isRead(kind: OperationKind): boolean {
  return kind.endsWith('.read')
}

/** The outcome of an HTTP status for a write; reads treat every non-200 but a 404 as failed. */
export function writeOutcome(status: number): Outcome {
  if (status === 200) return 'ok'
  if (status === 504 || status === 500 || status === 502) return 'unknown'
  // 4xx and 503 (no_leader): the contract says the write was not applied.
  if ((status >= 400 && status < 500) || status === 503) return 'failed'
  return 'unknown'
}
