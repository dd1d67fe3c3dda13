/**
 * The builtin templated policies: named rule templates that a token or role links with a few variables, and that
 * resolve to a synthetic policy (Consul's agent/structs/acl_templated_policy.go and the embedded files under
 * agent/structs/acltemplatedpolicy/). warden ships five of them; `builtin/nomad-server` is renamed
 * `builtin/scheduler-server` and keeps its TemplateID.
 *
 * Schema and Template strings are byte-exact copies of what Consul serves from its read and list endpoints, including
 * indentation (tabs, except the workload-identity schema, which uses two spaces) and the absence of a final newline.
 * Rendering substitutes `{{.Name}}` only: no builtin template uses any other Go template feature.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { assert } from '../lib/assert.js'
import { InvalidInputError, NotFoundError } from '../lib/errors.js'
import { isValidIdentityName } from './names.js'
import { syntheticPolicyFromRules, type SyntheticPolicy } from './synthetic-policies.js'

export interface TemplatedPolicyRecord {
  TemplateName: string
  /** Fixed UUID from Consul's reserved range; hidden from API responses by Consul, used for hashing and storage. */
  TemplateID: string
  /** A JSON-schema document as text, or `""` when the template takes no variables. */
  Schema: string
  Template: string
  Description?: string
}

export const TEMPLATE_SERVICE = 'builtin/service'
export const TEMPLATE_NODE = 'builtin/node'
export const TEMPLATE_DNS = 'builtin/dns'
export const TEMPLATE_SCHEDULER_SERVER = 'builtin/scheduler-server'
export const TEMPLATE_WORKLOAD_IDENTITY = 'builtin/workload-identity'

// Consul's service.json and node.json: tab-indented, with the inner definition indented by four tabs.
const IDENTITY_SCHEMA = [
  '{',
  '\t"type": "object",',
  '\t"properties": {',
  '\t\t"name": { "type": "string", "$ref": "#/definitions/min-length-one" }',
  '\t},',
  '\t"required": ["name"],',
  '\t"definitions": {',
  '\t\t"min-length-one": {',
  '\t\t\t\t"type": "string",',
  '\t\t\t\t"minLength": 1',
  '\t\t}',
  '\t}',
  '}',
].join('\n')

// Consul's workload-identity.json: the same schema, indented with two spaces.
const WORKLOAD_IDENTITY_SCHEMA = [
  '{',
  '  "type": "object",',
  '  "properties": {',
  '    "name": { "type": "string", "$ref": "#/definitions/min-length-one" }',
  '  },',
  '  "required": ["name"],',
  '  "definitions": {',
  '    "min-length-one": {',
  '      "type": "string",',
  '      "minLength": 1',
  '    }',
  '  }',
  '}',
].join('\n')

// Templates without variables have an empty schema, and Consul skips validation for them entirely.
const NO_VARIABLES_SCHEMA = ''

// The rules templates (Consul's policies/ce/*.hcl) start with a newline and end without one.
const SERVICE_TEMPLATE = [
  '',
  'service "{{.Name}}" {',
  '\tpolicy = "write"',
  '}',
  'service "{{.Name}}-sidecar-proxy" {',
  '\tpolicy = "write"',
  '}',
  'service_prefix "" {',
  '\tpolicy = "read"',
  '}',
  'node_prefix "" {',
  '\tpolicy = "read"',
  '}',
].join('\n')

const NODE_TEMPLATE = [
  '',
  'node "{{.Name}}" {',
  '\tpolicy = "write"',
  '}',
  'service_prefix "" {',
  '\tpolicy = "read"',
  '}',
].join('\n')

const DNS_TEMPLATE = [
  '',
  'node_prefix "" {',
  '\tpolicy = "read"',
  '}',
  'service_prefix "" {',
  '\tpolicy = "read"',
  '}',
  'query_prefix "" {',
  '\tpolicy = "read"',
  '}',
].join('\n')

// Consul's nomad-server.hcl, the only builtin template indented with two spaces.
const SCHEDULER_SERVER_TEMPLATE = [
  '',
  'acl = "write"',
  'agent_prefix "" {',
  '  policy = "read"',
  '}',
  'node_prefix "" {',
  '  policy = "read"',
  '}',
  'service_prefix "" {',
  '  policy = "write"',
  '}',
].join('\n')

