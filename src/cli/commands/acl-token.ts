/** `warden acl token create|read|update|delete|list|clone` and `warden acl bootstrap`, as Consul's. */
import type { Token, TokenWrite } from '../../api/index.js'
import { UsageError } from '../argv.js'
import type { Command, CommandContext } from '../command.js'
import { byCreation, formatRole, formatToken, formatTokenList } from '../format.js'
import {
  appendLinks,
  fullId,
  IDENTITY_FLAGS,
  linksOf,
  nodeIdentities,
  POLICY_LINK_FLAGS,
  policyIdResolver,
  ROLE_LINK_FLAGS,
  roleIdResolver,
  serviceIdentities,
  templatedPolicies,
} from './acl-links.js'

const ACCESSOR_FLAG = { 'accessor-id': { type: 'string' as const, value: 'value', help: 'The AccessorID of the token (a unique prefix will do).', aliases: ['id'] } }

function tokenId(context: CommandContext, given: string): Promise<string> {
  return fullId('token', given, async () => (await context.client.acl.tokens.list(context.consistency)).map((token) => token.AccessorID))
}

function requiredAccessor(context: CommandContext, verb: string): Promise<string> {
  const given = context.string('accessor-id')
  if (given === undefined || given === '') throw new UsageError(`Cannot ${verb} a token without specifying the -accessor-id parameter`)
  return context.api('Error determining token ID', () => tokenId(context, given))
}

const printToken = (context: CommandContext, token: Token): void => context.output(token, (value) => formatToken(value, context.meta))

export const tokenCreate: Command = {
  path: 'acl token create',
  synopsis: 'Create an ACL token',
  help: `Usage: warden acl token create [options]

  Creates a new token linked to policies, roles, identities or a templated policy:

      $ warden acl token create -description "web" -policy-name web-write -service-identity web:dc1`,
  flags: {
    accessor: { type: 'string', value: 'value', help: 'The AccessorID to give the token (a UUID); a new one when absent.' },
    secret: { type: 'string', value: 'value', help: 'The SecretID to give the token (a UUID); a new one when absent.' },
    description: { type: 'string', value: 'value', help: 'A description of the token.' },
    'expires-ttl': { type: 'string', value: 'duration', help: 'How long the token lives, e.g. 1h (between the server\'s minimum and maximum).' },
    local: { type: 'boolean', help: 'Create a token local to this datacenter.' },
    ...POLICY_LINK_FLAGS,
    ...ROLE_LINK_FLAGS,
    ...IDENTITY_FLAGS,
  },
  format: true,
  meta: true,
  async run(context) {
    context.addSecret(context.string('secret'))
    const { client } = context
    const body: TokenWrite = {
      Description: context.string('description') ?? '',
      Local: context.boolean('local'),
      Policies: await context.api('Error resolving policy', () => linksOf(context.list('policy-id'), context.list('policy-name'), policyIdResolver(client, context.consistency))),
      Roles: await context.api('Error resolving role', () => linksOf(context.list('role-id'), context.list('role-name'), roleIdResolver(client, context.consistency))),
      ServiceIdentities: serviceIdentities(context.list('service-identity')),
      NodeIdentities: nodeIdentities(context.list('node-identity')),
    }
    const templated = templatedPolicies(context)
    if (templated !== undefined) body.TemplatedPolicies = templated
    const accessor = context.string('accessor')
    const secret = context.string('secret')
    const ttl = context.string('expires-ttl')
    if (accessor !== undefined) body.AccessorID = accessor
    if (secret !== undefined) body.SecretID = secret
    if (ttl !== undefined) body.ExpirationTTL = ttl
    printToken(context, await context.api('Failed to create new token', () => client.acl.tokens.create(body)))
  },
}

export const tokenRead: Command = {
  path: 'acl token read',
  synopsis: 'Read an ACL token',
  help: `Usage: warden acl token read [options] -accessor-id TOKENID

  Shows one token:

      $ warden acl token read -accessor-id 4be56c77
      $ warden acl token read -self`,
  flags: {
    ...ACCESSOR_FLAG,
    self: { type: 'boolean', help: 'Read the token the command runs with (no acl:read needed).' },
    expanded: { type: 'boolean', help: 'Also show the policies, roles and settings the token resolves to.' },
  },
  format: true,
  meta: true,
  async run(context) {
    const { client } = context
    if (context.boolean('self')) {
      printToken(context, await context.api('Error reading token', () => client.acl.tokens.self(context.consistency)))
      return
    }
    if (context.string('accessor-id') === undefined) throw new UsageError('Must specify the -accessor-id parameter')
    const id = await requiredAccessor(context, 'read')
    const token = await context.api(`Error reading token "${id}"`, () => client.acl.tokens.read(id, { ...context.consistency, expanded: context.boolean('expanded') }))
    if (context.boolean('expanded') && context.format === 'pretty') {
      context.print(formatExpanded(token, context.meta))
      return
    }
    printToken(context, token)
  },
}

/**
 * `-expanded`: the token, then what it resolves to in this datacenter (each policy with its rules, each role with
 * its links) and the agent's defaults that decide what no rule covers. Consul prints its authorizer layers instead.
 */
