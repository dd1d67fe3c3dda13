/**
 * The Grafana dashboard (docs/grafana-dashboard.json) against the metrics an agent exposes: every series a panel
 * queries must be one the registry names (a renamed metric would leave an empty panel no test would notice), and
 * every panel takes its data source from the dashboard's Prometheus data-source variable, so the file imports into
 * any Grafana as it is.
 */
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { expect } from 'chai'
import { AgentMetrics } from '../../../src/metrics/registry.js'

interface Panel {
  type: string
  title: string
  datasource?: { type: string; uid: string }
  targets?: Array<{ expr: string; datasource: { type: string; uid: string } }>
}

const dashboard = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../../docs/grafana-dashboard.json'), 'utf8')) as {
  panels: Panel[]
  templating: { list: Array<{ name: string; type: string; query: unknown }> }
}

describe('metrics: the Grafana dashboard', () => {
  it('queries only series an agent exposes', async () => {
    const { text } = await new AgentMetrics().prometheus()
    const exposed = new Set([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].flatMap((match) => (match[2] === 'histogram' ? [`${match[1]}_bucket`, `${match[1]}_sum`, `${match[1]}_count`] : [match[1]!])))
    const queried = new Set(dashboard.panels.flatMap((panel) => panel.targets ?? []).flatMap((target) => [...target.expr.matchAll(/\bwarden_[a-z0-9_]+/g)].map((match) => match[0])))
    expect(queried.size).to.be.above(30)
    expect([...queried].filter((name) => !exposed.has(name))).to.deep.equal([])
  })

  it('takes every panel\'s data from the Prometheus data-source variable', () => {
    const variable = dashboard.templating.list.find((item) => item.name === 'datasource')
    expect(variable).to.include({ type: 'datasource', query: 'prometheus' })
    const graphs = dashboard.panels.filter((panel) => panel.type !== 'row')
    expect(graphs.length).to.be.above(20)
    for (const panel of graphs) {
      expect(panel.datasource, panel.title).to.deep.equal({ type: 'prometheus', uid: '${datasource}' })
      for (const target of panel.targets ?? []) expect(target.datasource, panel.title).to.deep.equal({ type: 'prometheus', uid: '${datasource}' })
    }
  })
})
