/** Which page each path shows; parameters (':id') come to the page decoded. Longer patterns first where they overlap. */
import type { ComponentType } from 'preact'
import { Pending } from './pages/pending.js'
import { TokenEdit, TokenList, TokenNew, TokenPage } from './pages/tokens.js'
import { PolicyEdit, PolicyList, PolicyNew, PolicyPage } from './pages/policies.js'
import { RoleEdit, RoleList, RoleNew, RolePage } from './pages/roles.js'

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
  ['/auth-methods', Pending],
  ['/binding-rules', Pending],
  ['/templated-policies', Pending],
  ['/config', Pending],
  ['/cluster', Pending],
]
