/**
 * Tokens: the list (live, searchable by description or AccessorID), a token's page (its SecretID only on request,
 * with a copy button; edit, clone, delete), and the form that creates or edits one.
 */
import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { request } from '../api.js'
import { ErrorMessage, Fields, formatTime, GuardedButton, GuardedLink, LinkList, Loading, Notice, Page, Table, TextField, Checkbox, useNamespaceFilter, RecordActions } from '../components.js'
import { describeServiceIdentity, describeTemplatedPolicy, nodeIdentitiesText, parseNodeIdentities, parseServiceIdentities, parseTemplatedPolicies, serviceIdentitiesText, templatedPoliciesText } from '../identities.js'
import { useLive } from '../live.js'
import { useAclWrite } from '../permissions.js'
import { Link, navigate, path } from '../router.js'
import type { PageProps } from '../routes.js'
import type { Token } from '../types.js'
import { LinksFields, type LinksValue } from './links-form.js'
import { TokenPermissions } from './token-permissions.js'

/** A Namespace column, when the list spans namespaces. */
export function namespaceColumn<T extends { Namespace?: string }>(all: boolean): Array<[string, (row: T) => string]> {
  return all ? [['Namespace', (row: T) => row.Namespace ?? 'default']] : []
}

export function tokenName(token: Pick<Token, 'Description' | 'AccessorID'>): string {
  return token.Description !== '' ? token.Description : token.AccessorID
}

/** A link to a token's page, for lists of the tokens that link a policy or a role (LinkedRecords). */
export function tokenLink(token: Token): { key: string; href: string; text: string } {
  return { key: token.AccessorID, href: path('/tokens', token.AccessorID), text: tokenName(token) }
}

export function TokenList(): JSX.Element {
  const namespace = useNamespaceFilter()
  const tokens = useLive<Token[]>('/v1/acl/tokens', namespace.query)
  const [search, setSearch] = useState('')
  const canWrite = useAclWrite()
  const needle = search.trim().toLowerCase()
  const shown = (tokens.data ?? []).filter((token) => needle === '' || token.Description.toLowerCase().includes(needle) || token.AccessorID.includes(needle))
  return (
    <Page title="Tokens" actions={<GuardedLink verdict={canWrite} href="/tokens/new">New token</GuardedLink>}>
      <div class="toolbar" role="search">
        <TextField label="Search" type="search" value={search} onValue={setSearch} hint="By description or AccessorID." />
        {namespace.field}
      </div>
      <ErrorMessage error={tokens.error} prefix="Could not list the tokens" polite />
      {tokens.data === undefined ? (
        tokens.loading ? <Loading what="tokens" /> : null
      ) : (
        <Table
          caption={needle === '' ? 'Tokens' : `Tokens matching "${search.trim()}"`}
          rows={shown}
          rowKey={(token) => token.AccessorID}
          empty={needle === '' ? 'There are no tokens.' : 'No token matches the search.'}
          columns={[
            ['Description', (token) => <Link href={path('/tokens', token.AccessorID)}>{tokenName(token)}</Link>],
            ['AccessorID', (token) => <code>{token.AccessorID}</code>],
            ['Policies', (token) => <LinkList items={(token.Policies ?? []).map((link) => ({ key: link.ID, href: path('/policies', link.ID), text: link.Name }))} />],
            ['Roles', (token) => <LinkList items={(token.Roles ?? []).map((link) => ({ key: link.ID, href: path('/roles', link.ID), text: link.Name }))} />],
            ...namespaceColumn<Token>(namespace.all),
            ['Scope', (token) => (token.Local ? 'local' : 'global')],
            ['Created', (token) => formatTime(token.CreateTime)],
          ]}
        />
      )}
    </Page>
  )
}

export function TokenPage({ params }: PageProps): JSX.Element {
  const id = params.id!
  const token = useLive<Token>(path('/v1/acl/token', id))
  const canWrite = useAclWrite()
  const [cloning, setCloning] = useState(false)
  const data = token.data
  return (
    <Page
      title={data === undefined ? 'Token' : `Token ${tokenName(data)}`}
      actions={
        data === undefined ? undefined : (
          <RecordActions verdict={canWrite} edit={path('/tokens', id, 'edit')} what={`token ${tokenName(data)}`} remove={path('/v1/acl/token', id)} list="/tokens">
            <GuardedButton verdict={canWrite} onClick={() => setCloning(true)}>
              Clone
            </GuardedButton>
          </RecordActions>
        )
      }
    >
      <ErrorMessage error={token.error} prefix="Could not read the token" polite />
      {data === undefined ? token.loading ? <Loading what="the token" /> : null : (
        <>
          {cloning ? <CloneForm source={data} onCancel={() => setCloning(false)} /> : null}
          <TokenFields token={data} />
          <TokenPermissions accessorID={data.AccessorID} modifyIndex={data.ModifyIndex} />
        </>
      )}
    </Page>
  )
}

