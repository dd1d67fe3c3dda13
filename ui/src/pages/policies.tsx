/**
 * Policies: the list (live, searchable by name or description), a policy's page with its rules and what links it
 * (roles and tokens), and the create and edit form, whose rules editor shows the agent's error at its line and
 * puts the cursor there when the error carries Line and Column.
 */
import type { JSX } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { ApiError, request } from '../api.js'
import { ErrorMessage, Fields, GuardedButton, GuardedLink, LinkedRecords, Loading, Page, Table, TextArea, TextField, useNamespaceFilter, RecordActions } from '../components.js'
import { useLive } from '../live.js'
import { useAclWrite } from '../permissions.js'
import { Link, navigate, path } from '../router.js'
import type { PageProps } from '../routes.js'
import type { Policy, Role, Token } from '../types.js'
import { namespaceColumn, tokenLink } from './tokens.js'

export function PolicyList(): JSX.Element {
  const namespace = useNamespaceFilter()
  const policies = useLive<Policy[]>('/v1/acl/policies', namespace.query)
  const [search, setSearch] = useState('')
  const canWrite = useAclWrite()
  const needle = search.trim().toLowerCase()
  const shown = (policies.data ?? []).filter((policy) => needle === '' || policy.Name.toLowerCase().includes(needle) || policy.Description.toLowerCase().includes(needle))
  return (
    <Page title="Policies" actions={<GuardedLink verdict={canWrite} href="/policies/new">New policy</GuardedLink>}>
      <div class="toolbar" role="search">
        <TextField label="Search" type="search" value={search} onValue={setSearch} hint="By name or description." />
        {namespace.field}
      </div>
      <ErrorMessage error={policies.error} prefix="Could not list the policies" polite />
      {policies.data === undefined ? (
        policies.loading ? <Loading what="policies" /> : null
      ) : (
        <Table
          caption={needle === '' ? 'Policies' : `Policies matching "${search.trim()}"`}
          rows={shown}
          rowKey={(policy) => policy.ID}
          empty={needle === '' ? 'There are no policies.' : 'No policy matches the search.'}
          columns={[
            ['Name', (policy) => <Link href={path('/policies', policy.ID)}>{policy.Name}</Link>],
            ['Description', (policy) => policy.Description],
            ...namespaceColumn<Policy>(namespace.all),
            ['Datacenters', (policy) => (policy.Datacenters ?? []).join(', ') || 'all'],
            ['ID', (policy) => <code>{policy.ID}</code>],
          ]}
        />
      )}
    </Page>
  )
}

export function PolicyPage({ params }: PageProps): JSX.Element {
  const id = params.id!
  const policy = useLive<Policy>(path('/v1/acl/policy', id))
  const roles = useLive<Role[]>('/v1/acl/roles', { policy: id }, { live: false })
  const tokens = useLive<Token[]>('/v1/acl/tokens', { policy: id }, { live: false })
  const canWrite = useAclWrite()
  const data = policy.data
  return (
    <Page
      title={data === undefined ? 'Policy' : `Policy ${data.Name}`}
      actions={
        data === undefined ? undefined : (
          <RecordActions verdict={canWrite} edit={path('/policies', id, 'edit')} what={`policy ${data.Name}`} remove={path('/v1/acl/policy', id)} list="/policies" />
        )
      }
    >
      <ErrorMessage error={policy.error} prefix="Could not read the policy" polite />
      {data === undefined ? policy.loading ? <Loading what="the policy" /> : null : (
        <>
          <Fields
            rows={[
              ['Name', data.Name],
              ['ID', <code>{data.ID}</code>],
              ['Description', data.Description],
              ['Datacenters', (data.Datacenters ?? []).join(', ') || 'all'],
              ['Indexes', `created at ${data.CreateIndex}, modified at ${data.ModifyIndex}`],
            ]}
          />
          <h2>Rules</h2>
          {data.Rules === undefined || data.Rules === '' ? <p class="none">No rules.</p> : <pre aria-label="Rules">{data.Rules}</pre>}
          <LinkedRecords title="Roles linking it" list={roles} noun="roles" empty="No role links this policy." link={(role) => ({ key: role.ID, href: path('/roles', role.ID), text: role.Name })} />
          <LinkedRecords title="Tokens linking it" list={tokens} noun="tokens" empty="No token links this policy directly." link={tokenLink} />
        </>
      )}
    </Page>
  )
}

export function PolicyNew(): JSX.Element {
  return (
    <Page title="New policy">
      <PolicyForm policy={undefined} />
    </Page>
  )
}

