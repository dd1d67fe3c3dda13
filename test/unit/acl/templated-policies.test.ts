/**
 * The builtin templated policies must serve the same Schema and Template bytes as Consul, validate variables the way
 * Consul's ValidateTemplatedPolicy does (JSON schema, plus the identity name rule for builtin/service and
 * builtin/node), and render to the same synthetic policy. The tests check each template's records and rendered rules
 * against literal text, the validation messages for each kind of bad input, and that builtin/service renders exactly
 * the policy of a service identity with the same name.
 */
import { expect } from 'chai'
import { InvalidInputError, NotFoundError } from '../../../src/lib/errors.js'
import { serviceIdentityPolicy, nodeIdentityPolicy, policyHash } from '../../../src/acl/synthetic-policies.js'
import {
  BUILTIN_TEMPLATED_POLICIES,
  renderTemplatedPolicy,
  templatedPolicyById,
  templatedPolicyByName,
  validateTemplateVariables,
} from '../../../src/acl/templated-policies.js'

const TAB_SCHEMA =
  '{\n\t"type": "object",\n\t"properties": {\n\t\t"name": { "type": "string", "$ref": "#/definitions/min-length-one" }\n\t},\n' +
  '\t"required": ["name"],\n\t"definitions": {\n\t\t"min-length-one": {\n\t\t\t\t"type": "string",\n\t\t\t\t"minLength": 1\n\t\t}\n\t}\n}'

const SPACE_SCHEMA =
  '{\n  "type": "object",\n  "properties": {\n    "name": { "type": "string", "$ref": "#/definitions/min-length-one" }\n  },\n' +
  '  "required": ["name"],\n  "definitions": {\n    "min-length-one": {\n      "type": "string",\n      "minLength": 1\n    }\n  }\n}'

