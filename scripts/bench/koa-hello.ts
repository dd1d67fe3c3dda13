/**
 * The yardstick of the read targets: a bare Koa app with one hello-world route, no middleware, on a free loopback
 * port. Prints `{"port": N}` once listening; exits on SIGTERM.
 */
import Koa from 'koa'

const app = new Koa()
app.use((ctx) => {
  ctx.body = 'hello world'
})
const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address !== null ? address.port : 0 })}\n`)
})
process.on('SIGTERM', () => server.close(() => process.exit(0)))
