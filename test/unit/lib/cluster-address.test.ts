/**
 * The cluster-address rule (lib/cluster-address.ts): host:port with a host name, an IPv4 address or a bracketed IPv6
 * address and a port from 1 to 65535, at most 256 characters. What it accepts the peer transport dials as
 * `ws://${address}/...`, and the WebSocket constructor throws on a URL it cannot parse, so the tests also check that
 * every accepted address parses as one and that the refused ones a looser rule would take (an all-digit last label,
 * a bracketed host that is not IPv6) are the ones the URL parser refuses. A refusal names the field and the rule.
 */
import { expect } from 'chai'
import { checkClusterAddress, clusterAddressProblem, CLUSTER_ADDRESS_CHARS_MAX, isClusterAddress } from '../../../src/lib/cluster-address.js'
import { InvalidInputError } from '../../../src/lib/errors.js'
import { ADDRESS_CHARS_MAX } from '../../../src/transport/frames.js'
import { thrown } from '../../support/thrown.js'

const GOOD = [
  '127.0.0.1:8300',
  '10.1.2.3:1',
  '0.0.0.0:65535',
  'localhost:8300',
  'n1:8300',
  'warden-0.warden.default.svc.cluster.local:8300',
  'warden-0.example.com.:8300',
  'my_service:8300',
  '3f4e5a6b7c8d:8300',
  'host:08300',
  '[::1]:8300',
  '[::]:8300',
  '[2001:db8::1]:8300',
  '[::ffff:192.0.2.1]:8300',
  `${Array.from({ length: 3 }, () => 'a'.repeat(63)).join('.')}.${'b'.repeat(56)}:65535`,
]

const BAD: Array<[string, unknown]> = [
  ['no port', 'not-an-address'],
  ['port 0', 'host:0'],
  ['a port above 65535', 'host:99999'],
  ['a port of six digits', 'host:100000'],
  ['a negative port', 'host:-1'],
  ['an empty port', 'host:'],
  ['an empty address', ''],
  ['no host', ':8300'],
  ['a space', 'bad host:8300'],
  ['a trailing space', 'host:8300 '],
  ['a newline', 'host:8300\n'],
  ['a path', 'host:8300/x'],
  ['a user', 'user@host:8300'],
  ['a query', 'host:8300?x'],
  ['a scheme', 'ws://host:8300'],
  ['two colons', 'host:8300:1'],
  ['an unbracketed IPv6 address', '::1:8300'],
  ['brackets around a name', '[host]:8300'],
  ['brackets that are not IPv6', '[:::::]:8300'],
  ['an unclosed bracket', '[::1:8300'],
  ['an IPv6 zone', '[fe80::1%eth0]:8300'],
  ['an IPv4 address out of range', '999.1.1.1:8300'],
  ['an all-digit last label', 'foo.123:8300'],
  ['a hexadecimal last label', 'foo.0x1f:8300'],
  ['a short IPv4 form', '127.1:8300'],
  ['an empty label', 'a..b:8300'],
  ['a label of 64 characters', `${'a'.repeat(64)}.example:8300`],
  ['a label starting with a hyphen', '-host:8300'],
  ['a non-ASCII host', 'hôte:8300'],
  ['a percent sign', 'a%41:8300'],
  ['more than 256 characters', `${Array.from({ length: 5 }, () => 'a'.repeat(54)).join('.')}:8300`],
  ['ten thousand characters', `${'a'.repeat(10_000)}:8300`],
  ['a number', 8300],
  ['null', null],
  ['undefined', undefined],
]

describe('lib/cluster-address', () => {
  it('accepts a host name, an IPv4 address or a bracketed IPv6 address with a port from 1 to 65535', () => {
    for (const address of GOOD) {
      expect(clusterAddressProblem(address), address).to.equal(undefined)
      expect(isClusterAddress(address), address).to.equal(true)
      expect(checkClusterAddress('Address', address)).to.equal(address)
    }
  })

  it('accepts only what the peer transport can dial: ws://<address>/ parses as a URL', () => {
    for (const address of GOOD) expect(URL.canParse(`ws://${address}/`), address).to.equal(true)
    for (const address of ['999.1.1.1:8300', 'foo.123:8300', 'foo.0x1f:8300', '[:::::]:8300', '[fe80::1%eth0]:8300']) {
      expect(URL.canParse(`ws://${address}/`), address).to.equal(false)
    }
  })

  for (const [what, address] of BAD) {
    it(`refuses ${what}`, () => {
      expect(clusterAddressProblem(address)).to.be.a('string')
      expect(isClusterAddress(address)).to.equal(false)
      const error = thrown(() => checkClusterAddress('Address', address), InvalidInputError)
      expect(error.code).to.equal('invalid_input')
      expect(error.field).to.equal('Address')
      expect(error.message).to.match(/^Address: must be |^Address: port must be /)
    })
  }

  it('says which rule is broken, and quotes a bounded part of what it was given', () => {
    expect(clusterAddressProblem('host:0')).to.equal('port must be from 1 to 65535, got "host:0"')
    expect(clusterAddressProblem('host:99999')).to.equal('port must be from 1 to 65535, got "host:99999"')
    expect(clusterAddressProblem('not-an-address')).to.match(/^must be host:port, .* got "not-an-address"$/)
    expect(clusterAddressProblem(42)).to.equal('must be a string of the form host:port')
    const long = 'a'.repeat(CLUSTER_ADDRESS_CHARS_MAX - 5) + ':8300'
    expect(long).to.have.length(CLUSTER_ADDRESS_CHARS_MAX)
    expect(clusterAddressProblem(long)).to.match(/^must be host:port, .* got "a{64}…"$/)
    expect(clusterAddressProblem(`${'a'.repeat(10_000)}:1`)).to.equal(`must be at most ${CLUSTER_ADDRESS_CHARS_MAX} characters, got 10002`)
  })

  it('bounds an address as the peer handshake bounds an advertised one', () => {
    expect(CLUSTER_ADDRESS_CHARS_MAX).to.equal(ADDRESS_CHARS_MAX)
  })
})