// Consul's workload-identity.hcl, the only builtin template without a leading newline.
const WORKLOAD_IDENTITY_TEMPLATE = ['identity "{{.Name}}" {', '\tpolicy = "write"', '}'].join('\n')

function record(fields: TemplatedPolicyRecord): [string, TemplatedPolicyRecord] {
  return [fields.TemplateName, Object.freeze(fields)]
}

/** The five builtin templates, keyed by TemplateName. */
export const BUILTIN_TEMPLATED_POLICIES: ReadonlyMap<string, TemplatedPolicyRecord> = new Map([
  record({
    TemplateName: TEMPLATE_SERVICE,
    TemplateID: '00000000-0000-0000-0000-000000000003',
    Schema: IDENTITY_SCHEMA,
    Template: SERVICE_TEMPLATE,
    Description:
      'Gives the token or role permissions to register a service and discover services in the Consul catalog. ' +
      "It also gives the specified service's sidecar proxy the permission to discover and route traffic to other " +
      'services.',
  }),
  record({
    TemplateName: TEMPLATE_NODE,
    TemplateID: '00000000-0000-0000-0000-000000000004',
    Schema: IDENTITY_SCHEMA,
    Template: NODE_TEMPLATE,
    Description:
      'Gives the token or role permissions for a register an agent/node into the catalog. A node is typically a consul ' +
      'agent but can also be a physical server, cloud instance or a container.',
  }),
  record({
    TemplateName: TEMPLATE_DNS,
    TemplateID: '00000000-0000-0000-0000-000000000005',
    Schema: NO_VARIABLES_SCHEMA,
    Template: DNS_TEMPLATE,
    Description: 'Gives the token or role permissions for the Consul DNS to query services in the network.',
  }),
  record({
    TemplateName: TEMPLATE_SCHEDULER_SERVER,
    TemplateID: '00000000-0000-0000-0000-000000000006',
    Schema: NO_VARIABLES_SCHEMA,
    Template: SCHEDULER_SERVER_TEMPLATE,
    Description: 'Gives the token or role permissions required for integration with a scheduler server.',
  }),
  record({
    TemplateName: TEMPLATE_WORKLOAD_IDENTITY,
    TemplateID: '00000000-0000-0000-0000-000000000007',
    Schema: WORKLOAD_IDENTITY_SCHEMA,
    Template: WORKLOAD_IDENTITY_TEMPLATE,
    Description: 'Gives the token or role permissions for a specific workload identity.',
  }),
])

const templatesById: ReadonlyMap<string, TemplatedPolicyRecord> = new Map(
  [...BUILTIN_TEMPLATED_POLICIES.values()].map((template) => [template.TemplateID, template]),
)

// Each schema is compiled once, at module load, so that a broken builtin schema fails at start rather than on the
// first request. allErrors reports every broken rule, as Consul joins every gojsonschema error into its message.
const ajv = new Ajv({ allErrors: true })
const validators: ReadonlyMap<string, ValidateFunction> = new Map(
  [...BUILTIN_TEMPLATED_POLICIES.values()]
    .filter((template) => template.Schema !== NO_VARIABLES_SCHEMA)
    .map((template) => [template.TemplateName, ajv.compile(JSON.parse(template.Schema) as object)]),
)

// The templates whose `name` is interpolated into identity-style rules get the identity name rule on top of the
// schema, as Consul's ValidateTemplatedPolicy does for builtin/service and builtin/node.
const identityKindByTemplate: ReadonlyMap<string, string> = new Map([
  [TEMPLATE_SERVICE, 'service'],
  [TEMPLATE_NODE, 'node'],
])

// Accepts both `{{.Name}}` and `{{ .Name }}`, the two spellings Go templates treat alike.
const namePlaceholder = /\{\{\s*\.Name\s*\}\}/g

export function templatedPolicyByName(name: string): TemplatedPolicyRecord | undefined {
  return BUILTIN_TEMPLATED_POLICIES.get(name)
}

export function templatedPolicyById(id: string): TemplatedPolicyRecord | undefined {
  return templatesById.get(id)
}

