/**
 * The last resort when a chaos run cannot stop its cluster the orderly way (a second Ctrl-C, or the process exiting
 * while the run is still going): SIGKILL every process the cluster's state file names, synchronously, as an `exit`
 * handler must. A pid is signalled only while its command line still names what the cluster tool started there (the
 * node's data dir, the proxy's ready file), so a pid the system has since given to another program is left alone.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

interface StateFile {
  nodes: Record<string, { pid: number; dataDir: string }>
  proxyPid?: number
}

function commandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ')
  } catch {
    // No /proc entry: either no such process, or no /proc at all (macOS), where ps answers.
  }
  try {
    return execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' }).trim() || undefined
  } catch {
    return undefined // ps exits 1 when there is no such process.
  }
}

function killIfOurs(pid: number | undefined, marker: string): void {
  if (pid === undefined || pid <= 0) return
  if (!(commandLine(pid)?.includes(marker) ?? false)) return
  try {
    process.kill(pid, 'SIGKILL')
  } catch {
    // It exited between the check and the signal: nothing left to stop.
  }
}

/** Kills every node and the link proxy of the cluster under `root`; returns how many it found recorded. */
export function killClusterSync(root: string): number {
  let state: StateFile
  try {
    state = JSON.parse(readFileSync(join(root, 'state.json'), 'utf8')) as StateFile
  } catch {
    return 0 // No state file yet: `up` had not started anything.
  }
  const nodes = Object.values(state.nodes)
  for (const node of nodes) killIfOurs(node.pid, node.dataDir)
  killIfOurs(state.proxyPid, join(root, 'proxy.json'))
  return nodes.length
}
