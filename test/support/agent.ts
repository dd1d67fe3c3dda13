/**
 * Starts a real `warden agent` process for black-box tests: on free loopback ports, with its own data dir, and
 * stopped (SIGTERM, then SIGKILL) by `stop()`. The HTTP address comes from the `agent ready` log line and the
 * management token from the `Management token:` line, exactly as an operator's script would read them.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { createInterface } from 'node:readline'

export const CLI = resolve(import.meta.dirname, '../../dist/cli/main.js')

export interface AgentProcess {
  url: string
  httpAddress: string
  clusterAddress: string
  managementToken: string
  dataDir: string
  child: ChildProcess
  logs: string[]
  /** Fetch against the agent with the management token unless `token` says otherwise (null: no token). */
  request(method: string, path: string, options?: { body?: unknown; token?: string | null; headers?: Record<string, string>; raw?: string; timeoutMs?: number }): Promise<ApiResponse>
  stop(): Promise<number | null>
  kill(): Promise<void>
}

export interface ApiResponse {
  status: number
  headers: Headers
  body: any
  text: string
}

export interface StartOptions {
  args?: string[]
  dev?: boolean
  dataDir?: string
  env?: Record<string, string>
  /** Keep the data dir after stop (restart tests reuse it). */
  keepDataDir?: boolean
}

const running = new Set<AgentProcess>()

/** Every agent a test started and did not stop; mocha's root hook stops them, so a failing test leaks nothing. */
export async function stopAllAgents(): Promise<void> {
  await Promise.all([...running].map((agent) => agent.kill()))
}

export async function startAgent(options: StartOptions = {}): Promise<AgentProcess> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'warden-test-')))
  const args = [
    CLI,
    'agent',
    ...(options.dev === false ? [] : ['--dev']),
    '--data-dir',
    dataDir,
    '--http-addr',
    '127.0.0.1:0',
    '--cluster-addr',
    '127.0.0.1:0',
    '--node-name',
    'test-node',
    ...(options.args ?? []),
  ]
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...options.env } })
  const logs: string[] = []
  let managementToken = ''
  const ready = new Promise<{ http: string; cluster: string }>((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`agent did not become ready in 15s:\n${logs.join('\n')}`)), 15_000)
    const onLine = (line: string): void => {
      logs.push(line)
      const token = /^Management token: (\S+)$/.exec(line)
      if (token?.[1] !== undefined) managementToken = token[1]
      if (line.includes('"agent ready"')) {
        clearTimeout(timer)
        const parsed = JSON.parse(line) as { http: string; cluster: string }
        resolvePromise(parsed)
      }
    }
    createInterface({ input: child.stdout! }).on('line', onLine)
    createInterface({ input: child.stderr! }).on('line', (line) => logs.push(line))
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`agent exited with ${code} before it was ready:\n${logs.join('\n')}`))
    })
  })
  let exited: Promise<number | null> = new Promise((resolveExit) => child.once('exit', (code) => resolveExit(code)))
  const agent: AgentProcess = {
    url: '',
    httpAddress: '',
    clusterAddress: '',
    managementToken: '',
    dataDir,
    child,
    logs,
    async request(method, path, requestOptions = {}) {
      const headers: Record<string, string> = { ...requestOptions.headers }
      const token = requestOptions.token === undefined ? agent.managementToken : requestOptions.token
      if (token !== null && token !== '') headers['X-Service-Token'] = token
      let body: string | undefined = requestOptions.raw
      if (requestOptions.body !== undefined) {
        body = JSON.stringify(requestOptions.body)
        headers['Content-Type'] = 'application/json'
      }
      const signal = requestOptions.timeoutMs === undefined ? undefined : AbortSignal.timeout(requestOptions.timeoutMs)
      const response = await fetch(agent.url + path, { method, headers, body, ...(signal === undefined ? {} : { signal }) })
      const text = await response.text()
      let parsed: unknown
      try {
        parsed = text === '' ? undefined : JSON.parse(text)
      } catch {
        parsed = undefined
      }
      return { status: response.status, headers: response.headers, body: parsed, text }
    },
    async stop() {
      running.delete(agent)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      const code = await exited
      clearTimeout(timer)
      if (options.keepDataDir !== true && options.dataDir === undefined) await rm(dataDir, { recursive: true, force: true })
      return code
    },
    async kill() {
      running.delete(agent)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
      if (options.keepDataDir !== true && options.dataDir === undefined) await rm(dataDir, { recursive: true, force: true })
    },
  }
  running.add(agent)
  try {
    const { http, cluster } = await ready
    agent.httpAddress = http
    agent.clusterAddress = cluster
    agent.url = `http://${http}`
    // A --dev restart on a kept data dir prints no token (it was printed when generated): read it where it is kept.
    if (managementToken === '' && options.dev !== false) managementToken = await readFile(join(dataDir, 'management-token'), 'utf8').then((text) => text.trim(), () => '')
    agent.managementToken = managementToken
    return agent
  } catch (error) {
    await agent.kill()
    throw error
  }
}
