/**
 * The cloud link over HTTP, against the contract (api.md, "Link") and warden's readings: PUT, GET and DELETE on
 * `/api/cloud/v2/link/global` (no /v1), the envelope, the resource ID format, `?version` as a compare-and-set (409),
 * the permissions (operator:read; operator:write and acl:write) and `<hidden>` secrets; then the link controller's
 * outcomes, first without a management plane (portal URL built from the resource ID), then against a management-plane
 * double on loopback (success, 401, 403, 404, other errors, transient errors retried); and last the precedence of a
 * server's `cloud` settings over an API-written link at restart.
 *
 * Each describe runs one agent. The controller's status arrives shortly after a write, so tests poll GET until the
 * status observes the generation they wrote (bounded by a deadline).
 */
import { expect } from 'chai'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startAgent, type AgentProcess, type ApiResponse } from '../support/agent.js'
import { expectErrorShape, secretWithRules, sleep } from '../support/api.js'

const PATH = '/api/cloud/v2/link/global'
const STATUS_KEY = 'service.io/cloud/link'

function resourceId(cluster: string, organization = 'org-1', project = 'proj-1'): string {
  return `organization/${organization}/project/${project}/service.global-network-manager.cluster/${cluster}`
}

function linkBody(cluster: string, fields: Record<string, unknown> = {}): { data: Record<string, unknown> } {
  return { data: { resourceId: resourceId(cluster), clientId: 'client-ok', clientSecret: 'right-secret', ...fields } }
}

/** Polls GET until the status observes `generation`; returns that read. */
async function settled(agent: AgentProcess, generation: string, deadlineMs = 8_000): Promise<ApiResponse> {
  const deadline = Date.now() + deadlineMs
  for (;;) {
    const response = await agent.request('GET', PATH)
    if (response.status === 200 && response.body.status?.[STATUS_KEY]?.observedGeneration === generation) return response
    if (Date.now() > deadline) throw new Error(`the link status did not observe generation ${generation}: ${response.text}`)
    await sleep(50)
  }
}

function condition(response: ApiResponse): { type: string; state: string; reason: string; message: string } {
  const conditions = response.body.status[STATUS_KEY].conditions
  expect(conditions).to.have.length(1)
  return conditions[0]
}