function TokenFields({ token }: { token: Token }): JSX.Element {
  return (
    <Fields
      rows={[
        ['AccessorID', <code>{token.AccessorID}</code>],
        ['SecretID', <Secret secret={token.SecretID} />],
        ['Description', token.Description],
        ['Policies', <LinkList items={(token.Policies ?? []).map((link) => ({ key: link.ID, href: path('/policies', link.ID), text: link.Name }))} />],
        ['Roles', <LinkList items={(token.Roles ?? []).map((link) => ({ key: link.ID, href: path('/roles', link.ID), text: link.Name }))} />],
        ['Service identities', (token.ServiceIdentities ?? []).map(describeServiceIdentity).join('; ')],
        ['Node identities', (token.NodeIdentities ?? []).map((item) => `${item.NodeName} (in ${item.Datacenter})`).join('; ')],
        [
          'Templated policies',
          <LinkList items={(token.TemplatedPolicies ?? []).map((item, i) => ({ key: String(i), href: path('/templated-policies', item.TemplateName), text: describeTemplatedPolicy(item) }))} />,
        ],
        ['Scope', token.Local ? 'local (this datacenter only)' : 'global (replicated to every datacenter)'],
        ['Auth method', token.AuthMethod === undefined || token.AuthMethod === '' ? '' : <Link href={path('/auth-methods', token.AuthMethod)}>{token.AuthMethod}</Link>],
        ['Expires', token.ExpirationTime === undefined || token.ExpirationTime === '' ? 'never' : formatTime(token.ExpirationTime)],
        ['Created', formatTime(token.CreateTime)],
        ['Indexes', `created at ${token.CreateIndex}, modified at ${token.ModifyIndex}`],
      ]}
    />
  )
}

/** The SecretID, hidden until asked for; acl:read alone gets "<hidden>" from the agent, and is told why. */
function Secret({ secret }: { secret: string }): JSX.Element {
  const [shown, setShown] = useState(false)
  const [notice, setNotice] = useState<string | undefined>(undefined)
  if (secret === '<hidden>' || secret === '') return <span class="none">hidden: reading a SecretID needs acl:write</span>
  const copy = async (): Promise<void> => {
    try {
      await navigator.clipboard.writeText(secret)
      setNotice('SecretID copied to the clipboard.')
    } catch {
      setShown(true)
      setNotice('The browser refused the clipboard: the SecretID is shown to copy by hand.')
    }
  }
  return (
    <span class="secret">
      {shown ? <code>{secret}</code> : <span aria-label="SecretID hidden">••••••••-••••</span>}
      <button type="button" aria-pressed={shown} onClick={() => setShown(!shown)}>
        {shown ? 'Hide SecretID' : 'Show SecretID'}
      </button>
      <button type="button" onClick={() => void copy()}>
        Copy SecretID
      </button>
      <Notice text={notice} />
    </span>
  )
}

function CloneForm({ source, onCancel }: { source: Token; onCancel: () => void }): JSX.Element {
  const [description, setDescription] = useState(source.Description === '' ? '' : `Clone of ${source.Description}`)
  const [error, setError] = useState<unknown>(undefined)
  const [busy, setBusy] = useState(false)
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault()
    setBusy(true)
    try {
      const { body } = await request<Token>('PUT', path('/v1/acl/token', source.AccessorID, 'clone'), { body: { Description: description } })
      navigate(path('/tokens', body.AccessorID))
    } catch (failure) {
      setError(failure)
      setBusy(false)
    }
  }
  return (
    <form class="inline-form" aria-label="Clone token" onSubmit={(event) => void submit(event)}>
      <p>The clone links the same policies, roles and identities, with a new AccessorID and SecretID.</p>
      <TextField label="Description of the clone" value={description} onValue={setDescription} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          Create clone
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
      <ErrorMessage error={error} prefix="Not cloned" />
    </form>
  )
}

