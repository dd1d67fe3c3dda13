/**
 * msgpack encoding of records and commands. `useRecords: false` keeps the encoding a plain map, so every replica
 * encodes the same object to the same bytes and a later version can read what an earlier one wrote.
 */
import { Packr } from 'msgpackr'
import { encodeHot } from './shape-encoder.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true, variableMapSize: true })

/** The value's bytes: msgpackr's, written by the shape encoder where it can (shape-encoder.ts: the same bytes). */
export function encode(value: unknown): Buffer {
  return encodeHot(value) ?? packr.pack(value)
}

export function decode<T>(bytes: Uint8Array): T {
  return packr.unpack(bytes) as T
}

/**
 * The string field `name` of an encoded map, read without decoding the rest of it (a token record's SecretID, for the
 * secret index's fill at open: a full decode is most of that fill's time). Follows msgpack's grammar, skipping every
 * other value whole; undefined when the bytes are not a map with that field as a string, or end too soon.
 */
export function stringField(bytes: Uint8Array, name: string): string | undefined {
  const want = fieldName(name)
  const view = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let at = 0
  const header = mapHeader(view, at)
  if (header === undefined) return undefined
  at = header.at
  for (let entry = 0; entry < header.count; entry++) {
    const key = stringAt(view, at)
    if (key === undefined) return undefined
    at = key.end
    if (key.end - key.start === want.length && view.compare(want, 0, want.length, key.start, key.end) === 0) {
      const value = stringAt(view, at)
      return value === undefined ? undefined : view.toString('utf8', value.start, value.end)
    }
    const next = skipValues(view, at, 1)
    if (next === undefined) return undefined
    at = next
  }
  return undefined
}

const fieldNames = new Map<string, Buffer>()

/** `name` in UTF-8, made once for each of the few names asked for. */
function fieldName(name: string): Buffer {
  let bytes = fieldNames.get(name)
  if (bytes === undefined) fieldNames.set(name, (bytes = Buffer.from(name, 'utf8')))
  return bytes
}

function mapHeader(view: Buffer, at: number): { count: number; at: number } | undefined {
  if (at >= view.length) return undefined
  const type = view[at]!
  if (type >= 0x80 && type <= 0x8f) return { count: type & 0x0f, at: at + 1 }
  if (type === 0xde && at + 3 <= view.length) return { count: view.readUInt16BE(at + 1), at: at + 3 }
  if (type === 0xdf && at + 5 <= view.length) return { count: view.readUInt32BE(at + 1), at: at + 5 }
  return undefined
}

/** The bytes of the string at `at`, and where the next value starts. */
function stringAt(view: Buffer, at: number): { start: number; end: number } | undefined {
  if (at >= view.length) return undefined
  const type = view[at]!
  let start: number
  let length: number
  if (type >= 0xa0 && type <= 0xbf) [start, length] = [at + 1, type & 0x1f]
  else if (type === 0xd9 && at + 2 <= view.length) [start, length] = [at + 2, view[at + 1]!]
  else if (type === 0xda && at + 3 <= view.length) [start, length] = [at + 3, view.readUInt16BE(at + 1)]
  else if (type === 0xdb && at + 5 <= view.length) [start, length] = [at + 5, view.readUInt32BE(at + 1)]
  else return undefined
  return start + length <= view.length ? { start, end: start + length } : undefined
}

/** Where the `count` values from `at` end, undefined if the bytes end first or hold a type msgpack does not have. */
function skipValues(view: Buffer, at: number, count: number): number | undefined {
  let pending = count
  while (pending > 0) {
    if (at >= view.length) return undefined
    const type = view[at]!
    pending -= 1
    // [bytes of the header, bytes of the payload, values contained]
    let size: [number, number, number]
    if (type <= 0x7f || type >= 0xe0 || type === 0xc0 || type === 0xc2 || type === 0xc3) size = [1, 0, 0]
    else if (type <= 0x8f) size = [1, 0, 2 * (type & 0x0f)]
    else if (type <= 0x9f) size = [1, 0, type & 0x0f]
    else if (type <= 0xbf) size = [1, type & 0x1f, 0]
    else if (type === 0xc4 || type === 0xd9) size = [2, view[at + 1] ?? Infinity, 0]
    else if (type === 0xc5 || type === 0xda) size = [3, at + 3 <= view.length ? view.readUInt16BE(at + 1) : Infinity, 0]
    else if (type === 0xc6 || type === 0xdb) size = [5, at + 5 <= view.length ? view.readUInt32BE(at + 1) : Infinity, 0]
    else if (type === 0xc7) size = [3, view[at + 1] ?? Infinity, 0]
    else if (type === 0xc8) size = [4, at + 3 <= view.length ? view.readUInt16BE(at + 1) : Infinity, 0]
    else if (type === 0xc9) size = [6, at + 5 <= view.length ? view.readUInt32BE(at + 1) : Infinity, 0]
    else if (type === 0xca) size = [5, 0, 0]
    else if (type === 0xcb) size = [9, 0, 0]
    else if (type === 0xcc || type === 0xd0) size = [2, 0, 0]
    else if (type === 0xcd || type === 0xd1) size = [3, 0, 0]
    else if (type === 0xce || type === 0xd2) size = [5, 0, 0]
    else if (type === 0xcf || type === 0xd3) size = [9, 0, 0]
    else if (type >= 0xd4 && type <= 0xd8) size = [2, 1 << (type - 0xd4), 0]
    else if (type === 0xdc) size = [3, 0, at + 3 <= view.length ? view.readUInt16BE(at + 1) : Infinity]
    else if (type === 0xdd) size = [5, 0, at + 5 <= view.length ? view.readUInt32BE(at + 1) : Infinity]
    else if (type === 0xde) size = [3, 0, at + 3 <= view.length ? 2 * view.readUInt16BE(at + 1) : Infinity]
    else if (type === 0xdf) size = [5, 0, at + 5 <= view.length ? 2 * view.readUInt32BE(at + 1) : Infinity]
    else return undefined // 0xc1, never used
    at += size[0] + size[1]
    pending += size[2]
    if (!(at <= view.length) || !Number.isFinite(pending)) return undefined
  }
  return at
}
