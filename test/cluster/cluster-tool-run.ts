/**
 * Running the cluster tool (`cluster/cli.ts`) as an operator would, for the cluster-tool tests: one process per verb,
 * through tsx, with a bound on how long a verb may take; and whether a process the tool started is still alive.
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const CLI = resolve(import.meta.dirname, '../../cluster/cli.ts')
const TSX = pathToFileURL(createRequire(import.meta.filename).resolve('tsx')).href

export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

/** `npm run cluster -- --root ROOT ...args`, killed after 45 s. */
export async function runClusterTool(root: string, ...args: string[]): Promise<CliResult> {
  const child = spawn(process.execPath, ['--import', TSX, CLI, '--root', root, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), 45_000)
  const code = await new Promise<number | null>((resolvePromise) => child.once('exit', (exitCode) => resolvePromise(exitCode)))
  clearTimeout(timer)
  return { code, stdout, stderr }
}

/** Whether `pid` is still a live process (a zombie waiting for its parent to reap it counts as gone). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    if (existsSync('/proc/self')) return false
  }
  try {
    process.kill(pid, 0) // No /proc (macOS): existence is all we can tell.
    return true
  } catch {
    return false
  }
}
