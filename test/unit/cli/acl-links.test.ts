/**
 * The link flags ACL commands share (src/cli/commands/acl-links.ts). Goal: -service-identity, -node-identity,
 * -templated-policy with -var, -policy-id/-role-id prefixes and the -append-* merge turn into the API's link shapes
 * the way Consul's helpers do (command/acl/acl_helpers.go: ExtractServiceIdentities, ExtractNodeIdentities,
 * GetPolicyIDFromPartial and kin), and refuse malformed values as usage errors. Method: the pure functions on
 * literal values; templatedPolicies through a CommandContext built from flags parsed by parseFlags, as a command
 * gets it; fullId with an `ids` stand-in that counts its calls (no agent, no HTTP).
 */
import { expect } from 'chai'
import type { WardenClient } from '../../../src/api/index.js'
import { parseFlags, UsageError } from '../../../src/cli/argv.js'
import { CommandContext, CommandError, type Command } from '../../../src/cli/command.js'
import {
  appendLinks,
  fullId,
  IDENTITY_FLAGS,
  linksOf,
  nodeIdentities,
  policyIdResolver,
  roleIdResolver,
  serviceIdentities,
  templatedPolicies,
} from '../../../src/cli/commands/acl-links.js'
import { thrown } from '../../support/thrown.js'
import { MemoryIo } from './memory-io.js'

const FAKE: Command = { path: 'test links', synopsis: '', help: 'Usage: warden test links', flags: IDENTITY_FLAGS, http: false, run: async () => {} }

function contextOf(argv: string[]): CommandContext {
  return new CommandContext(FAKE, parseFlags(argv, IDENTITY_FLAGS), new MemoryIo())
}

async function rejection<E extends Error>(promise: Promise<unknown>, type: abstract new (...args: never[]) => E): Promise<E> {
  try {
    await promise
  } catch (error) {
    if (error instanceof type) return error
    throw error
  }
  throw new Error(`expected ${type.name} to be thrown`)
}

const IDS = ['4be56c77-0d2c-4c8e-9e4a-0b8c5d2e9f01', '4be5aa00-1111-2222-3333-444455556666', '9a1f0000-aaaa-bbbb-cccc-ddddeeeeffff']

