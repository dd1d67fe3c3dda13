/**
 * Identity mapping for jwt and kubernetes auth methods: which claims reach `value.<name>` and `list.<name>` (plain
 * claim names and JSON pointers into nested claims), how claim values become strings (Consul's
 * stringifyMetadataValue), and that every mapped name is present even when its claim is absent. Pure functions,
 * checked against literal expectations.
 */
import { expect } from 'chai'
import { claimValue, emptyIdentity, jwtIdentity, kubernetesIdentity, stringifyClaim } from '../../../../src/acl/auth/identity.js'
import { InvalidBearerTokenError } from '../../../../src/acl/auth/errors.js'

describe('auth method identities', () => {
  describe('claimValue', () => {
    const claims = { sub: 'web', '/odd': 'x', org: { team: 'ops', 'a/b': 1, 'c~d': 2, units: ['alpha', 'beta'] } }

    it('reads a plain claim by name, even one that starts like a path inside a name', () => {
      expect(claimValue(claims, 'sub')).to.equal('web')
      expect(claimValue(claims, 'missing')).to.equal(undefined)
    })

    it('reads nested claims by JSON pointer, with ~1 and ~0 escapes and array indexes (RFC 6901)', () => {
      expect(claimValue(claims, '/org/team')).to.equal('ops')
      expect(claimValue(claims, '/org/a~1b')).to.equal(1)
      expect(claimValue(claims, '/org/c~0d')).to.equal(2)
      expect(claimValue(claims, '/org/units/1')).to.equal('beta')
    })

    it('finds nothing along a pointer that leaves the document, and never reaches the prototype chain', () => {
      expect(claimValue(claims, '/org/nope')).to.equal(undefined)
      expect(claimValue(claims, '/org/units/2')).to.equal(undefined)
      expect(claimValue(claims, '/org/units/01')).to.equal(undefined)
      expect(claimValue(claims, '/sub/length')).to.equal(undefined)
      expect(claimValue(claims, '/org/constructor')).to.equal(undefined)
      expect(claimValue(claims, '/__proto__')).to.equal(undefined)
    })
  })

  describe('stringifyClaim', () => {
    it('keeps strings, spells booleans, and truncates numbers to integers as Consul does', () => {
      expect(stringifyClaim('x')).to.equal('x')
      expect(stringifyClaim(true)).to.equal('true')
      expect(stringifyClaim(false)).to.equal('false')
      expect(stringifyClaim(42)).to.equal('42')
      expect(stringifyClaim(1.9)).to.equal('1')
      expect(stringifyClaim(-2.5)).to.equal('-2')
    })

    it('has no string for objects, lists and null', () => {
      expect(stringifyClaim({})).to.equal(undefined)
      expect(stringifyClaim([])).to.equal(undefined)
      expect(stringifyClaim(null)).to.equal(undefined)
    })
  })

  describe('jwtIdentity', () => {
    it('maps ClaimMappings to value.<name> and ListClaimMappings to list.<name>, including nested claims', () => {
      const identity = jwtIdentity(
        { sub: 'web', admin: true, org: { team: 'ops', ids: [7, 'x', ''] }, groups: ['eng', 'ops'] },
        { sub: 'name', admin: 'admin', '/org/team': 'team' },
        { groups: 'groups', '/org/ids': 'ids' },
      )
      expect(identity.selectable).to.deep.equal({
        value: { name: 'web', admin: 'true', team: 'ops' },
        list: { groups: ['eng', 'ops'], ids: ['7', 'x'] },
      })
      expect(identity.variables).to.deep.equal({ 'value.name': 'web', 'value.admin': 'true', 'value.team': 'ops' })
    })

    it('gives every mapped name a value even when its claim is absent or null: "" and []', () => {
      const identity = jwtIdentity({ team: null }, { sub: 'name', team: 'team' }, { groups: 'groups' })
      expect(identity.selectable).to.deep.equal({ value: { name: '', team: '' }, list: { groups: [] } })
      expect(identity.variables).to.deep.equal({ 'value.name': '', 'value.team': '' })
    })

    it('reads a single value where a list claim is expected as a list of one', () => {
      const identity = jwtIdentity({ groups: 'eng' }, {}, { groups: 'groups' })
      expect(identity.selectable).to.deep.equal({ value: {}, list: { groups: ['eng'] } })
    })

    it('does not interpolate lists: only value.<name> variables exist', () => {
      const identity = jwtIdentity({ groups: ['a'] }, {}, { groups: 'groups' })
      expect(identity.variables).to.deep.equal({})
    })

    it('refuses the token when a mapped claim has no string form, naming the claim', () => {
      expect(() => jwtIdentity({ org: { team: 'ops' } }, { org: 'org' })).to.throw(InvalidBearerTokenError, 'claim "org" is an object')
      expect(() => jwtIdentity({ groups: [['nested']] }, {}, { groups: 'groups' })).to.throw(InvalidBearerTokenError, 'list claim "groups" holds a list')
    })
  })

  describe('emptyIdentity', () => {
    it('lists what rules of a method may name, every field empty', () => {
      expect(emptyIdentity('jwt', { ClaimMappings: { sub: 'name' }, ListClaimMappings: { groups: 'groups' } })).to.deep.equal({
        selectable: { value: { name: '' }, list: { groups: [] } },
        variables: { 'value.name': '' },
      })
      expect(emptyIdentity('kubernetes', {})?.variables).to.have.keys('serviceaccount.namespace', 'serviceaccount.name', 'serviceaccount.uid')
      expect(emptyIdentity('aws-iam', {})?.variables).to.have.keys('entity_name', 'entity_id', 'account_id')
      expect(emptyIdentity('aws-iam', { EnableIAMEntityDetails: true, IAMEntityTags: ['team'] })).to.deep.equal({
        selectable: { entity_name: '', entity_id: '', account_id: '', entity_path: '', entity_tags: { team: '' } },
        variables: { entity_name: '', entity_id: '', account_id: '', entity_path: '', 'entity_tags.team': '' },
      })
      expect(emptyIdentity('no-such-type', {})).to.equal(undefined)
    })
  })

  describe('kubernetesIdentity', () => {
    it('exposes the service account as serviceaccount.namespace, .name and .uid, to selectors and interpolation alike', () => {
      const identity = kubernetesIdentity({ namespace: 'default', name: 'api', uid: 'u-1' })
      expect(identity.selectable).to.deep.equal({ serviceaccount: { namespace: 'default', name: 'api', uid: 'u-1' } })
      expect(identity.variables).to.deep.equal({
        'serviceaccount.namespace': 'default',
        'serviceaccount.name': 'api',
        'serviceaccount.uid': 'u-1',
      })
    })
  })
})
