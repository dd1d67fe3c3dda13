/**
 * The yardstick of the blocking-query memory target: a bare node:http server, no framework, that holds every request
 * until one arrives for /release, then answers them all with a small JSON body. What Node itself costs per held
 * request (socket, parser, request and response objects) is the floor under any server written on it. Prints
 * `{"port": N}` once listening on a free loopback port; exits on SIGTERM.
 */
import { createServer, type ServerResponse } from 'node:http'

const held: ServerResponse[] = []
const BODY = '[]'
/** Once released, a request that arrives late is answered at once, as warden answers a query whose index has passed. */
let released = false
const server = createServer((request, response) => {
  if (request.url !== '/release') {
    if (released) response.writeHead(200, { 'Content-Type': 'application/json' }).end(BODY)
    else held.push(response)
    return
  }
  released = true
  for (const waiting of held.splice(0)) waiting.writeHead(200, { 'Content-Type': 'application/json' }).end(BODY)
  response.writeHead(200, { 'Content-Type': 'application/json' }).end('true')
})
server.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address !== null ? address.port : 0 })}\n`)
})
process.on('SIGTERM', () => {
  for (const waiting of held.splice(0)) waiting.destroy()
  server.close(() => process.exit(0))
})
