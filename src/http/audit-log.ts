/**
 * The audit log's writer: JSON lines appended to one file, rotated by size, failing closed (issue 18, "Audit log").
 *
 * The file is opened with O_APPEND (flag 'a'), mode 0600. Lines wait in a bounded queue and one loop writes them: each
 * turn takes the lines queued (at most BATCH_BYTES_MAX), checks that the path still names the file it has open, and
 * writes them with one `write` (continued if the kernel took part of it), so a line is never split between two writes
 * and a reader never sees half a line unless the disk filled in its middle. `append` resolves once its line has
 * reached the kernel (not fsynced: Vault's file device does not fsync either), and rejects with audit_unavailable when
 * the queue is full (the file cannot keep up: the request is refused rather than memory growing) or the line could
 * not be written. Whatever failed, the next turn opens the path again, so writes resume as soon as the file can be
 * written; the failure is logged at most once per interval.
 *
 * The path is checked every turn (one stat): a file removed, replaced (by a directory, by logrotate's move) or made
 * unreachable is seen at the next line, not after a restart. Without the check an open descriptor would keep
 * writing into a file nobody can find, and fail closed would mean nothing.
 *
 * Rotation: when a batch would take the file past rotateBytes, FILE.(keep-1) becomes FILE.keep (the oldest is
 * replaced), …, FILE becomes FILE.1, and a new FILE is opened, all within the writing loop, so no line is written
 * while the files move. A file is larger than rotateBytes only when one batch alone is.
 */
import { open, rename, stat, type FileHandle } from 'node:fs/promises'
import type { Logger } from 'pino'
import { WardenError } from '../lib/errors.js'
import { LogLimiter } from '../lib/log-limiter.js'
import { BoundedQueue } from '../lib/bounded-queue.js'

export interface AuditLogOptions {
  path: string
  /** A file reaching this size is rotated. */
  rotateBytes: number
  /** Rotated files kept (FILE.1 … FILE.keep), at least 1. */
  rotateKeep: number
  log: Logger
  /** Lines and bytes that may wait at once; past either, append refuses. */
  queueLinesMax?: number
  queueBytesMax?: number
}

/** What may wait in memory: beyond it the file is not keeping up, and writes are refused. */
export const AUDIT_QUEUE_LINES_MAX = 8_192
export const AUDIT_QUEUE_BYTES_MAX = 8 * 1024 * 1024
/** Bytes written by one `write`: lines queued meanwhile go together, as a group commit does. */
const BATCH_BYTES_MAX = 256 * 1024

interface Pending {
  bytes: Buffer
  resolve: () => void
  reject: (error: Error) => void
}

export class AuditUnavailableError extends WardenError {
  override readonly name: string = 'AuditUnavailableError'
  constructor(reason: string, options?: { cause?: unknown }) {
    super('audit_unavailable', `the audit log cannot be written (${reason}); the request was refused and nothing was changed`, undefined, options)
  }
}

export class AuditLog {
  private readonly queue: BoundedQueue<Pending>
  private handle: FileHandle | undefined
  /** The device and inode of the open file, to tell whether the path still names it. */
  private identity: { dev: number; ino: number } | undefined
  /** Bytes in the open file. Invariant: equals its size, as long as nothing else writes to it. */
  private size = 0
  private draining: Promise<void> | undefined
  private closed = false
  private failing = false
  private readonly limiter = new LogLimiter()

  private constructor(private readonly options: AuditLogOptions) {
    this.queue = new BoundedQueue<Pending>(options.queueLinesMax ?? AUDIT_QUEUE_LINES_MAX, options.queueBytesMax ?? AUDIT_QUEUE_BYTES_MAX, (item) => item.bytes.length)
  }

  /** Opens (creating it, mode 0600) the file; rejects with the system's error when it cannot, so the agent can exit. */
  static async open(options: AuditLogOptions): Promise<AuditLog> {
    const audit = new AuditLog(options)
    await audit.reopen()
    return audit
  }

  get path(): string {
    return this.options.path
  }

  /** Lines waiting to be written, and their bytes. */
  get queued(): { lines: number; bytes: number } {
    return { lines: this.queue.length, bytes: this.queue.totalSize }
  }

  /** Whether the queue is past half full: lines that may be dropped (refusals) are, to leave room for writes. */
  get busy(): boolean {
    return this.queue.length * 2 > this.queue.itemsMax || this.queue.totalSize * 2 > this.queue.sizeMax
  }