describe('templated policies', () => {
  describe('records', () => {
    it('has exactly the five builtin templates with their fixed IDs', () => {
      const ids = Object.fromEntries([...BUILTIN_TEMPLATED_POLICIES].map(([name, record]) => [name, record.TemplateID]))
      expect(ids).to.deep.equal({
        'builtin/service': '00000000-0000-0000-0000-000000000003',
        'builtin/node': '00000000-0000-0000-0000-000000000004',
        'builtin/dns': '00000000-0000-0000-0000-000000000005',
        'builtin/scheduler-server': '00000000-0000-0000-0000-000000000006',
        'builtin/workload-identity': '00000000-0000-0000-0000-000000000007',
      })
      for (const [name, record] of BUILTIN_TEMPLATED_POLICIES) expect(record.TemplateName).to.equal(name)
    })

    it('finds records by name and by ID, and nothing for unknown ones', () => {
      expect(templatedPolicyByName('builtin/dns')?.TemplateID).to.equal('00000000-0000-0000-0000-000000000005')
      expect(templatedPolicyById('00000000-0000-0000-0000-000000000006')?.TemplateName).to.equal(
        'builtin/scheduler-server',
      )
      expect(templatedPolicyByName('builtin/nomad-server')).to.equal(undefined)
      expect(templatedPolicyByName('builtin/api-gateway')).to.equal(undefined)
      expect(templatedPolicyById('00000000-0000-0000-0000-000000000008')).to.equal(undefined)
    })

    it('serves the tab-indented identity schema for service and node, and none for dns and scheduler-server', () => {
      expect(templatedPolicyByName('builtin/service')?.Schema).to.equal(TAB_SCHEMA)
      expect(templatedPolicyByName('builtin/node')?.Schema).to.equal(TAB_SCHEMA)
      expect(templatedPolicyByName('builtin/dns')?.Schema).to.equal('')
      expect(templatedPolicyByName('builtin/scheduler-server')?.Schema).to.equal('')
    })

    it('serves a two-space-indented schema for workload-identity', () => {
      expect(templatedPolicyByName('builtin/workload-identity')?.Schema).to.equal(SPACE_SCHEMA)
    })

    it('serves each template text exactly', () => {
      expect(templatedPolicyByName('builtin/service')?.Template).to.equal(
        '\nservice "{{.Name}}" {\n\tpolicy = "write"\n}\nservice "{{.Name}}-sidecar-proxy" {\n\tpolicy = "write"\n}\n' +
          'service_prefix "" {\n\tpolicy = "read"\n}\nnode_prefix "" {\n\tpolicy = "read"\n}',
      )
      expect(templatedPolicyByName('builtin/node')?.Template).to.equal(
        '\nnode "{{.Name}}" {\n\tpolicy = "write"\n}\nservice_prefix "" {\n\tpolicy = "read"\n}',
      )
      expect(templatedPolicyByName('builtin/dns')?.Template).to.equal(
        '\nnode_prefix "" {\n\tpolicy = "read"\n}\nservice_prefix "" {\n\tpolicy = "read"\n}\n' +
          'query_prefix "" {\n\tpolicy = "read"\n}',
      )
      expect(templatedPolicyByName('builtin/scheduler-server')?.Template).to.equal(
        '\nacl = "write"\nagent_prefix "" {\n  policy = "read"\n}\nnode_prefix "" {\n  policy = "read"\n}\n' +
          'service_prefix "" {\n  policy = "write"\n}',
      )
      expect(templatedPolicyByName('builtin/workload-identity')?.Template).to.equal(
        'identity "{{.Name}}" {\n\tpolicy = "write"\n}',
      )
    })

    it('keeps every schema parseable JSON', () => {
      for (const record of BUILTIN_TEMPLATED_POLICIES.values()) {
        if (record.Schema !== '') expect(() => JSON.parse(record.Schema), record.TemplateName).to.not.throw()
      }
    })

    it('cannot be changed by a caller', () => {
      const record = templatedPolicyByName('builtin/dns')
      expect(Object.isFrozen(record)).to.equal(true)
    })
  })

  describe('validateTemplateVariables', () => {
    it('accepts a valid name', () => {
      expect(validateTemplateVariables('builtin/service', { name: 'api' })).to.deep.equal([])
      expect(validateTemplateVariables('builtin/node', { name: 'node-1' })).to.deep.equal([])
      expect(validateTemplateVariables('builtin/workload-identity', { name: 'Any Thing' })).to.deep.equal([])
    })

    it('reports a missing name, also when no variables are given at all', () => {
      expect(validateTemplateVariables('builtin/service', {})).to.deep.equal(['name: is required'])
      expect(validateTemplateVariables('builtin/service', undefined)).to.deep.equal(['name: is required'])
      expect(validateTemplateVariables('builtin/workload-identity', {})).to.deep.equal(['name: is required'])
    })

    it('reports an empty name once', () => {
      expect(validateTemplateVariables('builtin/node', { name: '' })).to.deep.equal([
        'name: must NOT have fewer than 1 characters',
      ])
    })

    it('reports a name that is not a string once', () => {
      expect(validateTemplateVariables('builtin/service', { name: 5 })).to.deep.equal(['name: must be string'])
      expect(validateTemplateVariables('builtin/workload-identity', { name: null })).to.deep.equal([
        'name: must be string',
      ])
    })

    it('applies the identity name rule to builtin/service and builtin/node', () => {
      const service = validateTemplateVariables('builtin/service', { name: 'Web' })
      expect(service).to.have.length(1)
      expect(service[0]).to.match(/^name: service identity "Web" has an invalid name/)
      const node = validateTemplateVariables('builtin/node', { name: 'node.1' })
      expect(node).to.have.length(1)
      expect(node[0]).to.match(/^name: node identity "node.1" has an invalid name/)
      expect(validateTemplateVariables('builtin/service', { name: 'a'.repeat(257) })).to.have.length(1)
    })

    it('does not apply the identity name rule to builtin/workload-identity', () => {
      expect(validateTemplateVariables('builtin/workload-identity', { name: 'Web.1' })).to.deep.equal([])
    })

    it('accepts undefined, {} and any variables for templates without variables', () => {
      for (const name of ['builtin/dns', 'builtin/scheduler-server']) {
        expect(validateTemplateVariables(name, undefined), name).to.deep.equal([])
        expect(validateTemplateVariables(name, {}), name).to.deep.equal([])
        expect(validateTemplateVariables(name, { name: 5 }), name).to.deep.equal([])
      }
    })

    it('reports an unknown template', () => {
      expect(validateTemplateVariables('builtin/nope', { name: 'x' })).to.deep.equal([
        'TemplateName: no such templated policy "builtin/nope"',
      ])
    })
  })

  describe('renderTemplatedPolicy', () => {
    it('renders builtin/service exactly as the service identity of the same name, except the description', () => {
      const rendered = renderTemplatedPolicy('builtin/service', { name: 'api' })
      const identity = serviceIdentityPolicy('api', [])
      expect(rendered.Rules).to.equal(identity.Rules)
      expect(rendered.ID).to.equal(identity.ID)
      expect(rendered.ID.startsWith('0a73657276696365')).to.equal(true)
      expect(rendered.Name).to.equal(`synthetic-policy-${rendered.ID}`)
      expect(rendered.Description).to.equal('synthetic policy generated from templated policy: builtin/service')
      expect(rendered.Datacenters).to.deep.equal([])
      expect(rendered.CreateIndex).to.equal(0)
      expect(rendered.ModifyIndex).to.equal(0)
      expect(rendered.Hash).to.equal(policyHash(rendered))
      expect(rendered.Hash).to.have.length(44)
    })

    it('renders builtin/node as the node identity rules', () => {
      expect(renderTemplatedPolicy('builtin/node', { name: 'node-1' }).Rules).to.equal(
        nodeIdentityPolicy('node-1', 'dc1').Rules,
      )
    })

    it('renders templates without variables from undefined or {}', () => {
      const dns = renderTemplatedPolicy('builtin/dns', undefined)
      expect(dns.Rules).to.equal(templatedPolicyByName('builtin/dns')?.Template)
      expect(renderTemplatedPolicy('builtin/dns', {}).ID).to.equal(dns.ID)
      const scheduler = renderTemplatedPolicy('builtin/scheduler-server', {})
      expect(scheduler.Rules.startsWith('\nacl = "write"\n')).to.equal(true)
      expect(scheduler.Description).to.equal(
        'synthetic policy generated from templated policy: builtin/scheduler-server',
      )
    })

    it('renders builtin/workload-identity without a leading newline', () => {
      const policy = renderTemplatedPolicy('builtin/workload-identity', { name: 'w1' })
      expect(policy.Rules).to.equal('identity "w1" {\n\tpolicy = "write"\n}')
      expect(policy.ID.startsWith(Buffer.from('identity', 'utf8').toString('hex'))).to.equal(true)
    })

    it('escapes a workload identity name as Go html/template does, so a quote cannot end the string', () => {
      const policy = renderTemplatedPolicy('builtin/workload-identity', { name: `a" {} x "b&'+<>` })
      expect(policy.Rules).to.equal('identity "a&#34; {} x &#34;b&amp;&#39;&#43;&lt;&gt;" {\n\tpolicy = "write"\n}')
    })

    it('substitutes a name with $ patterns literally', () => {
      expect(renderTemplatedPolicy('builtin/workload-identity', { name: "$&$'$1" }).Rules).to.equal(
        'identity "$&amp;$&#39;$1" {\n\tpolicy = "write"\n}',
      )
    })

    it('keeps the given datacenters, which feed the Hash but not the ID', () => {
      const everywhere = renderTemplatedPolicy('builtin/service', { name: 'api' })
      const dc1 = renderTemplatedPolicy('builtin/service', { name: 'api' }, ['dc1'])
      expect(dc1.Datacenters).to.deep.equal(['dc1'])
      expect(dc1.ID).to.equal(everywhere.ID)
      expect(dc1.Hash).to.not.equal(everywhere.Hash)
      expect(renderTemplatedPolicy('builtin/service', { name: 'api' }, ['dc1']).Hash).to.equal(dc1.Hash)
    })

    it('throws InvalidInputError naming the variable when the variables are invalid', () => {
      expect(() => renderTemplatedPolicy('builtin/service', {}))
        .to.throw(InvalidInputError)
        .with.property('message', 'name: is required')
      expect(() => renderTemplatedPolicy('builtin/service', { name: 'Bad Name' })).to.throw(InvalidInputError, /^name: /)
    })

    it('throws NotFoundError for an unknown template', () => {
      expect(() => renderTemplatedPolicy('builtin/nomad-server', undefined)).to.throw(NotFoundError)
    })
  })
})
