/** Which page each path shows; parameters (':id') come to the page decoded. Longer patterns first where they overlap. */
import type { ComponentType } from 'preact'
import { ClusterPage } from './pages/cluster.js'
import { TokenEdit, TokenList, TokenNew, TokenPage } from './pages/tokens.js'
import { PolicyEdit, PolicyList, PolicyNew, PolicyPage } from './pages/policies.js'
import { RoleEdit, RoleList, RoleNew, RolePage } from './pages/roles.js'
import { AuthMethodEdit, AuthMethodList, AuthMethodNew, AuthMethodPage } from './pages/auth-methods.js'
import { BindingRuleEdit, BindingRuleList, BindingRuleNew, BindingRulePage } from './pages/binding-rules.js'
import { TemplatedPolicyList, TemplatedPolicyPage } from './pages/templated-policies.js'
import { ConfigEntryPage, ConfigKinds, ConfigList } from './pages/config.js'

export type PageProps = { params: Record<string, string> }

export const ROUTES: Array<[pattern: string, page: ComponentType<PageProps>]> = [
  ['/tokens', TokenList],
  ['/tokens/new', TokenNew],
  ['/tokens/:id', TokenPage],
  ['/tokens/:id/edit', TokenEdit],
  ['/policies', PolicyList],
  ['/policies/new', PolicyNew],
  ['/policies/:id', PolicyPage],
  ['/policies/:id/edit', PolicyEdit],
  ['/roles', RoleList],
  ['/roles/new', RoleNew],
  ['/roles/:id', RolePage],
  ['/roles/:id/edit', RoleEdit],
  // An auth method is named by its name, which may be "new": '+' is in no name.
  ['/auth-methods', AuthMethodList],
  ['/auth-methods/+new', AuthMethodNew],
  ['/auth-methods/:name', AuthMethodPage],
  ['/auth-methods/:name/edit', AuthMethodEdit],
  ['/binding-rules', BindingRuleList],
  ['/binding-rules/new', BindingRuleNew],
  ['/binding-rules/:id', BindingRulePage],
  ['/binding-rules/:id/edit', BindingRuleEdit],
  ['/templated-policies', TemplatedPolicyList],
  ['/templated-policies/:name', TemplatedPolicyPage],
  ['/config', ConfigKinds],
  ['/config/:kind', ConfigList],
  ['/config/:kind/:name', ConfigEntryPage],
  ['/cluster', ClusterPage],
]
