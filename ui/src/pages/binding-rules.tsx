/**
 * Binding rules: the list (live, narrowed to one auth method if asked), a rule's page, and the create and edit form.
 * A rule maps the identities an auth method validates to what the tokens it creates link.
 */
import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { request } from '../api.js'
import { ErrorMessage, Fields, GuardedButton, GuardedLink, Loading, Page, Select, Table, TextArea, TextField, useNamespaceFilter, RecordActions } from '../components.js'
import { useLive } from '../live.js'
import { useAclWrite } from '../permissions.js'
import { currentSearch, Link, navigate, path } from '../router.js'
import type { PageProps } from '../routes.js'
import type { AuthMethod, BindingRule } from '../types.js'
import { namespaceColumn } from './tokens.js'

const BIND_TYPES: Array<[string, string]> = [
  ['service', 'service: a service identity named BindName'],
  ['node', 'node: a node identity named BindName, in this datacenter'],
  ['role', 'role: the role named BindName, if it exists at login'],
  ['templated-policy', 'templated-policy: the template named BindName, with BindVars'],
]

function ruleName(rule: BindingRule): string {
  return rule.Description !== undefined && rule.Description !== '' ? rule.Description : `${rule.BindType} ${rule.BindName}`
}

export function BindingRuleList(): JSX.Element {
  const [method, setMethod] = useState(currentSearch().get('authmethod') ?? '')
  const namespace = useNamespaceFilter()
  const rules = useLive<BindingRule[]>('/v1/acl/binding-rules', { ...namespace.query, ...(method === '' ? {} : { authmethod: method }) })
  const methods = useLive<AuthMethod[]>('/v1/acl/auth-methods', {}, { live: false })
  const canWrite = useAclWrite()
  return (
    <Page title="Binding Rules" actions={<GuardedLink verdict={canWrite} href="/binding-rules/new">New binding rule</GuardedLink>}>
      <div class="toolbar">
        <Select label="Auth method" value={method} onValue={setMethod} options={[['', 'all'], ...(methods.data ?? []).map((item): [string, string] => [item.Name, item.Name])]} />
        {namespace.field}
      </div>
      <ErrorMessage error={rules.error} prefix="Could not list the binding rules" polite />
      {rules.data === undefined ? (
        rules.loading ? <Loading what="binding rules" /> : null
      ) : (
        <Table
          caption={method === '' ? 'Binding rules' : `Binding rules of ${method}`}
          rows={rules.data}
          rowKey={(rule) => rule.ID}
          empty="There are no binding rules."
          columns={[
            ['Rule', (rule) => <Link href={path('/binding-rules', rule.ID)}>{ruleName(rule)}</Link>],
            ['Auth method', (rule) => <Link href={path('/auth-methods', rule.AuthMethod)}>{rule.AuthMethod}</Link>],
            ['Bind type', (rule) => rule.BindType],
            ...namespaceColumn<BindingRule>(namespace.all),
            ['Bind name', (rule) => <code>{rule.BindName}</code>],
            ['Selector', (rule) => (rule.Selector ? <code>{rule.Selector}</code> : <span class="none">matches every identity</span>)],
          ]}
        />
      )}
    </Page>
  )
}

export function BindingRulePage({ params }: PageProps): JSX.Element {
  const id = params.id!
  const rule = useLive<BindingRule>(path('/v1/acl/binding-rule', id))
  const canWrite = useAclWrite()
  const data = rule.data
  return (
    <Page
      title={data === undefined ? 'Binding rule' : `Binding rule ${ruleName(data)}`}
      actions={
        data === undefined ? undefined : (
          <RecordActions verdict={canWrite} edit={path('/binding-rules', id, 'edit')} what={`binding rule ${ruleName(data)}`} remove={path('/v1/acl/binding-rule', id)} list="/binding-rules" />
        )
      }
    >
      <ErrorMessage error={rule.error} prefix="Could not read the binding rule" polite />
      {data === undefined ? rule.loading ? <Loading what="the binding rule" /> : null : (
        <Fields
          rows={[
            ['ID', <code>{data.ID}</code>],
            ['Description', data.Description ?? ''],
            ['Auth method', <Link href={path('/auth-methods', data.AuthMethod)}>{data.AuthMethod}</Link>],
            ['Selector', data.Selector ? <code>{data.Selector}</code> : 'matches every identity'],
            ['Bind type', data.BindType],
            ['Bind name', <code>{data.BindName}</code>],
            ['Bind variables', Object.entries(data.BindVars ?? {}).map(([key, value]) => `${key}=${value}`).join(', ')],
            ['Indexes', `created at ${data.CreateIndex}, modified at ${data.ModifyIndex}`],
          ]}
        />
      )}
    </Page>
  )
}

