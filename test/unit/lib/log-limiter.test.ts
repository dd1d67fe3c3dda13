/**
 * LogLimiter: a line about the same failure is logged at most once per interval, the next one admitted says how many
 * were left out, different failures do not hold each other back, and the keys it remembers are bounded.
 */
import { expect } from 'chai'
import { LogLimiter } from '../../../src/lib/log-limiter.js'

describe('lib/log-limiter: LogLimiter', () => {
  it('admits a line once per interval and counts the ones it left out', () => {
    let clock = 0
    const limiter = new LogLimiter(10_000, () => clock)
    expect(limiter.admit('jwks down')).to.deep.equal({ log: true, suppressed: 0 })
    for (let n = 0; n < 5; n++) {
      clock += 1_000
      expect(limiter.admit('jwks down').log).to.equal(false)
    }
    clock = 10_000
    expect(limiter.admit('jwks down')).to.deep.equal({ log: true, suppressed: 5 })
    expect(limiter.admit('jwks down').log).to.equal(false)
  })

  it('keeps different failures apart', () => {
    const limiter = new LogLimiter(10_000, () => 0)
    expect(limiter.admit('a').log).to.equal(true)
    expect(limiter.admit('b').log).to.equal(true)
    expect(limiter.admit('a').log).to.equal(false)
  })

  it('remembers at most keysMax failures, forgetting the oldest', () => {
    const limiter = new LogLimiter(10_000, () => 0, 2)
    limiter.admit('a')
    limiter.admit('b')
    limiter.admit('c')
    // 'a' was forgotten to make room for 'c', so it is admitted again; 'c' is still held back.
    expect(limiter.admit('a').log).to.equal(true)
    expect(limiter.admit('c').log).to.equal(false)
  })

  it('warn logs the first line of a key and, after the interval, the next with how many were left out', () => {
    let clock = 0
    const limiter = new LogLimiter(10_000, () => clock)
    const lines: Array<{ fields: unknown; message: string }> = []
    const log = { warn: (fields: unknown, message: string) => lines.push({ fields, message }) } as unknown as import('pino').Logger
    limiter.warn(log, 'k', { peer: 'x' }, 'refused')
    limiter.warn(log, 'k', { peer: 'y' }, 'refused')
    clock = 10_000
    limiter.warn(log, 'k', { peer: 'z' }, 'refused')
    expect(lines).to.deep.equal([
      { fields: { peer: 'x' }, message: 'refused' },
      { fields: { peer: 'z', suppressed: 1 }, message: 'refused' },
    ])
  })
})

