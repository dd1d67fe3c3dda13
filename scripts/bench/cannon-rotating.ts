/**
 * autocannon through its programmatic API, in its own process, for the loads its CLI cannot express: every request
 * with the next of many tokens, or for the next of many paths. The CLI's HAR input restarts its list on every
 * connection, so a short run at 64 connections would only ever use the first few hundred of 10,000 tokens, and its
 * connections would walk a list of paths nearly in step; here one counter shared by all connections walks the whole
 * list. Prints the same JSON result as `autocannon --json`.
 *
 *   node --import tsx scripts/bench/cannon-rotating.ts SPEC.json
 *   SPEC: { url, connections, durationS, timeoutS, method, path, headers, tokens?: string[], paths?: string[],
 *           tls?: { caFile, certFile, keyFile } (for an https:// url: the client certificate to present) }
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'

interface Spec {
  url: string
  connections: number
  durationS: number
  timeoutS: number
  method: string
  path: string
  headers: Record<string, string>
  tokens?: string[]
  paths?: string[]
  tls?: { caFile: string; certFile: string; keyFile: string }
}

interface RequestData {
  headers: Record<string, string>
  path: string
}

type Autocannon = (options: Record<string, unknown>) => Promise<unknown>

// autocannon ships no type declarations; this is the one call used.
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon
const specPath = process.argv[2]
if (specPath === undefined) throw new Error('usage: cannon-rotating.ts SPEC.json')
const spec = JSON.parse(readFileSync(specPath, 'utf8')) as Spec
let next = 0
const tls = spec.tls
const result = await autocannon({
  url: spec.url,
  ...(tls === undefined ? {} : { tlsOptions: { ca: readFileSync(tls.caFile), cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) } }),
  connections: spec.connections,
  duration: spec.durationS,
  timeout: spec.timeoutS,
  requests: [
    {
      method: spec.method,
      path: spec.path,
      headers: spec.headers,
      setupRequest: (request: RequestData) => {
        const n = next++
        const { tokens, paths } = spec
        if (tokens !== undefined && tokens.length > 0) request.headers = { ...request.headers, 'X-Service-Token': tokens[n % tokens.length] ?? '' }
        if (paths !== undefined && paths.length > 0) request.path = paths[n % paths.length] ?? spec.path
        return request
      },
    },
  ],
})
process.stdout.write(`${JSON.stringify(result)}\n`)