/**
 * Checks a template's variables against its schema and, for builtin/service and builtin/node, the identity name rule.
 * Returns [] when they are valid, otherwise one message per broken rule, each starting with the variable's name.
 * Templates without variables accept anything, since Consul ignores their variables. Missing variables are checked
 * as an empty object, so a template that needs `name` reports `name: is required`.
 */
export function validateTemplateVariables(name: string, variables: Record<string, unknown> | undefined): string[] {
  const template = BUILTIN_TEMPLATED_POLICIES.get(name)
  if (template === undefined) return [`TemplateName: no such templated policy "${name}"`]
  const validate = validators.get(name)
  if (validate === undefined) return []

  const data = variables ?? {}
  const messages: string[] = []
  if (!validate(data)) {
    for (const error of validate.errors ?? []) messages.push(schemaErrorMessage(error))
  }
  const identityKind = identityKindByTemplate.get(name)
  const value = data['name']
  // An empty or non-string name already failed the schema; one message per broken rule is enough.
  if (identityKind !== undefined && typeof value === 'string' && value.length > 0 && !isValidIdentityName(value)) {
    messages.push(
      `name: ${identityKind} identity ${JSON.stringify(value)} has an invalid name. Only lowercase alphanumeric ` +
        `characters, '-' and '_' are allowed, starting and ending with an alphanumeric, at most 256 characters`,
    )
  }
  // With allErrors, a `type` next to a `$ref` that also checks the type reports the same failure twice.
  return [...new Set(messages)]
}

/**
 * Renders a builtin template into its synthetic policy. Throws NotFoundError for an unknown template name and
 * InvalidInputError when the variables break the template's rules, so a rendered policy always has valid rules.
 */
export function renderTemplatedPolicy(
  name: string,
  variables: Record<string, unknown> | undefined,
  datacenters: string[] = [],
): SyntheticPolicy {
  const template = BUILTIN_TEMPLATED_POLICIES.get(name)
  if (template === undefined) throw new NotFoundError(`templated policy "${name}" does not exist`)
  const messages = validateTemplateVariables(name, variables)
  if (messages.length > 0) throw new InvalidInputError(undefined, messages.join('; '))

  const rules = template.Template.replace(namePlaceholder, () => {
    const value = variables?.['name']
    // Only templates with a schema contain the placeholder, and their schema requires a string name.
    assert(typeof value === 'string', `template ${name} has a {{.Name}} placeholder but no required name variable`)
    return escapeLikeHtmlTemplate(value)
  })
  return syntheticPolicyFromRules(rules, `synthetic policy generated from templated policy: ${name}`, datacenters)
}

// Consul 1.17, the release that introduced templated policies and builtin/workload-identity, rendered them with Go's
// html/template, which escapes these characters in HTML text context. Later releases switched to text/template
// (hashicorp/consul#21303) and substitute the name raw. Identity names never contain these characters, so the two
// agree for builtin/service and builtin/node; only a workload identity name can differ, and there escaping is the
// safe choice: a raw '"' would end the quoted string and let the name inject rules (binding rules can put login
// claims into this variable).
const htmlTemplateEscapes: Readonly<Record<string, string>> = {
  '\0': '\uFFFD',
  '"': '&#34;',
  '&': '&amp;',
  "'": '&#39;',
  '+': '&#43;',
  '<': '&lt;',
  '>': '&gt;',
}

function escapeLikeHtmlTemplate(value: string): string {
  return value.replace(/[\0"&'+<>]/g, (character) => htmlTemplateEscapes[character] ?? character)
}

function schemaErrorMessage(error: ErrorObject): string {
  if (error.keyword === 'required') {
    const missing = (error.params as { missingProperty?: unknown }).missingProperty
    return `${String(missing)}: is required`
  }
  return `${fieldOfPointer(error.instancePath)}: ${error.message ?? 'is invalid'}`
}

// Turns ajv's JSON pointer (`/name`) into the variable's name; the root is the variables object itself.
function fieldOfPointer(pointer: string): string {
  if (pointer === '') return 'TemplateVariables'
  return pointer
    .slice(1)
    .split('/')
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.')
}
