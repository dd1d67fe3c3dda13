/**
 * The link controller's check and loop, below the HTTP layer: a management plane that never answers times out (each
 * attempt bounded, the attempts bounded), one that refuses connections fails with the cause named, the cloud settings
 * are checked with messages that name the key, and a controller stopped in the middle of a check ends at once and
 * records nothing. The loop runs against a real single-node replica (LevelDB in a temp dir); the management plane is
 * a node:http server on loopback.
 */
import { expect } from 'chai'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pino } from 'pino'
import { checkLink, cloudSettingsProblem, LinkController, linkFromSettings } from '../../../src/controllers/link-controller.js'
import { LINK_NAME, linkSpec } from '../../../src/state/link.js'
import type { CloudLink } from '../../../src/state/records.js'
import { getRecord } from '../../../src/state/tables.js'
import { commands, useReplica } from '../../support/state.js'

const RESOURCE_ID = 'organization/o/project/p/service.global-network-manager.cluster/c'

function link(): CloudLink {
  return {
    uid: 'u',
    generation: 'g',
    data: { resourceId: RESOURCE_ID, clientId: 'id', clientSecret: 'secret' },
    source: 'api',
    CreateIndex: 1,
    ModifyIndex: 1,
  }
}

/** Starts a test server on a free loopback port; `close` drops the connections it holds. */
async function listenOnLoopback(server: Server): Promise<{ url: string; close: () => Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const close = (): Promise<void> =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  return { url: `http://127.0.0.1:${port}`, close }
}

/** A server that accepts requests and never answers them; closing it drops the connections. */
async function silentServer(): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let count = 0
  const server: Server = createServer(() => {
    count += 1
  })
  return { ...(await listenOnLoopback(server)), requests: () => count }
}

