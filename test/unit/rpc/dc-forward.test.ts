/**
 * Forwarding `?dc` requests between datacenters (rpc/dc-forward.ts), over real WAN links: servers of the datacenter
 * are tried nearest first; a read whose server stops answering goes to the next; a write that may have arrived and
 * got no answer is outcome_unknown, never retried elsewhere; unknown and unreachable datacenters are named errors;
 * what a peer forwards is checked whole.
 */
import { expect } from 'chai'
import { pino } from 'pino'
import { WardenError } from '../../../src/lib/errors.js'
import { DatacenterForwarder, forwardedRequestOf, type ForwardedAnswer, type ForwardedRequest } from '../../../src/rpc/dc-forward.js'
import { WanMembership } from '../../../src/rpc/wan-membership.js'
import { PeerTransport } from '../../../src/transport/index.js'
import { PeerListener } from '../../../src/transport/listener.js'
import { CLUSTER_KEY, useCleanup, waitFor } from '../transport/harness.js'

interface Server {
  name: string
  address: string
  transport: PeerTransport
  membership: WanMembership
  forwarder: DatacenterForwarder
}

describe('rpc: forwarding to another datacenter', function () {
  this.timeout(20_000)
  const cleanup = useCleanup()
  const silent = pino({ level: 'silent' })

  async function server(node: string, datacenter: string, join: string[], serve?: (request: ForwardedRequest) => Promise<ForwardedAnswer>, bodyBytesMax?: number): Promise<Server> {
    const listener = await PeerListener.start({ listen: { host: '127.0.0.1', port: 0 }, handshakeTimeoutMs: 2000, handshakesPendingMax: 32, log: silent })
    cleanup.defer(() => listener.stop())
    const name = `${node}.${datacenter}`
    const address = `127.0.0.1:${listener.address.port}`
    const transport = await PeerTransport.start({ nodeName: name, advertiseAddress: address, datacenter, linkKind: 'wan', clusterKey: CLUSTER_KEY, listener, peers: new Map(), keepaliveIntervalMs: 100, backoff: { initialMs: 20, maxMs: 200, jitter: 0.5 }, log: silent })
    cleanup.defer(() => transport.stop())
    const membership = new WanMembership({ transport, self: { name, datacenter, address, since: Date.now() }, join, log: silent, backoff: { initialMs: 20, maxMs: 200, jitter: 0.5 } })
    membership.start()
    cleanup.defer(() => membership.stop())
    const forwarder = new DatacenterForwarder(transport, membership, silent, bodyBytesMax)
    if (serve !== undefined) forwarder.serve(serve)
    return { name, address, transport, membership, forwarder }
  }

  const answer = (text: string): ForwardedAnswer => ({ status: 200, headers: { 'content-type': 'application/json', 'x-service-index': '7' }, body: Buffer.from(text) })
  const get = (path: string): ForwardedRequest => ({ method: 'GET', path, headers: { 'x-service-token': 'secret' } })

  it('sends a request to a server of the datacenter and returns its answer unchanged, headers included', async () => {
    const seen: ForwardedRequest[] = []
    const remote = await server('r1', 'dc2', [], async (request) => {
      seen.push(request)
      return answer('"from dc2"')
    })
    const local = await server('l1', 'dc1', [remote.address])
    await waitFor('dc2 known and linked', () => local.membership.serversOf('dc2')[0]?.connected === true)
    const got = await local.forwarder.forward('dc2', { ...get('/v1/acl/policies?dc=dc2'), headers: { 'x-service-token': 'secret', connection: 'keep-alive' } }, 1000)
    expect(got.status).to.equal(200)
    expect(got.headers['x-service-index']).to.equal('7')
    expect(got.body.toString()).to.equal('"from dc2"')
    expect(seen).to.have.length(1)
    expect(seen[0]?.path).to.equal('/v1/acl/policies?dc=dc2')
    // Headers of the connection stay behind; the token goes.
    expect(seen[0]?.headers).to.deep.equal({ 'x-service-token': 'secret' })
  })

  it('a read whose server stops answering goes to the next server; a write gets outcome_unknown', async () => {
    // Whichever server of dc2 is tried first (the nearest) holds every request without answering.
    let slowName = ''
    let held = 0
    const serveAs = (name: string) => async (): Promise<ForwardedAnswer> => {
      if (name !== slowName) return answer(JSON.stringify(name))
      held += 1
      return new Promise(() => undefined)
    }
    const first = await server('a1', 'dc2', [], serveAs('a1.dc2'))
    const second = await server('a2', 'dc2', [first.address], serveAs('a2.dc2'))
    const local = await server('l1', 'dc1', [first.address])
    await waitFor('both servers of dc2 linked', () => local.membership.serversOf('dc2').filter((one) => one.connected).length === 2)
    slowName = local.membership.serversOf('dc2')[0]?.name ?? ''
    const [slow, fast] = slowName === first.name ? [first, second] : [second, first]
    const read = local.forwarder.forward('dc2', get('/v1/acl/policies'), 500)
    const write = local.forwarder.forward('dc2', { method: 'PUT', path: '/v1/acl/policy', headers: {}, body: Buffer.from('{}') }, 500).then(
      () => undefined,
      (error: unknown) => error,
    )
    await waitFor('both requests held by the nearest server', () => held >= 2)
    // The link to the nearest server breaks while it holds both requests.
    await slow.transport.stop()
    expect((await read).body.toString()).to.equal(JSON.stringify(fast.name))
    const failure = await write
    expect(failure).to.be.instanceOf(WardenError)
    expect((failure as WardenError).code).to.equal('outcome_unknown')
  })

  it('an unknown datacenter is unknown_datacenter; one with no server linked is no_path_to_datacenter', async () => {
    const remote = await server('r1', 'dc2', [], async () => answer('1'))
    const local = await server('l1', 'dc1', [remote.address])
    await waitFor('dc2 known', () => local.membership.datacenters().includes('dc2'))
    const unknown = await local.forwarder.forward('dc9', get('/v1/acl/policies'), 500).catch((error: unknown) => error)
    expect((unknown as WardenError).code).to.equal('unknown_datacenter')
    await remote.transport.stop()
    await waitFor('dc2 unlinked', () => local.membership.serversOf('dc2').every((one) => !one.connected))
    const cut = await local.forwarder.forward('dc2', get('/v1/acl/policies'), 500).catch((error: unknown) => error)
    expect((cut as WardenError).code).to.equal('no_path_to_datacenter')
  })

  it('holds a bounded number of bytes of forwarded bodies at once: beyond, a request is refused rate_limited', async () => {
    let release: () => void = () => undefined
    const remote = await server('r1', 'dc2', [], () => new Promise((resolve) => (release = () => resolve(answer('"done"')))), 1000)
    const local = await server('l1', 'dc1', [remote.address])
    await waitFor('dc2 linked', () => local.membership.serversOf('dc2')[0]?.connected === true)
    const put = (): ForwardedRequest => ({ method: 'PUT', path: '/v1/acl/policy', headers: {}, body: Buffer.alloc(600, 'x') })
    const first = local.forwarder.forward('dc2', put(), 2000)
    await new Promise((resolve) => setTimeout(resolve, 100))
    const second = await local.forwarder.forward('dc2', put(), 2000).catch((error: unknown) => error)
    expect((second as WardenError).code).to.equal('rate_limited')
    release()
    expect((await first).body.toString()).to.equal('"done"')
    // Released with the first answer: the next one is served.
    const third = local.forwarder.forward('dc2', put(), 2000)
    await new Promise((resolve) => setTimeout(resolve, 100))
    release()
    expect((await third).status).to.equal(200)
  })

  it('checks what a peer forwards: method, path under /v1/, header and body bounds', () => {
    const request = { method: 'GET', path: '/v1/acl/policies', headers: { 'x-service-token': 't' } }
    expect(forwardedRequestOf({ type: 'http.forward', request })).to.deep.equal(request)
    expect(forwardedRequestOf({ type: 'http.forward', request: { ...request, method: 'TRACE' } })).to.equal(undefined)
    expect(forwardedRequestOf({ type: 'http.forward', request: { ...request, path: '/ui/' } })).to.equal(undefined)
    expect(forwardedRequestOf({ type: 'http.forward', request: { ...request, headers: { a: 1 } } })).to.equal(undefined)
    expect(forwardedRequestOf({ type: 'http.forward', request: { ...request, body: Buffer.alloc(1024 * 1024 + 1) } })).to.equal(undefined)
    expect(forwardedRequestOf({ type: 'other', request })).to.equal(undefined)
    // Headers of one connection are dropped on arrival too.
    expect(forwardedRequestOf({ type: 'http.forward', request: { ...request, headers: { Host: 'x', 'X-Service-Token': 't' } } })?.headers).to.deep.equal({ 'x-service-token': 't' })
  })
})
