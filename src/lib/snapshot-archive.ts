/**
 * The snapshot archive an operator saves and restores (issue 20; written by the agent, read by the CLI too): the whole state at one applied index, as a stream,
 * so that saving or reading 1,000,000 tokens holds one chunk in memory at a time.
 *
 * Layout, gzip-compressed: the magic line `WARDEN-SNAPSHOT\n`, then frames, each a 4-byte big-endian length and
 * that many bytes of msgpack:
 *   1. the metadata record: format version, index, term, datacenter, node, time, warden version;
 *   2. data frames, each `{ Pairs: [[key, value], ...] }`: the state database's keys and values in key order;
 *   3. the end record: the SHA-256 of every data frame's bytes in order, the number of pairs, and the number of
 *      records of each table.
 * A reader checks the magic, the format version, every frame's bound, the checksum and the counts; anything else is
 * an ArchiveError naming what is wrong (a truncated archive ends before its end record).
 */
import { createHash } from 'node:crypto'
import { Packr } from 'msgpackr'

/** The state's own encoding (state/codec.ts), so a record's bytes and an archive's frames read alike. */
const packr = new Packr({ useRecords: false, mapsAsObjects: true, variableMapSize: true })
const encode = (value: unknown): Buffer => packr.pack(value)
const decode = <T>(bytes: Uint8Array): T => packr.unpack(bytes) as T
/** The state's key separator (state/keys.ts): record keys are `r<SEP><table><SEP><key>`. */
const SEP = '\u0000'

export const ARCHIVE_MAGIC = Buffer.from('WARDEN-SNAPSHOT\n', 'utf8')
export const ARCHIVE_FORMAT = 1
/** A frame holds at most this: chunks are 512 KiB, and one pair (a 1 MiB config entry) may exceed that alone. */
export const FRAME_BYTES_MAX = 16 * 1024 * 1024
/** An archive uploaded to be restored, compressed, at most: a million tokens make about a twentieth of this. */
export const RESTORE_UPLOAD_BYTES_MAX = 4 * 1024 * 1024 * 1024

export interface ArchiveMeta {
  Format: number
  /** The applied index the state shows. */
  Index: number
  /** The term of the node that took it, when it took it. */
  Term: number
  Datacenter: string
  Node: string
  /** RFC 3339. */
  Time: string
  /** The warden version that wrote it. */
  Version: string
}

export interface ArchiveEnd {
  Sha256: string
  Pairs: number
  /** Records per table (keys `r<table>...`). */
  Records: Record<string, number>
}

export class ArchiveError extends Error {
  override readonly name = 'ArchiveError'
}

/** The table of a record key, or undefined for index and metadata keys. */
function recordTable(key: string): string | undefined {
  if (!key.startsWith(`r${SEP}`)) return undefined
  const end = key.indexOf(SEP, 2)
  return end < 0 ? undefined : key.slice(2, end)
}

function frame(payload: unknown): Buffer {
  const body = encode(payload)
  const header = Buffer.alloc(4)
  header.writeUInt32BE(body.length)
  return Buffer.concat([header, body])
}

/** The archive's bytes before compression, frame by frame, from the state's chunks. */
export async function* archiveFrames(meta: Omit<ArchiveMeta, 'Format'>, chunks: AsyncIterable<Array<[string, Uint8Array]>>): AsyncGenerator<Buffer> {
  yield ARCHIVE_MAGIC
  yield frame({ Format: ARCHIVE_FORMAT, ...meta } satisfies ArchiveMeta)
  const hash = createHash('sha256')
  const records: Record<string, number> = {}
  let pairs = 0
  for await (const chunk of chunks) {
    if (chunk.length === 0) continue
    const data = frame({ Pairs: chunk })
    hash.update(data.subarray(4))
    pairs += chunk.length
    for (const [key] of chunk) {
      const table = recordTable(key)
      if (table !== undefined) records[table] = (records[table] ?? 0) + 1
    }
    yield data
  }
  yield frame({ Sha256: hash.digest('hex'), Pairs: pairs, Records: records } satisfies ArchiveEnd)
}

