/**
 * The API's router (src/http/router.ts): its kept matches answer as @koa/router's own matching does, for every
 * method and path the app's routes see, without testing the routes again for a method and path seen before; a route
 * registered later is matched; each answer's list of matched routes is its own.
 */
import { expect } from 'chai'
import Router from '@koa/router'
import { ApiRouter } from '../../../src/http/router.js'
import { tokenRoutes } from '../../../src/http/routes/acl-tokens.js'
import { policyRoutes } from '../../../src/http/routes/acl-policies.js'
import { configRoutes } from '../../../src/http/routes/config.js'

function withRoutes<R extends Router>(router: R): R {
  tokenRoutes(router)
  policyRoutes(router)
  configRoutes(router)
  return router
}

function summary(result: ReturnType<Router['match']>): { path: string[]; pathAndMethod: string[]; route: boolean } {
  const describe = (layers: typeof result.path): string[] => layers.map((layer) => `${layer.methods.join(',')} ${String(layer.path)}`)
  return { path: describe(result.path), pathAndMethod: describe(result.pathAndMethod), route: result.route }
}

const REQUESTS: Array<[string, string]> = [
  ['PUT', '/v1/acl/token'],
  ['GET', '/v1/acl/token'],
  ['PUT', '/v1/ACL/Token/'],
  ['GET', '/v1/acl/token/self'],
  ['GET', '/v1/acl/token/0b4d7e3a-1f2c-4d5e-8f90-1a2b3c4d5e6f'],
  ['DELETE', '/v1/acl/token/0b4d7e3a-1f2c-4d5e-8f90-1a2b3c4d5e6f'],
  ['PUT', '/v1/acl/token/0b4d7e3a-1f2c-4d5e-8f90-1a2b3c4d5e6f/clone'],
  ['GET', '/v1/acl/tokens'],
  ['GET', '/v1/acl/policy/name/web'],
  ['PUT', '/v1/config'],
  ['GET', '/v1/config/service-defaults/web'],
  ['OPTIONS', '/v1/acl/policy'],
  ['GET', '/v1/nothing/here'],
]

describe('http/router: kept matches', function () {
  it('answers every request as @koa/router does, the first time and again', function () {
    const plain = withRoutes(new Router())
    const kept = withRoutes(new ApiRouter())
    for (let round = 0; round < 3; round++) {
      for (const [method, path] of REQUESTS) {
        expect(summary(kept.match(path, method)), `${method} ${path}, round ${round}`).to.deep.equal(summary(plain.match(path, method)))
      }
    }
  })

  it('does not test the routes again for a method and path it has seen', function () {
    const router = withRoutes(new ApiRouter())
    let tested = 0
    for (const layer of router.stack) {
      const match = layer.match.bind(layer)
      layer.match = (path: string) => {
        tested++
        return match(path)
      }
    }
    router.match('/v1/acl/token', 'PUT')
    expect(tested).to.equal(router.stack.length)
    router.match('/v1/acl/token', 'PUT')
    expect(tested).to.equal(router.stack.length)
    router.match('/v1/acl/token', 'GET')
    expect(tested).to.equal(2 * router.stack.length)
  })

  it('matches a route registered after a request, and gives each answer its own list of matched routes', function () {
    const router = new ApiRouter()
    router.get('/a', () => undefined)
    expect(router.match('/b', 'GET').route).to.equal(false)
    router.get('/b', () => undefined)
    expect(router.match('/b', 'GET').route).to.equal(true)
    const first = router.match('/a', 'GET')
    const second = router.match('/a', 'GET')
    expect(first.path).to.not.equal(second.path)
    first.path.push(...second.path)
    expect(router.match('/a', 'GET').path).to.have.length(1)
  })

  it('still answers rightly past the bound of kept answers', function () {
    const plain = withRoutes(new Router())
    const kept = withRoutes(new ApiRouter())
    for (let n = 0; n < 2_500; n++) {
      const path = `/v1/acl/token/${n.toString(16).padStart(8, '0')}-0000-4000-8000-000000000000`
      expect(summary(kept.match(path, 'GET'))).to.deep.equal(summary(plain.match(path, 'GET')))
    }
    expect(summary(kept.match('/v1/acl/token', 'PUT'))).to.deep.equal(summary(plain.match('/v1/acl/token', 'PUT')))
  })
})
