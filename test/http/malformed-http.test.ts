/**
 * Requests Node's HTTP parser refuses before any route runs still get the one JSON error shape, and a client that
 * breaks off in the middle of a body leaves a log of JSON lines, not a printed stack. Raw sockets, since no HTTP
 * client sends such requests.
 */
import { expect } from 'chai'
import { connect } from 'node:net'
import { startAgent, type AgentProcess } from '../support/agent.js'

/** Sends raw bytes and reads until the server closes the connection (or 5 s pass). */
function exchange(address: string, bytes: string | Buffer, options: { hangUp?: boolean } = {}): Promise<string> {
  const [host, port] = [address.slice(0, address.lastIndexOf(':')), Number(address.slice(address.lastIndexOf(':') + 1))]
  return new Promise((resolve, reject) => {
    // hangUp: the client ends its side right after writing, as one that gives up mid-body does.
    const socket = connect({ host, port }, () => (options.hangUp === true ? socket.end(bytes) : socket.write(bytes)))
    const chunks: Buffer[] = []
    const timer = setTimeout(() => {
      socket.destroy()
      resolve(Buffer.concat(chunks).toString('latin1'))
    }, 5_000)
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    socket.on('close', () => {
      clearTimeout(timer)
      resolve(Buffer.concat(chunks).toString('latin1'))
    })
  })
}

function parse(raw: string): { status: number; contentType: string; body: any } {
  const [head, body] = [raw.slice(0, raw.indexOf('\r\n\r\n')), raw.slice(raw.indexOf('\r\n\r\n') + 4)]
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1])
  const contentType = /content-type: ([^\r\n]+)/i.exec(head)?.[1] ?? ''
  return { status, contentType, body: JSON.parse(body) }
}

