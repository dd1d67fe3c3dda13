/**
 * A data dir written by the previous release opens in the new one. The previous release ran a server without peers on
 * its own single-node log: `<data-dir>/log` (LogStore, entries appended synced, term 1) beside `<data-dir>/state`
 * (StateStore), the state applying the log's entries after they were logged, so a crash could leave the last entries
 * logged but not applied. Since one Raft path, the agent upgrades such a dir when it starts (src/agent/replicas.ts):
 * what the state had not applied is applied, and the Raft storage `<data-dir>/raft` starts after it.
 *
 * Method: each case builds an old-layout data dir with the stores the previous release used, as it wrote them (the
 * built-ins with the initial management token, policies, a role, tokens, config entries, an update and a delete), the
 * state having applied all, some or none of the log; then starts a real agent process (dist/cli/main.js: run
 * `npm run build` first) on it and checks over HTTP that the state is that of applying the whole old log, with each
 * record's CreateIndex and ModifyIndex the old log index that wrote it, that `log/` is gone and `raft/` is in place,
 * that new writes work and come after the old indexes, and that a restart keeps everything. An empty old log and a
 * dir without one start as a new server would. An upgrade a crash interrupted (a half-built `raft.upgrading`, or an
 * old `log/` left beside the finished `raft/`) is finished on the next start.
 */
import { expect } from 'chai'
import { randomUUID } from 'node:crypto'
import { access, mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { LevelRaftStorage } from '../../../src/raft/storage/level-storage.js'
import { LogStore } from '../../../src/raft/storage/log-store.js'
import { ANONYMOUS_TOKEN_ID, GLOBAL_MANAGEMENT_POLICY_ID } from '../../../src/state/builtins.js'
import type { Command } from '../../../src/state/commands.js'
import { encodeCommand, StateStore } from '../../../src/state/store.js'
import { CLI, startAgent, type AgentProcess, type ApiResponse } from '../../support/agent.js'
import { buildTokenCreate, commands } from '../../support/state.js'
import { useTempDirs, type TempDirs } from '../../support/temp-dir.js'

const NOW = '2024-05-01T12:00:00Z'

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  )
}

/** A UUID whose last digits say what it is, so a failure names the record. */
function id(kind: string, n: number): string {
  return `${kind}-0000-4000-8000-${n.toString(16).padStart(12, '0')}`
}

/** What the old log holds, and what the state of applying all of it must show. */
interface OldLog {
  secret: string
  entries: Command[]
  /** Index (1-based) of the last entry. */
  lastIndex: number
  policies: Array<{ ID: string; Name: string; Rules: string; CreateIndex: number; ModifyIndex: number }>
  role: { ID: string; Name: string; PolicyID: string; CreateIndex: number }
  tokens: Array<{ AccessorID: string; SecretID: string; Policies: Array<{ ID: string; Name: string }>; Roles: Array<{ ID: string; Name: string }>; CreateIndex: number }>
  deletedToken: string
  /** The token table's index: the old log's last token write (the delete). */
  tokensIndex: number
  configEntries: Array<{ Name: string; Protocol: string; CreateIndex: number }>
}

