/**
 * The apply functions of config entries and the link, driven through a real StateStore on LevelDB in a temporary
 * directory: commands go in with explicit log indexes, and the test reads back what was stored. The point is the
 * rules decided inside apply (readings.md): the cas of apply and delete, ModifyIndex raised by every successful
 * write, a failed condition that writes nothing, and the link's version and generation checks.
 */
import { expect } from 'chai'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { StateStore } from '../../../src/state/store.js'
import { COMMAND_VERSION, type ApplyResult, type Command, type ConfigEntryWrite, type LinkWrite } from '../../../src/state/commands.js'
import { configEntryKey, configEntryPrefix } from '../../../src/state/config-entries.js'
import { LINK_NAME, linkSpec, parseResourceId } from '../../../src/state/link.js'
import { configSpec, getRecord, listRecords } from '../../../src/state/tables.js'

type Unversioned<C> = C extends { v: number } ? Omit<C, 'v'> : never

describe('state: config entries and the link', () => {
  let directory: string
  let store: StateStore
  let index: number

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'warden-config-unit-'))
    store = await StateStore.open(directory)
    index = 0
  })

  afterEach(async () => {
    await store.close()
    await rm(directory, { recursive: true, force: true })
  })

  function apply(command: Unversioned<Command>): Promise<ApplyResult> {
    index += 1
    return store.apply({ v: COMMAND_VERSION, ...command } as Command, index)
  }

  function entry(name: string, fields: Record<string, unknown> = {}): ConfigEntryWrite {
    return { Kind: 'service-defaults', Name: name, Namespace: 'default', ...fields }
  }

  function read(name: string, kind = 'service-defaults') {
    return getRecord(store.reader, configSpec, configEntryKey({ Kind: kind, Namespace: 'default', Name: name }))
  }

  describe('config.apply', () => {
    it('without cas upserts, keeps CreateIndex and raises ModifyIndex', async () => {
      expect(await apply({ type: 'config.apply', entry: entry('web', { Protocol: 'http' }) })).to.deep.equal({ ok: true, value: true })
      expect(await apply({ type: 'config.apply', entry: entry('web', { Protocol: 'grpc' }) })).to.deep.equal({ ok: true, value: true })
      const stored = await read('web')
      expect(stored).to.include({ Kind: 'service-defaults', Name: 'web', Protocol: 'grpc', CreateIndex: 1, ModifyIndex: 2 })
      expect(store.tableIndex('config')).to.equal(2)
    })

    it('raises ModifyIndex even when the entry is unchanged', async () => {
      await apply({ type: 'config.apply', entry: entry('web') })
      await apply({ type: 'config.apply', entry: entry('web') })
      expect(await read('web')).to.include({ CreateIndex: 1, ModifyIndex: 2 })
    })

    it('keeps fields it does not know, nested, as given', async () => {
      const fields = { Meta: { team: 'a' }, UpstreamConfig: { Defaults: { Limits: { MaxConnections: 10 } } }, List: [1, 'two', null] }
      await apply({ type: 'config.apply', entry: entry('web', fields) })
      expect(await read('web')).to.deep.include(fields)
    })

    it('with cas=0 writes only when the entry is absent', async () => {
      expect(await apply({ type: 'config.apply', entry: entry('web'), cas: 0 })).to.deep.equal({ ok: true, value: true })
      expect(await apply({ type: 'config.apply', entry: entry('web', { Protocol: 'http' }), cas: 0 })).to.deep.equal({ ok: true, value: false })
      expect(await read('web')).to.not.have.property('Protocol')
    })

    it('with cas=N writes only when N is the current ModifyIndex', async () => {
      await apply({ type: 'config.apply', entry: entry('web') })
      expect(await apply({ type: 'config.apply', entry: entry('web', { Protocol: 'http' }), cas: 5 })).to.deep.equal({ ok: true, value: false })
      expect(await apply({ type: 'config.apply', entry: entry('web', { Protocol: 'http' }), cas: 1 })).to.deep.equal({ ok: true, value: true })
      expect(await read('web')).to.include({ Protocol: 'http', ModifyIndex: 3 })
    })

    it('with cas=N on a missing entry writes nothing', async () => {
      expect(await apply({ type: 'config.apply', entry: entry('web'), cas: 1 })).to.deep.equal({ ok: true, value: false })
      expect(await read('web')).to.equal(undefined)
    })

    it('a failed cas leaves the table index where it was', async () => {
      await apply({ type: 'config.apply', entry: entry('web') })
      await apply({ type: 'config.apply', entry: entry('web'), cas: 99 })
      expect(store.tableIndex('config')).to.equal(1)
      expect(store.lastApplied).to.equal(2)
    })

    it('lets exactly one of several writers with the same cas win', async () => {
      await apply({ type: 'config.apply', entry: entry('web') })
      const results = []
      for (let writer = 0; writer < 5; writer += 1) {
        results.push(await apply({ type: 'config.apply', entry: entry('web', { Writer: writer }), cas: 1 }))
      }
      expect(results.filter((result) => result.ok && result.value === true)).to.have.length(1)
      expect(await read('web')).to.include({ Writer: 0, ModifyIndex: 2 })
    })

    it('ignores indexes carried in the command', async () => {
      await apply({ type: 'config.apply', entry: entry('web', { CreateIndex: 77, ModifyIndex: 88 }) })
      expect(await read('web')).to.include({ CreateIndex: 1, ModifyIndex: 1 })
    })

    it('keeps kinds and namespaces apart', async () => {
      await apply({ type: 'config.apply', entry: entry('web') })
      await apply({ type: 'config.apply', entry: { Kind: 'service-resolver', Name: 'web', Namespace: 'default' } })
      await apply({ type: 'config.apply', entry: { Kind: 'service-defaults', Name: 'web', Namespace: 'team' } })
      expect(await listRecords(store.reader, configSpec, configEntryPrefix('service-defaults'))).to.have.length(2)
      expect(await listRecords(store.reader, configSpec, configEntryPrefix('service-defaults', 'default'))).to.have.length(1)
      expect(await listRecords(store.reader, configSpec, configEntryPrefix('service-resolver'))).to.have.length(1)
    })
  })

  describe('config.delete', () => {
    const address = { Kind: 'service-defaults', Namespace: 'default', Name: 'web' }

    it('without cas deletes, and answers true for a missing entry too', async () => {
      await apply({ type: 'config.apply', entry: entry('web') })
      expect(await apply({ type: 'config.delete', ...address })).to.deep.equal({ ok: true, value: true })
      expect(await read('web')).to.equal(undefined)
      expect(store.tableIndex('config')).to.equal(2)
      expect(await apply({ type: 'config.delete', ...address })).to.deep.equal({ ok: true, value: true })
    })

    it('with cas=0 deletes nothing', async () => {
      await apply({ type: 'config.apply', entry: entry('web') })
      expect(await apply({ type: 'config.delete', ...address, cas: 0 })).to.deep.equal({ ok: true, value: false })
      expect(await read('web')).to.not.equal(undefined)
    })

    it('with cas=N deletes only when N is the current ModifyIndex', async () => {
      await apply({ type: 'config.apply', entry: entry('web') })
      expect(await apply({ type: 'config.delete', ...address, cas: 7 })).to.deep.equal({ ok: true, value: false })
      expect(await apply({ type: 'config.delete', ...address, cas: 1 })).to.deep.equal({ ok: true, value: true })
      expect(await read('web')).to.equal(undefined)
    })
  })

  describe('link', () => {
    const write = (generation: string, fields: Partial<LinkWrite> = {}): LinkWrite => ({
      resourceId: 'organization/o/project/p/service.global-network-manager.cluster/c',
      clientId: 'id',
      clientSecret: 'secret',
      uid: `uid-${generation}`,
      generation,
      source: 'api',
      ...fields,
    })
    const readLink = () => getRecord(store.reader, linkSpec, LINK_NAME)

    it('keeps the uid of an existing link, takes the new generation and raises the version', async () => {
      await apply({ type: 'link.set', link: write('g1') })
      await apply({ type: 'link.set', link: write('g2', { clientId: 'other' }) })
      const link = await readLink()
      expect(link).to.include({ uid: 'uid-g1', generation: 'g2', CreateIndex: 1, ModifyIndex: 2 })
      expect(link?.data).to.deep.equal({ resourceId: write('x').resourceId, clientId: 'other', clientSecret: 'secret' })
    })

    it('is a compare-and-set with a version, where a missing link has version 0', async () => {
      expect(await apply({ type: 'link.set', link: write('g1'), version: 3 })).to.deep.include({ ok: false })
      expect(await apply({ type: 'link.set', link: write('g1'), version: 0 })).to.deep.include({ ok: true })
      const conflict = await apply({ type: 'link.set', link: write('g2'), version: 1 })
      expect(conflict).to.deep.include({ ok: false })
      expect(!conflict.ok && conflict.error.code).to.equal('conflict')
      expect(await apply({ type: 'link.set', link: write('g2'), version: 2 })).to.deep.include({ ok: true })
    })

    it('records a status only for the generation it was found for', async () => {
      await apply({ type: 'link.set', link: write('g1') })
      const status = { conditions: [{ type: 'linked', state: 'STATE_TRUE', reason: 'SUCCESS', message: 'ok' }], updatedAt: '2024-01-01T00:00:00.000Z' }
      expect(await apply({ type: 'link.status', status: { ...status, generation: 'old' } })).to.deep.equal({ ok: true, value: false })
      expect(await apply({ type: 'link.status', status: { ...status, generation: 'g1', accessLevel: 'ACCESS_LEVEL_GLOBAL_READ_ONLY', cloudClusterUrl: 'https://x' } })).to.deep.equal({ ok: true, value: true })
      const link = await readLink()
      expect(link?.status).to.deep.equal({ ...status, observedGeneration: 'g1' })
      expect(link?.data).to.include({ accessLevel: 'ACCESS_LEVEL_GLOBAL_READ_ONLY', cloudClusterUrl: 'https://x' })
      expect(link).to.include({ generation: 'g1', ModifyIndex: 3 })
      // New data clears what the controller learned about the old data until it checks again.
      await apply({ type: 'link.set', link: write('g2') })
      expect((await readLink())?.data).to.not.have.property('accessLevel')
    })

    it('deletes idempotently, under an optional version check', async () => {
      await apply({ type: 'link.set', link: write('g1') })
      expect(await apply({ type: 'link.delete', version: 9 })).to.deep.include({ ok: false })
      expect(await apply({ type: 'link.delete' })).to.deep.equal({ ok: true, value: true })
      expect(await readLink()).to.equal(undefined)
      expect(await apply({ type: 'link.delete' })).to.deep.equal({ ok: true, value: true })
      expect(await apply({ type: 'link.status', status: { generation: 'g1', conditions: [], updatedAt: 'x' } })).to.deep.equal({ ok: true, value: false })
    })

    it('parses resource IDs and names the wrong part', () => {
      expect(parseResourceId('organization/o1/project/p1/service.global-network-manager.cluster/c1')).to.deep.equal({
        ok: true,
        id: { organization: 'o1', project: 'p1', cluster: 'c1' },
      })
      const wrongWord = parseResourceId('organisation/o1/project/p1/service.global-network-manager.cluster/c1')
      expect(!wrongWord.ok && wrongWord.message).to.include('part 1 must be "organization"')
      const wrongType = parseResourceId('organization/o1/project/p1/cluster/c1')
      expect(!wrongType.ok && wrongType.message).to.include('part 5 must be "service.global-network-manager.cluster"')
      const emptyProject = parseResourceId('organization/o1/project//service.global-network-manager.cluster/c1')
      expect(!emptyProject.ok && emptyProject.message).to.include('project_id ""')
      const short = parseResourceId('organization/o1')
      expect(!short.ok && short.message).to.include('found 2 parts')
    })
  })
})
