/**
 * Every process the benchmark starts, so that it stops every one of them: on success, on failure and on Ctrl-C.
 *
 * Processes are tracked by the pid we got from spawn and signalled by that pid only (never by name), and a pid is
 * signalled only while /proc/PID/cmdline still shows the command we started, so a pid the system reused for someone
 * else's process is never touched. Clusters register an async stop (LocalCluster.down, etcd's SIGTERM) and a
 * synchronous last resort for the 'exit' hook, where nothing asynchronous can run.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process'
import { readFileSync } from 'node:fs'

interface Tracked {
  child: ChildProcess
  /** A piece of the command line that identifies the process as ours. */
  marker: string
}

interface Cleanup {
  stop: () => Promise<void>
  /** Synchronous SIGKILL of whatever is left, for the process 'exit' hook. */
  killNow: () => void
}

const children = new Map<number, Tracked>()
const cleanups = new Set<Cleanup>()

export function isOurs(pid: number, marker: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').includes(marker)
  } catch {
    return false // Gone.
  }
}

export function signalIfOurs(pid: number, marker: string, signal: NodeJS.Signals): boolean {
  if (!isOurs(pid, marker)) return false
  try {
    process.kill(pid, signal)
    return true
  } catch {
    return false // It exited between the check and the signal.
  }
}

/** spawn, remembered until the child exits. `marker` defaults to the last argument (a URL, a script path). */
export function spawnTracked(command: string, args: string[], options: SpawnOptions, marker = args.at(-1) ?? command): ChildProcess {
  const child = spawn(command, args, options)
  const pid = child.pid
  if (pid !== undefined) {
    children.set(pid, { child, marker })
    child.once('exit', () => children.delete(pid))
  }
  return child
}

/**
 * The port a yardstick child reports as its first `{"port": N}` line on stdout (koa-hello.ts, hold-baseline.ts);
 * rejects if it exits or fails first, or says nothing within `timeoutMs`.
 */
export function reportedPort(child: ChildProcess, name: string, timeoutMs = 30_000): Promise<number> {
  return new Promise<number>((resolvePort, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not report its port within ${timeoutMs / 1000} s`)), timeoutMs)
    let text = ''
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk
      const line = /^\{.*\}$/m.exec(text)?.[0]
      if (line === undefined) return
      clearTimeout(timer)
      resolvePort((JSON.parse(line) as { port: number }).port)
    })
    child.once('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`${name} exited ${code}`))
    })
  })
}

export function registerCleanup(cleanup: Cleanup): () => void {
  cleanups.add(cleanup)
  return () => cleanups.delete(cleanup)
}

async function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs)
    child.once('exit', () => {
      clearTimeout(timer)
      resolve(true)
    })
  })
}

/** SIGTERM to one tracked child, SIGKILL after `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs = 3_000): Promise<void> {
  const pid = child.pid
  if (pid === undefined) return
  const tracked = children.get(pid)
  if (tracked === undefined) return // Already exited.
  signalIfOurs(pid, tracked.marker, 'SIGTERM')
  if (await waitForExit(child, graceMs)) return
  signalIfOurs(pid, tracked.marker, 'SIGKILL')
  await waitForExit(child, 2_000)
}

/** Stops every registered cluster and every tracked child; collects errors rather than stopping at the first. */
export async function stopEverything(): Promise<void> {
  const errors: unknown[] = []
  await Promise.all([...children.values()].map((tracked) => stopChild(tracked.child).catch((error: unknown) => errors.push(error))))
  for (const cleanup of [...cleanups]) {
    try {
      await cleanup.stop()
    } catch (error) {
      errors.push(error)
    }
    cleanups.delete(cleanup)
  }
  if (errors.length > 0) throw new AggregateError(errors, `${errors.length} process(es) would not stop`)
}

/** For process.on('exit'): SIGKILL whatever is still running, synchronously. */
export function killEverythingNow(): void {
  for (const [pid, tracked] of children) signalIfOurs(pid, tracked.marker, 'SIGKILL')
  for (const cleanup of cleanups) cleanup.killNow()
}

/** Runs a command to completion and returns its stdout; rejects with its stderr on a non-zero exit. */
export async function runTracked(
  command: string,
  args: string[],
  options: SpawnOptions = {},
  onSpawn?: (pid: number) => void,
): Promise<{ stdout: string; stderr: string; pid: number }> {
  const child = spawnTracked(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] })
  if (child.pid !== undefined) onSpawn?.(child.pid)
  let stdout = ''
  let stderr = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (exitCode) => resolve(exitCode))
  })
  if (code !== 0) throw new Error(`${command} ${args.slice(0, 3).join(' ')} … exited ${code}: ${stderr.trim().slice(-2000)}`)
  return { stdout, stderr, pid: child.pid ?? 0 }
}
