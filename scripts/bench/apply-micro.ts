/**
 * The state machine alone: token creates (each linking one policy, as the write workload sends them) applied to a
 * fresh LevelDB state in batches, as a node applies a Ready's committed entries. Reports µs per command, the part
 * every node of a cluster pays for each write. Run under `node --cpu-prof` to see where apply's time goes.
 *
 *   npx tsx scripts/bench/apply-micro.ts [COMMANDS (default 100000)] [BATCH (default 16)]
 */
import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { bareToken, COMMAND_VERSION, type Command } from '../../src/state/commands.js'
import { StateStore } from '../../src/state/store.js'

const total = Number(process.argv[2] ?? 100_000)
const batchSize = Number(process.argv[3] ?? 16)
if (!(total > 0) || !(batchSize > 0)) {
  process.stderr.write('usage: apply-micro.ts [COMMANDS] [BATCH]\n')
  process.exit(2)
}

const directory = await mkdtemp(join(tmpdir(), 'warden-apply-micro-'))
const store = await StateStore.open(directory)
try {
  let index = 0
  const applyOne = (command: Command): Promise<unknown> => store.apply(command, ++index)
  await applyOne({ v: COMMAND_VERSION, type: 'acl.init' })
  const policyId = randomUUID()
  const policy = { ID: policyId, Name: 'bench', Description: '', Rules: 'key_prefix "" { policy = "read" }', Datacenters: [], Namespace: 'default' }
  await applyOne({ v: COMMAND_VERSION, type: 'acl.policy.create', policy })

  const createTime = new Date().toISOString()
  const command = (): Command => ({
    v: COMMAND_VERSION,
    type: 'acl.token.create',
    token: { ...bareToken({ AccessorID: randomUUID(), SecretID: randomUUID(), Description: 'bench token', CreateTime: createTime }), Policies: [{ ID: policyId }] },
  })
  // Commands are built before the clock starts: what is measured is apply, not the benchmark's own UUIDs.
  const batches: Array<Array<{ command: Command; index: number }>> = []
  for (let made = 0; made < total; made += batchSize) {
    const batch: Array<{ command: Command; index: number }> = []
    for (let n = 0; n < batchSize && made + n < total; n++) batch.push({ command: command(), index: ++index })
    batches.push(batch)
  }
  const cpuBefore = process.cpuUsage()
  const started = process.hrtime.bigint()
  for (const batch of batches) {
    const results = await store.applyBatch(batch)
    if (!results.every((result) => result.ok)) throw new Error(`a token create failed: ${JSON.stringify(results.find((result) => !result.ok))}`)
  }
  const wallUs = Number(process.hrtime.bigint() - started) / 1000
  const cpu = process.cpuUsage(cpuBefore)
  process.stdout.write(
    `${total} token creates in batches of ${batchSize}: ${(wallUs / total).toFixed(1)} µs wall, ` +
      `${((cpu.user + cpu.system) / total).toFixed(1)} µs CPU (all threads) per command\n`,
  )
} finally {
  await store.close()
  await rm(directory, { recursive: true, force: true })
}
