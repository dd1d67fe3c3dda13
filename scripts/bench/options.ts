/**
 * Command line of `npm run bench`. Every workload runs unless --only names some; scale runs only when asked (by
 * --scale or --only scale), since a million tokens take many minutes to load, and replication only with --only
 * replication (two datacenters of three nodes, 110,000 objects to load and replicate).
 */
export const WORKLOADS = ['writes', 'reads', 'authorized', 'cas', 'blocking', 'failover', 'links', 'metrics', 'ui', 'scale', 'resolve', 'replication'] as const
export type WorkloadName = (typeof WORKLOADS)[number]

export interface Options {
  quick: boolean
  only: Set<WorkloadName> | undefined
  /** Tokens for the scale workload, or undefined when it is not to run. */
  scale: number | undefined
  /** Upper bound of the scale workload's load phase; what was loaded by then is what is measured. */
  scaleMinutes: number
  compareEtcd: boolean
  /** Run every warden agent under --cpu-prof, writing .cpuprofile files here. */
  profileDir: string | undefined
  /** Also print the results table as Markdown (for docs/benchmarks.md). */
  markdown: boolean
  /** Keep LocalCluster's link proxies between the nodes (see warden.ts for why they are bypassed by default). */
  viaProxy: boolean
  /**
   * Rounds of the links workload and of the write comparison with etcd (each round runs every case once); the plan's
   * defaults when undefined.
   */
  rounds: number | undefined
}

export interface Plan {
  loadS: number
  warmupS: number
  writeConnections: number[]
  authorizedTokens: number
  blockingQueries: number
  failoverRounds: number
  fsyncWrites: number
  resolveTokens: number
  casS: number
  /** The links workload: rounds of its cases, interleaved, and the seconds of each load. */
  linksRounds: number
  linksLoadS: number
  /** The write comparison with etcd (issue 22): rounds of warden's cases then etcd's, and the seconds of each load. */
  compareRounds: number
  compareLoadS: number
}

export const USAGE = `npm run bench -- [--quick] [--only NAME[,NAME]] [--scale [N]] [--scale-minutes M] [--compare etcd] [--profile DIR] [--markdown] [--via-proxy] [--rounds N]
  workloads: ${WORKLOADS.join(', ')}
    scale only with --scale or --only scale; replication only with --only replication (dc1 and dc2 of three nodes
    each: 10,000 policies and 100,000 global tokens replicated into an empty dc2, then replication lag at 500
    writes/s; 1,000 policies and 10,000 tokens with --quick); ui where Chromium is installed (apt-get install chromium)
  --rounds N: rounds of the links workload (default 5; 3 with --quick) and of the write comparison of --compare etcd
    (warden's cases then etcd's, alternated; default 3, also with --quick, whose loads are shorter; issue 22 judges
    its targets on at least 3)`

export class UsageError extends Error {}

export function parseOptions(argv: string[]): Options {
  const options: Options = { quick: false, only: undefined, scale: undefined, scaleMinutes: 20, compareEtcd: false, profileDir: undefined, markdown: false, viaProxy: false, rounds: undefined }
  for (let n = 0; n < argv.length; n++) {
    const arg = argv[n]
    const value = (): string => {
      const next = argv[++n]
      if (next === undefined) throw new UsageError(`${arg} needs a value`)
      return next
    }
    switch (arg) {
      case '--quick':
        options.quick = true
        break
      case '--only':
        options.only ??= new Set()
        for (const name of value().split(',')) {
          if (!(WORKLOADS as readonly string[]).includes(name)) throw new UsageError(`--only: unknown workload ${JSON.stringify(name)} (${WORKLOADS.join(', ')})`)
          options.only.add(name as WorkloadName)
        }
        break
      case '--scale': {
        const next = argv[n + 1]
        if (next !== undefined && /^\d+$/.test(next)) {
          options.scale = Number(next)
          n++
        } else options.scale = 1_000_000
        break
      }
      case '--scale-minutes':
        options.scaleMinutes = Number(value())
        if (!(options.scaleMinutes > 0)) throw new UsageError('--scale-minutes: must be a positive number')
        break
      case '--compare': {
        const system = value()
        if (system !== 'etcd') throw new UsageError(`--compare: only etcd is supported, not ${JSON.stringify(system)}`)
        options.compareEtcd = true
        break
      }
      case '--profile':
        options.profileDir = value()
        break
      case '--markdown':
        options.markdown = true
        break
      case '--via-proxy':
        options.viaProxy = true
        break
      case '--rounds': {
        const text = value()
        if (!/^[1-9]\d{0,2}$/.test(text)) throw new UsageError(`--rounds: must be an integer from 1 to 999, not ${JSON.stringify(text)}`)
        options.rounds = Number(text)
        break
      }
      default:
        throw new UsageError(`unknown argument ${JSON.stringify(arg)}`)
    }
  }
  if (options.only?.has('scale') === true && options.scale === undefined) options.scale = 1_000_000
  return options
}

export function selected(options: Options, name: WorkloadName): boolean {
  if (name === 'scale') return options.scale !== undefined && (options.only === undefined || options.only.has('scale'))
  // Heavy (six nodes, 110,000 objects), so never part of the default run.
  if (name === 'replication') return options.only?.has('replication') === true
  return options.only === undefined || options.only.has(name)
}

export function planFor(options: Options): Plan {
  // The links workload's loads are shorter than the others' in a full run: it runs six cases a round, five rounds,
  // and on a shared machine medians over more rounds steady its figures more than longer loads would.
  const plan = options.quick
    ? { loadS: 2, warmupS: 0, writeConnections: [1, 64], authorizedTokens: 1_000, blockingQueries: 1_000, failoverRounds: 2, fsyncWrites: 300, resolveTokens: 1_000, casS: 2, linksRounds: 3, linksLoadS: 2, compareRounds: 3, compareLoadS: 2 }
    : { loadS: 10, warmupS: 2, writeConnections: [1, 16, 64, 256], authorizedTokens: 10_000, blockingQueries: 10_000, failoverRounds: 10, fsyncWrites: 2_000, resolveTokens: 10_000, casS: 10, linksRounds: 5, linksLoadS: 5, compareRounds: 3, compareLoadS: 10 }
  return options.rounds === undefined ? plan : { ...plan, linksRounds: options.rounds, compareRounds: options.rounds }
}