export function PolicyEdit({ params }: PageProps): JSX.Element {
  const policy = useLive<Policy>(path('/v1/acl/policy', params.id!), {}, { live: false })
  return (
    <Page title={policy.data === undefined ? 'Edit policy' : `Edit policy ${policy.data.Name}`}>
      <ErrorMessage error={policy.error} prefix="Could not read the policy" polite />
      {policy.data === undefined ? policy.loading ? <Loading what="the policy" /> : null : <PolicyForm policy={policy.data} />}
    </Page>
  )
}

/** The offset in `text` of a 1-based line and column, clamped to the text. */
function offsetOf(text: string, line: number, column: number): number {
  const lines = text.split('\n')
  let offset = 0
  for (let i = 0; i < Math.min(line - 1, lines.length - 1); i++) offset += lines[i]!.length + 1
  return Math.min(text.length, offset + Math.max(0, column - 1))
}

/** The line an error points at, with a caret under its column, as a compiler prints it. */
export function Excerpt({ text, line, column }: { text: string; line: number; column: number }): JSX.Element {
  // A tab becomes one space in both lines, so the caret stays under the character it points at.
  const source = (text.split('\n')[line - 1] ?? '').replace(/\t/g, ' ')
  const gutter = String(line)
  return (
    <pre class="excerpt" aria-label={`Line ${line}, column ${column}`}>
      {`${gutter} | ${source}\n${' '.repeat(gutter.length)} | ${' '.repeat(Math.max(0, column - 1))}^`}
    </pre>
  )
}

function PolicyForm({ policy }: { policy: Policy | undefined }): JSX.Element {
  const canWrite = useAclWrite()
  const [name, setName] = useState(policy?.Name ?? '')
  const [description, setDescription] = useState(policy?.Description ?? '')
  const [rules, setRules] = useState(policy?.Rules ?? '')
  const [datacenters, setDatacenters] = useState((policy?.Datacenters ?? []).join(', '))
  const [error, setError] = useState<unknown>(undefined)
  /** The rules the error was about: the excerpt shows those, not what has been typed since. */
  const [rulesSent, setRulesSent] = useState('')
  const [busy, setBusy] = useState(false)
  const rulesArea = useRef<HTMLTextAreaElement>(null)
  const failure = error instanceof ApiError ? error : undefined
  const rulesError = failure !== undefined && (failure.field === 'Rules' || failure.line !== undefined) ? failure : undefined
  useEffect(() => {
    if (rulesError?.line === undefined || rulesArea.current === null) return
    const area = rulesArea.current
    const at = offsetOf(area.value, rulesError.line, rulesError.column ?? 1)
    area.focus()
    area.setSelectionRange(at, at)
  }, [rulesError])
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault()
    const body = {
      Name: name.trim(),
      Description: description,
      Rules: rules,
      Datacenters: datacenters
        .split(',')
        .map((item) => item.trim())
        .filter((item) => item !== ''),
    }
    setBusy(true)
    setError(undefined)
    setRulesSent(rules)
    try {
      const answer = await request<Policy>('PUT', policy === undefined ? '/v1/acl/policy' : path('/v1/acl/policy', policy.ID), { body })
      navigate(path('/policies', answer.body.ID))
    } catch (caught) {
      setError(caught)
      setBusy(false)
    }
  }
  return (
    <form onSubmit={(event) => void submit(event)} aria-label={policy === undefined ? 'New policy' : 'Edit policy'}>
      <TextField label="Name" value={name} onValue={setName} required hint="Letters, digits, - and _." error={failure?.field === 'Name' ? failure.message : undefined} />
      <TextField label="Description" value={description} onValue={setDescription} />
      <TextArea
        label="Rules"
        rows={12}
        value={rules}
        onValue={setRules}
        areaRef={rulesArea}
        hint='HCL or JSON, as Consul writes them: service "web" { policy = "read" }.'
        error={rulesError?.message}
      >
        {rulesError?.line === undefined ? null : <Excerpt text={rulesSent} line={rulesError.line} column={rulesError.column ?? 1} />}
      </TextArea>
      <TextField label="Datacenters" value={datacenters} onValue={setDatacenters} hint="Comma-separated; empty: valid in every datacenter." error={failure?.field?.startsWith('Datacenters') === true ? failure.message : undefined} />
      <div class="actions">
        <GuardedButton type="submit" kind="primary" verdict={canWrite} busy={busy}>
          {policy === undefined ? 'Create' : 'Save'}
        </GuardedButton>
        <Link href={policy === undefined ? '/policies' : path('/policies', policy.ID)}>Cancel</Link>
      </div>
      <ErrorMessage error={error} prefix={policy === undefined ? 'Not created' : 'Not saved'} />
    </form>
  )
}
