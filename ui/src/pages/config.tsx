/**
 * Config entries: the kinds, each kind's entries (live, with the agent's `filter` expression), and an entry's editor:
 * the entry as JSON, saved with `cas` set to the ModifyIndex it was loaded at, so that two editors cannot overwrite
 * each other silently. A save or delete that lost such a race says so and offers to reload the entry.
 */
import type { JSX } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { ApiError, request } from '../api.js'
import { ConfirmDelete, ErrorMessage, Fields, GuardedButton, GuardedLink, Loading, Notice, Page, Table, TextArea, TextField } from '../components.js'
import { useLive } from '../live.js'
import { useAllowed, type Check, type Verdict } from '../permissions.js'
import { Link, navigate, path } from '../router.js'
import type { PageProps } from '../routes.js'
import type { ConfigEntry } from '../types.js'

/** The sixteen kinds of the contract, with what each is for. */
const KINDS: Array<[kind: string, about: string]> = [
  ['service-defaults', 'defaults for one service (protocol, …)'],
  ['proxy-defaults', 'defaults for every proxy (one entry, global)'],
  ['mesh', 'mesh-wide settings (one entry, mesh)'],
  ['service-intentions', 'which services may call a service'],
  ['service-resolver', 'subsets and failover of a service'],
  ['service-router', 'L7 routes of a service'],
  ['service-splitter', 'traffic split between subsets'],
  ['exported-services', 'services exported to other partitions or peers'],
  ['ingress-gateway', 'listeners of an ingress gateway'],
  ['terminating-gateway', 'services behind a terminating gateway'],
  ['api-gateway', 'listeners of an API gateway'],
  ['bound-api-gateway', "an API gateway's bound routes (written by the agent only)"],
  ['http-route', 'HTTP routes of an API gateway'],
  ['tcp-route', 'TCP routes of an API gateway'],
  ['inline-certificate', 'a certificate given inline'],
  ['file-system-certificate', 'a certificate read from files'],
]

const MESH_KINDS = new Set(['api-gateway', 'exported-services', 'file-system-certificate', 'http-route', 'ingress-gateway', 'inline-certificate', 'mesh', 'proxy-defaults', 'tcp-route', 'terminating-gateway'])
const SERVICE_KINDS = new Set(['service-defaults', 'service-resolver', 'service-router', 'service-splitter'])

/** What writing an entry of `kind` named `name` needs (the contract's table per kind), as alternatives. */
function writeChecks(kind: string, name: string): Check[] {
  if (MESH_KINDS.has(kind))
    return [
      { Resource: 'mesh', Access: 'write' },
      { Resource: 'operator', Access: 'write' },
    ]
  if (SERVICE_KINDS.has(kind)) return [{ Resource: 'service', Access: 'write', Segment: name }]
  if (kind === 'service-intentions') return [{ Resource: 'intentions', Access: 'write', Segment: name }]
  return []
}

function useWriteVerdict(kind: string, name: string): Verdict {
  const checks = writeChecks(kind, name)
  const [verdict] = useAllowed(checks.length === 0 ? [] : [checks])
  if (kind === 'bound-api-gateway') return { allowed: false, reason: 'Entries of this kind are written by the agent, never through the API.' }
  return verdict ?? { allowed: undefined, reason: '' }
}

function defaultName(kind: string): string {
  return kind === 'proxy-defaults' ? 'global' : kind === 'mesh' ? 'mesh' : ''
}

/** Where the editor for a new entry is: '+' is in no entry's name, so this never shadows one. */
const NEW = '+new'

export function ConfigKinds(): JSX.Element {
  return (
    <Page title="Config">
      <p>Central configuration entries, by kind. Each kind needs its own permission to read and write (service, mesh, operator or intentions).</p>
      <ul class="kinds">
        {KINDS.map(([kind, about]) => (
          <li key={kind}>
            <Link href={path('/config', kind)}>{kind}</Link> <span class="hint">{about}</span>
          </li>
        ))}
      </ul>
    </Page>
  )
}

