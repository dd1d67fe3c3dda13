/**
 * Consul's JSON form of `GET /v1/agent/metrics`, rendered from the registry's values: the shape of go-metrics'
 * `MetricsSummary` (hashicorp/go-metrics `inmem_endpoint.go`): `Timestamp`, `Gauges` (`Name`, `Value`, `Labels`),
 * `Points` (always empty here, as in Consul), `Counters` and `Samples` (`Name`, `Count`, `Rate`, `Sum`, `Min`,
 * `Max`, `Mean`, `Stddev`, `Labels`), each list sorted by name, then labels.
 *
 * Where warden's numbers differ from Consul's (README, Divergences): Consul reports the last 10-second interval of
 * its in-memory sink; warden reports totals since the agent started, so `Count` and `Sum` are totals and `Rate` is
 * per second since the start. A counter's increments are all 1 (names.ts), so its `Min`, `Max` and `Mean` are 1 and
 * its `Stddev` 0. A sample (a histogram, in milliseconds as Consul's timers) has its exact `Count`, `Sum` and
 * `Mean`; its `Min`, `Max` and `Stddev` are estimated from the buckets (the bounds of the lowest and highest buckets
 * that hold an observation; the spread of the buckets' midpoints), since a histogram keeps no single observation.
 *
 * Names are Consul's dotted ones: warden's own from names.ts; prom-client's process metrics map
 * `warden_process_resident_memory_bytes` to `warden.process.resident_memory_bytes`. Counters not of names.ts (the
 * process's CPU seconds) are amounts, not events, and go under Gauges with their totals.
 */
import { jsonName, METRICS, PROMETHEUS_PREFIX, prometheusName, type MetricSpec } from './names.js'

export interface ConsulGauge {
  Name: string
  Value: number
  Labels: Record<string, string>
}

export interface ConsulSampled {
  Name: string
  Count: number
  Rate: number
  Sum: number
  Min: number
  Max: number
  Mean: number
  Stddev: number
  Labels: Record<string, string>
}

export interface ConsulMetrics {
  Timestamp: string
  Gauges: ConsulGauge[]
  Points: never[]
  Counters: ConsulSampled[]
  Samples: ConsulSampled[]
}

/** A metric family as prom-client's getMetricsAsJSON gives it (only what is read here). */
export interface MetricFamily {
  name: string
  type: string
  values: ReadonlyArray<{ value: number; labels: Readonly<Record<string, string | number | undefined>>; metricName?: string }>
}

const SPECS_BY_PROMETHEUS_NAME = new Map<string, MetricSpec>(Object.values(METRICS).map((spec) => [prometheusName(spec), spec]))

/**
 * Go's `time.Time.String()` of a UTC time rounded to the second, as Consul's Timestamp: `2024-05-01 12:00:00 +0000 UTC`.
 */
