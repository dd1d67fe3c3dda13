/**
 * What a token may do in this datacenter (GET /v1/acl/token/:AccessorID/permissions): per resource, each rule the
 * merge of its policies, roles, identities and templated policies produced, with the source that decided it and
 * those it overrode, and what holds for every name no rule matches. Resources where nothing grants anything are
 * listed together on one line, so the table shows what the token can do.
 */
import type { ComponentChildren, JSX } from 'preact'
import { ErrorMessage, Loading } from '../components.js'
import { useLive } from '../live.js'
import { Link, path } from '../router.js'

interface Source {
  Type: 'policy' | 'service-identity' | 'node-identity' | 'templated-policy' | 'default-policy'
  ID?: string
  Name: string
  Datacenters?: string[]
  Datacenter?: string
  TemplateVariables?: Record<string, unknown>
  Via?: Array<{ Type: 'token' } | { Type: 'role'; ID: string; Name: string }>
}

interface Rule {
  Segment?: string
  Match?: 'exact' | 'prefix'
  Keyword: string
  Attribute?: 'intentions'
  Derived?: true
  Access: string
  Grants: string[]
  DecidedBy: Source[]
  Overridden?: Array<Source & { Access: string }>
}

interface ResourcePermissions {
  Rules: Rule[]
  Otherwise?: { Access: string; Grants: string[]; DecidedBy: Source[] }
}

interface Permissions {
  AccessorID: string
  Datacenter: string
  DefaultPolicy: string
  Management: boolean
  Sources: Array<Source & { AppliesHere: boolean }>
  Resources: Record<string, ResourcePermissions>
}

function SourceName({ source }: { source: Source }): JSX.Element {
  // How the token reaches the source: directly, through roles, or both; said only when a role is among them.
  const steps = source.Via ?? []
  const roles = steps.flatMap((step) => (step.Type === 'role' ? [step] : []))
  const via =
    roles.length === 0 ? null : (
      <>
        {' '}
        ({steps.some((step) => step.Type === 'token') ? 'directly, and ' : ''}via role{roles.length > 1 ? 's' : ''}{' '}
        {roles.map((role, i) => (
          <span key={role.ID}>
            {i > 0 ? ', ' : ''}
            <Link href={path('/roles', role.ID)}>{role.Name}</Link>
          </span>
        ))}
        )
      </>
    )
  let name: ComponentChildren
  switch (source.Type) {
    case 'policy':
      name = (
        <>
          policy {source.ID === undefined ? source.Name : <Link href={path('/policies', source.ID)}>{source.Name}</Link>}
        </>
      )
      break
    case 'service-identity':
      name = `service identity ${source.Name}`
      break
    case 'node-identity':
      name = `node identity ${source.Name}${source.Datacenter === undefined ? '' : ` (${source.Datacenter})`}`
      break
    case 'templated-policy':
      name = (
        <>
          templated policy <Link href={path('/templated-policies', source.Name)}>{source.Name}</Link>
        </>
      )
      break
    case 'default-policy':
      name = `the agent's default policy (${source.Name})`
      break
  }
  return (
    <>
      {name}
      {via}
    </>
  )
}

function Sources({ sources }: { sources: Source[] }): JSX.Element {
  return (
    <>
      {sources.map((source, i) => (
        <span key={i}>
          {i > 0 ? '; ' : ''}
          <SourceName source={source} />
        </span>
      ))}
    </>
  )
}

function scope(rule: Rule): string {
  const segment = rule.Segment ?? ''
  if (rule.Match === 'prefix') return segment === '' ? 'every name (prefix "")' : `names starting "${segment}"`
  if (rule.Match === 'exact') return `"${segment}"`
  return 'all of it'
}

function grants(list: string[]): string {
  return list.length === 0 ? 'nothing' : list.join(', ')
}

/**
 * Asked once per version of the token: `modifyIndex` is the token's ModifyIndex as the live token page above holds it,
 * so a change of its links made elsewhere asks again (the table shown until the new answer). A change to a policy
 * or role it links does not move the token's index; those show on the next visit.
 */
export function TokenPermissions({ accessorID, modifyIndex }: { accessorID: string; modifyIndex: number }): JSX.Element {
  const permissions = useLive<Permissions>(path('/v1/acl/token', accessorID, 'permissions'), {}, { live: false, version: modifyIndex })
  const data = permissions.data
  return (
    <section aria-labelledby="permissions-heading">
      <h2 id="permissions-heading">What this token may do</h2>
      <ErrorMessage error={permissions.error} prefix="Could not work out the token's permissions" polite />
      {data === undefined ? permissions.loading ? <Loading what="permissions" /> : null : <PermissionsTable data={data} />}
    </section>
  )
}

function PermissionsTable({ data }: { data: Permissions }): JSX.Element {
  const resources = Object.entries(data.Resources)
  const nothing = resources.filter(([, resource]) => resource.Rules.length === 0 && (resource.Otherwise === undefined || resource.Otherwise.Grants.length === 0)).map(([name]) => name)
  const shown = resources.filter(([name]) => !nothing.includes(name))
  const ignored = data.Sources.filter((source) => !source.AppliesHere)
  return (
    <>
      <p>
        In datacenter {data.Datacenter}, where the default policy is {data.DefaultPolicy}.
        {data.Management ? ' The token links global-management: it may do everything, whatever else it links.' : ''}
      </p>
      {ignored.length === 0 ? null : (
        <p class="hint">
          Linked but not valid in this datacenter: <Sources sources={ignored} />.
        </p>
      )}
      {shown.length === 0 ? null : (
        <table>
          <caption>Permissions by resource</caption>
          <thead>
            <tr>
              <th scope="col">Resource</th>
              <th scope="col">Applies to</th>
              <th scope="col">Level</th>
              <th scope="col">Allows</th>
              <th scope="col">Decided by</th>
              <th scope="col">Overrode</th>
            </tr>
          </thead>
          <tbody>
            {shown.flatMap(([name, resource]) => [
              ...resource.Rules.map((rule, i) => (
                <tr key={`${name}-${i}`}>
                  <th scope="row">{name}</th>
                  <td>
                    {scope(rule)} <span class="hint">({rule.Keyword}{rule.Attribute === 'intentions' ? ', intentions' : ''}{rule.Derived ? ', derived from the policy level' : ''})</span>
                  </td>
                  <td>{rule.Access}</td>
                  <td>{grants(rule.Grants)}</td>
                  <td>
                    <Sources sources={rule.DecidedBy} />
                  </td>
                  <td>
                    {(rule.Overridden ?? []).length === 0 ? (
                      <span class="none">none</span>
                    ) : (
                      (rule.Overridden ?? []).map((source, j) => (
                        <span key={j}>
                          {j > 0 ? '; ' : ''}
                          <SourceName source={source} /> ({source.Access})
                        </span>
                      ))
                    )}
                  </td>
                </tr>
              )),
              ...(resource.Otherwise === undefined
                ? []
                : [
                    <tr key={`${name}-otherwise`}>
                      <th scope="row">{name}</th>
                      <td>{resource.Rules.length === 0 ? 'all of it' : 'anything else'}</td>
                      <td>{resource.Otherwise.Access}</td>
                      <td>{grants(resource.Otherwise.Grants)}</td>
                      <td>
                        <Sources sources={resource.Otherwise.DecidedBy} />
                      </td>
                      <td>
                        <span class="none">none</span>
                      </td>
                    </tr>,
                  ]),
            ])}
          </tbody>
        </table>
      )}
      {nothing.length === 0 ? null : <p>Nothing allowed on: {nothing.join(', ')}.</p>}
    </>
  )
}
