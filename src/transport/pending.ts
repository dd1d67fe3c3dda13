/**
 * Connections to the peer port that have not proven the cluster key yet, bounded, with an eviction rule a flood
 * cannot turn against real peers.
 *
 * Anyone who reaches the peer port can open connections and never finish a handshake. Refusing newcomers at the
 * bound would let a few dozen idle connections keep every real peer out; dropping the oldest (as before) lets a
 * churning flood, which opens connections faster than a real handshake completes (a few round trips, so hundreds of
 * milliseconds between datacenters), evict every real handshake before it completes. So connections are grouped by
 * where they come from (an IPv4 address, or an IPv6 /64, which one machine commonly holds whole), and at the bound
 * the oldest connection of the largest group goes: a flood from a few addresses only ever evicts its own, and a
 * real peer, holding one or two pending connections from its own address, keeps them. What remains possible is a
 * flood from more addresses than the bound holds; the peer port belongs behind a firewall that admits the servers.
 */

export class PendingConnections<T> {
  /** Each group's items, oldest first. Invariant: no empty set; the sizes add up to `size`. */
  private readonly byGroup = new Map<string, Set<T>>()
  private readonly groupOf = new Map<T, string>()

  constructor(readonly max: number) {}

  get size(): number {
    return this.groupOf.size
  }

  has(item: T): boolean {
    return this.groupOf.has(item)
  }

  /** Adds `item` to `group`; when that passes the bound, removes and returns the item to close (never `item`). */
  add(item: T, group: string): T | undefined {
    if (this.groupOf.has(item)) return undefined
    let members = this.byGroup.get(group)
    if (members === undefined) this.byGroup.set(group, (members = new Set()))
    members.add(item)
    this.groupOf.set(item, group)
    if (this.groupOf.size <= this.max) return undefined
    const evicted = this.oldestOfLargest(item)
    if (evicted !== undefined) this.delete(evicted)
    return evicted
  }

  delete(item: T): void {
    const group = this.groupOf.get(item)
    if (group === undefined) return
    this.groupOf.delete(item)
    const members = this.byGroup.get(group)!
    members.delete(item)
    if (members.size === 0) this.byGroup.delete(group)
  }

  /**
   * The oldest item of the group with the most items, ties going to the group that has held items longest (the
   * map's order: a group is added when it gains its first item and removed when it loses its last). Linear in the
   * number of groups, which is at most max + 1.
   */
  private oldestOfLargest(newcomer: T): T | undefined {
    let largest: Set<T> | undefined
    for (const members of this.byGroup.values()) if (largest === undefined || members.size > largest.size) largest = members
    for (const member of largest ?? []) if (member !== newcomer) return member
    return undefined
  }
}

/**
 * The group a remote address counts in: an IPv4 address (IPv4-mapped IPv6 ones included), or the /64 prefix of an
 * IPv6 address. Only for grouping, so a malformed address need not be refused: it is a group of its own.
 */
export function addressGroup(remoteAddress: string | undefined): string {
  if (remoteAddress === undefined) return '?'
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(remoteAddress)
  if (mapped !== null) return mapped[1]!
  if (!remoteAddress.includes(':')) return remoteAddress
  const address = remoteAddress.split('%')[0]!
  const [head = '', tail] = address.split('::', 2)
  const headGroups = head === '' ? [] : head.split(':')
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':')
  const zeros = tail === undefined ? [] : Array.from({ length: Math.max(0, 8 - headGroups.length - tailGroups.length) }, () => '0')
  const groups = [...headGroups, ...zeros, ...tailGroups].slice(0, 4)
  return `${groups.map((group) => (Number.parseInt(group, 16) || 0).toString(16)).join(':')}::/64`
}
