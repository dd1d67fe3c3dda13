/**
 * Starts a real `warden agent` process for black-box tests: on free loopback ports, with its own data dir, and
 * stopped (SIGTERM, then SIGKILL) by `stop()`. The HTTP address comes from the `agent ready` log line and the
 * management token from the `Management token:` line, exactly as an operator's script would read them.
 *
 * Requests go through the API client (src/api), one per agent, closed when the agent stops. The answer keeps the
 * shape the tests were written against (a fetch `Headers`, the body parsed when it is JSON), and the request keeps
 * what fetch sent: the path normalized as a URL, a raw body typed text/plain unless the test names a type, and no
 * deadline short of a test's own unless the test gives one.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { fetchHeaders, fetchTarget } from '../../cluster/lib.js'
import { WardenClient } from '../../src/api/index.js'

export const CLI = resolve(import.meta.dirname, '../../dist/cli/main.js')

export interface AgentProcess {
  url: string
  httpAddress: string
  clusterAddress: string
  managementToken: string
  dataDir: string
  child: ChildProcess
  logs: string[]
  /**
   * A request to the agent with the management token unless `token` says otherwise (null: no token). Rejects only
   * when no answer came (a ConnectionError from src/api).
   */
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

/** What a request waits for at most when the test gives no timeout: fetch's (undici's) default headers timeout. */
const REQUEST_TIMEOUT_MS = 300_000

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
  /** Made once the HTTP address is known; closed (and dropped) once the process has exited. */
  let client: WardenClient | undefined
  const closeClient = (): void => {
    client?.close()
    client = undefined
  }
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
      // Unbounded sockets, as fetch had: tests park many blocking queries on one agent at once.
      client ??= new WardenClient({ address: agent.httpAddress, maxSockets: Infinity })
      const headers: Record<string, string> = { ...requestOptions.headers }
      const named = (name: string): boolean => Object.keys(headers).some((key) => key.toLowerCase() === name.toLowerCase())
      // fetch typed a string body text/plain; the client would type it JSON.
      if (requestOptions.raw !== undefined && requestOptions.body === undefined && !named('Content-Type')) headers['Content-Type'] = 'text/plain;charset=UTF-8'
      if (requestOptions.body !== undefined) headers['Content-Type'] = 'application/json'
      const answer = await client.request(method, fetchTarget(agent.url, path), {
        token: requestOptions.token === undefined ? agent.managementToken : requestOptions.token,
        ...(requestOptions.body === undefined ? {} : { body: requestOptions.body }),
        ...(requestOptions.raw === undefined || requestOptions.body !== undefined ? {} : { raw: requestOptions.raw }),
        headers,
        timeoutMs: requestOptions.timeoutMs ?? REQUEST_TIMEOUT_MS,
      })
      return { status: answer.status, headers: fetchHeaders(answer.headers), body: answer.body, text: answer.text }
    },
    async stop() {
      running.delete(agent)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      const code = await exited
      clearTimeout(timer)
      // After the exit, not before: a request in flight gets whatever answer the stopping agent gives it.
      closeClient()
      if (options.keepDataDir !== true && options.dataDir === undefined) await rm(dataDir, { recursive: true, force: true })
      return code
    },
    async kill() {
      running.delete(agent)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
      closeClient()
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
