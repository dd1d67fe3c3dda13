/**
 * Replication rounds with real agents (a single-server primary dc1 and a single-server secondary dc2 on 127.0.0.1):
 * lists too large for one forwarded answer replicated in pages, and defects a review found in the first paged version: a secondary's first round after a restart answered
 * with a delta and deleting everything unchanged, and pages sized by their stored bytes going over what a forwarded
 * answer carries.
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { eventually } from '../cluster/eventually.js'
import { startAgent, type AgentProcess } from '../support/agent.js'

describe('replication rounds between two datacenters', function () {
  this.timeout(120_000)
  const key = randomBytes(32).toString('base64')
  const MANAGEMENT = 'a1b2c3d4-0000-4000-8000-00000000beef'
  const agents: AgentProcess[] = []
  const dirs: string[] = []

  afterEach(async () => {
    await Promise.all(agents.splice(0).map((agent) => agent.stop()))
    await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })))
  })

  async function primary(): Promise<AgentProcess> {
    const dc1 = await startAgent({ args: ['--datacenter', 'dc1', '--node-name', 'dc1-s1'], env: { WARDEN_CLUSTER_KEY: key, WARDEN_INITIAL_MANAGEMENT_TOKEN: MANAGEMENT } })
    agents.push(dc1)
    return dc1
  }

  async function secondary(dc1: AgentProcess, dataDir?: string, replicationToken = MANAGEMENT): Promise<AgentProcess> {
    const dc2 = await startAgent({
      args: ['--datacenter', 'dc2', '--primary-datacenter', 'dc1', '--node-name', 'dc2-s1', '--join-wan', dc1.clusterAddress],
      env: { WARDEN_CLUSTER_KEY: key, WARDEN_ACL_REPLICATION_TOKEN: replicationToken },
      ...(dataDir === undefined ? {} : { dataDir, keepDataDir: true }),
    })
    agents.push(dc2)
    return dc2
  }

  const status = async (agent: AgentProcess, path: string): Promise<number> => (await agent.request('GET', path, { token: MANAGEMENT })).status

  it("a secondary's first round after its restart (a new leadership) keeps every record the primary still has", async () => {
    const dc1 = await primary()
    const dataDir = await mkdtemp(join(tmpdir(), 'warden-repl-dc2-'))
    dirs.push(dataDir)
    let dc2 = await secondary(dc1, dataDir)
    const policy = await dc1.request('PUT', '/v1/acl/policy', { token: MANAGEMENT, body: { Name: 'kept-policy', Rules: '' } })
    const token = await dc1.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Description: 'kept-token' } })
    expect((await dc1.request('PUT', '/v1/config', { token: MANAGEMENT, body: { Kind: 'service-defaults', Name: 'kept-entry', Protocol: 'http' } })).status).to.equal(200)
    const held = {
      policy: `/v1/acl/policy/${policy.body.ID}`,
      token: `/v1/acl/token/${token.body.AccessorID}`,
      entry: '/v1/config/service-defaults/kept-entry',
    }
    for (const [what, path] of Object.entries(held)) await eventually(async () => (await status(dc2, path)) === 200, `the ${what} replicated`)

    // The secondary restarts (or its leadership moves): replicated > 0, and the primary's change feed reaches back.
    agents.splice(agents.indexOf(dc2), 1)
    await dc2.stop()
    dc2 = await secondary(dc1, dataDir)
    // A change after the restart, to know that rounds ran in every stream.
    const later = await dc1.request('PUT', '/v1/acl/policy', { token: MANAGEMENT, body: { Name: 'later-policy', Rules: '' } })
    const laterToken = await dc1.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Description: 'later-token' } })
    expect((await dc1.request('PUT', '/v1/config', { token: MANAGEMENT, body: { Kind: 'service-defaults', Name: 'later-entry', Protocol: 'http' } })).status).to.equal(200)
    await eventually(async () => (await status(dc2, `/v1/acl/policy/${later.body.ID}`)) === 200, 'the later policy replicated')
    await eventually(async () => (await status(dc2, `/v1/acl/token/${laterToken.body.AccessorID}`)) === 200, 'the later token replicated')
    await eventually(async () => (await status(dc2, '/v1/config/service-defaults/later-entry')) === 200, 'the later entry replicated')

    // Nothing was deleted at the primary: the secondary still holds all of it.
    const missing: string[] = []
    for (const [what, path] of Object.entries(held)) if ((await status(dc2, path)) !== 200) missing.push(what)
    expect(missing, 'records the primary still has, deleted in the secondary').to.deep.equal([])
  })

  /**
   * A primary holding `count` global tokens with the descriptions `description(n)`, then a secondary started empty:
   * resolves once the secondary holds every one with the primary's Hash and its replication reports no error.
   */
  async function largeTokensReplicate(count: number, description: (n: number) => string): Promise<{ dc1: AgentProcess; dc2: AgentProcess }> {
    const dc1 = await primary()
    const made: Array<{ AccessorID: string; Hash: string }> = []
    for (let n = 0; n < count; n++) {
      const created = await dc1.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Description: description(n) } })
      expect(created.status, created.text.slice(0, 300)).to.equal(200)
      made.push(created.body)
    }
    const dc2 = await secondary(dc1)
    const heldHere = async (): Promise<number> => {
      let held = 0
      for (const token of made) if ((await dc2.request('GET', `/v1/acl/token/${token.AccessorID}`, { token: MANAGEMENT })).body?.Hash === token.Hash) held += 1
      return held
    }
    await eventually(async () => (await heldHere()) === made.length, 'every token replicated with its Hash', 60_000)
    expect((await dc2.request('GET', '/v1/acl/replication', { token: null })).body.LastErrorMessage).to.equal('')
    return { dc1, dc2 }
  }

  it('replicates in pages what one forwarded answer (6 MiB) could not carry, and serves its pages to other datacenters only', async () => {
    // Fourteen global tokens of about 450 KB each: their list is over 6 MiB, more than a forwarded answer carries.
    const { dc1 } = await largeTokensReplicate(14, (n) => `${n} ${'x'.repeat(450_000)}`)
    // The pages are warden's own: over HTTP, with any token, the endpoint does not exist.
    const direct = await dc1.request('GET', '/v1/internal/acl/replication/tokens', { token: MANAGEMENT })
    expect(direct.status).to.equal(404)
    expect(direct.body.Error).to.match(/WAN links only/)
  })

  it('replicates global tokens whose JSON is much larger than their stored form (control characters), within 6 MiB pages', async () => {
    // 170,000 U+0001 characters: about 170 KB stored (msgpack), about 1 MB as JSON (each is written \u0001).
    await largeTokensReplicate(8, (n) => `${n} ${'\u0001'.repeat(170_000)}`)
  })

  it("a client's ?dc never reaches the pages replication reads: they are served to servers only", async () => {
    const dc1 = await primary()
    const dc2 = await secondary(dc1)
    await eventually(async () => (await status(dc2, '/v1/acl/token/self')) === 200, 'dc2 knows the management token')
    for (const path of ['/v1/internal/acl/replication/tokens?dc=dc1', '/v1/internal/acl/replication/policies?dc=dc1&mode=delta&since=1']) {
      const answer = await dc2.request('GET', path, { token: MANAGEMENT })
      expect(answer.status, path).to.equal(404)
      expect(answer.text).to.not.include('SecretID')
    }
  })

  it('a replication token that may not read tokens is reported in the status, and retried with backoff, not in a tight loop', async () => {
    const dc1 = await primary()
    const reader = await dc1.request('PUT', '/v1/acl/policy', { token: MANAGEMENT, body: { Name: 'acl-reader', Rules: 'acl = "read"' } })
    const token = await dc1.request('PUT', '/v1/acl/token', { token: MANAGEMENT, body: { Policies: [{ ID: reader.body.ID }] } })
    const dc2 = await secondary(dc1, undefined, token.body.SecretID)
    const status = async (): Promise<{ LastErrorMessage: string; LastError: string; ReplicatedIndex: number }> => (await dc2.request('GET', '/v1/acl/replication', { token: null })).body
    await eventually(async () => /acl:write/.test((await status()).LastErrorMessage), 'the status names the missing permission')
    expect((await status()).LastError).to.not.equal('0001-01-01T00:00:00Z')
    // Policies need acl:read only: they replicate.
    await eventually(async () => (await status()).ReplicatedIndex > 0, 'the policies replicated')
    const failed = async (): Promise<number> => {
      const metrics = (await dc2.request('GET', '/v1/agent/metrics', { token: MANAGEMENT })).body as { Counters: Array<{ Name: string; Count: number; Labels: Record<string, string> }> }
      return metrics.Counters.find((counter) => counter.Name === 'warden.replication.errors' && counter.Labels['stream'] === 'tokens')?.Count ?? 0
    }
    const before = await failed()
    expect(before).to.be.at.least(1)
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    // Backing off from 1 s and doubling: a few more rounds in 3 s at most, never hundreds.
    expect((await failed()) - before).to.be.at.most(3)
  })
})
