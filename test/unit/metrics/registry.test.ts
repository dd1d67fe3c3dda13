/**
 * One agent's metrics (src/metrics/registry.ts) over stand-in sources: every metric of names.ts is in both forms with
 * its type, values read from the sources when scraped (and read again at the next scrape), requests counted by route
 * pattern and status, ACL refusals counted, and registries kept apart (two agents in one process never share one).
 */
import { expect } from 'chai'
import { AgentMetrics, type MetricSources, type RaftView } from '../../../src/metrics/registry.js'
import { jsonName, METRICS, prometheusName } from '../../../src/metrics/names.js'
import type { ConsulMetrics } from '../../../src/metrics/consul-json.js'

function raftView(appliedIndex: number): RaftView {
  return {
    term: 2,
    commitIndex: appliedIndex,
    appliedIndex,
    lastIndex: appliedIndex,
    snapshotIndex: 0,
    isLeader: true,
    leaderKnown: true,
    lastContactMs: 0,
    voters: 3,
    leaderChanges: 1,
    becameLeader: 1,
    snapshotsTaken: 0,
    snapshotsInstalled: 0,
    snapshotsSent: 0,
    appliedShipped: 0,
    appliedUnshipped: 0,
    followers: [
      { id: 'n2', matchIndex: appliedIndex, lagEntries: 0, lastContactMs: 40 },
      { id: 'n3', matchIndex: appliedIndex - 5, lagEntries: 5, lastContactMs: 1500 },
    ],
  }
}

function sources(state: { applied: number; raftReads: number }): MetricSources {
  return {
    raft: () => {
      state.raftReads += 1
      return raftView(state.applied)
    },
    tableIndexes: () => [['token', state.applied]],
    acl: () => ({ resolutions: 10, cacheHits: 7, remoteLookups: 0, cacheEntries: 3 }),
    blockingQueries: () => 4,
    bodyBytesInFlight: () => 512,
    links: () => [{ kind: 'raft', open: 2, framesDropped: 1, framesRejected: 0, handshakesFailed: 2, peers: [{ peer: 'n2', connected: true, queueBytes: 0 }, { peer: 'n3', connected: false, queueBytes: 900 }] }],
    replication: () => Promise.resolve({ running: true, lagSeconds: 1.5, streams: [{ stream: 'policies', index: 40, errors: 2 }] }),
  }
}

function gauge(json: ConsulMetrics, name: string, labels: Record<string, string> = {}): number | undefined {
  return json.Gauges.find((item) => item.Name === name && JSON.stringify(item.Labels) === JSON.stringify(labels))?.Value
}

function counter(json: ConsulMetrics, name: string, labels: Record<string, string> = {}): number | undefined {
  return json.Counters.find((item) => item.Name === name && JSON.stringify(item.Labels) === JSON.stringify(labels))?.Count
}

