/**
 * From a verified identity to what the login token carries (Consul's auth.Binder): every binding rule of the method
 * whose Selector matches the identity applies, in rule order; BindName (and BindVars for templated policies) are
 * interpolated from the identity's variables and the result must be a valid name for its BindType. A result that is
 * not valid fails the login with a message naming the rule, the template and the result: a misconfigured rule must
 * not quietly grant less (or, worse, something else) than it says.
 *
 * Role bindings carry names only: whether the role exists is decided when the login command is applied, against the
 * state at its index, and a missing role is dropped there (as Consul drops it).
 *
 * Pure: no state, no clock.
 */
import { compileFilter } from '../../filter/index.js'
import { isValidIdentityName, isValidRecordName } from '../names.js'
import { templatedPolicyByName, validateTemplateVariables } from '../templated-policies.js'
import type { AclBindingRule, NodeIdentity, ServiceIdentity, TemplatedPolicyLink } from '../../state/records.js'
import { BindingError } from './errors.js'
import type { Identity } from './identity.js'

export interface Bindings {
  ServiceIdentities: ServiceIdentity[]
  NodeIdentities: NodeIdentity[]
  /** Role names, resolved (and dropped when missing) at apply time. */
  RoleNames: string[]
  TemplatedPolicies: TemplatedPolicyLink[]
}

/** True when the bindings would give a token nothing at all. Role names may still be dropped later. */
export function isEmptyBinding(bindings: Bindings): boolean {
  return (
    bindings.ServiceIdentities.length === 0 &&
    bindings.NodeIdentities.length === 0 &&
    bindings.RoleNames.length === 0 &&
    bindings.TemplatedPolicies.length === 0
  )
}

/** Thrown by `interpolate` for a template that cannot be evaluated; the caller adds which rule and field it was. */
export class InterpolationError extends Error {
  override readonly name = 'InterpolationError'
}

/** Placeholders in a BindName or BindVars value: `${name}`, or the `{{ name }}` form the contract's samples show. */
export const PLACEHOLDERS = /\$\{([^}]*)\}|\{\{([^}]*)\}\}/g

/** Whether a BindName or BindVars value has a placeholder (or the start of one) to fill in at login. */
export function isTemplated(value: string): boolean {
  return value.includes('${') || value.includes('{{')
}

/**
 * HIL-style interpolation as binding rules use it: `${name}` (whitespace inside the braces allowed) is replaced by the
 * variable's value and `$${` stands for a literal `${`; `{{ name }}`, the form api.md's sample bodies show, is the
 * same placeholder. An unknown variable or an unterminated placeholder is an error; the variables hold every field
 * the identity defines (empty when its claim was absent), so an unknown one is a typo.
 */
export function interpolate(template: string, variables: Readonly<Record<string, string>>): string {
  let result = ''
  let position = 0
  while (position < template.length) {
    const dollar = template.indexOf('${', position)
    const braces = template.indexOf('{{', position)
    if (dollar === -1 && braces === -1) {
      result += template.slice(position)
      break
    }
    const isDollar = dollar !== -1 && (braces === -1 || dollar < braces)
    const start = isDollar ? dollar : braces
    if (isDollar && start > 0 && template[start - 1] === '$') {
      // `$${` escapes the placeholder: keep one `$` (already copied below) and the literal `{`.
      result += template.slice(position, start) + '{'
      position = start + 2
      continue
    }
    const close = isDollar ? '}' : '}}'
    const end = template.indexOf(close, start + 2)
    if (end === -1) throw new InterpolationError(`unterminated "${isDollar ? '${' : '{{'}" at offset ${start}`)
    const name = template.slice(start + 2, end).trim()
    if (!Object.hasOwn(variables, name)) {
      const known = Object.keys(variables)
      throw new InterpolationError(`unknown variable "${name}" (this auth method defines ${known.length === 0 ? 'none' : known.join(', ')})`)
    }
    result += template.slice(position, start) + variables[name]
    position = end + close.length
  }
  return result
}

/** Whether a rule's selector matches; an empty selector matches every identity, an invalid one none (as Consul). */
export function selectorMatches(selector: string, identity: Identity): boolean {
  if (selector.trim() === '') return true
  try {
    return compileFilter(selector)(identity.selectable)
  } catch {
    // Selectors are checked when the rule is written; one that no longer parses matches nothing.
    return false
  }
}

