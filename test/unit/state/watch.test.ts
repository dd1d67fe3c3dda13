/**
 * Change notifications for blocking queries: a waiter subscribes to a table, or to some of its records, and is called
 * once at the next change of what it watches. The tests drive `Watches` directly with the table names and record keys
 * that `StateStore.apply` passes, and check the bookkeeping a server with many waiting queries depends on: a listener
 * fires at most once, and neither firing nor unsubscribing leaves anything behind (`size` returns to 0).
 */
import { expect } from 'chai'
import { recordKey } from '../../../src/state/keys.js'
import { Watches } from '../../../src/state/watch.js'

describe('state: watches', function () {
  let watches: Watches

  beforeEach(function () {
    watches = new Watches()
  })

  afterEach(function () {
    // Every test below ends with nothing registered: a waiter that fired or gave up holds no memory.
    expect(watches.size).to.equal(0)
  })

  it('a table subscription fires once, at the next change of that table only', function () {
    const calls: string[] = []
    watches.subscribe('token', undefined, () => calls.push('token'))
    expect(watches.size).to.equal(1)
    watches.notify(['policy'], [recordKey('policy', 'p1')])
    expect(calls).to.deep.equal([])
    watches.notify(['token', 'policy'], [])
    expect(calls).to.deep.equal(['token'])
    watches.notify(['token'], [])
    expect(calls).to.deep.equal(['token'])
  })

  it('a record subscription fires at a change of one of its records, not at other changes of the table', function () {
    const calls: string[] = []
    const watched = [recordKey('token', 'a'), recordKey('token', 'b')]
    watches.subscribe('token', watched, () => calls.push('a-or-b'))
    expect(watches.size).to.equal(2)
    watches.notify(['token'], [recordKey('token', 'c')])
    expect(calls).to.deep.equal([])
    // Both watched records change in one batch: the listener still runs once.
    watches.notify(['token'], [recordKey('token', 'b'), recordKey('token', 'a')])
    expect(calls).to.deep.equal(['a-or-b'])
  })

  it('a record key of another table does not fire a record subscription with the same ID', function () {
    const calls: string[] = []
    const unsubscribe = watches.subscribe('token', [recordKey('token', 'x')], () => calls.push('token x'))
    watches.notify(['policy'], [recordKey('policy', 'x')])
    expect(calls).to.deep.equal([])
    unsubscribe()
  })

  it('unsubscribe removes the listener: it never fires and size returns to 0', function () {
    const calls: string[] = []
    const unsubscribeTable = watches.subscribe('role', undefined, () => calls.push('role'))
    const unsubscribeRecords = watches.subscribe('role', [recordKey('role', 'r1'), recordKey('role', 'r2')], () => calls.push('r'))
    expect(watches.size).to.equal(3)
    unsubscribeTable()
    unsubscribeRecords()
    expect(watches.size).to.equal(0)
    watches.notify(['role'], [recordKey('role', 'r1')])
    expect(calls).to.deep.equal([])
    // Unsubscribing twice, or after firing, is harmless.
    unsubscribeTable()
    const unsubscribeFired = watches.subscribe('role', undefined, () => calls.push('again'))
    watches.notify(['role'], [])
    unsubscribeFired()
    expect(calls).to.deep.equal(['again'])
  })

  it('many subscriptions on one table all fire, and all are released', function () {
    let fired = 0
    const unsubscribes = Array.from({ length: 1000 }, () => watches.subscribe('policy', undefined, () => (fired += 1)))
    expect(watches.size).to.equal(1000)
    // Half give up (a blocking query timing out), the other half are woken.
    for (const unsubscribe of unsubscribes.slice(0, 500)) unsubscribe()
    expect(watches.size).to.equal(500)
    watches.notify(['policy'], [])
    expect(fired).to.equal(500)
  })

  it('a listener that subscribes again while being notified waits for the next change', function () {
    const calls: number[] = []
    const wait = (round: number): void => {
      watches.subscribe('config', undefined, () => {
        calls.push(round)
        if (round < 3) wait(round + 1)
      })
    }
    wait(1)
    watches.notify(['config'], [])
    expect(calls).to.deep.equal([1])
    watches.notify(['config'], [])
    watches.notify(['config'], [])
    expect(calls).to.deep.equal([1, 2, 3])
  })

  it('notifyAll wakes every table and record waiter once and releases them all', function () {
    const calls: string[] = []
    watches.subscribe('token', undefined, () => calls.push('token'))
    watches.subscribe('policy', undefined, () => calls.push('policy'))
    watches.subscribe('role', [recordKey('role', 'r1'), recordKey('role', 'r2')], () => calls.push('role records'))
    expect(watches.size).to.equal(4)
    watches.notifyAll()
    expect(calls.sort()).to.deep.equal(['policy', 'role records', 'token'])
    watches.notifyAll()
    expect(calls).to.have.length(3)
  })
})
