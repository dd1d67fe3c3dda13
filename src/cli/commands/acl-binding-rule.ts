/** `warden acl binding-rule create|read|update|delete|list`, as Consul's. */
import type { BindingRule, BindingRuleWrite } from '../../api/index.js'
import { UsageError } from '../argv.js'
import type { Command, CommandContext } from '../command.js'
import { byCreation, formatBindingRule, formatBindingRuleList } from '../format.js'
import { fullId } from './acl-links.js'

const ID_FLAG = { id: { type: 'string' as const, value: 'value', help: 'The ID of the binding rule (a unique prefix will do).' } }
const FIELD_FLAGS = {
  description: { type: 'string' as const, value: 'value', help: 'A description of the binding rule.' },
  selector: { type: 'string' as const, value: 'value', help: 'A filter expression on the login\'s claims; the rule applies when it matches (always when empty).' },
  'bind-type': { type: 'string' as const, value: 'value', help: 'What a matching login gets: service, node, role or templated-policy.' },
  'bind-name': { type: 'string' as const, value: 'value', help: 'The name to bind, with ${claim} interpolation.' },
  'bind-vars': { type: 'string' as const, multiple: true, value: 'value', help: 'A variable of a templated-policy binding, NAME=VALUE. May be given more than once.' },
}

async function ruleId(context: CommandContext, verb: string): Promise<string> {
  const given = context.string('id')
  if (given === undefined || given === '') throw new UsageError(`Cannot ${verb} a binding rule without specifying the -id parameter`)
  return context.api('Error determining binding rule ID', () =>
    fullId('binding rule', given, async () => (await context.client.acl.bindingRules.list(context.consistency)).map((rule) => rule.ID)),
  )
}

function bindVars(context: CommandContext): Record<string, string> | undefined {
  const values = context.list('bind-vars')
  if (values.length === 0) return undefined
  const vars: Record<string, string> = {}
  for (const value of values) {
    const at = value.indexOf('=')
    if (at <= 0) throw new UsageError(`-bind-vars "${value}" must be of the form NAME=VALUE`)
    vars[value.slice(0, at)] = value.slice(at + 1)
  }
  return vars
}

const printRule = (context: CommandContext, rule: BindingRule): void => context.output(rule, (value) => formatBindingRule(value, context.meta))

export const bindingRuleCreate: Command = {
  path: 'acl binding-rule create',
  synopsis: 'Create an ACL binding rule',
  help: `Usage: warden acl binding-rule create -method METHOD -bind-type TYPE -bind-name NAME [options]

  Creates a binding rule: what a login through the method gets when its claims match the selector:

      $ warden acl binding-rule create -method ci -bind-type service -bind-name 'web-\${value.project}' -selector 'value.env==prod'`,
  flags: { method: { type: 'string', value: 'value', help: 'The auth method the rule belongs to. Required.' }, ...FIELD_FLAGS },
  format: true,
  meta: true,
  async run(context) {
    const body: BindingRuleWrite = {
      AuthMethod: context.required('method', "Missing required '-method' flag"),
      BindType: context.required('bind-type', "Missing required '-bind-type' flag"),
      BindName: context.required('bind-name', "Missing required '-bind-name' flag"),
      Description: context.string('description') ?? '',
      Selector: context.string('selector') ?? '',
    }
    const vars = bindVars(context)
    if (vars !== undefined) body.BindVars = vars
    printRule(context, await context.api('Failed to create new binding rule', () => context.client.acl.bindingRules.create(body)))
  },
}

export const bindingRuleRead: Command = {
  path: 'acl binding-rule read',
  synopsis: 'Read an ACL binding rule',
  help: `Usage: warden acl binding-rule read -id ID [options]

      $ warden acl binding-rule read -id 4be56c77`,
  flags: ID_FLAG,
  format: true,
  meta: true,
  async run(context) {
    const id = await ruleId(context, 'read')
    printRule(context, await context.api(`Error reading binding rule "${id}"`, () => context.client.acl.bindingRules.read(id, context.consistency)))
  },
}

export const bindingRuleUpdate: Command = {
  path: 'acl binding-rule update',
  synopsis: 'Update an ACL binding rule',
  help: `Usage: warden acl binding-rule update -id ID [options]

  Changes a binding rule; fields not given keep their values unless -no-merge is set (its auth method never changes):

      $ warden acl binding-rule update -id 4be56c77 -selector 'value.env==staging'`,
  flags: { ...ID_FLAG, ...FIELD_FLAGS, 'no-merge': { type: 'boolean', help: 'Replace the rule with what is given; fields not given take their defaults.' } },
  format: true,
  meta: true,
  async run(context) {
    const id = await ruleId(context, 'update')
    const current = await context.api('Error when retrieving current binding rule', () => context.client.acl.bindingRules.read(id, context.consistency))
    const merge = !context.boolean('no-merge')
    const pick = (flag: string, existing: string): string => context.string(flag) ?? (merge ? existing : '')
    const body: BindingRuleWrite = {
      ID: id,
      AuthMethod: current.AuthMethod,
      Description: pick('description', current.Description),
      Selector: pick('selector', current.Selector),
      BindType: merge ? pick('bind-type', current.BindType) : context.required('bind-type', 'Must specify -bind-type with -no-merge'),
      BindName: merge ? pick('bind-name', current.BindName) : context.required('bind-name', 'Must specify -bind-name with -no-merge'),
    }
    const vars = bindVars(context) ?? (merge ? current.BindVars : undefined)
    if (vars !== undefined) body.BindVars = vars
    printRule(context, await context.api(`Failed to update binding rule ${id}`, () => context.client.acl.bindingRules.update(id, body)))
  },
}

export const bindingRuleDelete: Command = {
  path: 'acl binding-rule delete',
  synopsis: 'Delete an ACL binding rule',
  help: `Usage: warden acl binding-rule delete -id ID [options]

      $ warden acl binding-rule delete -id 4be56c77`,
  flags: ID_FLAG,
  async run(context) {
    const id = await ruleId(context, 'delete')
    await context.api(`Error deleting binding rule "${id}"`, () => context.client.acl.bindingRules.delete(id))
    context.print(`Binding rule "${id}" deleted successfully`)
  },
}

export const bindingRuleList: Command = {
  path: 'acl binding-rule list',
  synopsis: 'List ACL binding rules',
  help: `Usage: warden acl binding-rule list [options]

      $ warden acl binding-rule list -method ci`,
  flags: { method: { type: 'string', value: 'value', help: 'Only the rules of this auth method.' } },
  format: true,
  meta: true,
  async run(context) {
    const method = context.string('method')
    const rules = await context.api('Failed to retrieve the binding rule list', () =>
      context.client.acl.bindingRules.list({ ...context.consistency, ...(method === undefined ? {} : { authMethod: method }) }),
    )
    context.output(byCreation(rules), (value) => formatBindingRuleList(value, context.meta))
  },
}
