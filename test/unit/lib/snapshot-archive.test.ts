/**
 * The snapshot archive (lib/snapshot-archive.ts): what archiveFrames writes, readArchive reads back pair for pair with
 * its metadata and counts; and every way an archive can be wrong (not one, another format version, damaged data,
 * cut short, a frame beyond the bound, frames after the end) is an ArchiveError naming it.
 */
import { expect } from 'chai'
import { ARCHIVE_MAGIC, archiveFrames, ArchiveError, FRAME_BYTES_MAX, readArchive, type ArchiveMeta } from '../../../src/lib/snapshot-archive.js'

const META = { Index: 42, Term: 3, Datacenter: 'dc1', Node: 'n1', Time: '2026-11-26T00:00:00.000Z', Version: '0.1.0' }
const key = (...parts: string[]): string => parts.join('\u0000')

const CHUNKS: Array<Array<[string, Uint8Array]>> = [
  [
    [key('m', 'applied'), Buffer.from([42])],
    [key('r', 'policy', 'p1'), Buffer.from('one')],
  ],
  [
    [key('r', 'policy', 'p2'), Buffer.from('two')],
    [key('r', 'token', 't1'), Buffer.from('three')],
    [key('x', 'token', 'ns', 'default', 't1'), Buffer.alloc(0)],
  ],
]

async function* chunks(): AsyncGenerator<Array<[string, Uint8Array]>> {
  for (const chunk of CHUNKS) yield chunk
}

async function archive(): Promise<Buffer> {
  const parts: Buffer[] = []
  for await (const part of archiveFrames(META, chunks())) parts.push(part)
  return Buffer.concat(parts)
}

async function* pieces(bytes: Buffer, size = 7): AsyncGenerator<Buffer> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size)
}

async function read(bytes: Buffer): Promise<{ meta: ArchiveMeta; pairs: Array<[string, Buffer]>; records: Record<string, number> }> {
  const pairs: Array<[string, Buffer]> = []
  const { meta, end } = await readArchive(pieces(bytes), () => undefined, (chunk) => void pairs.push(...chunk))
  return { meta, pairs, records: end.Records }
}

async function refusal(bytes: Buffer): Promise<string> {
  try {
    await read(bytes)
  } catch (error) {
    expect(error).to.be.instanceOf(ArchiveError)
    return (error as Error).message
  }
  throw new Error('the archive was accepted')
}

/** Where each frame's payload starts, and its length, in order after the magic line. */
function frameOffsets(bytes: Buffer): Array<{ at: number; length: number }> {
  const frames: Array<{ at: number; length: number }> = []
  for (let at = ARCHIVE_MAGIC.length; at < bytes.length; ) {
    const length = bytes.readUInt32BE(at)
    frames.push({ at: at + 4, length })
    at += 4 + length
  }
  return frames
}

describe('snapshot archive', function () {
  it('reads back every pair in order, with the metadata, and counts the records of each table', async () => {
    const { meta, pairs, records } = await read(await archive())
    expect(meta).to.deep.equal({ Format: 1, ...META })
    expect(pairs.map(([name, value]) => [name, value.toString('utf8')])).to.deep.equal(CHUNKS.flat().map(([name, value]) => [name, Buffer.from(value).toString('utf8')]))
    expect(records).to.deep.equal({ policy: 2, token: 1 })
  })

  it('refuses what is not an archive, and one of another format version', async () => {
    expect(await refusal(Buffer.from('PK\u0003\u0004 a zip file, say'))).to.match(/not a warden snapshot/)
    expect(await refusal(Buffer.alloc(0))).to.match(/not a warden snapshot: it is empty/)
    const bytes = await archive()
    const [first] = frameOffsets(bytes)
    const { Packr } = await import('msgpackr')
    const packr = new Packr({ useRecords: false, mapsAsObjects: true, variableMapSize: true })
    const future = packr.pack({ Format: 2, ...META })
    const header = Buffer.alloc(4)
    header.writeUInt32BE(future.length)
    const rewritten = Buffer.concat([ARCHIVE_MAGIC, header, future, bytes.subarray(first!.at + first!.length)])
    expect(await refusal(rewritten)).to.equal('format version 2: this warden reads version 1 only')
  })

  it('refuses damaged data: the checksum no longer matches', async () => {
    const bytes = Buffer.from(await archive())
    // The last byte of the value "three" in the second data frame.
    const at = bytes.indexOf(Buffer.from('three')) + 4
    bytes[at] = 'X'.charCodeAt(0)
    expect(await refusal(bytes)).to.match(/SHA-256 of the data does not match/)
  })

  it('refuses an archive cut short anywhere, and one with a frame beyond the bound or after the end', async () => {
    const bytes = await archive()
    const frames = frameOffsets(bytes)
    const last = frames.at(-1)!
    // Cut inside a frame, and cut cleanly before the end record.
    expect(await refusal(bytes.subarray(0, last.at + 2))).to.equal('truncated: it ends inside a frame')
    expect(await refusal(bytes.subarray(0, last.at - 4))).to.equal('truncated: it ends before its end record')
    expect(await refusal(bytes.subarray(0, ARCHIVE_MAGIC.length))).to.equal('truncated: there is no metadata record')
    const huge = Buffer.alloc(4)
    huge.writeUInt32BE(FRAME_BYTES_MAX + 1)
    expect(await refusal(Buffer.concat([bytes.subarray(0, last.at - 4), huge]))).to.match(/larger than/)
    expect(await refusal(Buffer.concat([bytes, bytes.subarray(frames[1]!.at - 4, frames[1]!.at + frames[1]!.length)]))).to.match(/after the end record/)
  })
})
