/**
 * The building blocks every page uses, written so that each control has a label (a screen reader names it, a browser
 * test finds it with getByLabel or getByRole), buttons are <button>s, and no state is told by colour alone.
 */
import type { ComponentChildren, JSX, RefObject } from 'preact'
import { useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks'
import { ApiError, errorText, request } from './api.js'
import type { Loaded } from './live.js'
import type { Verdict } from './permissions.js'
import { Link, navigate } from './router.js'

/** A page: its heading takes the focus when it appears, so a screen reader announces where a navigation went. */
export function Page({ title, children, actions }: { title: string; children?: ComponentChildren; actions?: ComponentChildren }): JSX.Element {
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => {
    document.title = `${title} · warden`
  }, [title])
  // On arrival only (a route change mounts the page anew): a title that fills in once the record loads must not
  // take the focus from where the user has moved it since.
  useEffect(() => {
    heading.current?.focus({ preventScroll: true })
  }, [])
  return (
    <section class="page" aria-labelledby="page-title">
      <header class="page-header">
        <h1 id="page-title" tabIndex={-1} ref={heading}>
          {title}
        </h1>
        {actions === undefined ? null : <div class="page-actions">{actions}</div>}
      </header>
      {children}
    </section>
  )
}

/**
 * An error, announced: as an alert when it answers what the user just did (a save refused), politely (`polite`, a
 * status) when it is why a page could not load, which the page's heading has just been announced for.
 */
export function ErrorMessage({ error, prefix, polite }: { error: unknown; prefix?: string; polite?: boolean }): JSX.Element | null {
  if (error === undefined || error === null) return null
  const code = error instanceof ApiError && error.code !== 'network' ? ` (${error.code})` : ''
  return (
    <p class="error" role={polite === true ? 'status' : 'alert'}>
      <span class="error-mark" aria-hidden="true">
        ✖{' '}
      </span>
      {prefix === undefined ? 'Error: ' : `${prefix}: `}
      {errorText(error)}
      {code}
    </p>
  )
}

/** A polite announcement (saved, copied): read out by screen readers without moving the focus. */
export function Notice({ text }: { text: string | undefined }): JSX.Element {
  return (
    <span class="notice" role="status">
      {text ?? ''}
    </span>
  )
}

export function Loading({ what }: { what: string }): JSX.Element {
  return <p class="loading">Loading {what}…</p>
}

interface FieldProps {
  label: string
  hint?: string
  /** An error about this field: shown under it and tied to it for screen readers. */
  error?: string | undefined
}

function Described({ id, hint, error }: { id: string; hint: string | undefined; error: string | undefined }): JSX.Element {
  return (
    <>
      {hint === undefined ? null : (
        <span class="hint" id={`${id}-hint`}>
          {hint}
        </span>
      )}
      {error === undefined ? null : (
        <span class="field-error" id={`${id}-error`}>
          <span aria-hidden="true">✖ </span>
          {error}
        </span>
      )}
    </>
  )
}

function describedBy(id: string, hint: string | undefined, error: string | undefined): string | undefined {
  const ids = [hint === undefined ? '' : `${id}-hint`, error === undefined ? '' : `${id}-error`].filter((value) => value !== '')
  return ids.length === 0 ? undefined : ids.join(' ')
}

export function TextField({
  label,
  hint,
  error,
  value,
  onValue,
  type = 'text',
  required,
  disabled,
  autoComplete,
  placeholder,
  inputRef,
}: FieldProps & {
  value: string
  onValue: (value: string) => void
  type?: 'text' | 'password' | 'search'
  required?: boolean
  disabled?: boolean
  autoComplete?: string
  placeholder?: string
  inputRef?: RefObject<HTMLInputElement | null>
}): JSX.Element {
  const id = useId()
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input
        id={id}
        ref={inputRef}
        // Preact types each input type apart (a password input may take no role); all three take what is set here.
        type={type as 'text'}
        value={value}
        required={required}
        disabled={disabled}
        autoComplete={autoComplete ?? 'off'}
        placeholder={placeholder}
        spellcheck={false}
        aria-invalid={error === undefined ? undefined : 'true'}
        aria-describedby={describedBy(id, hint, error)}
        onInput={(event) => onValue(event.currentTarget.value)}
      />
      <Described id={id} hint={hint} error={error} />
    </div>
  )
}

