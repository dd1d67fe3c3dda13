/** parseTime (src/lib/ids.ts): RFC 3339 as Go's time.Parse reads it, every field within its range. */
import { expect } from 'chai'
import { parseTime } from '../../../src/lib/ids.js'

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
})
