/** Status, operator, catalog and cloud-link endpoints: who the servers are and who leads. */
import type { Client, QueryOptions, RequestOptions } from './client.js'
import type { CloudLinkEnvelope, ClusterStatus, RaftConfiguration, RaftState, Server } from './types.js'

export class Status {
  constructor(private readonly client: Client) {}

  /** The leader's cluster address, or "" when none is known. No token is needed. */
  leader(options?: QueryOptions): Promise<string> {
    return this.client.get('/v1/status/leader', { token: null, ...options })
  }

  peers(options?: QueryOptions): Promise<string[]> {
    return this.client.get('/v1/status/peers', { token: null, ...options })
  }
}

export class Raft {
  constructor(private readonly client: Client) {}

  configuration(options?: QueryOptions): Promise<RaftConfiguration> {
    return this.client.get('/v1/operator/raft/configuration', options)
  }

  /** The answering node's own Raft state. */
  state(options?: QueryOptions): Promise<RaftState> {
    return this.client.get('/v1/operator/raft/state', options)
  }

  async removePeer(server: { id?: string; address?: string }, options?: RequestOptions): Promise<void> {
    await this.client.delete('/v1/operator/raft/peer', { ...options, query: { id: server.id, address: server.address, ...options?.query } })
  }

  /** Hands leadership to the server named (or one the leader picks); answers once the transfer is done. */
  async transferLeader(serverId?: string, options?: RequestOptions): Promise<boolean> {
    const answer = await this.client.post<{ Success?: boolean }>('/v1/operator/raft/transfer-leader', undefined, { ...options, query: { id: serverId, ...options?.query } })
    return answer?.Success === true
  }
}

export class Operator {
  readonly raft: Raft

  constructor(private readonly client: Client) {
    this.raft = new Raft(client)
  }

  /** Every server as the leader sees it, and the cluster around it; a blocking query with `index` and `wait`. */
  cluster(options?: QueryOptions): Promise<ClusterStatus> {
    return this.client.get('/v1/operator/cluster', options)
  }

  /** The servers of this datacenter (and of federated ones), as `warden members` shows them. */
  servers(options?: QueryOptions): Promise<Server[]> {
    return this.client.get('/v1/operator/servers', options)
  }
}

export class Catalog {
  constructor(private readonly client: Client) {}

  /** The datacenters known, the local one first. No token is needed. */
  datacenters(options?: QueryOptions): Promise<string[]> {
    return this.client.get('/v1/catalog/datacenters', { token: null, ...options })
  }
}

export const LINK_PATH = '/api/cloud/v2/link/global'

export class CloudLink {
  constructor(private readonly client: Client) {}

  read(options?: QueryOptions): Promise<CloudLinkEnvelope> {
    return this.client.get(LINK_PATH, options)
  }

  /** Writes the link's data; with `version`, only if the link's version is that one (409 otherwise). */
  write(data: { resourceId: string; clientId: string; clientSecret: string }, options: RequestOptions & { version?: string } = {}): Promise<CloudLinkEnvelope> {
    return this.client.put(LINK_PATH, { data }, { ...options, query: { version: options.version, ...options.query } })
  }

  async delete(options?: RequestOptions): Promise<void> {
    await this.client.delete(LINK_PATH, options)
  }
}