export function TextArea({
  label,
  hint,
  error,
  value,
  onValue,
  rows = 6,
  disabled,
  areaRef,
  children,
}: FieldProps & { value: string; onValue: (value: string) => void; rows?: number; disabled?: boolean; areaRef?: RefObject<HTMLTextAreaElement | null>; children?: ComponentChildren }): JSX.Element {
  const id = useId()
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <textarea
        id={id}
        ref={areaRef}
        rows={rows}
        value={value}
        disabled={disabled}
        spellcheck={false}
        aria-invalid={error === undefined ? undefined : 'true'}
        aria-describedby={describedBy(id, hint, error)}
        onInput={(event) => onValue(event.currentTarget.value)}
      />
      <Described id={id} hint={hint} error={error} />
      {children}
    </div>
  )
}

export function Select({
  label,
  hint,
  value,
  onValue,
  options,
  disabled,
}: FieldProps & { value: string; onValue: (value: string) => void; options: Array<[value: string, text: string]>; disabled?: boolean }): JSX.Element {
  const id = useId()
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select id={id} value={value} disabled={disabled} aria-describedby={describedBy(id, hint, undefined)} onChange={(event) => onValue(event.currentTarget.value)}>
        {options.map(([optionValue, text]) => (
          <option key={optionValue} value={optionValue}>
            {text}
          </option>
        ))}
      </select>
      <Described id={id} hint={hint} error={undefined} />
    </div>
  )
}

export function Checkbox({ label, hint, checked, onChecked, disabled }: FieldProps & { checked: boolean; onChecked: (checked: boolean) => void; disabled?: boolean }): JSX.Element {
  const id = useId()
  return (
    <div class="field checkbox">
      <input id={id} type="checkbox" checked={checked} disabled={disabled} aria-describedby={describedBy(id, hint, undefined)} onChange={(event) => onChecked(event.currentTarget.checked)} />
      <label for={id}>{label}</label>
      <Described id={id} hint={hint} error={undefined} />
    </div>
  )
}

/** A set of checkboxes (the policies or roles a token links), in a fieldset whose legend names the set. */
export function CheckboxGroup({ legend, options, selected, onChange, empty }: { legend: string; options: string[]; selected: string[]; onChange: (selected: string[]) => void; empty: string }): JSX.Element {
  return (
    <fieldset class="field group">
      <legend>{legend}</legend>
      {options.length === 0 ? <p class="hint">{empty}</p> : null}
      {options.map((option) => (
        <Checkbox
          key={option}
          label={option}
          checked={selected.includes(option)}
          onChecked={(checked) => onChange(checked ? [...selected, option] : selected.filter((name) => name !== option))}
        />
      ))}
    </fieldset>
  )
}

/** The verdict as a data attribute, so a test (or a stylesheet) can tell "allowed" from "not asked yet". */
function verdictState(verdict: Verdict | undefined): 'allowed' | 'refused' | 'unknown' | undefined {
  if (verdict === undefined) return undefined
  return verdict.allowed === undefined ? 'unknown' : verdict.allowed ? 'allowed' : 'refused'
}

/**
 * A button the token may not be allowed to use: when the agent says the token lacks the permission, it is marked
 * aria-disabled with the reason next to it and tied to it (aria-describedby). Not the native `disabled`: that drops
 * the button from the Tab order, and with it the reason, for keyboard and screen-reader users. A click on it (Enter,
 * Space, or a form's implicit submission, which all arrive as clicks) does nothing.
 */
