/** Status endpoints: who leads and who the members are. No token is needed. */
import Router from '@koa/router'
import type { ApiContext } from '../context.js'

export function statusRoutes(router: Router): void {
  router.get('/v1/status/leader', (ctx) => {
    ctx.body = JSON.stringify((ctx as ApiContext).state.app.cluster.leaderAddress())
    ctx.type = 'application/json'
  })
  router.get('/v1/status/peers', (ctx) => {
    ctx.body = (ctx as ApiContext).state.app.cluster.peerAddresses()
  })
}
