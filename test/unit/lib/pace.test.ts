/**
 * Pacing long loops (lib/pace.ts): a pacer yields to the event loop once its slice is spent, mapPaced keeps order,
 * stringifyPaced writes exactly JSON.stringify's bytes, across its chunks, and a TurnQueue runs a batch per turn.
 */
import { expect } from 'chai'
import { mapPaced, pacer, stringifyPaced, TurnQueue } from '../../../src/lib/pace.js'

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

  it('a TurnQueue runs its callbacks in order, at most perTurn of them per turn of the event loop, and all of them', async () => {
    const queue = new TurnQueue(100)
    const ran: number[] = []
    const turns: number[] = []
    for (let i = 0; i < 250; i += 1) queue.push(() => ran.push(i))
    expect(ran).to.deep.equal([])
    expect(queue.size).to.equal(250)
    for (let turn = 0; turn < 4; turn += 1) {
      await new Promise((resolve) => setImmediate(resolve))
      turns.push(ran.length)
    }
    // The queue's first turn was scheduled before this test's first wait, so each wait sees one more batch.
    expect(turns).to.deep.equal([100, 200, 250, 250])
    expect(ran).to.deep.equal(Array.from({ length: 250 }, (_, i) => i))
    expect(queue.size).to.equal(0)
    // Empty again, it starts over on the next push.
    queue.push(() => ran.push(250))
    await new Promise((resolve) => setImmediate(resolve))
    expect(ran.at(-1)).to.equal(250)
  })
})