/** The old log of these tests: a management token, policies, a role, tokens, config entries, an update, a delete. */
function oldLog(): OldLog {
  const secret = randomUUID()
  const management = buildTokenCreate({ AccessorID: id('aaaaaaaa', 1), SecretID: secret, Description: 'Initial Management Token', CreateTime: NOW })
  const kept = buildTokenCreate({ AccessorID: id('aaaaaaaa', 2), SecretID: id('55555555', 2), Description: 'kept', CreateTime: NOW, Policies: [{ ID: id('bbbbbbbb', 1) }] })
  const deleted = buildTokenCreate({ AccessorID: id('aaaaaaaa', 3), SecretID: id('55555555', 3), Description: 'deleted later', CreateTime: NOW })
  const late = buildTokenCreate({ AccessorID: id('aaaaaaaa', 4), SecretID: id('55555555', 4), Description: 'late', CreateTime: NOW, Policies: [{ Name: 'readers' }], Roles: [{ ID: id('cccccccc', 1) }] })
  const policy = (ID: string, Name: string, Rules: string) => ({ ID, Name, Description: '', Rules, Datacenters: [], Namespace: 'default' })
  const entries: Command[] = [
    /* 1 */ commands.init(management),
    /* 2 */ commands.policyCreate(policy(id('bbbbbbbb', 1), 'operators', 'operator = "read"')),
    /* 3 */ commands.tokenCreate(kept),
    /* 4 */ commands.tokenCreate(deleted),
    /* 5 */ commands.configApply({ Kind: 'service-defaults', Name: 'web', Namespace: 'default', Protocol: 'http' }),
    /* 6 */ commands.policyCreate(policy(id('bbbbbbbb', 2), 'readers', 'acl = "read"')),
    /* 7 */ commands.roleCreate({ ID: id('cccccccc', 1), Name: 'reading', Description: '', Policies: [{ ID: id('bbbbbbbb', 2) }], TemplatedPolicies: [], ServiceIdentities: [], NodeIdentities: [], Namespace: 'default' }),
    /* 8 */ commands.tokenCreate(late),
    /* 9 */ commands.policyUpdate(policy(id('bbbbbbbb', 1), 'operators-renamed', 'operator = "write"')),
    /* 10 */ commands.tokenDelete(deleted.AccessorID),
    /* 11 */ commands.configApply({ Kind: 'service-defaults', Name: 'api', Namespace: 'default', Protocol: 'grpc' }),
  ]
  return {
    secret,
    entries,
    lastIndex: entries.length,
    policies: [
      { ID: id('bbbbbbbb', 1), Name: 'operators-renamed', Rules: 'operator = "write"', CreateIndex: 2, ModifyIndex: 9 },
      { ID: id('bbbbbbbb', 2), Name: 'readers', Rules: 'acl = "read"', CreateIndex: 6, ModifyIndex: 6 },
    ],
    role: { ID: id('cccccccc', 1), Name: 'reading', PolicyID: id('bbbbbbbb', 2), CreateIndex: 7 },
    tokens: [
      { AccessorID: management.AccessorID, SecretID: secret, Policies: [{ ID: GLOBAL_MANAGEMENT_POLICY_ID, Name: 'global-management' }], Roles: [], CreateIndex: 1 },
      { AccessorID: kept.AccessorID, SecretID: kept.SecretID, Policies: [{ ID: id('bbbbbbbb', 1), Name: 'operators-renamed' }], Roles: [], CreateIndex: 3 },
      { AccessorID: late.AccessorID, SecretID: late.SecretID, Policies: [{ ID: id('bbbbbbbb', 2), Name: 'readers' }], Roles: [{ ID: id('cccccccc', 1), Name: 'reading' }], CreateIndex: 8 },
    ],
    deletedToken: deleted.AccessorID,
    tokensIndex: 10,
    configEntries: [
      { Name: 'web', Protocol: 'http', CreateIndex: 5 },
      { Name: 'api', Protocol: 'grpc', CreateIndex: 11 },
    ],
  }
}

/**
 * Writes `entries` as the previous release did: appended to `<dataDir>/log` synced, at indexes from 1 in term 1, and
 * the first `applied` of them applied to `<dataDir>/state` (the rest were logged before a crash, not applied).
 */
async function writeOldDataDir(dataDir: string, entries: readonly Command[], applied: number): Promise<void> {
  const log = await LogStore.open(join(dataDir, 'log'))
  const state = await StateStore.open(join(dataDir, 'state'))
  try {
    const logged = entries.map((command, offset) => ({ index: offset + 1, term: 1, data: encodeCommand(command) }))
    await log.append(logged, { sync: true })
    await state.applyEntries(logged.slice(0, applied))
    expect(state.lastApplied).to.equal(applied)
    expect(log.lastIndex).to.equal(entries.length)
  } finally {
    await state.close()
    await log.close()
  }
}

/** Starts an agent on `dataDir` (kept at stop) with `secret` as its initial management token; stopped at cleanup. */
async function agentOn(dirs: TempDirs, dataDir: string, secret: string): Promise<AgentProcess> {
  const agent = await startAgent({ dev: false, dataDir, keepDataDir: true, args: ['--initial-management-token', secret] })
  dirs.defer(() => agent.stop())
  return agent
}

function ok(response: ApiResponse, what: string): any {
  expect(response.status, `${what}: ${response.text}`).to.equal(200)
  return response.body
}

/** The layout after the upgrade: the Raft storage in place, the old log and the build directory gone. */
async function expectNewLayout(dataDir: string): Promise<void> {
  expect(await exists(join(dataDir, 'log')), 'the old log is gone').to.equal(false)
  expect(await exists(join(dataDir, 'raft')), 'the Raft storage exists').to.equal(true)
  expect(await exists(join(dataDir, 'raft.upgrading')), 'nothing is left half-built').to.equal(false)
  expect(await exists(join(dataDir, 'state')), 'the state stays where it was').to.equal(true)
}

