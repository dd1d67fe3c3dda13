/**
 * A short seeded chaos run inside `npm test`: three real nodes, eight concurrent clients (token and policy creates and
 * updates, config CAS increments, reads in all three modes) for 20 seconds while the nemesis kills, pauses and
 * partitions nodes, then every check of scripts/chaos/checks.ts on the recorded history: acknowledged writes present,
 * each key linearizable, stale reads only of written values, versions agreeing, nodes converging, faults effective.
 *
 * The run stops its cluster itself, whatever happens; if the test is cut short (a mocha timeout), `after` aborts it,
 * waits for it to stop, and as a last resort kills whatever its cluster's state file still names.
 */
import { expect } from 'chai'
import { LocalCluster } from '../../cluster/lib.js'
import { killClusterSync } from '../../scripts/chaos/cleanup.js'
import { runChaos, type ChaosResult } from '../../scripts/chaos/run.js'

// Chosen for its schedule: a pause, a kill -9 and a partition, each of the leader at that moment.
const SEED = 0x5eed001e

/** The failed checks with their first problems, so a failure says what broke and how to replay it. */
function explain(result: ChaosResult): string {
  const lines = [`seed ${result.seed}: replay with ${result.replay}`]
  if (result.error !== undefined) lines.push(`run error: ${result.error}`)
  for (const [name, check] of Object.entries(result.checks ?? {})) {
    if (!check.passed) lines.push(`${name} failed (${check.count}):`, ...check.problems.slice(0, 5))
  }
  if (result.root !== undefined) lines.push(`node logs: ${result.root}/logs`)
  return lines.join('\n')
}

describe('chaos: a short seeded run against three real nodes', function () {
  this.timeout(150_000)
  const controller = new AbortController()
  let root: string | undefined
  let running: Promise<ChaosResult> | undefined

  after(async function () {
    this.timeout(60_000)
    controller.abort()
    await Promise.race([running?.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 30_000))])
    if (root === undefined) return
    // The run stops its cluster; if it could not, stop it the orderly way, then by force.
    await (await LocalCluster.attach(root).catch(() => undefined))?.down().catch(() => undefined)
    killClusterSync(root)
  })

  it('20 s of kills, pauses and partitions under load: the history passes every check', async function () {
    running = runChaos({
      seed: SEED,
      durationMs: 20_000,
      nodes: 3,
      clients: 8,
      // A short run: faults every 1-3 s, so it sees several (npm run chaos waits up to 6 s for longer faults).
      faultIntervalMsMin: 1_000,
      faultIntervalMsMax: 3_000,
      signal: controller.signal,
      onRoot: (path) => {
        root = path
      },
    })
    const result = await running
    expect(result.passed, explain(result)).to.equal(true)
    expect(result.operations.total).to.be.above(500)
    expect(result.faults.filter((event) => ['kill', 'pause', 'partition'].includes(event.action)).length).to.be.at.least(3)
    expect(result.checks?.linearizable.outcome).to.equal('ok')
  })
})