function linksOf(token: Token | undefined): LinksValue {
  return {
    policies: (token?.Policies ?? []).map((link) => link.Name),
    roles: (token?.Roles ?? []).map((link) => link.Name),
    serviceIdentities: serviceIdentitiesText(token?.ServiceIdentities),
    nodeIdentities: nodeIdentitiesText(token?.NodeIdentities),
    templatedPolicies: templatedPoliciesText(token?.TemplatedPolicies),
  }
}

export function TokenNew(): JSX.Element {
  return (
    <Page title="New token">
      <TokenForm token={undefined} />
    </Page>
  )
}

export function TokenEdit({ params }: PageProps): JSX.Element {
  const token = useLive<Token>(path('/v1/acl/token', params.id!), {}, { live: false })
  return (
    <Page title={token.data === undefined ? 'Edit token' : `Edit token ${tokenName(token.data)}`}>
      <ErrorMessage error={token.error} prefix="Could not read the token" polite />
      {token.data === undefined ? token.loading ? <Loading what="the token" /> : null : <TokenForm token={token.data} />}
    </Page>
  )
}

function TokenForm({ token }: { token: Token | undefined }): JSX.Element {
  const canWrite = useAclWrite()
  const [description, setDescription] = useState(token?.Description ?? '')
  const [links, setLinks] = useState<LinksValue>(linksOf(token))
  const [local, setLocal] = useState(token?.Local ?? false)
  const [ttl, setTtl] = useState('')
  const [errors, setErrors] = useState<Partial<Record<keyof LinksValue, string>>>({})
  const [error, setError] = useState<unknown>(undefined)
  const [busy, setBusy] = useState(false)
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault()
    const parsed: Record<string, unknown> = {}
    const found: Partial<Record<keyof LinksValue, string>> = {}
    const parse = (field: keyof LinksValue, run: () => unknown, name: string): void => {
      try {
        parsed[name] = run()
      } catch (failure) {
        found[field] = failure instanceof Error ? failure.message : String(failure)
      }
    }
    parse('serviceIdentities', () => parseServiceIdentities(links.serviceIdentities), 'ServiceIdentities')
    parse('nodeIdentities', () => parseNodeIdentities(links.nodeIdentities), 'NodeIdentities')
    parse('templatedPolicies', () => parseTemplatedPolicies(links.templatedPolicies), 'TemplatedPolicies')
    setErrors(found)
    if (Object.keys(found).length > 0) return
    const body = {
      Description: description,
      Policies: links.policies.map((name) => ({ Name: name })),
      Roles: links.roles.map((name) => ({ Name: name })),
      ...parsed,
      Local: local,
      ...(token === undefined && ttl.trim() !== '' ? { ExpirationTTL: ttl.trim() } : {}),
    }
    setBusy(true)
    setError(undefined)
    try {
      const answer = await request<Token>('PUT', token === undefined ? '/v1/acl/token' : path('/v1/acl/token', token.AccessorID), { body })
      navigate(path('/tokens', answer.body.AccessorID))
    } catch (failure) {
      setError(failure)
      setBusy(false)
    }
  }
  return (
    <form onSubmit={(event) => void submit(event)} aria-label={token === undefined ? 'New token' : 'Edit token'}>
      <TextField label="Description" value={description} onValue={setDescription} />
      <LinksFields value={links} onChange={setLinks} withRoles errors={errors} />
      {token === undefined ? (
        <>
          <Checkbox label="Local to this datacenter" hint="A local token is not replicated to other datacenters. It cannot be changed later." checked={local} onChecked={setLocal} />
          <TextField label="Expires after" value={ttl} onValue={setTtl} hint="A duration such as 30m or 12h (1 minute to 24 hours); empty: never." />
        </>
      ) : (
        <p class="hint">Scope: {token.Local ? 'local' : 'global'} (fixed when the token was created).</p>
      )}
      <div class="actions">
        <GuardedButton type="submit" kind="primary" verdict={canWrite} busy={busy}>
          {token === undefined ? 'Create' : 'Save'}
        </GuardedButton>
        <Link href={token === undefined ? '/tokens' : path('/tokens', token.AccessorID)}>Cancel</Link>
      </div>
      <ErrorMessage error={error} prefix={token === undefined ? 'Not created' : 'Not saved'} />
    </form>
  )
}
