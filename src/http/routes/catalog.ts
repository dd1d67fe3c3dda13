/**
 * Catalog endpoints. Only the datacenter list: warden keeps no catalog of nodes and services, but Consul's clients and
 * its `catalog datacenters` command ask this one. No token is needed, as in Consul.
 */
import Router from '@koa/router'
import type { ApiContext } from '../context.js'

export function catalogRoutes(router: Router): void {
  // The local datacenter first, as Consul lists it (its list is sorted by round-trip time from here). Datacenters are
  // not federated yet, so it is the only one; the multi-datacenter issue appends the others.
  router.get('/v1/catalog/datacenters', (ctx) => {
    ctx.body = [(ctx as ApiContext).state.app.settings.datacenter]
  })
}
