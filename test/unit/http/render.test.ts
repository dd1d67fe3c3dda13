/**
 * src/http/render.ts liveLinkNames: the names of linked policies and roles, shared by every response rendered from the
 * live state, must always be the names the state holds: renamed, deleted, created after a miss, or replaced whole.
 */
import { expect } from 'chai'
import { randomUUID } from 'node:crypto'
import { liveLinkNames } from '../../../src/http/render.js'
import type { PolicyWrite, RoleWrite } from '../../../src/state/commands.js'
import type { StateStore } from '../../../src/state/store.js'
import { commands, openStores } from '../../support/state.js'
import { useTempDirs } from '../../support/temp-dir.js'

function policy(ID: string, Name: string): PolicyWrite {
  return { ID, Name, Description: '', Rules: 'acl = "read"', Datacenters: [], Namespace: 'default' }
}

function role(ID: string, Name: string): RoleWrite {
  return { ID, Name, Description: '', Policies: [], TemplatedPolicies: [], ServiceIdentities: [], NodeIdentities: [], Namespace: 'default' }
}

describe('liveLinkNames (link names shared by responses from the live state)', () => {
  const dirs = useTempDirs()
  let state: StateStore
  let index: number

  async function apply(command: Parameters<StateStore['apply']>[0]): Promise<void> {
    index += 1
    const result = await state.apply(command, index)
    expect(result.ok, JSON.stringify(result)).to.equal(true)
  }

  beforeEach(async () => {
    ;({ state } = await openStores(dirs, await dirs.make('render-names')))
    index = 0
    await apply(commands.init())
  })

  it('names what the state holds after a rename, a delete, and a create of an ID first found missing', async () => {
    const [a, b, r] = [randomUUID(), randomUUID(), randomUUID()]
    await apply(commands.policyCreate(policy(a, 'first')))
    await apply(commands.roleCreate(role(r, 'role-first')))
    expect(await liveLinkNames(state).policyLinks([{ ID: a }, { ID: b }])).to.deep.equal([{ ID: a, Name: 'first' }])
    expect(await liveLinkNames(state).roleLinks([{ ID: r }])).to.deep.equal([{ ID: r, Name: 'role-first' }])

    await apply(commands.policyUpdate(policy(a, 'renamed')))
    await apply(commands.roleUpdate(role(r, 'role-renamed')))
    await apply(commands.policyCreate(policy(b, 'second')))
    expect(await liveLinkNames(state).policyLinks([{ ID: a }, { ID: b }])).to.deep.equal([
      { ID: a, Name: 'renamed' },
      { ID: b, Name: 'second' },
    ])
    expect(await liveLinkNames(state).roleLinks([{ ID: r }])).to.deep.equal([{ ID: r, Name: 'role-renamed' }])

    await apply(commands.policyDelete(a))
    await apply(commands.roleDelete(r))
    expect(await liveLinkNames(state).policyLinks([{ ID: a }, { ID: b }])).to.deep.equal([{ ID: b, Name: 'second' }])
    expect(await liveLinkNames(state).roleLinks([{ ID: r }])).to.deep.equal([])
  })

  it('does not keep a name read while a change to it was being applied', async () => {
    const a = randomUUID()
    await apply(commands.policyCreate(policy(a, 'before')))
    // A reader that reads at once but answers only when released: the read sees the state before the rename, and
    // finishes after the rename's batch was applied. What it read predates the rename and must not be kept.
    const live = state.reader
    let release = (): void => undefined
    const released = new Promise<void>((resolve) => (release = resolve))
    const held = {
      ...live,
      get: async (key: string) => {
        const value = await live.get(key)
        await released
        return value
      },
    }
    Object.defineProperty(state, 'reader', { configurable: true, get: () => held })
    const reading = liveLinkNames(state).policyLinks([{ ID: a }])
    Object.defineProperty(state, 'reader', { configurable: true, get: () => live })
    await apply(commands.policyUpdate(policy(a, 'after')))
    release()
    expect(await reading).to.deep.equal([{ ID: a, Name: 'before' }])
    expect(await liveLinkNames(state).policyLinks([{ ID: a }])).to.deep.equal([{ ID: a, Name: 'after' }])
  })
})
