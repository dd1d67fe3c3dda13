/**
 * The two small structures the transport's bounds rest on (they live in src/lib; their tests sit here with their
 * one user): the bounded queue refuses rather than grows, and the backoff doubles up to its cap with jitter that
 * only ever shortens a delay.
 */
import { expect } from 'chai'
import { Backoff } from '../../../src/lib/backoff.js'
import { BoundedQueue } from '../../../src/lib/bounded-queue.js'

describe('lib: bounded queue', () => {
  it('is first in, first out across the wrap of its ring', () => {
    const queue = new BoundedQueue<number>(3, 100, () => 1)
    const out: number[] = []
    for (let value = 0; value < 10; value += 1) {
      expect(queue.push(value)).to.equal(true)
      if (value % 2 === 1) out.push(queue.shift()!, queue.shift()!)
    }
    expect(out).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    expect(queue.length).to.equal(0)
    expect(queue.shift()).to.equal(undefined)
  })

  it('refuses an item beyond the count bound and leaves the queue unchanged', () => {
    const queue = new BoundedQueue<string>(2, 100, () => 1)
    expect([queue.push('a'), queue.push('b'), queue.push('c')]).to.deep.equal([true, true, false])
    expect([queue.length, queue.totalSize, queue.peek()]).to.deep.equal([2, 2, 'a'])
  })

  it('refuses an item beyond the size bound, and takes a smaller one that fits', () => {
    const queue = new BoundedQueue<Buffer>(10, 100, (item) => item.length)
    expect(queue.push(Buffer.alloc(60))).to.equal(true)
    expect(queue.push(Buffer.alloc(50))).to.equal(false)
    expect(queue.push(Buffer.alloc(40))).to.equal(true)
    expect(queue.totalSize).to.equal(100)
    queue.shift()
    expect(queue.totalSize).to.equal(40)
  })
})

describe('lib: backoff', () => {
  it('doubles from initialMs up to maxMs without jitter, and starts over after reset', () => {
    const backoff = new Backoff({ initialMs: 10, maxMs: 100, jitter: 0 }, () => 0.5)
    expect(Array.from({ length: 6 }, () => backoff.next())).to.deep.equal([10, 20, 40, 80, 100, 100])
    backoff.reset()
    expect(backoff.next()).to.equal(10)
  })

  it('keeps every jittered delay within [base * (1 - jitter), base], never above maxMs', () => {
    let sample = 0
    const samples = [0, 0.999999, 0.5]
    const backoff = new Backoff({ initialMs: 100, maxMs: 1000, jitter: 0.5 }, () => samples[sample++ % samples.length]!)
    const delays = Array.from({ length: 9 }, () => backoff.next())
    expect(delays.slice(0, 3)).to.deep.equal([100, 200 * (1 - 0.5 * 0.999999), 300])
    for (const delay of delays) expect(delay).to.be.within(50, 1000)
  })

  it('stays finite however many times it is called', () => {
    const backoff = new Backoff({ initialMs: 1, maxMs: 5000, jitter: 0 }, () => 0)
    for (let attempt = 0; attempt < 10_000; attempt += 1) backoff.next()
    expect(backoff.next()).to.equal(5000)
  })
})
