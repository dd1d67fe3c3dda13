/**
 * Auth methods: the list (live), a method's page with its config and the binding rules that shape its tokens, and
 * the create and edit form (the config as JSON; name and type fixed once created, as the API has them).
 */
import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { ApiError, request } from '../api.js'
import { ErrorMessage, Fields, GuardedButton, GuardedLink, LinkedRecords, Loading, Page, Select, Table, TextArea, TextField, useNamespaceFilter, RecordActions } from '../components.js'
import { useLive } from '../live.js'
import { useAclWrite } from '../permissions.js'
import { Link, navigate, path } from '../router.js'
import type { PageProps } from '../routes.js'
import type { AuthMethod, BindingRule } from '../types.js'
import { namespaceColumn } from './tokens.js'

/** The types the agent accepts (src/acl/auth-method-config.ts). */
const TYPES = ['jwt', 'oidc', 'kubernetes', 'aws-iam']

export function AuthMethodList(): JSX.Element {
  const namespace = useNamespaceFilter()
  const methods = useLive<AuthMethod[]>('/v1/acl/auth-methods', namespace.query)
  const canWrite = useAclWrite()
  return (
    <Page title="Auth Methods" actions={<GuardedLink verdict={canWrite} href="/auth-methods/+new">New auth method</GuardedLink>}>
      <div class="toolbar">{namespace.field}</div>
      <ErrorMessage error={methods.error} prefix="Could not list the auth methods" polite />
      {methods.data === undefined ? (
        methods.loading ? <Loading what="auth methods" /> : null
      ) : (
        <Table
          caption="Auth methods"
          rows={methods.data}
          rowKey={(method) => method.Name}
          empty="There are no auth methods."
          columns={[
            ['Name', (method) => <Link href={path('/auth-methods', method.Name)}>{method.Name}</Link>],
            ['Type', (method) => method.Type],
            ...namespaceColumn<AuthMethod>(namespace.all),
            ['Display name', (method) => method.DisplayName ?? ''],
            ['Description', (method) => method.Description ?? ''],
            ['Token locality', (method) => method.TokenLocality || 'local'],
          ]}
        />
      )}
    </Page>
  )
}

export function AuthMethodPage({ params }: PageProps): JSX.Element {
  const name = params.name!
  const method = useLive<AuthMethod>(path('/v1/acl/auth-method', name))
  const rules = useLive<BindingRule[]>('/v1/acl/binding-rules', { authmethod: name }, { live: false })
  const canWrite = useAclWrite()
  const data = method.data
  return (
    <Page
      title={`Auth method ${name}`}
      actions={
        data === undefined ? undefined : (
          <RecordActions verdict={canWrite} edit={path('/auth-methods', name, 'edit')} what={`auth method ${name} (and its binding rules, and the tokens it created)`} remove={path('/v1/acl/auth-method', name)} list="/auth-methods" />
        )
      }
    >
      <ErrorMessage error={method.error} prefix="Could not read the auth method" polite />
      {data === undefined ? method.loading ? <Loading what="the auth method" /> : null : (
        <>
          <Fields
            rows={[
              ['Name', data.Name],
              ['Type', data.Type],
              ['Display name', data.DisplayName ?? ''],
              ['Description', data.Description ?? ''],
              ['Max token TTL', data.MaxTokenTTL === undefined || data.MaxTokenTTL === '' || data.MaxTokenTTL === '0s' ? '' : data.MaxTokenTTL],
              ['Token locality', data.TokenLocality || 'local'],
              ['Indexes', `created at ${data.CreateIndex}, modified at ${data.ModifyIndex}`],
            ]}
          />
          <h2>Config</h2>
          <pre aria-label="Config">{JSON.stringify(data.Config ?? {}, null, 2)}</pre>
          <LinkedRecords
            title="Binding rules"
            list={rules}
            noun="binding rules"
            empty="No binding rule uses this auth method."
            link={(rule) => ({ key: rule.ID, href: path('/binding-rules', rule.ID), text: `${rule.BindType} ${rule.BindName}${rule.Description ? ` (${rule.Description})` : ''}` })}
          />
          <p>
            <GuardedLink verdict={canWrite} href={`/binding-rules/new?authmethod=${encodeURIComponent(name)}`}>
              New binding rule
            </GuardedLink>
          </p>
        </>
      )}
    </Page>
  )
}

export function AuthMethodNew(): JSX.Element {
  return (
    <Page title="New auth method">
      <AuthMethodForm method={undefined} />
    </Page>
  )
}

