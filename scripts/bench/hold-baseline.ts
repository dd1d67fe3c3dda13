/**
 * The yardsticks of the blocking-query memory target: a server that holds every request until one arrives for
 * /release, then answers them all with a small JSON body. `http` (the default) is bare node:http, no framework: what
 * Node itself costs per held request (socket, parser, request and response objects), the floor under any server
 * written on it. `koa` is a bare Koa app with one @koa/router route that holds: the floor under any server written
 * on Koa and @koa/router, as warden is. Prints `{"port": N}` once listening on a free loopback port; exits on
 * SIGTERM.
 *
 *   node --import tsx scripts/bench/hold-baseline.ts [http|koa]
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import Koa from 'koa'
import Router from '@koa/router'

const mode = process.argv[2] ?? 'http'
if (mode !== 'http' && mode !== 'koa') throw new Error(`hold-baseline: unknown mode ${mode} (http or koa)`)
const BODY = '[]'
/** Once released, a request that arrives late is answered at once, as warden answers a query whose index has passed. */
let released = false
/** Answers one held request. */
type Release = () => void
const held: Release[] = []

function releaseAll(): void {
  released = true
  for (const release of held.splice(0)) release()
}

function bareHandler(request: IncomingMessage, response: ServerResponse): void {
  const answer = (): void => void response.writeHead(200, { 'Content-Type': 'application/json' }).end(BODY)
  if (request.url === '/release') {
    releaseAll()
    response.writeHead(200, { 'Content-Type': 'application/json' }).end('true')
  } else if (released) answer()
  else held.push(answer)
}

function koaHandler(): (request: IncomingMessage, response: ServerResponse) => void {
  const app = new Koa()
  const router = new Router()
  router.get('/hold', async (ctx) => {
    if (!released) await new Promise<void>((resolve) => held.push(resolve))
    ctx.body = BODY
    ctx.type = 'application/json'
  })
  router.get('/release', (ctx) => {
    releaseAll()
    ctx.body = 'true'
    ctx.type = 'application/json'
  })
  app.use(router.routes())
  return app.callback()
}

const server: Server = createServer(mode === 'koa' ? koaHandler() : bareHandler)
server.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address !== null ? address.port : 0 })}\n`)
})
process.on('SIGTERM', () => {
  server.closeAllConnections()
  server.close(() => process.exit(0))
})
