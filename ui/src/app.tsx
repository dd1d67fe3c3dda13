/**
 * The shell: sign-in until there is a token, then the navigation (links named after what they list), the datacenter
 * picker when the agent knows several, who is signed in, and the page the path names.
 */
import type { ComponentType, JSX } from 'preact'
import { useEffect } from 'preact/hooks'
import { request } from './api.js'
import { Select } from './components.js'
import { useLive, useSession } from './live.js'
import { forgetPermissions } from './permissions.js'
import { Link, match, navigate, useLocation } from './router.js'
import { setDatacenter, setDatacenters, signOut } from './session.js'
import { SignIn } from './pages/sign-in.js'
import { ROUTES } from './routes.js'

const SECTIONS: Array<[text: string, href: string]> = [
  ['Tokens', '/tokens'],
  ['Policies', '/policies'],
  ['Roles', '/roles'],
  ['Auth Methods', '/auth-methods'],
  ['Binding Rules', '/binding-rules'],
  ['Templated Policies', '/templated-policies'],
  ['Config', '/config'],
  ['Cluster', '/cluster'],
]

export function App(): JSX.Element {
  const { token, reason } = useSession()
  useEffect(() => {
    // No token needed (as in Consul); local: the list of this agent's own federation.
    request<string[]>('GET', '/v1/catalog/datacenters', { local: true })
      .then(({ body }) => setDatacenters(Array.isArray(body) ? body : []))
      .catch(() => setDatacenters([]))
  }, [])
  if (token === undefined) return <SignIn reason={reason} />
  return <Shell />
}

interface SelfToken {
  AccessorID: string
  Description: string
}

function Shell(): JSX.Element {
  const { path } = useLocation()
  const { datacenter, datacenters } = useSession()
  // Live on the caller's own token (never ?dc: a local token lives here): deleting or expiring it elsewhere wakes this
  // query with 403 acl_not_found, which signs the tab out with the reason (api.ts).
  const self = useLive<SelfToken>('/v1/acl/token/self', {}, { local: true })
  useEffect(() => {
    if (path === '/') navigate('/tokens', { replace: true })
  }, [path])
  const section = SECTIONS.find(([, href]) => path === href || path.startsWith(`${href}/`))
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <p class="brand">warden</p>
        <nav aria-label="Main">
          <ul>
            {SECTIONS.map(([text, href]) => (
              <li key={href}>
                <Link href={href} aria-current={section?.[1] === href ? 'page' : undefined}>
                  {text}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          {datacenters.length > 1 && datacenter !== undefined ? (
            <Select label="Datacenter" value={datacenter} onValue={setDatacenter} options={datacenters.map((name, i) => [name, i === 0 ? `${name} (this agent's)` : name])} />
          ) : null}
          <p class="self">
            Signed in{self.data === undefined ? '' : ` as ${self.data.Description !== '' ? self.data.Description : self.data.AccessorID}`}
          </p>
          <button
            type="button"
            onClick={() => {
              forgetPermissions()
              signOut()
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      <main id="main">
        <Routed path={path} />
      </main>
    </>
  )
}

function Routed({ path }: { path: string }): JSX.Element | null {
  for (const [pattern, Component] of ROUTES as Array<[string, ComponentType<{ params: Record<string, string> }>]>) {
    const params = match(pattern, path)
    if (params !== undefined) return <Component key={path} params={params} />
  }
  if (path === '/') return null
  return <NotFound />
}

function NotFound(): JSX.Element {
  return (
    <section class="page">
      <h1>Not found</h1>
      <p>
        Nothing in the UI is at this address. <Link href="/tokens">Go to the tokens</Link>.
      </p>
    </section>
  )
}
