/**
 * The web UI's files as every agent serves them (src/http/routes/ui.ts), from what `npm run build` bundled into
 * dist/ui: index.html at /ui/ and at every other app path under it, the hashed assets it names, `/` redirecting to
 * /ui/, and none of it needing a token. Each answer is checked for the headers that keep the page safe (a content
 * security policy allowing nothing but the agent itself, nosniff, no framing) and cacheable (immutable assets,
 * index.html revalidated). Requests go over node:http with no connection reuse, so the raw bytes (gzip) and the
 * redirects are seen as sent and no socket outlives a test. What the pages do in a browser is test/browser's part.
 */
import { expect } from 'chai'
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { gunzipSync } from 'node:zlib'
import { startAgent, type AgentProcess } from '../support/agent.js'

interface RawAnswer {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
}

function get(agent: AgentProcess, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<RawAnswer> {
  const target = new URL(path, agent.url)
  return new Promise((resolve, reject) => {
    const request = httpRequest(target, { method, headers, agent: false, timeout: 10_000 }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) }))
      response.on('error', reject)
    })
    request.on('timeout', () => request.destroy(new Error(`${method} ${path}: no answer in 10 s`)))
    request.on('error', reject)
    request.end()
  })
}

/** The asset paths index.html names (script, style sheet, icon). */
function assetsOf(html: string): string[] {
  return [...html.matchAll(/(?:src|href)="(\/ui\/assets\/[^"]+)"/g)].map((found) => found[1]!)
}

function expectSafetyHeaders(answer: RawAnswer): void {
  const policy = String(answer.headers['content-security-policy'])
  const directives = new Map(policy.split(';').map((part) => part.trim().split(/\s+/)).map(([name, ...values]) => [name!, values]))
  expect(directives.get('default-src'), policy).to.deep.equal(["'self'"])
  for (const name of ['script-src', 'style-src', 'connect-src', 'img-src']) expect(directives.get(name), `${name} in ${policy}`).to.deep.equal(["'self'"])
  expect(directives.get('frame-ancestors'), policy).to.deep.equal(["'none'"])
  expect(directives.get('object-src'), policy).to.deep.equal(["'none'"])
  expect(policy).to.not.match(/unsafe-inline|unsafe-eval|\*|https?:|data:|blob:/)
  expect(answer.headers['x-content-type-options']).to.equal('nosniff')
  expect(answer.headers['x-frame-options']).to.equal('DENY')
}

