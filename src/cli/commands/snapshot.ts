/**
 * `warden snapshot save FILE`, `warden snapshot restore FILE` and `warden snapshot inspect FILE`, as Consul's: save
 * streams GET /v1/snapshot into FILE (through FILE.partial, renamed once the archive is verified, so FILE is never a
 * half-written archive); restore verifies FILE, then streams it to PUT /v1/snapshot; inspect reads an archive and
 * prints its metadata and the records of each table. On a terminal, a progress line on standard error counts the
 * bytes as a large archive goes by.
 */
import { createReadStream, createWriteStream, type WriteStream } from 'node:fs'
import { rename, rm, stat } from 'node:fs/promises'
import { once } from 'node:events'
import { createGunzip } from 'node:zlib'
import { UsageError } from '../argv.js'
import { CommandError, type Command, type CommandContext } from '../command.js'
import { ArchiveError, readArchive, type ArchiveEnd, type ArchiveMeta } from '../../lib/snapshot-archive.js'
import { columns } from './operator.js'

/** A whole save may take this long (a million tokens: minutes); the server must start answering within the usual minute. */
const SAVE_TIMEOUT_MS = 60 * 60_000
/** A whole restore, sending the archive and the datacenter installing it, may take as long as a save. */
const RESTORE_TIMEOUT_MS = SAVE_TIMEOUT_MS

function onePath(context: CommandContext, what: string): string {
  const [file, ...extra] = context.flags.positionals
  if (file === undefined || file === '') throw new UsageError(`Must specify exactly one positional argument: the file ${what}`)
  if (extra.length > 0) throw new UsageError(`Too many arguments: ${extra.join(' ')}`)
  return file
}

/** Prints `label: N MiB` on standard error at most every 250 ms, on a terminal only; `done` ends the line. */
function progress(context: CommandContext, label: string): { add(bytes: number): void; done(): void } {
  let bytes = 0
  let shownAt = 0
  const show = (): void => context.io.stderr(`\r${label}: ${(bytes / 1024 / 1024).toFixed(1)} MiB`)
  return {
    add(more) {
      bytes += more
      if (!context.io.isTty) return
      const now = Date.now()
      if (now - shownAt >= 250) {
        shownAt = now
        show()
      }
    },
    done() {
      if (context.io.isTty && shownAt > 0) {
        show()
        context.io.stderr('\n')
      }
    },
  }
}

/** Reads and verifies the archive in `file`; ArchiveError when it is not a whole, undamaged one. */
export async function inspectArchive(file: string, onBytes?: (bytes: number) => void): Promise<{ meta: ArchiveMeta; end: ArchiveEnd }> {
  const source = createReadStream(file)
  if (onBytes !== undefined) source.on('data', (chunk) => onBytes(chunk.length))
  const gunzip = createGunzip()
  source.on('error', (error) => gunzip.destroy(error))
  source.pipe(gunzip)
  try {
    return await readArchive(gunzip as AsyncIterable<Buffer>, () => undefined, () => undefined)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (typeof code === 'string' && code.startsWith('Z_')) throw new ArchiveError(`not a warden snapshot, or a damaged one: its gzip compression does not decode (${(error as Error).message})`)
    throw error
  } finally {
    source.destroy()
  }
}

async function write(out: WriteStream, chunk: Buffer): Promise<void> {
  if (!out.write(chunk)) await once(out, 'drain')
}

export const snapshotSave: Command = {
  path: 'snapshot save',
  synopsis: 'Save a snapshot of the state',
  help: `Usage: warden snapshot save [options] FILE

  Saves a snapshot of the whole state to FILE (a management token, acl:write, is needed), then verifies it. By default
  the snapshot holds every write the leader had committed when it was asked; with -stale, the state of the server
  asked, as it is:

      $ warden snapshot save backup.snap`,
  flags: {},
  async run(context) {
    const file = onePath(context, 'to save the snapshot to')
    const partial = `${file}.partial`
    const out = createWriteStream(partial, { mode: 0o600 })
    await once(out, 'open')
    const shown = progress(context, 'Saving snapshot')
    try {
      await context.api('Error saving snapshot', () =>
        context.client.download('/v1/snapshot', async (chunk) => {
          shown.add(chunk.length)
          await write(out, chunk)
        }, { ...context.consistency, timeoutMs: SAVE_TIMEOUT_MS }),
      )
      out.end()
      await once(out, 'close')
      shown.done()
      const { meta } = await inspectArchive(partial).catch((error: unknown) => {
        throw new CommandError(`Error verifying snapshot file: ${(error as Error).message}`)
      })
      await rename(partial, file)
      context.print(`Saved and verified snapshot to index ${meta.Index}`)
    } catch (error) {
      out.destroy()
      await rm(partial, { force: true })
      throw error
    }
  },
}