/**
 * Every record of the old log, over HTTP, with the indexes the old log gave it; besides them only the records written
 * since (`since`: policy names and token AccessorIDs).
 */
async function expectOldRecords(agent: AgentProcess, old: OldLog, since: { policies: string[]; tokens: string[] } = { policies: [], tokens: [] }): Promise<void> {
  const token = old.secret
  const self = ok(await agent.request('GET', '/v1/acl/token/self', { token }), 'the old management token')
  expect(self).to.deep.include({ AccessorID: old.tokens[0]!.AccessorID, SecretID: old.secret, CreateIndex: 1 })

  for (const policy of old.policies) {
    const read = ok(await agent.request('GET', `/v1/acl/policy/${policy.ID}`, { token }), `policy ${policy.Name}`)
    expect(read).to.deep.include(policy)
  }
  const policyNames = (ok(await agent.request('GET', '/v1/acl/policies', { token }), 'policies') as Array<{ Name: string }>).map((policy) => policy.Name)
  expect(policyNames.sort()).to.deep.equal(['global-management', ...old.policies.map((policy) => policy.Name), ...since.policies].sort())

  const role = ok(await agent.request('GET', `/v1/acl/role/${old.role.ID}`, { token }), 'role')
  expect(role).to.deep.include({ ID: old.role.ID, Name: old.role.Name, CreateIndex: old.role.CreateIndex })
  expect(role.Policies).to.deep.equal([{ ID: old.role.PolicyID, Name: 'readers' }])

  for (const expected of old.tokens) {
    const read = ok(await agent.request('GET', `/v1/acl/token/${expected.AccessorID}`, { token }), `token ${expected.AccessorID}`)
    expect(read).to.deep.include({ AccessorID: expected.AccessorID, SecretID: expected.SecretID, CreateIndex: expected.CreateIndex })
    expect(read.Policies ?? []).to.deep.equal(expected.Policies)
    expect(read.Roles ?? []).to.deep.equal(expected.Roles)
  }
  const list = await agent.request('GET', '/v1/acl/tokens', { token })
  const accessors = (ok(list, 'tokens') as Array<{ AccessorID: string }>).map((listed) => listed.AccessorID)
  // The deleted token stays deleted, and the start created no second management token.
  expect(accessors.sort()).to.deep.equal([ANONYMOUS_TOKEN_ID, ...old.tokens.map((listed) => listed.AccessorID), ...since.tokens].sort())
  if (since.tokens.length === 0) expect(Number(list.headers.get('X-Service-Index')), 'the token table index is the old log\'s').to.equal(old.tokensIndex)
  expect(accessors).to.not.include(old.deletedToken)

  // A token of the unapplied tail works with what its links grant: `readers` may read ACLs.
  const late = old.tokens[2]!
  ok(await agent.request('GET', '/v1/acl/policies', { token: late.SecretID }), 'a token from the old log, reading with its role and policy')

  for (const entry of old.configEntries) {
    const read = ok(await agent.request('GET', `/v1/config/service-defaults/${entry.Name}`, { token }), `config entry ${entry.Name}`)
    expect(read).to.deep.include({ Kind: 'service-defaults', Name: entry.Name, Protocol: entry.Protocol, CreateIndex: entry.CreateIndex })
  }
}

