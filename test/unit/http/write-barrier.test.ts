/**
 * A write passes the barrier of a default read before its body is read, and again once its body has arrived
 * (authorizeAfterBody), so that it is authorized against every write acknowledged before its last byte. The second is
 * skipped when the first one's index was fixed after the body was whole (app.ts catchUp): on a follower,
 * the turn's ReadIndex leaves at the end of the turn, after a body that came with its headers was parsed.
 */
import { expect } from 'chai'
import type { ApiContext } from '../../../src/http/context.js'
import { authorizeAfterBody } from '../../../src/http/request.js'
import { useTempDirs } from '../../support/temp-dir.js'
import { openStores, startSingleNode } from '../../support/state.js'

function writeContext(barrierAfterBody: boolean | undefined, barriers: string[]): ApiContext {
  let resolved = 0
  const app = {
    cluster: { readBarrier: async (mode: string) => void barriers.push(mode) },
    resolver: { resolve: async () => ({ accessorID: `caller-${++resolved}`, permissions: { allows: () => true } }) },
    now: () => 0,
  }
  const state = { app, caller: { accessorID: 'before-body' }, ...(barrierAfterBody === undefined ? {} : { barrierAfterBody }) }
  return { method: 'PUT', path: '/v1/acl/policy', query: {}, state, get: () => '' } as unknown as ApiContext
}

describe('http: a write’s barriers', function () {
  it('takes a second barrier once the body has arrived, unless the first was fixed after the body was whole', async function () {
    for (const [flag, expected] of [[undefined, ['leader']], [false, ['leader']], [true, []]] as const) {
      const barriers: string[] = []
      const ctx = writeContext(flag, barriers)
      await authorizeAfterBody(ctx)
      expect(barriers, `barrierAfterBody ${String(flag)}`).to.deep.equal(expected)
      // Either way the caller is resolved again, from the state at least as new as the barrier that counts.
      expect(ctx.state.caller?.accessorID).to.equal('caller-1')
    }
  })

  describe('readBarrier tells when its index is fixed', function () {
    const dirs = useTempDirs()

    it('on a leader under its lease, before the barrier resolves', async function () {
      const { storage, state } = await openStores(dirs, await dirs.make('warden-barrier-'))
      const fatal: unknown[] = []
      const { replica, cluster } = await startSingleNode('n1', storage, state, (error) => fatal.push(error))
      dirs.defer(() => replica.stop())
      const order: string[] = []
      const barrier = cluster.readBarrier('leader', () => order.push('fixed')).then(() => order.push('resolved'))
      await barrier
      expect(order).to.deep.equal(['fixed', 'resolved'])
      await cluster.readBarrier('stale', () => order.push('stale fixed'))
      expect(order, 'a stale read waits for nothing').to.deep.equal(['fixed', 'resolved'])
      expect(fatal).to.deep.equal([])
    })
  })
})
