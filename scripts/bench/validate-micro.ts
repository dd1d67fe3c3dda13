/**
 * What checking a command's shape costs (src/state/validate.ts), per command, for the write workload's token create
 * (linking one policy) and two others: `checkCommand` on the object a node built (its own proposals), `validateCommand`
 * on the encoded bytes (decode and check: the leader, for each forwarded command), and decode alone (what applying an
 * entry paid before the check; the check adds the difference on every replica). Median of ROUNDS rounds.
 *
 *   npx tsx scripts/bench/validate-micro.ts [COMMANDS PER ROUND (default 200000)] [ROUNDS (default 7)]
 */
import { randomUUID } from 'node:crypto'
import { decode } from '../../src/state/codec.js'
import { bareToken, COMMAND_VERSION, type Command } from '../../src/state/commands.js'
import { encodeCommand } from '../../src/state/store.js'
import { checkCommand, validateCommand } from '../../src/state/validate.js'

const count = Number(process.argv[2] ?? 200_000)
const rounds = Number(process.argv[3] ?? 7)
if (!(count > 0) || !(rounds > 0)) {
  process.stderr.write('usage: validate-micro.ts [COMMANDS] [ROUNDS]\n')
  process.exit(2)
}

const createTime = new Date().toISOString()
const policyId = randomUUID()
const kinds: Record<string, () => Command> = {
  'token create': () => ({
    v: COMMAND_VERSION,
    type: 'acl.token.create',
    token: { ...bareToken({ AccessorID: randomUUID(), SecretID: randomUUID(), Description: 'bench token', CreateTime: createTime }), Policies: [{ ID: policyId }] },
  }),
  'policy create': () => ({
    v: COMMAND_VERSION,
    type: 'acl.policy.create',
    policy: { ID: randomUUID(), Name: `p-${randomUUID()}`, Description: '', Rules: 'key_prefix "" { policy = "read" }', Datacenters: [], Namespace: 'default' },
  }),
  'config apply': () => ({
    v: COMMAND_VERSION,
    type: 'config.apply',
    entry: { Kind: 'service-defaults', Name: `web-${randomUUID()}`, Namespace: 'default', Protocol: 'http', Meta: { team: 'a', tier: 'b' }, Expose: { Paths: [{ Path: '/health', LocalPathPort: 8080 }] } },
  }),
}

/** Median µs per call of `run` over each item, over `rounds` rounds. */
function measure<T>(items: readonly T[], run: (item: T) => unknown): number {
  const perCall: number[] = []
  for (let round = 0; round < rounds; round++) {
    const started = process.hrtime.bigint()
    for (const item of items) run(item)
    perCall.push(Number(process.hrtime.bigint() - started) / 1000 / items.length)
  }
  return perCall.sort((a, b) => a - b)[Math.floor(rounds / 2)]!
}

for (const [name, make] of Object.entries(kinds)) {
  const commands = Array.from({ length: count }, make)
  const encoded = commands.map(encodeCommand)
  for (const command of commands) if (!checkCommand(command).ok) throw new Error(`${name}: refused: ${JSON.stringify(checkCommand(command))}`)
  const check = measure(commands, checkCommand)
  const validate = measure(encoded, validateCommand)
  const decodeOnly = measure(encoded, (bytes) => decode(bytes))
  process.stdout.write(
    `${name} (${encoded[0]!.byteLength} bytes): checkCommand ${check.toFixed(2)} µs, validateCommand ${validate.toFixed(2)} µs ` +
      `(decode alone ${decodeOnly.toFixed(2)} µs: the check adds ${(validate - decodeOnly).toFixed(2)} µs to decoding)\n`,
  )
}