export function goTimestamp(nowMs: number): string {
  const iso = new Date(Math.round(nowMs / 1000) * 1000).toISOString()
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)} +0000 UTC`
}

/** The JSON name of a metric family: names.ts for warden's own, else the prefix's word then the rest. */
export function consulName(family: Pick<MetricFamily, 'name' | 'type'>): string {
  const spec = SPECS_BY_PROMETHEUS_NAME.get(family.name)
  if (spec !== undefined) return jsonName(spec)
  const rest = family.name.startsWith(PROMETHEUS_PREFIX) ? family.name.slice(PROMETHEUS_PREFIX.length) : family.name
  const base = family.type === 'histogram' ? rest.replace(/_seconds$/, '') : rest
  const split = base.indexOf('_')
  return split === -1 ? `warden.${base}` : `warden.${base.slice(0, split)}.${base.slice(split + 1)}`
}

function labelsOf(labels: Readonly<Record<string, string | number | undefined>>, leave?: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(labels)) if (name !== leave && value !== undefined) out[name] = String(value)
  return out
}

function byNameThenLabels(a: { Name: string; Labels: Record<string, string> }, b: { Name: string; Labels: Record<string, string> }): number {
  if (a.Name !== b.Name) return a.Name < b.Name ? -1 : 1
  const left = JSON.stringify(a.Labels)
  const right = JSON.stringify(b.Labels)
  return left < right ? -1 : left > right ? 1 : 0
}

function counterSample(name: string, value: number, labels: Record<string, string>, uptimeSeconds: number): ConsulSampled {
  const unit = value > 0 ? 1 : 0
  return { Name: name, Count: value, Rate: value / uptimeSeconds, Sum: value, Min: unit, Max: unit, Mean: unit, Stddev: 0, Labels: labels }
}

interface HistogramSeries {
  labels: Record<string, string>
  /** Cumulative counts at each finite upper bound, in seconds, in increasing order. */
  buckets: Array<{ bound: number; cumulative: number }>
  sum: number
  count: number
}

function histogramSeries(family: MetricFamily): HistogramSeries[] {
  const series = new Map<string, HistogramSeries>()
  for (const value of family.values) {
    const labels = labelsOf(value.labels, 'le')
    const key = JSON.stringify(labels)
    let entry = series.get(key)
    if (entry === undefined) {
      entry = { labels, buckets: [], sum: 0, count: 0 }
      series.set(key, entry)
    }
    const metricName = value.metricName ?? ''
    if (metricName.endsWith('_sum')) entry.sum = value.value
    else if (metricName.endsWith('_count')) entry.count = value.value
    else if (metricName.endsWith('_bucket') && value.labels['le'] !== '+Inf') entry.buckets.push({ bound: Number(value.labels['le']), cumulative: value.value })
  }
  for (const entry of series.values()) entry.buckets.sort((a, b) => a.bound - b.bound)
  return [...series.values()]
}

/** A histogram's series as Consul's sample, in milliseconds (see the file comment for what is estimated). */
export function histogramSample(name: string, series: HistogramSeries, uptimeSeconds: number): ConsulSampled {
  const { count } = series
  const sumMs = series.sum * 1000
  const mean = count > 0 ? sumMs / count : 0
  let min = 0
  let max = 0
  let squares = 0
  let previousBound = 0
  let previousCumulative = 0
  for (const { bound, cumulative } of series.buckets) {
    const inBucket = cumulative - previousCumulative
    if (inBucket > 0) {
      if (previousCumulative === 0) min = previousBound * 1000
      max = bound * 1000
      const midpoint = ((previousBound + bound) / 2) * 1000
      squares += inBucket * (midpoint - mean) ** 2
    }
    previousBound = bound
    previousCumulative = cumulative
  }
  // Observations above the last bound: at least that bound.
  const above = count - previousCumulative
  if (above > 0) {
    if (previousCumulative === 0) min = previousBound * 1000
    max = previousBound * 1000
    squares += above * (previousBound * 1000 - mean) ** 2
  }
  const stddev = count > 1 ? Math.sqrt(squares / count) : 0
  return { Name: name, Count: count, Rate: sumMs / uptimeSeconds, Sum: sumMs, Min: min, Max: max, Mean: mean, Stddev: stddev, Labels: series.labels }
}

export function consulMetrics(families: readonly MetricFamily[], options: { nowMs: number; uptimeSeconds: number }): ConsulMetrics {
  const gauges: ConsulGauge[] = []
  const counters: ConsulSampled[] = []
  const samples: ConsulSampled[] = []
  for (const family of families) {
    const name = consulName(family)
    if (family.type === 'histogram') {
      for (const series of histogramSeries(family)) samples.push(histogramSample(name, series, options.uptimeSeconds))
    } else if (family.type === 'counter' && SPECS_BY_PROMETHEUS_NAME.has(family.name)) {
      for (const value of family.values) counters.push(counterSample(name, value.value, labelsOf(value.labels), options.uptimeSeconds))
    } else if (family.type === 'gauge' || family.type === 'counter') {
      for (const value of family.values) gauges.push({ Name: name, Value: value.value, Labels: labelsOf(value.labels) })
    }
  }
  return { Timestamp: goTimestamp(options.nowMs), Gauges: gauges.sort(byNameThenLabels), Points: [], Counters: counters.sort(byNameThenLabels), Samples: samples.sort(byNameThenLabels) }
}
