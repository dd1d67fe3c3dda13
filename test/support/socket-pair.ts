/**
 * The two sockets of a proxied connection, tied together as a real TCP proxy ties them: either failing or closing
 * ends both, and each is tracked in `sockets` while open (so a test's cleanup can destroy what is left).
 */
import type { Socket } from 'node:net'

export function pairSockets(client: Socket, upstream: Socket, sockets: Set<Socket>): void {
  for (const socket of [client, upstream]) {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    // A reset (which some tests provoke) or a refused upstream: either side failing ends the pair.
    socket.on('error', () => {
      client.destroy()
      upstream.destroy()
    })
  }
  client.on('close', () => upstream.destroy())
  upstream.on('close', () => client.destroy())
}
