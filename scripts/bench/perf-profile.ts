/**
 * `perf script` output turned into V8 .cpuprofile files, one per process's main thread, so that stage-budget.ts and
 * profile-top.ts read perf's samples as they read V8's. Why: on this machine V8's CPU profiler puts too many samples
 * on functions that make system calls (`writev` took 21% of a leader's busy samples where perf saw 4.8% in a like
 * run: docs/benchmarks.md, issue 22, ninth session), likely because its signal is taken at the next kernel entry. perf samples
 * from the kernel's timer and unwinds JIT frames through the agents' --perf-basic-prof maps.
 *
 * Each sample's stack becomes a path of the profile's tree. JavaScript frames (`JS:*name url:line:column`) keep their
 * function and file; the native frames below the innermost JavaScript frame become one leaf frame named by what they
 * do, for the budget's rules: `writev` (a socket write, kernel and libc included), `(garbage collector)`, or
 * `(native)`; a sample with no JavaScript frame at all is `(program)`, as V8 names time outside JavaScript.
 */
import type { CallFrame, CpuProfile, ProfileNode } from './cpuprofile.js'

/** Each main thread's samples of `perf script -F pid,tid,ip,sym` output, by pid; `hz` is `perf record -F HZ`. */
export function perfProfiles(script: string, hz: number): Map<number, CpuProfile> {
  const builders = new Map<number, ProfileBuilder>()
  const deltaUs = Math.round(1e6 / hz)
  let header: string | undefined
  let frames: string[] = []
  const flush = (): void => {
    if (header !== undefined) {
      const [pid, tid] = header.split('/').map(Number)
      if (pid !== undefined && pid === tid) {
        let builder = builders.get(pid)
        if (builder === undefined) builders.set(pid, (builder = new ProfileBuilder()))
        builder.add(stackOf(frames), deltaUs)
      }
    }
    header = undefined
    frames = []
  }
  for (const line of script.split('\n')) {
    if (line.trim() === '') flush()
    // Frames are indented with a tab; a sample's header (`PID/TID`) is right-aligned with spaces.
    else if (line.startsWith('\t')) frames.push(line.trim())
    else {
      flush()
      header = line.trim().split(/\s+/)[0]
    }
  }
  flush()
  return new Map([...builders].map(([pid, builder]) => [pid, builder.profile()]))
}

const JS_FRAME = /JS:[*~^]?(.*) (\S+?)(?::(\d+):\d+)?$/
const GC = /Scaveng|MarkCompact|Heap::CollectGarbage|Heap::PerformGarbageCollection|IncrementalMarking|MinorMarkSweep|Sweeper/
const SOCKET_WRITE = /__GI___writev|\bwritev\b|do_writev|tcp_sendmsg|ksys_write/

/** A sample's frames, root first; perf prints them leaf first, as `ADDRESS SYMBOL`. */
function stackOf(lines: string[]): CallFrame[] {
  const js: CallFrame[] = []
  let native: string | undefined
  for (const line of lines) {
    const symbol = line.replace(/^[0-9a-f]+\s+/, '')
    const match = JS_FRAME.exec(symbol)
    if (match !== null) {
      js.push({ functionName: match[1] ?? '', url: match[2] ?? '', lineNumber: Math.max(0, Number(match[3] ?? 1) - 1) })
      continue
    }
    // Only what runs below the innermost JavaScript frame describes the sample's native part.
    if (js.length > 0) continue
    if (GC.test(symbol)) native = '(garbage collector)'
    else if (SOCKET_WRITE.test(symbol) && native === undefined) native = 'writev'
  }
  const leaf: CallFrame = { functionName: js.length === 0 ? (native === '(garbage collector)' ? native : '(program)') : (native ?? '(native)'), url: '', lineNumber: -1 }
  return [...js.reverse(), leaf]
}

class ProfileBuilder {
  private readonly nodes: ProfileNode[] = [{ id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1 }, children: [] }]
  private readonly childByKey = new Map<string, number>()
  private readonly samples: number[] = []
  private readonly timeDeltas: number[] = []

  add(stack: CallFrame[], deltaUs: number): void {
    let parent = 1
    for (const frame of stack) {
      const key = `${parent}\u0000${frame.functionName}\u0000${frame.url}\u0000${frame.lineNumber}`
      let id = this.childByKey.get(key)
      if (id === undefined) {
        id = this.nodes.length + 1
        this.nodes.push({ id, callFrame: frame, children: [] })
        this.nodes[parent - 1]!.children!.push(id)
        this.childByKey.set(key, id)
      }
      parent = id
    }
    this.samples.push(parent)
    this.timeDeltas.push(deltaUs)
  }

  profile(): CpuProfile {
    const total = this.timeDeltas.reduce((sum, delta) => sum + delta, 0)
    return { nodes: this.nodes, samples: this.samples, timeDeltas: this.timeDeltas, startTime: 0, endTime: total }
  }
}