  /**
   * Queues one line (an object, written as JSON and a newline) and resolves once it is written to the file. Rejects
   * with AuditUnavailableError when the queue is full, the log is closed, or the write failed.
   */
  append(entry: Record<string, unknown>): Promise<void> {
    if (this.closed) return Promise.reject(new AuditUnavailableError('the agent is stopping'))
    const bytes = Buffer.from(`${JSON.stringify(entry)}\n`, 'utf8')
    return new Promise<void>((resolve, reject) => {
      if (!this.queue.push({ bytes, resolve, reject })) {
        this.limiter.warn(this.options.log, 'full', { path: this.options.path, ...this.queued }, 'the audit log is not keeping up; writes are refused until it does')
        reject(new AuditUnavailableError('too many lines are waiting to be written'))
        return
      }
      this.draining ??= this.drain()
    })
  }

  /** Writes what is queued, then closes the file; later appends are refused. */
  async close(): Promise<void> {
    this.closed = true
    while (this.draining !== undefined) await this.draining
    await this.handle?.close().catch(() => undefined) // Closing after the last write: nothing is lost if it fails.
    this.handle = undefined
  }

  /**
   * The one writing loop. Invariant: `draining` is set while it runs and is cleared by the loop itself, in the same
   * turn as it sees the queue empty: cleared later (in a `finally`), an append made by a caller woken by the last
   * batch would find it still set, start no loop, and wait forever.
   */
  private async drain(): Promise<void> {
    for (;;) {
      if (this.queue.length === 0) {
        this.draining = undefined
        return
      }
      const batch: Pending[] = []
      let bytes = 0
      while (this.queue.length > 0 && (batch.length === 0 || bytes + this.queue.peek()!.bytes.length <= BATCH_BYTES_MAX)) {
        const item = this.queue.shift()!
        batch.push(item)
        bytes += item.bytes.length
      }
      try {
        await this.writeBatch(batch, bytes)
        if (this.failing) this.options.log.info({ path: this.options.path }, 'the audit log is written again')
        this.failing = false
        for (const item of batch) item.resolve()
      } catch (error) {
        // The file may hold part of the batch (a disk that filled mid-write); the next turn opens the path afresh.
        await this.handle?.close().catch(() => undefined) // Already failing: the descriptor is dropped either way.
        this.handle = undefined
        this.failing = true
        const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message
        this.limiter.warn(this.options.log, 'failed', { path: this.options.path, err: error }, 'the audit log cannot be written; writes are refused until it can')
        const refusal = new AuditUnavailableError(reason, { cause: error })
        for (const item of batch) item.reject(refusal)
      }
    }
  }

  private async writeBatch(batch: Pending[], bytes: number): Promise<void> {
    await this.checkPath()
    if (this.handle === undefined) await this.reopen()
    if (this.size > 0 && this.size + bytes > this.options.rotateBytes) await this.rotate()
    const buffer = batch.length === 1 ? batch[0]!.bytes : Buffer.concat(batch.map((item) => item.bytes), bytes)
    let offset = 0
    while (offset < buffer.length) {
      const { bytesWritten } = await this.handle!.write(buffer, offset, buffer.length - offset)
      offset += bytesWritten
      this.size += bytesWritten
    }
  }

  /** Drops the descriptor when the path no longer names the open file (removed, moved, replaced). */
  private async checkPath(): Promise<void> {
    if (this.handle === undefined || this.identity === undefined) return
    let same = false
    try {
      const named = await stat(this.options.path)
      same = named.dev === this.identity.dev && named.ino === this.identity.ino
    } catch {
      // Gone or unreachable: opening the path again says which, and creates it if it may.
    }
    if (same) return
    await this.handle.close().catch(() => undefined) // The file is no longer the log; what it holds is written.
    this.handle = undefined
  }

  private async reopen(): Promise<void> {
    const handle = await open(this.options.path, 'a', 0o600)
    try {
      const opened = await handle.stat()
      if (!opened.isFile()) throw Object.assign(new Error(`${this.options.path} is not a regular file`), { code: 'ENOTFILE' })
      // A file made earlier by someone else keeps its mode on open: the log names who did what, so it is private.
      if ((opened.mode & 0o077) !== 0) await handle.chmod(0o600)
      this.identity = { dev: opened.dev, ino: opened.ino }
      this.size = opened.size
      this.handle = handle
    } catch (error) {
      await handle.close().catch(() => undefined) // The error that matters is the one thrown below.
      throw error
    }
  }

  private async rotate(): Promise<void> {
    const { path, rotateKeep } = this.options
    await this.handle?.close()
    this.handle = undefined
    try {
      for (let from = rotateKeep - 1; from >= 1; from -= 1) {
        await rename(`${path}.${from}`, `${path}.${from + 1}`).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== 'ENOENT') throw error // A missing FILE.n: fewer rotations so far than kept files.
        })
      }
      await rename(path, `${path}.1`)
    } catch (error) {
      // The log goes on in the current file, larger than asked, rather than refusing writes over its size.
      this.limiter.warn(this.options.log, 'rotate', { path, err: error }, 'the audit log could not be rotated; it keeps growing')
    }
    await this.reopen()
  }
}
