/**
 * Synthetic policies must match Consul byte for byte: clients compare rules text, IDs and hashes, and replication
 * compares hashes. These tests pin the exact rules text of each identity kind, the quirky FNV-based ID, the Name, and
 * a Hash value computed outside this code base (Python's hashlib.blake2b and coreutils `b2sum -l 256`, over the
 * concatenation Consul's ACLPolicy.SetHash feeds the hash). They also pin the name rules of src/acl/names.ts, which
 * decide which names may ever reach a rules template.
 */
import { expect } from 'chai'
import { isValidIdentityName, isValidRecordName } from '../../../src/acl/names.js'
import {
  nodeIdentityPolicy,
  policyHash,
  serviceIdentityPolicy,
  syntheticPolicyId,
} from '../../../src/acl/synthetic-policies.js'

const FNV128A_OFFSET_BASIS_HEX = '6c62272e07bb014262b821756295c58d'

const WEB_RULES =
  '\nservice "web" {\n\tpolicy = "write"\n}\n' +
  'service "web-sidecar-proxy" {\n\tpolicy = "write"\n}\n' +
  'service_prefix "" {\n\tpolicy = "read"\n}\n' +
  'node_prefix "" {\n\tpolicy = "read"\n}'

describe('synthetic policies', () => {
  describe('service identity', () => {
    it('renders the exact rules text: leading newline, tab indentation, no final newline', () => {
      expect(serviceIdentityPolicy('web', []).Rules).to.equal(WEB_RULES)
    })

    it('describes itself with the quoted service name', () => {
      expect(serviceIdentityPolicy('web', []).Description).to.equal('synthetic policy for service identity "web"')
    })

    it('has an ID that starts with the hex of "\\nservice" and ends with the FNV-128a offset basis', () => {
      const policy = serviceIdentityPolicy('web', [])
      expect(policy.ID.startsWith('0a73657276696365')).to.equal(true)
      expect(policy.ID.endsWith(FNV128A_OFFSET_BASIS_HEX)).to.equal(true)
      expect(policy.ID).to.equal(Buffer.from(WEB_RULES, 'utf8').toString('hex') + FNV128A_OFFSET_BASIS_HEX)
    })

    it('is named synthetic-policy-<ID>', () => {
      const policy = serviceIdentityPolicy('web', [])
      expect(policy.Name).to.equal(`synthetic-policy-${policy.ID}`)
    })

    it('keeps its datacenters and zero indexes', () => {
      const policy = serviceIdentityPolicy('web', ['dc1', 'dc2'])
      expect(policy.Datacenters).to.deep.equal(['dc1', 'dc2'])
      expect(policy.CreateIndex).to.equal(0)
      expect(policy.ModifyIndex).to.equal(0)
      expect(serviceIdentityPolicy('web', []).Datacenters).to.deep.equal([])
    })

    it('does not share the caller datacenter array', () => {
      const datacenters = ['dc1']
      const policy = serviceIdentityPolicy('web', datacenters)
      datacenters.push('dc2')
      expect(policy.Datacenters).to.deep.equal(['dc1'])
    })
  })

  describe('node identity', () => {
    it('renders the exact rules text', () => {
      expect(nodeIdentityPolicy('node-1', 'dc1').Rules).to.equal(
        '\nnode "node-1" {\n\tpolicy = "write"\n}\nservice_prefix "" {\n\tpolicy = "read"\n}',
      )
    })

    it('describes itself with the quoted node name', () => {
      expect(nodeIdentityPolicy('node-1', 'dc1').Description).to.equal('synthetic policy for node identity "node-1"')
    })

    it('is valid only in its own datacenter', () => {
      expect(nodeIdentityPolicy('node-1', 'dc2').Datacenters).to.deep.equal(['dc2'])
    })

    it('has an ID that starts with the hex of "\\nnode" and a synthetic-policy- Name', () => {
      const policy = nodeIdentityPolicy('node-1', 'dc1')
      expect(policy.ID.startsWith(Buffer.from('\nnode', 'utf8').toString('hex'))).to.equal(true)
      expect(policy.Name).to.equal(`synthetic-policy-${policy.ID}`)
    })

    it('has the same ID in every datacenter, since the ID depends on the rules only', () => {
      expect(nodeIdentityPolicy('node-1', 'dc1').ID).to.equal(nodeIdentityPolicy('node-1', 'dc2').ID)
      expect(nodeIdentityPolicy('node-1', 'dc1').Hash).to.not.equal(nodeIdentityPolicy('node-1', 'dc2').Hash)
    })
  })

  describe('syntheticPolicyId', () => {
    it('is the hex of the rules followed by the FNV-128a digest of nothing (Go Hash.Sum appends)', () => {
      expect(syntheticPolicyId('')).to.equal(FNV128A_OFFSET_BASIS_HEX)
      expect(syntheticPolicyId('ab')).to.equal('6162' + FNV128A_OFFSET_BASIS_HEX)
    })
  })

  describe('Hash', () => {
    it('is 44 characters of padded base64 (32 bytes)', () => {
      const hash = serviceIdentityPolicy('web', []).Hash
      expect(hash).to.have.length(44)
      expect(hash).to.match(/^[A-Za-z0-9+/]{43}=$/)
      expect(Buffer.from(hash, 'base64')).to.have.length(32)
    })

    // Values computed independently: base64(BLAKE2b-256(Name || Description || Rules || dc...)) with Python's
    // hashlib.blake2b(digest_size=32), and for the dc1 case also with coreutils `b2sum -l 256`.
    it('matches BLAKE2b-256 over Name, Description, Rules and each datacenter, computed outside warden', () => {
      expect(serviceIdentityPolicy('web', []).Hash).to.equal('Yfu0J9M1SWxChniV97iRtuthwsKzTqFqUW9QDD2mwGg=')
      expect(serviceIdentityPolicy('web', ['dc1']).Hash).to.equal('H7caJdaAEqscDpQDYs11fz4Ofpy/kuf4l2PiL1kmw60=')
      expect(serviceIdentityPolicy('web', ['dc1', 'dc2']).Hash).to.equal(
        'RmRTll+DZgPTvn8GdiMnEwcNQK4+wIugCf5hEPxENnA=',
      )
    })

    it('is stable for the same input', () => {
      expect(serviceIdentityPolicy('web', ['dc1']).Hash).to.equal(serviceIdentityPolicy('web', ['dc1']).Hash)
      expect(nodeIdentityPolicy('n1', 'dc1').Hash).to.equal(nodeIdentityPolicy('n1', 'dc1').Hash)
    })

    it('changes when the rules change', () => {
      expect(serviceIdentityPolicy('web', []).Hash).to.not.equal(serviceIdentityPolicy('api', []).Hash)
    })

    it('changes when the datacenters change', () => {
      const none = serviceIdentityPolicy('web', []).Hash
      const one = serviceIdentityPolicy('web', ['dc1']).Hash
      const two = serviceIdentityPolicy('web', ['dc1', 'dc2']).Hash
      expect(new Set([none, one, two]).size).to.equal(3)
    })

    it('equals policyHash over the policy fields, and ignores the ID', () => {
      const policy = serviceIdentityPolicy('web', ['dc1'])
      expect(policyHash(policy)).to.equal(policy.Hash)
      const otherId = { ...policy, ID: 'something else' }
      expect(policyHash(otherId)).to.equal(policy.Hash)
    })

    it('writes the fields without separators, as Consul does', () => {
      // Moving a byte from Name to Description leaves the concatenation, and so the hash, unchanged.
      const a = policyHash({ Name: 'ab', Description: 'c', Rules: '', Datacenters: [] })
      const b = policyHash({ Name: 'a', Description: 'bc', Rules: '', Datacenters: [] })
      expect(a).to.equal(b)
    })
  })
})

