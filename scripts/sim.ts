/**
 * Runs the Raft simulation (test/sim) from the command line.
 *
 *   npx tsx scripts/sim.ts --schedules 1000 [--start 0x00000001]   run that many seeds (consecutive from --start)
 *   npx tsx scripts/sim.ts --seed 0x1a2b3c4d [--trace]              replay one seed exactly; --trace prints every event
 *
 * A failure prints `seed=0x… steps=N` and this replay command; exit code 1.
 */
import { formatSeed, parseSeed, runSeed, SimulationFailure } from '../test/sim/simulation.js'

function argument(name: string): string | undefined {
  const at = process.argv.indexOf(name)
  return at === -1 ? undefined : process.argv[at + 1]
}

const seedText = argument('--seed')
const trace = process.argv.includes('--trace')

/** Prints a failure and sets the exit code (exiting at once could cut off a long trace still in stdout's buffer). */
function report(error: unknown): void {
  if (error instanceof SimulationFailure) {
    console.error(error.message)
    const cause = error.cause
    if (cause instanceof Error && cause.stack !== undefined && cause.name !== 'SimulationViolation') console.error(cause.stack)
  } else {
    console.error(error)
  }
  process.exitCode = 1
}

if (seedText !== undefined) {
  const seed = parseSeed(seedText)
  try {
    const result = runSeed(seed, { trace })
    if (result.trace !== null) for (const line of result.trace) console.log(line)
    console.log(`seed=${formatSeed(seed)} ok: steps=${result.steps} time=${result.timeUnits} commitIndex=${result.commitIndex} leaderTerms=${result.leaderTerms}`)
  } catch (error) {
    if (error instanceof SimulationFailure && error.trace !== null) for (const line of error.trace) console.log(line)
    report(error)
  }
} else {
  const schedules = Number(argument('--schedules') ?? '100')
  const start = parseSeed(argument('--start') ?? '1')
  const began = performance.now()
  let steps = 0
  for (let i = 0; i < schedules; i += 1) {
    const seed = (start + i) >>> 0
    try {
      steps += runSeed(seed).steps
    } catch (error) {
      report(error)
      break
    }
  }
  const seconds = (performance.now() - began) / 1000
  if (process.exitCode !== 1) console.log(`${schedules} schedules from ${formatSeed(start)} ok: ${steps} steps in ${seconds.toFixed(1)} s`)
}
