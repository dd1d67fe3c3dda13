/**
 * Tests for the token resolver's cache of compiled authorizers (src/acl/resolver.ts): a token deleted or changed must
 * never be served from the cache afterwards. The races are made deterministic by wrapping the state's reader, so that
 * a write is applied at a chosen point in the middle of a resolution, over a real LevelDB in a temporary directory.
 */
import { expect } from 'chai'
import { TokenResolver } from '../../../src/acl/resolver.js'
import { AclNotFoundError } from '../../../src/lib/errors.js'
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
