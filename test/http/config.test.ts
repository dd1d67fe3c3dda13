/**
 * Config entries over HTTP, against the contract (api.md, "Config entries") and warden's readings (readings.md):
 * apply, get, list by kind and delete for all sixteen kinds; the name rules per kind; Protocol; fields the contract
 * does not define kept as given within bounds; `cas` on apply and delete decided at apply time (many writers racing
 * with the same cas: exactly one wins per index); `dc`; `filter` over nested fields; the per-kind permissions and the
 * filtered-by-ACLs header; blocking and consistency on reads.
 *
 * One agent serves the whole file. Each test uses its own entry names, so tests do not depend on one another.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess, type ApiResponse } from '../support/agent.js'
import { expectErrorShape, secretWithRules, sleep, unique } from '../support/api.js'

/**
 * The contract's sixteen kinds, written out here rather than imported from src/http/config-kinds.ts: the test checks
 * the server's list against the contract, so it must not take its expectation from the code under test.
 */
const KINDS = [
  'api-gateway',
  'bound-api-gateway',
  'exported-services',
  'file-system-certificate',
  'http-route',
  'ingress-gateway',
  'inline-certificate',
  'mesh',
  'proxy-defaults',
  'service-defaults',
  'service-intentions',
  'service-resolver',
  'service-router',
  'service-splitter',
  'tcp-route',
  'terminating-gateway',
]

