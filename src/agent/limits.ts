/**
 * How many HTTP connections a node accepts, from the process's open-file limit. Every connection is a file
 * descriptor, and so is every LevelDB table, log and lock file the stores open: were connections allowed to take
 * them all, LevelDB would fail to open a file, and a node whose storage fails stops. A few thousand held blocking
 * queries must not be a way to stop a node.
 */
import { readFileSync } from 'node:fs'

/** The most HTTP connections a node accepts whatever its limit: enough for its 20,000 blocking queries and then some. */
export const HTTP_CONNECTIONS_MAX = 32_768

/**
 * Descriptors kept back from connections: LevelDB's table caches (64 for the state, LevelDB's default for the log),
 * their logs and compaction outputs, the peer port and its links, snapshot streams, the process's own. A quarter of a
 * small limit, 1,024 of a large one.
 */
export function httpConnectionsFor(openFilesLimit: number | undefined): number {
  if (openFilesLimit === undefined || !Number.isFinite(openFilesLimit)) return HTTP_CONNECTIONS_MAX
  const reserve = Math.min(1024, Math.floor(openFilesLimit / 4))
  return Math.max(1, Math.min(HTTP_CONNECTIONS_MAX, openFilesLimit - reserve))
}

/** The soft open-file limit (RLIMIT_NOFILE) from /proc/self/limits, or undefined where that cannot be read. */
export function openFilesLimit(read: () => string = () => readFileSync('/proc/self/limits', 'utf8')): number | undefined {
  try {
    const line = read()
      .split('\n')
      .find((text) => text.startsWith('Max open files'))
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0]
    if (soft === undefined || soft === 'unlimited') return undefined
    const value = Number(soft)
    return Number.isSafeInteger(value) && value > 0 ? value : undefined
  } catch {
    return undefined
  }
}
