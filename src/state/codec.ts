/**
 * msgpack encoding of records and commands. `useRecords: false` keeps the encoding a plain map, so every replica
 * encodes the same object to the same bytes and a later version can read what an earlier one wrote.
 */
import { Packr } from 'msgpackr'

const packr = new Packr({ useRecords: false, mapsAsObjects: true, variableMapSize: true })

export function encode(value: unknown): Buffer {
  return packr.pack(value)
}

export function decode<T>(bytes: Uint8Array): T {
  return packr.unpack(bytes) as T
}
