/**
 * Microbenchmark: what token resolution adds to a request. Builds a real state store (LevelDB in a temp dir) with
 * policies, a role and tokens as the benchmark issue describes (each token two policies and a role), then measures
 * (1) a check on a built authorizer and (2) a full `resolve()` of a cached token (digest of the secret, cache lookup,
 * expiry test) plus one permission check. Speed is measured here, never asserted in tests.
 *
 *   npm run bench:resolve [-- --tokens 10000]
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { StateStore } from '../../src/state/store.js'
import { TokenResolver } from '../../src/acl/resolver.js'
import type { Command } from '../../src/state/commands.js'

const tokensArg = process.argv.indexOf('--tokens')
const tokenCount = tokensArg === -1 ? 10_000 : Number(process.argv[tokensArg + 1])

const dir = await mkdtemp(join(tmpdir(), 'warden-bench-resolve-'))
const state = await StateStore.open(dir)
let index = 0
type Unversioned<C> = C extends { v: number } ? Omit<C, 'v'> : never
const apply = async (command: Unversioned<Command>): Promise<unknown> => {
  const result = await state.apply({ v: 1, ...command } as Command, ++index)
  if (!result.ok) throw new Error(result.error.message)
  return result.value
}
try {
  await apply({ type: 'acl.init' })
  const policyIds: string[] = []
  for (let n = 0; n < 20; n++) {
    const id = randomUUID()
    policyIds.push(id)
    await apply({
      type: 'acl.policy.create',
      policy: { ID: id, Name: `p${n}`, Description: '', Rules: `service_prefix "svc-${n}" { policy = "write" }\nacl = "read"`, Datacenters: [], Namespace: 'default' },
    })
  }
  const roleId = randomUUID()
  await apply({
    type: 'acl.role.create',
    role: { ID: roleId, Name: 'r', Description: '', Policies: [{ ID: policyIds[0]! }], TemplatedPolicies: [], ServiceIdentities: [], NodeIdentities: [], Namespace: 'default' },
  })
  const secrets: string[] = []
  for (let n = 0; n < tokenCount; n++) {
    const secret = randomUUID()
    secrets.push(secret)
    await apply({
      type: 'acl.token.create',
      token: {
        AccessorID: randomUUID(),
        SecretID: secret,
        Description: '',
        Policies: [{ ID: policyIds[n % 20]! }, { ID: policyIds[(n + 1) % 20]! }],
        Roles: [{ ID: roleId }],
        TemplatedPolicies: [],
        ServiceIdentities: [],
        NodeIdentities: [],
        Local: false,
        AuthMethod: '',
        CreateTime: new Date().toISOString(),
        Namespace: 'default',
      },
    })
  }
  const resolver = new TokenResolver(state, { datacenter: 'dc1', defaultPolicy: 'deny' })
  const now = Date.now()
  for (const secret of secrets) await resolver.resolve(secret, now)

  const caller = await resolver.resolve(secrets[0], now)
  const checkRounds = 2_000_000
  let allowed = 0
  let started = process.hrtime.bigint()
  for (let n = 0; n < checkRounds; n++) if (caller.permissions.allows('service', 'write', `svc-${n % 20}-x`)) allowed++
  const checkNs = Number(process.hrtime.bigint() - started) / checkRounds

  const resolveRounds = 200_000
  started = process.hrtime.bigint()
  for (let n = 0; n < resolveRounds; n++) {
    const resolved = await resolver.resolve(secrets[n % secrets.length], now)
    if (resolved.permissions.allows('acl', 'read')) allowed++
  }
  const resolveNs = Number(process.hrtime.bigint() - started) / resolveRounds
  console.log(JSON.stringify({ tokens: tokenCount, checkNsPerCall: Math.round(checkNs), cachedResolvePlusCheckNs: Math.round(resolveNs), allowed }))
  console.log(`authorizer check: ${(checkNs / 1000).toFixed(3)} µs; cached token resolution + check: ${(resolveNs / 1000).toFixed(3)} µs per request`)
} finally {
  await state.close()
  await rm(dir, { recursive: true, force: true })
}
