/** `warden login` and `warden logout`, as Consul's: a bearer token in, a warden token written to a sink file. */
import { readFile, writeFile, rename } from 'node:fs/promises'
import { UsageError } from '../argv.js'
import { CommandError, type Command } from '../command.js'
import { FileError } from '../io.js'

export const login: Command = {
  path: 'login',
  synopsis: 'Log in through an auth method: exchange an identity for a token',
  help: `Usage: warden login -method METHOD -bearer-token-file FILE -token-sink-file FILE [options]

  Presents the bearer token (a JWT, a Kubernetes service account token, ...) to the auth method and writes the
  SecretID of the token it gets to the sink file (mode 0600):

      $ warden login -method ci -bearer-token-file /run/ci/jwt -token-sink-file ~/.warden-token`,
  flags: {
    method: { type: 'string', value: 'value', help: 'The auth method to log in through. Required.' },
    'bearer-token-file': { type: 'string', value: 'value', help: 'The file holding the bearer token. Required.' },
    'token-sink-file': { type: 'string', value: 'value', help: 'The file to write the new token\'s SecretID to. Required.' },
    meta: { type: 'string', multiple: true, value: 'value', help: 'Metadata for the token\'s description, KEY=VALUE. May be given more than once.' },
  },
  async run(context) {
    const method = context.required('method', "Missing required '-method' flag")
    const bearerFile = context.required('bearer-token-file', "Missing required '-bearer-token-file' flag")
    const sink = context.required('token-sink-file', "Missing required '-token-sink-file' flag")
    const meta: Record<string, string> = {}
    for (const pair of context.list('meta')) {
      const at = pair.indexOf('=')
      if (at <= 0) throw new UsageError(`-meta "${pair}" must be of the form KEY=VALUE`)
      meta[pair.slice(0, at)] = pair.slice(at + 1)
    }
    let bearer: string
    try {
      bearer = (await readFile(bearerFile, 'utf8')).trim()
    } catch (error) {
      throw new CommandError(`Error reading -bearer-token-file: ${new FileError(bearerFile, (error as NodeJS.ErrnoException).code ?? (error as Error).message).message}`)
    }
    if (bearer === '') throw new UsageError(`No bearer token found in ${bearerFile}`)
    context.addSecret(bearer)
    const token = await context.api('Error logging in', () =>
      context.client.acl.login({ AuthMethod: method, BearerToken: bearer, ...(Object.keys(meta).length === 0 ? {} : { Meta: meta }) }),
    )
    context.addSecret(token.SecretID)
    // Written beside the sink and renamed over it: a reader never sees a half-written secret, and it is 0600 from
    // the first byte.
    const temporary = `${sink}.tmp-${process.pid}`
    try {
      await writeFile(temporary, token.SecretID, { mode: 0o600 })
      await rename(temporary, sink)
    } catch (error) {
      // The token exists but nobody holds its secret: say so, with its AccessorID so an operator can delete it.
      throw new CommandError(`Error writing -token-sink-file ${sink} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); the token ${token.AccessorID} was created`)
    }
  },
}

export const logout: Command = {
  path: 'logout',
  synopsis: 'Destroy a token made by a login',
  help: `Usage: warden logout [options]

  Deletes the token given with -token, -token-file or WARDEN_HTTP_TOKEN; it must have come from a login:

      $ warden logout -token-file ~/.warden-token`,
  flags: {},
  async run(context) {
    await context.api('Error destroying token', () => context.client.acl.logout())
  },
}
