/**
 * Runs the built `warden` binary (dist/cli/main.js; npm test builds it first) as an operator would, with a clean
 * environment: WARDEN_* of the shell running the tests must not leak in.
 */
import { spawn } from 'node:child_process'
import { tmpdir } from 'node:os'
import { CLI } from '../support/agent.js'

export interface Ran {
  code: number | null
  stdout: string
  stderr: string
}

export interface RunOptions {
  /** Working directory; also HOME. Default: the current directory, HOME the system temp dir. */
  cwd?: string
  env?: Record<string, string>
  stdin?: string
}

export function runWarden(args: string[], options: RunOptions = {}): Promise<Ran> {
  const { cwd, env = {}, stdin = '' } = options
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, env: { PATH: process.env['PATH'] ?? '', HOME: cwd ?? tmpdir(), ...env }, stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
    child.stdin.end(stdin)
  })
}
