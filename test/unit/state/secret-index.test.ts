/**
 * The in-memory token secret index (src/state/secret-index.ts): its table keeps every entry through growth and
 * removals, lists every entry that shares a fingerprint, drops only entries whose token no longer holds a secret of
 * theirs, and resolve checks each candidate against its token and names the same one on every node.
 */
import { expect } from 'chai'
import { createHash, randomUUID } from 'node:crypto'
import { Packr } from 'msgpackr'
import { decode, encode, stringField } from '../../../src/state/codec.js'
import { SECRET_INDEX_PREFIX, recordKey, uniqueTarget, uniqueValue } from '../../../src/state/keys.js'
import { heldDigests, SecretIndex } from '../../../src/state/secret-index.js'
import { secretDigest } from '../../../src/state/tables.js'

const valueOf = (accessor: string): Buffer => uniqueValue('token', 'secret', accessor)
const accessorsOf = (values: Buffer[]): string[] => values.map((value) => uniqueTarget('token', 'secret', value)).sort()

/** A digest in the index's form that shares exactly its first `shared` characters (6 bits each) with `digest`. */
function sharing(digest: string, shared: number, n: number): string {
  const tail = createHash('sha256').update(`${digest} ${n}`).digest().toString('base64url')
  const differing = digest[shared] === 'A' ? 'B' : 'A'
  return (digest.slice(0, shared) + differing + tail).slice(0, 22)
}

