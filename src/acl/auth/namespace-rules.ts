/**
 * The namespace of a login token: the BindNamespace of the auth method's first NamespaceRule whose Selector matches
 * the identity (first match wins, unlike binding rules, which all apply), interpolated like a BindName; without a
 * match, the auth method's own namespace. The contract lets only a method in the `default` namespace assign
 * namespaces by rules, so a method elsewhere keeps its tokens in its own namespace.
 */
import { DEFAULT_NAMESPACE, type AclAuthMethod } from '../../state/records.js'
import { interpolate, InterpolationError, selectorMatches } from './binding.js'
import { BindingError } from './errors.js'
import type { Identity } from './identity.js'

const NAMESPACE = /^[A-Za-z0-9_-]{1,64}$/

/** What the caller of a login is told; the rule and what it gave are for the log (errors.ts). */
const CANNOT_APPLY = "a namespace rule that matches the identity cannot apply to it (the agent's log says which and why)"

export function bindNamespace(method: Pick<AclAuthMethod, 'Namespace' | 'NamespaceRules'>, identity: Identity): string {
  if (method.Namespace !== DEFAULT_NAMESPACE) return method.Namespace
  for (const [position, rule] of method.NamespaceRules.entries()) {
    if (!selectorMatches(rule.Selector, identity)) continue
    const label = `namespace rule ${position} of the auth method`
    let namespace: string
    try {
      namespace = interpolate(rule.BindNamespace, identity.variables)
    } catch (error) {
      if (!(error instanceof InterpolationError)) throw error
      throw new BindingError(CANNOT_APPLY, `${label} cannot apply: BindNamespace ${JSON.stringify(rule.BindNamespace)}: ${error.message}`)
    }
    if (!NAMESPACE.test(namespace)) {
      throw new BindingError(
        CANNOT_APPLY,
        `${label} cannot apply: BindNamespace ${JSON.stringify(rule.BindNamespace)} gives ${JSON.stringify(namespace)}, which is not a valid namespace (1 to 64 letters, digits, "-" or "_")`,
      )
    }
    return namespace
  }
  return method.Namespace
}
