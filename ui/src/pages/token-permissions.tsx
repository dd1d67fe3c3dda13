/** What a token may do (GET /v1/acl/token/:AccessorID/permissions): filled in when the agent serves it. */
import type { JSX } from 'preact'

export function TokenPermissions(_props: { accessorID: string }): JSX.Element | null {
  return null
}
