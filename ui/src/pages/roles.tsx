/**
 * Roles: the list (live, searchable by name or description), a role's page with its links and the tokens linking
 * it, and the create and edit form (policies as checkboxes, identities and templated policies one per line).
 */
import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { request } from '../api.js'
import { ErrorMessage, Fields, GuardedButton, GuardedLink, LinkedRecords, LinkList, Loading, Page, Table, TextField, useNamespaceFilter, RecordActions } from '../components.js'
import { describeServiceIdentity, describeTemplatedPolicy, nodeIdentitiesText, parseNodeIdentities, parseServiceIdentities, parseTemplatedPolicies, serviceIdentitiesText, templatedPoliciesText } from '../identities.js'
import { useLive } from '../live.js'
import { useAclWrite } from '../permissions.js'
import { Link, navigate, path } from '../router.js'
import type { PageProps } from '../routes.js'
import type { Role, Token } from '../types.js'
import { LinksFields, type LinksValue } from './links-form.js'
import { namespaceColumn, tokenLink } from './tokens.js'

function policyLinks(role: Role): JSX.Element | '' {
  return <LinkList items={(role.Policies ?? []).map((link) => ({ key: link.ID, href: path('/policies', link.ID), text: link.Name }))} />
}

export function RoleList(): JSX.Element {
  const namespace = useNamespaceFilter()
  const roles = useLive<Role[]>('/v1/acl/roles', namespace.query)
  const [search, setSearch] = useState('')
  const canWrite = useAclWrite()
  const needle = search.trim().toLowerCase()
  const shown = (roles.data ?? []).filter((role) => needle === '' || role.Name.toLowerCase().includes(needle) || role.Description.toLowerCase().includes(needle))
  return (
    <Page title="Roles" actions={<GuardedLink verdict={canWrite} href="/roles/new">New role</GuardedLink>}>
      <div class="toolbar" role="search">
        <TextField label="Search" type="search" value={search} onValue={setSearch} hint="By name or description." />
        {namespace.field}
      </div>
      <ErrorMessage error={roles.error} prefix="Could not list the roles" polite />
      {roles.data === undefined ? (
        roles.loading ? <Loading what="roles" /> : null
      ) : (
        <Table
          caption={needle === '' ? 'Roles' : `Roles matching "${search.trim()}"`}
          rows={shown}
          rowKey={(role) => role.ID}
          empty={needle === '' ? 'There are no roles.' : 'No role matches the search.'}
          columns={[
            ['Name', (role) => <Link href={path('/roles', role.ID)}>{role.Name}</Link>],
            ['Description', (role) => role.Description],
            ...namespaceColumn<Role>(namespace.all),
            ['Policies', policyLinks],
            ['Service identities', (role) => (role.ServiceIdentities ?? []).map(describeServiceIdentity).join('; ')],
          ]}
        />
      )}
    </Page>
  )
}

export function RolePage({ params }: PageProps): JSX.Element {
  const id = params.id!
  const role = useLive<Role>(path('/v1/acl/role', id))
  const tokens = useLive<Token[]>('/v1/acl/tokens', { role: id }, { live: false })
  const canWrite = useAclWrite()
  const data = role.data
  return (
    <Page
      title={data === undefined ? 'Role' : `Role ${data.Name}`}
      actions={
        data === undefined ? undefined : (
          <RecordActions verdict={canWrite} edit={path('/roles', id, 'edit')} what={`role ${data.Name}`} remove={path('/v1/acl/role', id)} list="/roles" />
        )
      }
    >
      <ErrorMessage error={role.error} prefix="Could not read the role" polite />
      {data === undefined ? role.loading ? <Loading what="the role" /> : null : (
        <>
          <Fields
            rows={[
              ['Name', data.Name],
              ['ID', <code>{data.ID}</code>],
              ['Description', data.Description],
              ['Policies', policyLinks(data)],
              ['Service identities', (data.ServiceIdentities ?? []).map(describeServiceIdentity).join('; ')],
              ['Node identities', (data.NodeIdentities ?? []).map((item) => `${item.NodeName} (in ${item.Datacenter})`).join('; ')],
              [
                'Templated policies',
                <LinkList items={(data.TemplatedPolicies ?? []).map((item, i) => ({ key: String(i), href: path('/templated-policies', item.TemplateName), text: describeTemplatedPolicy(item) }))} />,
              ],
              ['Indexes', `created at ${data.CreateIndex}, modified at ${data.ModifyIndex}`],
            ]}
          />
          <LinkedRecords title="Tokens linking it" list={tokens} noun="tokens" empty="No token links this role." link={tokenLink} />
        </>
      )}
    </Page>
  )
}

