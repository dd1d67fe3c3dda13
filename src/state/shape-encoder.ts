/**
 * msgpack encoding of the state's hot shapes (a token record, a token create command), byte for byte what msgpackr
 * writes for them with the state codec's options (`useRecords: false`, `variableMapSize: true`), but faster inside the
 * server. msgpackr's single `pack` walks every shape of object the server encodes (commands, records, Raft messages,
 * frames), so its property reads go through V8's megamorphic stub cache, which the rest of the server fills too: in
 * the server one token record took about 6 µs to encode, against 1.5 µs in a small script (docs/benchmarks.md, issue
 * 22, twelfth session). Here an object shape seen often (the same keys in the same order) gets a writer of its own,
 * generated once, whose property reads each see the objects of one key list only. A value's kind comes from `typeof`
 * and its prototype rather than from reading its `constructor`, and a shape is found by comparing its keys one by
 * one rather than by building and hashing a string of them (docs/benchmarks.md, issue 22, thirteenth session).
 *
 * Only what is common in records, commands and shipped writes is written here: strings, integers from 0 to 2^32 - 1,
 * booleans, null, undefined, bytes (a Buffer or a Uint8Array), arrays, and plain objects of those. Anything else (a
 * negative or fractional number, a Map, a Date, another typed array, a class instance, a value that holds its own
 * `constructor`, which msgpackr reads as its class, bytes that hold their own `toJSON`, which msgpackr writes instead)
 * makes `encodeHot` return undefined, and the caller encodes the value with msgpackr.
 */

/** Objects of one key list are encoded this many times by the generic walk before their shape gets a writer. */
const SHAPE_WARM_UP = 16
/** Shapes with a writer (or counted on the way to one), at most: past it, new shapes stay generic. */
const SHAPES_MAX = 512
/** msgpackr's own threshold: strings of fewer UTF-16 units are encoded by a JavaScript loop, longer ones natively. */
const SHORT_STRING = 0x40

/** Objects with more keys, or longer key lists, than this stay on the generic path: what a shape holds is bounded. */
const SHAPE_KEYS_MAX = 64
const SHAPE_KEY_CHARS_MAX = 2048
/** Shapes kept under one first key, at most: a lookup compares the key lists of those, one by one. */
const SHAPES_PER_FIRST_KEY_MAX = 16

type Writer = (object: Record<string, unknown>) => void

interface Shape {
  /** The keys, in order. */
  keys: readonly string[]
  seen: number
  writer: Writer | undefined
}

/** Thrown (and caught in encodeHot) on a value this encoder does not write. */
const UNSUPPORTED = Symbol('unsupported')

let target = Buffer.allocUnsafe(64 * 1024)
let position = 0
let busy = false
/** Shapes by their first key; the shape of no keys apart. */
const shapesByFirstKey = new Map<string, Shape[]>()
let emptyShape: Shape | undefined
let shapeCount = 0

/** The value's msgpack bytes, as msgpackr would write them, or undefined when it holds a type not written here. */
export function encodeHot(value: unknown): Buffer | undefined {
  // A getter of the value being written that encodes something itself would write over the scratch buffer: that
  // inner value goes to msgpackr.
  if (busy) return undefined
  busy = true
  position = 0
  try {
    writeValue(value)
  } catch (error) {
    if (error === UNSUPPORTED) return undefined
    throw error
  } finally {
    busy = false
  }
  // Bytes of their own: the scratch buffer is written again by the next call (small ones come from node's pool).
  const bytes = Buffer.allocUnsafe(position)
  target.copy(bytes, 0, 0, position)
  return bytes
}

function room(bytes: number): void {
  if (position + bytes <= target.length) return
  const grown = Buffer.allocUnsafe(Math.max(target.length * 2, position + bytes))
  target.copy(grown, 0, 0, position)
  target = grown
}

function writeValue(value: unknown): void {
  switch (typeof value) {
    case 'string':
      return writeString(value)
    case 'number':
      return writeNumber(value)
    case 'boolean':
      room(1)
      target[position++] = value ? 0xc3 : 0xc2
      return
    case 'undefined':
      // msgpackr's undefined: fixext 1, type 0, data 0.
      room(3)
      target[position++] = 0xd4
      target[position++] = 0
      target[position++] = 0
      return
    case 'object':
      if (value === null) {
        room(1)
        target[position++] = 0xc0
        return
      }
      return writeObjectValue(value)
    default:
      throw UNSUPPORTED
  }
}

