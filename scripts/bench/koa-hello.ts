/**
 * The yardsticks of the read targets: a bare Koa app on a free loopback port, with no middleware. `plain` (the
 * default) answers every path with a hello world; `router` serves one @koa/router route, GET /v1/acl/policy/:id, the
 * shape of the read it is compared with, so that the cost of routing shows apart from Koa's own. Prints
 * `{"port": N}` once listening; exits on SIGTERM.
 *
 *   node --import tsx scripts/bench/koa-hello.ts [plain|router]
 */
import Koa from 'koa'
import Router from '@koa/router'

const mode = process.argv[2] ?? 'plain'
if (mode !== 'plain' && mode !== 'router') throw new Error(`koa-hello: unknown mode ${mode} (plain or router)`)
const app = new Koa()
if (mode === 'router') {
  const router = new Router()
  router.get('/v1/acl/policy/:id', (ctx) => {
    ctx.body = 'hello world'
  })
  app.use(router.routes())
} else {
  app.use((ctx) => {
    ctx.body = 'hello world'
  })
}
const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address !== null ? address.port : 0 })}\n`)
})
process.on('SIGTERM', () => server.close(() => process.exit(0)))
