/** src/lib/ids.ts: parseTime reads RFC 3339 as Go's time.Parse does, every field within its range; newOrderedUuid makes time-ordered UUIDs. */
import { expect } from 'chai'
import { parseTime, isUuid, newOrderedUuid } from '../../../src/lib/ids.js'

describe('parseTime', () => {
  it('reads RFC 3339 timestamps with a zone or an offset, and fractions of a second', () => {
    expect(parseTime('2026-11-21T10:00:00Z')).to.equal(Date.UTC(2026, 10, 21, 10))
    expect(parseTime('2026-11-21T12:00:00.250+02:00')).to.equal(Date.UTC(2026, 10, 21, 10, 0, 0, 250))
    expect(parseTime('2028-02-29T00:00:00Z')).to.equal(Date.UTC(2028, 1, 29))
  })

  for (const text of ['2026-11-21T24:00:00Z', '2026-02-30T10:00:00Z', '2027-02-29T10:00:00Z', '2026-13-01T10:00:00Z', '2026-00-10T10:00:00Z', '2026-11-21T10:60:00Z', '2026-11-21T10:00:60Z', '2026-11-21T10:00:00+24:00', '2026-11-21']) {
    it(`refuses ${text} instead of rolling it over`, () => {
      expect(parseTime(text)).to.equal(undefined)
    })
  }

  it('answers each text for itself when the same texts come again in turn (it keeps the last answer)', () => {
    const texts = ['2026-11-21T10:00:00Z', '2026-11-21T10:00:00Z', '2026-02-30T10:00:00Z', '2026-02-30T10:00:00Z', '2026-11-21T10:00:01Z', '2026-11-21T10:00:00Z']
    expect(texts.map((text) => parseTime(text))).to.deep.equal([
      Date.UTC(2026, 10, 21, 10),
      Date.UTC(2026, 10, 21, 10),
      undefined,
      undefined,
      Date.UTC(2026, 10, 21, 10, 0, 1),
      Date.UTC(2026, 10, 21, 10),
    ])
  })
})

describe('newOrderedUuid', () => {
  it('is a version 7 UUID whose first 48 bits are the milliseconds given', () => {
    const ms = Date.UTC(2026, 10, 26, 10, 30, 0, 123)
    const id = newOrderedUuid(ms)
    expect(isUuid(id)).to.equal(true)
    expect(id[14], 'version nibble').to.equal('7')
    expect(['8', '9', 'a', 'b'], 'RFC 9562 variant').to.include(id[19])
    expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).to.equal(ms)
  })

  it('sorts identifiers made in later milliseconds after earlier ones, as LevelDB orders their keys', () => {
    const start = Date.UTC(2026, 0, 1)
    const ids = Array.from({ length: 200 }, (_, n) => newOrderedUuid(start + n * 7))
    const sorted = [...ids].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
    expect(sorted).to.deep.equal(ids)
  })

  it('differs in its random bits within one millisecond', () => {
    const ms = Date.now()
    const ids = new Set(Array.from({ length: 1000 }, () => newOrderedUuid(ms)))
    expect(ids.size).to.equal(1000)
  })
})