describe('link controller', () => {
  describe('checkLink', () => {
    it('times out each attempt and gives up after the last, as FAILED', async () => {
      const server = await silentServer()
      try {
        const started = Date.now()
        const outcome = await checkLink(link(), { managementPlaneUrl: server.url, requestTimeoutMs: 100, attemptsMax: 2, backoffBaseMs: 10 }, new AbortController().signal)
        expect(outcome).to.include({ state: 'STATE_FALSE', reason: 'FAILED' })
        expect(outcome.message).to.include('POST /oauth2/token timed out after 100 ms (after 2 attempts)')
        expect(server.requests()).to.equal(2)
        expect(Date.now() - started).to.be.below(2_000)
      } finally {
        await server.close()
      }
    })

    it('names the cause when the management plane cannot be reached', async () => {
      const server = await silentServer()
      const url = server.url
      await server.close()
      const outcome = await checkLink(link(), { managementPlaneUrl: url, requestTimeoutMs: 1_000, attemptsMax: 2, backoffBaseMs: 10 }, new AbortController().signal)
      expect(outcome).to.include({ reason: 'FAILED' })
      expect(outcome.message).to.include('ECONNREFUSED')
    })

    it('rejects at once when aborted mid-request', async () => {
      const server = await silentServer()
      try {
        const abort = new AbortController()
        const checking = checkLink(link(), { managementPlaneUrl: server.url, requestTimeoutMs: 10_000, attemptsMax: 3, backoffBaseMs: 10 }, abort.signal)
        setTimeout(() => abort.abort(), 50)
        const started = Date.now()
        const error = await checking.then(
          () => undefined,
          (caught: unknown) => caught,
        )
        expect(error).to.be.instanceOf(Error)
        expect(Date.now() - started).to.be.below(1_000)
      } finally {
        await server.close()
      }
    })
  })

  describe('cloud settings', () => {
    it('takes all three credentials or none, and names the missing key', () => {
      expect(cloudSettingsProblem({})).to.equal(undefined)
      expect(cloudSettingsProblem({ managementPlaneUrl: 'https://example.test/api' })).to.equal(undefined)
      expect(cloudSettingsProblem({ resourceId: RESOURCE_ID, clientId: 'c', clientSecret: 's' })).to.equal(undefined)
      expect(cloudSettingsProblem({ resourceId: RESOURCE_ID, clientSecret: 's' })).to.include('cloud.client_id')
      expect(cloudSettingsProblem({ resourceId: 'x', clientId: 'c', clientSecret: 's' })).to.include('cloud.resource_id')
      expect(cloudSettingsProblem({ managementPlaneUrl: 'ftp://x' })).to.include('cloud.management_plane_url')
      expect(cloudSettingsProblem({ managementPlaneUrl: 'not a url' })).to.include('cloud.management_plane_url')
      // Credentials in the URL would be quoted in the link's status, which operator:read callers see.
      expect(cloudSettingsProblem({ managementPlaneUrl: 'http://user:secret@127.0.0.1:1/base' })).to.equal('cloud.management_plane_url: must not carry credentials (user:password@)')
      expect(cloudSettingsProblem({ managementPlaneUrl: 'https://user@example.test/' })).to.include('must not carry credentials')
    })

    it('makes a config-sourced link write with a new generation each time', () => {
      const first = linkFromSettings({ resourceId: RESOURCE_ID, clientId: 'c', clientSecret: 's' }, 1_000)
      const second = linkFromSettings({ resourceId: RESOURCE_ID, clientId: 'c', clientSecret: 's' }, 2_000)
      expect(first).to.include({ resourceId: RESOURCE_ID, clientId: 'c', clientSecret: 's', source: 'config' })
      expect(first?.generation).to.match(/^[0-9A-HJKMNP-TV-Z]{26}$/)
      expect(second?.generation).to.not.equal(first?.generation)
      expect(linkFromSettings({ managementPlaneUrl: 'https://x' }, 1)).to.equal(undefined)
    })
  })

  describe('the loop', () => {
    const node = useReplica('warden-link-controller-')

    const write = (generation: string) =>
      node.replica.propose(commands.linkSet({ resourceId: RESOURCE_ID, clientId: 'c', clientSecret: 's', uid: 'u', generation, source: 'api' }))

    async function statusOf(generation: string): Promise<CloudLink> {
      const deadline = Date.now() + 2_000
      for (;;) {
        const stored = await getRecord(node.state.reader, linkSpec, LINK_NAME)
        if (stored?.status?.observedGeneration === generation) return stored
        if (Date.now() > deadline) throw new Error(`no status for generation ${generation}`)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    }

    it('records a status for the link at start and for each new generation, then idles', async () => {
      await write('g1')
      const controller = new LinkController({ state: node.state, cluster: node.replica, log: pino({ level: 'silent' }), now: () => Date.parse('2026-01-01T00:00:00Z') })
      controller.start()
      try {
        const first = await statusOf('g1')
        expect(first.status?.updatedAt).to.equal('2026-01-01T00:00:00.000Z')
        expect(first.status?.conditions[0]).to.include({ type: 'linked', state: 'STATE_TRUE', reason: 'SUCCESS' })
        await write('g2')
        await statusOf('g2')
        const settledIndex = node.state.tableIndex('link')
        await new Promise((resolve) => setTimeout(resolve, 100))
        // Its own status write does not start another check.
        expect(node.state.tableIndex('link')).to.equal(settledIndex)
      } finally {
        await controller.stop()
      }
      expect(node.state.watches.size).to.equal(0)
    })

    /** A management plane whose token endpoint answers `status` while `failing()` and a working pair otherwise. */
    async function flakyPlane(failing: () => number | undefined): Promise<{ url: string; tokenRequests: () => number; close: () => Promise<void> }> {
      let tokenRequests = 0
      const server: Server = createServer((request, response) => {
        if (request.url === '/oauth2/token') {
          tokenRequests += 1
          const status = failing()
          if (status !== undefined) return response.writeHead(status).end('{}')
          return response.writeHead(200, { 'Content-Type': 'application/json' }).end('{"access_token":"t"}')
        }
        response.writeHead(200, { 'Content-Type': 'application/json' }).end('{"accessLevel":"ACCESS_LEVEL_GLOBAL_READ_WRITE","clusterUrl":"https://c"}')
      })
      return { ...(await listenOnLoopback(server)), tokenRequests: () => tokenRequests }
    }

    /** No token request reaches the plane for `ms`. */
    async function expectNoFurtherChecks(plane: { tokenRequests: () => number }, ms: number): Promise<void> {
      const settled = plane.tokenRequests()
      await new Promise((resolve) => setTimeout(resolve, ms))
      expect(plane.tokenRequests()).to.equal(settled)
    }

    async function conditionOf(reason: string): Promise<CloudLink> {
      const deadline = Date.now() + 3_000
      for (;;) {
        const stored = await getRecord(node.state.reader, linkSpec, LINK_NAME)
        if (stored?.status?.conditions[0]?.reason === reason) return stored
        if (Date.now() > deadline) throw new Error(`no status with reason ${reason}; last ${JSON.stringify(stored?.status)}`)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    }

    it('checks a FAILED link again after a pause, without a new generation, until it links', async () => {
      let down = true
      const plane = await flakyPlane(() => (down ? 503 : undefined))
      const controller = new LinkController({
        state: node.state,
        cluster: node.replica,
        log: pino({ level: 'silent' }),
        now: Date.now,
        check: { managementPlaneUrl: plane.url, attemptsMax: 1, backoffBaseMs: 10, recheckBaseMs: 100, recheckMaxMs: 200 },
      })
      try {
        await write('g-flaky')
        controller.start()
        const failed = await conditionOf('FAILED')
        expect(failed.status?.observedGeneration).to.equal('g-flaky')
        // Still failing: checked again by the timer alone.
        const deadline = Date.now() + 3_000
        while (plane.tokenRequests() < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
        expect(plane.tokenRequests()).to.be.at.least(3)
        down = false
        const linked = await conditionOf('SUCCESS')
        expect(linked.status?.observedGeneration).to.equal('g-flaky')
        // Linked: no more checks until the link changes.
        await expectNoFurtherChecks(plane, 400)
      } finally {
        await controller.stop()
        await plane.close()
      }
      expect(node.state.watches.size).to.equal(0)
    })

    for (const [status, reason] of [
      [401, 'UNAUTHORIZED'],
      [400, 'FAILED'],
    ] as const) {
      it(`does not check a link refused with ${status} (${reason}) again on a timer: only a new generation can change it`, async () => {
        const plane = await flakyPlane(() => status)
        const controller = new LinkController({
          state: node.state,
          cluster: node.replica,
          log: pino({ level: 'silent' }),
          now: Date.now,
          check: { managementPlaneUrl: plane.url, attemptsMax: 1, recheckBaseMs: 50, recheckMaxMs: 50 },
        })
        try {
          await write(`g-refused-${status}`)
          controller.start()
          const refused = await conditionOf(reason)
          expect(refused.status?.observedGeneration).to.equal(`g-refused-${status}`)
          await expectNoFurtherChecks(plane, 300)
        } finally {
          await controller.stop()
          await plane.close()
        }
      })
    }

    it('stops at once in the middle of a check, recording nothing', async () => {
      const server = await silentServer()
      try {
        await write('g1')
        const controller = new LinkController({
          state: node.state,
          cluster: node.replica,
          log: pino({ level: 'silent' }),
          now: Date.now,
          check: { managementPlaneUrl: server.url, requestTimeoutMs: 10_000 },
        })
        controller.start()
        const deadline = Date.now() + 2_000
        while (server.requests() === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
        expect(server.requests()).to.equal(1)
        const started = Date.now()
        await controller.stop()
        expect(Date.now() - started).to.be.below(1_000)
        expect((await getRecord(node.state.reader, linkSpec, LINK_NAME))?.status).to.equal(undefined)
        expect(node.state.watches.size).to.equal(0)
      } finally {
        await server.close()
      }
    })
  })
})
