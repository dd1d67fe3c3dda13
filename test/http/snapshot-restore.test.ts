/**
 * Restoring a snapshot (issue 20): PUT /v1/snapshot against a real agent on 127.0.0.1. A restore brings back exactly
 * the saved records (their hashes and CreateIndex; ModifyIndex raised to the restore's beginning, table indexes to its end), wakes
 * blocking queries, and a corrupt, truncated or foreign archive is a 400 naming the fault with nothing changed. The
 * three-node case (followers, a restore during writes) is test/cluster/snapshot-restore.test.ts.
 */
import { expect } from 'chai'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync, gzipSync } from 'node:zlib'
import { ApiError, Client } from '../../src/api/index.js'
import { ARCHIVE_MAGIC } from '../../src/lib/snapshot-archive.js'
import { encode } from '../../src/state/codec.js'
import { startAgent, type AgentProcess } from '../support/agent.js'

async function* chunks(bytes: Buffer): AsyncGenerator<Buffer> {
  for (let at = 0; at < bytes.length; at += 64 * 1024) yield bytes.subarray(at, at + 64 * 1024)
}

/** Every record the API lists, by kind, as [ID, Hash, CreateIndex] sorted: what a restore must bring back. */
async function contents(agent: AgentProcess, query = ''): Promise<Record<string, Array<[string, string, number]>>> {
  const list = async (path: string, id: string): Promise<Array<[string, string, number]>> => {
    const answer = await agent.request('GET', `${path}${query}`)
    expect(answer.status, `${path}: ${answer.text}`).to.equal(200)
    return (answer.body as Array<Record<string, unknown>>)
      .map((record) => [String(record[id]), String(record['Hash'] ?? ''), Number(record['CreateIndex'])] as [string, string, number])
      .sort((a, b) => a[0].localeCompare(b[0]))
  }
  return {
    tokens: await list('/v1/acl/tokens', 'AccessorID'),
    policies: await list('/v1/acl/policies', 'ID'),
    roles: await list('/v1/acl/roles', 'ID'),
    config: await list('/v1/config/service-defaults', 'Name'),
  }
}

