/**
 * The linearizability checker that judges chaos runs (test/support/linearizability.ts) must itself be right, or a
 * passing chaos run means nothing. It is checked on the two register histories of Porcupine's README (one good, one
 * bad) and the quiz histories of its register test, on compare-and-set histories, on operations whose outcome is
 * unknown (which may count either way), on partitioning by key, and on the budget, which must answer 'unknown'
 * rather than hang or guess. Last, a seeded comparison with a deliberately dumb checker (every permutation that
 * respects real time) on many small random histories, good and bad.
 */
import { expect } from 'chai'
import { SeededRng } from '../../../src/lib/rng.js'
import {
  casRegisterModel,
  checkOperations,
  describePartition,
  registerModel,
  type CasRegisterInput,
  type Model,
  type Operation,
  type RegisterInput,
  type RegisterOutput,
} from '../../support/linearizability.js'

type Op = Operation<CasRegisterInput<number>, RegisterOutput<number>>
type RegisterOp = Operation<RegisterInput<number>, RegisterOutput<number>>

function read(key: string, call: number, ret: number, value: number | null, clientId?: number): RegisterOp {
  return { input: { key, kind: 'read' }, call, return: ret, output: value, ...(clientId === undefined ? {} : { clientId }) }
}
function write(key: string, call: number, ret: number, value: number): RegisterOp {
  return { input: { key, kind: 'write', value }, call, return: ret, output: ret === Infinity ? undefined : true }
}
function cas(key: string, call: number, ret: number, expected: number | null, value: number, applied: boolean | undefined): Op {
  return { input: { key, kind: 'cas', expected, value }, call, return: ret, output: applied }
}

