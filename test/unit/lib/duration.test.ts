/**
 * Go-style durations, as the contract writes them (MaxTokenTTL, ExpirationTTL): `parseDuration` must accept exactly
 * what Go's time.ParseDuration accepts and give the same value (in milliseconds), and `formatDuration` must print what
 * Go's time.Duration.String() prints, so clients written for Consul parse what warden returns. Most cases come from
 * Go's own table in src/time/time_test.go (parseDurationTests, parseDurationErrorTests, durationTests); a seeded
 * round trip checks that every whole number of milliseconds survives format then parse.
 */
import { expect } from 'chai'
import { formatDuration, parseDuration } from '../../../src/lib/duration.js'

/** Go's largest Duration, 2562047h47m16.854775807s, in milliseconds. */
const GO_DURATION_MAX_MS = 9_223_372_036_854.775807

describe('lib: durations', function () {
  describe('parseDuration', function () {
    it('parses the forms the contract uses (1h30m, 1.5s, 250ms, 90s)', function () {
      expect(parseDuration('1h30m')).to.equal(5_400_000)
      expect(parseDuration('1.5s')).to.equal(1500)
      expect(parseDuration('250ms')).to.equal(250)
      expect(parseDuration('90s')).to.equal(90_000)
      expect(parseDuration('24h')).to.equal(86_400_000)
      expect(parseDuration('1m')).to.equal(60_000)
    })

    it('reads a bare 0 (with or without a sign) as zero, as Go does; any other number needs a unit', function () {
      expect(parseDuration('0')).to.equal(0)
      expect(parseDuration('+0')).to.equal(0)
      expect(Math.abs(parseDuration('-0')!)).to.equal(0)
      expect(parseDuration('0s')).to.equal(0)
      expect(parseDuration('3')).to.equal(undefined)
      expect(parseDuration('1.5')).to.equal(undefined)
    })

    it("agrees with Go's table of valid durations", function () {
      const cases: Array<[string, number]> = [
        ['5s', 5000],
        ['30s', 30_000],
        ['1478s', 1_478_000],
        ['-5s', -5000],
        ['+5s', 5000],
        ['5.0s', 5000],
        ['5.6s', 5600],
        ['5.s', 5000],
        ['.5s', 500],
        ['1.0s', 1000],
        ['1.00s', 1000],
        ['1.004s', 1004],
        ['1.0040s', 1004],
        ['100.00100s', 100_001],
        ['13ms', 13],
        ['14s', 14_000],
        ['15m', 900_000],
        ['16h', 57_600_000],
        ['3h30m', 12_600_000],
        ['10.5s4m', 250_500],
        ['-2m3.4s', -123_400],
        ['39h9m14.425s', 140_954_425],
        ['0.3333333333333333333h', 1_200_000],
        ['0.100000000000000000000h', 360_000],
        // Go allows a unit to repeat and adds the parts.
        ['1h1h', 7_200_000],
      ]
      for (const [text, ms] of cases) expect(parseDuration(text), text).to.equal(ms)
    })

    it('parses sub-millisecond units (ns, us, µs, μs) as fractions of a millisecond', function () {
      const cases: Array<[string, number]> = [
        ['10ns', 0.000_01],
        ['11us', 0.011],
        ['12\u00b5s', 0.012],
        ['12\u03bcs', 0.012],
        ['1h2m3s4ms5us6ns', 3_723_004.005_006],
        ['52763797000ns', 52_763.797],
      ]
      for (const [text, ms] of cases) expect(parseDuration(text), text).to.be.closeTo(ms, 1e-9)
    })

    it('gives decimal fractions exactly when the result is a whole number of milliseconds, as Go’s integer arithmetic does', function () {
      // Go computes in integer nanoseconds: "2.3h" is exactly 2h18m, "1.005s" exactly 1005ms.
      const cases: Array<[string, number]> = [
        ['2.3h', 8_280_000],
        ['1.005s', 1005],
        ['0.1s', 100],
        ['4.35s', 4350],
        ['1.1s', 1100],
        ['0.7m', 42_000],
      ]
      for (const [text, ms] of cases) expect(parseDuration(text), text).to.equal(ms)
    })

    it("rejects what Go rejects: empty, signs or dots alone, missing or unknown units, spaces, other notations", function () {
      const invalid = ['', '-', '+', '.', '-.', '.s', '+.s', 's', 'ms', '1d', '1w', '1S', '1H', '1Ms', '1h 30m', ' 1s', '1s ', '1e3s', '0x10s', '1,5s', '--1s', '+-1s', '1.5.s', 'h1', '\u0085\u0085', '1hh']
      for (const text of invalid) expect(parseDuration(text), JSON.stringify(text)).to.equal(undefined)
    })

    it('rejects durations beyond Go’s range (int64 nanoseconds, about 2562047h), as Go does', function () {
      expect(parseDuration('2562047h')).to.be.at.most(GO_DURATION_MAX_MS)
      for (const text of ['2562048h', '3000000h', '9223372036854775810ns', '9223372036854ms775us808ns', '-2562048h']) {
        expect(parseDuration(text), text).to.equal(undefined)
      }
    })
  })

  describe('formatDuration', function () {
    it('prints Go’s canonical form (0s, 1.5s, 1m30s, 1h0m0s, 250ms)', function () {
      const cases: Array<[number, string]> = [
        [0, '0s'],
        [1, '1ms'],
        [250, '250ms'],
        [999, '999ms'],
        [1000, '1s'],
        [1001, '1.001s'],
        [1500, '1.5s'],
        [59_000, '59s'],
        [60_000, '1m0s'],
        [90_000, '1m30s'],
        [3_599_999, '59m59.999s'],
        [3_600_000, '1h0m0s'],
        [3_661_001, '1h1m1.001s'],
        [5_400_000, '1h30m0s'],
        [86_400_000, '24h0m0s'],
        [-1500, '-1.5s'],
        [-90_000, '-1m30s'],
        [-250, '-250ms'],
      ]
      for (const [ms, text] of cases) expect(formatDuration(ms), String(ms)).to.equal(text)
    })

    it('round-trips every whole number of milliseconds through format and parse (seeded random sample)', function () {
      // A small linear congruential generator: the same sample on every run.
      let state = 0x2545f491
      const next = (): number => {
        state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0
        return state
      }
      for (let round = 0; round < 2000; round += 1) {
        const magnitude = [1_000, 100_000, 10_000_000, 1_000_000_000_000][round % 4]!
        const ms = ((next() * 4_294_967_296 + next()) % magnitude) * (next() % 2 === 0 ? 1 : -1)
        const text = formatDuration(ms)
        expect(parseDuration(text), `${ms} -> ${text}`).to.equal(ms === 0 ? 0 : ms)
      }
    })
  })
})
