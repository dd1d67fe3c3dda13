/** Which page each path shows; parameters (':id') come to the page decoded. */
import type { ComponentType } from 'preact'
import { Pending } from './pages/pending.js'

export type PageProps = { params: Record<string, string> }

export const ROUTES: Array<[pattern: string, page: ComponentType<PageProps>]> = [
  ['/tokens', Pending],
  ['/policies', Pending],
  ['/roles', Pending],
  ['/auth-methods', Pending],
  ['/binding-rules', Pending],
  ['/templated-policies', Pending],
  ['/config', Pending],
  ['/cluster', Pending],
]
