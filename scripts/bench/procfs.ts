/**
 * Per-process resource use from /proc: resident memory (VmRSS in /proc/PID/status) and CPU time (utime + stime in
 * /proc/PID/stat). A monitor samples a set of processes while a load runs and reports each one's peak RSS and its CPU
 * as a percentage of one core over the run, which is what tells a reader of the table whether a node was the
 * bottleneck (near 100%) or was waiting on something else (disk, peers, the load generator).
 */
import { readFileSync, readdirSync } from 'node:fs'

/** Linux reports CPU time in clock ticks; 100 per second on every mainstream kernel configuration (getconf CLK_TCK). */
const TICKS_PER_SECOND = 100
const SAMPLE_INTERVAL_MS = 250

/** A thread's name (/proc comm) and its CPU so far in clock ticks (utime + stime). */
export interface ThreadTicks {
  name: string
  ticks: number
}

/** CPU seconds per clock tick of /proc's utime and stime. */
export const SECONDS_PER_TICK = 1 / TICKS_PER_SECOND

/** Each thread of `pid` by thread ID: its name and CPU ticks so far. Read before and after a load, it adds nothing. */
export function threadTicks(pid: number): Map<number, ThreadTicks> {
  const result = new Map<number, ThreadTicks>()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      result.set(Number(tid), { name, ticks: Number(fields[11]) + Number(fields[12]) })
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return result
}

export interface ProcSample {
  rssBytes: number
  cpuTicks: number
}

/** One reading of `pid`, or undefined when the process is gone (killed during a failover round, say). */
export function readProc(pid: number): ProcSample | undefined {
  if (pid <= 0) return undefined
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The fields after the parenthesized command name (which may itself hold spaces): state is field 3, utime 14,
    // stime 15, so they sit at offsets 11 and 12 of what follows ") ".
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const cpuTicks = Number(fields[11]) + Number(fields[12])
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const rss = /^VmRSS:\s+(\d+) kB/m.exec(status)
    return { rssBytes: rss?.[1] === undefined ? 0 : Number(rss[1]) * 1024, cpuTicks }
  } catch {
    return undefined // The process exited between the two reads, or never existed.
  }
}

/** `pid`'s CPU time so far (user + system) in seconds, or undefined when it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  const sample = readProc(pid)
  return sample === undefined ? undefined : sample.cpuTicks / TICKS_PER_SECOND
}

export function rssMb(pid: number): number {
  return Math.round((readProc(pid)?.rssBytes ?? 0) / 1024 / 102.4) / 10
}

/**
 * The file-backed part of `pid`'s RSS (RssFile): pages of mapped files, which are LevelDB's table files (reading
 * the whole state, to stream a snapshot, makes them resident) and the node binary and its libraries. The kernel may
 * drop them whenever it needs the memory.
 */
export function rssFileMb(pid: number): number {
  try {
    const match = /^RssFile:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match?.[1] === undefined ? 0 : Math.round(Number(match[1]) / 102.4) / 10
  } catch {
    return 0
  }
}

/** Open file descriptors of `pid` (sockets included): how the blocking-query driver sees that its queries arrived. */
export function openFileCount(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length
  } catch {
    return 0
  }
}

export interface Watched {
  /** What the table calls it: n1, n2, proxy, autocannon, e1 ... */
  label: string
  /** The node's Raft role when the run started, where it has one. */
  role?: string
  pid: number
}

export interface ProcessUsage {
  label: string
  role?: string
  /** Highest RSS seen during the run, in MB. */
  rssMb: number
  /** CPU time over the run's wall time, in percent of one core (200% = both cores of a two-core machine). */
  cpuPercent: number
}

/**
 * Samples processes every 250 ms (or `intervalMs`) between start() and stop(). A shorter interval for short spikes
 * of memory that a 250 ms sample could miss (a snapshot's save or restore, where the peak is the figure).
 */
export class UsageMonitor {
  private readonly first = new Map<number, ProcSample>()
  private readonly last = new Map<number, ProcSample>()
  private readonly peakRss = new Map<number, number>()
  private timer: NodeJS.Timeout | undefined
  private startedAt = 0

  constructor(
    private readonly watched: Watched[],
    private readonly intervalMs = SAMPLE_INTERVAL_MS,
  ) {}

  start(): this {
    this.startedAt = performance.now()
    this.sample()
    this.timer = setInterval(() => this.sample(), this.intervalMs)
    return this
  }

  /** Adds a process that starts after the run did (the load generator); its CPU counts from its first sample. */
  add(process: Watched): void {
    this.watched.push(process)
    this.sampleOne(process)
  }

  stop(): ProcessUsage[] {
    this.sample()
    if (this.timer !== undefined) clearInterval(this.timer)
    const seconds = (performance.now() - this.startedAt) / 1000
    return this.watched.map((process) => {
      const first = this.first.get(process.pid)
      const last = this.last.get(process.pid)
      const ticks = first !== undefined && last !== undefined ? last.cpuTicks - first.cpuTicks : 0
      return {
        label: process.label,
        ...(process.role === undefined ? {} : { role: process.role }),
        rssMb: Math.round((this.peakRss.get(process.pid) ?? 0) / 1024 / 102.4) / 10,
        cpuPercent: seconds > 0 ? Math.round((ticks / TICKS_PER_SECOND / seconds) * 100) : 0,
      }
    })
  }

  private sample(): void {
    for (const process of this.watched) this.sampleOne(process)
  }

  private sampleOne(process: Watched): void {
    const sample = readProc(process.pid)
    if (sample === undefined) return
    if (!this.first.has(process.pid)) this.first.set(process.pid, sample)
    this.last.set(process.pid, sample)
    this.peakRss.set(process.pid, Math.max(this.peakRss.get(process.pid) ?? 0, sample.rssBytes))
  }
}
