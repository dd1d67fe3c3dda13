/**
 * Pacing long loops (lib/pace.ts): a pacer yields to the event loop once its slice is spent, mapPaced keeps order,
 * and stringifyPaced writes exactly JSON.stringify's bytes, across its chunks.
 */
import { expect } from 'chai'
import { mapPaced, pacer, stringifyPaced } from '../../../src/lib/pace.js'

describe('lib/pace: giving the event loop turns in long loops', () => {
  it('a pacer whose slice is not spent asks for no turn; a spent one yields a turn of the event loop', async () => {
    expect(pacer(60_000)()).to.equal(undefined)
    const pace = pacer(0)
    let immediateRan = false
    setImmediate(() => (immediateRan = true))
    const turn = pace()
    expect(turn).to.be.an.instanceOf(Promise)
    await turn
    expect(immediateRan).to.equal(true)
  })

  it('timers and I/O run during a paced loop, and not during the same loop unpaced', async () => {
    const items = Array.from({ length: 2_000 }, (_, i) => i)
    let ticks = 0
    const count = setInterval(() => (ticks += 1), 0)
    try {
      // Unpaced, every item's await is a microtask: the loop holds the event loop to its end.
      await mapPaced(items, () => undefined, async (i) => i)
      expect(ticks).to.equal(0)
      await mapPaced(items, pacer(0), async (i) => i)
      expect(ticks).to.be.greaterThan(0)
    } finally {
      clearInterval(count)
    }
  })

  it('mapPaced renders every item in order, awaiting each', async () => {
    const rendered = await mapPaced([3, 1, 2], pacer(0), async (n) => `#${n}`)
    expect(rendered).to.deep.equal(['#3', '#1', '#2'])
  })

  it('stringifyPaced writes the bytes JSON.stringify writes, over chunk boundaries and for values without a JSON form', async () => {
    const cases: unknown[][] = [
      [],
      [1],
      [undefined, () => 1, null, Symbol('s'), { a: undefined, b: [undefined] }, 'é ü 中 😀', { toJSON: () => 'x' }],
      Array.from({ length: 256 }, (_, i) => ({ i })),
      Array.from({ length: 257 }, (_, i) => ({ i, s: 'v'.repeat(i % 7) })),
      Array.from({ length: 1_000 }, (_, i) => [i, `${i}`]),
    ]
    for (const items of cases) {
      const { chunks, bytes } = await stringifyPaced(items, pacer(0))
      const text = Buffer.concat(chunks).toString('utf8')
      expect(text).to.equal(JSON.stringify(items))
      expect(bytes).to.equal(Buffer.byteLength(JSON.stringify(items)))
    }
  })
})
