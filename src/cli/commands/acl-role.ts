/** `warden acl role create|read|update|delete|list`, as Consul's. */
import type { Role, RoleWrite } from '../../api/index.js'
import { UsageError } from '../argv.js'
import type { Command, CommandContext } from '../command.js'
import { byName, formatRole, formatRoleList } from '../format.js'
import { appendLinks, IDENTITY_FLAGS, linksOf, nodeIdentities, POLICY_LINK_FLAGS, policyIdResolver, roleIdResolver, serviceIdentities, templatedPolicies } from './acl-links.js'

const SELECT_FLAGS = {
  id: { type: 'string' as const, value: 'value', help: 'The ID of the role (a unique prefix will do).' },
  name: { type: 'string' as const, value: 'value', help: 'The name of the role.' },
}

async function roleId(context: CommandContext, verb: string): Promise<string> {
  const id = context.string('id')
  const name = context.string('name')
  if (id !== undefined && id !== '') return context.api('Error determining role ID', () => roleIdResolver(context.client, context.consistency)(id))
  if (name !== undefined && name !== '') return (await context.api(`Error reading role "${name}"`, () => context.client.acl.roles.readByName(name, context.consistency))).ID
  throw new UsageError(`Cannot ${verb} a role without specifying the -id or -name parameter`)
}

const printRole = (context: CommandContext, role: Role): void => context.output(role, (value) => formatRole(value, context.meta))

function policyLinks(context: CommandContext) {
  return context.api('Error resolving policy', () => linksOf(context.list('policy-id'), context.list('policy-name'), policyIdResolver(context.client, context.consistency)))
}

export const roleCreate: Command = {
  path: 'acl role create',
  synopsis: 'Create an ACL role',
  help: `Usage: warden acl role create -name NAME [options]

  Creates a role: a named set of policies and identities tokens can link:

      $ warden acl role create -name web -policy-name web-write -service-identity web`,
  flags: {
    name: { type: 'string', value: 'value', help: 'The new role\'s name. Required.' },
    description: { type: 'string', value: 'value', help: 'A description of the role.' },
    ...POLICY_LINK_FLAGS,
    ...IDENTITY_FLAGS,
  },
  format: true,
  meta: true,
  async run(context) {
    const body: RoleWrite = {
      Name: context.required('name'),
      Description: context.string('description') ?? '',
      Policies: await policyLinks(context),
      ServiceIdentities: serviceIdentities(context.list('service-identity')),
      NodeIdentities: nodeIdentities(context.list('node-identity')),
    }
    const templated = templatedPolicies(context)
    if (templated !== undefined) body.TemplatedPolicies = templated
    if (body.Policies!.length + body.ServiceIdentities!.length + body.NodeIdentities!.length + (templated?.length ?? 0) === 0) {
      throw new UsageError('Cannot create a role without specifying -policy-name, -policy-id, -service-identity, -node-identity, or -templated-policy at least once')
    }
    printRole(context, await context.api('Failed to create new role', () => context.client.acl.roles.create(body)))
  },
}

export const roleRead: Command = {
  path: 'acl role read',
  synopsis: 'Read an ACL role',
  help: `Usage: warden acl role read [options] (-id ID | -name NAME)

      $ warden acl role read -name web`,
  flags: SELECT_FLAGS,
  format: true,
  meta: true,
  async run(context) {
    if (!context.string('id') && !context.string('name')) throw new UsageError('Must specify either the -id or -name parameters')
    const id = await roleId(context, 'read')
    printRole(context, await context.api(`Error reading role "${id}"`, () => context.client.acl.roles.read(id, context.consistency)))
  },
}

export const roleUpdate: Command = {
  path: 'acl role update',
  synopsis: 'Update an ACL role',
  help: `Usage: warden acl role update [options] (-id ID | -name NAME)

  Changes a role. The links given are added to the role's unless -no-merge is set, which replaces the role with
  what is given:

      $ warden acl role update -id 4be56c77 -description "web servers" -policy-name extra`,
  flags: {
    ...SELECT_FLAGS,
    name: { type: 'string', value: 'value', help: 'The role\'s name; with -id, its new name.' },
    description: { type: 'string', value: 'value', help: 'A new description.' },
    ...POLICY_LINK_FLAGS,
    ...IDENTITY_FLAGS,
    'no-merge': { type: 'boolean', help: 'Replace the role\'s links and description with what is given.' },
  },
  format: true,
  meta: true,
  async run(context) {
    const id = await roleId(context, 'update')
    const policies = await policyLinks(context)
    const services = serviceIdentities(context.list('service-identity'))
    const nodes = nodeIdentities(context.list('node-identity'))
    const templated = templatedPolicies(context)
    let body: RoleWrite
    if (context.boolean('no-merge')) {
      body = { ID: id, Name: context.required('name', 'Must specify the -name parameter with -no-merge'), Description: context.string('description') ?? '', Policies: policies, ServiceIdentities: services, NodeIdentities: nodes, ...(templated === undefined ? {} : { TemplatedPolicies: templated }) }
    } else {
      const current = await context.api('Error retrieving current role', () => context.client.acl.roles.read(id, context.consistency))
      const rename = context.string('id') !== undefined ? context.string('name') : undefined
      const mergedServices = [...(current.ServiceIdentities ?? [])]
      for (const identity of services) {
        const at = mergedServices.findIndex((item) => item.ServiceName === identity.ServiceName)
        if (at === -1) mergedServices.push(identity)
        else mergedServices[at] = identity
      }
      const mergedNodes = [...(current.NodeIdentities ?? [])]
      for (const identity of nodes) if (!mergedNodes.some((item) => item.NodeName === identity.NodeName && item.Datacenter === identity.Datacenter)) mergedNodes.push(identity)
      body = {
        ID: id,
        Name: rename !== undefined && rename !== '' ? rename : current.Name,
        Description: context.string('description') || current.Description,
        Policies: appendLinks(current.Policies, policies),
        ServiceIdentities: mergedServices,
        NodeIdentities: mergedNodes,
        TemplatedPolicies: [...(current.TemplatedPolicies ?? []), ...(templated ?? [])],
      }
    }
    printRole(context, await context.api(`Failed to update role ${id}`, () => context.client.acl.roles.update(id, body)))
  },
}

export const roleDelete: Command = {
  path: 'acl role delete',
  synopsis: 'Delete an ACL role',
  help: `Usage: warden acl role delete [options] (-id ID | -name NAME)

      $ warden acl role delete -name web`,
  flags: SELECT_FLAGS,
  async run(context) {
    const id = await roleId(context, 'delete')
    await context.api(`Error deleting role "${id}"`, () => context.client.acl.roles.delete(id))
    context.print(`Role "${id}" deleted successfully`)
  },
}

export const roleList: Command = {
  path: 'acl role list',
  synopsis: 'List ACL roles',
  help: `Usage: warden acl role list [options]

      $ warden acl role list`,
  flags: {},
  format: true,
  meta: true,
  async run(context) {
    const roles = await context.api('Failed to retrieve the role list', () => context.client.acl.roles.list(context.consistency))
    context.output(byName(roles), (value) => formatRoleList(value, context.meta))
  },
}
