/** `warden acl policy create|read|update|delete|list`, as Consul's. */
import type { Policy, PolicyWrite } from '../../api/index.js'
import { UsageError } from '../argv.js'
import { CommandError, type Command, type CommandContext } from '../command.js'
import { byName, formatPolicy, formatPolicyList } from '../format.js'
import { FileError, valueOrFile } from '../io.js'
import { policyIdResolver } from './acl-links.js'

const RULES_HELP = 'The rules (HCL or JSON): the text, @FILE to read a file, or - to read standard input.'

/** The policy named by -id (a unique prefix will do) or -name. */
async function policyId(context: CommandContext, verb: string): Promise<string> {
  const id = context.string('id')
  const name = context.string('name')
  if (id !== undefined && id !== '') return context.api('Error determining policy ID', () => policyIdResolver(context.client, context.consistency)(id))
  if (name !== undefined && name !== '') {
    const policy = await context.api(`Error reading policy "${name}"`, () => context.client.acl.policies.readByName(name, context.consistency))
    return policy.ID
  }
  throw new UsageError(`Cannot ${verb} a policy without specifying the -id or -name parameter`)
}

const printPolicy = (context: CommandContext, policy: Policy): void => context.output(policy, (value) => formatPolicy(value, context.meta))

export const policyCreate: Command = {
  path: 'acl policy create',
  synopsis: 'Create an ACL policy',
  help: `Usage: warden acl policy create -name NAME [options]

  Creates a policy:

      $ warden acl policy create -name web-write -rules @web.hcl
      $ echo 'service "web" { policy = "write" }' | warden acl policy create -name web-write -rules -`,
  flags: {
    name: { type: 'string', value: 'value', help: 'The new policy\'s name. Required.' },
    description: { type: 'string', value: 'value', help: 'A description of the policy.' },
    rules: { type: 'string', value: 'value', help: RULES_HELP },
    'valid-datacenter': { type: 'string', multiple: true, value: 'value', help: 'A datacenter the policy is valid in. May be given more than once; all when absent.' },
  },
  format: true,
  meta: true,
  async run(context) {
    const name = context.required('name')
    const body: PolicyWrite = { Name: name, Description: context.string('description') ?? '', Datacenters: context.list('valid-datacenter') }
    const rules = context.string('rules')
    if (rules !== undefined) body.Rules = await readRules(context, rules)
    printPolicy(context, await context.api('Failed to create new policy', () => context.client.acl.policies.create(body)))
  },
}

async function readRules(context: CommandContext, value: string): Promise<string> {
  try {
    return await valueOrFile(context.io, value)
  } catch (error) {
    if (error instanceof FileError) throw new CommandError(`Failed to read -rules: ${error.message}`)
    throw error
  }
}

export const policyRead: Command = {
  path: 'acl policy read',
  synopsis: 'Read an ACL policy',
  help: `Usage: warden acl policy read [options] (-id ID | -name NAME)

  Shows one policy with its rules:

      $ warden acl policy read -name global-management`,
  flags: {
    id: { type: 'string', value: 'value', help: 'The ID of the policy (a unique prefix will do).' },
    name: { type: 'string', value: 'value', help: 'The name of the policy.' },
  },
  format: true,
  meta: true,
  async run(context) {
    const id = context.string('id')
    const name = context.string('name')
    if ((id === undefined || id === '') && (name === undefined || name === '')) throw new UsageError('Must specify either the -id or -name parameters')
    const policy =
      id !== undefined && id !== ''
        ? await context.api('Error reading policy', async () => context.client.acl.policies.read(await policyIdResolver(context.client, context.consistency)(id), context.consistency))
        : await context.api(`Error reading policy "${name}"`, () => context.client.acl.policies.readByName(name!, context.consistency))
    printPolicy(context, policy)
  },
}

export const policyUpdate: Command = {
  path: 'acl policy update',
  synopsis: 'Update an ACL policy',
  help: `Usage: warden acl policy update [options] (-id ID | -name NAME)

  Changes a policy. Fields not given keep their values unless -no-merge is set:

      $ warden acl policy update -name web-write -rules @web.hcl
      $ warden acl policy update -id 4be56c77 -name web-write-2 -description "renamed"`,
  flags: {
    id: { type: 'string', value: 'value', help: 'The ID of the policy (a unique prefix will do).' },
    name: { type: 'string', value: 'value', help: 'The policy\'s name; with -id, its new name.' },
    description: { type: 'string', value: 'value', help: 'A new description.' },
    rules: { type: 'string', value: 'value', help: RULES_HELP },
    'valid-datacenter': { type: 'string', multiple: true, value: 'value', help: 'A datacenter the policy is valid in. May be given more than once.' },
    'no-merge': { type: 'boolean', help: 'Replace the policy with what is given; fields not given take their defaults.' },
  },
  format: true,
  meta: true,
  async run(context) {
    const id = await policyId(context, 'update')
    const rules = context.string('rules') === undefined ? undefined : await readRules(context, context.string('rules')!)
    const description = context.string('description')
    const datacenters = context.list('valid-datacenter')
    let body: PolicyWrite
    if (context.boolean('no-merge')) {
      body = { ID: id, Name: context.required('name', 'Must specify the -name parameter with -no-merge'), Description: description ?? '', Rules: rules ?? '', Datacenters: datacenters }
    } else {
      const current = await context.api('Error retrieving current policy', () => context.client.acl.policies.read(id, context.consistency))
      const name = context.string('id') !== undefined ? context.string('name') : undefined
      body = {
        ID: id,
        Name: name !== undefined && name !== '' ? name : current.Name,
        Description: description ?? current.Description,
        Rules: rules ?? current.Rules ?? '',
        Datacenters: datacenters.length > 0 ? datacenters : (current.Datacenters ?? []),
      }
    }
    printPolicy(context, await context.api(`Failed to update policy ${id}`, () => context.client.acl.policies.update(id, body)))
  },
}

export const policyDelete: Command = {
  path: 'acl policy delete',
  synopsis: 'Delete an ACL policy',
  help: `Usage: warden acl policy delete [options] (-id ID | -name NAME)

  Deletes a policy; tokens and roles linking it lose the link:

      $ warden acl policy delete -name web-write`,
  flags: {
    id: { type: 'string', value: 'value', help: 'The ID of the policy (a unique prefix will do).' },
    name: { type: 'string', value: 'value', help: 'The name of the policy.' },
  },
  async run(context) {
    const id = await policyId(context, 'delete')
    await context.api(`Error deleting policy "${id}"`, () => context.client.acl.policies.delete(id))
    context.print(`Policy "${id}" deleted successfully`)
  },
}

export const policyList: Command = {
  path: 'acl policy list',
  synopsis: 'List ACL policies',
  help: `Usage: warden acl policy list [options]

  Lists every policy (without rules):

      $ warden acl policy list`,
  flags: {},
  format: true,
  meta: true,
  async run(context) {
    const policies = await context.api('Failed to retrieve the policy list', () => context.client.acl.policies.list(context.consistency))
    context.output(byName(policies), (value) => formatPolicyList(value, context.meta))
  },
}