describe('config entries', () => {
  let agent: AgentProcess

  before(async () => {
    agent = await startAgent()
  })
  after(async () => {
    await agent.stop()
  })

  async function put(body: unknown, query = '', token?: string): Promise<ApiResponse> {
    return agent.request('PUT', `/v1/config${query}`, token === undefined ? { body } : { body, token })
  }

  async function applied(body: Record<string, unknown>, query = ''): Promise<void> {
    const response = await put(body, query)
    expect(response.status, response.text).to.equal(200)
    expect(response.body, response.text).to.equal(true)
  }

  async function get(kind: string, name: string, query = '', token?: string): Promise<ApiResponse> {
    return agent.request('GET', `/v1/config/${kind}/${name}${query}`, token === undefined ? {} : { token })
  }

  async function list(kind: string, query = '', token?: string): Promise<ApiResponse> {
    return agent.request('GET', `/v1/config/${kind}${query}`, token === undefined ? {} : { token })
  }

  describe('apply and get', () => {
    it('stores an entry and returns it with CreateIndex and ModifyIndex, keeping undefined fields as given', async () => {
      const name = unique('web')
      const extra = { Meta: { team: 'payments' }, UpstreamConfig: { Defaults: { Limits: { MaxConnections: 10 } } }, Tags: ['a', 'b'], Nothing: null }
      await applied({ Kind: 'service-defaults', Name: name, Protocol: 'http', ...extra })
      const response = await get('service-defaults', name)
      expect(response.status, response.text).to.equal(200)
      expect(response.body).to.deep.include({ Kind: 'service-defaults', Name: name, Protocol: 'http', ...extra })
      expect(response.body.CreateIndex).to.be.a('number').above(0)
      expect(response.body.ModifyIndex).to.equal(response.body.CreateIndex)
      expect(Number(response.headers.get('x-service-index'))).to.be.at.least(response.body.ModifyIndex)
    })

    it('accepts `kind` and `name` in lowercase', async () => {
      const name = unique('lower')
      await applied({ kind: 'service-resolver', name, DefaultSubset: 'v1' })
      expect((await get('service-resolver', name)).body).to.include({ Kind: 'service-resolver', Name: name, DefaultSubset: 'v1' })
    })

    it('ignores CreateIndex, ModifyIndex and Hash sent back by read-modify-write clients, and the body Namespace', async () => {
      const name = unique('rmw')
      await applied({ Kind: 'service-router', Name: name, CreateIndex: 1, ModifyIndex: 2, Hash: 'x', Namespace: 'other' })
      const response = await get('service-router', name)
      expect(response.body.CreateIndex).to.be.above(2)
      expect(response.body).to.not.have.property('Hash')
      expect(response.body.Namespace).to.equal('default')
    })

    it('raises ModifyIndex on every apply, keeping CreateIndex, even when nothing changed', async () => {
      const name = unique('same')
      await applied({ Kind: 'service-splitter', Name: name })
      const first = (await get('service-splitter', name)).body
      await applied({ Kind: 'service-splitter', Name: name })
      const second = (await get('service-splitter', name)).body
      expect(second.CreateIndex).to.equal(first.CreateIndex)
      expect(second.ModifyIndex).to.be.above(first.ModifyIndex)
    })

    it('applies, gets, lists and deletes every writable kind', async () => {
      for (const kind of KINDS) {
        if (kind === 'bound-api-gateway') continue
        const name = kind === 'mesh' ? 'mesh' : kind === 'proxy-defaults' ? 'global' : unique('every')
        await applied({ Kind: kind, Name: name, Custom: { kind } })
        const read = await get(kind, name)
        expect(read.status, `${kind}: ${read.text}`).to.equal(200)
        expect(read.body).to.deep.include({ Kind: kind, Name: name, Custom: { kind } })
        const listed = await list(kind)
        expect(listed.status, listed.text).to.equal(200)
        expect(listed.body.map((entry: { Name: string }) => entry.Name), kind).to.include(name)
        expect(listed.body.every((entry: { Kind: string }) => entry.Kind === kind)).to.equal(true)
        const deleted = await agent.request('DELETE', `/v1/config/${kind}/${name}`)
        expect(deleted.body, `${kind}: ${deleted.text}`).to.equal(true)
        expect((await get(kind, name)).status).to.equal(404)
      }
    })

    it('answers 404 in the error shape for a missing entry', async () => {
      const response = await get('service-defaults', 'never-written')
      expectErrorShape(response, 404, 'not_found')
      expect(response.body.Error).to.include('never-written')
    })

    it('refuses bound-api-gateway writes and deletes with a 403 that says the kind is not writable', async () => {
      const write = await put({ Kind: 'bound-api-gateway', Name: 'gw' })
      expectErrorShape(write, 403, 'permission_denied')
      expect(write.body.Error).to.include('not writable')
      const remove = await agent.request('DELETE', '/v1/config/bound-api-gateway/gw')
      expectErrorShape(remove, 403, 'permission_denied')
      const listed = await list('bound-api-gateway')
      expect(listed.status).to.equal(200)
      expect(listed.body).to.deep.equal([])
    })

    it('answers an unknown kind with a 400 that names the allowed kinds, on apply, get, list and delete', async () => {
      const write = await put({ Kind: 'service-default', Name: 'web' })
      expectErrorShape(write, 400, 'invalid_input', 'Kind')
      for (const kind of KINDS) expect(write.body.Error).to.include(kind)
      expectErrorShape(await get('nope', 'web'), 400, 'invalid_input', 'kind')
      expectErrorShape(await list('nope'), 400, 'invalid_input', 'kind')
      expectErrorShape(await agent.request('DELETE', '/v1/config/nope/web'), 400, 'invalid_input', 'kind')
    })

    it('requires Kind and Name, and a JSON object body', async () => {
      expectErrorShape(await put({ Name: 'web' }), 400, 'invalid_input', 'Kind')
      expectErrorShape(await put({ Kind: 5, Name: 'web' }), 400, 'invalid_input', 'Kind')
      expectErrorShape(await put({ Kind: 'service-defaults' }), 400, 'invalid_input', 'Name')
      expectErrorShape(await put({ Kind: 'service-defaults', Name: 7 }), 400, 'invalid_input', 'Name')
      expectErrorShape(await agent.request('PUT', '/v1/config', { raw: '[1]', headers: { 'Content-Type': 'application/json' } }), 400, 'invalid_input', 'body')
      expectErrorShape(await agent.request('PUT', '/v1/config', { raw: '{"Kind":', headers: { 'Content-Type': 'application/json' } }), 400, 'invalid_input', 'body')
    })
  })

  describe('names', () => {
    it('proxy-defaults: an empty name becomes global; any other name is refused', async () => {
      await applied({ Kind: 'proxy-defaults', Config: { k: 1 } })
      expect((await get('proxy-defaults', 'global')).body).to.deep.include({ Name: 'global', Config: { k: 1 } })
      await applied({ Kind: 'proxy-defaults', Name: 'global' })
      const other = await put({ Kind: 'proxy-defaults', Name: 'web' })
      expectErrorShape(other, 400, 'invalid_input', 'Name')
      expect(other.body.Error).to.include('global')
    })

    it('mesh: only mesh', async () => {
      await applied({ Kind: 'mesh', Name: 'mesh' })
      await applied({ Kind: 'mesh' })
      expectErrorShape(await put({ Kind: 'mesh', Name: 'other' }), 400, 'invalid_input', 'Name')
    })

    it('service-intentions may be named *; service-defaults may not', async () => {
      await applied({ Kind: 'service-intentions', Name: '*', Sources: [{ Name: 'web', Action: 'allow' }] })
      expect((await get('service-intentions', '*')).body).to.include({ Name: '*' })
      const wildcard = await put({ Kind: 'service-defaults', Name: '*' })
      expectErrorShape(wildcard, 400, 'invalid_input', 'Name')
      expect(wildcard.body.Error).to.include('wildcard')
    })

    it('other kinds take service names only', async () => {
      for (const name of ['Web', 'web!', '-web', 'web-', 'a'.repeat(257), 'a/b']) {
        expectErrorShape(await put({ Kind: 'service-resolver', Name: name }), 400, 'invalid_input', 'Name')
      }
      await applied({ Kind: 'service-resolver', Name: 'a'.repeat(256) })
      await applied({ Kind: 'ingress-gateway', Name: 'in_gress-1' })
    })
  })

  describe('validation', () => {
    it('lowercases Protocol on service-defaults and proxy-defaults and accepts only tcp, http, http2, grpc', async () => {
      const name = unique('proto')
      await applied({ Kind: 'service-defaults', Name: name, Protocol: 'HTTP2' })
      expect((await get('service-defaults', name)).body.Protocol).to.equal('http2')
      await applied({ Kind: 'service-defaults', Name: name, protocol: 'Grpc' })
      expect((await get('service-defaults', name)).body.Protocol).to.equal('grpc')
      const bad = await put({ Kind: 'service-defaults', Name: name, Protocol: 'udp' })
      expectErrorShape(bad, 400, 'invalid_input', 'Protocol')
      expect(bad.body.Error).to.include('tcp, http, http2, grpc')
      expectErrorShape(await put({ Kind: 'proxy-defaults', Protocol: 'quic' }), 400, 'invalid_input', 'Protocol')
      expectErrorShape(await put({ Kind: 'service-defaults', Name: name, Protocol: 1 }), 400, 'invalid_input', 'Protocol')
      // An empty Protocol is the default, as if left out.
      await applied({ Kind: 'service-defaults', Name: name, Protocol: '' })
      expect((await get('service-defaults', name)).body).not.to.have.property('Protocol')
      // Other kinds do not interpret Protocol: it is stored as given.
      await applied({ Kind: 'service-router', Name: name, Protocol: 'UDP' })
      expect((await get('service-router', name)).body.Protocol).to.equal('UDP')
    })

    it('bounds the nesting depth of an entry, naming the path that goes too deep', async () => {
      let deep: unknown = 'leaf'
      for (let level = 0; level < 40; level += 1) deep = { d: deep }
      const response = await put({ Kind: 'service-defaults', Name: unique('deep'), Deep: deep })
      expectErrorShape(response, 400, 'invalid_input')
      expect(response.body.Field).to.match(/^Deep(\.d)+$/)
      let fine: unknown = 'leaf'
      for (let level = 0; level < 20; level += 1) fine = { d: fine }
      await applied({ Kind: 'service-defaults', Name: unique('deep'), Deep: fine })
    })

    it('bounds the size of an entry', async () => {
      const response = await put({ Kind: 'service-defaults', Name: unique('big'), Blob: 'x'.repeat(300 * 1024) })
      expectErrorShape(response, 400, 'invalid_input', 'body')
      expect(response.body.Error).to.include('262144')
    })

    it('refuses a __proto__ field', async () => {
      const raw = `{"Kind":"service-defaults","Name":"${unique('proto-key')}","Meta":{"__proto__":{"x":1}}}`
      expectErrorShape(await agent.request('PUT', '/v1/config', { raw, headers: { 'Content-Type': 'application/json' } }), 400, 'invalid_input', 'Meta.__proto__')
    })

    it('accepts dc naming this datacenter or empty; any other is a datacenter this server does not know, a 404', async () => {
      await applied({ Kind: 'service-defaults', Name: unique('dc') }, '?dc=dc1')
      await applied({ Kind: 'service-defaults', Name: unique('dc') }, '?dc=')
      const other = await put({ Kind: 'service-defaults', Name: unique('dc') }, '?dc=dc2')
      expectErrorShape(other, 404, 'unknown_datacenter', 'dc')
      expect(other.body.Error).to.include('unknown datacenter "dc2"')
      expectErrorShape(await get('service-defaults', 'web', '?dc=dc2'), 404, 'unknown_datacenter', 'dc')
      expectErrorShape(await list('service-defaults', '?dc=dc2'), 404, 'unknown_datacenter', 'dc')
      expectErrorShape(await agent.request('DELETE', '/v1/config/service-defaults/web?dc=dc2'), 404, 'unknown_datacenter', 'dc')
      // Repeated, dc counts by its first value, as other parameters do.
      expectErrorShape(await list('service-defaults', '?dc=dc2&dc=dc1'), 404, 'unknown_datacenter', 'dc')
      expect((await list('service-defaults', '?dc=dc1&dc=dc2')).status).to.equal(200)
    })

    it('a repeated ?token counts by its first value', async () => {
      const first = await agent.request('GET', `/v1/config/service-defaults?token=${agent.managementToken}&token=not-a-token`, { token: null })
      expect(first.status, first.text).to.equal(200)
      const second = await agent.request('GET', `/v1/config/service-defaults?token=not-a-token&token=${agent.managementToken}`, { token: null })
      expectErrorShape(second, 403, 'acl_not_found')
    })

    it('refuses a cas that is not a non-negative integer', async () => {
      expectErrorShape(await put({ Kind: 'service-defaults', Name: 'web' }, '?cas=abc'), 400, 'invalid_input', 'cas')
      expectErrorShape(await put({ Kind: 'service-defaults', Name: 'web' }, '?cas=-1'), 400, 'invalid_input', 'cas')
      expectErrorShape(await agent.request('DELETE', '/v1/config/service-defaults/web?cas=1.5'), 400, 'invalid_input', 'cas')
    })
  })

  describe('cas', () => {
    it('cas=0 applies only when the entry is absent', async () => {
      const name = unique('cas0')
      expect((await put({ Kind: 'service-defaults', Name: name, Protocol: 'tcp' }, '?cas=0')).body).to.equal(true)
      expect((await put({ Kind: 'service-defaults', Name: name, Protocol: 'http' }, '?cas=0')).body).to.equal(false)
      expect((await get('service-defaults', name)).body.Protocol).to.equal('tcp')
    })

    it('cas=N applies only when N is the current ModifyIndex', async () => {
      const name = unique('casn')
      await applied({ Kind: 'service-defaults', Name: name, Protocol: 'tcp' })
      const { ModifyIndex } = (await get('service-defaults', name)).body
      expect((await put({ Kind: 'service-defaults', Name: name, Protocol: 'http' }, `?cas=${ModifyIndex + 100}`)).body).to.equal(false)
      expect((await get('service-defaults', name)).body).to.include({ Protocol: 'tcp', ModifyIndex })
      expect((await put({ Kind: 'service-defaults', Name: name, Protocol: 'http' }, `?cas=${ModifyIndex}`)).body).to.equal(true)
      const after = (await get('service-defaults', name)).body
      expect(after.Protocol).to.equal('http')
      expect(after.ModifyIndex).to.be.above(ModifyIndex)
      // The same cas again no longer matches.
      expect((await put({ Kind: 'service-defaults', Name: name, Protocol: 'grpc' }, `?cas=${ModifyIndex}`)).body).to.equal(false)
    })

    it('lets exactly one of many concurrent writers with the same cas win, round after round', async () => {
      const name = unique('race')
      await applied({ Kind: 'service-defaults', Name: name })
      for (let round = 0; round < 5; round += 1) {
        const { ModifyIndex } = (await get('service-defaults', name)).body
        const writers = Array.from({ length: 20 }, (_, writer) => put({ Kind: 'service-defaults', Name: name, Writer: writer, Round: round }, `?cas=${ModifyIndex}`))
        const results = await Promise.all(writers)
        for (const result of results) expect(result.status, result.text).to.equal(200)
        const winners = results.map((result, writer) => (result.body === true ? writer : -1)).filter((writer) => writer >= 0)
        expect(winners, `round ${round}`).to.have.length(1)
        const stored = (await get('service-defaults', name)).body
        expect(stored).to.include({ Writer: winners[0], Round: round })
        expect(stored.ModifyIndex).to.be.above(ModifyIndex)
      }
    })

    it('lets exactly one of many concurrent creators with cas=0 win', async () => {
      const name = unique('create-race')
      const results = await Promise.all(Array.from({ length: 20 }, (_, writer) => put({ Kind: 'service-defaults', Name: name, Writer: writer }, '?cas=0')))
      expect(results.filter((result) => result.body === true)).to.have.length(1)
    })

    it('delete: without cas true (also when missing); cas=0 deletes nothing; cas=N only when it matches', async () => {
      const name = unique('del')
      await applied({ Kind: 'service-defaults', Name: name })
      const { ModifyIndex } = (await get('service-defaults', name)).body
      const path = `/v1/config/service-defaults/${name}`
      expect((await agent.request('DELETE', `${path}?cas=0`)).body).to.equal(false)
      expect((await agent.request('DELETE', `${path}?cas=${ModifyIndex + 1}`)).body).to.equal(false)
      expect((await get('service-defaults', name)).status).to.equal(200)
      expect((await agent.request('DELETE', `${path}?cas=${ModifyIndex}`)).body).to.equal(true)
      expect((await get('service-defaults', name)).status).to.equal(404)
      const again = await agent.request('DELETE', path)
      expect(again.status).to.equal(200)
      expect(again.body).to.equal(true)
      expect((await agent.request('DELETE', `${path}?cas=0`)).body).to.equal(true)
    })
  })

  describe('list and filter', () => {
    const kind = 'service-resolver'
    const prefix = 'flt'
    before(async () => {
      await applied({ Kind: kind, Name: `${prefix}-a`, Meta: { team: 'a' }, Subsets: { v1: { Filter: 'x' } }, Tags: ['red', 'blue'], Weight: 10 })
      await applied({ Kind: kind, Name: `${prefix}-b`, Meta: { team: 'b' }, Tags: ['green'], Weight: 20 })
      await applied({ Kind: kind, Name: `${prefix}-c`, Failover: { '*': { Targets: [{ Service: 'backup' }] } } })
    })

    async function names(filter: string): Promise<string[]> {
      const response = await list(kind, `?filter=${encodeURIComponent(filter)}`)
      expect(response.status, response.text).to.equal(200)
      return response.body.map((entry: { Name: string }) => entry.Name).filter((name: string) => name.startsWith(prefix)).sort()
    }

    it('filters over nested fields, arrays and numbers', async () => {
      expect(await names('Meta.team == "a"')).to.deep.equal([`${prefix}-a`])
      expect(await names('Subsets.v1.Filter == x')).to.deep.equal([`${prefix}-a`])
      expect(await names('"green" in Tags')).to.deep.equal([`${prefix}-b`])
      expect(await names('Weight == 20 or Meta.team == a')).to.deep.equal([`${prefix}-a`, `${prefix}-b`])
      expect(await names('Failover["*"].Targets.0.Service == backup')).to.deep.equal([`${prefix}-c`])
      expect(await names('Name matches "^flt-[ab]$" and not (Meta.team == b)')).to.deep.equal([`${prefix}-a`])
    })

    it('a filter that needs too much work over the entries is a 400 naming filter, answered quickly', async () => {
      const names = Array.from({ length: 4 }, (_, n) => `huge-${n}`)
      try {
        for (const name of names) await applied({ Kind: kind, Name: name, Meta: { k: 'a'.repeat(100_000) } })
        const pattern = `(${Array.from({ length: 40 }, (_, n) => 'a'.repeat(n + 1)).join('|')})x`
        const started = Date.now()
        const response = await list(kind, `?filter=${encodeURIComponent(`Meta.k matches "${pattern}"`)}`)
        expectErrorShape(response, 400, 'invalid_input', 'filter')
        expect(Date.now() - started).to.be.below(2_000)
      } finally {
        for (const name of names) await agent.request('DELETE', `/v1/config/${kind}/${name}`)
      }
    })

    it('a selector naming a field an entry lacks does not match, and is no error', async () => {
      expect(await names('NoSuchField == 1')).to.deep.equal([])
      // Negated operators too: a misspelt top-level field selects nothing rather than everything.
      expect(await names('NoSuchField != 1')).to.deep.equal([])
      expect(await names('x not in NoSuchField')).to.deep.equal([])
      // Meta.team on the entry without Meta walks through an absent field: no match.
      expect(await names('Meta.team != "a"')).to.deep.equal([`${prefix}-b`])
      // A key absent from a Meta that is there answers as go-bexpr answers for a missing map key.
      expect(await names('Meta.owner != "x"')).to.deep.equal([`${prefix}-a`, `${prefix}-b`])
      expect(await names('Meta.owner is empty')).to.deep.equal([`${prefix}-a`, `${prefix}-b`])
      expect(await names('Meta.owner == "x"')).to.deep.equal([])
      expect(await names('Meta is empty')).to.deep.equal([])
      // `not` negates the whole match, so this finds the entry without Meta.
      expect(await names('not Meta is not empty')).to.deep.equal([`${prefix}-c`])
    })

    it('answers a bad filter with a 400 naming filter and saying where', async () => {
      const response = await list(kind, `?filter=${encodeURIComponent('Meta.team ==')}`)
      expectErrorShape(response, 400, 'invalid_input', 'filter')
      expect(response.body.Error).to.match(/line 1, column \d+/)
      const multiline = await list(kind, `?filter=${encodeURIComponent('Weight == 1 and\n(Name ==')}`)
      expect(multiline.body.Error).to.match(/line 2, column \d+/)
    })

    it('answers [] for a kind with no entries', async () => {
      const response = await list('tcp-route')
      expect(response.status).to.equal(200)
      expect(response.body).to.deep.equal([])
    })

    it('keeps namespaces apart, and lists across them with ns=*', async () => {
      const name = unique('nsd')
      await applied({ Kind: 'http-route', Name: name }, '?ns=team-a')
      expect((await get('http-route', name)).status).to.equal(404)
      expect((await get('http-route', name, '?ns=team-a')).body.Namespace).to.equal('team-a')
      const everywhere = await list('http-route', '?ns=*')
      expect(everywhere.body.map((entry: { Name: string }) => entry.Name)).to.include(name)
      const defaults = await list('http-route')
      expect(defaults.body.map((entry: { Name: string }) => entry.Name)).to.not.include(name)
    })
  })

  describe('reads', () => {
    it('blocks a get until the entry changes past the given index', async () => {
      const name = unique('block')
      await applied({ Kind: 'service-defaults', Name: name })
      const first = await get('service-defaults', name)
      const index = Number(first.headers.get('x-service-index'))
      const started = Date.now()
      const waiting = get('service-defaults', name, `?index=${index}&wait=5s`)
      await sleep(200)
      await applied({ Kind: 'service-defaults', Name: name, Protocol: 'grpc' })
      const woken = await waiting
      expect(woken.body.Protocol).to.equal('grpc')
      expect(Number(woken.headers.get('x-service-index'))).to.be.above(index)
      expect(Date.now() - started).to.be.below(4_000)
    })

    it('blocks a list until its table changes', async () => {
      const first = await list('service-splitter')
      const index = Number(first.headers.get('x-service-index'))
      const waiting = list('service-splitter', `?index=${index}&wait=5s`)
      await sleep(200)
      const name = unique('block-list')
      await applied({ Kind: 'service-splitter', Name: name })
      const woken = await waiting
      expect(woken.body.map((entry: { Name: string }) => entry.Name)).to.include(name)
    })

    it('honours consistency modes and refuses stale with consistent', async () => {
      const consistent = await list('service-defaults', '?consistent')
      expect(consistent.status).to.equal(200)
      expect(consistent.headers.get('x-service-effective-consistency')).to.equal('consistent')
      expect((await list('service-defaults', '?stale')).headers.get('x-service-effective-consistency')).to.equal('stale')
      expectErrorShape(await list('service-defaults', '?stale&consistent'), 400, 'invalid_input')
    })
  })

  describe('permissions', () => {
    it('service-defaults: service:write on the entry name to write, service:read to get', async () => {
      const token = await secretWithRules(agent, 'service "perm-web" { policy = "write" }')
      expect((await put({ Kind: 'service-defaults', Name: 'perm-web' }, '', token)).body).to.equal(true)
      const denied = await put({ Kind: 'service-defaults', Name: 'perm-api' }, '', token)
      expectErrorShape(denied, 403, 'permission_denied')
      expect(denied.body.Error).to.include('service:write on "perm-api"')
      expect((await get('service-defaults', 'perm-web', '', token)).status).to.equal(200)
      await applied({ Kind: 'service-defaults', Name: 'perm-api' })
      const readDenied = await get('service-defaults', 'perm-api', '', token)
      expectErrorShape(readDenied, 403, 'permission_denied')
      expect(readDenied.body.Error).to.include('service:read on "perm-api"')
      expectErrorShape(await agent.request('DELETE', '/v1/config/service-defaults/perm-api', { token }), 403, 'permission_denied')
    })

    it('lists only what the caller may read, with X-Service-Results-Filtered-By-ACLs: true', async () => {
      await applied({ Kind: 'service-router', Name: 'acl-visible' })
      await applied({ Kind: 'service-router', Name: 'acl-hidden' })
      const token = await secretWithRules(agent, 'service "acl-visible" { policy = "read" }')
      const response = await list('service-router', '', token)
      expect(response.status).to.equal(200)
      expect(response.body.map((entry: { Name: string }) => entry.Name)).to.deep.equal(['acl-visible'])
      expect(response.headers.get('x-service-results-filtered-by-acls')).to.equal('true')
      const everything = await list('service-router')
      expect(everything.headers.get('x-service-results-filtered-by-acls')).to.equal(null)
    })

    it('mesh-scoped kinds: mesh:write or operator:write; the refusal names mesh:write', async () => {
      const none = await secretWithRules(agent, 'service_prefix "" { policy = "write" }')
      const denied = await put({ Kind: 'http-route', Name: unique('route') }, '', none)
      expectErrorShape(denied, 403, 'permission_denied')
      expect(denied.body.Error).to.include('mesh:write')
      const operator = await secretWithRules(agent, 'operator = "write"')
      expect((await put({ Kind: 'http-route', Name: unique('route') }, '', operator)).body).to.equal(true)
      const mesh = await secretWithRules(agent, 'mesh = "write"')
      expect((await put({ Kind: 'terminating-gateway', Name: unique('tgw') }, '', mesh)).body).to.equal(true)
      // http-route reads need mesh:read or operator:read; the service-only token sees nothing, flagged.
      const listed = await list('http-route', '', none)
      expect(listed.body).to.deep.equal([])
      expect(listed.headers.get('x-service-results-filtered-by-acls')).to.equal('true')
      expect((await list('http-route', '', operator)).body).to.not.be.empty
    })

    it('an explicit mesh rule wins over operator: mesh = "read" with operator = "write" may not write mesh kinds', async () => {
      const token = await secretWithRules(agent, 'mesh = "read"\noperator = "write"')
      const denied = await put({ Kind: 'http-route', Name: unique('route') }, '', token)
      expectErrorShape(denied, 403, 'permission_denied')
      expect(denied.body.Error).to.include('mesh:write')
      expect((await list('http-route', '', token)).status).to.equal(200)
    })

    it('mesh and proxy-defaults need no ACL to read, but still a valid token', async () => {
      await applied({ Kind: 'mesh' })
      await applied({ Kind: 'proxy-defaults' })
      const anonymous = await get('mesh', 'mesh', '', null as unknown as string)
      expect(anonymous.status, anonymous.text).to.equal(200)
      expect((await list('proxy-defaults', '', null as unknown as string)).body).to.have.length(1)
      expectErrorShape(await get('mesh', 'mesh', '', 'no-such-token'), 403, 'acl_not_found')
      const denied = await put({ Kind: 'mesh' }, '', null as unknown as string)
      expectErrorShape(denied, 403, 'permission_denied')
    })

    it('service-intentions: intentions:write on the destination to write, intentions:read to read', async () => {
      const token = await secretWithRules(agent, 'service "perm-dest" { policy = "read"\n intentions = "write" }')
      expect((await put({ Kind: 'service-intentions', Name: 'perm-dest', Sources: [] }, '', token)).body).to.equal(true)
      const denied = await put({ Kind: 'service-intentions', Name: 'perm-other' }, '', token)
      expectErrorShape(denied, 403, 'permission_denied')
      expect(denied.body.Error).to.include('intentions:write on "perm-other"')
      expect((await get('service-intentions', 'perm-dest', '', token)).status).to.equal(200)
      const serviceOnly = await secretWithRules(agent, 'service "perm-dest" { policy = "write"\n intentions = "deny" }')
      expectErrorShape(await put({ Kind: 'service-intentions', Name: 'perm-dest' }, '', serviceOnly), 403, 'permission_denied')
    })

    it('gateways: service:read on the name to get', async () => {
      await applied({ Kind: 'ingress-gateway', Name: 'perm-ingress' })
      const reader = await secretWithRules(agent, 'service "perm-ingress" { policy = "read" }')
      expect((await get('ingress-gateway', 'perm-ingress', '', reader)).status).to.equal(200)
      const other = await secretWithRules(agent, 'service "elsewhere" { policy = "read" }')
      expectErrorShape(await get('ingress-gateway', 'perm-ingress', '', other), 403, 'permission_denied')
    })
  })
})