describe('support: linearizability checker', function () {
  describe("Porcupine's register examples (README and register test)", function () {
    // Times are the positions of the README's call and return events: C0 calls put, C1 and C2 call get, C2 returns
    // 0, C1 returns 100, C0's put returns.
    it('accepts the README good history: put(100) overlapping get()→100 and get()→0', function () {
      const history = [write('x', 0, 5, 100), read('x', 1, 4, 100), read('x', 2, 3, 0)]
      expect(checkOperations(registerModel<number>(0), history).outcome).to.equal('ok')
    })

    it('rejects the README bad history: get()→0 after a get()→200 that returned first, both inside put(200)', function () {
      const history = [write('x', 0, 5, 200), read('x', 1, 2, 200), read('x', 3, 4, 0)]
      const result = checkOperations(registerModel<number>(0), history)
      expect(result.outcome).to.equal('illegal')
      expect(result.partitions[0]!.longest).to.have.length.below(3)
    })

    it('agrees with the register test histories (6.824 quiz, ms times): good and bad', function () {
      const good = [write('x', 0, 100, 100), read('x', 25, 75, 100), read('x', 30, 60, 0)]
      const bad = [write('x', 0, 100, 200), read('x', 10, 30, 200), read('x', 40, 90, 0)]
      expect(checkOperations(registerModel<number>(0), good).outcome).to.equal('ok')
      expect(checkOperations(registerModel<number>(0), bad).outcome).to.equal('illegal')
    })

    it('rejects a read of a value nobody wrote, and a read of an old value after the new one was acknowledged', function () {
      expect(checkOperations(registerModel<number>(0), [write('x', 0, 1, 1), read('x', 0, 2, 7)]).outcome).to.equal('illegal')
      expect(checkOperations(registerModel<number>(0), [write('x', 0, 1, 1), read('x', 2, 3, 0)]).outcome).to.equal('illegal')
    })

    it('treats an operation called at the instant another returned as concurrent with it', function () {
      // Read at [1, 2] sees the write that returned at 1: legal because the write may take effect at 1.
      expect(checkOperations(registerModel<number>(0), [write('x', 0, 1, 1), read('x', 1, 2, 0)]).outcome).to.equal('ok')
    })
  })

  describe('compare-and-set register', function () {
    it('accepts two racing cas(0→1): one applies, the other answers false; later reads see 1', function () {
      const history = [write('k', 0, 1, 0), cas('k', 2, 6, 0, 1, true), cas('k', 3, 5, 0, 1, false), read('k', 7, 8, 1)]
      expect(checkOperations(casRegisterModel<number>(), history).outcome).to.equal('ok')
    })

    it('rejects two cas(0→1) that both applied (a lost update)', function () {
      const history = [write('k', 0, 1, 0), cas('k', 2, 6, 0, 1, true), cas('k', 3, 5, 0, 1, true)]
      expect(checkOperations(casRegisterModel<number>(), history).outcome).to.equal('illegal')
    })

    it('rejects a cas that answered false when nothing else could have changed the value', function () {
      const history = [write('k', 0, 1, 0), cas('k', 2, 3, 0, 1, false), read('k', 4, 5, 0)]
      expect(checkOperations(casRegisterModel<number>(), history).outcome).to.equal('illegal')
    })

    it('models an absent key as null: cas(null→0) creates it once', function () {
      const good = [cas('k', 0, 2, null, 0, true), cas('k', 1, 3, null, 0, false), read('k', 4, 5, 0)]
      const bad = [read('k', 0, 1, null), cas('k', 2, 3, null, 0, true), read('k', 4, 5, null)]
      expect(checkOperations(casRegisterModel<number>(), good).outcome).to.equal('ok')
      expect(checkOperations(casRegisterModel<number>(), bad).outcome).to.equal('illegal')
    })

    it('accepts a chain of increments whose concurrent losers answered false', function () {
      const history = [
        cas('k', 0, 1, null, 0, true),
        cas('k', 2, 5, 0, 1, true),
        cas('k', 3, 6, 0, 1, false),
        read('k', 4, 7, 1),
        cas('k', 8, 10, 1, 2, true),
        cas('k', 9, 11, 1, 2, false),
        read('k', 12, 13, 2),
      ]
      expect(checkOperations(casRegisterModel<number>(), history).outcome).to.equal('ok')
    })
  })

  describe('operations with an unknown outcome (return at infinity)', function () {
    it('may have taken effect: a later read sees the write', function () {
      const history = [write('k', 0, 1, 0), write('k', 2, Infinity, 5), read('k', 10, 11, 5)]
      expect(checkOperations(casRegisterModel<number>(), history).outcome).to.equal('ok')
    })

    it('may never have taken effect: every later read sees the old value', function () {
      const history = [write('k', 0, 1, 0), write('k', 2, Infinity, 5), read('k', 10, 11, 0), read('k', 20, 21, 0)]
      expect(checkOperations(casRegisterModel<number>(), history).outcome).to.equal('ok')
    })

    it('takes effect at most once: once a read saw it, a later read cannot see the old value', function () {
      const history = [write('k', 0, 1, 0), write('k', 2, Infinity, 5), read('k', 10, 11, 5), read('k', 20, 21, 0)]
      expect(checkOperations(casRegisterModel<number>(), history).outcome).to.equal('illegal')
    })

    it('never takes effect before it was called', function () {
      const history = [write('k', 0, 1, 0), read('k', 2, 3, 5), write('k', 4, Infinity, 5)]
      expect(checkOperations(casRegisterModel<number>(), history).outcome).to.equal('illegal')
    })

    it('an unknown cas applies only where its expected value holds', function () {
      const applied = [cas('k', 0, 1, null, 0, true), cas('k', 2, Infinity, 0, 1, undefined), read('k', 5, 6, 1)]
      const impossible = [cas('k', 0, 1, null, 3, true), cas('k', 2, Infinity, 0, 1, undefined), read('k', 5, 6, 1)]
      expect(checkOperations(casRegisterModel<number>(), applied).outcome).to.equal('ok')
      expect(checkOperations(casRegisterModel<number>(), impossible).outcome).to.equal('illegal')
    })

    it('an unknown cas that applied makes a later cas on the old value answer false', function () {
      const history = [
        cas('k', 0, 1, null, 0, true),
        cas('k', 2, Infinity, 0, 1, undefined),
        cas('k', 5, 6, 0, 1, false),
        read('k', 7, 8, 1),
      ]
      expect(checkOperations(casRegisterModel<number>(), history).outcome).to.equal('ok')
    })
  })

  describe('partitions and reports', function () {
    it('checks each key alone and names the key that fails', function () {
      const history = [
        write('a', 0, 1, 1),
        read('a', 2, 3, 1),
        write('b', 0, 1, 1),
        read('b', 2, 3, 0, 7),
      ]
      const model = casRegisterModel<number>()
      const result = checkOperations(model, history)
      expect(result.outcome).to.equal('illegal')
      expect(result.partitions.map((partition) => [partition.name, partition.outcome])).to.deep.equal([
        ['a', 'ok'],
        ['b', 'illegal'],
      ])
      const text = describePartition(model, result.partitions[1]!)
      expect(text).to.contain('partition b: illegal')
      expect(text).to.contain('read b -> 0')
      expect(text).to.contain('client 7')
      expect(text).to.contain('(not allowed here)')
    })

    it('refuses an operation that returns before it is called', function () {
      expect(() => checkOperations(casRegisterModel<number>(), [read('k', 5, 4, null)])).to.throw(RangeError)
    })
  })

  describe('budget', function () {
    // Ten concurrent writes and a read of a value none wrote: proving it illegal means visiting every subset of the
    // writes with each possible last value, about 33,000 steps (0.1 s), far more than the budgets below allow.
    const hard = [...Array.from({ length: 10 }, (_, value) => write('k', 0, 100, value)), read('k', 0, 100, 99)]

    it("answers 'unknown' (not 'ok', not a hang) when the step budget runs out", function () {
      const result = checkOperations(casRegisterModel<number>(), hard, { stepsMaxPerPartition: 1000 })
      expect(result.outcome).to.equal('unknown')
      expect(result.partitions[0]!.exhausted).to.equal('steps')
    })

    it("answers 'unknown' when the time budget runs out, promptly", function () {
      const result = checkOperations(casRegisterModel<number>(), hard, { timeMsPerPartition: 0 })
      expect(result.outcome).to.equal('unknown')
      expect(result.partitions[0]!.exhausted).to.equal('time')
      expect(result.elapsedMs).to.be.below(200)
    })

    it("answers 'unknown' when the memo outgrows its bound", function () {
      const result = checkOperations(casRegisterModel<number>(), hard, { memoWordsMaxPerPartition: 100 })
      expect(result.partitions[0]!.exhausted).to.equal('memory')
    })

    it('with enough budget, the same history is illegal', function () {
      expect(checkOperations(casRegisterModel<number>(), hard).outcome).to.equal('illegal')
    })

    it('a budget spent on one key leaves the other keys checked', function () {
      const result = checkOperations(casRegisterModel<number>(), [...hard, write('other', 0, 1, 1), read('other', 2, 3, 0)], {
        stepsMaxPerPartition: 1000,
      })
      expect(result.outcome).to.equal('illegal')
      expect(result.partitions.map((partition) => partition.outcome)).to.deep.equal(['unknown', 'illegal'])
    })
  })

  describe('against a brute-force checker on random small histories', function () {
    /** Linearizable iff some permutation keeps real-time order (a returned strictly before b was called) and is legal. */
    function bruteForce<S, I, O>(model: Model<S, I, O>, history: Operation<I, O>[]): boolean {
      const used = new Array<boolean>(history.length).fill(false)
      const search = (state: S, placed: number): boolean => {
        if (placed === history.length) return true
        for (let candidate = 0; candidate < history.length; candidate += 1) {
          if (used[candidate]) continue
          const operation = history[candidate]!
          // Every operation still unplaced that returned strictly before this one was called must come first.
          const blocked = history.some((other, index) => !used[index] && index !== candidate && other.return < operation.call)
          if (blocked) continue
          const result = model.step(state, operation.input, operation.output)
          if (!result.ok) continue
          used[candidate] = true
          const found = search(result.state, placed + 1)
          used[candidate] = false
          if (found) return true
        }
        return false
      }
      return search(model.init(), 0)
    }

    function randomHistory(rng: SeededRng): Op[] {
      const length = rng.between(1, 6)
      return Array.from({ length }, () => {
        const call = rng.between(0, 20)
        const unknown = rng.chance(0.15)
        const ret = unknown ? Infinity : call + rng.between(0, 8)
        const value = rng.between(0, 2)
        switch (rng.nextInt(3)) {
          case 0:
            return read('k', call, ret, unknown ? null : rng.chance(0.2) ? null : value)
          case 1:
            return write('k', call, ret, value)
          default: {
            const expected = rng.chance(0.2) ? null : rng.between(0, 2)
            return cas('k', call, ret, expected, value, unknown ? undefined : rng.chance(0.5))
          }
        }
      }).map((operation) => (operation.input.kind === 'read' && operation.return === Infinity ? { ...operation, output: undefined } : operation))
    }

    it('agrees on 3000 seeded histories (seed 0xc0ffee), with both answers well represented', function () {
      const rng = new SeededRng(0xc0ffee)
      const model = casRegisterModel<number>()
      const tally = { ok: 0, illegal: 0 }
      for (let round = 0; round < 3000; round += 1) {
        const history = randomHistory(rng)
        const expected = bruteForce(model, history) ? 'ok' : 'illegal'
        const actual = checkOperations(model, history).outcome
        expect(actual, `round ${round}: ${JSON.stringify(history)}`).to.equal(expected)
        tally[expected] += 1
      }
      expect(tally.ok).to.be.above(300)
      expect(tally.illegal).to.be.above(300)
    })
  })
})