/**
 * An object, array or bytes, told apart as msgpackr does (by `constructor`) but from the prototype: reading
 * `constructor` from every kind of object the server encodes is a megamorphic load, and was the encoder's largest
 * cost in the server. The two agree unless the value holds `constructor` itself (enumerable or not), which overrides
 * its prototype's for msgpackr: such a value is declined, as are bytes that hold a `toJSON` of their own, which
 * msgpackr writes instead of them (a review's findings).
 */
function writeObjectValue(value: object): void {
  if (Object.hasOwn(value, 'constructor')) throw UNSUPPORTED
  const prototype: unknown = Object.getPrototypeOf(value)
  if (prototype === Object.prototype) return writeObject(value as Record<string, unknown>)
  if (prototype === Array.prototype) return writeArray(value as unknown[])
  if ((prototype === Buffer.prototype || prototype === Uint8Array.prototype) && !Object.hasOwn(value, 'toJSON')) return writeBytes(value as Uint8Array)
  throw UNSUPPORTED
}

function writeNumber(value: number): void {
  // Only what msgpackr writes as an unsigned integer; every other number goes to msgpackr.
  if (value >>> 0 !== value) throw UNSUPPORTED
  room(5)
  if (value < 0x80) target[position++] = value
  else writeSized(value, 0xcc, 0xcd, 0xce)
}

/** Bytes of a string's header (fixstr, str 8, str 16, str 32) for a length of `n`. */
function stringHeaderBytes(n: number): number {
  return n < 0x20 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 5
}

/**
 * Called, not looked up on each string: strings come in several hidden classes (flat, cons, sliced, thin), and
 * `value.charCodeAt` was a megamorphic load for every character. With the function known, V8 inlines it.
 */
const charCodeAt = String.prototype.charCodeAt

function writeString(value: string): void {
  const units = value.length
  room(units * 3 + 5)
  // As msgpackr: the header's size is guessed from the UTF-16 length, the bytes written after it, and the bytes moved
  // when the real length needs a larger header (UTF-8 is never shorter than UTF-16 in units, so never a smaller one).
  const guessed = stringHeaderBytes(units)
  let length: number
  if (units < SHORT_STRING) {
    let at = position + guessed
    for (let i = 0; i < units; i++) {
      let c1 = charCodeAt.call(value, i)
      let c2: number
      if (c1 < 0x80) {
        target[at++] = c1
      } else if (c1 < 0x800) {
        target[at++] = (c1 >> 6) | 0xc0
        target[at++] = (c1 & 0x3f) | 0x80
      } else if ((c1 & 0xfc00) === 0xd800 && ((c2 = charCodeAt.call(value, i + 1)) & 0xfc00) === 0xdc00) {
        c1 = 0x10000 + ((c1 & 0x03ff) << 10) + (c2 & 0x03ff)
        i++
        target[at++] = (c1 >> 18) | 0xf0
        target[at++] = ((c1 >> 12) & 0x3f) | 0x80
        target[at++] = ((c1 >> 6) & 0x3f) | 0x80
        target[at++] = (c1 & 0x3f) | 0x80
      } else {
        target[at++] = (c1 >> 12) | 0xe0
        target[at++] = ((c1 >> 6) & 0x3f) | 0x80
        target[at++] = (c1 & 0x3f) | 0x80
      }
    }
    length = at - position - guessed
  } else {
    length = target.write(value, position + guessed, 'utf8')
  }
  const needed = stringHeaderBytes(length)
  if (needed > guessed) target.copyWithin(position + needed, position + guessed, position + guessed + length)
  if (length < 0x20) target[position++] = 0xa0 | length
  else writeSized(length, 0xd9, 0xda, 0xdb)
  position += length
}

/** msgpack's bin, as msgpackr writes a Buffer or a Uint8Array: by its byteLength (a `length` could be its own). */
function writeBytes(bytes: Uint8Array): void {
  const length = bytes.byteLength
  room(length + 5)
  writeSized(length, 0xc4, 0xc5, 0xc6)
  target.set(bytes, position)
  position += length
}

/** `n` after its tag, in one, two or four bytes: msgpack's 8-, 16- and 32-bit forms of an integer, a string or bin. */
function writeSized(n: number, tag8: number, tag16: number, tag32: number): void {
  if (n < 0x100) {
    target[position++] = tag8
    target[position++] = n
  } else {
    writeWide(n, tag16, tag32)
  }
}

/** `n` after its tag, in two or four bytes: the 16- and 32-bit forms every sized header of msgpack shares. */
function writeWide(n: number, tag16: number, tag32: number): void {
  if (n < 0x10000) {
    target[position++] = tag16
    target[position++] = n >> 8
    target[position++] = n & 0xff
  } else {
    target[position++] = tag32
    target.writeUInt32BE(n, position)
    position += 4
  }
}

