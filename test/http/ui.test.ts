/**
 * The web UI's files as every agent serves them (src/http/routes/ui.ts), from what `npm run build` bundled into
 * dist/ui: index.html at /ui/ and at every other app path under it, the hashed assets it names, `/` redirecting to
 * /ui/, and none of it needing a token. Each answer is checked for the headers that keep the page safe (a content
 * security policy allowing nothing but the agent itself, nosniff, no framing) and cacheable (immutable assets,
 * index.html revalidated). Requests go through the API client (src/api), which follows no redirect, so a redirect is
 * seen as sent; it reads bodies as text, so a gzipped answer is checked by its headers here, and its bytes by
 * test/browser, where Chromium asks for gzip and runs what it gets. What the pages do in a browser is test/browser's.
 */
import { expect } from 'chai'
import { gzipSync } from 'node:zlib'
import { startAgent, type AgentProcess, type ApiResponse } from '../support/agent.js'

function get(agent: AgentProcess, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<ApiResponse> {
  return agent.request(method, path, { token: null, headers, timeoutMs: 10_000 })
}

/** The asset paths index.html names (script, style sheet, icon). */
function assetsOf(html: string): string[] {
  return [...html.matchAll(/(?:src|href)="(\/ui\/assets\/[^"]+)"/g)].map((found) => found[1]!)
}

function expectSafetyHeaders(answer: ApiResponse): void {
  const policy = String(answer.headers.get('content-security-policy'))
  const directives = new Map(policy.split(';').map((part) => part.trim().split(/\s+/)).map(([name, ...values]) => [name!, values]))
  expect(directives.get('default-src'), policy).to.deep.equal(["'self'"])
  for (const name of ['script-src', 'style-src', 'connect-src', 'img-src']) expect(directives.get(name), `${name} in ${policy}`).to.deep.equal(["'self'"])
  expect(directives.get('frame-ancestors'), policy).to.deep.equal(["'none'"])
  expect(directives.get('object-src'), policy).to.deep.equal(["'none'"])
  expect(policy).to.not.match(/unsafe-inline|unsafe-eval|\*|https?:|data:|blob:/)
  expect(answer.headers.get('x-content-type-options')).to.equal('nosniff')
  expect(answer.headers.get('x-frame-options')).to.equal('DENY')
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
    expect(answer.headers.get('content-type')).to.equal('text/html; charset=utf-8')
    expect(answer.headers.get('cache-control')).to.equal('no-cache')
    expect(answer.headers.get('etag')).to.match(/^"[\w-]+"$/)
    expectSafetyHeaders(answer)
    const html = answer.text
    expect(html).to.include('<div id="app"></div>')
    expect(assetsOf(html)).to.have.length(3)
  })

  it('has no inline script or style for the policy to refuse', async () => {
    const html = (await get(agent, '/ui/')).text
    for (const tag of html.match(/<script\b[^>]*>/g) ?? []) expect(tag).to.match(/\ssrc="\/ui\/assets\//)
    expect(html).to.not.match(/<style\b|\sstyle=|\son[a-z]+=/i)
  })

  it('serves every asset index.html names, immutable for a year, with its type and the same safety headers', async () => {
    const html = (await get(agent, '/ui/')).text
    const types: string[] = []
    for (const path of assetsOf(html)) {
      expect(path).to.match(/-[A-Z0-9]{8}\.(js|css|svg)$/, 'asset names carry a content hash')
      const answer = await get(agent, path)
      expect(answer.status, path).to.equal(200)
      expect(answer.headers.get('cache-control'), path).to.equal('public, max-age=31536000, immutable')
      expect(answer.text.length, path).to.be.greaterThan(0)
      expectSafetyHeaders(answer)
      types.push(String(answer.headers.get('content-type')))
    }
    expect(types.sort()).to.deep.equal(['image/svg+xml', 'text/css; charset=utf-8', 'text/javascript; charset=utf-8'])
  })

  it('redirects / and /ui to /ui/', async () => {
    for (const path of ['/', '/ui']) {
      const answer = await get(agent, path)
      expect(answer.status, path).to.equal(302)
      expect(answer.headers.get('location'), path).to.equal('/ui/')
    }
  })

  it('answers index.html for the app paths under /ui/, so they can be reloaded and shared', async () => {
    const index = (await get(agent, '/ui/')).text
    for (const path of ['/ui/tokens', '/ui/tokens/00000000-0000-0000-0000-000000000002', '/ui/templated-policies/builtin%2Fservice', '/ui/config/service-defaults/web/']) {
      const answer = await get(agent, path)
      expect(answer.status, path).to.equal(200)
      expect(answer.headers.get('cache-control'), path).to.equal('no-cache')
      expect(answer.text === index, path).to.equal(true)
      expectSafetyHeaders(answer)
    }
  })

  it('never needs a token: a bogus one changes nothing', async () => {
    const html = (await get(agent, '/ui/')).text
    for (const path of ['/ui/', '/ui/policies', ...assetsOf(html)]) {
      const answer = await get(agent, path, { 'X-Service-Token': '00000000-0000-4000-8000-00000000dead' })
      expect(answer.status, path).to.equal(200)
    }
  })

  it('answers an unknown asset with a 404 in the JSON error shape, not index.html', async () => {
    const answer = await get(agent, '/ui/assets/app-00000000.js')
    expect(answer.status).to.equal(404)
    expect(JSON.parse(answer.text)).to.include({ Code: 'not_found' })
  })

  it('sends gzip to a client that takes it, and says so', async () => {
    const html = (await get(agent, '/ui/')).text
    const script = assetsOf(html).find((path) => path.endsWith('.js'))!
    const plain = await get(agent, script)
    const zipped = await get(agent, script, { 'Accept-Encoding': 'gzip' })
    expect(plain.headers.get('content-encoding')).to.equal(null)
    expect(zipped.headers.get('content-encoding')).to.equal('gzip')
    expect(zipped.headers.get('vary')).to.equal('Accept-Encoding')
    expect(Number(zipped.headers.get('content-length'))).to.be.below(Number(plain.headers.get('content-length')))
  })

  it('answers 304 to a revalidation of an unchanged index.html', async () => {
    const first = await get(agent, '/ui/')
    const again = await get(agent, '/ui/', { 'If-None-Match': String(first.headers.get('etag')) })
    expect(again.status).to.equal(304)
    expect(again.text).to.equal('')
  })

  it('answers HEAD like GET, without a body', async () => {
    const answer = await get(agent, '/ui/', {}, 'HEAD')
    expect(answer.status).to.equal(200)
    expect(answer.headers.get('content-type')).to.equal('text/html; charset=utf-8')
    expect(answer.text).to.equal('')
  })

  it('keeps the whole UI under 200 KB gzipped (issue 21)', async () => {
    const index = (await get(agent, '/ui/')).text
    let bytes = gzipSync(index).length
    for (const path of assetsOf(index)) bytes += gzipSync((await get(agent, path)).text).length
    expect(bytes).to.be.below(200 * 1024)
  })
})