export const snapshotRestore: Command = {
  path: 'snapshot restore',
  synopsis: 'Restore a snapshot of the state',
  help: `Usage: warden snapshot restore [options] FILE

  Restores the state saved in FILE by "warden snapshot save" on every server of the datacenter (a management token,
  acl:write, is needed). Whatever was written since the snapshot is lost: every record is as FILE holds it. FILE is
  verified first (checksum and counts), and a damaged one is refused before anything is sent; the servers check it
  again and restore all of it or nothing:

      $ warden snapshot restore backup.snap`,
  flags: {},
  async run(context) {
    const file = onePath(context, 'to restore the snapshot from')
    let size: number
    try {
      size = (await stat(file)).size
    } catch (error) {
      throw new CommandError(`Error opening snapshot file: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`)
    }
    const verifying = progress(context, 'Verifying snapshot')
    await inspectArchive(file, (bytes) => verifying.add(bytes)).then(
      () => verifying.done(),
      (error: unknown) => {
        // The progress line ended first, so the error is a line of its own.
        verifying.done()
        throw new CommandError(`Error verifying snapshot file: ${(error as Error).message}`)
      },
    )
    const shown = progress(context, 'Restoring snapshot')
    const source = createReadStream(file)
    try {
      await context.api('Error restoring snapshot', () =>
        // The length verified above is announced, so a file cut short or grown since fails the request before the
        // server holds a whole body (the servers verify the archive again in any case).
        context.client.upload('/v1/snapshot', counted(source, (bytes) => shown.add(bytes)), { bytes: size, timeoutMs: RESTORE_TIMEOUT_MS }),
      )
    } finally {
      source.destroy()
      // Ends the progress line on failure too, so the error is a line of its own.
      shown.done()
    }
    context.print('Restored snapshot')
  },
}

/** The chunks of `source` as they are read, each counted first (the progress line shows what went to the connection). */
async function* counted(source: AsyncIterable<Buffer>, onBytes: (bytes: number) => void): AsyncGenerator<Buffer> {
  for await (const chunk of source) {
    onBytes(chunk.length)
    yield chunk
  }
}

export const snapshotInspect: Command = {
  path: 'snapshot inspect',
  synopsis: 'Show what a snapshot file holds',
  help: `Usage: warden snapshot inspect [options] FILE

  Reads a snapshot saved with "warden snapshot save", checks it (checksum and counts), and shows its index, term,
  version, datacenter, size and the records of each table:

      $ warden snapshot inspect backup.snap`,
  flags: {},
  http: false,
  format: true,
  async run(context) {
    const file = onePath(context, 'to inspect')
    let size: number
    try {
      size = (await stat(file)).size
    } catch (error) {
      throw new CommandError(`Error opening snapshot file: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`)
    }
    const shown = progress(context, 'Reading snapshot')
    const { meta, end } = await inspectArchive(file, (bytes) => shown.add(bytes)).catch((error: unknown) => {
      throw new CommandError(`Error verifying snapshot file: ${(error as Error).message}`)
    })
    shown.done()
    const report = { Index: meta.Index, Term: meta.Term, Version: meta.Version, Datacenter: meta.Datacenter, Node: meta.Node, Time: meta.Time, Size: size, Records: end.Records }
    context.output(report, (value) =>
      [
        columns([
          ['Index', String(value.Index)],
          ['Term', String(value.Term)],
          ['Version', value.Version],
          ['Datacenter', value.Datacenter],
          ['Node', value.Node],
          ['Time', value.Time],
          ['Size', String(value.Size)],
        ]),
        '',
        columns([['Table', 'Records'], ...Object.entries(value.Records).sort(([a], [b]) => a.localeCompare(b)).map(([table, count]) => [table, String(count)])]),
      ].join('\n'),
    )
  },
}