export function AuthMethodEdit({ params }: PageProps): JSX.Element {
  const method = useLive<AuthMethod>(path('/v1/acl/auth-method', params.name!), {}, { live: false })
  return (
    <Page title={`Edit auth method ${params.name!}`}>
      <ErrorMessage error={method.error} prefix="Could not read the auth method" polite />
      {method.data === undefined ? method.loading ? <Loading what="the auth method" /> : null : <AuthMethodForm method={method.data} />}
    </Page>
  )
}

function AuthMethodForm({ method }: { method: AuthMethod | undefined }): JSX.Element {
  const canWrite = useAclWrite()
  const [name, setName] = useState(method?.Name ?? '')
  const [type, setType] = useState(method?.Type ?? 'jwt')
  const [displayName, setDisplayName] = useState(method?.DisplayName ?? '')
  const [description, setDescription] = useState(method?.Description ?? '')
  const [maxTokenTtl, setMaxTokenTtl] = useState(method?.MaxTokenTTL === '0s' ? '' : (method?.MaxTokenTTL ?? ''))
  const [locality, setLocality] = useState(method?.TokenLocality ?? '')
  const [config, setConfig] = useState(JSON.stringify(method?.Config ?? {}, null, 2))
  const [configError, setConfigError] = useState<string | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [busy, setBusy] = useState(false)
  const failure = error instanceof ApiError ? error : undefined
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault()
    let parsed: unknown
    try {
      parsed = JSON.parse(config)
    } catch (caught) {
      setConfigError(`not JSON: ${caught instanceof Error ? caught.message : String(caught)}`)
      return
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      setConfigError('must be a JSON object')
      return
    }
    setConfigError(undefined)
    const body = {
      Name: name.trim(),
      Type: type,
      DisplayName: displayName,
      Description: description,
      ...(maxTokenTtl.trim() === '' ? {} : { MaxTokenTTL: maxTokenTtl.trim() }),
      TokenLocality: locality,
      Config: parsed,
    }
    setBusy(true)
    setError(undefined)
    try {
      const answer = await request<AuthMethod>('PUT', method === undefined ? '/v1/acl/auth-method' : path('/v1/acl/auth-method', method.Name), { body })
      navigate(path('/auth-methods', answer.body.Name))
    } catch (caught) {
      setError(caught)
      setBusy(false)
    }
  }
  return (
    <form onSubmit={(event) => void submit(event)} aria-label={method === undefined ? 'New auth method' : 'Edit auth method'}>
      {method === undefined ? (
        <>
          <TextField label="Name" value={name} onValue={setName} required hint="Letters, digits, - and _. Fixed once created." error={failure?.field === 'Name' ? failure.message : undefined} />
          <Select label="Type" value={type} onValue={setType} options={TYPES.map((item) => [item, item])} hint="Fixed once created." />
        </>
      ) : (
        <p class="hint">
          Name {method.Name}, type {method.Type}: both fixed once created.
        </p>
      )}
      <TextField label="Display name" value={displayName} onValue={setDisplayName} />
      <TextField label="Description" value={description} onValue={setDescription} />
      <TextField label="Max token TTL" value={maxTokenTtl} onValue={setMaxTokenTtl} hint="A duration such as 8h (1 minute to 24 hours); required for oidc. Empty: none." error={failure?.field === 'MaxTokenTTL' ? failure.message : undefined} />
      <Select
        label="Token locality"
        value={locality}
        onValue={setLocality}
        options={[
          ['', 'local (the default)'],
          ['local', 'local'],
          ['global', 'global'],
        ]}
      />
      <TextArea
        label="Config"
        rows={10}
        value={config}
        onValue={setConfig}
        hint="The method's configuration as a JSON object (for jwt, say, JWTValidationPubKeys or JWKSURL, and ClaimMappings)."
        error={configError ?? (failure?.field?.startsWith('Config') === true ? failure.message : undefined)}
      />
      <div class="actions">
        <GuardedButton type="submit" kind="primary" verdict={canWrite} busy={busy}>
          {method === undefined ? 'Create' : 'Save'}
        </GuardedButton>
        <Link href={method === undefined ? '/auth-methods' : path('/auth-methods', method.Name)}>Cancel</Link>
      </div>
      <ErrorMessage error={error} prefix={method === undefined ? 'Not created' : 'Not saved'} />
    </form>
  )
}
