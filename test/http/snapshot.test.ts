/**
 * Saving a snapshot (issue 20, first step): GET /v1/snapshot streams the state as an archive, and `warden snapshot
 * save` / `inspect` write and read it, against a real agent on 127.0.0.1. What the archive holds is checked against
 * the records written; the permission (acl:write), `?stale`, a save during writes, and a save that leaves no
 * half-written file behind when refused.
 */
import { expect } from 'chai'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { Client } from '../../src/api/index.js'
import { readArchive } from '../../src/lib/snapshot-archive.js'
import { runWarden } from '../cli/run.js'
import { startAgent, type AgentProcess } from '../support/agent.js'

async function* once(bytes: Buffer): AsyncGenerator<Buffer> {
  yield bytes
}

describe('snapshot save and inspect', function () {
  this.timeout(60_000)
  let agent: AgentProcess
  let dir: string

  before(async () => {
    agent = await startAgent()
    dir = await mkdtemp(join(tmpdir(), 'warden-snapshot-'))
    for (let n = 0; n < 5; n++) expect((await agent.request('PUT', '/v1/acl/policy', { body: { Name: `saved-${n}`, Rules: '' } })).status).to.equal(200)
    for (let n = 0; n < 3; n++) expect((await agent.request('PUT', '/v1/acl/token', { body: { Description: `saved-${n}` } })).status).to.equal(200)
  })

  after(async () => {
    await agent?.stop()
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  const count = async (path: string): Promise<number> => ((await agent.request('GET', path)).body as unknown[]).length

  it('streams the state as an archive at the index it names, every policy and token in it', async () => {
    const client = new Client({ address: agent.httpAddress, token: agent.managementToken })
    try {
      const chunks: Buffer[] = []
      const answered = await client.download('/v1/snapshot', (chunk) => void chunks.push(chunk))
      const bytes = gunzipSync(Buffer.concat(chunks))
      const keys: string[] = []
      const { meta, end } = await readArchive(once(bytes), () => undefined, (pairs) => void keys.push(...pairs.map(([key]) => key)))
      expect(meta.Index).to.equal(answered.index)
      expect(meta.Datacenter).to.equal('dc1')
      expect(end.Records['policy']).to.equal(await count('/v1/acl/policies'))
      expect(end.Records['token']).to.equal(await count('/v1/acl/tokens'))
      expect(keys.filter((key) => key.startsWith('r\u0000policy\u0000')).length).to.equal(6)
      // ?stale: this node's state as it is; the same records here, with one node.
      let staleBytes = 0
      const stale = await client.download('/v1/snapshot', (chunk) => void (staleBytes += chunk.length), { consistency: 'stale' })
      expect(stale.index).to.equal(answered.index)
      expect(staleBytes).to.be.greaterThan(0)
    } finally {
      client.close()
    }
  })

  it('needs acl:write: the anonymous token and a read-only token are refused', async () => {
    expect((await agent.request('GET', '/v1/snapshot', { token: null })).status).to.equal(403)
    const policy = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'acl-reader', Rules: 'acl = "read"' } })
    const reader = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.body.ID }] } })
    const refused = await agent.request('GET', '/v1/snapshot', { token: reader.body.SecretID })
    expect(refused.status).to.equal(403)
    expect(refused.body.Error).to.match(/acl:write/)
  })

  it('warden snapshot save writes a verified archive, and inspect shows its index and the records of each table', async () => {
    const file = join(dir, 'backup.snap')
    const saved = await runWarden(['snapshot', 'save', '-http-addr', agent.httpAddress, '-token', agent.managementToken, file])
    expect(saved.code, saved.stderr).to.equal(0)
    const index = Number(/Saved and verified snapshot to index (\d+)/.exec(saved.stdout)?.[1])
    expect(index).to.be.greaterThan(0)
    const inspected = await runWarden(['snapshot', 'inspect', '-format', 'json', file])
    expect(inspected.code, inspected.stderr).to.equal(0)
    const report = JSON.parse(inspected.stdout) as { Index: number; Datacenter: string; Size: number; Records: Record<string, number> }
    expect(report.Index).to.equal(index)
    expect(report.Records['policy']).to.equal(await count('/v1/acl/policies'))
    expect(report.Records['token']).to.equal(await count('/v1/acl/tokens'))
    expect(report.Size).to.equal((await readFile(file)).length)
    const pretty = await runWarden(['snapshot', 'inspect', file])
    expect(pretty.stdout).to.match(/^Index\s+\d+$/m)
    expect(pretty.stdout).to.match(/^policy\s+\d+$/m)
  })

  it('a save refused by the server leaves no file behind, and inspect refuses what is not a whole archive', async () => {
    const file = join(dir, 'refused.snap')
    const refused = await runWarden(['snapshot', 'save', '-http-addr', agent.httpAddress, file])
    expect(refused.code).to.equal(1)
    expect(refused.stderr).to.match(/Error saving snapshot: .*403/)
    expect((await readdir(dir)).filter((name) => name.startsWith('refused'))).to.deep.equal([])
    const whole = await readFile(join(dir, 'backup.snap'))
    const cut = join(dir, 'cut.snap')
    await writeFile(cut, whole.subarray(0, Math.floor(whole.length / 2)))
    const inspected = await runWarden(['snapshot', 'inspect', cut])
    expect(inspected.code).to.equal(1)
    expect(inspected.stderr).to.match(/^Error verifying snapshot file: /)
  })

  it('saves while writes go on: a whole archive, holding what was written before it', async () => {
    let writing = true
    const writes = (async () => {
      let n = 0
      while (writing) await agent.request('PUT', '/v1/acl/policy', { body: { Name: `during-${n++}`, Rules: '' } })
      return n
    })()
    const file = join(dir, 'during.snap')
    try {
      const saved = await runWarden(['snapshot', 'save', '-http-addr', agent.httpAddress, '-token', agent.managementToken, file])
      expect(saved.code, saved.stderr).to.equal(0)
    } finally {
      writing = false
    }
    expect(await writes).to.be.greaterThan(0)
    const inspected = await runWarden(['snapshot', 'inspect', '-format', 'json', file])
    expect(inspected.code, inspected.stderr).to.equal(0)
    expect(JSON.parse(inspected.stdout).Records['policy']).to.be.at.least(7)
  })
})