describe('cloud link: endpoints and the controller without a management plane', () => {
  let agent: AgentProcess
  before(async () => {
    agent = await startAgent()
  })
  after(async () => {
    await agent.stop()
  })

  it('GET before any link is a 404', async () => {
    expectErrorShape(await agent.request('GET', PATH), 404, 'not_found')
  })

  it('PUT answers the envelope: data, generation, id, numeric version', async () => {
    const response = await agent.request('PUT', PATH, { body: linkBody('cluster-a') })
    expect(response.status, response.text).to.equal(200)
    expect(response.body.data).to.deep.equal({ resourceId: resourceId('cluster-a'), clientId: 'client-ok', clientSecret: 'right-secret' })
    expect(response.body.generation).to.be.a('string').that.is.not.empty
    expect(response.body.id).to.deep.include({ name: 'global', tenancy: { peerName: 'local' }, type: { group: 'cloud', groupVersion: 'v2', kind: 'Link' } })
    expect(response.body.id.uid).to.be.a('string').that.is.not.empty
    expect(response.body.version).to.match(/^[1-9][0-9]*$/)
  })

  it('records the linked condition, the read-write access level and a portal URL built from the resource ID', async () => {
    const written = await agent.request('PUT', PATH, { body: { data: { resourceId: resourceId('cluster-b', 'org-9', 'proj-7'), clientId: 'c', clientSecret: 's' } } })
    const read = await settled(agent, written.body.generation)
    expect(condition(read)).to.deep.equal({
      type: 'linked',
      state: 'STATE_TRUE',
      reason: 'SUCCESS',
      message: `Successfully linked to cluster '${resourceId('cluster-b', 'org-9', 'proj-7')}'`,
    })
    expect(read.body.data).to.deep.equal({
      resourceId: resourceId('cluster-b', 'org-9', 'proj-7'),
      clientId: 'c',
      clientSecret: 's',
      accessLevel: 'ACCESS_LEVEL_GLOBAL_READ_WRITE',
      cloudClusterUrl: 'https://portal.cloud.service.io/organization/org-9/project/proj-7/clusters/cluster-b',
    })
    const status = read.body.status[STATUS_KEY]
    expect(Date.parse(status.updatedAt)).to.be.closeTo(Date.now(), 60_000)
    expect(read.body.generation).to.equal(written.body.generation)
    // The status write raised the version; uid and generation stay.
    expect(Number(read.body.version)).to.be.above(Number(written.body.version))
    expect(read.body.id.uid).to.equal(written.body.id.uid)
  })

  it('raises the version on every write, keeps the uid and takes a new generation', async () => {
    const first = await agent.request('PUT', PATH, { body: linkBody('cluster-c') })
    const second = await agent.request('PUT', PATH, { body: linkBody('cluster-c') })
    expect(Number(second.body.version)).to.be.above(Number(first.body.version))
    expect(second.body.id.uid).to.equal(first.body.id.uid)
    expect(second.body.generation).to.not.equal(first.body.generation)
  })

  it('?version=N is a compare-and-set: 409 conflict on mismatch, success on match', async () => {
    const current = await settled(agent, (await agent.request('PUT', PATH, { body: linkBody('cluster-d') })).body.generation)
    const version = Number(current.body.version)
    const stale = await agent.request('PUT', `${PATH}?version=${version - 1}`, { body: linkBody('cluster-e') })
    expectErrorShape(stale, 409, 'conflict', 'version')
    expect((await agent.request('GET', PATH)).body.data.resourceId).to.equal(resourceId('cluster-d'))
    const matched = await agent.request('PUT', `${PATH}?version=${version}`, { body: linkBody('cluster-e') })
    expect(matched.status, matched.text).to.equal(200)
    expect(matched.body.data.resourceId).to.equal(resourceId('cluster-e'))
    // The write's answer has no status: the one stored is still cluster-d's (its generation), not a verdict on these.
    expect(matched.body).to.have.all.keys('data', 'generation', 'id', 'version')
    expectErrorShape(await agent.request('PUT', `${PATH}?version=abc`, { body: linkBody('cluster-e') }), 400, 'invalid_input', 'version')
  })

  it('requires resourceId, clientId and clientSecret as strings', async () => {
    expectErrorShape(await agent.request('PUT', PATH, { body: {} }), 400, 'invalid_input', 'data')
    for (const field of ['resourceId', 'clientId', 'clientSecret']) {
      const body = linkBody('cluster-f')
      delete body.data[field]
      expectErrorShape(await agent.request('PUT', PATH, { body }), 400, 'invalid_input', `data.${field}`)
      expectErrorShape(await agent.request('PUT', PATH, { body: linkBody('cluster-f', { [field]: 5 }) }), 400, 'invalid_input', `data.${field}`)
    }
    expectErrorShape(await agent.request('PUT', PATH, { body: linkBody('cluster-f', { extra: 1 }) }), 400, 'invalid_input', 'data.extra')
    expectErrorShape(await agent.request('PUT', PATH, { body: { ...linkBody('cluster-f'), id: { name: 'other' } } }), 400, 'invalid_input', 'id.name')
  })

  it('checks the resource ID format and says which part is wrong', async () => {
    const cases: Array<[string, string]> = [
      ['organisation/o/project/p/service.global-network-manager.cluster/c', 'part 1 must be "organization"'],
      ['organization/o/projects/p/service.global-network-manager.cluster/c', 'part 3 must be "project"'],
      ['organization/o/project/p/cluster/c', 'part 5 must be "service.global-network-manager.cluster"'],
      ['organization//project/p/service.global-network-manager.cluster/c', 'org_id'],
      ['organization/o/project/p/service.global-network-manager.cluster/', 'cluster_name'],
      ['organization/o/project/p', 'found 4 parts'],
    ]
    for (const [value, expected] of cases) {
      const response = await agent.request('PUT', PATH, { body: linkBody('x', { resourceId: value }) })
      expectErrorShape(response, 400, 'invalid_input', 'data.resourceId')
      expect(response.body.Error).to.include(expected)
    }
  })

  it('needs operator:read to read, and shows clientSecret only to callers with acl:write', async () => {
    await agent.request('PUT', PATH, { body: linkBody('cluster-g') })
    const nothing = await secretWithRules(agent, 'service "web" { policy = "read" }')
    const denied = await agent.request('GET', PATH, { token: nothing })
    expectErrorShape(denied, 403, 'permission_denied')
    expect(denied.body.Error).to.include('operator:read')
    const reader = await secretWithRules(agent, 'operator = "read"')
    const hidden = await agent.request('GET', PATH, { token: reader })
    expect(hidden.status, hidden.text).to.equal(200)
    expect(hidden.body.data.clientSecret).to.equal('<hidden>')
    expect(hidden.body.data.clientId).to.equal('client-ok')
    const aclWriter = await secretWithRules(agent, 'operator = "read"\nacl = "write"')
    expect((await agent.request('GET', PATH, { token: aclWriter })).body.data.clientSecret).to.equal('right-secret')
  })

  it('needs operator:write and acl:write to write and delete', async () => {
    const operatorOnly = await secretWithRules(agent, 'operator = "write"')
    const noAcl = await agent.request('PUT', PATH, { body: linkBody('cluster-h'), token: operatorOnly })
    expectErrorShape(noAcl, 403, 'permission_denied')
    expect(noAcl.body.Error).to.include('acl:write')
    const aclOnly = await secretWithRules(agent, 'acl = "write"')
    const noOperator = await agent.request('DELETE', PATH, { token: aclOnly })
    expectErrorShape(noOperator, 403, 'permission_denied')
    expect(noOperator.body.Error).to.include('operator:write')
    const both = await secretWithRules(agent, 'acl = "write"\noperator = "write"')
    expect((await agent.request('PUT', PATH, { body: linkBody('cluster-h'), token: both })).status).to.equal(200)
  })

  it('reads in stale and consistent modes', async () => {
    await agent.request('PUT', PATH, { body: linkBody('cluster-i') })
    expect((await agent.request('GET', `${PATH}?consistent`)).headers.get('x-service-effective-consistency')).to.equal('consistent')
    expect((await agent.request('GET', `${PATH}?stale`)).headers.get('x-service-effective-consistency')).to.equal('stale')
  })

  it('DELETE answers {} and a GET after it is a 404; deleting again also answers {}', async () => {
    await agent.request('PUT', PATH, { body: linkBody('cluster-j') })
    const deleted = await agent.request('DELETE', PATH)
    expect(deleted.status).to.equal(200)
    expect(deleted.body).to.deep.equal({})
    expectErrorShape(await agent.request('GET', PATH), 404, 'not_found')
    expect((await agent.request('DELETE', PATH)).body).to.deep.equal({})
  })

  it('is served without /v1 only', async () => {
    expect((await agent.request('GET', `/v1${PATH}`)).status).to.equal(404)
  })

  it('never logs the client secret', async () => {
    await agent.request('PUT', PATH, { body: linkBody('cluster-k', { clientSecret: 'very-secret-value-123' }) })
    await sleep(200)
    expect(agent.logs.join('\n')).to.not.include('very-secret-value-123')
  })
})

