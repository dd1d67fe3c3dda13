/**
 * A write passes the barrier of a default read before its body is read, and again once its body has arrived
 * (authorizeAfterBody), so that it is authorized against every write acknowledged before its last byte. The second is
 * skipped, and the caller resolved before the body kept, when the first one's index was fixed after the body was
 * whole (app.ts catchUp): a write's barrier is fixed at the end of the turn (a follower's ReadIndex leaves then, a
 * leader's lease read waits for it), after a body that came with its headers was parsed.
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
  it('takes a second barrier and resolves the caller again once the body has arrived, unless the first was fixed after the body was whole', async function () {
    for (const [flag, expected, caller] of [
      [undefined, ['leader'], 'caller-1'],
      [false, ['leader'], 'caller-1'],
      // The caller was resolved past the barrier that covers the body (app.ts catchUp): it stands.
      [true, [], 'before-body'],
    ] as const) {
      const barriers: string[] = []
      const ctx = writeContext(flag, barriers)
      await authorizeAfterBody(ctx)
      expect(barriers, `barrierAfterBody ${String(flag)}`).to.deep.equal(expected)
      expect(ctx.state.caller?.accessorID, `barrierAfterBody ${String(flag)}`).to.equal(caller)
      expect(ctx.state.bodyRead).to.equal(true)
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

    it('on a leader, at the end of the turn: after what the turn still had to do (a body parsed with its headers)', async function () {
      const { storage, state } = await openStores(dirs, await dirs.make('warden-barrier-'))
      const { replica, cluster } = await startSingleNode('n1', storage, state, () => undefined)
      dirs.defer(() => replica.stop())
      // Led and under its lease already: the first barrier, taken and awaited, confirms it.
      await cluster.readBarrier('leader')
      const order: string[] = []
      const barrier = cluster.readBarrier('leader', () => order.push('fixed'))
      order.push('same call')
      process.nextTick(() => order.push('same turn'))
      await barrier
      expect(order).to.deep.equal(['same call', 'same turn', 'fixed'])
    })
  })
})