export function RoleNew(): JSX.Element {
  return (
    <Page title="New role">
      <RoleForm role={undefined} />
    </Page>
  )
}

export function RoleEdit({ params }: PageProps): JSX.Element {
  const role = useLive<Role>(path('/v1/acl/role', params.id!), {}, { live: false })
  return (
    <Page title={role.data === undefined ? 'Edit role' : `Edit role ${role.data.Name}`}>
      <ErrorMessage error={role.error} prefix="Could not read the role" polite />
      {role.data === undefined ? role.loading ? <Loading what="the role" /> : null : <RoleForm role={role.data} />}
    </Page>
  )
}

function RoleForm({ role }: { role: Role | undefined }): JSX.Element {
  const canWrite = useAclWrite()
  const [name, setName] = useState(role?.Name ?? '')
  const [description, setDescription] = useState(role?.Description ?? '')
  const [links, setLinks] = useState<LinksValue>({
    policies: (role?.Policies ?? []).map((link) => link.Name),
    roles: [],
    serviceIdentities: serviceIdentitiesText(role?.ServiceIdentities),
    nodeIdentities: nodeIdentitiesText(role?.NodeIdentities),
    templatedPolicies: templatedPoliciesText(role?.TemplatedPolicies),
  })
  const [errors, setErrors] = useState<Partial<Record<keyof LinksValue, string>>>({})
  const [error, setError] = useState<unknown>(undefined)
  const [busy, setBusy] = useState(false)
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault()
    const found: Partial<Record<keyof LinksValue, string>> = {}
    const attempt = <T,>(field: keyof LinksValue, run: () => T): T | undefined => {
      try {
        return run()
      } catch (failure) {
        found[field] = failure instanceof Error ? failure.message : String(failure)
        return undefined
      }
    }
    const body = {
      Name: name.trim(),
      Description: description,
      Policies: links.policies.map((policy) => ({ Name: policy })),
      ServiceIdentities: attempt('serviceIdentities', () => parseServiceIdentities(links.serviceIdentities)),
      NodeIdentities: attempt('nodeIdentities', () => parseNodeIdentities(links.nodeIdentities)),
      TemplatedPolicies: attempt('templatedPolicies', () => parseTemplatedPolicies(links.templatedPolicies)),
    }
    setErrors(found)
    if (Object.keys(found).length > 0) return
    setBusy(true)
    setError(undefined)
    try {
      const answer = await request<Role>('PUT', role === undefined ? '/v1/acl/role' : path('/v1/acl/role', role.ID), { body })
      navigate(path('/roles', answer.body.ID))
    } catch (failure) {
      setError(failure)
      setBusy(false)
    }
  }
  return (
    <form onSubmit={(event) => void submit(event)} aria-label={role === undefined ? 'New role' : 'Edit role'}>
      <TextField label="Name" value={name} onValue={setName} required hint="Letters, digits, - and _." />
      <TextField label="Description" value={description} onValue={setDescription} />
      <LinksFields value={links} onChange={setLinks} withRoles={false} errors={errors} />
      <div class="actions">
        <GuardedButton type="submit" kind="primary" verdict={canWrite} busy={busy}>
          {role === undefined ? 'Create' : 'Save'}
        </GuardedButton>
        <Link href={role === undefined ? '/roles' : path('/roles', role.ID)}>Cancel</Link>
      </div>
      <ErrorMessage error={error} prefix={role === undefined ? 'Not created' : 'Not saved'} />
    </form>
  )
}
