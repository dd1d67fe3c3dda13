/**
 * Draws the chart of a results file again (after a change to the chart's code, say), next to it as .svg.
 *
 *   npx tsx scripts/bench/render-chart.ts scripts/bench/results/latest.json
 */
import { readFile, writeFile } from 'node:fs/promises'
import { renderSvg } from './report.js'
import type { Results } from './results.js'

const path = process.argv[2]
if (path === undefined || !path.endsWith('.json')) {
  process.stderr.write('usage: render-chart.ts RESULTS.json\n')
  process.exit(2)
}
const results = JSON.parse(await readFile(path, 'utf8')) as Results
await writeFile(path.replace(/\.json$/, '.svg'), renderSvg(results))
