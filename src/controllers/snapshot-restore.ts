/**
 * Restoring a snapshot archive (`PUT /v1/snapshot`): the driver on the server asked, and the janitor on the leader.
 *
 * The driver spools the uploaded archive to a file in the data directory and reads it through once to verify it (its
 * framing, checksum and counts, and every record it restores: state/restore.ts stagedPairProblem), so that a corrupt,
 * truncated or foreign archive is refused before anything enters the log. It then reads it again and proposes the
 * restore's commands in order: begin, the chunks, commit (state/restore.ts). Memory stays bounded whatever the archive's
 * size: one chunk (RESTORE_CHUNK_BYTES_MAX) at a time. Any server may drive a restore; its proposals go to the leader as
 * every write does.
 *
 * When anything goes wrong after the begin, the driver abandons the restore (restore.abort) and answers that nothing
 * was restored; when its commit's outcome is unknown it says so (504), never success. A driver that dies half way
 * (its server killed) leaves the restore open and every other write refused: the janitor, on the leader, abandons a
 * restore that has not moved for RESTORE_STALL_MS.
 */
import { randomUUID } from 'node:crypto'
import { createReadStream, createWriteStream } from 'node:fs'
import { mkdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { Transform, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGunzip } from 'node:zlib'
import type { Logger } from 'pino'
import { ArchiveError, readArchive, RESTORE_UPLOAD_BYTES_MAX, type ArchiveMeta } from '../lib/snapshot-archive.js'
import { WardenError } from '../lib/errors.js'
import type { Cluster } from '../rpc/index.js'
import { COMMAND_VERSION, type ApplyResult } from '../state/commands.js'
import { BOOTSTRAP_KEY } from '../state/keys.js'
import { ascendingProblem, isRestoredPair, nextDigest, RESTORE_CHUNK_BYTES_MAX, RESTORE_CHUNK_PAIRS_MAX, stagedPairProblem, type RestoreCommand } from '../state/restore.js'
import type { StateStore } from '../state/store.js'

/** A restore whose progress has not moved for this long, with no driver on the leader, is abandoned. */
export const RESTORE_STALL_MS = 60_000
const JANITOR_INTERVAL_MS = 5_000

export interface RestoreOutcome {
  /** The log index the restore completed at. */
  index: number
  meta: ArchiveMeta
  records: number
}

export interface RestoreHooks {
  /** Called after the archive is verified and before anything is proposed (the audit log's request line). */
  beforePropose?: (id: string) => Promise<void>
}

/** Thrown through the archive reader once a restore is abandoned: `answer` is what the caller is told. */
class Abandoned extends Error {
  constructor(
    readonly answer: WardenError,
    /** Whether the abort applied (the restore was open until then). */
    readonly aborted: boolean,
  ) {
    super(answer.message)
  }
}

/** A chunk of pairs to stage, cut the same way on the counting pass and on the proposing pass. */
class Chunker {
  private pairs: Array<[string, Uint8Array]> = []
  private bytes = 0

  constructor(private readonly emit: (pairs: Array<[string, Uint8Array]>) => Promise<void>) {}

  async add(key: string, value: Uint8Array): Promise<void> {
    const size = Buffer.byteLength(key) + value.length
    if (this.pairs.length > 0 && (this.bytes + size > RESTORE_CHUNK_BYTES_MAX || this.pairs.length >= RESTORE_CHUNK_PAIRS_MAX)) await this.flush()
    this.pairs.push([key, value])
    this.bytes += size
  }

  async flush(): Promise<void> {
    if (this.pairs.length === 0) return
    const pairs = this.pairs
    this.pairs = []
    this.bytes = 0
    await this.emit(pairs)
  }
}

export class SnapshotRestorer {
  private driving: string | undefined
  private timer: NodeJS.Timeout | undefined
  private stalled: { id: string; seq: number; since: number } | undefined
  private stopped = false

  constructor(
    private readonly state: StateStore,
    private readonly cluster: Cluster,
    private readonly options: { spoolDirectory: string; log: Logger; now: () => number },
  ) {}

  /** Starts the janitor. */
  start(): void {
    this.timer = setInterval(() => void this.sweep().catch((error: unknown) => this.options.log.warn({ err: error }, 'abandoning a stalled restore failed')), JANITOR_INTERVAL_MS)
    this.timer.unref()
  }

  stop(): void {
    this.stopped = true
    if (this.timer !== undefined) clearInterval(this.timer)
  }

  /** Spools, verifies and restores the archive `body` carries; throws a WardenError saying what went wrong. */
  async restore(body: Readable, hooks: RestoreHooks = {}): Promise<RestoreOutcome> {
    if (this.driving !== undefined) throw new WardenError('conflict', `snapshot: a restore (${this.driving}) is being driven from this server; wait for it to end`)
    const id = randomUUID()
    this.driving = id
    const file = join(this.options.spoolDirectory, `restore-${id}.archive`)
    try {
      await mkdir(this.options.spoolDirectory, { recursive: true, mode: 0o700 })
      await spool(body, file)
      const counted = await this.verify(file)
      await hooks.beforePropose?.(id)
      return await this.drive(id, file, counted)
    } finally {
      this.driving = undefined
      await rm(file, { force: true })
    }
  }

  /** Reads the archive through, checking it whole: its meta, chunks and records, or an invalid_input naming the fault. */
  private async verify(file: string): Promise<{ meta: ArchiveMeta; chunks: number; records: number }> {
    let chunks = 0
    let records = 0
    let problem: string | undefined
    let previous = ''
    const chunker = new Chunker(async () => void (chunks += 1))
    const { meta } = await readFile(file, async (key, value) => {
      // The first record that cannot be restored is reported once the archive is known undamaged: damage (which
      // also makes records unreadable) is named as such. Apply checks each chunk again (state/restore.ts).
      problem ??= ascendingProblem(previous, [[key, value]]) ?? stagedPairProblem(key, value)
      previous = key
      if (key !== BOOTSTRAP_KEY) records += 1
      await chunker.add(key, value)
    })
    if (problem !== undefined) throw new WardenError('invalid_input', `snapshot: the archive cannot be restored: ${problem}`)
    await chunker.flush()
    return { meta, chunks, records }
  }

  private async drive(id: string, file: string, counted: { meta: ArchiveMeta; chunks: number; records: number }): Promise<RestoreOutcome> {
    const { log } = this.options
    const begun = await this.propose({ v: COMMAND_VERSION, type: 'restore.begin', id, chunks: counted.chunks, records: counted.records }, id, false).catch((error: unknown) => {
      throw error instanceof Abandoned ? error.answer : error
    })
    if (!begun.result.ok) throw new WardenError(begun.result.error.code === 'conflict' ? 'conflict' : 'internal', `snapshot: ${begun.result.error.message}`)
    log.info({ id, chunks: counted.chunks, records: counted.records, archiveIndex: counted.meta.Index, archiveDatacenter: counted.meta.Datacenter }, 'snapshot restore begun')
    let seq = 0
    let digest = ''
    const chunker = new Chunker(async (pairs) => {
      const staged = await this.propose({ v: COMMAND_VERSION, type: 'restore.chunk', id, seq, pairs }, id, true)
      if (!staged.result.ok) throw await this.abandon(id, `chunk ${seq} was refused: ${staged.result.error.message}`)
      digest = nextDigest(digest, pairs)
      seq += 1
    })
    try {
      await readFile(file, (key, value) => chunker.add(key, value))
      await chunker.flush()
    } catch (error) {
      if (error instanceof Abandoned) throw error.answer
      // The archive was read whole a moment ago: a failure now is the disk's.
      throw (await this.abandon(id, `reading the spooled archive failed: ${(error as Error).message}`)).answer
    }
    let committed: { result: ApplyResult; index: number }
    try {
      committed = await this.cluster.proposeIndexed({ v: COMMAND_VERSION, type: 'restore.commit', id, chunks: seq, digest })
    } catch (error) {
      if (error instanceof WardenError && error.code === 'no_leader') throw (await this.abandon(id, error.message)).answer
      // The commit may have been applied. An abort that applies proves it was not (it would find no restore open), and
      // stops the refusal of writes now rather than at the janitor's turn.
      const abandoned = await this.abandon(id, `its last step's outcome is unknown (${(error as Error).message})`)
      if (abandoned.aborted) throw abandoned.answer
      throw new WardenError('outcome_unknown', `snapshot: the restore's last step may or may not have been applied (${(error as Error).message}); read the state to find out which`)
    }
    if (!committed.result.ok) throw new WardenError('internal', `snapshot: ${committed.result.error.message}`)
    log.info({ id, index: committed.index, records: counted.records }, 'snapshot restored')
    return { index: committed.index, meta: counted.meta, records: counted.records }
  }

  /**
   * Proposes one command of restore `id`. A proposal that fails (no leader, outcome unknown) abandons the restore when
   * `abandonOnFailure` (it is open), and the error says nothing was restored.
   */
  private async propose(command: RestoreCommand, id: string, abandonOnFailure: boolean): Promise<{ result: ApplyResult; index: number }> {
    try {
      return await this.cluster.proposeIndexed(command)
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error)
      if (abandonOnFailure || !(error instanceof WardenError && error.code === 'no_leader')) throw await this.abandon(id, message)
      throw new WardenError('no_leader', `snapshot: the restore could not begin (${message}); nothing was restored, retry`)
    }
  }

  /** Abandons restore `id` (if it is open): the answer tells the caller nothing was restored. */
  private async abandon(id: string, reason: string): Promise<Abandoned> {
    this.options.log.warn({ id, reason }, 'abandoning a snapshot restore')
    try {
      const result = await this.cluster.propose({ v: COMMAND_VERSION, type: 'restore.abort', id, reason: reason.slice(0, 1024) })
      // not_found: abandoned already (the janitor, a commit that failed its check), or it never began.
      return new Abandoned(new WardenError('internal', `snapshot: the restore failed (${reason}); nothing was restored`), result.ok)
    } catch (error) {
      return new Abandoned(
        new WardenError(
          'outcome_unknown',
          `snapshot: the restore failed (${reason}) and abandoning it did not complete (${(error as Error).message}); nothing was restored, and writes stay refused until the leader abandons it (within ${RESTORE_STALL_MS / 1000} s)`,
        ),
        false,
      )
    }
  }

  /** The janitor's turn: on the leader, abandons a restore nobody here drives that has not moved for RESTORE_STALL_MS. */
  private async sweep(): Promise<void> {
    const open = this.state.restoreInProgress
    if (this.stopped || open === undefined || !this.cluster.isLeader() || open.id === this.driving) {
      this.stalled = undefined
      return
    }
    const now = this.options.now()
    if (this.stalled === undefined || this.stalled.id !== open.id || this.stalled.seq !== open.nextSeq) {
      this.stalled = { id: open.id, seq: open.nextSeq, since: now }
      return
    }
    if (now - this.stalled.since < RESTORE_STALL_MS) return
    this.options.log.warn({ id: open.id, chunk: open.nextSeq, of: open.chunks }, 'abandoning a snapshot restore that stopped moving (its driver is gone)')
    await this.cluster.propose({ v: COMMAND_VERSION, type: 'restore.abort', id: open.id, reason: `no progress for ${RESTORE_STALL_MS / 1000} s` })
    this.stalled = undefined
  }
}

