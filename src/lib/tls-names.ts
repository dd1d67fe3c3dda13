/**
 * The names TLS certificates carry in a warden federation, as Consul's `verify_server_hostname` expects them: a
 * server of datacenter dc1 is `server.dc1.warden`, a client `client.dc1.warden`. One place, because the certificate
 * generator writes them and the transport and agent check them.
 */
export const TLS_DOMAIN = 'warden'

/** The name a server's certificate must carry for its datacenter: `server.dc1.warden`. */
export function serverName(datacenter: string, domain = TLS_DOMAIN): string {
  return `server.${datacenter}.${domain}`
}