describe('web UI files (/ui/)', () => {
  let agent: AgentProcess
  before(async () => {
    agent = await startAgent()
  })
  after(async () => {
    await agent.stop()
  })

  it('serves index.html at /ui/ without a token, with the content security policy and no-cache', async () => {
    const answer = await get(agent, '/ui/')
    expect(answer.status).to.equal(200)
    expect(answer.headers['content-type']).to.equal('text/html; charset=utf-8')
    expect(answer.headers['cache-control']).to.equal('no-cache')
    expect(answer.headers.etag).to.match(/^"[\w-]+"$/)
    expectSafetyHeaders(answer)
    const html = answer.body.toString('utf8')
    expect(html).to.include('<div id="app"></div>')
    expect(assetsOf(html)).to.have.length(3)
  })

  it('has no inline script or style for the policy to refuse', async () => {
    const html = (await get(agent, '/ui/')).body.toString('utf8')
    for (const tag of html.match(/<script\b[^>]*>/g) ?? []) expect(tag).to.match(/\ssrc="\/ui\/assets\//)
    expect(html).to.not.match(/<style\b|\sstyle=|\son[a-z]+=/i)
  })

  it('serves every asset index.html names, immutable for a year, with its type and the same safety headers', async () => {
    const html = (await get(agent, '/ui/')).body.toString('utf8')
    const types: string[] = []
    for (const path of assetsOf(html)) {
      expect(path).to.match(/-[A-Z0-9]{8}\.(js|css|svg)$/, 'asset names carry a content hash')
      const answer = await get(agent, path)
      expect(answer.status, path).to.equal(200)
      expect(answer.headers['cache-control'], path).to.equal('public, max-age=31536000, immutable')
      expect(answer.body.length, path).to.be.greaterThan(0)
      expectSafetyHeaders(answer)
      types.push(String(answer.headers['content-type']))
    }
    expect(types.sort()).to.deep.equal(['image/svg+xml', 'text/css; charset=utf-8', 'text/javascript; charset=utf-8'])
  })

  it('redirects / and /ui to /ui/', async () => {
    for (const path of ['/', '/ui']) {
      const answer = await get(agent, path)
      expect(answer.status, path).to.equal(302)
      expect(answer.headers.location, path).to.equal('/ui/')
    }
  })

  it('answers index.html for the app paths under /ui/, so they can be reloaded and shared', async () => {
    const index = (await get(agent, '/ui/')).body
    for (const path of ['/ui/tokens', '/ui/tokens/00000000-0000-0000-0000-000000000002', '/ui/templated-policies/builtin%2Fservice', '/ui/config/service-defaults/web/']) {
      const answer = await get(agent, path)
      expect(answer.status, path).to.equal(200)
      expect(answer.headers['cache-control'], path).to.equal('no-cache')
      expect(answer.body.equals(index), path).to.equal(true)
      expectSafetyHeaders(answer)
    }
  })

  it('never needs a token: a bogus one changes nothing', async () => {
    const html = (await get(agent, '/ui/', { 'X-Service-Token': 'not-a-token' })).body.toString('utf8')
    for (const path of ['/ui/', '/ui/policies', ...assetsOf(html)]) {
      const answer = await get(agent, path, { 'X-Service-Token': '00000000-0000-4000-8000-00000000dead' })
      expect(answer.status, path).to.equal(200)
    }
  })

  it('answers an unknown asset with a 404 in the JSON error shape, not index.html', async () => {
    const answer = await get(agent, '/ui/assets/app-00000000.js')
    expect(answer.status).to.equal(404)
    expect(JSON.parse(answer.body.toString('utf8'))).to.include({ Code: 'not_found' })
  })

  it('sends gzip to a client that takes it, the same bytes once unzipped', async () => {
    const html = (await get(agent, '/ui/')).body.toString('utf8')
    const script = assetsOf(html).find((path) => path.endsWith('.js'))!
    const plain = await get(agent, script)
    const zipped = await get(agent, script, { 'Accept-Encoding': 'gzip' })
    expect(plain.headers['content-encoding']).to.equal(undefined)
    expect(zipped.headers['content-encoding']).to.equal('gzip')
    expect(zipped.headers.vary).to.equal('Accept-Encoding')
    expect(gunzipSync(zipped.body).equals(plain.body)).to.equal(true)
  })

  it('answers 304 to a revalidation of an unchanged index.html', async () => {
    const first = await get(agent, '/ui/')
    const again = await get(agent, '/ui/', { 'If-None-Match': String(first.headers.etag) })
    expect(again.status).to.equal(304)
    expect(again.body.length).to.equal(0)
  })

  it('answers HEAD like GET, without a body', async () => {
    const answer = await get(agent, '/ui/', {}, 'HEAD')
    expect(answer.status).to.equal(200)
    expect(answer.headers['content-type']).to.equal('text/html; charset=utf-8')
    expect(answer.body.length).to.equal(0)
  })

  it('keeps the whole UI under 200 KB gzipped (issue 21)', async () => {
    const index = await get(agent, '/ui/', { 'Accept-Encoding': 'gzip' })
    let bytes = index.body.length
    for (const path of assetsOf(gunzipSync(index.body).toString('utf8'))) bytes += (await get(agent, path, { 'Accept-Encoding': 'gzip' })).body.length
    expect(bytes).to.be.below(200 * 1024)
  })
})