describe('requests the HTTP parser refuses', () => {
  let agent: AgentProcess
  before(async () => {
    agent = await startAgent()
  })
  after(async () => {
    await agent.stop()
  })

  for (const [what, request] of [
    ['a request line that is not HTTP', 'GARBAGE\r\n\r\n'],
    ['a header with a NUL byte', 'GET /v1/status/leader HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n'],
    ['two Content-Length headers that disagree', 'PUT /v1/acl/policy HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}'],
  ] as const) {
    it(`answers ${what} with a 400 in the JSON error shape`, async () => {
      const answer = parse(await exchange(agent.httpAddress, request))
      expect(answer.status).to.equal(400)
      expect(answer.contentType).to.equal('application/json')
      expect(answer.body).to.have.property('Code', 'invalid_input')
      expect(answer.body.Error).to.match(/^request: is not valid HTTP\/1\.1/)
    })
  }

  it('answers headers over 64 KiB with a 431 in the JSON error shape', async () => {
    const answer = parse(await exchange(agent.httpAddress, `GET /v1/status/leader HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(70 * 1024)}\r\n\r\n`))
    expect(answer.status).to.equal(431)
    expect(answer.body).to.include({ Code: 'invalid_input' })
    expect(answer.body.Error).to.match(/^headers: /)
  })

  it('logs clients that break off a body as JSON, and keeps serving', async () => {
    const before = agent.logs.length
    await exchange(agent.httpAddress, 'PUT /v1/acl/policy HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"Na\r\nzz\r\n')
    await exchange(agent.httpAddress, 'PUT /v1/acl/policy HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"Nam', { hangUp: true })
    await exchange(agent.httpAddress, 'PUT /v1/acl/policy HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"Name":', { hangUp: true })
    const status = await agent.request('GET', '/v1/status/leader')
    expect(status.status).to.equal(200)
    const lines = agent.logs.slice(before)
    expect(lines.filter((line) => !line.startsWith('{')), lines.join('\n')).to.deep.equal([])
  })

  it('takes a secret from Authorization: Bearer only when the header is that and nothing more', async () => {
    const bearer = await agent.request('GET', '/v1/acl/token/self', { token: null, headers: { Authorization: `Bearer ${agent.managementToken}` } })
    expect(bearer.status, bearer.text).to.equal(200)
    const junk = await agent.request('GET', '/v1/acl/token/self', { token: null, headers: { Authorization: `Bearer ${agent.managementToken} junk` } })
    expect(junk.status).to.equal(403)
  })

  it('refuses a compressed body with a 400 naming Content-Encoding, and writes nothing', async () => {
    const { gzipSync } = await import('node:zlib')
    const name = `gzipped-${Date.now()}`
    const raw = gzipSync(JSON.stringify({ Name: name })).toString('latin1')
    const response = await agent.request('PUT', '/v1/acl/policy', { raw, headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' } })
    expect(response.status, response.text).to.equal(400)
    expect(response.body).to.include({ Code: 'invalid_input', Field: 'Content-Encoding' })
    expect((await agent.request('GET', `/v1/acl/policy/name/${name}`)).status).to.equal(404)
  })

  describe('what the hostile-input audit found', () => {
    it('serves a request without a Host header (Node would have answered a bare 400)', async () => {
      const raw = await exchange(agent.httpAddress, 'GET /v1/status/leader HTTP/1.1\r\nConnection: close\r\n\r\n')
      expect(raw).to.match(/^HTTP\/1\.1 200 /)
    })

    it('answers an Expect other than 100-continue with a 417 in the JSON error shape naming Expect', async () => {
      const answer = parse(await exchange(agent.httpAddress, 'GET /v1/status/leader HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nConnection: close\r\n\r\n'))
      expect(answer.status).to.equal(417)
      expect(answer.contentType).to.equal('application/json')
      expect(answer.body).to.include({ Code: 'invalid_input', Field: 'Expect' })
    })

    it('answers at most 16 pipelined requests per connection; the next is a 429 and the connection closes', async () => {
      const request = `GET /v1/status/leader HTTP/1.1\r\nHost: x\r\n\r\n`
      const raw = await exchange(agent.httpAddress, request.repeat(40))
      const statuses = [...raw.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => Number(match[1]))
      expect(statuses.filter((status) => status === 200)).to.have.length.of.at.least(16)
      expect(statuses).to.include(429)
      expect(statuses.length).to.be.below(40)
      expect(raw).to.include('"Code":"rate_limited"')
    })

    it('still answers a write whose body is followed by garbage before closing, so the client learns its outcome', async () => {
      const name = `pipe-${Date.now()}`
      const body = JSON.stringify({ Name: name })
      const raw = await exchange(
        agent.httpAddress,
        `PUT /v1/acl/policy HTTP/1.1\r\nHost: x\r\nX-Service-Token: ${agent.managementToken}\r\nContent-Length: ${body.length}\r\n\r\n${body}GARBAGE`,
      )
      expect(raw).to.match(/^HTTP\/1\.1 200 /)
      expect(raw).to.include(name)
      expect((await agent.request('GET', `/v1/acl/policy/name/${name}`)).status).to.equal(200)
    })

    it('refuses a number that overflows a double with a 400 naming its field, in config entries and ACL bodies alike', async () => {
      const entry = await agent.request('PUT', '/v1/config', { raw: '{"Kind":"api-gateway","Name":"overflow","Listeners":1e309}', headers: { 'Content-Type': 'application/json' } })
      expect(entry.status, entry.text).to.equal(400)
      expect(entry.body).to.include({ Code: 'invalid_input', Field: 'Listeners' })
      expect((await agent.request('GET', '/v1/config/api-gateway/overflow')).status).to.equal(404)
      const token = await agent.request('PUT', '/v1/acl/token', { raw: `{"Description":"x","CreateIndex":${'9'.repeat(320)}}`, headers: { 'Content-Type': 'application/json' } })
      expect(token.status, token.text).to.equal(400)
      expect(token.body).to.include({ Field: 'CreateIndex' })
    })

    it('accepts response-only fields sent back only with their type (Consul decodes them into uint64 and text)', async () => {
      for (const [field, value] of [['CreateIndex', 'abc'], ['ModifyIndex', -1], ['Hash', { a: [1] }], ['CreateTime', 5]] as const) {
        const response = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'typed', [field]: value } })
        expect(response.status, `${field}: ${response.text}`).to.equal(400)
        expect(response.body).to.include({ Code: 'invalid_input', Field: field })
      }
      const read = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'round trip' } })
      expect(read.status, read.text).to.equal(200)
      const again = await agent.request('PUT', `/v1/acl/token/${read.body.AccessorID}`, { body: { ...read.body, Description: 'round trip, updated' } })
      expect(again.status, again.text).to.equal(200)
    })

    it('refuses __proto__ as a top-level field of a config entry, as it is refused nested', async () => {
      const response = await agent.request('PUT', '/v1/config', { raw: '{"Kind":"service-defaults","Name":"protox","__proto__":{"Protocol":"http"}}', headers: { 'Content-Type': 'application/json' } })
      expect(response.status, response.text).to.equal(400)
      expect(response.body).to.include({ Field: '__proto__' })
    })

    it('cuts what an error quotes: a 300 KB key comes back as at most a few KB', async () => {
      const response = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'x', ['k'.repeat(300_000)]: 1 } })
      expect(response.status).to.equal(400)
      expect(response.text.length).to.be.below(4096)
      expect(response.body.Error).to.include('cut at')
    })

    it('holds the body of an anonymous route (login) to 64 KiB', async () => {
      const response = await agent.request('POST', '/v1/acl/login', { token: null, body: { AuthMethod: 'none', BearerToken: 'x'.repeat(70 * 1024) } })
      expect(response.status, response.text).to.equal(413)
      expect(response.body).to.include({ Code: 'payload_too_large' })
    })
  })
})