describe('SecretIndex (the token secret index in memory)', function () {
  /** The tokens an index is checked against: each AccessorID's secret's digest. */
  function tokens(): { held: Map<string, string>; digestOf: (accessor: string) => string | undefined } {
    const held = new Map<string, string>()
    return { held, digestOf: (accessor) => held.get(accessor) }
  }

  it('keeps every entry through growth and removals, and finds nothing it does not hold', function () {
    const index = new SecretIndex()
    const { held, digestOf } = tokens()
    const entries = Array.from({ length: 20_000 }, () => [secretDigest(randomUUID()), randomUUID()] as const)
    for (const [digest, accessor] of entries) {
      held.set(accessor, digest)
      index.put(digest, valueOf(accessor))
    }
    expect(index.size).to.equal(entries.length)
    // Every other token goes: linear probing's removal moves the entries after it back, and none may be lost.
    for (const [n, [digest, accessor]] of entries.entries()) {
      if (n % 2 !== 0) continue
      held.delete(accessor)
      index.written([{ type: 'del', key: SECRET_INDEX_PREFIX + digest }], digestOf)
    }
    expect(index.size).to.equal(entries.length / 2)
    for (const [n, [digest, accessor]] of entries.entries()) {
      expect(accessorsOf(index.candidates(digest)), `entry ${n}`).to.deep.equal(n % 2 === 0 ? [] : [accessor])
    }
    for (let n = 0; n < 1000; n++) expect(index.candidates(secretDigest(randomUUID()))).to.deep.equal([])
  })

  it('holds an entry written again once, and an AccessorID that is not a UUID, or a key that is not a digest, by the whole key', function () {
    const index = new SecretIndex()
    const { held, digestOf } = tokens()
    const digest = secretDigest(randomUUID())
    const accessor = randomUUID()
    held.set(accessor, digest)
    index.put(digest, valueOf(accessor))
    index.written([{ type: 'put', key: SECRET_INDEX_PREFIX + digest, value: valueOf(accessor) }], digestOf)
    expect(index.size).to.equal(1)
    const named = secretDigest('an operator-chosen secret')
    index.put(named, valueOf('not-a-uuid'))
    index.put('short', valueOf(randomUUID()))
    expect(accessorsOf(index.candidates(named))).to.deep.equal(['not-a-uuid'])
    expect(index.candidates(sharing(named, 21, 1))).to.deep.equal([])
    expect(index.candidates('short')).to.have.length(1)
    index.written([{ type: 'del', key: SECRET_INDEX_PREFIX + named }, { type: 'del', key: SECRET_INDEX_PREFIX + 'short' }], digestOf)
    expect(index.size).to.equal(1)
  })

  it('lists every entry that shares a fingerprint, and a removal drops only the entries whose token no longer holds one', function () {
    const index = new SecretIndex()
    const { held, digestOf } = tokens()
    const first = secretDigest(randomUUID())
    // The fingerprint is the first 10 characters (60 bits): these two differ after it.
    const second = sharing(first, 10, 1)
    const third = sharing(first, 9, 2)
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()]
    for (const [digest, accessor] of [[first, a], [second, b], [third, c]] as const) {
      held.set(accessor, digest)
      index.written([{ type: 'put', key: SECRET_INDEX_PREFIX + digest, value: valueOf(accessor) }], digestOf)
    }
    expect(accessorsOf(index.candidates(first))).to.deep.equal([a, b].sort())
    expect(accessorsOf(index.candidates(third))).to.deep.equal([c])
    expect(uniqueTarget('token', 'secret', index.resolve(second, digestOf)!)).to.equal(b)
    held.delete(a)
    index.written([{ type: 'del', key: SECRET_INDEX_PREFIX + first }], digestOf)
    expect(accessorsOf(index.candidates(second))).to.deep.equal([b])
    expect(uniqueTarget('token', 'secret', index.resolve(second, digestOf)!)).to.equal(b)
    held.delete(c)
    index.written([{ type: 'del', key: SECRET_INDEX_PREFIX + third }], digestOf)
    expect(index.candidates(third)).to.deep.equal([])
    expect(index.size).to.equal(1)
  })

  it('names, of two tokens that hold one secret, the one with the smallest AccessorID, whatever the order they came in', function () {
    const digest = secretDigest(randomUUID())
    const [small, large, odd] = ['00000000-0000-4000-8000-000000000001', 'ffffffff-0000-4000-8000-000000000001', 'legacy-token']
    for (const order of [[small, large, odd], [odd, large, small], [large, odd, small]]) {
      const index = new SecretIndex()
      const { held, digestOf } = tokens()
      for (const accessor of order) {
        held.set(accessor, digest)
        index.written([{ type: 'put', key: SECRET_INDEX_PREFIX + digest, value: valueOf(accessor) }], digestOf)
      }
      expect(uniqueTarget('token', 'secret', index.resolve(digest, digestOf)!), order.join()).to.equal(small)
      // The smallest goes (its token was deleted): the next one, on a node that built its index batch by batch as on one
      // that filled it from the tokens left.
      held.delete(small)
      index.written([{ type: 'del', key: SECRET_INDEX_PREFIX + digest }], digestOf)
      expect(uniqueTarget('token', 'secret', index.resolve(digest, digestOf)!), order.join()).to.equal(large)
      expect(index.size).to.equal(2)
    }
  })

  it('resolves a digest only to a token that holds a secret of that digest', function () {
    const index = new SecretIndex()
    const secret = randomUUID()
    const digest = secretDigest(secret)
    const [holder, other] = [randomUUID(), randomUUID()]
    const records = new Map<string, Buffer>([
      [recordKey('token', holder), encode({ AccessorID: holder, SecretID: secret.toUpperCase() })],
      [recordKey('token', other), encode({ AccessorID: other, SecretID: randomUUID() })],
    ])
    const digestOf = heldDigests((key) => records.get(key))
    // A candidate of a token that holds another secret (a shared fingerprint), and one of a token that is gone.
    index.put(sharing(digest, 10, 1), valueOf(other))
    index.put(sharing(digest, 10, 2), valueOf(randomUUID()))
    expect(index.resolve(digest, digestOf)).to.equal(undefined)
    index.put(digest, valueOf(holder))
    expect(uniqueTarget('token', 'secret', index.resolve(digest, digestOf)!)).to.equal(holder)
  })

  it('takes its entries out of a batch for LevelDB, and in from it once written', function () {
    const index = new SecretIndex()
    const { held, digestOf } = tokens()
    const digest = secretDigest(randomUUID())
    const accessor = randomUUID()
    const ops = [
      { type: 'put' as const, key: SECRET_INDEX_PREFIX + digest, value: valueOf(accessor) },
      { type: 'put' as const, key: recordKey('token', accessor), value: Buffer.from('record') },
    ]
    expect(SecretIndex.stored(ops).map((op) => op.key)).to.deep.equal([recordKey('token', accessor)])
    held.set(accessor, digest)
    index.written(ops, digestOf)
    expect(accessorsOf(index.candidates(digest))).to.deep.equal([accessor])
    held.delete(accessor)
    index.written([{ type: 'del', key: SECRET_INDEX_PREFIX + digest }], digestOf)
    expect(index.candidates(digest)).to.deep.equal([])
  })

  describe('its fill reads a record\'s SecretID without decoding the rest (stringField)', function () {
    it('finds a top-level string field past values of every msgpack type, as decode does', function () {
      const record = {
        AccessorID: randomUUID(),
        Policies: [{ ID: randomUUID(), Name: 'p' }, { ID: randomUUID(), Name: 'q'.repeat(300) }],
        Numbers: [0, 1, -1, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32, -(2 ** 40), 1.5, -33],
        Flags: [true, false, null],
        Bytes: Buffer.alloc(70_000, 7),
        Long: 'x'.repeat(70_000),
        Nested: { a: { b: { c: [[[]]] } }, 'SecretID': 'not this one' },
        Date: new Date(0),
        Empty: {},
        SecretID: randomUUID(),
        After: 'y',
      }
      for (const bytes of [encode(record), new Packr({ useRecords: false, mapsAsObjects: true }).pack(record), encode({ ...record, Description: 'é'.repeat(40) })]) {
        expect(stringField(bytes, 'SecretID')).to.equal(decode<{ SecretID: string }>(bytes).SecretID)
        expect(stringField(bytes, 'After')).to.equal('y')
      }
    })

    it('answers undefined, never a wrong value, for what is not a map holding that string', function () {
      const bytes = encode({ SecretID: randomUUID(), Description: 'd' })
      expect(stringField(encode({ SecretID: 5 }), 'SecretID')).to.equal(undefined)
      expect(stringField(encode({ Description: 'SecretID' }), 'SecretID')).to.equal(undefined)
      expect(stringField(encode(['SecretID', 'x']), 'SecretID')).to.equal(undefined)
      for (let length = 0; length < bytes.length; length++) {
        const cut = stringField(bytes.subarray(0, length), 'Description')
        expect(cut, `cut at ${length}`).to.equal(undefined)
      }
      expect(stringField(Buffer.from([0x81, 0xa8, ...Buffer.from('SecretID'), 0xc1]), 'SecretID')).to.equal(undefined)
    })
  })
})
