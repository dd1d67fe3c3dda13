/**
 * The token reaper: on the leader, deletes expired tokens through the log in bounded batches. Every node already
 * treats a token as absent from its ExpirationTime on; the reaper only reclaims the space. `now` travels in the
 * command, and apply deletes only tokens that are expired at that instant, so a late or repeated batch is harmless.
 */
import type { Logger } from 'pino'
import type { Cluster } from '../rpc/index.js'
import type { StateStore } from '../state/store.js'
import { expiredTokenAccessors } from '../state/tables.js'
import { COMMAND_VERSION } from '../state/commands.js'

export interface TokenReaperOptions {
  intervalMs: number
  batchSizeMax: number
  now: () => number
  log: Logger
}

export class TokenReaper {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private stopped = false

  constructor(
    private readonly state: StateStore,
    private readonly cluster: Cluster,
    private readonly options: TokenReaperOptions,
  ) {}

  start(): void {
    this.schedule()
  }

  private schedule(): void {
    if (this.stopped) return
    this.timer = setTimeout(() => {
      this.running = this.pass()
        .then(
          () => undefined,
          (error: unknown) => this.options.log.warn({ err: error }, 'token reaper pass failed; retrying next interval'),
        )
        .finally(() => {
          this.running = undefined
          this.schedule()
        })
    }, this.options.intervalMs)
  }

  /** One pass: while this node leads, delete expired tokens a batch at a time. */
  async pass(): Promise<number> {
    let deleted = 0
    while (!this.stopped && this.cluster.isLeader()) {
      const now = this.options.now()
      const accessors = await expiredTokenAccessors(this.state.db, now, this.options.batchSizeMax)
      if (accessors.length === 0) break
      const result = await this.cluster.propose({
        v: COMMAND_VERSION,
        type: 'acl.token.delete-expired',
        AccessorIDs: accessors,
        now: new Date(now).toISOString(),
      })
      const count = result.ok ? Number(result.value) : 0
      deleted += count
      if (count > 0) this.options.log.info({ deleted: count }, 'reaped expired tokens')
      if (accessors.length < this.options.batchSizeMax || count === 0) break
    }
    return deleted
  }

  async stop(): Promise<void> {
    this.stopped = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    await this.running
  }
}
