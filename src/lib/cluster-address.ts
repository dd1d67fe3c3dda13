/**
 * The one rule for a cluster address, the host:port a node's peer links are dialed at: used where such an address
 * comes in (a join request, the leader before it proposes one, the agent's --peer flags at start) and by the peer
 * transport, which must never be handed one it cannot dial. The transport dials `ws://${address}/...`, and ws throws
 * synchronously on a URL it cannot parse, so anything accepted here must also be a URL host and port that parses
 * (an all-digit last label such as `999.1.1.1` or `foo.123` is read as an IPv4 address and refused by the URL parser).
 */
import { isIPv4, isIPv6 } from 'node:net'
import { InvalidInputError } from './errors.js'

/** Characters of a cluster address: the same bound the peer handshake puts on an advertised address. */
export const CLUSTER_ADDRESS_CHARS_MAX = 256

/** host:port, the host bracketed when it is IPv6; the port's range and the host's form are checked after. */
const HOST_PORT = /^(\[[^\]]*\]|[^[\]:]*):(\d{1,5})$/
/** A DNS label, with `_` allowed as many container and service names use it. */
const LABEL = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/
/** What the URL parser takes for a number in the last label, and so would parse (and refuse) as IPv4. */
const NUMERIC_LABEL = /^(?:\d+|0[xX][0-9A-Fa-f]*)$/

const RULE = 'must be host:port, the host a host name, an IPv4 address or a bracketed IPv6 address, the port from 1 to 65535'

/**
 * The rule `address` breaks, worded to follow a field name (`Address: must be ...`), or undefined when it is a cluster
 * address. Quotes at most 64 characters of what it was given.
 */
export function clusterAddressProblem(address: unknown): string | undefined {
  if (typeof address !== 'string') return 'must be a string of the form host:port'
  if (address.length > CLUSTER_ADDRESS_CHARS_MAX) return `must be at most ${CLUSTER_ADDRESS_CHARS_MAX} characters, got ${address.length}`
  const quoted = JSON.stringify(address.length > 64 ? `${address.slice(0, 64)}…` : address)
  const match = HOST_PORT.exec(address)
  if (match === null) return `${RULE}, got ${quoted}`
  const [, host, port] = match as unknown as [string, string, string]
  if (Number(port) < 1 || Number(port) > 65535) return `port must be from 1 to 65535, got ${quoted}`
  if (!isHost(host)) return `${RULE}, got ${quoted}`
  // The dial's own parser has the last word; the checks above are what makes the message say why.
  if (!URL.canParse(`ws://${address}/`)) return `${RULE}, got ${quoted}`
  return undefined
}

/** Whether `address` is a cluster address. */
export function isClusterAddress(address: unknown): address is string {
  return clusterAddressProblem(address) === undefined
}

/** Returns `address` if it is a cluster address, else throws InvalidInputError naming `field` and the rule broken. */
export function checkClusterAddress(field: string, address: unknown): string {
  const problem = clusterAddressProblem(address)
  if (problem !== undefined) throw new InvalidInputError(field, problem)
  return address as string
}

function isHost(host: string): boolean {
  if (host.startsWith('[')) return isIPv6(host.slice(1, -1))
  // A trailing dot (a fully qualified name) is allowed, as DNS and the URL parser allow it.
  const name = host.endsWith('.') ? host.slice(0, -1) : host
  const labels = name.split('.')
  if (!labels.every((label) => LABEL.test(label))) return false
  return !NUMERIC_LABEL.test(labels.at(-1)!) || isIPv4(name)
}