function formatExpanded(token: Token, meta: boolean): string {
  let text = formatToken(token, meta)
  const policies = token.ExpandedPolicies ?? []
  if (policies.length > 0) {
    text += '\n=== Policies\n'
    text += policies.map((policy) => `ID:           ${policy.ID}\nName:         ${policy.Name}\nRules:\n${(policy.Rules ?? '').trimEnd()}\n`).join('\n')
  }
  const roles = token.ExpandedRoles ?? []
  if (roles.length > 0) text += `\n=== Roles\n${roles.map((role) => formatRole(role, false)).join('\n')}`
  if (token.AgentACLDefaultPolicy !== undefined) {
    text += `\n=== Agent defaults (from ${token.ResolvedByAgent ?? 'the agent'})\nDefault Policy:   ${token.AgentACLDefaultPolicy}\nDown Policy:      ${token.AgentACLDownPolicy ?? ''}\n`
  }
  return text
}

export const tokenUpdate: Command = {
  path: 'acl token update',
  synopsis: 'Update an ACL token',
  help: `Usage: warden acl token update [options] -accessor-id TOKENID

  Changes a token's description and links; its Local flag, secret and expiry cannot change. -policy-* and -role-*
  replace the token's links, -append-* add to them:

      $ warden acl token update -accessor-id 4be56c77 -description "web" -append-policy-name extra`,
  flags: {
    ...ACCESSOR_FLAG,
    description: { type: 'string', value: 'value', help: 'A new description (kept when absent).' },
    ...POLICY_LINK_FLAGS,
    ...ROLE_LINK_FLAGS,
    ...IDENTITY_FLAGS,
    'append-policy-id': { type: 'string', multiple: true, value: 'value', help: 'ID of a policy to add; the token keeps its policies.' },
    'append-policy-name': { type: 'string', multiple: true, value: 'value', help: 'Name of a policy to add; the token keeps its policies.' },
    'append-role-id': { type: 'string', multiple: true, value: 'value', help: 'ID of a role to add; the token keeps its roles.' },
    'append-role-name': { type: 'string', multiple: true, value: 'value', help: 'Name of a role to add; the token keeps its roles.' },
    'append-service-identity': { type: 'string', multiple: true, value: 'value', help: 'A service identity to add or replace; the token keeps the others.' },
    'append-node-identity': { type: 'string', multiple: true, value: 'value', help: 'A node identity to add; the token keeps the others.' },
    'merge-policies': { type: 'boolean', help: 'Deprecated: -policy-id/-policy-name add to the token\'s policies.', hidden: true },
    'merge-roles': { type: 'boolean', help: 'Deprecated: -role-id/-role-name add to the token\'s roles.', hidden: true },
    'merge-service-identities': { type: 'boolean', help: 'Deprecated: -service-identity adds.', hidden: true },
    'merge-node-identities': { type: 'boolean', help: 'Deprecated: -node-identity adds.', hidden: true },
  },
  format: true,
  meta: true,
  async run(context) {
    const { client } = context
    const id = await requiredAccessor(context, 'update')
    const current = await context.api('Error when retrieving current token', () => client.acl.tokens.read(id, context.consistency))
    const body: TokenWrite = { ...current }
    const description = context.string('description')
    if (description !== undefined && description !== '') body.Description = description
    const resolvePolicy = policyIdResolver(client, context.consistency)
    const resolveRole = roleIdResolver(client, context.consistency)
    body.Policies = await combine(context, 'policy', current.Policies, context.boolean('merge-policies'), (ids, names) =>
      context.api('Error resolving policy', () => linksOf(ids, names, resolvePolicy)),
    )
    body.Roles = await combine(context, 'role', current.Roles, context.boolean('merge-roles'), (ids, names) =>
      context.api('Error resolving role', () => linksOf(ids, names, resolveRole)),
    )
    body.ServiceIdentities = combineIdentities(context, 'service-identity', current.ServiceIdentities ?? [], context.boolean('merge-service-identities'), serviceIdentities, (a, b) => a.ServiceName === b.ServiceName)
    body.NodeIdentities = combineIdentities(context, 'node-identity', current.NodeIdentities ?? [], context.boolean('merge-node-identities'), nodeIdentities, (a, b) => a.NodeName === b.NodeName && a.Datacenter === b.Datacenter)
    const templated = templatedPolicies(context)
    if (templated !== undefined) body.TemplatedPolicies = templated
    printToken(context, await context.api(`Failed to update token ${id}`, () => client.acl.tokens.update(id, body)))
  },
}