export function BindingRuleNew(): JSX.Element {
  return (
    <Page title="New binding rule">
      <BindingRuleForm rule={undefined} />
    </Page>
  )
}

export function BindingRuleEdit({ params }: PageProps): JSX.Element {
  const rule = useLive<BindingRule>(path('/v1/acl/binding-rule', params.id!), {}, { live: false })
  return (
    <Page title="Edit binding rule">
      <ErrorMessage error={rule.error} prefix="Could not read the binding rule" polite />
      {rule.data === undefined ? rule.loading ? <Loading what="the binding rule" /> : null : <BindingRuleForm rule={rule.data} />}
    </Page>
  )
}

function parseVariables(text: string): Record<string, string> {
  const variables: Record<string, string> = {}
  text.split('\n').forEach((line, i) => {
    const trimmed = line.trim()
    if (trimmed === '') return
    const equals = trimmed.indexOf('=')
    if (equals < 1) throw new Error(`line ${i + 1}: write name=value, as "name=\${value.name}"`)
    variables[trimmed.slice(0, equals).trim()] = trimmed.slice(equals + 1).trim()
  })
  return variables
}

function BindingRuleForm({ rule }: { rule: BindingRule | undefined }): JSX.Element {
  const canWrite = useAclWrite()
  const methods = useLive<AuthMethod[]>(rule === undefined ? '/v1/acl/auth-methods' : null, {}, { live: false })
  const [method, setMethod] = useState(rule?.AuthMethod ?? currentSearch().get('authmethod') ?? '')
  const [description, setDescription] = useState(rule?.Description ?? '')
  const [selector, setSelector] = useState(rule?.Selector ?? '')
  const [bindType, setBindType] = useState(rule?.BindType ?? 'service')
  const [bindName, setBindName] = useState(rule?.BindName ?? '')
  const [bindVars, setBindVars] = useState(
    Object.entries(rule?.BindVars ?? {})
      .map(([key, value]) => `${key}=${value}`)
      .join('\n'),
  )
  const [varsError, setVarsError] = useState<string | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [busy, setBusy] = useState(false)
  const choices = (methods.data ?? []).map((item) => item.Name)
  const chosen = method !== '' ? method : (choices[0] ?? '')
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault()
    let variables: Record<string, string>
    try {
      variables = parseVariables(bindVars)
      setVarsError(undefined)
    } catch (caught) {
      setVarsError(caught instanceof Error ? caught.message : String(caught))
      return
    }
    const body = {
      AuthMethod: chosen,
      Description: description,
      Selector: selector,
      BindType: bindType,
      BindName: bindName.trim(),
      ...(Object.keys(variables).length > 0 ? { BindVars: variables } : {}),
    }
    setBusy(true)
    setError(undefined)
    try {
      const answer = await request<BindingRule>('PUT', rule === undefined ? '/v1/acl/binding-rule' : path('/v1/acl/binding-rule', rule.ID), { body })
      navigate(path('/binding-rules', answer.body.ID))
    } catch (caught) {
      setError(caught)
      setBusy(false)
    }
  }
  return (
    <form onSubmit={(event) => void submit(event)} aria-label={rule === undefined ? 'New binding rule' : 'Edit binding rule'}>
      {rule === undefined ? (
        choices.length === 0 && !methods.loading ? (
          <p class="empty">
            There is no auth method to bind to yet: <Link href="/auth-methods/+new">create one</Link> first.
          </p>
        ) : (
          <Select label="Auth method" value={chosen} onValue={setMethod} options={[...new Set([...choices, ...(method === '' ? [] : [method])])].map((name): [string, string] => [name, name])} hint="Fixed once created." />
        )
      ) : (
        <p class="hint">Auth method {rule.AuthMethod} (fixed once created).</p>
      )}
      <TextField label="Description" value={description} onValue={setDescription} />
      <TextField label="Selector" value={selector} onValue={setSelector} hint='An expression over the identity, as value.namespace == "default"; empty matches every identity.' />
      <Select label="Bind type" value={bindType} onValue={setBindType} options={BIND_TYPES} />
      <TextField label="Bind name" value={bindName} onValue={setBindName} required hint="May use ${...} to interpolate the identity's values." />
      <TextArea label="Bind variables" rows={3} value={bindVars} onValue={setBindVars} hint="For templated-policy: one name=value per line." error={varsError} />
      <div class="actions">
        <GuardedButton type="submit" kind="primary" verdict={canWrite} busy={busy}>
          {rule === undefined ? 'Create' : 'Save'}
        </GuardedButton>
        <Link href={rule === undefined ? '/binding-rules' : path('/binding-rules', rule.ID)}>Cancel</Link>
      </div>
      <ErrorMessage error={error} prefix={rule === undefined ? 'Not created' : 'Not saved'} />
    </form>
  )
}
