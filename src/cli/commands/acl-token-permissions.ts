/**
 * `warden acl token permissions -accessor-id ID` (issue 21; Consul has no such command): what a token may do in the
 * datacenter that answers, read from GET /v1/acl/token/:AccessorID/permissions. The text form is one table, a row per
 * rule (and per "what decides otherwise"), with the sources that decided each; `-format json` prints the API's JSON.
 */
import type { PermissionRule, PermissionSource, TokenPermissions } from '../../api/index.js'
import { UsageError } from '../argv.js'
import type { Command } from '../command.js'
import { fullId } from './acl-links.js'

export const tokenPermissions: Command = {
  path: 'acl token permissions',
  synopsis: 'Show what an ACL token may do, and what decides it',
  help: `Usage: warden acl token permissions [options] -accessor-id TOKENID

  Shows a token's effective permissions in this datacenter: for every resource, the rules that apply (exact and
  prefix), the access each grants, and the policy, role, identity, templated policy or default policy that decided
  it. Needs acl:read:

      $ warden acl token permissions -accessor-id 4be56c77
      $ warden acl token permissions -accessor-id 4be56c77 -format json`,
  flags: { 'accessor-id': { type: 'string', value: 'value', help: 'The AccessorID of the token (a unique prefix will do).', aliases: ['id'] } },
  format: true,
  async run(context) {
    const given = context.string('accessor-id')
    if (given === undefined || given === '') throw new UsageError('Cannot show the permissions of a token without specifying the -accessor-id parameter')
    const { client } = context
    const id = await context.api('Error determining token ID', () =>
      fullId('token', given, async () => (await client.acl.tokens.list(context.consistency)).map((token) => token.AccessorID)),
    )
    const permissions = await context.api(`Error reading the permissions of token "${id}"`, () => client.acl.tokens.permissions(id, context.consistency))
    context.output(permissions, formatPermissions)
  },
}

/** The header lines, the sources that do not count here, then the table. */
export function formatPermissions(permissions: TokenPermissions): string {
  let text = `AccessorID:       ${permissions.AccessorID}\nDatacenter:       ${permissions.Datacenter}\n`
  text += `Default Policy:   ${permissions.DefaultPolicy}\nManagement:       ${permissions.Management}\n`
  const ignored = permissions.Sources.filter((source) => !source.AppliesHere)
  if (ignored.length > 0) text += `Not in ${permissions.Datacenter}:\n${ignored.map((source) => `   ${sourceText(source)}\n`).join('')}`
  const rows: string[][] = [['RESOURCE', 'RULE', 'ACCESS', 'GRANTS', 'DECIDED BY']]
  for (const [resource, view] of Object.entries(permissions.Resources)) {
    for (const rule of view.Rules) rows.push([resource, ruleText(rule), accessText(rule), grantsText(rule.Grants), decidersText(rule)])
    const otherwise = view.Otherwise
    if (otherwise !== undefined) {
      const where = view.Rules.length === 0 ? '(no rule)' : '(any other name)'
      rows.push([resource, where, otherwise.Access, grantsText(otherwise.Grants), otherwise.DecidedBy.map(sourceText).join(', ')])
    }
  }
  return `${text}\n${table(rows)}`
}

/** The rule as written: `service_prefix "web-"`, `operator` (plain keywords), `service "web" intentions`. */
function ruleText(rule: PermissionRule): string {
  const named = rule.Segment === undefined ? rule.Keyword : `${rule.Keyword} ${JSON.stringify(rule.Segment)}`
  return rule.Attribute === 'intentions' ? `${named} intentions` : named
}

function accessText(rule: PermissionRule): string {
  return rule.Derived === true ? `${rule.Access} (from policy)` : rule.Access
}

function grantsText(grants: string[]): string {
  return grants.length === 0 ? '-' : grants.join(', ')
}

/** Who decided, then whom the merge overrode: `policy ops, service identity web (over policy web-read: read)`. */
function decidersText(rule: PermissionRule): string {
  const decided = rule.DecidedBy.map(sourceText).join(', ')
  const overridden = (rule.Overridden ?? []).map((source) => `${sourceText(source)}: ${source.Access}`)
  return overridden.length === 0 ? decided : `${decided} (over ${overridden.join(', ')})`
}

function sourceText(source: PermissionSource): string {
  const roles = (source.Via ?? []).flatMap((link) => (link.Type === 'role' ? [link.Name] : []))
  const byToken = (source.Via ?? []).some((link) => link.Type === 'token')
  const through = roles.length === 0 || byToken ? '' : ` via role ${roles.join(', ')}`
  switch (source.Type) {
    case 'policy':
      return `policy ${source.Name}${through}`
    case 'service-identity':
      return `service identity ${source.Name}${through}`
    case 'node-identity':
      return `node identity ${source.Name}${through}`
    case 'templated-policy': {
      const name = source.TemplateVariables?.['name']
      return `templated policy ${source.Name}${typeof name === 'string' ? ` (name ${name})` : ''}${through}`
    }
    case 'default-policy':
      return `default policy ${source.Name}`
  }
}

/** Columns padded to their widest cell, two spaces apart; the last column is not padded. */
function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length)))
  return rows
    .map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column] ?? 0))).join('  '))
    .join('\n')
}
