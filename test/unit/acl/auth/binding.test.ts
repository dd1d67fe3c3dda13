/**
 * Binding an identity to what a login token carries: `${...}` interpolation, selector matching, the name checks on
 * interpolated results for each BindType, deduplication, namespace rules (first match wins), and the token
 * description built from Meta. Pure functions over literal rules and identities.
 */
import { expect } from 'chai'
import { thrown } from '../../../support/thrown.js'
import { bindIdentity, interpolate, InterpolationError, isEmptyBinding, selectorMatches } from '../../../../src/acl/auth/binding.js'
import { BindingError } from '../../../../src/acl/auth/errors.js'
import { jwtIdentity, kubernetesIdentity } from '../../../../src/acl/auth/identity.js'
import { loginDescription, planLogin } from '../../../../src/acl/auth/login.js'
import { bindNamespace } from '../../../../src/acl/auth/namespace-rules.js'
import type { AclAuthMethod, AclBindingRule } from '../../../../src/state/records.js'

let nextRule = 0
function rule(fields: Partial<AclBindingRule>): AclBindingRule {
  nextRule += 1
  return {
    ID: `00000000-0000-4000-8000-${String(nextRule).padStart(12, '0')}`,
    Description: '',
    AuthMethod: 'm',
    Selector: '',
    BindType: 'service',
    BindName: 'web',
    Namespace: 'default',
    CreateIndex: 1,
    ModifyIndex: 1,
    ...fields,
  }
}

function method(fields: Partial<AclAuthMethod> = {}): AclAuthMethod {
  return {
    Name: 'm',
    Type: 'jwt',
    DisplayName: '',
    Description: '',
    MaxTokenTTLMs: 0,
    TokenLocality: '',
    Config: {},
    NamespaceRules: [],
    Namespace: 'default',
    CreateIndex: 1,
    ModifyIndex: 1,
    ...fields,
  }
}

const identity = jwtIdentity(
  { sub: 'web', team: 'ops', display: 'Web Server', groups: ['eng', 'oncall'] },
  { sub: 'name', team: 'team', display: 'display', missing: 'absent' },
  { groups: 'groups' },
)

/** The BindingError `run` throws: its message is what the caller sees, its logDetail what the agent logs. */
const refusal = (run: () => unknown): BindingError => thrown(run, BindingError)

