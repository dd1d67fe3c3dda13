/**
 * Tests for the token resolver's cache of compiled authorizers (src/acl/resolver.ts): a token deleted or changed must
 * never be served from the cache afterwards. The races are made deterministic by wrapping the state's reader, so that
 * a write is applied at a chosen point in the middle of a resolution, over a real LevelDB in a temporary directory.
 */
import { expect } from 'chai'
import { TokenResolver } from '../../../src/acl/resolver.js'
import { AclNotFoundError, WardenError } from '../../../src/lib/errors.js'
import { COMMAND_VERSION, type Command, type TokenCreate } from '../../../src/state/commands.js'
import { recordKey } from '../../../src/state/keys.js'
import type { Reader } from '../../../src/state/reader.js'
import { StateStore } from '../../../src/state/store.js'
import { buildTokenCreate } from '../../support/state.js'
import { useTempDirs } from '../../support/temp-dir.js'

const ACCESSOR = '11111111-2222-4333-8444-555555555555'
const SECRET = '66666666-7777-4888-8999-aaaaaaaaaaaa'

function token(): TokenCreate {
  return buildTokenCreate({ AccessorID: ACCESSOR, SecretID: SECRET, CreateTime: '2024-05-01T12:00:00Z' })
}

describe('token resolver: the authorizer cache', function () {
  const dirs = useTempDirs()

  it('does not cache a token that a write deleted while it was being resolved', async function () {
    const store = await StateStore.open(await dirs.make())
    dirs.defer(() => store.close())
    const apply = (command: Command): Promise<unknown> => store.apply(command, store.lastApplied + 1)
    await apply({ v: COMMAND_VERSION, type: 'acl.init' })
    await apply({ v: COMMAND_VERSION, type: 'acl.token.create', token: token() })

    // The first lookup of the secret finds the token; before its answer comes back, the token is deleted.
    const tokenKey = recordKey('token', ACCESSOR)
    let deleteDuringLookup = true
    const reader: Reader = {
      get: async (key) => {
        const value = await store.reader.get(key)
        if (key === tokenKey && deleteDuringLookup) {
          deleteDuringLookup = false
          await apply({ v: COMMAND_VERSION, type: 'acl.token.delete', AccessorID: ACCESSOR })
        }
        return value
      },
      keys: (prefix) => store.reader.keys(prefix),
      values: (prefix) => store.reader.values(prefix),
    }
    // The store as the resolver sees it, with only its reader replaced.
    const view = Object.create(store, { reader: { value: reader } }) as StateStore
    const resolver = new TokenResolver(view, { datacenter: 'dc1', defaultPolicy: 'deny' })

    // The resolution that overlapped the delete may still answer with what it read; the next one must not.
    await resolver.resolve(SECRET, Date.parse('2024-05-01T12:00:01Z'))
    let error: unknown
    try {
      await resolver.resolve(SECRET, Date.parse('2024-05-01T12:00:02Z'))
    } catch (caught) {
      error = caught
    }
    expect(error).to.be.instanceOf(AclNotFoundError)
  })
})

