/**
 * The Raft core under simulation: many seeded schedules of faults (simulation.ts), each checked after every event for
 * election safety, log matching, leader completeness, state machine safety and linearizable reads, and for a
 * committing majority once everything heals. A failure names its seed and the command that replays it exactly:
 *
 *   npx tsx scripts/sim.ts --seed 0x… [--trace]
 *
 * Environment: RAFT_SIM_SCHEDULES (default 2000) and RAFT_SIM_FIRST_SEED (default 1) choose the seeds run;
 * RAFT_SIM_SEEDS (comma-separated) runs just those.
 */
import { expect } from 'chai'
import { SimulationViolation, StateChecker } from './checker.js'
import { formatSeed, parseSeed, runSeed, SimulationFailure } from './simulation.js'

const SCHEDULES = Number(process.env['RAFT_SIM_SCHEDULES'] ?? '2000')
const FIRST_SEED = parseSeed(process.env['RAFT_SIM_FIRST_SEED'] ?? '1')
const ONLY_SEEDS = (process.env['RAFT_SIM_SEEDS'] ?? '').split(',').filter((seed) => seed.trim() !== '').map((seed) => parseSeed(seed.trim()))

function seedsToRun(): number[] {
  if (ONLY_SEEDS.length > 0) return ONLY_SEEDS
  return Array.from({ length: SCHEDULES }, (_, i) => (FIRST_SEED + i) >>> 0)
}

/** Runs a seed; a failure becomes an Error whose message is the seed, the step count and the replay command. */
function run(seed: number): ReturnType<typeof runSeed> {
  try {
    return runSeed(seed)
  } catch (error) {
    if (error instanceof SimulationFailure) throw new Error(error.message, { cause: error.cause })
    throw error
  }
}

describe('raft: simulation', function () {
  this.timeout(300_000)

  it(`keeps every safety property and commits after healing, over ${ONLY_SEEDS.length || SCHEDULES} seeded schedules`, function () {
    const began = performance.now()
    let steps = 0
    const seeds = seedsToRun()
    for (const seed of seeds) steps += run(seed).steps
    const seconds = (performance.now() - began) / 1000
    console.log(`      ${seeds.length} schedules from ${formatSeed(seeds[0] ?? 0)}: ${steps} steps in ${seconds.toFixed(1)} s`)
  })

  it('replays a seed exactly: the same seed gives the same trace, byte for byte', function () {
    for (const seed of [0x2a, 0xdeadbeef]) {
      const first = runSeed(seed, { trace: true }).trace!.join('\n')
      const second = runSeed(seed, { trace: true }).trace!.join('\n')
      expect(first.length).to.be.greaterThan(10_000)
      expect(second === first, `traces of seed ${formatSeed(seed)} differ`).to.equal(true)
    }
  })

  it('a failure reports its seed, its step count and the command that replays it', function () {
    const failure = new SimulationFailure(0x1f, 1234, 5678, new SimulationViolation('something broke'))
    expect(failure.message).to.match(/^seed=0x0000001f steps=1234 time=5678: SimulationViolation: something broke/)
    expect(failure.message).to.include('npx tsx scripts/sim.ts --seed 0x0000001f')
  })

  describe('the checkers are not vacuous', function () {
    it('two leaders in one term break election safety', function () {
      const checker = new StateChecker()
      checker.checkLeader(3, 'n1')
      checker.checkLeader(3, 'n1')
      expect(() => checker.checkLeader(3, 'n2')).to.throw(SimulationViolation, /election safety/)
    })

    it('one (index, term) after different logs breaks log matching', function () {
      const checker = new StateChecker()
      const entry = { index: 2, term: 1, type: 'command' as const, data: new Uint8Array([1]) }
      checker.checkLogMatching('n1', [entry], [111])
      expect(() => checker.checkLogMatching('n2', [entry], [222])).to.throw(SimulationViolation, /log matching/)
    })

    it('a different state at one applied index breaks state machine safety', function () {
      const checker = new StateChecker()
      checker.recordApplied('n1', 5, 42)
      expect(() => checker.recordApplied('n2', 5, 43)).to.throw(SimulationViolation, /state machine safety/)
    })

    it('a leader of a later term missing a committed entry breaks leader completeness; one of an older term may lack it', function () {
      const checker = new StateChecker()
      checker.recordCommit('n1', 1, 0, 2, (index) => (index <= 2 ? 1 : undefined))
      expect(() => checker.checkLeaderCompleteness('n2', 3, 1, (index) => (index === 2 ? 2 : 1))).to.throw(SimulationViolation, /leader completeness/)
      expect(() => checker.checkLeaderCompleteness('n3', 1, 1, () => undefined)).to.not.throw()
    })
  })
})