/** Cuts a byte stream into frames of at most FRAME_BYTES_MAX, after checking the magic line. */
async function* frames(bytes: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  let buffered: Buffer = Buffer.alloc(0)
  let magicSeen = false
  for await (const piece of bytes) {
    buffered = buffered.length === 0 ? piece : Buffer.concat([buffered, piece])
    if (!magicSeen) {
      if (buffered.length < ARCHIVE_MAGIC.length) continue
      if (!buffered.subarray(0, ARCHIVE_MAGIC.length).equals(ARCHIVE_MAGIC)) throw new ArchiveError('not a warden snapshot: it does not start with the WARDEN-SNAPSHOT line')
      buffered = buffered.subarray(ARCHIVE_MAGIC.length)
      magicSeen = true
    }
    while (buffered.length >= 4) {
      const length = buffered.readUInt32BE(0)
      if (length > FRAME_BYTES_MAX) throw new ArchiveError(`a frame of ${length} bytes is larger than ${FRAME_BYTES_MAX}: the archive is damaged`)
      if (buffered.length < 4 + length) break
      yield buffered.subarray(4, 4 + length)
      buffered = buffered.subarray(4 + length)
    }
  }
  if (!magicSeen) throw new ArchiveError('not a warden snapshot: it is empty or shorter than its first line')
  if (buffered.length > 0) throw new ArchiveError('truncated: it ends inside a frame')
}

function decodeFrame<T>(bytes: Buffer, what: string): T {
  try {
    return decode<T>(bytes)
  } catch {
    throw new ArchiveError(`${what} does not decode: the archive is damaged`)
  }
}

/**
 * Reads an archive's uncompressed bytes: calls `onMeta` with the metadata first (which may throw to refuse it), then
 * `onPairs` with each data frame's pairs, and answers the end record once the checksum and counts are verified.
 * Throws ArchiveError for anything wrong; what `onPairs` received before must then be discarded by the caller.
 */
export async function readArchive(
  bytes: AsyncIterable<Buffer>,
  onMeta: (meta: ArchiveMeta) => void | Promise<void>,
  onPairs: (pairs: Array<[string, Buffer]>) => void | Promise<void>,
): Promise<{ meta: ArchiveMeta; end: ArchiveEnd }> {
  let meta: ArchiveMeta | undefined
  let end: ArchiveEnd | undefined
  const hash = createHash('sha256')
  const records: Record<string, number> = {}
  let pairs = 0
  for await (const bytesOfFrame of frames(bytes)) {
    if (end !== undefined) throw new ArchiveError('there are frames after the end record: the archive is damaged')
    if (meta === undefined) {
      const first = decodeFrame<Partial<ArchiveMeta>>(bytesOfFrame, 'the metadata record')
      if (typeof first !== 'object' || first === null || typeof first.Format !== 'number') throw new ArchiveError('the metadata record is missing: the archive is damaged')
      if (first.Format !== ARCHIVE_FORMAT) throw new ArchiveError(`format version ${first.Format}: this warden reads version ${ARCHIVE_FORMAT} only`)
      if (!Number.isSafeInteger(first.Index) || typeof first.Datacenter !== 'string' || typeof first.Time !== 'string') throw new ArchiveError('the metadata record lacks Index, Datacenter or Time')
      meta = first as ArchiveMeta
      await onMeta(meta)
      continue
    }
    const payload = decodeFrame<{ Pairs?: unknown; Sha256?: unknown }>(bytesOfFrame, 'a frame')
    if (typeof payload === 'object' && payload !== null && typeof payload.Sha256 === 'string') {
      end = payload as unknown as ArchiveEnd
      continue
    }
    const chunk = payload?.Pairs
    if (!Array.isArray(chunk)) throw new ArchiveError('a data frame holds no pairs: the archive is damaged')
    hash.update(bytesOfFrame)
    const checked: Array<[string, Buffer]> = []
    for (const pair of chunk as unknown[]) {
      if (!Array.isArray(pair) || typeof pair[0] !== 'string' || !(pair[1] instanceof Uint8Array)) throw new ArchiveError('a data frame holds something that is not a key and a value')
      const table = recordTable(pair[0])
      if (table !== undefined) records[table] = (records[table] ?? 0) + 1
      checked.push([pair[0], Buffer.from(pair[1])])
    }
    pairs += checked.length
    await onPairs(checked)
  }
  if (meta === undefined) throw new ArchiveError('truncated: there is no metadata record')
  if (end === undefined) throw new ArchiveError('truncated: it ends before its end record')
  if (hash.digest('hex') !== end.Sha256) throw new ArchiveError('the SHA-256 of the data does not match the one recorded: the archive is damaged')
  if (end.Pairs !== pairs) throw new ArchiveError(`the end record counts ${end.Pairs} pairs, the archive holds ${pairs}`)
  for (const table of new Set([...Object.keys(end.Records ?? {}), ...Object.keys(records)])) {
    const recorded = end.Records?.[table] ?? 0
    if (recorded !== (records[table] ?? 0)) throw new ArchiveError(`the end record counts ${recorded} records of ${table}, the archive holds ${records[table] ?? 0}`)
  }
  return { meta, end }
}
