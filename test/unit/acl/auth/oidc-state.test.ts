/**
 * The sealed state of an OIDC login (oidc-state.ts) and the redirect URI rule (oidc-flow.ts): a state sealed on one
 * node opens on every node of the same cluster key and nowhere else, never once changed or expired; a redirect URI
 * is allowed exactly, or on any port for a loopback address.
 */
import { expect } from 'chai'
import { inspect } from 'node:util'
import { OIDC_STATE_TTL_MS, OidcStateSealer, type OidcLoginState } from '../../../../src/acl/auth/oidc-state.js'
import { validRedirect } from '../../../../src/acl/auth/oidc-flow.js'

const CLUSTER_KEY = 'oidc-state-test-cluster-key-7d1e'
const STATE: OidcLoginState = { method: 'sso', namespace: 'default', redirectUri: 'http://localhost:8550/oidc/callback', nonce: 'n'.repeat(40), clientNonce: 'c1', meta: { host: 'a' } }
const NOW = 1_800_000_000_000

describe('OIDC login state', () => {
  it('opens on another node of the same cluster key, and not under another key or a node without one', () => {
    const sealed = OidcStateSealer.create(CLUSTER_KEY).seal(STATE, NOW)
    expect(OidcStateSealer.create(CLUSTER_KEY).open(sealed, NOW + 1000)).to.deep.equal(STATE)
    expect(OidcStateSealer.create(`${CLUSTER_KEY}-other`).open(sealed, NOW + 1000)).to.equal(undefined)
    expect(OidcStateSealer.create(undefined).open(sealed, NOW + 1000)).to.equal(undefined)
  })

  it('refuses a state changed anywhere, cut short, or past its lifetime', () => {
    const sealer = OidcStateSealer.create(CLUSTER_KEY)
    const sealed = sealer.seal(STATE, NOW)
    // Not the last character: its low bits may be padding, which base64url decoding drops.
    for (let at = 0; at < sealed.length - 1; at += 7) {
      const changed = `${sealed.slice(0, at)}${sealed[at] === 'A' ? 'B' : 'A'}${sealed.slice(at + 1)}`
      expect(sealer.open(changed, NOW), `changed at ${at}`).to.equal(undefined)
    }
    expect(sealer.open(sealed.slice(0, 30), NOW)).to.equal(undefined)
    expect(sealer.open('!!!', NOW)).to.equal(undefined)
    expect(sealer.open('A'.repeat(100_000), NOW)).to.equal(undefined)
    expect(sealer.open(sealed, NOW + OIDC_STATE_TTL_MS - 1)).to.deep.equal(STATE)
    expect(sealer.open(sealed, NOW + OIDC_STATE_TTL_MS)).to.equal(undefined)
  })

  it('seals the same state differently each time and never shows its key', () => {
    const sealer = OidcStateSealer.create(CLUSTER_KEY)
    expect(sealer.seal(STATE, NOW)).to.not.equal(sealer.seal(STATE, NOW))
    expect(JSON.stringify({ sealer })).to.equal('{"sealer":"[redacted]"}')
    expect(inspect(sealer)).to.equal('OidcStateSealer [redacted]')
  })

  it('allows a redirect URI exactly, or a loopback one on any port', () => {
    const allowed = ['http://localhost:8550/oidc/callback', 'https://ui.example.test/ui/oidc/callback', 'http://127.0.0.1/cb']
    expect(validRedirect('https://ui.example.test/ui/oidc/callback', allowed)).to.equal(true)
    expect(validRedirect('http://localhost:40000/oidc/callback', allowed)).to.equal(true)
    expect(validRedirect('http://127.0.0.1:9/cb', allowed)).to.equal(true)
    expect(validRedirect('https://ui.example.test:444/ui/oidc/callback', allowed)).to.equal(false)
    expect(validRedirect('http://localhost:40000/oidc/other', allowed)).to.equal(false)
    expect(validRedirect('https://localhost:8550/oidc/callback', allowed)).to.equal(false)
    expect(validRedirect('http://evil.test/oidc/callback', allowed)).to.equal(false)
    expect(validRedirect('not a url', allowed)).to.equal(false)
  })
})