describe('binding identities at login', () => {
  describe('interpolate', () => {
    const variables = { 'value.name': 'web', 'value.team': 'ops', 'value.empty': '' }

    it('replaces each ${name} with its value, allowing spaces inside the braces', () => {
      expect(interpolate('${value.name}', variables)).to.equal('web')
      expect(interpolate('${value.team}-${ value.name }-x', variables)).to.equal('ops-web-x')
      expect(interpolate('pre${value.empty}post', variables)).to.equal('prepost')
    })

    it('takes the {{ name }} form of api.md\'s sample bodies as the same placeholder', () => {
      expect(interpolate('{{ value.name }}', variables)).to.equal('web')
      expect(interpolate('{{value.team}}-${value.name}-{{ value.name }}', variables)).to.equal('ops-web-web')
      expect(() => interpolate('{{ value.nope }}', variables)).to.throw(InterpolationError, 'unknown variable "value.nope"')
      expect(() => interpolate('x-{{ value.name', variables)).to.throw(InterpolationError, 'unterminated "{{"')
    })

    it('leaves text without placeholders alone, and reads $${ as a literal ${', () => {
      expect(interpolate('plain-name', variables)).to.equal('plain-name')
      expect(interpolate('$${value.name}', variables)).to.equal('${value.name}')
      expect(interpolate('a$b', variables)).to.equal('a$b')
    })

    it('refuses an unknown variable, listing the ones the method defines', () => {
      expect(() => interpolate('${value.nope}', variables)).to.throw(InterpolationError, 'unknown variable "value.nope" (this auth method defines value.name, value.team, value.empty)')
      expect(() => interpolate('${list.groups}', {})).to.throw(InterpolationError, 'defines none')
    })

    it('refuses an unterminated placeholder', () => {
      expect(() => interpolate('web-${value.name', variables)).to.throw(InterpolationError, 'unterminated')
    })
  })

  describe('selectorMatches', () => {
    it('matches everything with an empty selector', () => {
      expect(selectorMatches('', identity)).to.equal(true)
      expect(selectorMatches('   ', identity)).to.equal(true)
    })

    it('evaluates value.<name> and list.<name> for jwt and serviceaccount.* for kubernetes', () => {
      expect(selectorMatches('value.team == "ops" and "eng" in list.groups', identity)).to.equal(true)
      expect(selectorMatches('"sales" in list.groups', identity)).to.equal(false)
      expect(selectorMatches('value.absent is empty', identity)).to.equal(true)
      const account = kubernetesIdentity({ namespace: 'default', name: 'api', uid: 'u' })
      expect(selectorMatches('serviceaccount.namespace == "default" and serviceaccount.name == "api"', account)).to.equal(true)
      expect(selectorMatches('serviceaccount.namespace == "kube-system"', account)).to.equal(false)
    })

    it('matches nothing with a selector that does not parse', () => {
      expect(selectorMatches('value.team ==', identity)).to.equal(false)
    })
  })

  describe('bindIdentity', () => {
    it('applies every matching rule of every BindType, with names interpolated', () => {
      const bindings = bindIdentity(
        [
          rule({ BindType: 'service', BindName: '${value.name}' }),
          rule({ BindType: 'node', BindName: '${value.name}-node', Selector: 'value.team == "ops"' }),
          rule({ BindType: 'role', BindName: '${value.team}-Role' }),
          rule({ BindType: 'templated-policy', BindName: 'builtin/service', BindVars: { name: '${value.name}-tpl' } }),
          rule({ BindType: 'templated-policy', BindName: 'builtin/dns' }),
          rule({ BindType: 'service', BindName: 'never', Selector: 'value.team == "dev"' }),
        ],
        identity,
        'dc1',
      )
      expect(bindings).to.deep.equal({
        ServiceIdentities: [{ ServiceName: 'web' }],
        NodeIdentities: [{ NodeName: 'web-node', Datacenter: 'dc1' }],
        RoleNames: ['ops-Role'],
        TemplatedPolicies: [
          { TemplateName: 'builtin/service', TemplateID: '00000000-0000-0000-0000-000000000003', TemplateVariables: { name: 'web-tpl' } },
          { TemplateName: 'builtin/dns', TemplateID: '00000000-0000-0000-0000-000000000005' },
        ],
      })
    })

    it('merges duplicates from several rules', () => {
      const bindings = bindIdentity(
        [
          rule({ BindName: '${value.name}' }),
          rule({ BindName: 'web' }),
          rule({ BindType: 'templated-policy', BindName: 'builtin/node', BindVars: { name: 'n1' } }),
          rule({ BindType: 'templated-policy', BindName: 'builtin/node', BindVars: { Name: 'n1' } }),
        ],
        identity,
        'dc1',
      )
      expect(bindings.ServiceIdentities).to.deep.equal([{ ServiceName: 'web' }])
      expect(bindings.TemplatedPolicies).to.have.length(1)
    })

    it('fails a rule whose interpolated name is not valid for its BindType: the caller learns that, the log which rule and why', () => {
      const service = rule({ BindType: 'service', BindName: '${value.display}' })
      const error = refusal(() => bindIdentity([service], identity, 'dc1'))
      // Binding rules need acl:read, and whoever logs in may hold no token: no rule ID, template or result.
      expect(error.message).to.equal("Permission denied: a binding rule that matches the identity cannot apply to it (the agent's log says which and why)")
      expect(error.logDetail).to.equal(
        `binding rule ${service.ID} (BindType service) cannot apply: BindName "\${value.display}" gives "Web Server", which is not a valid service name ` +
          '(a service name is 1 to 256 lowercase letters, digits, "-" or "_", starting and ending with a letter or digit)',
      )
      expect(refusal(() => bindIdentity([rule({ BindType: 'node', BindName: '${value.absent}' })], identity, 'dc1')).logDetail).to.include('gives "", which is not a valid node name')
      expect(refusal(() => bindIdentity([rule({ BindType: 'role', BindName: 'r-${value.display}' })], identity, 'dc1')).logDetail).to.include('not a valid role name')
      expect(refusal(() => bindIdentity([rule({ BindName: '${value.typo}' })], identity, 'dc1')).logDetail).to.include('unknown variable "value.typo"')
    })

    it('fails a templated-policy rule whose interpolated variables break the template schema', () => {
      const invalid = refusal(() => bindIdentity([rule({ BindType: 'templated-policy', BindName: 'builtin/service', BindVars: { name: '${value.display}' } })], identity, 'dc1'))
      expect(invalid.message).not.to.include('Web Server')
      expect(invalid.logDetail).to.include('service identity "Web Server" has an invalid name')
      expect(refusal(() => bindIdentity([rule({ BindType: 'templated-policy', BindName: 'builtin/service', BindVars: { name: '${value.absent}' } })], identity, 'dc1')).logDetail).to.include('are not valid')
    })

    it('does not evaluate rules whose selector does not match, so their names are never checked', () => {
      const bindings = bindIdentity([rule({ BindName: '${value.display}', Selector: 'value.team == "dev"' })], identity, 'dc1')
      expect(isEmptyBinding(bindings)).to.equal(true)
    })
  })

  describe('planLogin', () => {
    it('refuses a login that binds nothing; only the log says whether the method has rules at all', () => {
      const none = refusal(() => planLogin(method(), [], identity, 'dc1'))
      const unmatched = refusal(() => planLogin(method(), [rule({ Selector: 'value.team == "dev"' })], identity, 'dc1'))
      for (const error of [none, unmatched]) expect(error.message).to.match(/yields no privilege: no binding rule matches the identity$/)
      expect(none.logDetail).to.match(/has no binding rules$/)
      expect(unmatched.logDetail).to.match(/^none of the 1 binding rules of auth method ".+" matches the identity$/)
    })
  })

  describe('bindNamespace', () => {
    const rules = [
      { Selector: 'value.team == "dev"', BindNamespace: 'dev' },
      { Selector: '"eng" in list.groups', BindNamespace: 'team-${value.team}' },
      { Selector: '', BindNamespace: 'fallback' },
    ]

    it('takes the first matching rule, interpolated', () => {
      expect(bindNamespace(method({ NamespaceRules: rules }), identity)).to.equal('team-ops')
    })

    it("keeps the method's namespace when no rule matches or the method is outside default", () => {
      expect(bindNamespace(method({ NamespaceRules: [rules[0]!] }), identity)).to.equal('default')
      expect(bindNamespace(method({ Namespace: 'team-a', NamespaceRules: rules }), identity)).to.equal('team-a')
    })

    it('fails when the interpolated namespace is not a valid namespace name', () => {
      const error = refusal(() => bindNamespace(method({ NamespaceRules: [{ Selector: '', BindNamespace: '${value.display}' }] }), identity))
      expect(error.message).not.to.include('Web Server')
      expect(error.logDetail).to.include('namespace rule 0 of the auth method cannot apply: BindNamespace "${value.display}" gives "Web Server", which is not a valid namespace')
    })
  })

  describe('loginDescription', () => {
    it('is Consul\'s prefix alone without Meta', () => {
      expect(loginDescription(undefined)).to.equal('token created via login')
      expect(loginDescription({})).to.equal('token created via login')
    })

    it('appends Meta as JSON with sorted keys and Go\'s HTML escapes', () => {
      expect(loginDescription({ pod: 'default/web', app: 'a<b>&c' })).to.equal('token created via login: {"app":"a\\u003cb\\u003e\\u0026c","pod":"default/web"}')
    })
  })
})
