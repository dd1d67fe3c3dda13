/**
 * `GET /v1/snapshot` (issue 20): the whole state as one archive (state/archive.ts), streamed from a LevelDB snapshot
 * of this node's state at its applied index, gzip-compressed, so that 1,000,000 tokens go out a chunk at a time.
 *
 * - Permission: acl:write, as Consul's snapshot endpoint (a token that can write ACLs can read every secret anyway).
 * - Consistency: by default the node first passes the consistent read barrier (a ReadIndex round with the leader), so
 *   the snapshot holds every write the leader had committed when it was asked, as Consul's, which forwards the save
 *   to its leader; `?stale` takes this node's state as it is.
 * - `X-Service-Index` is the snapshot's applied index. Saves in flight on a node are bounded (SAVES_MAX): each holds
 *   a LevelDB snapshot while its client reads.
 */
import { pipeline, Readable } from 'node:stream'
import { createGzip } from 'node:zlib'
import type Router from '@koa/router'
import { WardenError } from '../../lib/errors.js'
import { wardenVersion } from '../../lib/version.js'
import { archiveFrames, RESTORE_UPLOAD_BYTES_MAX } from '../../lib/snapshot-archive.js'
import { openStateSnapshot } from '../../state/snapshot.js'
import type { StateStore } from '../../state/store.js'
import { auditBeforeChange, auditProposed } from '../audit.js'
import type { ApiContext } from '../context.js'
import { setResponseHeader } from '../headers.js'
import { authorizeAfterBody, hasParam, requirePermission } from '../request.js'

export const SAVES_MAX = 2
const savesInFlight = new WeakMap<StateStore, number>()

async function saveSnapshot(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  const { state, cluster, settings, now, log } = ctx.state.app
  if (!hasParam(ctx, 'stale')) await cluster.readBarrier('consistent')
  const inFlight = savesInFlight.get(state) ?? 0
  if (inFlight >= SAVES_MAX) throw new WardenError('rate_limited', `snapshot: ${SAVES_MAX} snapshots are being saved from this node; try again when one is done`)
  savesInFlight.set(state, inFlight + 1)
  const release = (): void => void savesInFlight.set(state, (savesInFlight.get(state) ?? 1) - 1)
  let reader: Awaited<ReturnType<typeof openStateSnapshot>>
  try {
    reader = await openStateSnapshot(state, { staged: false })
  } catch (error) {
    release()
    throw error
  }
  const meta = {
    Index: reader.appliedIndex,
    Term: cluster.raftState().term,
    Datacenter: settings.datacenter,
    Node: settings.nodeName,
    Time: new Date(now()).toISOString(),
    Version: wardenVersion(),
  }
  const gzip = createGzip()
  // Ends however the response ends (read to the end, the client gone, an error): the LevelDB snapshot is released.
  pipeline(Readable.from(archiveFrames(meta, reader.chunks())), gzip, (error) => {
    release()
    reader.close().catch(() => undefined)
    if (error !== undefined && error !== null && (error as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') log.warn({ err: error.message }, 'saving a snapshot failed')
  })
  setResponseHeader(ctx, 'Index', String(meta.Index))
  ctx.type = 'application/gzip'
  ctx.body = gzip
}

/**
 * `PUT /v1/snapshot`: restores the archive in the body on every server of the datacenter (controllers/snapshot-restore.ts
 * drives it, state/restore.ts applies it). acl:write, as the save, checked again once the archive is in. Answers 200
 * with an empty body, as Consul, and the restore's index in `X-Service-Index`; a faulty archive is a 400 naming the
 * fault, with nothing changed.
 */
async function restoreSnapshot(ctx: ApiContext): Promise<void> {
  await requirePermission(ctx, 'acl', 'write')
  const restorer = ctx.state.app.restorer
  if (restorer === undefined) throw new WardenError('internal', 'snapshot: this server cannot restore snapshots (it has no data directory to spool them to)')
  const announced = Number(ctx.get('content-length') || '0')
  if (announced > RESTORE_UPLOAD_BYTES_MAX) throw new WardenError('payload_too_large', `snapshot: the archive is larger than ${RESTORE_UPLOAD_BYTES_MAX} bytes`)
  const outcome = await restorer.restore(ctx.req, {
    beforePropose: async (id) => {
      // An upload may take minutes: the token is checked again once it is in, against every write acknowledged
      // before its last byte (a token deleted or stripped of acl:write meanwhile restores nothing).
      await authorizeAfterBody(ctx)
      await auditBeforeChange(ctx, 'snapshot.restore', { kind: 'snapshot', id })
    },
  })
  auditProposed(ctx, outcome.index)
  setResponseHeader(ctx, 'Index', String(outcome.index))
  ctx.status = 200
  ctx.body = ''
}

export function snapshotRoutes(router: Router): void {
  router.get('/v1/snapshot', (ctx) => saveSnapshot(ctx as ApiContext))
  router.put('/v1/snapshot', (ctx) => restoreSnapshot(ctx as ApiContext))
}