describe("token resolver: a secondary's secrets resolved at the primary", function () {
  const dirs = useTempDirs()
  const NOW = Date.parse('2024-05-01T12:00:00Z')
  const remoteToken = { ...buildTokenCreate({ AccessorID: ACCESSOR, SecretID: SECRET, CreateTime: '2024-05-01T12:00:00Z' }), Policies: [], Hash: '', CreateIndex: 1, ModifyIndex: 1 }

  async function resolverWith(lookup: (secret: string) => Promise<unknown>, downPolicy: 'allow' | 'deny' | 'extend-cache' = 'extend-cache'): Promise<TokenResolver> {
    const store = await StateStore.open(await dirs.make())
    dirs.defer(() => store.close())
    await store.apply({ v: COMMAND_VERSION, type: 'acl.init' }, 1)
    return new TokenResolver(store, { datacenter: 'dc2', defaultPolicy: 'deny', remote: { lookup: lookup as never, ttlMs: 30_000, downPolicy } })
  }

  const outcome = (resolving: Promise<unknown>): Promise<string> =>
    resolving.then(
      () => 'resolved',
      (error: unknown) => (error instanceof AclNotFoundError ? 'acl_not_found' : error instanceof WardenError ? error.code : 'error'),
    )

  it('asks the primary once for concurrent requests with one secret, and holds its answer', async function () {
    let asked = 0
    const resolver = await resolverWith(async () => {
      asked += 1
      await new Promise((resolve) => setTimeout(resolve, 20))
      return remoteToken
    })
    await Promise.all(Array.from({ length: 10 }, () => resolver.resolve(SECRET, NOW)))
    await resolver.resolve(SECRET, NOW + 10_000)
    expect(asked).to.equal(1)
    await resolver.resolve(SECRET, NOW + 31_000)
    expect(asked).to.equal(2)
  })

  it('down_policy allow lets a request through only when the primary cannot be reached, never when it is merely busy', async function () {
    const unreachable = await resolverWith(async () => {
      throw new WardenError('no_path_to_datacenter', 'dc: no path')
    }, 'allow')
    expect(await outcome(unreachable.resolve(SECRET, NOW))).to.equal('resolved')
    const busy = await resolverWith(async () => {
      throw new WardenError('rate_limited', 'dc: too many requests in flight')
    }, 'allow')
    expect(await outcome(busy.resolve(SECRET, NOW))).to.equal('rate_limited')
    const failing = await resolverWith(async () => {
      throw new Error('the primary answered token self with 500')
    }, 'allow')
    expect(await outcome(failing.resolve(SECRET, NOW))).to.equal('error')
  })

  it('extend-cache keeps what the primary said while it cannot be reached; deny refuses', async function () {
    let down = false
    const lookup = async (): Promise<unknown> => {
      if (down) throw new WardenError('no_path_to_datacenter', 'dc: no path')
      return remoteToken
    }
    const extend = await resolverWith(lookup)
    expect(await outcome(extend.resolve(SECRET, NOW))).to.equal('resolved')
    const deny = await resolverWith(lookup, 'deny')
    expect(await outcome(deny.resolve(SECRET, NOW))).to.equal('resolved')
    down = true
    expect(await outcome(extend.resolve(SECRET, NOW + 3_600_000))).to.equal('resolved')
    expect(await outcome(deny.resolve(SECRET, NOW + 3_600_000))).to.equal('acl_not_found')
  })

  it('with token replication off, asks the primary about a global token even when this datacenter holds a copy', async function () {
    let asked = 0
    const store = await StateStore.open(await dirs.make())
    dirs.defer(() => store.close())
    await store.apply({ v: COMMAND_VERSION, type: 'acl.init' }, 1)
    await store.apply({ v: COMMAND_VERSION, type: 'acl.token.create', token: buildTokenCreate({ AccessorID: ACCESSOR, SecretID: SECRET, CreateTime: '2024-05-01T12:00:00Z' }) }, 2)
    const lookup = async (): Promise<undefined> => {
      asked += 1
      return undefined
    }
    const primaryDecides = new TokenResolver(store, { datacenter: 'dc2', defaultPolicy: 'deny', remote: { lookup: lookup as never, ttlMs: 30_000, downPolicy: 'extend-cache', globalTokensFromPrimary: true } })
    // Deleted at the primary: the copy here does not keep it alive.
    expect(await outcome(primaryDecides.resolve(SECRET, NOW))).to.equal('acl_not_found')
    expect(asked).to.equal(1)
    const copyDecides = new TokenResolver(store, { datacenter: 'dc2', defaultPolicy: 'deny', remote: { lookup: lookup as never, ttlMs: 30_000, downPolicy: 'extend-cache' } })
    expect(await outcome(copyDecides.resolve(SECRET, NOW))).to.equal('resolved')
    expect(asked).to.equal(1)
  })

  it('refuses a local token of the primary, and asks again soon about a secret the primary did not know', async function () {
    let asked = 0
    let known = false
    const resolver = await resolverWith(async () => {
      asked += 1
      return known ? { ...remoteToken, Local: asked > 2 } : undefined
    })
    expect(await outcome(resolver.resolve(SECRET, NOW))).to.equal('acl_not_found')
    known = true
    expect(await outcome(resolver.resolve(SECRET, NOW + 1_000))).to.equal('acl_not_found')
    expect(await outcome(resolver.resolve(SECRET, NOW + 2_500))).to.equal('resolved')
    expect(await outcome(resolver.resolve(SECRET, NOW + 40_000))).to.equal('acl_not_found')
  })
})
