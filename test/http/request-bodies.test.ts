/**
 * Request bodies against the caller who sends them (issue 18's findings): a write is authorized by the state as it is
 * once its body has arrived, not as it was when its headers did (a body may take 30 s); a caller without a token reads
 * its body against the anonymous budget, so anonymous bodies cannot fill the budget every other write reads against;
 * and a body over the limit is answered 413 every time, never with a reset before the answer could be read.
 *
 * Method: raw sockets, since no HTTP client sends half a body and waits, or keeps sending after the answer came.
 * Each test uses its own names; slow requests are finished or destroyed before the test ends.
 */
import { expect } from 'chai'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { expectError, sleep, tokenWithRules, unique } from '../support/api.js'

interface RawAnswer {
  status: number
  body: any
  /** The socket error seen before the answer was read whole, if any (EPIPE, ECONNRESET). */
  error: string | undefined
}

function portOf(address: string): number {
  return Number(address.slice(address.lastIndexOf(':') + 1))
}

/** Parses an answer read from a raw socket: status, and the JSON body when it came whole. */
function parseAnswer(raw: string, error: string | undefined): RawAnswer {
  const split = raw.indexOf('\r\n\r\n')
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0)
  let body: any
  try {
    body = split === -1 ? undefined : JSON.parse(raw.slice(split + 4))
  } catch {
    body = undefined
  }
  return { status, body, error }
}

/**
 * A request whose headers and the first `sentBytes` of its body are sent at once; `finish()` sends the rest and reads
 * the answer (the request says Connection: close, so the answer ends with the connection).
 */
async function slowRequest(address: string, method: string, path: string, token: string | undefined, body: string, sentBytes: number): Promise<{ finish(): Promise<RawAnswer>; socket: Socket }> {
  const bytes = Buffer.from(body)
  const head = [`${method} ${path} HTTP/1.1`, 'Host: test', 'Content-Type: application/json', `Content-Length: ${bytes.length}`, 'Connection: close', ...(token === undefined ? [] : [`X-Service-Token: ${token}`])]
  const socket = connect({ host: '127.0.0.1', port: portOf(address) })
  const chunks: Buffer[] = []
  let error: string | undefined
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  socket.on('error', (failure: Error & { code?: string }) => (error = failure.code ?? failure.message))
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  await new Promise<void>((resolve) => socket.write(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`), bytes.subarray(0, sentBytes)]), () => resolve()))
  return {
    socket,
    async finish() {
      socket.write(bytes.subarray(sentBytes))
      const timer = setTimeout(() => socket.destroy(), 10_000)
      await closed
      clearTimeout(timer)
      return parseAnswer(Buffer.concat(chunks).toString('utf8'), error)
    },
  }
}

/**
 * Uploads `body` in `pieces` writes, all queued at once, and reads until a whole JSON answer came or the connection
 * ended. `chunked` sends it with Transfer-Encoding: chunked (no declared length), else with its Content-Length.
 */
function upload(address: string, token: string, body: Buffer, options: { chunked: boolean; pieces: number }): Promise<RawAnswer> {
  const head = ['PUT /v1/acl/policy HTTP/1.1', 'Host: test', 'Content-Type: application/json', `X-Service-Token: ${token}`, options.chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${body.length}`]
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port: portOf(address) }, () => {
      socket.write(`${head.join('\r\n')}\r\n\r\n`)
      const size = Math.ceil(body.length / options.pieces)
      for (let offset = 0; offset < body.length; offset += size) {
        const piece = body.subarray(offset, offset + size)
        socket.write(options.chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]) : piece)
      }
      if (options.chunked) socket.write('0\r\n\r\n')
    })
    const chunks: Buffer[] = []
    let error: string | undefined
    const done = (): void => {
      clearTimeout(timer)
      socket.destroy()
      resolve(parseAnswer(Buffer.concat(chunks).toString('utf8'), error))
    }
    const timer = setTimeout(done, 10_000)
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      if (parseAnswer(Buffer.concat(chunks).toString('utf8'), undefined).body !== undefined) done()
    })
    socket.on('error', (failure: Error & { code?: string }) => (error = failure.code ?? failure.message))
    socket.on('close', done)
  })
}

