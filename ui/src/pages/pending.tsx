/** A section whose page is not built yet. */
import type { JSX } from 'preact'
import { Page } from '../components.js'
import { currentPath } from '../router.js'

export function Pending(): JSX.Element {
  return (
    <Page title={currentPath().slice(1)}>
      <p>This page is not built yet; the HTTP API and the command line do what it will do.</p>
    </Page>
  )
}
