/**
 * The `acl.login` command on a real state store: the token is written with its auth method's namespace (so the
 * authmethod index finds it wherever namespace rules put it), roles named by binding rules resolve at the command's
 * index and missing ones are dropped, a token left with nothing is refused, and a login verified against an auth
 * method that has since changed or gone is refused, so the method's delete cascade can never miss a token.
 */
import { expect } from 'chai'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { COMMAND_VERSION, type Command, type TokenCreate } from '../../../src/state/commands.js'
import { nsKey } from '../../../src/state/keys.js'
import { StateStore } from '../../../src/state/store.js'
import { getRecord, listByIndex, tokenSpec } from '../../../src/state/tables.js'
import type { AclToken } from '../../../src/state/records.js'

type Unversioned<C> = C extends { v: number } ? Omit<C, 'v'> : never

describe('state: acl.login', () => {
  let directory: string
  let store: StateStore
  let index: number

  async function apply(command: Unversioned<Command>) {
    index += 1
    return store.apply({ v: COMMAND_VERSION, ...command } as Command, index)
  }

  function loginToken(n: number, fields: Partial<TokenCreate> = {}): TokenCreate {
    const id = `0000000${n}-0000-4000-8000-000000000000`
    return {
      AccessorID: id,
      SecretID: id.replace('4000', '5000'),
      Description: 'token created via login',
      Policies: [],
      Roles: [],
      TemplatedPolicies: [],
      ServiceIdentities: [],
      NodeIdentities: [],
      Local: true,
      AuthMethod: 'm',
      CreateTime: '2024-05-01T12:00:00Z',
      Namespace: 'default',
      ...fields,
    }
  }

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'warden-login-state-'))
    store = await StateStore.open(directory)
    index = 0
    await apply({ type: 'acl.init' })
    await apply({
      type: 'acl.auth-method.create',
      method: { Name: 'm', Type: 'jwt', DisplayName: '', Description: '', MaxTokenTTLMs: 0, TokenLocality: '', Config: {}, NamespaceRules: [], Namespace: 'default' },
    })
    await apply({
      type: 'acl.role.create',
      role: { ID: 'cccccccc-0000-4000-8000-000000000001', Name: 'ops', Description: '', Policies: [], TemplatedPolicies: [], ServiceIdentities: [], NodeIdentities: [], Namespace: 'default' },
    })
  })

  afterEach(async () => {
    await store.close()
    await rm(directory, { recursive: true, force: true })
  })

  it('resolves roles by name and drops the missing ones', async () => {
    const result = await apply({
      type: 'acl.login',
      login: { token: loginToken(1, { Roles: [{ Name: 'ops' }, { Name: 'missing' }, { Name: 'ops' }] }), authMethodNamespace: 'default', authMethodModifyIndex: 2 },
    })
    expect(result.ok, JSON.stringify(result)).to.equal(true)
    const token = (result as { value: AclToken }).value
    expect(token.Roles).to.deep.equal([{ ID: 'cccccccc-0000-4000-8000-000000000001' }])
    expect(token.AuthMethodNamespace).to.equal('default')
  })

  it('refuses a token left with no privilege once missing roles are dropped', async () => {
    const result = await apply({
      type: 'acl.login',
      login: { token: loginToken(1, { Roles: [{ Name: 'missing' }] }), authMethodNamespace: 'default', authMethodModifyIndex: 2 },
    })
    expect(result).to.deep.include({ ok: false })
    expect((result as { error: { code: string; message: string } }).error.code).to.equal('permission_denied')
    expect(await getRecord(store.reader, tokenSpec, loginToken(1).AccessorID)).to.equal(undefined)
  })

  it('refuses a login verified against an auth method that changed or was deleted since', async () => {
    const changed = await apply({
      type: 'acl.login',
      login: { token: loginToken(1, { ServiceIdentities: [{ ServiceName: 'web' }] }), authMethodNamespace: 'default', authMethodModifyIndex: 1 },
    })
    expect((changed as { error: { message: string } }).error.message).to.include('was deleted or changed')
    await apply({ type: 'acl.auth-method.delete', Namespace: 'default', Name: 'm' })
    const gone = await apply({
      type: 'acl.login',
      login: { token: loginToken(2, { ServiceIdentities: [{ ServiceName: 'web' }] }), authMethodNamespace: 'default', authMethodModifyIndex: 2 },
    })
    expect(gone.ok).to.equal(false)
  })

  it("indexes the token under its auth method's namespace, and the method's delete removes it from any namespace", async () => {
    const result = await apply({
      type: 'acl.login',
      login: { token: loginToken(1, { Namespace: 'team-a', ServiceIdentities: [{ ServiceName: 'web' }] }), authMethodNamespace: 'default', authMethodModifyIndex: 2 },
    })
    expect(result.ok).to.equal(true)
    expect((await listByIndex(store.reader, tokenSpec, 'authmethod', nsKey('default', 'm'))).map((token) => token.AccessorID)).to.deep.equal([loginToken(1).AccessorID])
    await apply({ type: 'acl.auth-method.delete', Namespace: 'default', Name: 'm' })
    expect(await getRecord(store.reader, tokenSpec, loginToken(1).AccessorID)).to.equal(undefined)
  })
})