export function GuardedButton({
  verdict,
  children,
  onClick,
  type = 'button',
  busy,
  kind,
  buttonRef,
}: {
  verdict?: Verdict | undefined
  children: ComponentChildren
  onClick?: () => void
  type?: 'button' | 'submit'
  busy?: boolean
  kind?: 'danger' | 'primary'
  buttonRef?: RefObject<HTMLButtonElement | null>
}): JSX.Element {
  const id = useId()
  const refused = verdict?.allowed === false
  return (
    <span class="guarded">
      <button
        type={type}
        class={kind}
        ref={buttonRef}
        disabled={busy === true}
        aria-disabled={refused ? 'true' : undefined}
        aria-describedby={refused ? `${id}-reason` : undefined}
        data-verdict={verdictState(verdict)}
        onClick={(event) => {
          if (refused) event.preventDefault()
          else onClick?.()
        }}
      >
        {children}
      </button>
      {refused ? (
        <span class="reason" id={`${id}-reason`}>
          {verdict.reason}
        </span>
      ) : null}
    </span>
  )
}

/** A link styled as a button (it navigates); when the token may not use what it leads to, a refused GuardedButton. */
export function GuardedLink({ verdict, href, children }: { verdict?: Verdict | undefined; href: string; children: ComponentChildren }): JSX.Element {
  if (verdict?.allowed === false) return <GuardedButton verdict={verdict}>{children}</GuardedButton>
  return (
    <Link href={href} class="button" data-verdict={verdictState(verdict)}>
      {children}
    </Link>
  )
}

/**
 * Delete, then a confirmation that names what goes ("Confirm delete" or "Cancel"), so one stray click deletes
 * nothing. The confirmation takes the focus when it opens, its group described by the question so that a screen
 * reader reads what is deleted; Cancel gives the focus back to Delete.
 */
export function ConfirmDelete({ what, verdict, onConfirm }: { what: string; verdict?: Verdict | undefined; onConfirm: () => Promise<void> }): JSX.Element {
  const id = useId()
  const [asking, setAsking] = useState(false)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const confirm = useRef<HTMLButtonElement>(null)
  const remove = useRef<HTMLButtonElement>(null)
  // Whether the confirmation has been open: its closing returns the focus, the first render does not take it.
  const opened = useRef(false)
  // In the same task as the change (not after paint), so the focus never rests on the unmounted button's <body>.
  useLayoutEffect(() => {
    if (asking) {
      opened.current = true
      confirm.current?.focus()
    } else if (opened.current) remove.current?.focus()
  }, [asking])
  if (!asking) {
    return (
      <GuardedButton verdict={verdict} kind="danger" buttonRef={remove} onClick={() => setAsking(true)}>
        Delete
      </GuardedButton>
    )
  }
  const run = async (): Promise<void> => {
    setBusy(true)
    setError(undefined)
    try {
      await onConfirm()
    } catch (failure) {
      setError(failure)
      setBusy(false)
    }
  }
  return (
    <div class="confirm" role="group" aria-label="Confirm delete" aria-describedby={`${id}-question`}>
      <p id={`${id}-question`}>Delete {what}? This cannot be undone.</p>
      <button type="button" class="danger" ref={confirm} disabled={busy} onClick={() => void run()}>
        Confirm delete
      </button>{' '}
      <button type="button" disabled={busy} onClick={() => setAsking(false)}>
        Cancel
      </button>
      <ErrorMessage error={error} prefix="Not deleted" />
    </div>
  )
}

/** A record's fields as a description list; an empty value shows as "none", so nothing is told by absence alone. */
export function Fields({ rows }: { rows: Array<[label: string, value: ComponentChildren]> }): JSX.Element {
  return (
    <dl class="fields">
      {rows.map(([label, value]) => (
        <div key={label} class="row">
          <dt>{label}</dt>
          <dd>{isEmpty(value) ? <span class="none">none</span> : value}</dd>
        </div>
      ))}
    </dl>
  )
}

/** An empty value, or a LinkList of no links (checked before rendering, as Fields cannot see what a component renders). */
function isEmpty(value: ComponentChildren): boolean {
  if (value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0)) return true
  const element = value as { type?: unknown; props?: { items?: unknown[] } }
  if (typeof value === 'object' && element.type === LinkList) return element.props?.items?.length === 0
  return false
}