describe('names', () => {
  describe('isValidIdentityName', () => {
    it('accepts lowercase alphanumerics with inner - and _', () => {
      for (const name of ['a', '0', 'web', 'web-1', 'web_db', 'a-b_c9']) {
        expect(isValidIdentityName(name), name).to.equal(true)
      }
    })

    it('rejects empty names, uppercase, other characters, and - or _ at either end', () => {
      for (const name of ['', 'Web', 'web.db', 'web db', '-web', 'web-', '_web', 'web_', 'wéb', 'web\n']) {
        expect(isValidIdentityName(name), JSON.stringify(name)).to.equal(false)
      }
    })

    it('accepts 256 characters and rejects 257', () => {
      expect(isValidIdentityName('a'.repeat(256))).to.equal(true)
      expect(isValidIdentityName('a'.repeat(257))).to.equal(false)
    })
  })

  describe('isValidRecordName', () => {
    it('accepts alphanumerics of either case, - and _ anywhere', () => {
      for (const name of ['a', 'Policy-1', '_x_', '-', 'A_b-C']) expect(isValidRecordName(name), name).to.equal(true)
    })

    it('rejects empty names and other characters, including /', () => {
      for (const name of ['', 'a b', 'a.b', 'builtin/x', 'ü']) expect(isValidRecordName(name), name).to.equal(false)
    })

    it('limits policy and auth method names to 128 characters and role names to 256', () => {
      expect(isValidRecordName('a'.repeat(128))).to.equal(true)
      expect(isValidRecordName('a'.repeat(129))).to.equal(false)
      expect(isValidRecordName('a'.repeat(128), 'auth-method')).to.equal(true)
      expect(isValidRecordName('a'.repeat(129), 'auth-method')).to.equal(false)
      expect(isValidRecordName('a'.repeat(256), 'role')).to.equal(true)
      expect(isValidRecordName('a'.repeat(257), 'role')).to.equal(false)
    })
  })
})
