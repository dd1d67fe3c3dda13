/**
 * The shape encoder (src/state/shape-encoder.ts) writes the bytes msgpackr writes with the state codec's options, for
 * every value it accepts, before and after a shape gets a writer of its own; it declines (undefined) every value it
 * does not write, and the codec then encodes it with msgpackr.
 *
 * Method: seeded random values over the types and the length boundaries of msgpack's headers, each compared byte for
 * byte with msgpackr's encoding, many times over so that the repeated shapes get writers.
 */
import { expect } from 'chai'
import { Packr } from 'msgpackr'
import { decode, encode } from '../../../src/state/codec.js'
import { encodeHot } from '../../../src/state/shape-encoder.js'
import { SeededRng } from '../../../src/lib/rng.js'

const msgpackr = new Packr({ useRecords: false, mapsAsObjects: true, variableMapSize: true })

function expectSameBytes(value: unknown): void {
  const ours = encodeHot(value)
  expect(ours, 'accepted').to.not.equal(undefined)
  const theirs = msgpackr.pack(value)
  if (!ours!.equals(theirs)) expect(ours!.toString('hex')).to.equal(theirs.toString('hex'))
}

const STRINGS = [
  '',
  'a',
  'x'.repeat(31),
  'x'.repeat(32),
  'x'.repeat(63),
  'x'.repeat(64),
  'x'.repeat(255),
  'x'.repeat(256),
  'é'.repeat(20),
  'é'.repeat(40),
  '€'.repeat(30),
  '€'.repeat(100),
  '😀'.repeat(9),
  '😀'.repeat(40),
  'lone \ud800 high',
  'lone \udc00 low',
  'end \ud800',
  '\ud800'.repeat(70),
  'y'.repeat(70_000),
  '€'.repeat(30_000),
]
const NUMBERS = [0, 1, 0x1f, 0x20, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0xffff_ffff]
const KEYS = ['AccessorID', 'SecretID', 'Description', 'Policies', 'ID', 'Name', 'Local', 'CreateIndex', 'k"q', 'back\\slash', 'line\u2028sep', '${x}', '']

function randomValue(rng: SeededRng, depth: number): unknown {
  const kind = rng.nextInt(depth > 2 ? 6 : 9)
  switch (kind) {
    case 0:
      return STRINGS[rng.nextInt(STRINGS.length)]
    case 1:
      return NUMBERS[rng.nextInt(NUMBERS.length)]
    case 2:
      return rng.nextInt(2) === 0
    case 3:
      return rng.nextInt(2) === 0 ? null : undefined
    case 4:
      return Buffer.alloc([0, 1, 255, 256, 70_000][rng.nextInt(5)]!, rng.nextInt(256))
    case 5:
      return new Uint8Array([1, 2, 3])
    case 6:
    case 7: {
      // Shapes repeat: keys from a short list, in one of a few orders.
      const count = [0, 1, 3, 15, 16][rng.nextInt(5)]!
      const object: Record<string, unknown> = {}
      for (let n = 0; n < count; n++) object[count > 8 ? `key${n}` : KEYS[(n * 3 + rng.nextInt(2)) % KEYS.length]!] = randomValue(rng, depth + 1)
      return object
    }
    default:
      return Array.from({ length: [0, 1, 15, 16][rng.nextInt(4)]! }, () => randomValue(rng, depth + 1))
  }
}