describe('agent: a data dir written by the previous release opens in the new one', function () {
  this.timeout(60_000)
  const dirs = useTempDirs()

  before(async function () {
    if (!(await exists(CLI))) throw new Error(`${CLI} is missing: run \`npm run build\` before this test`)
  })

  for (const [label, appliedOf] of [
    ['the state applied part of the log (a crash after logging the rest)', (last: number) => Math.floor(last / 2)],
    ['the state applied none of the log', () => 0],
    ['the state applied the whole log', (last: number) => last],
  ] as const) {
    it(`${label}: every record of the old log is there, with its indexes; new writes follow; a restart keeps it all`, async function () {
      const dataDir = await dirs.make('warden-upgrade-')
      const old = oldLog()
      await writeOldDataDir(dataDir, old.entries, appliedOf(old.lastIndex))

      const first = await agentOn(dirs, dataDir, old.secret)
      await expectNewLayout(dataDir)
      await expectOldRecords(first, old)
      const written = ok(await first.request('PUT', '/v1/acl/policy', { token: old.secret, body: { Name: 'after-upgrade', Rules: 'acl = "read"' } }), 'a new write')
      expect(written.CreateIndex, 'a new write comes after the old log').to.be.above(old.lastIndex)
      const newToken = ok(await first.request('PUT', '/v1/acl/token', { token: old.secret, body: { Description: 'new', Policies: [{ Name: 'after-upgrade' }] } }), 'a new token')
      expect(await first.stop(), 'a clean stop').to.equal(0)

      const second = await agentOn(dirs, dataDir, old.secret)
      await expectNewLayout(dataDir)
      const policy = ok(await second.request('GET', `/v1/acl/policy/${written.ID}`, { token: old.secret }), 'the new policy after the restart')
      expect(policy).to.deep.include({ Name: 'after-upgrade', CreateIndex: written.CreateIndex, ModifyIndex: written.ModifyIndex })
      const readToken = ok(await second.request('GET', `/v1/acl/token/${newToken.AccessorID}`, { token: old.secret }), 'the new token after the restart')
      expect(readToken).to.deep.include({ SecretID: newToken.SecretID, CreateIndex: newToken.CreateIndex })
      await expectOldRecords(second, old, { policies: ['after-upgrade'], tokens: [newToken.AccessorID] })
      const again = ok(await second.request('PUT', '/v1/acl/policy', { token: old.secret, body: { Name: 'after-restart' } }), 'a write after the restart')
      expect(again.CreateIndex).to.be.above(newToken.ModifyIndex)
      expect(await second.stop(), 'a clean stop').to.equal(0)
    })
  }

  it('an upgrade a crash interrupted is finished on the next start, whether it stopped before or after the switch', async function () {
    const dataDir = await dirs.make('warden-upgrade-interrupted-')
    const old = oldLog()
    await writeOldDataDir(dataDir, old.entries, 3)
    // Before the switch: a half-built Raft storage, here one no start of this node could use (another node's).
    const building = await LevelRaftStorage.open(join(dataDir, 'raft.upgrading'))
    await building.saveMembershipRecord({ voters: ['another-node'], voteFromIndex: 0 })
    await building.close()

    const first = await agentOn(dirs, dataDir, old.secret)
    await expectNewLayout(dataDir)
    await expectOldRecords(first, old)
    expect(await first.stop(), 'a clean stop').to.equal(0)

    // After the switch, before the old log was removed: `raft/` in place, and the old log still beside it.
    const log = await LogStore.open(join(dataDir, 'log'))
    await log.append(
      old.entries.map((command, offset) => ({ index: offset + 1, term: 1, data: encodeCommand(command) })),
      { sync: true },
    )
    await log.close()
    const second = await agentOn(dirs, dataDir, old.secret)
    await expectNewLayout(dataDir)
    await expectOldRecords(second, old)
    expect(await second.stop(), 'a clean stop').to.equal(0)
  })

  for (const [label, prepare] of [
    [
      'an empty old log beside an empty state',
      async (dataDir: string) => {
        await writeOldDataDir(dataDir, [], 0)
        expect(await exists(join(dataDir, 'log'))).to.equal(true)
      },
    ],
    ['a data dir without an old log', async (dataDir: string) => void (await mkdir(dataDir, { recursive: true }))],
  ] as const) {
    it(`${label}: starts as a new server, with the built-ins and the initial management token; a restart keeps its writes`, async function () {
      const dataDir = await dirs.make('warden-upgrade-empty-')
      await prepare(dataDir)
      const secret = randomUUID()

      const first = await agentOn(dirs, dataDir, secret)
      await expectNewLayout(dataDir)
      const self = ok(await first.request('GET', '/v1/acl/token/self', { token: secret }), 'the initial management token')
      expect(self.Policies).to.deep.equal([{ ID: GLOBAL_MANAGEMENT_POLICY_ID, Name: 'global-management' }])
      const written = ok(await first.request('PUT', '/v1/acl/policy', { token: secret, body: { Name: 'first-write' } }), 'a write')
      expect(await first.stop(), 'a clean stop').to.equal(0)

      const second = await agentOn(dirs, dataDir, secret)
      await expectNewLayout(dataDir)
      const read = ok(await second.request('GET', `/v1/acl/policy/${written.ID}`, { token: secret }), 'the write after the restart')
      expect(read).to.deep.include({ Name: 'first-write', CreateIndex: written.CreateIndex, ModifyIndex: written.ModifyIndex })
      const tokens = ok(await second.request('GET', '/v1/acl/tokens', { token: secret }), 'tokens') as Array<{ SecretID?: string; AccessorID: string }>
      expect(tokens.map((token) => token.AccessorID)).to.have.length(2)
      expect(await second.stop(), 'a clean stop').to.equal(0)
    })
  }
})
