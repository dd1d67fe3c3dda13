/** Config entries (`/v1/config`), with Consul's compare-and-set on apply and delete. */
import type { Client, QueryOptions, RequestOptions } from './client.js'
import type { ConfigEntry } from './types.js'

const id = encodeURIComponent

export class ConfigEntries {
  constructor(private readonly client: Client) {}

  /**
   * Creates or replaces the entry. With `cas`, only if its ModifyIndex is `cas` (0: only if it does not exist).
   * Answers whether it was written: false when the condition stopped it.
   */
  apply(entry: ConfigEntry, options: RequestOptions & { cas?: number } = {}): Promise<boolean> {
    return this.client.put('/v1/config', entry, { ...options, query: { cas: options.cas, ...options.query } })
  }

  get(kind: string, name: string, options?: QueryOptions): Promise<ConfigEntry> {
    return this.client.get(`/v1/config/${id(kind)}/${id(name)}`, options)
  }

  list(kind: string, options?: QueryOptions): Promise<ConfigEntry[]> {
    return this.client.get(`/v1/config/${id(kind)}`, options)
  }

  /** Deletes the entry; with `cas`, only if its ModifyIndex is `cas`. Answers whether it is gone. */
  async delete(kind: string, name: string, options: RequestOptions & { cas?: number } = {}): Promise<boolean> {
    const answer = await this.client.delete<unknown>(`/v1/config/${id(kind)}/${id(name)}`, { ...options, query: { cas: options.cas, ...options.query } })
    // Consul answers an unconditional delete with `{}`; only a compare-and-set answers with a boolean.
    return answer !== false
  }
}