describe('snapshot restore', function () {
  this.timeout(60_000)
  let agent: AgentProcess
  let client: Client

  let configDir: string

  before(async () => {
    // Expiry in seconds, for the token that expires between the save and the restore.
    configDir = await mkdtemp(join(tmpdir(), 'warden-restore-config-'))
    const configFile = join(configDir, 'config.json')
    await writeFile(configFile, JSON.stringify({ acl: { token_min_expiration_ttl: '1s', token_max_expiration_ttl: '1h' } }))
    agent = await startAgent({ args: ['--config-file', configFile] })
    client = new Client({ address: agent.httpAddress, token: agent.managementToken })
  })

  after(async () => {
    client?.close()
    await agent?.stop()
    if (configDir !== undefined) await rm(configDir, { recursive: true, force: true })
  })

  const save = async (): Promise<{ archive: Buffer; index: number }> => {
    const parts: Buffer[] = []
    const meta = await client.download('/v1/snapshot', (chunk) => void parts.push(chunk))
    return { archive: Buffer.concat(parts), index: meta.index }
  }
  const restore = (archive: Buffer): Promise<{ index: number }> => client.upload('/v1/snapshot', chunks(archive), { bytes: archive.length })

  it('brings back the saved records after later writes, deletes and changes, with ModifyIndex and indexes raised by the restore', async () => {
    const policy = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'kept', Rules: 'key_prefix "" { policy = "read" }' } })
    const role = await agent.request('PUT', '/v1/acl/role', { body: { Name: 'kept-role', Policies: [{ ID: policy.body.ID }] } })
    const token = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'kept', Roles: [{ ID: role.body.ID }] } })
    expect((await agent.request('PUT', '/v1/config', { body: { Kind: 'service-defaults', Name: 'web', Protocol: 'http' } })).status).to.equal(200)
    const saved = await save()
    const before = await contents(agent)

    const later = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'made after the save' } })
    expect((await agent.request('DELETE', `/v1/acl/token/${token.body.AccessorID}`)).status).to.equal(200)
    expect((await agent.request('PUT', `/v1/acl/policy/${policy.body.ID}`, { body: { Name: 'renamed', Rules: '' } })).status).to.equal(200)
    expect((await agent.request('PUT', '/v1/config', { body: { Kind: 'service-defaults', Name: 'web', Protocol: 'grpc' } })).status).to.equal(200)

    const restored = await restore(saved.archive)
    expect(restored.index).to.be.greaterThan(saved.index)
    expect(await contents(agent)).to.deep.equal(before)
    // The token deleted after the save is back, with its secret, and it still works through its role.
    const back = await agent.request('GET', `/v1/acl/token/${token.body.AccessorID}`)
    expect(back.status).to.equal(200)
    expect(back.body.SecretID).to.equal(token.body.SecretID)
    expect(back.body.CreateIndex).to.equal(token.body.CreateIndex)
    // Written when the restore began, after the save and before it completed.
    expect(back.body.ModifyIndex).to.be.greaterThan(saved.index).and.lessThan(restored.index)
    expect((await agent.request('GET', '/v1/acl/token/self', { token: token.body.SecretID })).status).to.equal(200)
    expect((await agent.request('GET', `/v1/acl/token/${later.body.AccessorID}`)).status).to.equal(404)
    expect((await agent.request('GET', `/v1/acl/token/self`, { token: later.body.SecretID })).status).to.equal(403)
    const entry = await agent.request('GET', '/v1/config/service-defaults/web')
    expect(entry.body.Protocol).to.equal('http')
    expect(entry.body.ModifyIndex).to.equal(back.body.ModifyIndex)
    // Every table's index is the restore's, and a write after it goes on from there.
    const list = await agent.request('GET', '/v1/acl/policies')
    expect(Number(list.headers.get('X-Service-Index'))).to.equal(restored.index)
    const after = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'after-restore', Rules: '' } })
    expect(after.status).to.equal(200)
    expect(after.body.CreateIndex).to.be.greaterThan(restored.index)
  })

  it('treats a restored token that expired since the save as expired at once', async () => {
    const expiring = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'expires soon', ExpirationTTL: '2s' } })
    expect(expiring.status, expiring.text).to.equal(200)
    const { archive } = await save()
    expect((await agent.request('GET', '/v1/acl/token/self', { token: expiring.body.SecretID })).status).to.equal(200)
    await new Promise((resolve) => setTimeout(resolve, 2_500))
    await restore(archive)
    const self = await agent.request('GET', '/v1/acl/token/self', { token: expiring.body.SecretID })
    expect(self.status).to.equal(403)
    expect(self.body.Error).to.match(/ACL not found/)
  })

  it('releases blocking queries at once, with the restore index', async () => {
    const { archive } = await save()
    const first = await agent.request('GET', '/v1/acl/policies')
    const index = Number(first.headers.get('X-Service-Index'))
    const startedAt = Date.now()
    const blocked = agent.request('GET', `/v1/acl/policies?index=${index}&wait=30s`)
    await new Promise((resolve) => setTimeout(resolve, 300))
    const restored = await restore(archive)
    const answer = await blocked
    expect(Date.now() - startedAt).to.be.lessThan(20_000)
    expect(Number(answer.headers.get('X-Service-Index'))).to.equal(restored.index)
  })

  describe('refuses an archive that cannot be restored, with nothing changed', function () {
    let archive: Buffer
    let stateBefore: Awaited<ReturnType<typeof contents>>
    let indexBefore: number

    before(async () => {
      archive = (await save()).archive
      stateBefore = await contents(agent)
      indexBefore = Number((await agent.request('GET', '/v1/acl/policies')).headers.get('X-Service-Index'))
    })

    const refused = async (bytes: Buffer, message: RegExp): Promise<void> => {
      let failure: unknown
      await restore(bytes).catch((error: unknown) => (failure = error))
      expect(failure, 'the restore should fail').to.be.instanceOf(ApiError)
      expect((failure as ApiError).status).to.equal(400)
      expect((failure as ApiError).message).to.match(message)
      expect(await contents(agent)).to.deep.equal(stateBefore)
      expect(Number((await agent.request('GET', '/v1/acl/policies')).headers.get('X-Service-Index'))).to.equal(indexBefore)
      // Writes are not refused: no restore was left open.
      const write = await agent.request('PUT', '/v1/acl/policy', { body: { Name: `probe-${Date.now()}`, Rules: '' } })
      expect(write.status).to.equal(200)
      expect((await agent.request('DELETE', `/v1/acl/policy/${write.body.ID}`)).status).to.equal(200)
      stateBefore = await contents(agent)
      indexBefore = Number((await agent.request('GET', '/v1/acl/policies')).headers.get('X-Service-Index'))
    }

    it('damaged data (a flipped byte inside the records)', async () => {
      const plain = gunzipSync(archive)
      const flipped = Buffer.from(plain)
      flipped[Math.floor(plain.length / 2)]! ^= 0x01
      await refused(gzipSync(flipped), /snapshot: .*(checksum|damaged|decode|frame)/i)
    })

    it('truncated', async () => {
      const plain = gunzipSync(archive)
      await refused(gzipSync(plain.subarray(0, plain.length - 40)), /snapshot: truncated/)
    })

    it('cut inside its compression', async () => {
      await refused(archive.subarray(0, archive.length - 100), /snapshot: /)
    })

    it('of another format version', async () => {
      const meta = encode({ Format: 99, Index: 1, Term: 1, Datacenter: 'dc1', Node: 'x', Time: new Date().toISOString(), Version: '9.9.9' })
      const length = Buffer.alloc(4)
      length.writeUInt32BE(meta.length)
      await refused(gzipSync(Buffer.concat([ARCHIVE_MAGIC, length, meta])), /snapshot: .*format/i)
    })

    it('not an archive at all', async () => {
      await refused(Buffer.from('{"hello": "world"}'), /snapshot: /)
    })
  })

  it('is not carried to another datacenter: ?dc naming one is a 400 naming dc', async () => {
    for (const method of ['GET', 'PUT']) {
      const answer = await agent.request(method, '/v1/snapshot?dc=elsewhere')
      expect(answer.status, method).to.equal(400)
      expect(answer.body.Error).to.match(/^dc: snapshots are saved and restored by a server of their own datacenter/)
    }
  })

  it('a token deleted while its archive uploads is refused 403 acl_not_found once the upload is in, and nothing is restored', async () => {
    const { archive } = await save()
    const after = await agent.request('PUT', '/v1/acl/policy', { body: { Name: `after-save-${Date.now()}` } })
    expect(after.status, after.text).to.equal(200)
    const rules = await agent.request('PUT', '/v1/acl/policy', { body: { Name: `restorer-${Date.now()}`, Rules: 'acl = "write"' } })
    const restorer = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: rules.body.ID }] } })
    expect(restorer.status, restorer.text).to.equal(200)
    let release = (): void => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    const half = Math.floor(archive.length / 2)
    async function* slowly(): AsyncGenerator<Buffer> {
      yield archive.subarray(0, half)
      await gate
      yield archive.subarray(half)
    }
    const upload = client.upload('/v1/snapshot', slowly(), { token: restorer.body.SecretID, bytes: archive.length }).then(
      () => undefined,
      (error: unknown) => error,
    )
    // The server has checked the token and is spooling the first half by now.
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect((await agent.request('DELETE', `/v1/acl/token/${restorer.body.AccessorID}`)).body).to.equal(true)
    release()
    const failure = await upload
    expect((failure as ApiError).status, String(failure)).to.equal(403)
    expect((failure as ApiError).message).to.include('ACL not found')
    // The restore would have removed the policy written after the save.
    expect((await agent.request('GET', `/v1/acl/policy/${after.body.ID}`)).status).to.equal(200)
  })

  it('needs acl:write', async () => {
    const { archive } = await save()
    let failure: unknown
    await client.upload('/v1/snapshot', chunks(archive), { token: null }).catch((error: unknown) => (failure = error))
    expect((failure as ApiError).status).to.equal(403)
  })
})
