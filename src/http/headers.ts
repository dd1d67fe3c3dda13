/**
 * The contract's headers and Consul's names for them, so that Consul's own clients and tools work against warden
 * unchanged (issue 17). The contract renames Consul's `X-Consul-*` headers `X-Service-*`; warden speaks both.
 *
 * Requests: a header is read under the contract's name first and under Consul's only when the contract's is absent or
 * empty. Where a request sends both, the contract's wins, whatever Consul's says.
 *
 * Responses: every `X-Service-*` header leaves with its `X-Consul-*` twin, always with the same value. Both are set
 * here and only here, so that no call site can send one without the other or let their values drift apart.
 */
import type { Context } from 'koa'

/** Request headers the contract names, by the part after the prefix. */
export type RequestHeaderName = 'Token' | 'Namespace'

/** Response headers the contract names, by the part after the prefix. */
export type ResponseHeaderName =
  | 'Index'
  | 'KnownLeader'
  | 'LastContact'
  | 'Effective-Consistency'
  | 'Default-ACL-Policy'
  | 'Results-Filtered-By-ACLs'

const CONTRACT_PREFIX = 'X-Service-'
const CONSUL_PREFIX = 'X-Consul-'

/**
 * A request header under the contract's name, else under Consul's; with the name it came under, so that an error
 * about its value names the header the caller actually sent. Undefined when neither carries a value.
 */
export function requestHeader(ctx: Context, name: RequestHeaderName): { header: string; value: string } | undefined {
  for (const header of [CONTRACT_PREFIX + name, CONSUL_PREFIX + name]) {
    const value = ctx.get(header)
    if (value !== '') return { header, value }
  }
  return undefined
}

/** Sets a response header under the contract's name and under Consul's, to the same value. */
export function setResponseHeader(ctx: Context, name: ResponseHeaderName, value: string): void {
  ctx.set(CONTRACT_PREFIX + name, value)
  ctx.set(CONSUL_PREFIX + name, value)
}