export function ConfigList({ params }: PageProps): JSX.Element {
  const kind = params.kind!
  const [draft, setDraft] = useState('')
  const [filter, setFilter] = useState('')
  const entries = useLive<ConfigEntry[]>(path('/v1/config', kind), filter === '' ? {} : { filter })
  const verdict = useWriteVerdict(kind, '')
  const hidden = entries.headers?.get('X-Service-Results-Filtered-By-ACLs') === 'true'
  return (
    <Page title={`Config: ${kind}`} actions={kind === 'bound-api-gateway' ? undefined : <GuardedLink verdict={MESH_KINDS.has(kind) ? verdict : undefined} href={path('/config', kind, NEW)}>New entry</GuardedLink>}>
      <p>
        <Link href="/config">All kinds</Link>
      </p>
      <form
        class="toolbar"
        role="search"
        aria-label="Filter entries"
        onSubmit={(event) => {
          event.preventDefault()
          setFilter(draft.trim())
        }}
      >
        <TextField label="Filter" value={draft} onValue={setDraft} hint='An expression over the entries, as Protocol == "http" or Name matches "^web". Empty: all.' />
        <button type="submit">Apply filter</button>
      </form>
      <ErrorMessage error={entries.error} prefix={filter === '' ? 'Could not list the entries' : 'Could not filter the entries'} polite />
      {hidden ? <p class="hint">Some entries are left out: your token may not read them.</p> : null}
      {entries.data === undefined ? (
        entries.loading ? <Loading what="entries" /> : null
      ) : (
        <Table
          caption={filter === '' ? `Entries of ${kind}` : `Entries of ${kind} matching the filter`}
          rows={entries.data}
          rowKey={(entry) => entry.Name}
          empty={filter === '' ? `There are no ${kind} entries.` : 'No entry matches the filter.'}
          columns={[
            ['Name', (entry) => <Link href={path('/config', kind, entry.Name)}>{entry.Name}</Link>],
            ...(kind === 'service-defaults' || kind === 'proxy-defaults' ? [['Protocol', (entry: ConfigEntry) => String(entry.Protocol ?? '')] as [string, (entry: ConfigEntry) => string]] : []),
            ['Modified at', (entry) => String(entry.ModifyIndex ?? '')],
          ]}
        />
      )}
    </Page>
  )
}

/** The entry as the editor shows it: the indexes are the server's, not the author's. */
function editable(entry: ConfigEntry): string {
  const { CreateIndex: _created, ModifyIndex: _modified, ...rest } = entry
  return JSON.stringify(rest, null, 2)
}

export function ConfigEntryPage({ params }: PageProps): JSX.Element {
  const kind = params.kind!
  const name = params.name!
  if (name === NEW) return <ConfigEntryNew kind={kind} />
  return <ConfigEntryEditor kind={kind} name={name} />
}

