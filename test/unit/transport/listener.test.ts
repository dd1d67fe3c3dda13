/**
 * The cluster port (listener.ts): upgrades are routed by path to the kind of link registered for it, an unknown
 * path is answered 404 and closed, a plain request 426, and a route removed stops taking connections; the port stays
 * bounded in connections whatever the routes.
 */
import { expect } from 'chai'
import { request } from 'node:http'
import { connect } from 'node:net'
import { pino } from 'pino'
import { WebSocket } from 'ws'
import { PeerListener, type Route } from '../../../src/transport/listener.js'
import { useCleanup, waitFor } from './harness.js'

describe('transport: the cluster port', () => {
  const cleanup = useCleanup()

  async function listener(): Promise<PeerListener> {
    const started = await PeerListener.start({ listen: { host: '127.0.0.1', port: 0 }, handshakeTimeoutMs: 2000, handshakesPendingMax: 4, log: pino({ level: 'silent' }) })
    cleanup.defer(() => started.stop())
    return started
  }

  function route(accepted: string[], name: string, expected = 0): Route {
    return {
      maxPayload: 1024,
      accept: (ws) => {
        accepted.push(name)
        ws.close()
      },
      expectedConnections: () => expected,
    }
  }

  /** The status a WebSocket upgrade to `path` gets: 101 when accepted, else the HTTP status. */
  function upgrade(port: number, path: string): Promise<number> {
    return new Promise((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`)
      cleanup.defer(() => ws.terminate())
      ws.once('open', () => resolve(101))
      ws.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0))
      ws.once('error', () => undefined)
    })
  }

  it('routes each upgrade to the route of its path; an unknown path is a 404', async () => {
    const port = await listener()
    const accepted: string[] = []
    port.route('/warden/peer/v1', route(accepted, 'raft'))
    port.route('/warden/wan/v1', route(accepted, 'wan'))
    expect(await upgrade(port.address.port, '/warden/wan/v1')).to.equal(101)
    expect(await upgrade(port.address.port, '/warden/peer/v1')).to.equal(101)
    expect(await upgrade(port.address.port, '/warden/peer/v1?x=1')).to.equal(101)
    expect(await upgrade(port.address.port, '/elsewhere')).to.equal(404)
    await waitFor('three accepted', () => accepted.length === 3)
    expect(accepted).to.deep.equal(['wan', 'raft', 'raft'])
    port.unroute('/warden/wan/v1')
    expect(await upgrade(port.address.port, '/warden/wan/v1')).to.equal(404)
  })

  it('survives a client that resets its connection after asking for an unknown path', async () => {
    const port = await listener()
    const accepted: string[] = []
    port.route('/warden/peer/v1', route(accepted, 'raft'))
    for (let attempt = 0; attempt < 20; attempt += 1) {
      const socket = connect(port.address.port, '127.0.0.1')
      socket.on('error', () => undefined)
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
      socket.write('GET /nope HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n')
      // A reset (RST) rather than a close, while the listener writes its 404.
      socket.resetAndDestroy()
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
    // Still serving (an error without a listener on a socket would have taken the process down).
    expect(await upgrade(port.address.port, '/warden/peer/v1')).to.equal(101)
  })

  it('answers a plain HTTP request 426', async () => {
    const port = await listener()
    const status = await new Promise<number>((resolve, reject) => {
      const sent = request({ host: '127.0.0.1', port: port.address.port, path: '/warden/peer/v1' }, (response) => {
        response.resume()
        resolve(response.statusCode ?? 0)
      })
      sent.on('error', reject)
      sent.end()
    })
    expect(status).to.equal(426)
  })
})