describe('cli acl-links: identities, templated policies, ID prefixes, merged links', function () {
  describe('serviceIdentities', function () {
    it('reads NAME as a service identity valid in every datacenter', function () {
      expect(serviceIdentities(['web'])).to.deep.equal([{ ServiceName: 'web' }])
    })

    it('reads NAME:DC1,DC2 as a service identity limited to those datacenters, in order', function () {
      expect(serviceIdentities(['web:dc1,dc2'])).to.deep.equal([{ ServiceName: 'web', Datacenters: ['dc1', 'dc2'] }])
    })

    it('reads each value given, in order', function () {
      expect(serviceIdentities(['web', 'db:dc3'])).to.deep.equal([{ ServiceName: 'web' }, { ServiceName: 'db', Datacenters: ['dc3'] }])
      expect(serviceIdentities([])).to.deep.equal([])
    })

    // Consul sends Datacenters [""] for "web:" (and the server refuses it); warden drops empty names, so "web:"
    // and "web:dc1," mean what they look like.
    it('drops empty datacenter names and spaces around them (warden)', function () {
      expect(serviceIdentities(['web:'])).to.deep.equal([{ ServiceName: 'web' }])
      expect(serviceIdentities(['web: dc1 ,,dc2,'])).to.deep.equal([{ ServiceName: 'web', Datacenters: ['dc1', 'dc2'] }])
    })

    it('refuses an empty service name as a usage error giving the form', function () {
      for (const value of ['', ':dc1']) {
        expect(thrown(() => serviceIdentities([value]), UsageError).message).to.equal(`Service identity "${value}" must be of the form SERVICENAME or SERVICENAME:DC1,DC2`)
      }
    })
  })

  describe('nodeIdentities', function () {
    it('reads NAME:DC as a node identity', function () {
      expect(nodeIdentities(['n:dc1'])).to.deep.equal([{ NodeName: 'n', Datacenter: 'dc1' }])
      expect(nodeIdentities(['a:dc1', 'b:dc2'])).to.deep.equal([
        { NodeName: 'a', Datacenter: 'dc1' },
        { NodeName: 'b', Datacenter: 'dc2' },
      ])
    })

    it('refuses a node identity without a datacenter, or without a name, as a usage error giving the form', function () {
      for (const value of ['n', 'n:', ':dc1', '']) {
        expect(thrown(() => nodeIdentities([value]), UsageError).message).to.equal(`Node identity "${value}" must be of the form NODENAME:DATACENTER`)
      }
    })
  })

  describe('templatedPolicies (from parsed flags)', function () {
    it('gives nothing when no -templated-policy is given', function () {
      expect(templatedPolicies(contextOf([]))).to.equal(undefined)
    })

    it('links the named template with its name variable', function () {
      expect(templatedPolicies(contextOf(['-templated-policy', 'builtin/service', '-var', 'name:web']))).to.deep.equal([
        { TemplateName: 'builtin/service', TemplateVariables: { name: 'web' } },
      ])
    })

    it('links a template without variables when no -var is given', function () {
      expect(templatedPolicies(contextOf(['-templated-policy=builtin/dns']))).to.deep.equal([{ TemplateName: 'builtin/dns' }])
    })

    it('keeps what follows the first colon as the value', function () {
      expect(templatedPolicies(contextOf(['-templated-policy', 'builtin/service', '-var=name:a:b']))).to.deep.equal([
        { TemplateName: 'builtin/service', TemplateVariables: { name: 'a:b' } },
      ])
    })

    it('refuses -var without -templated-policy as a usage error', function () {
      expect(thrown(() => templatedPolicies(contextOf(['-var', 'name:web'])), UsageError).message).to.equal('-var needs -templated-policy')
    })

    it('refuses a variable other than name as a usage error naming it', function () {
      const error = thrown(() => templatedPolicies(contextOf(['-templated-policy', 'builtin/service', '-var', 'port:80'])), UsageError)
      expect(error.message).to.equal('-var "port": templated policies take only the variable "name"')
    })

    it('refuses a -var that is not NAME:VALUE as a usage error', function () {
      for (const value of ['name', ':web']) {
        const error = thrown(() => templatedPolicies(contextOf(['-templated-policy', 'builtin/service', '-var', value])), UsageError)
        expect(error.message).to.equal(`-var "${value}" must be of the form NAME:VALUE`)
      }
    })
  })

  describe('fullId (an ID given as a unique prefix)', function () {
    function lister(ids: string[]): { ids: () => Promise<string[]>; calls: () => number } {
      let calls = 0
      return {
        ids: async () => {
          calls += 1
          return ids
        },
        calls: () => calls,
      }
    }

    it('resolves a unique prefix to the whole ID, whatever its case', async function () {
      expect(await fullId('policy', '9a1f', lister(IDS).ids)).to.equal(IDS[2])
      expect(await fullId('policy', '4BE56', lister(IDS).ids)).to.equal(IDS[0])
    })

    it('refuses a prefix nothing starts with, naming the kind and the prefix', async function () {
      const error = await rejection(fullId('role', 'ffff', lister(IDS).ids), CommandError)
      expect(error.message).to.equal('No such role ID with prefix: ffff')
    })

    // Consul says "Partial policy ID is not unique"; warden names the prefix.
    it('refuses a prefix several IDs start with', async function () {
      const error = await rejection(fullId('policy', '4be5', lister(IDS).ids), CommandError)
      expect(error.message).to.equal('Multiple policy IDs found with prefix: 4be5')
    })

    it('passes a whole UUID through without listing', async function () {
      const list = lister(IDS)
      expect(await fullId('token', '00000000-1111-2222-3333-444444444444', list.ids)).to.equal('00000000-1111-2222-3333-444444444444')
      expect(list.calls()).to.equal(0)
    })

    it('reads "anonymous" as the anonymous token\'s AccessorID, as Consul does, for tokens only', async function () {
      const list = lister(IDS)
      expect(await fullId('token', 'anonymous', list.ids)).to.equal('00000000-0000-0000-0000-000000000002')
      expect(list.calls()).to.equal(0)
      await rejection(fullId('policy', 'anonymous', list.ids), CommandError)
    })

    it('lists through the client, with the caller\'s consistency, in policyIdResolver', async function () {
      const seen: unknown[] = []
      const client = { acl: { policies: { list: async (options: unknown) => (seen.push(options), IDS.map((ID) => ({ ID }))) } } } as unknown as WardenClient
      expect(await policyIdResolver(client, { consistency: 'stale' })('9a')).to.equal(IDS[2])
      expect(seen).to.deep.equal([{ consistency: 'stale' }])
    })

    it('lists once for every prefix one resolver is given', async function () {
      let calls = 0
      const client = { acl: { roles: { list: async () => ((calls += 1), IDS.map((ID) => ({ ID }))) } } } as unknown as WardenClient
      const resolve = roleIdResolver(client, {})
      expect(await linksOf(['9a', '4be56'], [], resolve)).to.deep.equal([{ ID: IDS[2] }, { ID: IDS[0] }])
      expect(calls).to.equal(1)
    })
  })

  describe('linksOf and appendLinks', function () {
    it('links IDs first (each resolved) then names, in the order given', async function () {
      const links = await linksOf(['9a', '4be56'], ['web', 'db'], (given) => fullId('policy', given, async () => IDS))
      expect(links).to.deep.equal([{ ID: IDS[2] }, { ID: IDS[0] }, { Name: 'web' }, { Name: 'db' }])
    })

    it('adds links not present, after the existing ones, in order', function () {
      expect(appendLinks([{ ID: 'a', Name: 'alpha' }], [{ ID: 'b' }, { Name: 'gamma' }])).to.deep.equal([{ ID: 'a', Name: 'alpha' }, { ID: 'b' }, { Name: 'gamma' }])
    })

    it('skips a link whose ID is already linked', function () {
      expect(appendLinks([{ ID: 'a', Name: 'alpha' }], [{ ID: 'a' }])).to.deep.equal([{ ID: 'a', Name: 'alpha' }])
    })

    it('skips a link whose name is already linked', function () {
      expect(appendLinks([{ ID: 'a', Name: 'alpha' }], [{ Name: 'alpha' }])).to.deep.equal([{ ID: 'a', Name: 'alpha' }])
    })

    it('skips a link given twice in the same call', function () {
      expect(appendLinks([], [{ Name: 'x' }, { Name: 'x' }, { ID: 'i' }, { ID: 'i' }])).to.deep.equal([{ Name: 'x' }, { ID: 'i' }])
    })

    it('leaves the existing list as it was', function () {
      const existing = [{ ID: 'a', Name: 'alpha' }]
      appendLinks(existing, [{ ID: 'b' }])
      expect(existing).to.deep.equal([{ ID: 'a', Name: 'alpha' }])
    })
  })
})