function ConfigEntryEditor({ kind, name }: { kind: string; name: string }): JSX.Element {
  const entry = useLive<ConfigEntry>(path('/v1/config', kind, name), {}, { live: false })
  const verdict = useWriteVerdict(kind, name)
  const [text, setText] = useState<string | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [conflict, setConflict] = useState<string | undefined>(undefined)
  const [notice, setNotice] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const loaded = entry.data
  // A (re)load replaces what the editor holds: the text is the entry's, at the ModifyIndex it now has.
  useEffect(() => {
    if (loaded !== undefined) setText(editable(loaded))
  }, [loaded])
  const reload = (): void => {
    setConflict(undefined)
    setError(undefined)
    setNotice(undefined)
    entry.reload()
  }
  const save = async (event: Event): Promise<void> => {
    event.preventDefault()
    if (loaded === undefined || text === undefined) return
    setNotice(undefined)
    setConflict(undefined)
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch (caught) {
      setError(new Error(`The entry is not JSON: ${caught instanceof Error ? caught.message : String(caught)}`))
      return
    }
    const object = body as Record<string, unknown>
    if (typeof body !== 'object' || body === null || Array.isArray(body) || object.Kind !== kind || object.Name !== name) {
      setError(new Error(`Keep "Kind": "${kind}" and "Name": "${name}": this page edits that entry (to write another, use New entry).`))
      return
    }
    setBusy(true)
    setError(undefined)
    try {
      const answer = await request<boolean>('PUT', '/v1/config', { query: { cas: loaded.ModifyIndex ?? 0 }, body })
      if (answer.body === true) {
        setNotice('Saved.')
        entry.reload()
      } else {
        setConflict(`Not saved: the entry changed since you loaded it (at index ${loaded.ModifyIndex ?? 0}); someone else saved it in between. Your text is kept here; reload to see theirs.`)
      }
    } catch (caught) {
      setError(caught)
    }
    setBusy(false)
  }
  const remove = async (): Promise<void> => {
    if (loaded === undefined) return
    const answer = await request<boolean>('DELETE', path('/v1/config', kind, name), { query: { cas: loaded.ModifyIndex ?? 0 } })
    if (answer.body !== true) {
      setConflict('Not deleted: the entry changed since you loaded it; someone else saved it in between. Reload to see it before deleting.')
      return
    }
    navigate(path('/config', kind))
  }
  return (
    <Page title={`Config: ${kind} ${name}`} actions={loaded === undefined ? undefined : <ConfirmDelete what={`the ${kind} entry ${name}`} verdict={verdict} onConfirm={remove} />}>
      <p>
        <Link href={path('/config', kind)}>All {kind} entries</Link>
      </p>
      <ErrorMessage error={entry.error} prefix="Could not read the entry" polite />
      {loaded === undefined || text === undefined ? (
        entry.loading ? <Loading what="the entry" /> : null
      ) : (
        <>
          <Fields
            rows={[
              ['Kind', kind],
              ['Name', name],
              ['Indexes', `created at ${loaded.CreateIndex ?? ''}, modified at ${loaded.ModifyIndex ?? ''}`],
            ]}
          />
          <form onSubmit={(event) => void save(event)} aria-label="Edit entry">
            <TextArea label="Entry (JSON)" rows={16} value={text} onValue={setText} hint={`Saved only if the entry is still as loaded (cas=${loaded.ModifyIndex ?? 0}).`} />
            <div class="actions">
              <GuardedButton type="submit" kind="primary" verdict={verdict} busy={busy}>
                Save
              </GuardedButton>
              <button type="button" onClick={reload}>
                Reload
              </button>
            </div>
            {conflict === undefined ? null : (
              <div class="error" role="alert">
                <span aria-hidden="true">✖ </span>
                {conflict}{' '}
                <button type="button" onClick={reload}>
                  Reload the entry
                </button>
              </div>
            )}
            <ErrorMessage error={error} prefix="Not saved" />
            <Notice text={notice} />
          </form>
        </>
      )}
    </Page>
  )
}

function ConfigEntryNew({ kind }: { kind: string }): JSX.Element {
  const verdict = useWriteVerdict(kind, '')
  const [text, setText] = useState(JSON.stringify({ Kind: kind, Name: defaultName(kind) }, null, 2))
  const [error, setError] = useState<unknown>(undefined)
  const [exists, setExists] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const create = async (event: Event): Promise<void> => {
    event.preventDefault()
    setExists(undefined)
    let body: Record<string, unknown>
    try {
      body = JSON.parse(text) as Record<string, unknown>
    } catch (caught) {
      setError(new Error(`The entry is not JSON: ${caught instanceof Error ? caught.message : String(caught)}`))
      return
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body) || body.Kind !== kind) {
      setError(new Error(`The entry must be a JSON object with "Kind": "${kind}".`))
      return
    }
    setBusy(true)
    setError(undefined)
    try {
      // cas=0: written only if no entry has the name, so a create never overwrites.
      const answer = await request<boolean>('PUT', '/v1/config', { query: { cas: 0 }, body })
      if (answer.body === true) {
        navigate(path('/config', kind, String(body.Name)))
        return
      }
      setExists(String(body.Name))
    } catch (caught) {
      setError(caught instanceof ApiError ? caught : new Error(String(caught)))
    }
    setBusy(false)
  }
  return (
    <Page title={`New ${kind} entry`}>
      <form onSubmit={(event) => void create(event)} aria-label="New entry">
        <TextArea label="Entry (JSON)" rows={16} value={text} onValue={setText} hint="Kind and Name, and the kind's own fields." />
        <div class="actions">
          <GuardedButton type="submit" kind="primary" verdict={SERVICE_KINDS.has(kind) || kind === 'service-intentions' ? undefined : verdict} busy={busy}>
            Create
          </GuardedButton>
          <Link href={path('/config', kind)}>Cancel</Link>
        </div>
        {exists === undefined ? null : (
          <p class="error" role="alert">
            <span aria-hidden="true">✖ </span>
            Not created: a {kind} entry named {exists} exists already. <Link href={path('/config', kind, exists)}>Open it</Link> to edit it.
          </p>
        )}
        <ErrorMessage error={error} prefix="Not created" />
      </form>
    </Page>
  )
}