describe('metrics: an agent\'s registry', () => {
  it('exposes every metric of names.ts in the text format with its type, every name prefixed warden_', async () => {
    const metrics = new AgentMetrics({ processMetrics: false })
    metrics.readFrom(sources({ applied: 10, raftReads: 0 }))
    const { text, contentType } = await metrics.prometheus()
    expect(contentType).to.match(/^text\/plain; version=0\.0\.4/)
    for (const spec of Object.values(METRICS)) {
      expect(text, prometheusName(spec)).to.include(`# TYPE ${prometheusName(spec)} ${spec.kind}\n`)
    }
    const names = text.split('\n').filter((line) => line !== '' && !line.startsWith('#')).map((line) => line.split(/[{ ]/)[0]!)
    expect(names.filter((name) => !name.startsWith('warden_'))).to.deep.equal([])
  })

  it('reads the sources when scraped: a later scrape sees a later applied index', async () => {
    const state = { applied: 10, raftReads: 0 }
    const metrics = new AgentMetrics({ processMetrics: false })
    metrics.readFrom(sources(state))
    expect((await metrics.prometheus()).text).to.include('\nwarden_raft_applied_index 10\n')
    state.applied = 11
    const json = await metrics.consul()
    expect(gauge(json, 'warden.raft.applied_index')).to.equal(11)
    expect(gauge(json, 'warden.state.table_index', { table: 'token' })).to.equal(11)
  })

  it('reads each source once a scrape, however many metrics it feeds', async () => {
    const state = { applied: 10, raftReads: 0 }
    const metrics = new AgentMetrics({ processMetrics: false })
    metrics.readFrom(sources(state))
    await metrics.prometheus()
    expect(state.raftReads).to.equal(1)
    await metrics.consul()
    expect(state.raftReads).to.equal(2)
  })

  it('gives followers, peers, links and replication streams as labelled series', async () => {
    const metrics = new AgentMetrics({ processMetrics: false })
    metrics.readFrom(sources({ applied: 10, raftReads: 0 }))
    const json = await metrics.consul()
    expect(gauge(json, 'warden.raft.follower.lag_entries', { follower: 'n3' })).to.equal(5)
    expect(gauge(json, 'warden.raft.follower.last_contact_seconds', { follower: 'n3' })).to.equal(1.5)
    expect(gauge(json, 'warden.links.open', { kind: 'raft' })).to.equal(2)
    expect(gauge(json, 'warden.links.peer_connected', { peer: 'n3' })).to.equal(0)
    expect(counter(json, 'warden.links.handshakes_failed', { kind: 'raft' })).to.equal(2)
    expect(gauge(json, 'warden.replication.running')).to.equal(1)
    expect(gauge(json, 'warden.replication.index', { stream: 'policies' })).to.equal(40)
    expect(counter(json, 'warden.replication.errors', { stream: 'policies' })).to.equal(2)
    expect(counter(json, 'warden.acl.cache_hits')).to.equal(7)
    expect(gauge(json, 'warden.http.blocking_queries')).to.equal(4)
  })

  it('counts requests by route pattern and status, times all but blocking ones, and counts ACL refusals by code', async () => {
    const metrics = new AgentMetrics({ processMetrics: false })
    metrics.recordRequest('GET', '/v1/acl/token/:id', 200, 0.002, undefined)
    metrics.recordRequest('GET', '/v1/acl/token/:id', 200, 0.003, undefined)
    metrics.recordRequest('GET', '/v1/acl/tokens', 200, undefined, undefined)
    metrics.recordRequest('PUT', '/v1/acl/token', 403, 0.001, 'permission_denied')
    const json = await metrics.consul()
    expect(counter(json, 'warden.http.requests', { method: 'GET', route: '/v1/acl/token/:id', status: '200' })).to.equal(2)
    expect(counter(json, 'warden.http.requests', { method: 'GET', route: '/v1/acl/tokens', status: '200' })).to.equal(1)
    const timed = json.Samples.filter((sample) => sample.Name === jsonName(METRICS.httpRequestDuration))
    expect(timed.map((sample) => [sample.Labels['method'], sample.Labels['route'], sample.Count])).to.deep.equal([
      ['GET', '/v1/acl/token/:id', 2],
      ['PUT', '/v1/acl/token', 1],
    ])
    expect(counter(json, 'warden.acl.denials', { code: 'permission_denied' })).to.equal(1)
    expect(counter(json, 'warden.acl.denials', { code: 'acl_not_found' })).to.equal(0)
  })

  it('keeps two agents\' registries apart', async () => {
    const first = new AgentMetrics({ processMetrics: false })
    const second = new AgentMetrics({ processMetrics: false })
    first.recordRequest('GET', '/v1/status/leader', 200, 0.001, undefined)
    expect(counter(await first.consul(), 'warden.http.requests', { method: 'GET', route: '/v1/status/leader', status: '200' })).to.equal(1)
    expect(counter(await second.consul(), 'warden.http.requests', { method: 'GET', route: '/v1/status/leader', status: '200' })).to.equal(undefined)
  })

  it('collects the process metrics into its own registry with the warden_ prefix', async () => {
    const metrics = new AgentMetrics()
    const { text } = await metrics.prometheus()
    expect(text).to.include('# TYPE warden_process_resident_memory_bytes gauge')
    expect(text).to.include('# TYPE warden_nodejs_eventloop_lag_seconds gauge')
    expect(text).to.include('# TYPE warden_nodejs_gc_duration_seconds histogram')
  })
})
