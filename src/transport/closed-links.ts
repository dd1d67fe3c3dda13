/**
 * The peer links of a server that runs alone without a cluster key: its cluster port accepts and closes every
 * connection (nobody can prove a key it does not have), nothing is ever sent, and it has no peers to ask.
 */
import { createServer, type AddressInfo, type Server } from 'node:net'
import { TransportError } from './errors.js'

export class ClosedLinks {
  private constructor(
    private readonly server: Server,
    readonly address: AddressInfo,
  ) {}

  static async start(host: string, port: number): Promise<ClosedLinks> {
    const server = createServer((socket) => socket.destroy())
    const address = await new Promise<AddressInfo>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, host, () => {
        server.off('error', reject)
        resolve(server.address() as AddressInfo)
      })
    })
    return new ClosedLinks(server, address)
  }

  send(): boolean {
    return false
  }

  request(to: string): Promise<unknown> {
    return Promise.reject(new TransportError('unknown_peer', to, 'no', 'this server runs alone and has no peer links'))
  }

  onMessage(): void {}
  onRequest(): void {}
  onPeerState(): void {}
  setPeers(): void {}

  advertisedAddress(): string | undefined {
    return undefined
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()))
  }
}