const NAME_RULES: Record<'service' | 'node' | 'role', { valid: (name: string) => boolean; rule: string }> = {
  service: {
    valid: isValidIdentityName,
    rule: 'a service name is 1 to 256 lowercase letters, digits, "-" or "_", starting and ending with a letter or digit',
  },
  node: {
    valid: isValidIdentityName,
    rule: 'a node name is 1 to 256 lowercase letters, digits, "-" or "_", starting and ending with a letter or digit',
  },
  role: { valid: (name) => isValidRecordName(name, 'role'), rule: 'a role name is 1 to 256 letters, digits, "-" or "_"' },
}

/** What the caller of a login is told when a matching rule cannot apply; the details are for the log (errors.ts). */
const CANNOT_APPLY = "a binding rule that matches the identity cannot apply to it (the agent's log says which and why)"

function ruleLabel(rule: AclBindingRule): string {
  return `binding rule ${rule.ID} (BindType ${rule.BindType})`
}

function computeName(rule: AclBindingRule, kind: 'service' | 'node' | 'role', identity: Identity): string {
  let name: string
  try {
    name = interpolate(rule.BindName, identity.variables)
  } catch (error) {
    if (!(error instanceof InterpolationError)) throw error
    throw new BindingError(CANNOT_APPLY, `${ruleLabel(rule)} cannot apply: BindName ${JSON.stringify(rule.BindName)}: ${error.message}`)
  }
  const { valid, rule: nameRule } = NAME_RULES[kind]
  if (!valid(name)) {
    throw new BindingError(
      CANNOT_APPLY,
      `${ruleLabel(rule)} cannot apply: BindName ${JSON.stringify(rule.BindName)} gives ${JSON.stringify(name)}, which is not a valid ${kind} name (${nameRule})`,
    )
  }
  return name
}

function templatedPolicy(rule: AclBindingRule, identity: Identity): TemplatedPolicyLink {
  const template = templatedPolicyByName(rule.BindName)
  if (template === undefined) throw new BindingError(CANNOT_APPLY, `${ruleLabel(rule)} cannot apply: no templated policy named ${JSON.stringify(rule.BindName)}`)
  const variables: Record<string, string> = {}
  for (const [key, value] of Object.entries(rule.BindVars ?? {})) {
    try {
      // Template variables are lowercase (`name`); Consul's BindVars field decodes `Name` as well.
      variables[key.toLowerCase()] = interpolate(value, identity.variables)
    } catch (error) {
      if (!(error instanceof InterpolationError)) throw error
      throw new BindingError(CANNOT_APPLY, `${ruleLabel(rule)} cannot apply: BindVars.${key} ${JSON.stringify(value)}: ${error.message}`)
    }
  }
  const link: TemplatedPolicyLink = { TemplateName: template.TemplateName, TemplateID: template.TemplateID }
  if (template.Schema === '') return link
  const problems = validateTemplateVariables(template.TemplateName, variables)
  if (problems.length > 0) {
    throw new BindingError(CANNOT_APPLY, `${ruleLabel(rule)} cannot apply: the interpolated BindVars ${JSON.stringify(variables)} are not valid: ${problems.join('; ')}`)
  }
  if (variables.name !== undefined) link.TemplateVariables = { name: variables.name }
  return link
}

/** Applies every matching rule; duplicates (same service, same node, same role, same template and variables) merge. */
export function bindIdentity(rules: readonly AclBindingRule[], identity: Identity, datacenter: string): Bindings {
  const services = new Set<string>()
  const nodes = new Set<string>()
  const roles = new Set<string>()
  const templates = new Map<string, TemplatedPolicyLink>()
  for (const rule of rules) {
    if (!selectorMatches(rule.Selector, identity)) continue
    switch (rule.BindType) {
      case 'service':
        services.add(computeName(rule, 'service', identity))
        break
      case 'node':
        nodes.add(computeName(rule, 'node', identity))
        break
      case 'role':
        roles.add(computeName(rule, 'role', identity))
        break
      case 'templated-policy': {
        const link = templatedPolicy(rule, identity)
        templates.set(`${link.TemplateName}\u0000${JSON.stringify(link.TemplateVariables ?? {})}`, link)
        break
      }
    }
  }
  return {
    ServiceIdentities: [...services].map((ServiceName) => ({ ServiceName })),
    NodeIdentities: [...nodes].map((NodeName) => ({ NodeName, Datacenter: datacenter })),
    RoleNames: [...roles],
    TemplatedPolicies: [...templates.values()],
  }
}
