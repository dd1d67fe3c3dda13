/**
 * The benchmark's programmatic load generator (scripts/bench/cannon-rotating.ts, through runCannon): what it sends.
 * Rotation walks the whole list of paths and tokens with one counter; a load that rotates nothing sends the request
 * it was given every time (autocannon's prebuilt request, with no per-request hook: issue 22, fourteenth session),
 * and still reports µs latencies and the CPU of the processes it was asked to watch.
 */
import { expect } from 'chai'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import { runCannon } from '../../../scripts/bench/cannon.js'

interface Seen {
  method: string
  path: string
  token: string | undefined
  body: string
}

function listen(seen: Seen[]): Promise<Server> {
  const server = createServer((request: IncomingMessage, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const token = request.headers['x-service-token']
      seen.push({ method: request.method ?? '', path: request.url ?? '', token: typeof token === 'string' ? token : undefined, body: Buffer.concat(chunks).toString('utf8') })
      response.writeHead(200, { 'Content-Type': 'application/json' }).end('{}')
    })
  })
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve(server))
  })
}

describe('bench: the programmatic load generator', function () {
  this.timeout(30_000)
  let server: Server | undefined
  let workDir: string | undefined
  const seen: Seen[] = []

  beforeEach(async () => {
    seen.length = 0
    workDir = await mkdtemp(join(tmpdir(), 'warden-cannon-test-'))
    server = await listen(seen)
  })

  afterEach(async () => {
    server?.closeAllConnections()
    await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())))
    server = undefined
    if (workDir !== undefined) await rm(workDir, { recursive: true, force: true })
    workDir = undefined
  })

  const origin = (): string => `http://127.0.0.1:${(server!.address() as AddressInfo).port}`

  it('walks every path and token of a rotation', async () => {
    const paths = ['/v1/a', '/v1/b', '/v1/c']
    const tokens = ['token-1', 'token-2']
    const { result } = await runCannon(
      { origin: origin(), connections: 2, durationS: 1, requests: [{ method: 'GET', path: '/v1/a', headers: {} }], workDir: workDir!, rotatePaths: paths, rotateTokens: tokens },
      [],
    )
    expect(result.ok).to.be.greaterThan(10)
    expect(new Set(seen.map((request) => request.path))).to.deep.equal(new Set(paths))
    expect(new Set(seen.map((request) => request.token))).to.deep.equal(new Set(tokens))
  })

  it('sends the request it was given every time when nothing rotates, with µs latencies and CPU', async () => {
    const body = JSON.stringify({ Description: 'bench', Policies: [{ ID: 'p' }] })
    const { result } = await runCannon(
      {
        origin: origin(),
        connections: 2,
        durationS: 1,
        requests: [{ method: 'PUT', path: '/v1/acl/token', headers: { 'X-Service-Token': 'fixed', 'Content-Type': 'application/json' }, body }],
        workDir: workDir!,
        latencyUs: true,
        cpuPids: [process.pid],
      },
      [],
    )
    expect(result.ok).to.be.greaterThan(10)
    expect(seen.length).to.be.at.least(result.ok)
    for (const request of seen) expect(request).to.deep.equal({ method: 'PUT', path: '/v1/acl/token', token: 'fixed', body })
    expect(result.latencyUs?.p50).to.be.greaterThan(0)
    // This process served the whole load, so its CPU over the load is more than nothing.
    expect(result.cpuS?.[String(process.pid)]).to.be.greaterThan(0)
  })
})
