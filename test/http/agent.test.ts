/**
 * `GET /v1/agent/metrics` (src/http/routes/agent.ts) against a real agent: Consul's JSON form and the Prometheus text
 * form, `agent:read` on the node's name (as Consul), metric names and types, and values that must move: a write raises
 * the applied index and the token table's index, requests are counted by route pattern, and a refusal counts as an
 * ACL denial.
 */
import { expect } from 'chai'
import type { ConsulGauge as Gauge, ConsulSampled as Sampled } from '../../src/metrics/consul-json.js'
import { startAgent, type AgentProcess } from '../support/agent.js'

function gaugeValue(body: { Gauges: Gauge[] }, name: string, labels: Record<string, string> = {}): number | undefined {
  return body.Gauges.find((gauge) => gauge.Name === name && JSON.stringify(gauge.Labels) === JSON.stringify(labels))?.Value
}

function counterCount(body: { Counters: Sampled[] }, name: string, labels: Record<string, string>): number {
  return body.Counters.find((counter) => counter.Name === name && JSON.stringify(counter.Labels) === JSON.stringify(labels))?.Count ?? 0
}

/** The sample value of a series in the text format (`name{labels} value`), or undefined. */
function textValue(text: string, series: string): number | undefined {
  const line = text.split('\n').find((item) => item.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

describe('agent endpoints: GET /v1/agent/metrics', () => {
  let agent: AgentProcess
  before(async () => {
    agent = await startAgent()
  })
  after(async () => {
    await agent.stop()
  })

  it('answers Consul\'s JSON shape: Timestamp, Gauges, Points, Counters, Samples with their fields', async () => {
    const response = await agent.request('GET', '/v1/agent/metrics')
    expect(response.status).to.equal(200)
    expect(response.headers.get('content-type')).to.match(/^application\/json/)
    expect(Object.keys(response.body)).to.deep.equal(['Timestamp', 'Gauges', 'Points', 'Counters', 'Samples'])
    expect(response.body.Timestamp).to.match(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+0000 UTC$/)
    expect(response.body.Points).to.deep.equal([])
    for (const gauge of response.body.Gauges as Gauge[]) expect(Object.keys(gauge)).to.deep.equal(['Name', 'Value', 'Labels'])
    for (const sampled of [...response.body.Counters, ...response.body.Samples] as Sampled[]) {
      expect(Object.keys(sampled)).to.deep.equal(['Name', 'Count', 'Rate', 'Sum', 'Min', 'Max', 'Mean', 'Stddev', 'Labels'])
    }
    for (const item of [...response.body.Gauges, ...response.body.Counters, ...response.body.Samples] as Gauge[]) expect(item.Name).to.match(/^warden\./)
  })

  it('names the Raft, HTTP, ACL, replication and process metrics in the JSON form, each under its kind', async () => {
    const body = (await agent.request('GET', '/v1/agent/metrics')).body as { Gauges: Gauge[]; Counters: Sampled[]; Samples: Sampled[] }
    const gauges = new Set(body.Gauges.map((gauge) => gauge.Name))
    const counters = new Set(body.Counters.map((counter) => counter.Name))
    const samples = new Set(body.Samples.map((sample) => sample.Name))
    for (const name of ['warden.raft.term', 'warden.raft.commit_index', 'warden.raft.applied_index', 'warden.raft.is_leader', 'warden.state.table_index', 'warden.http.blocking_queries', 'warden.http.body_bytes_in_flight', 'warden.acl.cache_entries', 'warden.replication.running', 'warden.process.resident_memory_bytes', 'warden.nodejs.eventloop_lag_seconds']) {
      expect(gauges.has(name), name).to.equal(true)
    }
    for (const name of ['warden.raft.leader_changes', 'warden.raft.snapshots_taken', 'warden.acl.resolutions', 'warden.acl.cache_hits', 'warden.acl.denials', 'warden.http.requests']) {
      expect(counters.has(name), name).to.equal(true)
    }
    for (const name of ['warden.raft.append', 'warden.raft.apply', 'warden.http.request_duration']) expect(samples.has(name), name).to.equal(true)
    // A single server leads, and has seen one leader since it started.
    expect(gaugeValue(body, 'warden.raft.is_leader')).to.equal(1)
    expect(counterCount(body, 'warden.raft.leader_changes', {})).to.equal(1)
  })

  it('answers the Prometheus text format with ?format=prometheus, every name prefixed warden_ and typed', async () => {
    const response = await agent.request('GET', '/v1/agent/metrics?format=prometheus')
    expect(response.status).to.equal(200)
    expect(response.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/)
    const text = response.text
    const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((match) => [match[1]!, match[2]!]))
    expect(Object.fromEntries(['warden_raft_applied_index', 'warden_raft_leader_changes_total', 'warden_raft_append_seconds', 'warden_http_requests_total', 'warden_http_request_duration_seconds', 'warden_acl_denials_total', 'warden_http_blocking_queries', 'warden_process_resident_memory_bytes', 'warden_nodejs_gc_duration_seconds'].map((name) => [name, types.get(name)]))).to.deep.equal({
      warden_raft_applied_index: 'gauge',
      warden_raft_leader_changes_total: 'counter',
      warden_raft_append_seconds: 'histogram',
      warden_http_requests_total: 'counter',
      warden_http_request_duration_seconds: 'histogram',
      warden_acl_denials_total: 'counter',
      warden_http_blocking_queries: 'gauge',
      warden_process_resident_memory_bytes: 'gauge',
      warden_nodejs_gc_duration_seconds: 'histogram',
    })
    const names = text.split('\n').filter((line) => line !== '' && !line.startsWith('#')).map((line) => line.split(/[{ ]/)[0]!)
    expect(names.length).to.be.above(50)
    expect(names.filter((name) => !name.startsWith('warden_'))).to.deep.equal([])
  })

  it('raises the applied index, the token table\'s index and the apply count with a write', async () => {
    const before = await agent.request('GET', '/v1/agent/metrics?format=prometheus')
    const appliedBefore = textValue(before.text, 'warden_raft_applied_index')!
    const tokensBefore = textValue(before.text, 'warden_state_table_index{table="token"}')!
    const appliesBefore = textValue(before.text, 'warden_raft_apply_seconds_count')!
    const created = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'raises the index' } })
    expect(created.status).to.equal(200)
    const after = await agent.request('GET', '/v1/agent/metrics?format=prometheus')
    expect(textValue(after.text, 'warden_raft_applied_index')).to.be.at.least(created.body.CreateIndex).and.above(appliedBefore)
    expect(textValue(after.text, 'warden_raft_commit_index')).to.be.at.least(created.body.CreateIndex)
    expect(textValue(after.text, 'warden_state_table_index{table="token"}')).to.equal(created.body.CreateIndex).and.above(tokensBefore)
    expect(textValue(after.text, 'warden_raft_apply_seconds_count')).to.be.above(appliesBefore)
    // The same value in the JSON form.
    const json = await agent.request('GET', '/v1/agent/metrics')
    expect(gaugeValue(json.body, 'warden.raft.applied_index')).to.be.at.least(created.body.CreateIndex)
  })

  it('counts requests by route pattern and status, never by the raw path', async () => {
    const created = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'read twice' } })
    await agent.request('GET', `/v1/acl/token/${created.body.AccessorID}`)
    await agent.request('GET', '/v1/acl/token/00000000-0000-4000-8000-000000000000')
    const body = (await agent.request('GET', '/v1/agent/metrics')).body
    expect(counterCount(body, 'warden.http.requests', { method: 'GET', route: '/v1/acl/token/:id', status: '200' })).to.be.at.least(1)
    expect(counterCount(body, 'warden.http.requests', { method: 'GET', route: '/v1/acl/token/:id', status: '404' })).to.be.at.least(1)
    const routes = (body.Counters as Sampled[]).filter((counter) => counter.Name === 'warden.http.requests').map((counter) => counter.Labels['route'])
    expect(routes.filter((route) => route !== undefined && route.includes(created.body.AccessorID))).to.deep.equal([])
  })

  it('refuses a token without agent:read on the node (403) and counts the refusal as an ACL denial', async () => {
    const deniedBefore = counterCount((await agent.request('GET', '/v1/agent/metrics')).body, 'warden.acl.denials', { code: 'permission_denied' })
    const anonymous = await agent.request('GET', '/v1/agent/metrics', { token: null })
    expect(anonymous.status).to.equal(403)
    expect(anonymous.body.Code).to.equal('permission_denied')
    expect(anonymous.body.Error).to.include('agent:read on "test-node"')
    const prometheus = await agent.request('GET', '/v1/agent/metrics?format=prometheus', { token: null })
    expect(prometheus.status).to.equal(403)
    const unknown = await agent.request('GET', '/v1/agent/metrics', { token: '00000000-0000-4000-8000-00000000abcd' })
    expect(unknown.status).to.equal(403)
    expect(unknown.body.Code).to.equal('acl_not_found')
    const body = (await agent.request('GET', '/v1/agent/metrics')).body
    expect(counterCount(body, 'warden.acl.denials', { code: 'permission_denied' })).to.equal(deniedBefore + 2)
    expect(counterCount(body, 'warden.acl.denials', { code: 'acl_not_found' })).to.be.at.least(1)
  })

  it('serves a token with agent:read on the node, and refuses one whose agent rule names another node', async () => {
    const reader = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'metrics-reader', Rules: 'agent "test-node" { policy = "read" }' } })
    const other = await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'other-node-reader', Rules: 'agent "elsewhere" { policy = "read" }' } })
    const allowed = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: reader.body.ID }] } })
    const refused = await agent.request('PUT', '/v1/acl/token', { body: { Policies: [{ ID: other.body.ID }] } })
    expect((await agent.request('GET', '/v1/agent/metrics?format=prometheus', { token: allowed.body.SecretID })).status).to.equal(200)
    expect((await agent.request('GET', '/v1/agent/metrics', { token: allowed.body.SecretID })).status).to.equal(200)
    expect((await agent.request('GET', '/v1/agent/metrics', { token: refused.body.SecretID })).status).to.equal(403)
  })

  it('refuses an unknown format with a 400 naming the parameter', async () => {
    const response = await agent.request('GET', '/v1/agent/metrics?format=xml')
    expect(response.status).to.equal(400)
    expect(response.body).to.include({ Code: 'invalid_input', Field: 'format' })
  })
})