interface Double {
  url: string
  requests: Array<{ method: string; path: string; body: string; authorization: string | undefined }>
  close(): Promise<void>
}

/**
 * A management-plane double. Credentials: client_secret must be `right-secret` (else 401); client_id `client-500`
 * always gets 500; `client-flaky` gets 503 on its first token request. Clusters are answered by name: `forbidden`
 * 403, `missing` 404, `teapot` 418, `slow-fail` 502 always, anything else 200 with a read-only access level.
 */
async function startDouble(): Promise<Double> {
  const requests: Double['requests'] = []
  let flakyCount = 0
  const readBody = async (request: IncomingMessage): Promise<string> => {
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    return Buffer.concat(chunks).toString('utf8')
  }
  const server: Server = createServer((request, response) => {
    void (async () => {
      const body = await readBody(request)
      const path = request.url ?? ''
      requests.push({ method: request.method ?? '', path, body, authorization: request.headers.authorization })
      const answer = (status: number, value: unknown): void => {
        response.writeHead(status, { 'Content-Type': 'application/json' })
        response.end(JSON.stringify(value))
      }
      if (request.method === 'POST' && path === '/oauth2/token') {
        const form = new URLSearchParams(body)
        if (request.headers['content-type'] !== 'application/x-www-form-urlencoded' || form.get('grant_type') !== 'client_credentials') {
          return answer(400, { error: 'unsupported_grant_type' })
        }
        if (form.get('client_id') === 'client-500') return answer(500, { error: 'boom' })
        if (form.get('client_id') === 'client-flaky' && flakyCount++ === 0) return answer(503, { error: 'busy' })
        if (form.get('client_secret') !== 'right-secret') return answer(401, { error: 'invalid_client' })
        return answer(200, { access_token: `token-for-${form.get('client_id')}`, token_type: 'Bearer' })
      }
      const cluster = /^\/clusters\/(organization\/[^/]+\/project\/[^/]+\/service\.global-network-manager\.cluster\/([^/]+))$/.exec(path)
      if (request.method === 'GET' && cluster !== null) {
        if (!(request.headers.authorization ?? '').startsWith('Bearer token-for-')) return answer(401, { error: 'no token' })
        const name = cluster[2]
        if (name === 'forbidden') return answer(403, { error: 'forbidden' })
        if (name === 'missing') return answer(404, { error: 'not found' })
        if (name === 'teapot') return answer(418, { error: 'teapot' })
        if (name === 'slow-fail') return answer(502, { error: 'bad gateway' })
        return answer(200, { accessLevel: 'ACCESS_LEVEL_GLOBAL_READ_ONLY', clusterUrl: `https://portal.example/${name}` })
      }
      answer(404, { error: 'no route' })
    })()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

describe('cloud link: the controller against a management plane', () => {
  let agent: AgentProcess
  let double: Double
  let configDir: string

  before(async () => {
    double = await startDouble()
    configDir = await mkdtemp(join(tmpdir(), 'warden-link-config-'))
    const configFile = join(configDir, 'config.json')
    await writeFile(configFile, JSON.stringify({ cloud: { management_plane_url: double.url } }))
    agent = await startAgent({ args: ['--config-file', configFile] })
  })
  after(async () => {
    await agent.stop()
    await double.close()
    await rm(configDir, { recursive: true, force: true })
  })

  async function outcome(body: { data: Record<string, unknown> }): Promise<ApiResponse> {
    const written = await agent.request('PUT', PATH, { body })
    expect(written.status, written.text).to.equal(200)
    return settled(agent, written.body.generation)
  }

  it('on success records linked STATE_TRUE SUCCESS with the access level and cluster URL it was given', async () => {
    const read = await outcome(linkBody('good'))
    expect(condition(read)).to.deep.include({ type: 'linked', state: 'STATE_TRUE', reason: 'SUCCESS' })
    expect(read.body.data).to.include({ accessLevel: 'ACCESS_LEVEL_GLOBAL_READ_ONLY', cloudClusterUrl: 'https://portal.example/good' })
    const token = double.requests.filter((request) => request.path === '/oauth2/token').pop()
    expect(new URLSearchParams(token?.body).get('client_id')).to.equal('client-ok')
    const cluster = double.requests.filter((request) => request.path.startsWith('/clusters/')).pop()
    expect(cluster?.authorization).to.equal('Bearer token-for-client-ok')
    expect(cluster?.path).to.equal(`/clusters/${resourceId('good')}`)
  })

  it('a 401 gives STATE_FALSE UNAUTHORIZED with a message about the client credentials', async () => {
    const read = await outcome(linkBody('good', { clientSecret: 'wrong-secret' }))
    expect(condition(read)).to.deep.include({ type: 'linked', state: 'STATE_FALSE', reason: 'UNAUTHORIZED' })
    expect(condition(read).message).to.include('client_id and client_secret')
    expect(condition(read).message).to.not.include('wrong-secret')
    expect(read.body.data).to.not.have.property('accessLevel')
  })

  it('a 403 or a 404 gives STATE_FALSE FORBIDDEN with a message about the resource ID', async () => {
    for (const cluster of ['forbidden', 'missing']) {
      const read = await outcome(linkBody(cluster))
      expect(condition(read), cluster).to.deep.include({ state: 'STATE_FALSE', reason: 'FORBIDDEN' })
      expect(condition(read).message).to.include('resource_id')
    }
  })

  it('anything else gives STATE_FALSE FAILED with a message that says what failed', async () => {
    const teapot = await outcome(linkBody('teapot'))
    expect(condition(teapot)).to.deep.include({ state: 'STATE_FALSE', reason: 'FAILED' })
    expect(condition(teapot).message).to.include('answered 418')
    const before = double.requests.length
    const serverError = await outcome(linkBody('good', { clientId: 'client-500' }))
    expect(condition(serverError)).to.deep.include({ state: 'STATE_FALSE', reason: 'FAILED' })
    expect(condition(serverError).message).to.include('POST /oauth2/token answered 500 (after 3 attempts)')
    // Retried, and bounded: three attempts of the token request, then no more.
    expect(double.requests.slice(before).filter((request) => request.path === '/oauth2/token')).to.have.length(3)
  })

  it('retries a transient failure and then succeeds', async () => {
    const read = await outcome(linkBody('good', { clientId: 'client-flaky' }))
    expect(condition(read)).to.deep.include({ state: 'STATE_TRUE', reason: 'SUCCESS' })
  })

  it('checks again when the link is rewritten', async () => {
    const failedFirst = await outcome(linkBody('forbidden'))
    expect(condition(failedFirst).reason).to.equal('FORBIDDEN')
    const fixed = await outcome(linkBody('good'))
    expect(condition(fixed).reason).to.equal('SUCCESS')
  })

  it('never sends the secret anywhere but the token request body, and never logs it', async () => {
    await outcome(linkBody('good'))
    for (const request of double.requests) {
      if (request.path !== '/oauth2/token') expect(request.body + (request.authorization ?? '') + request.path).to.not.include('right-secret')
    }
    expect(agent.logs.join('\n')).to.not.include('right-secret')
  })
})

describe('cloud link: the cloud settings take precedence at start', () => {
  let configDir: string
  let dataDir: string
  let agent: AgentProcess | undefined

  before(async () => {
    configDir = await mkdtemp(join(tmpdir(), 'warden-link-config-'))
    dataDir = await mkdtemp(join(tmpdir(), 'warden-link-data-'))
  })
  after(async () => {
    await agent?.stop()
    await rm(configDir, { recursive: true, force: true })
    await rm(dataDir, { recursive: true, force: true })
  })

  async function writeConfig(cloud: Record<string, string>): Promise<string> {
    const file = join(configDir, 'config.json')
    await writeFile(file, JSON.stringify({ cloud }))
    return file
  }

  it('writes the configured link at start, over a link written through the API before the restart', async () => {
    const configured = resourceId('from-config')
    const file = await writeConfig({ resource_id: configured, client_id: 'config-client', client_secret: 'config-secret' })
    agent = await startAgent({ dataDir, keepDataDir: true, args: ['--config-file', file] })
    const first = await agent.request('GET', PATH)
    expect(first.status, first.text).to.equal(200)
    expect(first.body.data).to.include({ resourceId: configured, clientId: 'config-client' })
    const linked = await settled(agent, first.body.generation)
    expect(condition(linked).reason).to.equal('SUCCESS')

    const viaApi = await agent.request('PUT', PATH, { body: linkBody('from-api') })
    expect(viaApi.status).to.equal(200)
    expect((await agent.request('GET', PATH)).body.data.resourceId).to.equal(resourceId('from-api'))
    await agent.stop()

    agent = await startAgent({ dataDir, keepDataDir: true, args: ['--config-file', file] })
    const restarted = await agent.request('GET', PATH)
    expect(restarted.body.data).to.include({ resourceId: configured, clientId: 'config-client' })
    expect(restarted.body.id.uid).to.equal(first.body.id.uid)
    expect(Number(restarted.body.version)).to.be.above(Number(viaApi.body.version))
    const checked = await settled(agent, restarted.body.generation)
    expect(condition(checked).reason).to.equal('SUCCESS')
    expect(agent.logs.join('\n')).to.not.include('config-secret')
  })

  it('can still be unlinked through the API', async () => {
    expect((await agent!.request('DELETE', PATH)).body).to.deep.equal({})
    expect((await agent!.request('GET', PATH)).status).to.equal(404)
  })

  it('refuses incomplete or malformed cloud settings at start with exit code 2, naming the key', async () => {
    const partial = await writeConfig({ resource_id: resourceId('x'), client_id: 'c' })
    const bad = await startAgent({ args: ['--config-file', partial] }).then(
      () => undefined,
      (error: Error) => error.message,
    )
    expect(bad).to.include('cloud.client_secret')
    const malformed = await writeConfig({ resource_id: 'organization/o', client_id: 'c', client_secret: 's' })
    const message = await startAgent({ args: ['--config-file', malformed] }).then(
      () => undefined,
      (error: Error) => error.message,
    )
    expect(message).to.include('cloud.resource_id')
    expect(message).to.include('exited with 2')
  })
})