/** A comma-separated list of links; '' for none, so that Fields shows "none". */
export function LinkList({ items }: { items: Array<{ key: string; href: string; text: string }> }): JSX.Element | '' {
  if (items.length === 0) return ''
  return (
    <>
      {items.map((item, i) => (
        <span key={item.key}>
          {i > 0 ? ', ' : ''}
          <Link href={item.href}>{item.text}</Link>
        </span>
      ))}
    </>
  )
}

/**
 * A record page's section listing the records that link to it (a policy's roles and tokens, a role's tokens, an auth
 * method's binding rules): its heading, the error if the list could not be read, a line when there are none, else a
 * link to each.
 */
export function LinkedRecords<T>({ title, list, noun, empty, link }: { title: string; list: Loaded<T[]>; noun: string; empty: string; link: (item: T) => { key: string; href: string; text: ComponentChildren } }): JSX.Element {
  return (
    <>
      <h2>{title}</h2>
      <ErrorMessage error={list.error} prefix={`Could not list the ${noun}`} polite />
      {list.data === undefined ? null : list.data.length === 0 ? <p class="empty">{empty}</p> : (
        <ul>
          {list.data.map(link).map((item) => (
            <li key={item.key}>
              <Link href={item.href}>{item.text}</Link>
            </li>
          ))}
        </ul>
      )}
    </>
  )
}

/** A table of records with a caption naming it (and how many rows are shown), or a line saying there are none. */
export function Table<T>({ caption, rows, columns, rowKey, empty }: { caption: string; rows: T[]; columns: Array<[header: string, cell: (row: T) => ComponentChildren]>; rowKey: (row: T) => string; empty: string }): JSX.Element {
  if (rows.length === 0) return <p class="empty">{empty}</p>
  return (
    <table>
      <caption>
        {caption} ({rows.length})
      </caption>
      <thead>
        <tr>
          {columns.map(([header]) => (
            <th key={header} scope="col">
              {header}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => (
          <tr key={rowKey(row)}>
            {columns.map(([header, cell]) => (
              <td key={header}>{cell(row)}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  )
}

export function formatTime(value: string | undefined): string {
  if (value === undefined || value === '') return ''
  const date = new Date(value)
  return Number.isNaN(date.getTime()) ? value : date.toLocaleString()
}

/** The first characters of a UUID, enough to tell records apart in a list (the full one is on the record's page). */
export function shortId(id: string): string {
  return id.length > 8 ? id.slice(0, 8) : id
}

/** `value`, once it has stopped changing for `ms` (so a list is not asked again on every keystroke). */
export function useDebounced<T>(value: T, ms = 300): T {
  const [settled, setSettled] = useState(value)
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms)
    return () => clearTimeout(timer)
  }, [value, ms])
  return settled
}

/**
 * The namespace a list is asked for (`?ns`): empty asks the token's own (else default), `*` every namespace. Returns
 * the field and the query to send.
 */
export function useNamespaceFilter(): { field: JSX.Element; query: { ns?: string }; all: boolean } {
  const [namespace, setNamespace] = useState('')
  const settled = useDebounced(namespace.trim())
  return {
    field: <TextField label="Namespace" value={namespace} onValue={setNamespace} hint="Empty: your token's namespace. * lists every namespace." />,
    query: settled === '' ? {} : { ns: settled },
    all: settled === '*',
  }
}

/**
 * A record page's actions: Edit (a link to `edit`), anything between (`children`: a token's Clone), and Delete with its
 * confirmation, which sends DELETE `remove` and goes back to `list`; all refused alike by `verdict`.
 */
export function RecordActions({ verdict, edit, what, remove, list, children }: { verdict?: Verdict | undefined; edit: string; what: string; remove: string; list: string; children?: ComponentChildren }): JSX.Element {
  return (
    <>
      <GuardedLink verdict={verdict} href={edit}>
        Edit
      </GuardedLink>
      {children}
      <ConfirmDelete
        what={what}
        verdict={verdict}
        onConfirm={async () => {
          await request('DELETE', remove)
          navigate(list)
        }}
      />
    </>
  )
}
