/**
 * Sign-in: one secret field for the token. The secret is checked with GET /v1/acl/token/self (which needs no
 * permission beyond holding the secret) before it is kept, and kept only in this tab's session storage.
 */
import type { JSX } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { ApiError, request } from '../api.js'
import { ErrorMessage, TextField } from '../components.js'
import { signIn } from '../session.js'

export function SignIn({ reason }: { reason: string | undefined }): JSX.Element {
  const [secret, setSecret] = useState('')
  const [error, setError] = useState<unknown>(undefined)
  const [busy, setBusy] = useState(false)
  const input = useRef<HTMLInputElement>(null)
  useEffect(() => {
    document.title = 'Sign in · warden'
    input.current?.focus()
  }, [])
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault()
    const token = secret.trim()
    if (token === '') {
      setError(new Error('Enter a token (its SecretID).'))
      input.current?.focus()
      return
    }
    setBusy(true)
    setError(undefined)
    try {
      await request('GET', '/v1/acl/token/self', { token, local: true })
      signIn(token)
    } catch (failure) {
      setBusy(false)
      setError(failure instanceof ApiError && failure.code === 'acl_not_found' ? new ApiError(failure.status, failure.code, `No live token has that SecretID (${failure.message})`) : failure)
      input.current?.select()
    }
  }
  return (
    <main id="main" class="sign-in">
      <h1>Sign in to warden</h1>
      {reason === undefined ? null : (
        <p class="error" role="alert">
          <span aria-hidden="true">✖ </span>
          {reason}
        </p>
      )}
      <form onSubmit={(event) => void submit(event)} noValidate>
        <TextField
          label="Token"
          type="password"
          value={secret}
          onValue={setSecret}
          inputRef={input}
          autoComplete="off"
          hint="The SecretID of an ACL token. It stays in this browser tab until you sign out or close the tab, and is sent only to this agent."
          error={undefined}
        />
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
        <ErrorMessage error={error} prefix="Not signed in" />
      </form>
    </main>
  )
}
