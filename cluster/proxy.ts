/**
 * The link proxies of a local cluster, in one small long-lived process (so they outlive the `npm run cluster -- up`
 * that started them). Every directed peer link A→B is a loopback TCP listener: node A is told that B lives there, and
 * the proxy forwards bytes to B's real cluster port. Nodes prove their names in the peer handshake, so the detour
 * changes nothing but the path, and cutting the path is a partition at the transport, below Raft and WebSocket.
 * In a federation (`up --datacenters`) every link also names the datacenters of its two ends, and a datacenter can be
 * cut off from the others: every link between one of its nodes and a node of another datacenter is blocked, while the
 * links inside each datacenter stay open.
 *
 * Run by cluster/lib.ts, not by hand:
 *   node --import tsx cluster/proxy.ts --links '[{"from":"n1","to":"n2","target":"127.0.0.1:P"}, ...]' --ready FILE
 * It binds a free port per link and one control port, then writes FILE (atomically, by rename) as
 * `{ pid, controlAddress, links: [{ from, to, target, address }] }`. The control API is loopback HTTP without auth
 * (anyone on this machine could already signal the nodes):
 *   GET  /state                 → { partitioned: string[], links: [{ from, to, address, blocked, connections }] }
 *   GET  /state                 → also partitionedDatacenters: string[]
 *   POST /partition?node=NAME   → cuts every open connection of every link from or to NAME, and refuses new ones
 *   POST /partition-dc?dc=DC    → the same for every link between a node of DC and a node of another datacenter
 *   POST /heal                  → lets every link through again (nodes and datacenters)
 * SIGTERM or SIGINT closes everything and exits 0.
 */
import { rename, writeFile } from 'node:fs/promises'
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net'

export interface LinkSpec {
  from: string
  to: string
  /** host:port of the `to` node's cluster listener. */
  target: string
  /** The datacenters of both ends, in a federation (absent for a cluster of one datacenter). */
  fromDatacenter?: string
  toDatacenter?: string
}

export interface ProxyReady {
  pid: number
  controlAddress: string
  links: Array<LinkSpec & { address: string }>
}

interface Link extends LinkSpec {
  server: Server
  address: string
  /** Both sockets of every connection through this link, so a partition can cut them at once. */
  connections: Set<{ client: Socket; upstream: Socket }>
}

const partitioned = new Set<string>()
const partitionedDatacenters = new Set<string>()

function crossesDatacenters(link: LinkSpec): boolean {
  return link.fromDatacenter !== undefined && link.toDatacenter !== undefined && link.fromDatacenter !== link.toDatacenter
}

function blocked(link: LinkSpec): boolean {
  if (partitioned.has(link.from) || partitioned.has(link.to)) return true
  return crossesDatacenters(link) && (partitionedDatacenters.has(link.fromDatacenter!) || partitionedDatacenters.has(link.toDatacenter!))
}

function splitAddress(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(':')
  return { host: address.slice(0, colon), port: Number(address.slice(colon + 1)) }
}

/** A reset (RST), not a clean close: a partitioned peer should look like an unreachable one, not a polite goodbye. */
function cut(socket: Socket): void {
  if (!socket.destroyed) socket.resetAndDestroy()
}

function onClient(link: Link, client: Socket): void {
  if (blocked(link)) {
    client.on('error', () => undefined) // The reset may race the client's own write; nothing to report.
    cut(client)
    return
  }
  const { host, port } = splitAddress(link.target)
  const upstream = connect({ host, port })
  // Raft frames are small and latency-bound: without this, Nagle's algorithm holds them for the peer's delayed ACK
  // (about 40 ms per round trip), which a real network between the nodes would not add.
  client.setNoDelay(true)
  upstream.setNoDelay(true)
  const pair = { client, upstream }
  link.connections.add(pair)
  // Either side failing ends both: the node on the other end sees the link drop and redials, as it would on a
  // real network. Errors are expected here (a killed node, a cut) and carry nothing the nodes do not already see.
  const close = (): void => {
    link.connections.delete(pair)
    cut(client)
    cut(upstream)
  }
  client.on('error', close)
  upstream.on('error', close)
  client.on('close', close)
  upstream.on('close', close)
  client.pipe(upstream)
  upstream.pipe(client)
}

function listen(server: Server, port = 0): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject)
      resolve(server.address() as AddressInfo)
    })
  })
}

