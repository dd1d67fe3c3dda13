/**
 * Catalog endpoints. Only the datacenter list: warden keeps no catalog of nodes and services, but Consul's clients and
 * its `catalog datacenters` command ask this one. No token is needed, as in Consul.
 */
import Router from '@koa/router'
import type { ApiContext } from '../context.js'

export function catalogRoutes(router: Router): void {
  // The local datacenter first, then the others by the round-trip time of their nearest linked server, as Consul
  // lists them; a datacenter known but not linked now comes last.
  router.get('/v1/catalog/datacenters', (ctx) => {
    const { app } = (ctx as ApiContext).state
    ctx.body = app.datacenters?.() ?? [app.settings.datacenter]
  })
}
