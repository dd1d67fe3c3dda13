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

const CONTRACT_PREFIX = 'X-Service-'
const CONSUL_PREFIX = 'X-Consul-'

/** Request headers the contract names, by the part after the prefix. */
const REQUEST_NAMES = ['Token', 'Namespace'] as const
export type RequestHeaderName = (typeof REQUEST_NAMES)[number]

/** Response headers the contract names, by the part after the prefix. */
const RESPONSE_NAMES = ['Index', 'KnownLeader', 'LastContact', 'Effective-Consistency', 'Default-ACL-Policy', 'Results-Filtered-By-ACLs'] as const
export type ResponseHeaderName = (typeof RESPONSE_NAMES)[number]

/** Both full names of each header, the contract's first: built once here rather than concatenated per request. */
function bothNames<N extends string>(names: readonly N[]): Record<N, readonly [string, string]> {
  return Object.fromEntries(names.map((name) => [name, [CONTRACT_PREFIX + name, CONSUL_PREFIX + name] as const])) as Record<N, readonly [string, string]>
}

const REQUEST_HEADERS = bothNames(REQUEST_NAMES)
const RESPONSE_HEADERS = bothNames(RESPONSE_NAMES)

/**
 * A request header under the contract's name, else under Consul's; with the name it came under, so that an error
 * about its value names the header the caller actually sent. Undefined when neither carries a value.
 */
export function requestHeader(ctx: Context, name: RequestHeaderName): { header: string; value: string } | undefined {
  for (const header of REQUEST_HEADERS[name]) {
    const value = ctx.get(header)
    if (value !== '') return { header, value }
  }
  return undefined
}

/** Sets a response header under the contract's name and under Consul's, to the same value. */
export function setResponseHeader(ctx: Context, name: ResponseHeaderName, value: string): void {
  const [contract, consul] = RESPONSE_HEADERS[name]
  ctx.set(contract, value)
  ctx.set(consul, value)
}