async function openLink(spec: LinkSpec): Promise<Link> {
  const link: Link = { ...spec, server: createServer(), address: '', connections: new Set() }
  link.server.on('connection', (client) => onClient(link, client))
  const bound = await listen(link.server)
  link.address = `127.0.0.1:${bound.port}`
  return link
}

/** Resets every open connection of every link now blocked. */
function cutBlocked(links: Link[]): void {
  for (const link of links) {
    if (!blocked(link)) continue
    for (const pair of [...link.connections]) {
      link.connections.delete(pair)
      cut(pair.client)
      cut(pair.upstream)
    }
  }
}

function control(links: Link[], request: IncomingMessage, response: ServerResponse): void {
  const url = new URL(request.url ?? '/', 'http://control')
  const reply = (status: number, body: unknown): void => {
    response.writeHead(status, { 'content-type': 'application/json' })
    response.end(JSON.stringify(body))
  }
  const names = new Set(links.flatMap((link) => [link.from, link.to]))
  const datacenters = new Set(links.filter(crossesDatacenters).flatMap((link) => [link.fromDatacenter!, link.toDatacenter!]))
  if (request.method === 'GET' && url.pathname === '/state') {
    reply(200, {
      partitioned: [...partitioned].sort(),
      partitionedDatacenters: [...partitionedDatacenters].sort(),
      links: links.map((link) => ({
        from: link.from,
        to: link.to,
        ...(link.fromDatacenter === undefined ? {} : { fromDatacenter: link.fromDatacenter, toDatacenter: link.toDatacenter }),
        address: link.address,
        blocked: blocked(link),
        connections: link.connections.size,
      })),
    })
  } else if (request.method === 'POST' && url.pathname === '/partition') {
    const node = url.searchParams.get('node') ?? ''
    if (!names.has(node)) return reply(400, { error: `node: no link touches ${JSON.stringify(node)}` })
    partitioned.add(node)
    cutBlocked(links)
    reply(200, { partitioned: [...partitioned].sort() })
  } else if (request.method === 'POST' && url.pathname === '/partition-dc') {
    const datacenter = url.searchParams.get('dc') ?? ''
    if (!datacenters.has(datacenter)) return reply(400, { error: `dc: no link joins ${JSON.stringify(datacenter)} to another datacenter` })
    partitionedDatacenters.add(datacenter)
    cutBlocked(links)
    reply(200, { partitionedDatacenters: [...partitionedDatacenters].sort() })
  } else if (request.method === 'POST' && url.pathname === '/heal') {
    partitioned.clear()
    partitionedDatacenters.clear()
    reply(200, { partitioned: [], partitionedDatacenters: [] })
  } else {
    reply(404, { error: `no ${request.method} ${url.pathname}` })
  }
}

function option(argv: string[], name: string): string {
  const position = argv.indexOf(name)
  const value = position === -1 ? undefined : argv[position + 1]
  if (value === undefined) throw new Error(`${name}: required`)
  return value
}

async function main(argv: string[]): Promise<void> {
  const specs = JSON.parse(option(argv, '--links')) as LinkSpec[]
  const readyPath = option(argv, '--ready')
  const links = await Promise.all(specs.map(openLink))
  const controlServer = createHttpServer((request, response) => control(links, request, response))
  const controlBound = await listen(controlServer)
  const ready: ProxyReady = {
    pid: process.pid,
    controlAddress: `127.0.0.1:${controlBound.port}`,
    links: links.map((link) => ({
      from: link.from,
      to: link.to,
      target: link.target,
      ...(link.fromDatacenter === undefined ? {} : { fromDatacenter: link.fromDatacenter }),
      ...(link.toDatacenter === undefined ? {} : { toDatacenter: link.toDatacenter }),
      address: link.address,
    })),
  }
  // Rename makes the file appear whole: the tool polls for it and must never read half of it.
  await writeFile(`${readyPath}.tmp`, JSON.stringify(ready))
  await rename(`${readyPath}.tmp`, readyPath)
  console.log(JSON.stringify({ msg: 'proxy ready', ...ready }))
  const stop = (): void => {
    for (const link of links) {
      link.server.close()
      for (const pair of link.connections) {
        pair.client.destroy()
        pair.upstream.destroy()
      }
    }
    controlServer.close()
    controlServer.closeAllConnections()
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

main(process.argv.slice(2)).catch((error: unknown) => {
  console.error(`proxy: ${error instanceof Error ? error.message : String(error)}`)
  process.exit(1)
})
