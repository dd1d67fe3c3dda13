/**
 * Client-side routing under /ui/: the agent serves index.html for every path there (src/http/routes/ui.ts), and this
 * maps the path to a page. Paths inside the app are written without the /ui prefix ('/tokens/…').
 */
import type { ComponentChildren, JSX } from 'preact'
import { useEffect, useState } from 'preact/hooks'

export const BASE = '/ui'

const listeners = new Set<() => void>()

/** The path inside the app, '/' for the root; percent-escapes left as they are (params() decodes each part). */
export function currentPath(): string {
  const path = location.pathname.startsWith(`${BASE}/`) ? location.pathname.slice(BASE.length) : '/'
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path
}

export function currentSearch(): URLSearchParams {
  return new URLSearchParams(location.search)
}

export function navigate(path: string, options: { replace?: boolean } = {}): void {
  const target = BASE + path
  if (options.replace === true) history.replaceState(null, '', target)
  else history.pushState(null, '', target)
  for (const listener of [...listeners]) listener()
}

addEventListener('popstate', () => {
  for (const listener of [...listeners]) listener()
})

/** Re-renders the caller when the path changes; returns the path and its query. */
export function useLocation(): { path: string; search: URLSearchParams } {
  const [, setTick] = useState(0)
  useEffect(() => {
    const listener = (): void => setTick((tick) => tick + 1)
    listeners.add(listener)
    return () => {
      listeners.delete(listener)
    }
  }, [])
  return { path: currentPath(), search: currentSearch() }
}

/**
 * Matches `path` against a pattern like '/tokens/:id/edit'; the parameters come back decoded. A parameter may hold
 * a slash when the path escapes it (%2F), as templated policy names do ('builtin/service').
 */
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const want = pattern.split('/')
  const have = path.split('/')
  if (want.length !== have.length) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < want.length; i++) {
    const part = want[i]!
    const value = have[i]!
    if (part.startsWith(':')) {
      if (value === '') return undefined
      try {
        params[part.slice(1)] = decodeURIComponent(value)
      } catch {
        return undefined
      }
    } else if (part !== value) return undefined
  }
  return params
}

/** Builds an app path from parts, escaping each ('/policies/' + id): the inverse of match(). */
export function path(...parts: string[]): string {
  return parts.map((part, i) => (i === 0 ? part : encodeURIComponent(part))).join('/')
}

interface LinkProps {
  href: string
  children?: ComponentChildren
  class?: string
  'aria-current'?: 'page' | undefined
  'aria-label'?: string
  'data-verdict'?: string | undefined
}

/** A real link (it can be opened in a new tab, copied, read by a screen reader) that navigates without a reload. */
export function Link({ href, children, ...rest }: LinkProps): JSX.Element {
  const onClick = (event: MouseEvent): void => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return
    event.preventDefault()
    navigate(href)
  }
  return (
    <a {...rest} href={BASE + href} onClick={onClick}>
      {children}
    </a>
  )
}
