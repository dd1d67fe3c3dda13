/**
 * The signed-in state of this tab: the token's secret (sessionStorage, so it lives as long as the tab and is never
 * shared with other tabs or written to disk by us), the datacenter picked, and why the user was last signed out.
 * The secret is only ever sent in the X-Service-Token header (api.ts), never in a URL.
 */
const TOKEN_KEY = 'warden.token'
const DATACENTER_KEY = 'warden.dc'

export interface Session {
  /** The SecretID the user signed in with; undefined when signed out. */
  token: string | undefined
  /** Why the user was signed out, shown on the sign-in page; undefined after a sign-out they asked for. */
  reason: string | undefined
  /** The datacenter every call names with `?dc`; undefined while the agent knows only its own. */
  datacenter: string | undefined
  /** What GET /v1/catalog/datacenters listed, the agent's own first. */
  datacenters: string[]
}

function read(key: string): string | undefined {
  try {
    return sessionStorage.getItem(key) ?? undefined
  } catch {
    // Storage can be disabled (privacy settings); the tab then simply forgets the token on reload.
    return undefined
  }
}

function write(key: string, value: string | undefined): void {
  try {
    if (value === undefined) sessionStorage.removeItem(key)
    else sessionStorage.setItem(key, value)
  } catch {
    // As in read(): without storage the state lives in memory only.
  }
}

let current: Session = { token: read(TOKEN_KEY), reason: undefined, datacenter: read(DATACENTER_KEY), datacenters: [] }
const listeners = new Set<() => void>()

function update(next: Partial<Session>): void {
  current = { ...current, ...next }
  for (const listener of [...listeners]) listener()
}

export function session(): Session {
  return current
}

export function subscribe(listener: () => void): () => void {
  listeners.add(listener)
  return () => listeners.delete(listener)
}

export function signIn(token: string): void {
  write(TOKEN_KEY, token)
  update({ token, reason: undefined })
}

/** Forgets the token. `reason` says why when the user did not ask for it (the token stopped working). */
export function signOut(reason?: string): void {
  write(TOKEN_KEY, undefined)
  update({ token: undefined, reason })
}

export function setDatacenters(datacenters: string[]): void {
  // A datacenter picked earlier in this tab that is no longer listed falls back to the agent's own.
  const datacenter = datacenters.length > 1 ? (current.datacenter !== undefined && datacenters.includes(current.datacenter) ? current.datacenter : datacenters[0]) : undefined
  write(DATACENTER_KEY, datacenter)
  update({ datacenters, datacenter })
}

export function setDatacenter(datacenter: string): void {
  write(DATACENTER_KEY, datacenter)
  update({ datacenter })
}
