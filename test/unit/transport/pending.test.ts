/**
 * The bound on connections that have not proven the key (pending.ts): at the bound, the oldest connection of the
 * address holding the most goes, so a flood from one address (or a few) evicts only its own. Checked on scripted
 * cases, then against a deliberately plain model on random operations; the end-to-end flood is in
 * authentication.test.ts.
 */
import { expect } from 'chai'
import { addressGroup, PendingConnections } from '../../../src/transport/pending.js'
import { SeededRng } from '../../../src/lib/rng.js'

describe('transport: pending connections', () => {
  it('groups IPv4 addresses alone, IPv4-mapped ones as IPv4, and IPv6 ones by their /64', () => {
    expect(addressGroup('127.0.0.1')).to.equal('127.0.0.1')
    expect(addressGroup('::ffff:10.0.0.7')).to.equal('10.0.0.7')
    expect(addressGroup('2001:db8:1:2:3:4:5:6')).to.equal('2001:db8:1:2::/64')
    expect(addressGroup('2001:db8:1:2::9')).to.equal(addressGroup('2001:db8:1:2:ffff::1'))
    expect(addressGroup('2001:db8::1')).to.equal('2001:db8:0:0::/64')
    expect(addressGroup('fe80::1%eth0')).to.equal('fe80:0:0:0::/64')
    expect(addressGroup('::1')).to.equal('0:0:0:0::/64')
    expect(addressGroup(undefined)).to.equal('?')
  })

  it('evicts from the flooding address, never the lone connection of another (the review finding)', () => {
    const pending = new PendingConnections<string>(4)
    expect(pending.add('real', '10.0.0.2')).to.equal(undefined)
    const evicted: Array<string | undefined> = []
    for (let n = 0; n < 100; n += 1) evicted.push(pending.add(`flood-${n}`, '10.0.0.1'))
    expect(evicted.filter((item) => item !== undefined)).to.deep.equal(Array.from({ length: 97 }, (_, n) => `flood-${n}`))
    expect(pending.has('real')).to.equal(true)
    expect(pending.size).to.equal(4)
  })

  it('between groups of one size, evicts from the one that has held connections longest, and never the newcomer', () => {
    const pending = new PendingConnections<string>(2)
    pending.add('x', 'A')
    pending.add('y', 'B')
    expect(pending.add('z', 'C')).to.equal('x')
    expect(pending.add('w', 'C')).to.equal('z')
    pending.delete('y')
    pending.delete('w')
    expect(pending.size).to.equal(0)
    expect(pending.add('alone', 'A')).to.equal(undefined)
  })

  it('agrees with a plain model on random adds and deletes', () => {
    const random = new SeededRng(0x5eed)
    for (let round = 0; round < 50; round += 1) {
      const max = 1 + random.nextInt(6)
      const pending = new PendingConnections<number>(max)
      // The model: a list of [item, group] oldest first, and the groups in the order they gained their first item.
      let model: Array<[number, string]> = []
      let groupOrder: string[] = []
      for (let step = 0; step < 300; step += 1) {
        if (model.length > 0 && random.nextInt(3) === 0) {
          const [item] = model[random.nextInt(model.length)]!
          pending.delete(item)
          model = model.filter(([other]) => other !== item)
          groupOrder = groupOrder.filter((group) => model.some(([, of]) => of === group))
          continue
        }
        const item = round * 1000 + step
        const group = `g${random.nextInt(4)}`
        if (!groupOrder.includes(group)) groupOrder.push(group)
        model.push([item, group])
        let expected: number | undefined
        if (model.length > max) {
          const sizes = groupOrder.map((name) => model.filter(([, of]) => of === name).length)
          const largest = groupOrder[sizes.indexOf(Math.max(...sizes))]!
          expected = model.find(([, of]) => of === largest)![0]
          model = model.filter(([other]) => other !== expected)
          groupOrder = groupOrder.filter((name) => model.some(([, of]) => of === name))
        }
        expect(pending.add(item, group), `round ${round} step ${step}`).to.equal(expected)
        expect(pending.size).to.equal(model.length)
      }
    }
  })
})
