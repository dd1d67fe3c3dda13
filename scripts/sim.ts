/**
 * Runs the Raft simulations from the command line.
 *
 *   npm run sim -- --driver [--seeds N] [--start S]    the production driver (test/sim/driver): N seeds from S
 *   npm run sim -- --driver --seed 0x1a2b --trace      replay one driver seed exactly; --trace prints what happened
 *   npm run sim -- [--seeds N] [--start S]             the Raft core alone (test/sim/simulation.ts)
 *   npm run sim -- --seed 0x1a2b [--trace]             replay one core seed
 *   npm run sim:soak -- --minutes M                    driver seeds from a random start until M minutes are up
 *
 * A failure prints `seed=0x… steps=N` and the replay command; exit code 1.
 */
import { parseArgs } from 'node:util'
import { DriverSimulationFailure, runDriverSeed } from '../test/sim/driver/driver-simulation.js'
import { formatSeed, parseSeed, runSeed, SimulationFailure } from '../test/sim/simulation.js'

const { values } = parseArgs({
  options: {
    driver: { type: 'boolean', default: false },
    soak: { type: 'boolean', default: false },
    seed: { type: 'string' },
    seeds: { type: 'string' },
    schedules: { type: 'string' },
    start: { type: 'string' },
    minutes: { type: 'string' },
    trace: { type: 'boolean', default: false },
  },
})

/** Prints a failure and sets the exit code (exiting at once could cut off a long trace still in stdout's buffer). */
function report(error: unknown): void {
  if (error instanceof DriverSimulationFailure) {
    if (values.trace) for (const line of error.trace) console.log(line)
    else console.error(error.trace.slice(-40).join('\n'))
    console.error(error.message)
  } else if (error instanceof SimulationFailure) {
    if (error.trace !== null) for (const line of error.trace) console.log(line)
    console.error(error.message)
    const cause = error.cause
    if (cause instanceof Error && cause.stack !== undefined && cause.name !== 'SimulationViolation') console.error(cause.stack)
  } else {
    console.error(error)
  }
  process.exitCode = 1
}

async function driver(): Promise<void> {
  if (values.seed !== undefined) {
    const seed = parseSeed(values.seed)
    const result = await runDriverSeed(seed)
    console.log(`seed=${formatSeed(seed)} ok: steps=${result.steps} time=${Math.round(result.timeMs)}ms operations=${result.operations} faults=${JSON.stringify(result.faults)}`)
    return
  }
  const soakMs = values.soak ? Number(values.minutes ?? '10') * 60_000 : Number.POSITIVE_INFINITY
  const count = values.soak ? Number.POSITIVE_INFINITY : Number(values.seeds ?? values.schedules ?? '200')
  const start = values.start !== undefined ? parseSeed(values.start) : values.soak ? Date.now() % 0x7fffffff : 1
  const began = performance.now()
  let seeds = 0
  let operations = 0
  const faults: Record<string, number> = {}
  while (seeds < count && performance.now() - began < soakMs) {
    const result = await runDriverSeed((start + seeds) >>> 0)
    seeds += 1
    operations += result.operations
    for (const [kind, n] of Object.entries(result.faults)) faults[kind] = (faults[kind] ?? 0) + n
  }
  console.log(`${seeds} driver schedules from ${formatSeed(start)} ok in ${((performance.now() - began) / 1000).toFixed(1)} s: ${operations} client operations; faults ${JSON.stringify(faults)}`)
}

function core(): void {
  if (values.seed !== undefined) {
    const seed = parseSeed(values.seed)
    const result = runSeed(seed, { trace: values.trace })
    if (result.trace !== null) for (const line of result.trace) console.log(line)
    console.log(`seed=${formatSeed(seed)} ok: steps=${result.steps} time=${result.timeUnits} commitIndex=${result.commitIndex} leaderTerms=${result.leaderTerms}`)
    return
  }
  const schedules = Number(values.seeds ?? values.schedules ?? '100')
  const start = parseSeed(values.start ?? '1')
  const began = performance.now()
  let steps = 0
  for (let i = 0; i < schedules; i += 1) steps += runSeed((start + i) >>> 0).steps
  console.log(`${schedules} core schedules from ${formatSeed(start)} ok: ${steps} steps in ${((performance.now() - began) / 1000).toFixed(1)} s`)
}

try {
  if (values.driver || values.soak) await driver()
  else core()
} catch (error) {
  report(error)
}
