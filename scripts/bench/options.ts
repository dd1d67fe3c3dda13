/**
 * Command line of `npm run bench`. Every workload runs unless --only names some; scale runs only when asked (by
 * --scale or --only scale), since a million tokens take many minutes to load.
 */
export const WORKLOADS = ['writes', 'reads', 'authorized', 'cas', 'blocking', 'failover', 'scale', 'resolve'] as const
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
}

export const USAGE = `npm run bench -- [--quick] [--only NAME[,NAME]] [--scale [N]] [--scale-minutes M] [--compare etcd] [--profile DIR] [--markdown] [--via-proxy]
  workloads: ${WORKLOADS.join(', ')} (scale only with --scale or --only scale)`

export class UsageError extends Error {}

export function parseOptions(argv: string[]): Options {
  const options: Options = { quick: false, only: undefined, scale: undefined, scaleMinutes: 20, compareEtcd: false, profileDir: undefined, markdown: false, viaProxy: false }
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
      default:
        throw new UsageError(`unknown argument ${JSON.stringify(arg)}`)
    }
  }
  if (options.only?.has('scale') === true && options.scale === undefined) options.scale = 1_000_000
  return options
}

export function selected(options: Options, name: WorkloadName): boolean {
  if (name === 'scale') return options.scale !== undefined && (options.only === undefined || options.only.has('scale'))
  return options.only === undefined || options.only.has(name)
}

export function planFor(options: Options): Plan {
  return options.quick
    ? { loadS: 2, warmupS: 0, writeConnections: [1, 64], authorizedTokens: 1_000, blockingQueries: 1_000, failoverRounds: 2, fsyncWrites: 300, resolveTokens: 1_000, casS: 2 }
    : { loadS: 10, warmupS: 2, writeConnections: [1, 16, 64, 256], authorizedTokens: 10_000, blockingQueries: 10_000, failoverRounds: 10, fsyncWrites: 2_000, resolveTokens: 10_000, casS: 10 }
}