describe('request bodies and their callers', function () {
  this.timeout(30_000)
  let agent: AgentProcess
  before(async () => {
    agent = await startAgent()
  })
  after(async () => {
    await agent.stop()
  })

  describe('a write is authorized once its body has arrived', () => {
    it('a token deleted while its body arrives is refused 403 acl_not_found, and nothing is written (policy create)', async () => {
      const writer = await tokenWithRules(agent, 'acl = "write"', unique('body-writer'))
      const name = unique('late-policy')
      const request = await slowRequest(agent.httpAddress, 'PUT', '/v1/acl/policy', writer.secret, JSON.stringify({ Name: name, Description: 'x'.repeat(1000) }), 20)
      // The route has checked the token and is waiting for the rest of the body by now (a dev agent's barrier is local).
      await sleep(300)
      const deleted = await agent.request('DELETE', `/v1/acl/token/${writer.accessor}`)
      expect(deleted.status, deleted.text).to.equal(200)
      const answer = await request.finish()
      expect(answer.status, JSON.stringify(answer)).to.equal(403)
      expect(answer.body).to.include({ Code: 'acl_not_found' })
      expect((await agent.request('GET', `/v1/acl/policy/name/${name}`)).status).to.equal(404)
    })

    it('a token deleted while a config entry arrives is refused 403 acl_not_found, and nothing is written', async () => {
      const writer = await tokenWithRules(agent, 'service_prefix "" { policy = "write" }', unique('config-writer'))
      const name = unique('late-entry')
      const request = await slowRequest(agent.httpAddress, 'PUT', '/v1/config', writer.secret, JSON.stringify({ Kind: 'service-defaults', Name: name, Protocol: 'http' }), 10)
      await sleep(300)
      expect((await agent.request('DELETE', `/v1/acl/token/${writer.accessor}`)).status).to.equal(200)
      const answer = await request.finish()
      expect(answer.status, JSON.stringify(answer)).to.equal(403)
      expect(answer.body).to.include({ Code: 'acl_not_found' })
      expect((await agent.request('GET', `/v1/config/service-defaults/${name}`)).status).to.equal(404)
    })

    it('a token whose rules lose the permission while its body arrives is refused 403 permission_denied', async () => {
      const writer = await tokenWithRules(agent, 'acl = "write"', unique('demoted-writer'))
      const name = unique('demoted-policy')
      const request = await slowRequest(agent.httpAddress, 'PUT', '/v1/acl/policy', writer.secret, JSON.stringify({ Name: name }), 5)
      await sleep(300)
      const demoted = await agent.request('PUT', `/v1/acl/policy/${writer.policy.ID}`, { body: { Name: writer.policy.Name, Rules: 'acl = "read"' } })
      expect(demoted.status, demoted.text).to.equal(200)
      const answer = await request.finish()
      expect(answer.status, JSON.stringify(answer)).to.equal(403)
      expect(answer.body).to.include({ Code: 'permission_denied' })
      expect((await agent.request('GET', `/v1/acl/policy/name/${name}`)).status).to.equal(404)
    })

    it('a write whose body arrives whole is served as before', async () => {
      const writer = await tokenWithRules(agent, 'acl = "write"', unique('prompt-writer'))
      const name = unique('prompt-policy')
      const request = await slowRequest(agent.httpAddress, 'PUT', '/v1/acl/policy', writer.secret, JSON.stringify({ Name: name }), 5)
      const answer = await request.finish()
      expect(answer.status, JSON.stringify(answer)).to.equal(200)
      expect(answer.body).to.include({ Name: name })
    })
  })

  describe('a write whose body came with its headers', () => {
    /** Tokens this agent has resolved for requests so far (the metrics read resolves its own caller too). */
    async function resolutions(): Promise<number> {
      const answer = await agent.request('GET', '/v1/agent/metrics?format=prometheus')
      expect(answer.status, answer.text).to.equal(200)
      const match = /^warden_acl_resolutions(?:_total)?\s+(\d+)/m.exec(answer.text)
      expect(match, 'warden_acl_resolutions in the metrics').to.not.equal(null)
      return Number(match![1])
    }

    it('resolves its caller once on the leader; one whose body came later, again once the body is in', async () => {
      const writer = await tokenWithRules(agent, 'acl = "write"', unique('whole-writer'))
      const body = JSON.stringify({ Name: unique('whole-policy') })
      // Warm the resolver's cache and the metrics route, so that each step below resolves as the next one does.
      await resolutions()
      const start = await resolutions()
      const whole = await slowRequest(agent.httpAddress, 'PUT', '/v1/acl/policy', writer.secret, body, Buffer.byteLength(body))
      expect((await whole.finish()).status).to.equal(200)
      const afterWhole = await resolutions()
      const laterBody = JSON.stringify({ Name: unique('late-body-policy') })
      const late = await slowRequest(agent.httpAddress, 'PUT', '/v1/acl/policy', writer.secret, laterBody, 5)
      await sleep(100)
      expect((await late.finish()).status).to.equal(200)
      const afterLate = await resolutions()
      // Each step also counts the metrics read that ends it: the writes differ by the second resolution alone.
      expect(afterLate - afterWhole - (afterWhole - start), `whole ${afterWhole - start}, late ${afterLate - afterWhole}`).to.equal(1)
    })
  })

  describe('a token that expires while its body arrives', () => {
    let scratch: string
    let short: AgentProcess
    before(async () => {
      scratch = await mkdtemp(join(tmpdir(), 'warden-bodies-'))
      const configFile = join(scratch, 'config.json')
      await writeFile(configFile, JSON.stringify({ acl: { token_min_expiration_ttl: '1s', token_max_expiration_ttl: '1h' } }))
      short = await startAgent({ args: ['--config-file', configFile] })
    })
    after(async () => {
      await short.stop()
      await rm(scratch, { recursive: true, force: true })
    })

    it('is refused 403 acl_not_found, and nothing is written', async () => {
      const policy = await short.request('PUT', '/v1/acl/policy', { body: { Name: unique('expiring-rules'), Rules: 'acl = "write"' } })
      const token = await short.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.body.ID }], ExpirationTTL: '2s' } })
      expect(token.status, token.text).to.equal(200)
      const name = unique('expired-policy')
      const request = await slowRequest(short.httpAddress, 'PUT', '/v1/acl/policy', token.body.SecretID, JSON.stringify({ Name: name }), 5)
      await sleep(2_500)
      const answer = await request.finish()
      expect(answer.status, JSON.stringify(answer)).to.equal(403)
      expect(answer.body).to.include({ Code: 'acl_not_found' })
      expect((await short.request('GET', `/v1/acl/policy/name/${name}`)).status).to.equal(404)
    })
  })

  describe('anonymous bodies', () => {
    it('many anonymous callers trickling config bodies do not make an authenticated write get 429', async function () {
      this.timeout(60_000)
      // 70 bodies of nearly 1 MiB, each held unfinished: more than the 64 MiB every authenticated write reads against.
      const bodies = 70
      const declared = 1_000_000
      const body = `{"Kind":"service-defaults","Name":"anonymous","Meta":{"pad":"${'p'.repeat(declared - 100)}"}}`.padEnd(declared, ' ')
      const held = await Promise.all(Array.from({ length: bodies }, () => slowRequest(agent.httpAddress, 'PUT', '/v1/config', undefined, body, declared - 40_000)))
      try {
        await sleep(500)
        const name = unique('beside-anonymous')
        // Leading blanks are valid JSON: a body of 1000 KiB, more than anonymous bodies could leave of the budget.
        const raw = `${' '.repeat(1000 * 1024)}${JSON.stringify({ Name: name })}`
        const write = await agent.request('PUT', '/v1/acl/policy', { raw, headers: { 'Content-Type': 'application/json' } })
        expect(write.status, write.text).to.equal(200)
        expect(write.body).to.include({ Name: name })
      } finally {
        for (const request of held) request.socket.destroy()
      }
    })

    it('bodies cut off by clients that close their side release the budget at once: a write of 1000 KiB after 70 of them is served', async function () {
      this.timeout(60_000)
      // Authenticated bodies this time (against the shared budget), each ended by the client 40 KB short of its length.
      const declared = 1_000_000
      const body = `{"Name":"cut-off","Description":"${'d'.repeat(declared - 40)}"}`.padEnd(declared, ' ')
      const held = await Promise.all(Array.from({ length: 70 }, () => slowRequest(agent.httpAddress, 'PUT', '/v1/acl/policy', agent.managementToken, body, declared - 40_000)))
      await sleep(500)
      await Promise.all(held.map((request) => new Promise<void>((resolve) => request.socket.end(() => resolve()))))
      await sleep(500)
      try {
        const name = unique('after-cut-off')
        const raw = `${' '.repeat(1000 * 1024)}${JSON.stringify({ Name: name })}`
        const write = await agent.request('PUT', '/v1/acl/policy', { raw, headers: { 'Content-Type': 'application/json' } })
        expect(write.status, write.text).to.equal(200)
      } finally {
        for (const request of held) request.socket.destroy()
      }
    })

    it('an anonymous body is held to the anonymous limit (64 KiB): 413 payload_too_large', async () => {
      const response = await agent.request('PUT', '/v1/config', { token: null, body: { Kind: 'service-defaults', Name: unique('big-anonymous'), Meta: { pad: 'p'.repeat(70 * 1024) } } })
      expectError(response, 413, 'payload_too_large')
    })

    it('a secret that resolves to no token is refused before its body is read: 403 acl_not_found', async () => {
      const request = await slowRequest(agent.httpAddress, 'PUT', '/v1/config', 'ba5e1e55-0000-4000-8000-000000000000', '{"Kind":"service-defaults","Name":"never"}', 5)
      // No more of the body is sent: the answer must come without it.
      const chunks: Buffer[] = []
      request.socket.on('data', (chunk: Buffer) => chunks.push(chunk))
      const deadline = Date.now() + 5_000
      while (!Buffer.concat(chunks).toString('utf8').includes('}') && Date.now() < deadline) await sleep(20)
      request.socket.destroy()
      const answer = parseAnswer(Buffer.concat(chunks).toString('utf8'), undefined)
      expect(answer.status, Buffer.concat(chunks).toString('utf8')).to.equal(403)
      expect(answer.body).to.include({ Code: 'acl_not_found' })
    })
  })

  describe('a body over the limit', () => {
    const body = Buffer.alloc(2 * 1024 * 1024, 0x20)
    for (const chunked of [true, false]) {
      it(`is answered 413 in the JSON shape every time, 50 uploads of 2 MiB ${chunked ? 'chunked' : 'with Content-Length'}, 10 at once`, async function () {
        this.timeout(120_000)
        const answers: RawAnswer[] = []
        await Promise.all(
          Array.from({ length: 10 }, async () => {
            for (let round = 0; round < 5; round += 1) answers.push(await upload(agent.httpAddress, agent.managementToken, body, { chunked, pieces: 64 }))
          }),
        )
        const wrong = answers.filter((answer) => answer.status !== 413 || answer.body?.Code !== 'payload_too_large')
        expect(wrong.map((answer) => `${answer.status} ${answer.error ?? ''} ${JSON.stringify(answer.body)}`), 'answers other than a 413 JSON').to.deep.equal([])
        expect(answers).to.have.length(50)
        // The node still serves.
        expect((await agent.request('GET', '/v1/status/leader')).status).to.equal(200)
      })
    }
  })
})
