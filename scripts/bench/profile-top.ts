/**
 * Summarizes V8 .cpuprofile files (from `npm run bench -- --profile DIR`, which runs the agents under --cpu-prof):
 * the functions with the most self time, and the most inclusive time (a function and everything it called), with
 * the share of the sampled time spent idle. Enough to find the hot spots without opening a profiler UI.
 *
 *   npx tsx scripts/bench/profile-top.ts FILE.cpuprofile [...] [--top N] [--filter TEXT]
 */
import { frameName, profileTree, readProfile, sampledWeights } from './cpuprofile.js'

const args = process.argv.slice(2)
let top = 25
let filter: string | undefined
const files: string[] = []
for (let n = 0; n < args.length; n++) {
  const arg = args[n] ?? ''
  if (arg === '--top') top = Number(args[++n])
  else if (arg === '--filter') filter = args[++n]
  else files.push(arg)
}
if (files.length === 0) {
  process.stderr.write('usage: profile-top.ts FILE.cpuprofile [...] [--top N] [--filter TEXT]\n')
  process.exit(2)
}

for (const file of files) {
  const profile = readProfile(file)
  const { byId, parent } = profileTree(profile)
  const selfUs = sampledWeights(profile)
  const totalUs = profile.endTime - profile.startTime
  const self = new Map<string, number>()
  const inclusive = new Map<string, number>()
  let idleUs = 0
  for (const [id, micros] of selfUs) {
    const node = byId.get(id)
    if (node === undefined) continue
    const name = frameName(node.callFrame)
    if (node.callFrame.functionName === '(idle)') idleUs += micros
    self.set(name, (self.get(name) ?? 0) + micros)
    // Inclusive: count each distinct function once per stack (recursion would double it otherwise).
    const seen = new Set<string>()
    for (let current: number | undefined = id; current !== undefined; current = parent.get(current)) {
      const frame = byId.get(current)?.callFrame
      if (frame === undefined) break
      const frameLabel = frameName(frame)
      if (seen.has(frameLabel)) continue
      seen.add(frameLabel)
      inclusive.set(frameLabel, (inclusive.get(frameLabel) ?? 0) + micros)
    }
  }
  const busyUs = totalUs - idleUs
  const show = (title: string, table: Map<string, number>): void => {
    process.stdout.write(`  ${title}\n`)
    const rows = [...table.entries()]
      .filter(([name]) => filter === undefined || name.includes(filter))
      .filter(([name]) => !name.startsWith('(root)') && !name.startsWith('(idle)'))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
    for (const [name, micros] of rows) {
      process.stdout.write(`    ${(micros / 1000).toFixed(0).padStart(7)} ms ${((micros / Math.max(1, busyUs)) * 100).toFixed(1).padStart(5)}%  ${name}\n`)
    }
  }
  process.stdout.write(`${file}: ${(totalUs / 1e6).toFixed(1)} s sampled, ${((idleUs / Math.max(1, totalUs)) * 100).toFixed(0)}% idle; shares below are of the busy time\n`)
  show('self time', self)
  show('inclusive time', inclusive)
}
