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
})
