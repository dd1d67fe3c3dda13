/** `warden acl auth-method create|read|update|delete|list`, as Consul's. */
import type { AuthMethod, AuthMethodWrite } from '../../api/index.js'
import { UsageError } from '../argv.js'
import { CommandError, type Command, type CommandContext } from '../command.js'
import { byName, formatAuthMethod, formatAuthMethodList } from '../format.js'
import { FileError, valueOrFile } from '../io.js'

const NAME_FLAG = { name: { type: 'string' as const, value: 'value', help: 'The name of the auth method.' } }

const FIELD_FLAGS = {
  'display-name': { type: 'string' as const, value: 'value', help: 'A name to show in UIs.' },
  description: { type: 'string' as const, value: 'value', help: 'A description of the auth method.' },
  'max-token-ttl': { type: 'string' as const, value: 'duration', help: 'The longest a token made by a login lives, e.g. 10m (0: no expiry).' },
  'token-locality': { type: 'string' as const, value: 'value', help: 'local or global: where tokens made by a login live.' },
  config: { type: 'string' as const, value: 'value', help: 'The method\'s configuration as JSON: the text, @FILE or - for standard input.' },
}

const printMethod = (context: CommandContext, method: AuthMethod): void => context.output(method, (value) => formatAuthMethod(value, context.meta))

async function readConfig(context: CommandContext): Promise<Record<string, unknown> | undefined> {
  const given = context.string('config')
  if (given === undefined) return undefined
  let text: string
  try {
    text = await valueOrFile(context.io, given)
  } catch (error) {
    if (error instanceof FileError) throw new CommandError(`Failed to read -config: ${error.message}`)
    throw error
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    throw new UsageError(`Invalid -config: not JSON: ${(error as Error).message}`)
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new UsageError('Invalid -config: must be a JSON object')
  return parsed as Record<string, unknown>
}

function fields(context: CommandContext, body: AuthMethodWrite): AuthMethodWrite {
  const set = (flag: string, field: 'DisplayName' | 'Description' | 'MaxTokenTTL' | 'TokenLocality'): void => {
    const value = context.string(flag)
    if (value !== undefined) body[field] = value
  }
  set('display-name', 'DisplayName')
  set('description', 'Description')
  set('max-token-ttl', 'MaxTokenTTL')
  set('token-locality', 'TokenLocality')
  return body
}

export const authMethodCreate: Command = {
  path: 'acl auth-method create',
  synopsis: 'Create an ACL auth method',
  help: `Usage: warden acl auth-method create -type TYPE -name NAME -config @FILE [options]

  Creates an auth method (jwt, oidc, kubernetes, aws-iam):

      $ warden acl auth-method create -type jwt -name ci -max-token-ttl 10m -config @jwt.json`,
  flags: { type: { type: 'string', value: 'value', help: 'The auth method\'s type. Required.' }, ...NAME_FLAG, ...FIELD_FLAGS },
  format: true,
  meta: true,
  async run(context) {
    const type = context.required('type')
    const name = context.required('name')
    const config = await readConfig(context)
    const body = fields(context, { Name: name, Type: type, ...(config === undefined ? {} : { Config: config }) })
    printMethod(context, await context.api('Failed to create new auth method', () => context.client.acl.authMethods.create(body)))
  },
}

export const authMethodRead: Command = {
  path: 'acl auth-method read',
  synopsis: 'Read an ACL auth method',
  help: `Usage: warden acl auth-method read -name NAME [options]

      $ warden acl auth-method read -name ci`,
  flags: NAME_FLAG,
  format: true,
  meta: true,
  async run(context) {
    const name = context.required('name', 'Must specify the -name parameter')
    printMethod(context, await context.api(`Error reading auth method "${name}"`, () => context.client.acl.authMethods.read(name, context.consistency)))
  },
}

export const authMethodUpdate: Command = {
  path: 'acl auth-method update',
  synopsis: 'Update an ACL auth method',
  help: `Usage: warden acl auth-method update -name NAME [options]

  Changes an auth method; fields not given keep their values unless -no-merge is set (its type never changes):

      $ warden acl auth-method update -name ci -max-token-ttl 5m`,
  flags: { ...NAME_FLAG, ...FIELD_FLAGS, 'no-merge': { type: 'boolean', help: 'Replace the method with what is given; fields not given take their defaults.' } },
  format: true,
  meta: true,
  async run(context) {
    const name = context.required('name', 'Cannot update an auth method without specifying the -name parameter')
    const config = await readConfig(context)
    let body: AuthMethodWrite
    if (context.boolean('no-merge')) {
      if (config === undefined) throw new UsageError('Must specify -config with -no-merge')
      body = fields(context, { Name: name, Config: config })
    } else {
      const current = await context.api('Error when retrieving current auth method', () => context.client.acl.authMethods.read(name, context.consistency))
      const { CreateIndex: _created, ModifyIndex: _modified, ...kept } = current
      body = fields(context, { ...kept, ...(config === undefined ? {} : { Config: config }) })
    }
    printMethod(context, await context.api(`Failed to update auth method ${name}`, () => context.client.acl.authMethods.update(name, body)))
  },
}

export const authMethodDelete: Command = {
  path: 'acl auth-method delete',
  synopsis: 'Delete an ACL auth method',
  help: `Usage: warden acl auth-method delete -name NAME [options]

  Deletes an auth method with its binding rules and the tokens its logins made:

      $ warden acl auth-method delete -name ci`,
  flags: NAME_FLAG,
  async run(context) {
    const name = context.required('name', 'Must specify the -name parameter')
    await context.api(`Error deleting auth method "${name}"`, () => context.client.acl.authMethods.delete(name))
    context.print(`Auth-method "${name}" deleted successfully`)
  },
}

export const authMethodList: Command = {
  path: 'acl auth-method list',
  synopsis: 'List ACL auth methods',
  help: `Usage: warden acl auth-method list [options]

      $ warden acl auth-method list`,
  flags: {},
  format: true,
  meta: true,
  async run(context) {
    const methods = await context.api('Failed to retrieve the auth method list', () => context.client.acl.authMethods.list(context.consistency))
    context.output(byName(methods), (value) => formatAuthMethodList(value, context.meta))
  },
}
