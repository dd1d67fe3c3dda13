/**
 * The identity an auth method vouches for, in the two forms binding rules use (Consul's authmethod.Identity):
 *
 * - `selectable`: what Selector expressions see. jwt: `value.<name>` (a string per ClaimMappings entry) and
 *   `list.<name>` (a list of strings per ListClaimMappings entry); kubernetes: `serviceaccount.namespace`, `.name`,
 *   `.uid`; aws-iam: `entity_name`, `entity_id`, `account_id`, and with entity details `entity_path` and
 *   `entity_tags.<tag>` (aws-iam-validator.ts).
 * - `variables`: what `${...}` in BindName, BindVars and BindNamespace may interpolate, by dotted name. Only scalar
 *   fields: a list cannot be put into a name.
 *
 * Every mapped name is present even when its claim is absent (as an empty string or list), as Consul pre-populates
 * them, so `value.team is empty` matches a token without the claim and `${value.team}` interpolates to "".
 */
import { InvalidBearerTokenError } from './errors.js'
import { emptyAwsIamIdentity } from './aws-iam-validator.js'

export interface Identity {
  selectable: Record<string, unknown>
  variables: Record<string, string>
}

/** Claim → name, as ClaimMappings and ListClaimMappings hold them. A claim starting with `/` is a JSON pointer. */
export type ClaimMappings = Readonly<Record<string, string>>

export function jwtIdentity(claims: Record<string, unknown>, claimMappings: ClaimMappings = {}, listClaimMappings: ClaimMappings = {}): Identity {
  const values: Record<string, string> = {}
  const lists: Record<string, string[]> = {}
  for (const name of Object.values(claimMappings)) values[name] = ''
  for (const name of Object.values(listClaimMappings)) lists[name] = []
  for (const [claim, name] of Object.entries(claimMappings)) {
    const raw = claimValue(claims, claim)
    if (raw === undefined || raw === null) continue
    const text = stringifyClaim(raw)
    if (text === undefined) throw new InvalidBearerTokenError(`claim ${JSON.stringify(claim)} is ${describe(raw)}, not a string, number or boolean`)
    values[name] = text
  }
  for (const [claim, name] of Object.entries(listClaimMappings)) {
    const raw = claimValue(claims, claim)
    if (raw === undefined || raw === null) continue
    // A provider may send a one-element list as the bare element.
    const items = Array.isArray(raw) ? raw : [raw]
    const list: string[] = []
    for (const item of items) {
      const text = stringifyClaim(item)
      if (text === undefined) throw new InvalidBearerTokenError(`list claim ${JSON.stringify(claim)} holds ${describe(item)}, not a string, number or boolean`)
      if (text !== '') list.push(text)
    }
    lists[name] = list
  }
  const variables: Record<string, string> = {}
  for (const [name, value] of Object.entries(values)) variables[`value.${name}`] = value
  return { selectable: { value: values, list: lists }, variables }
}

export interface ServiceAccount {
  namespace: string
  name: string
  uid: string
}

export function kubernetesIdentity(account: ServiceAccount): Identity {
  return {
    selectable: { serviceaccount: { namespace: account.namespace, name: account.name, uid: account.uid } },
    variables: {
      'serviceaccount.namespace': account.namespace,
      'serviceaccount.name': account.name,
      'serviceaccount.uid': account.uid,
    },
  }
}

/**
 * The identity a method of this type and config would give with every field empty: what binding and namespace rules
 * can refer to, for checking a rule when it is written (Consul's NewIdentity, used by IsValidBindingRule). Undefined
 * for a type that has no bearer-token identity.
 */
export function emptyIdentity(type: string, config: Readonly<Record<string, unknown>>): Identity | undefined {
  if (type === 'kubernetes') return kubernetesIdentity({ namespace: '', name: '', uid: '' })
  if (type === 'aws-iam') return emptyAwsIamIdentity(config)
  if (type !== 'jwt' && type !== 'oidc') return undefined
  const mappings = (key: string): ClaimMappings => {
    const value = config[key]
    return typeof value === 'object' && value !== null ? (value as ClaimMappings) : {}
  }
  return jwtIdentity({}, mappings('ClaimMappings'), mappings('ListClaimMappings'))
}

/** A claim by its plain name, or by JSON pointer (RFC 6901) when it starts with `/`; undefined when absent. */
export function claimValue(claims: Record<string, unknown>, claim: string): unknown {
  if (!claim.startsWith('/')) return Object.hasOwn(claims, claim) ? claims[claim] : undefined
  let current: unknown = claims
  for (const encoded of claim.slice(1).split('/')) {
    const segment = encoded.replace(/~1/g, '/').replace(/~0/g, '~')
    if (Array.isArray(current)) {
      if (!/^(?:0|[1-9][0-9]*)$/.test(segment)) return undefined
      current = current[Number(segment)]
    } else if (typeof current === 'object' && current !== null) {
      // Own keys only: a pointer such as /__proto__ must not reach into the prototype chain.
      if (!Object.hasOwn(current, segment)) return undefined
      current = (current as Record<string, unknown>)[segment]
    } else {
      return undefined
    }
  }
  return current
}

/**
 * Consul's stringifyMetadataValue: strings as they are, booleans as true/false, numbers truncated to an integer
 * (claims are decoded as float64 in Go, so 1.9 becomes "1"); anything else has no string form.
 */
export function stringifyClaim(value: unknown): string | undefined {
  if (typeof value === 'string') return value
  if (typeof value === 'boolean') return value ? 'true' : 'false'
  if (typeof value === 'number' && Number.isFinite(value)) return String(Math.trunc(value))
  return undefined
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return 'a list'
  if (value === null) return 'null'
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`
}