describe('state: the shape encoder writes what msgpackr writes', function () {
  it('for random values over every type and header boundary it accepts, before and after shapes get writers', () => {
    const rng = new SeededRng(22)
    for (let n = 0; n < 3000; n++) expectSameBytes(randomValue(rng, 0))
  })

  it('for token records and token create commands, many times over', () => {
    for (let n = 0; n < 200; n++) {
      const policies = [{ ID: `00000000-0000-0000-0000-${String(n).padStart(12, '0')}`, Name: `policy-${n}` }]
      const token = {
        AccessorID: '6a1253d2-1785-24fd-91c2-f8e78c745511',
        SecretID: '45a3bd52-07c7-47a4-52fd-0745e0cfe967',
        Description: n % 3 === 0 ? 'ünïcödé description €' : 'bench token',
        Policies: policies,
        Roles: [],
        ServiceIdentities: [],
        NodeIdentities: [],
        TemplatedPolicies: [],
        Local: n % 2 === 0,
        AuthMethod: undefined,
        CreateTime: '2026-11-27T12:00:00.123456789Z',
        Hash: 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG=',
        CreateIndex: 1000 + n * 997,
        ModifyIndex: 1000 + n * 997,
        Namespace: 'default',
      }
      expectSameBytes(token)
      expectSameBytes({ v: 1, type: 'token.create', token: { ...token, Policies: [{ Name: 'bench' }] } })
      expect(decode(encode(token))).to.deep.equal(token)
    }
  })

  it('when a shape gets its writer in the middle of encoding an object that holds it', () => {
    // Fresh keys, so that this shape's writer is made during this test, inside the outer array's encoding.
    const inner = (n: number): Record<string, unknown> => ({ midEncodeA: n, midEncodeB: `value ${n}`, midEncodeC: [n, { midEncodeA: n, midEncodeB: '', midEncodeC: null }] })
    expectSameBytes(Array.from({ length: 40 }, (_, n) => inner(n)))
    expectSameBytes({ before: 'x'.repeat(300), items: Array.from({ length: 40 }, (_, n) => inner(n)), after: 7 })
  })

  it('keeps apart key lists that join alike (a review\'s finding: keys may be empty or hold NUL)', () => {
    const pairs: Array<[Record<string, unknown>, Record<string, unknown>]> = [
      [{}, { '': 'x' }],
      [{ '': 1 }, {}],
      [{ joinA: 1, joinB: 2 }, { 'joinA\u0000joinB': 3 }],
      [{ 'nulA\u0000': 1, nulB: 2 }, { nulA: 1, '\u0000nulB': 2 }],
    ]
    for (const [often, then] of pairs) {
      for (let n = 0; n < 20; n++) expectSameBytes(often)
      expectSameBytes(then)
      for (let n = 0; n < 20; n++) expectSameBytes(then)
      expectSameBytes(often)
    }
  })

  it('leaves objects of many keys, or long key lists, on the generic path, with the same bytes', () => {
    const wide = Object.fromEntries(Array.from({ length: 65 }, (_, n) => [`wide${n}`, n]))
    const long = { ['k'.repeat(3000)]: 1 }
    for (let n = 0; n < 20; n++) {
      expectSameBytes(wide)
      expectSameBytes(long)
    }
  })

  it('keeps shapes of one first key apart, past the number it keeps writers for', () => {
    // 24 key lists that share their first key and their length: the encoder keeps 16 of them as shapes.
    const objects = Array.from({ length: 24 }, (_, n) => ({ sharedFirst: n, [`second${n}`]: `value ${n}`, third: [n] }))
    for (let round = 0; round < 20; round++) for (const object of objects) expectSameBytes(object)
    // And a longer list that starts like a kept one.
    for (let n = 0; n < 20; n++) expectSameBytes({ sharedFirst: 1, second1: 'x', third: [], fourth: null })
  })

  it('agrees with msgpackr on values whose own properties change how msgpackr reads them (a review\'s findings)', () => {
    const hiddenConstructor = (value: object, constructor: unknown): object => Object.defineProperty(value, 'constructor', { value: constructor, enumerable: false })
    const cases: Array<() => unknown> = [
      () => hiddenConstructor({ a: 1 }, Array),
      () => hiddenConstructor({ a: 1 }, undefined),
      () => Object.assign([1, 2], { constructor: Object }),
      () => Object.assign(Buffer.from([1, 2]), { constructor: Object }),
      () => Object.assign(new Uint8Array([1, 2]), { toJSON: () => 'j' }),
      () => Object.assign(Buffer.from([1, 2]), { toJSON: () => 'j' }),
      () => Object.defineProperty(new Uint8Array([1, 2, 3]), 'length', { value: 1 }),
      // A getter that grows the array while it is written: the header says the length it had when read.
      () => {
        const array: unknown[] = [1, 2]
        Object.defineProperty(array, 0, { get: () => (array.push(9), 1), enumerable: true })
        return array
      },
    ]
    for (let n = 0; n < 20; n++) {
      for (const [index, make] of cases.entries()) {
        const ours = encodeHot(make())
        if (ours !== undefined) expect(ours.toString('hex'), `case ${index}`).to.equal(msgpackr.pack(make()).toString('hex'))
        expect(encode(make()).toString('hex'), `case ${index}`).to.equal(msgpackr.pack(make()).toString('hex'))
      }
    }
  })

  it('leaves to msgpackr a value encoded by a getter of the value being encoded', () => {
    const outer = () => ({ a: 'before', get b() { return encode({ inner: 'z'.repeat(10) }).toString('hex') }, c: 'after' })
    for (let n = 0; n < 20; n++) expect(encode(outer()).toString('hex')).to.equal(msgpackr.pack(outer()).toString('hex'))
  })

  it('declines an object with its own `constructor` key, which msgpackr reads as its class, however often it comes', () => {
    const owned = [{ constructor: 'x', b: 1 }, { a: 1, constructor: 2 }, Object.fromEntries([...Array.from({ length: 70 }, (_, n) => [`many${n}`, n]), ['constructor', 'x']])]
    for (let n = 0; n < 20; n++) {
      for (const value of owned) {
        expect(encodeHot(value)).to.equal(undefined)
        expect(encodeHot({ holder: [value] })).to.equal(undefined)
        expect(encode(value).equals(msgpackr.pack(value))).to.equal(true)
      }
    }
  })

  it('declines what it does not write, and the codec writes it with msgpackr', () => {
    const declined: unknown[] = [-1, 1.5, 2 ** 32, Number.NaN, 10n, new Date(0), new Map([['a', 1]]), new Set([1]), { nested: [{ deep: -5 }] }, Object.create(null)]
    for (const [n, value] of declined.entries()) {
      expect(encodeHot(value), `value ${n}`).to.equal(undefined)
      expect(encode(value).equals(msgpackr.pack(value)), `value ${n}`).to.equal(true)
    }
    // msgpackr writes a wider typed array's bytes wrongly (not the same twice): declined, so the codec is no worse.
    expect(encodeHot(new Uint16Array([1]))).to.equal(undefined)
    // And it stays right after declining mid-object.
    expectSameBytes({ a: 'after a declined value', b: [1, 2, 3] })
  })
})
