/**
 * The API's router: @koa/router, with its matching of a request's method and path kept. The router tests every
 * request against each of its routes' regular expressions in turn (about 70 of them) to collect every route whose
 * path matches: 2.7 µs of a token create's 110 µs on a loaded leader's main thread (docs/benchmarks.md, issue 22,
 * sixth session). The answer depends on the method, the path and the routes alone, and the routes are fixed before
 * the first request, so it is kept per method and path: the paths that carry load (a create's, a self read's) repeat.
 * Paths with IDs in them repeat less; the kept answers are bounded and dropped together when full.
 */
import Router from '@koa/router'

/** Method-and-path answers kept at most; past it they are all dropped and kept afresh. */
const MATCHES_MAX = 1024

type MatchResult = ReturnType<Router['match']>

export class ApiRouter extends Router {
  private readonly matches = new Map<string, MatchResult>()
  /** The routes' count when the kept answers were made: a route registered since makes them stale. */
  private matchedStack = 0

  override match(path: string, method: string): MatchResult {
    if (this.stack.length !== this.matchedStack) {
      this.matches.clear()
      this.matchedStack = this.stack.length
    }
    const key = `${method} ${path}`
    let found = this.matches.get(key)
    if (found === undefined) {
      found = super.match(path, method)
      if (this.matches.size >= MATCHES_MAX) this.matches.clear()
      this.matches.set(key, found)
    }
    // The router stores `path` as the request's ctx.matched, which a later router would extend: each gets its own.
    return { path: [...found.path], pathAndMethod: found.pathAndMethod, route: found.route }
  }
}