function writeArray(array: unknown[]): void {
  // The length read once, as msgpackr does: the header and the elements written agree whatever a getter does.
  const length = array.length
  writeLengthHeader(length, 0x90, 0xdc, 0xdd)
  for (let i = 0; i < length; i++) writeValue(array[i])
}

/** An array's or a map's header: its length in the fix form's low bits, else in 16 or 32 bits (no 8-bit form). */
function writeLengthHeader(length: number, fix: number, sixteen: number, thirtyTwo: number): void {
  room(5)
  if (length < 0x10) target[position++] = fix | length
  else writeWide(length, sixteen, thirtyTwo)
}

function writeObject(object: Record<string, unknown>): void {
  const keys = Object.keys(object)
  const shape = shapeOf(keys)
  if (shape !== undefined) {
    if (shape.writer !== undefined) return shape.writer(object)
    if (++shape.seen >= SHAPE_WARM_UP) {
      shape.writer = compileWriter(keys)
      return shape.writer(object)
    }
  }
  writeLengthHeader(keys.length, 0x80, 0xde, 0xdf)
  for (const key of keys) {
    writeString(key)
    writeValue(object[key])
  }
}

/**
 * The shape of exactly these keys, in this order: found among those of the same first key by comparing the keys
 * (property names are internalized strings, so most comparisons are of two pointers), or created and counted from now
 * on if there is room. Undefined for a key list kept on the generic path.
 */
function shapeOf(keys: readonly string[]): Shape | undefined {
  const count = keys.length
  if (count === 0) return (emptyShape ??= newShape(keys))
  const first = keys[0] as string
  let candidates = shapesByFirstKey.get(first)
  if (candidates !== undefined) {
    for (const shape of candidates) {
      const known = shape.keys
      if (known.length !== count) continue
      let n = 1
      while (n < count && known[n] === keys[n]) n++
      if (n === count) return shape
    }
  }
  if (count > SHAPE_KEYS_MAX || shapeCount >= SHAPES_MAX || (candidates !== undefined && candidates.length >= SHAPES_PER_FIRST_KEY_MAX)) return undefined
  let chars = 0
  for (const key of keys) chars += key.length
  if (chars > SHAPE_KEY_CHARS_MAX) return undefined
  if (candidates === undefined) shapesByFirstKey.set(first, (candidates = []))
  const shape = newShape(keys)
  candidates.push(shape)
  return shape
}

function newShape(keys: readonly string[]): Shape {
  shapeCount++
  return { keys: [...keys], seen: 0, writer: undefined }
}

/**
 * A writer for objects with exactly these keys in this order: the map header and each key's bytes are constants, and
 * each value is read by a property access of its own (so each read site sees one shape). Keys enter the generated
 * code only as JSON string literals.
 */
function compileWriter(keys: readonly string[]): Writer {
  // The constant bytes, written past what the object being encoded has written so far, then taken back: the map
  // header with the first key, then each other key.
  const saved = position
  const pieces: Buffer[] = []
  let start = position
  writeLengthHeader(keys.length, 0x80, 0xde, 0xdf)
  for (const key of keys) {
    writeString(key)
    pieces.push(Buffer.from(target.subarray(start, position)))
    start = position
  }
  if (keys.length === 0) pieces.push(Buffer.from(target.subarray(start, position)))
  position = saved
  // Most values are strings: the writer tests for one inline and skips writeValue's dispatch for it.
  const body =
    keys.length === 0
      ? 'copy(pieces[0]);'
      : keys.map((key, n) => `copy(pieces[${n}]); v = object[${JSON.stringify(key)}]; if (typeof v === 'string') string(v); else value(v);`).join('\n')
  const make = new Function('pieces', 'copy', 'string', 'value', `return function (object) {\nlet v;\n${body}\n}`) as (
    pieces: Buffer[],
    copy: (bytes: Buffer) => void,
    string: (value: string) => void,
    value: (value: unknown) => void,
  ) => Writer
  return make(pieces, copyBytes, writeString, writeValue)
}

function copyBytes(bytes: Buffer): void {
  const length = bytes.length
  room(length)
  // A key's few bytes by a loop: Buffer's copy costs more in its checks and native call than this does in all.
  if (length < 64) for (let n = 0; n < length; n++) target[position++] = bytes[n] as number
  else {
    bytes.copy(target, position)
    position += length
  }
}
