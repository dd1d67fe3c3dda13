/**
 * `warden operator raft list-peers|remove-peer|transfer-leader`, `warden members`, `warden catalog datacenters`
 * and `warden keygen`, as Consul's.
 */
import { randomBytes } from 'node:crypto'
import { UsageError } from '../argv.js'
import type { Command } from '../command.js'
import { json } from '../format.js'

/** Columns separated by two spaces, each as wide as its widest cell (Consul's columnize). */
export function columns(rows: string[][]): string {
  const widths: number[] = []
  for (const row of rows) row.forEach((cell, at) => (widths[at] = Math.max(widths[at] ?? 0, cell.length)))
  return rows.map((row) => row.map((cell, at) => (at === row.length - 1 ? cell : cell.padEnd(widths[at]!))).join('  ')).join('\n')
}

export const listPeers: Command = {
  path: 'operator raft list-peers',
  synopsis: 'Show the Raft peer set',
  help: `Usage: warden operator raft list-peers [options]

  Shows the servers of the Raft configuration, who leads, and who votes:

      $ warden operator raft list-peers`,
  flags: {},
  format: true,
  async run(context) {
    const configuration = await context.api('Error getting peers', () => context.client.operator.raft.configuration(context.consistency))
    context.output(configuration, (value) =>
      columns([
        ['Node', 'ID', 'Address', 'State', 'Voter'],
        ...value.Servers.map((server) => [server.Node, server.ID, server.Address, server.Leader ? 'leader' : server.Voter ? 'follower' : 'non-voter', String(server.Voter)]),
      ]),
    )
  },
}

export const removePeer: Command = {
  path: 'operator raft remove-peer',
  synopsis: 'Remove a server from the Raft configuration',
  help: `Usage: warden operator raft remove-peer (-id ID | -address HOST:PORT) [options]

  Removes a server that is gone for good from the Raft peer set:

      $ warden operator raft remove-peer -id n3`,
  flags: {
    id: { type: 'string', value: 'value', help: 'The node name (Raft ID) of the server to remove.' },
    address: { type: 'string', value: 'value', help: 'The cluster address of the server to remove.' },
  },
  async run(context) {
    const id = context.string('id')
    const address = context.string('address')
    if ((id === undefined) === (address === undefined)) throw new UsageError('Must specify exactly one of -id or -address')
    await context.api('Error removing peer', () => context.client.operator.raft.removePeer(id === undefined ? { address: address! } : { id }))
    context.print(id === undefined ? `Removed peer with address "${address}"` : `Removed peer with id "${id}"`)
  },
}

export const transferLeader: Command = {
  path: 'operator raft transfer-leader',
  synopsis: 'Hand Raft leadership to another server',
  help: `Usage: warden operator raft transfer-leader [-id ID] [options]

  Makes another voter the leader: the one named, or one the leader picks:

      $ warden operator raft transfer-leader -id n2`,
  flags: { id: { type: 'string', value: 'value', help: 'The node name (Raft ID) of the server to make leader.' } },
  async run(context) {
    const id = context.string('id')
    const done = await context.api('Error transferring leadership', () => context.client.operator.raft.transferLeader(id))
    if (!done) throw new UsageError('Error transferring leadership: the server did not report success')
    context.print('Success')
  },
}

export const members: Command = {
  path: 'members',
  synopsis: 'List the servers of this datacenter (and federated ones)',
  help: `Usage: warden members [options]

  Shows each server: its name, cluster address, status, role and datacenter:

      $ warden members`,
  flags: {},
  format: true,
  async run(context) {
    const servers = await context.api('Error retrieving members', () => context.client.operator.servers(context.consistency))
    context.output(servers, (value) =>
      columns([['Node', 'Address', 'Status', 'Type', 'Role', 'DC'], ...value.map((server) => [server.Name, server.Address, server.Status, 'server', server.Role, server.Datacenter])]),
    )
  },
}

export const catalogDatacenters: Command = {
  path: 'catalog datacenters',
  synopsis: 'List the known datacenters',
  help: `Usage: warden catalog datacenters [options]

  Lists the datacenters this agent knows, its own first:

      $ warden catalog datacenters`,
  flags: {},
  format: true,
  async run(context) {
    const datacenters = await context.api('Error listing datacenters', () => context.client.catalog.datacenters())
    context.print(context.format === 'json' ? json(datacenters) : datacenters.join('\n'))
  },
}

export const keygen: Command = {
  path: 'keygen',
  synopsis: 'Print a new cluster key',
  help: `Usage: warden keygen

  Prints 32 random bytes in base64, for --cluster-key (as consul keygen does for its gossip key):

      $ warden keygen > cluster.key && chmod 600 cluster.key`,
  flags: {},
  http: false,
  async run(context) {
    context.print(randomBytes(32).toString('base64'))
  },
}