/** Writes `body` to `file`, refusing more than RESTORE_UPLOAD_BYTES_MAX. */
async function spool(body: Readable, file: string): Promise<void> {
  let bytes = 0
  const limit = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      bytes += chunk.length
      if (bytes > RESTORE_UPLOAD_BYTES_MAX) callback(new WardenError('payload_too_large', `snapshot: the archive is larger than ${RESTORE_UPLOAD_BYTES_MAX} bytes`))
      else callback(null, chunk)
    },
  })
  await pipeline(body, limit, createWriteStream(file, { mode: 0o600 }))
  if (bytes === 0) throw new WardenError('invalid_input', 'snapshot: the request has no body: send the archive `warden snapshot save` wrote')
}

/**
 * Reads the archive in `file`, calling `onPair` with each pair a restore takes, in order; answers its metadata once the
 * whole archive is verified. An archive fault is an invalid_input naming it.
 */
async function readFile(file: string, onPair: (key: string, value: Uint8Array) => Promise<void>): Promise<{ meta: ArchiveMeta }> {
  const source = createReadStream(file)
  const gunzip = createGunzip()
  source.on('error', (error) => gunzip.destroy(error))
  source.pipe(gunzip)
  let meta: ArchiveMeta | undefined
  try {
    await readArchive(
      gunzip as AsyncIterable<Buffer>,
      (found) => void (meta = found),
      async (pairs) => {
        for (const [key, value] of pairs) if (isRestoredPair(key)) await onPair(key, value)
      },
    )
  } catch (error) {
    if (error instanceof ArchiveError) throw new WardenError('invalid_input', `snapshot: ${error.message}`)
    const code = (error as NodeJS.ErrnoException).code
    if (typeof code === 'string' && code.startsWith('Z_')) throw new WardenError('invalid_input', `snapshot: not a warden snapshot, or a damaged one: its gzip compression does not decode (${(error as Error).message})`)
    throw error
  } finally {
    source.destroy()
  }
  if (meta === undefined) throw new WardenError('invalid_input', 'snapshot: the archive has no metadata record')
  return { meta }
}
