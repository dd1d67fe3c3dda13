/**
 * Templated policies: the built-in templates (list and read), and a preview form that renders one with its variable
 * into the synthetic policy a token linking it would get.
 */
import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { request } from '../api.js'
import { ErrorMessage, Fields, Loading, Page, Table, TextField } from '../components.js'
import { useLive } from '../live.js'
import { Link, path } from '../router.js'
import type { PageProps } from '../routes.js'
import type { Policy, TemplatedPolicy } from '../types.js'

/** A template name keeps its slash in the API's path ('builtin/service'), each part escaped. */
function apiPath(prefix: string, name: string): string {
  return `${prefix}/${name.split('/').map(encodeURIComponent).join('/')}`
}

/** The variables a template's JSON schema requires, by name ('name' for the built-ins that take one). */
function variablesOf(template: TemplatedPolicy): string[] {
  if (template.Schema === '') return []
  try {
    const schema = JSON.parse(template.Schema) as { properties?: Record<string, unknown> }
    return Object.keys(schema.properties ?? {})
  } catch {
    return ['(schema unreadable)']
  }
}

export function TemplatedPolicyList(): JSX.Element {
  // Not a blocking endpoint: the built-in templates do not change while the agent runs.
  const templates = useLive<Record<string, TemplatedPolicy>>('/v1/acl/templated-policies', {}, { live: false })
  const rows = Object.values(templates.data ?? {}).sort((a, b) => (a.TemplateName < b.TemplateName ? -1 : 1))
  return (
    <Page title="Templated Policies">
      <ErrorMessage error={templates.error} prefix="Could not list the templated policies" polite />
      {templates.data === undefined ? (
        templates.loading ? <Loading what="templated policies" /> : null
      ) : (
        <Table
          caption="Templated policies"
          rows={rows}
          rowKey={(template) => template.TemplateName}
          empty="There are no templated policies."
          columns={[
            ['Name', (template) => <Link href={path('/templated-policies', template.TemplateName)}>{template.TemplateName}</Link>],
            ['Variables', (template) => variablesOf(template).join(', ') || <span class="none">none</span>],
          ]}
        />
      )}
    </Page>
  )
}

export function TemplatedPolicyPage({ params }: PageProps): JSX.Element {
  const name = params.name!
  const template = useLive<TemplatedPolicy>(apiPath('/v1/acl/templated-policy/name', name), {}, { live: false })
  const data = template.data
  return (
    <Page title={`Templated policy ${name}`}>
      <ErrorMessage error={template.error} prefix="Could not read the templated policy" polite />
      {data === undefined ? template.loading ? <Loading what="the templated policy" /> : null : (
        <>
          <Fields
            rows={[
              ['Name', data.TemplateName],
              ['Variables', variablesOf(data).join(', ')],
            ]}
          />
          <h2>Template</h2>
          <pre aria-label="Template">{data.Template}</pre>
          {data.Schema === '' ? null : (
            <>
              <h2>Schema</h2>
              <pre aria-label="Schema">{formatJson(data.Schema)}</pre>
            </>
          )}
          <Preview template={data} />
        </>
      )}
    </Page>
  )
}

function formatJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2)
  } catch {
    return text
  }
}

function Preview({ template }: { template: TemplatedPolicy }): JSX.Element {
  const takesName = variablesOf(template).includes('name')
  const [name, setName] = useState('')
  const [result, setResult] = useState<Policy | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [busy, setBusy] = useState(false)
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      const answer = await request<Policy>('POST', apiPath('/v1/acl/templated-policy/preview', template.TemplateName), { body: takesName ? { Name: name } : {} })
      setResult(answer.body)
    } catch (caught) {
      setResult(undefined)
      setError(caught)
    }
    setBusy(false)
  }
  return (
    <section aria-labelledby="preview-heading">
      <h2 id="preview-heading">Preview</h2>
      <form onSubmit={(event) => void submit(event)} aria-label="Preview">
        {takesName ? <TextField label="Name" value={name} onValue={setName} hint="The template's variable name, as a service or node name." /> : <p class="hint">This template takes no variables.</p>}
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            Preview
          </button>
        </div>
        <ErrorMessage error={error} prefix="No preview" />
      </form>
      {result === undefined ? null : (
        <div role="region" aria-label="Rendered policy">
          <Fields
            rows={[
              ['Name', result.Name],
              ['Description', result.Description],
            ]}
          />
          <pre aria-label="Rendered rules">{result.Rules}</pre>
        </div>
      )}
    </section>
  )
}
