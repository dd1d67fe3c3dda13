/** `warden acl templated-policy list|read|preview`, as Consul 1.17's. */
import type { Command } from '../command.js'
import { formatPolicy, formatTemplatedPolicy, formatTemplatedPolicyList } from '../format.js'
import { UsageError } from '../argv.js'

const NAME_FLAG = { name: { type: 'string' as const, value: 'value', help: 'The name of the templated policy, e.g. builtin/service.' } }

export const templatedPolicyList: Command = {
  path: 'acl templated-policy list',
  synopsis: 'List the templated policies',
  help: `Usage: warden acl templated-policy list [options]

      $ warden acl templated-policy list`,
  flags: {},
  format: true,
  async run(context) {
    const records = await context.api('Failed to retrieve the templated policies', () => context.client.acl.templatedPolicies.list())
    context.output(records, formatTemplatedPolicyList)
  },
}

export const templatedPolicyRead: Command = {
  path: 'acl templated-policy read',
  synopsis: 'Read a templated policy',
  help: `Usage: warden acl templated-policy read -name NAME [options]

      $ warden acl templated-policy read -name builtin/service`,
  flags: NAME_FLAG,
  format: true,
  async run(context) {
    const name = context.required('name', 'Must specify the -name parameter')
    const record = await context.api(`Error reading templated policy "${name}"`, () => context.client.acl.templatedPolicies.read(name))
    context.output(record, formatTemplatedPolicy)
  },
}

export const templatedPolicyPreview: Command = {
  path: 'acl templated-policy preview',
  synopsis: 'Show the policy a templated policy gives',
  help: `Usage: warden acl templated-policy preview -name NAME [-var name:VALUE] [options]

      $ warden acl templated-policy preview -name builtin/service -var name:api`,
  flags: { ...NAME_FLAG, var: { type: 'string', multiple: true, value: 'value', help: 'A variable, NAME:VALUE (only `name` today).' } },
  format: true,
  async run(context) {
    const name = context.required('name', 'Must specify the -name parameter')
    const variables: { name?: string } = {}
    for (const variable of context.list('var')) {
      const at = variable.indexOf(':')
      if (at <= 0) throw new UsageError(`-var "${variable}" must be of the form NAME:VALUE`)
      if (variable.slice(0, at) !== 'name') throw new UsageError(`-var "${variable.slice(0, at)}": templated policies take only the variable "name"`)
      variables.name = variable.slice(at + 1)
    }
    const policy = await context.api(`Failed to preview templated policy "${name}"`, () => context.client.acl.templatedPolicies.preview(name, variables))
    context.output(policy, (value) => formatPolicy(value, false))
  },
}
