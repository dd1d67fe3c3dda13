/**
 * Consul's JSON form of the metrics (src/metrics/consul-json.ts), rendered from metric families shaped as prom-client
 * gives them: the go-metrics summary's fields and order, Consul's dotted names, counters as totals of unit
 * increments, and histograms as samples in milliseconds whose Min, Max and Stddev come from the buckets.
 */
import { expect } from 'chai'
import { consulMetrics, consulName, goTimestamp, histogramSample, type MetricFamily } from '../../../src/metrics/consul-json.js'

const NOW_MS = Date.UTC(2024, 4, 1, 12, 0, 0, 400)

function histogram(name: string, buckets: Array<[number, number]>, sum: number, labels: Record<string, string> = {}): MetricFamily {
  const count = buckets.at(-1)?.[1] ?? 0
  return {
    name,
    type: 'histogram',
    values: [
      ...buckets.map(([le, cumulative]) => ({ value: cumulative, labels: { ...labels, le }, metricName: `${name}_bucket` })),
      { value: count, labels: { ...labels, le: '+Inf' }, metricName: `${name}_bucket` },
      { value: sum, labels, metricName: `${name}_sum` },
      { value: count, labels, metricName: `${name}_count` },
    ],
  }
}

describe('metrics: Consul JSON form', () => {
  it('writes the Timestamp as Go prints a UTC time rounded to the second', () => {
    expect(goTimestamp(NOW_MS)).to.equal('2024-05-01 12:00:00 +0000 UTC')
    expect(goTimestamp(NOW_MS + 200)).to.equal('2024-05-01 12:00:01 +0000 UTC')
  })

  it('names warden\'s metrics as names.ts does, and prom-client\'s process metrics by their first word', () => {
    expect(consulName({ name: 'warden_raft_applied_index', type: 'gauge' })).to.equal('warden.raft.applied_index')
    expect(consulName({ name: 'warden_http_requests_total', type: 'counter' })).to.equal('warden.http.requests')
    expect(consulName({ name: 'warden_raft_append_seconds', type: 'histogram' })).to.equal('warden.raft.append')
    expect(consulName({ name: 'warden_process_resident_memory_bytes', type: 'gauge' })).to.equal('warden.process.resident_memory_bytes')
    expect(consulName({ name: 'warden_nodejs_gc_duration_seconds', type: 'histogram' })).to.equal('warden.nodejs.gc_duration')
  })

  it('has the summary\'s five fields, Points empty, each list sorted by name then labels', () => {
    const families: MetricFamily[] = [
      { name: 'warden_raft_term', type: 'gauge', values: [{ value: 3, labels: {} }] },
      { name: 'warden_state_table_index', type: 'gauge', values: [{ value: 9, labels: { table: 'token' } }, { value: 4, labels: { table: 'policy' } }] },
      { name: 'warden_raft_applied_index', type: 'gauge', values: [{ value: 12, labels: {} }] },
    ]
    const rendered = consulMetrics(families, { nowMs: NOW_MS, uptimeSeconds: 10 })
    expect(Object.keys(rendered)).to.deep.equal(['Timestamp', 'Gauges', 'Points', 'Counters', 'Samples'])
    expect(rendered.Points).to.deep.equal([])
    expect(rendered.Gauges).to.deep.equal([
      { Name: 'warden.raft.applied_index', Value: 12, Labels: {} },
      { Name: 'warden.raft.term', Value: 3, Labels: {} },
      { Name: 'warden.state.table_index', Value: 4, Labels: { table: 'policy' } },
      { Name: 'warden.state.table_index', Value: 9, Labels: { table: 'token' } },
    ])
  })

  it('gives a counter of warden as the total of unit increments since the start, with its rate over that time', () => {
    const families: MetricFamily[] = [
      { name: 'warden_http_requests_total', type: 'counter', values: [{ value: 20, labels: { method: 'GET', route: '/v1/acl/tokens', status: 200 } }] },
      { name: 'warden_raft_snapshots_taken_total', type: 'counter', values: [{ value: 0, labels: {} }] },
    ]
    const { Counters, Gauges } = consulMetrics(families, { nowMs: NOW_MS, uptimeSeconds: 10 })
    expect(Gauges).to.deep.equal([])
    expect(Counters).to.deep.equal([
      { Name: 'warden.http.requests', Count: 20, Rate: 2, Sum: 20, Min: 1, Max: 1, Mean: 1, Stddev: 0, Labels: { method: 'GET', route: '/v1/acl/tokens', status: '200' } },
      { Name: 'warden.raft.snapshots_taken', Count: 0, Rate: 0, Sum: 0, Min: 0, Max: 0, Mean: 0, Stddev: 0, Labels: {} },
    ])
  })

  it('puts counters that are amounts, not events (process CPU seconds), under Gauges with their totals', () => {
    const families: MetricFamily[] = [{ name: 'warden_process_cpu_seconds_total', type: 'counter', values: [{ value: 1.5, labels: {} }] }]
    const { Counters, Gauges } = consulMetrics(families, { nowMs: NOW_MS, uptimeSeconds: 10 })
    expect(Counters).to.deep.equal([])
    expect(Gauges).to.deep.equal([{ Name: 'warden.process.cpu_seconds_total', Value: 1.5, Labels: {} }])
  })

  it('gives a histogram as a sample in milliseconds: exact Count, Sum and Mean, Min and Max from the buckets holding observations', () => {
    // Two observations in (1 ms, 2 ms], one in (2 ms, 5 ms]; their sum is 7 ms.
    const family = histogram('warden_raft_apply_seconds', [[0.001, 0], [0.002, 2], [0.005, 3]], 0.007)
    const { Samples } = consulMetrics([family], { nowMs: NOW_MS, uptimeSeconds: 7 })
    expect(Samples).to.have.length(1)
    const sample = Samples[0]!
    expect(sample.Name).to.equal('warden.raft.apply')
    expect(sample.Count).to.equal(3)
    expect(sample.Sum).to.be.closeTo(7, 1e-9)
    expect(sample.Mean).to.be.closeTo(7 / 3, 1e-9)
    expect(sample.Rate).to.be.closeTo(1, 1e-9)
    expect(sample.Min).to.equal(1)
    expect(sample.Max).to.equal(5)
    expect(sample.Labels).to.deep.equal({})
    // Midpoints 1.5, 1.5 and 3.5 around the mean 7/3.
    const mean = 7 / 3
    expect(sample.Stddev).to.be.closeTo(Math.sqrt((2 * (1.5 - mean) ** 2 + (3.5 - mean) ** 2) / 3), 1e-9)
  })

  it('keeps one sample per label set, without the bucket label, and an empty histogram as zeros', () => {
    const family: MetricFamily = {
      name: 'warden_http_request_duration_seconds',
      type: 'histogram',
      values: [
        ...histogram('warden_http_request_duration_seconds', [[0.01, 1]], 0.004, { method: 'GET', route: '/a' }).values,
        ...histogram('warden_http_request_duration_seconds', [[0.01, 0]], 0, { method: 'PUT', route: '/b' }).values,
      ],
    }
    const { Samples } = consulMetrics([family], { nowMs: NOW_MS, uptimeSeconds: 1 })
    expect(Samples.map((sample) => [sample.Labels, sample.Count])).to.deep.equal([
      [{ method: 'GET', route: '/a' }, 1],
      [{ method: 'PUT', route: '/b' }, 0],
    ])
    expect(Samples[1]).to.include({ Sum: 0, Min: 0, Max: 0, Mean: 0, Stddev: 0 })
  })

  it('counts observations above the last bound as at that bound', () => {
    const series = { labels: {}, buckets: [{ bound: 0.001, cumulative: 0 }, { bound: 10, cumulative: 0 }], sum: 30, count: 2 }
    const sample = histogramSample('warden.raft.append', series, 1)
    expect(sample).to.include({ Count: 2, Min: 10_000, Max: 10_000, Mean: 15_000 })
  })
})
