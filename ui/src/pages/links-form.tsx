/**
 * What a token or a role links, as form fields: policies (and, for a token, roles) as checkboxes named after the
 * records there are, identities and templated policies as text, one per line (identities.ts).
 */
import type { JSX } from 'preact'
import { CheckboxGroup, TextArea } from '../components.js'
import { useLive } from '../live.js'
import type { Policy, Role } from '../types.js'

export interface LinksValue {
  policies: string[]
  roles: string[]
  serviceIdentities: string
  nodeIdentities: string
  templatedPolicies: string
}

export function LinksFields({ value, onChange, withRoles, errors }: { value: LinksValue; onChange: (value: LinksValue) => void; withRoles: boolean; errors: Partial<Record<keyof LinksValue, string>> }): JSX.Element {
  const policies = useLive<Policy[]>('/v1/acl/policies', {}, { live: false })
  const roles = useLive<Role[]>(withRoles ? '/v1/acl/roles' : null, {}, { live: false })
  // Names linked that the list lacks (another namespace, or a list the token may not read) stay choosable.
  const names = (records: Array<{ Name: string }> | undefined, chosen: string[]): string[] => [...new Set([...(records ?? []).map((record) => record.Name), ...chosen])].sort()
  return (
    <>
      <CheckboxGroup
        legend="Policies"
        options={names(policies.data, value.policies)}
        selected={value.policies}
        onChange={(selected) => onChange({ ...value, policies: selected })}
        empty={policies.loading ? 'Loading policies…' : 'There are no policies.'}
      />
      {withRoles ? (
        <CheckboxGroup
          legend="Roles"
          options={names(roles.data, value.roles)}
          selected={value.roles}
          onChange={(selected) => onChange({ ...value, roles: selected })}
          empty={roles.loading ? 'Loading roles…' : 'There are no roles.'}
        />
      ) : null}
      <TextArea
        label="Service identities"
        rows={3}
        hint='One per line: a service name, then the datacenters it is valid in (none: all), as "web dc1 dc2".'
        value={value.serviceIdentities}
        onValue={(text) => onChange({ ...value, serviceIdentities: text })}
        error={errors.serviceIdentities}
      />
      <TextArea
        label="Node identities"
        rows={2}
        hint='One per line: a node name and its datacenter, as "node-1 dc1".'
        value={value.nodeIdentities}
        onValue={(text) => onChange({ ...value, nodeIdentities: text })}
        error={errors.nodeIdentities}
      />
      <TextArea
        label="Templated policies"
        rows={2}
        hint='One per line: a template name and its variables, as "builtin/service name=web".'
        value={value.templatedPolicies}
        onValue={(text) => onChange({ ...value, templatedPolicies: text })}
        error={errors.templatedPolicies}
      />
    </>
  )
}