/** -policy-* replace, -append-policy-* (or -merge-policies) add; giving both kinds is a usage error, as in Consul. */
async function combine<T extends { ID?: string; Name?: string }>(
  context: CommandContext,
  kind: 'policy' | 'role',
  existing: T[],
  merge: boolean,
  links: (ids: string[], names: string[]) => Promise<Array<{ ID?: string; Name?: string }>>,
): Promise<Array<{ ID?: string; Name?: string }>> {
  const ids = context.list(`${kind}-id`)
  const names = context.list(`${kind}-name`)
  const appendIds = context.list(`append-${kind}-id`)
  const appendNames = context.list(`append-${kind}-name`)
  const replacing = ids.length + names.length > 0
  const appending = appendIds.length + appendNames.length > 0
  if (replacing && appending) {
    throw new UsageError(`Cannot combine the use of ${kind}-id/${kind}-name flags with append- variants. To set or overwrite existing ${kind === 'policy' ? 'policies' : 'roles'}, use -${kind}-id or -${kind}-name. To append to existing ${kind === 'policy' ? 'policies' : 'roles'}, use -append-${kind}-id or -append-${kind}-name.`)
  }
  if (replacing && !merge) return links(ids, names)
  const added = replacing ? await links(ids, names) : await links(appendIds, appendNames)
  return appendLinks(existing, added)
}

function combineIdentities<T>(
  context: CommandContext,
  flag: 'service-identity' | 'node-identity',
  existing: T[],
  merge: boolean,
  parse: (values: string[]) => T[],
  same: (a: T, b: T) => boolean,
): T[] {
  const replace = context.list(flag)
  const append = context.list(`append-${flag}`)
  if (replace.length > 0 && append.length > 0) {
    throw new UsageError(`Cannot combine the use of ${flag} flag with append-${flag}. To set or overwrite existing identities, use -${flag}. To append to existing identities, use -append-${flag}.`)
  }
  if (append.length === 0 && !merge) return replace.length > 0 ? parse(replace) : existing
  const result = [...existing]
  for (const identity of parse(append.length > 0 ? append : replace)) {
    const at = result.findIndex((item) => same(item, identity))
    if (at === -1) result.push(identity)
    else result[at] = identity
  }
  return result
}

export const tokenDelete: Command = {
  path: 'acl token delete',
  synopsis: 'Delete an ACL token',
  help: `Usage: warden acl token delete [options] -accessor-id TOKENID

  Deletes a token:

      $ warden acl token delete -accessor-id 4be56c77`,
  flags: { ...ACCESSOR_FLAG },
  async run(context) {
    const id = await requiredAccessor(context, 'delete')
    await context.api(`Error deleting token "${id}"`, () => context.client.acl.tokens.delete(id))
    context.print(`Token "${id}" deleted successfully`)
  },
}

export const tokenList: Command = {
  path: 'acl token list',
  synopsis: 'List ACL tokens',
  help: `Usage: warden acl token list [options]

  Lists every token the caller may read, optionally only those linked to a policy or role, with a service identity
  or made by an auth method:

      $ warden acl token list -policy-id 4be56c77`,
  flags: {
    'policy-id': { type: 'string', value: 'value', help: 'Only tokens linked to this policy (an ID or unique prefix).' },
    'role-id': { type: 'string', value: 'value', help: 'Only tokens linked to this role (an ID or unique prefix).' },
    'service-name': { type: 'string', value: 'value', help: 'Only tokens with a service identity of this name.' },
    'auth-method': { type: 'string', value: 'value', help: 'Only tokens made by logging in through this auth method.' },
  },
  format: true,
  meta: true,
  async run(context) {
    const { client } = context
    const policy = context.string('policy-id')
    const role = context.string('role-id')
    const filters = {
      ...(policy === undefined ? {} : { policy: await context.api('Error resolving policy', () => policyIdResolver(client, context.consistency)(policy)) }),
      ...(role === undefined ? {} : { role: await context.api('Error resolving role', () => roleIdResolver(client, context.consistency)(role)) }),
      ...(context.string('service-name') === undefined ? {} : { serviceName: context.string('service-name')! }),
      ...(context.string('auth-method') === undefined ? {} : { authMethod: context.string('auth-method')! }),
    }
    const tokens = await context.api('Failed to retrieve the token list', () => client.acl.tokens.list({ ...context.consistency, ...filters }))
    context.output(byCreation(tokens), (value) => formatTokenList(value, context.meta))
  },
}

export const tokenClone: Command = {
  path: 'acl token clone',
  synopsis: 'Clone an ACL token',
  help: `Usage: warden acl token clone [options] -accessor-id TOKENID

  Makes a new token with the links of an existing one, and a new AccessorID and SecretID:

      $ warden acl token clone -accessor-id 4be56c77 -description "web, second copy"`,
  flags: { ...ACCESSOR_FLAG, description: { type: 'string', value: 'value', help: 'The description of the new token.' } },
  format: true,
  meta: true,
  async run(context) {
    const id = await requiredAccessor(context, 'clone')
    printToken(context, await context.api('Failed to clone token', () => context.client.acl.tokens.clone(id, context.string('description'))))
  },
}

export const aclBootstrap: Command = {
  path: 'acl bootstrap',
  synopsis: 'Bootstrap the ACL system: create the first management token',
  help: `Usage: warden acl bootstrap [options]

  Creates the first management token of a cluster started without an initial management token. It works once; keep
  the SecretID it prints.`,
  flags: {},
  format: true,
  meta: true,
  async run(context) {
    const token = await context.api('Failed ACL bootstrapping', () => context.client.acl.bootstrap())
    printToken(context, token)
  },
}

