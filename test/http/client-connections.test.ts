/**
 * Connections per client (issue 18): one address may hold at most `limits.http_max_conns_per_client` HTTP
 * connections at once (200 by default, as Consul; loopback counts like any address). A connection over the limit is
 * answered 429 in the JSON error shape, whatever it sent, and closed; once one of the client's connections closes, a
 * new one is served again.
 *
 * Method: raw sockets from 127.0.0.1, each held open after a request on it proved the node accepted it.
 */
import { expect } from 'chai'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startAgent, type AgentProcess } from '../support/agent.js'

const STATUS_REQUEST = 'GET /v1/status/leader HTTP/1.1\r\nHost: test\r\n\r\n'

function portOf(address: string): number {
  return Number(address.slice(address.lastIndexOf(':') + 1))
}

/** A connection with one request answered on it (so the node has accepted it), kept open. */
async function openServed(address: string): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port: portOf(address) })
  const answer = await new Promise<string>((resolve, reject) => {
    let text = ''
    const timer = setTimeout(() => reject(new Error(`no answer on a connection: ${text}`)), 10_000)
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1')
      // A keep-alive answer: the status line and a complete JSON body (the leader's address, quoted).
      if (/\r\n\r\n".*"$/.test(text) || /\r\n\r\n\{.*\}$/.test(text)) {
        clearTimeout(timer)
        socket.removeAllListeners('data')
        resolve(text)
      }
    })
    socket.once('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    socket.write(STATUS_REQUEST)
  })
  if (!answer.startsWith('HTTP/1.1 200 ')) {
    socket.destroy()
    throw new Error(`expected a 200 on an accepted connection, got: ${answer.slice(0, 300)}`)
  }
  return socket
}

/** Connects, sends one request, and reads until the node closes the connection (or 5 s pass, then `closed` is false). */
function exchange(address: string): Promise<{ raw: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port: portOf(address) }, () => socket.write(STATUS_REQUEST))
    let raw = ''
    const timer = setTimeout(() => {
      socket.destroy()
      resolve({ raw, closed: false })
    }, 5_000)
    socket.on('data', (chunk: Buffer) => (raw += chunk.toString('latin1')))
    // A reset after the answer still counts as closed; the answer is what the test reads.
    socket.on('error', () => undefined)
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ raw, closed: true })
    })
  })
}

function expectRefused(answer: { raw: string; closed: boolean }, limit: number): void {
  expect(answer.raw, answer.raw).to.match(/^HTTP\/1\.1 429 /)
  expect(answer.raw.toLowerCase()).to.include('connection: close')
  const body = JSON.parse(answer.raw.slice(answer.raw.indexOf('\r\n\r\n') + 4)) as { Code: string; Error: string }
  expect(body.Code).to.equal('rate_limited')
  expect(body.Error).to.include(String(limit))
  expect(answer.closed, 'the refused connection is closed').to.equal(true)
}

describe('connections per client', () => {
  const held: Socket[] = []
  afterEach(() => {
    for (const socket of held.splice(0)) socket.destroy()
  })

  describe('by default (200, as Consul)', () => {
    let agent: AgentProcess
    before(async () => {
      agent = await startAgent()
    })
    after(async () => {
      await agent.stop()
    })

    it('serves 200 connections from 127.0.0.1; the 201st is answered 429 and closed; after one closes, a new one is served', async function () {
      this.timeout(60_000)
      for (let count = 0; count < 200; count += 1) held.push(await openServed(agent.httpAddress))
      expectRefused(await exchange(agent.httpAddress), 200)
      // Still refused while all 200 are open: the refusal was not a one-off.
      expectRefused(await exchange(agent.httpAddress), 200)
      const closing = held.pop()!
      await new Promise<void>((resolve) => {
        closing.once('close', () => resolve())
        closing.destroy()
      })
      // The node learns of the close when it reads the FIN: give it a moment, then a new connection is served.
      let served: Socket | undefined
      for (let attempt = 0; attempt < 50 && served === undefined; attempt += 1) {
        served = await openServed(agent.httpAddress).catch(async () => {
          await new Promise((resolve) => setTimeout(resolve, 50))
          return undefined
        })
      }
      expect(served, 'a new connection after one closed').to.not.equal(undefined)
      held.push(served!)
    })
  })

  describe('limits.http_max_conns_per_client from the config file, and the flag', () => {
    let scratch: string
    let agents: AgentProcess[] = []
    before(async () => {
      scratch = await mkdtemp(join(tmpdir(), 'warden-conns-'))
    })
    afterEach(async () => {
      await Promise.all(agents.map((agent) => agent.stop()))
      agents = []
    })
    after(async () => {
      await rm(scratch, { recursive: true, force: true })
    })

    it('a limit of 3 in the config file: the 4th connection is refused', async () => {
      const file = join(scratch, 'three.json')
      await writeFile(file, JSON.stringify({ limits: { http_max_conns_per_client: 3 } }))
      const agent = await startAgent({ args: ['--config-file', file] })
      agents.push(agent)
      for (let count = 0; count < 3; count += 1) held.push(await openServed(agent.httpAddress))
      expectRefused(await exchange(agent.httpAddress), 3)
    })

    it('--http-max-conns-per-client 2 wins over the file', async () => {
      const file = join(scratch, 'five.json')
      await writeFile(file, JSON.stringify({ limits: { http_max_conns_per_client: 5 } }))
      const agent = await startAgent({ args: ['--config-file', file, '--http-max-conns-per-client', '2'] })
      agents.push(agent)
      for (let count = 0; count < 2; count += 1) held.push(await openServed(agent.httpAddress))
      expectRefused(await exchange(agent.httpAddress), 2)
    })

    it('0 sets no limit per client: 250 connections from one address are served', async function () {
      this.timeout(60_000)
      const agent = await startAgent({ args: ['--http-max-conns-per-client', '0'] })
      agents.push(agent)
      for (let count = 0; count < 250; count += 1) held.push(await openServed(agent.httpAddress))
    })
  })
})
