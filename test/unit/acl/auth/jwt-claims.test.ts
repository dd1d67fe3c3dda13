/**
 * The jwt auth method's claim checks, which follow Consul's go-sso rather than jose's defaults: a token needs one of
 * iat, nbf, exp; a missing exp or nbf is derived with ExpirationLeeway / NotBeforeLeeway; times are compared with
 * ClockSkewLeeway; iss must equal BoundIssuer; aud must meet BoundAudiences (strictly for static keys and JWKS).
 * Each test pins the clock and moves one claim across its boundary.
 */
import { expect } from 'chai'
import { thrown } from '../../../support/thrown.js'
import { InvalidBearerTokenError } from '../../../../src/acl/auth/errors.js'
import { checkClaims, leewaySeconds, type ClaimChecks } from '../../../../src/acl/auth/jwt-validator.js'

const NOW = 1_700_000_000
const nowMs = NOW * 1000
const defaults: ClaimChecks = { audiences: [], strictAudience: true, expirationLeeway: 150, notBeforeLeeway: 150, clockSkewLeeway: 60 }

function check(claims: Record<string, unknown>, checks: Partial<ClaimChecks> = {}, requireExpiry = false): void {
  checkClaims(claims, { ...defaults, ...checks }, nowMs, requireExpiry)
}

/** The InvalidBearerTokenError `run` throws: its message is what the caller sees, its logDetail what the agent logs. */
const refusal = (run: () => unknown): InvalidBearerTokenError => thrown(run, InvalidBearerTokenError)

describe('jwt claim checks', () => {
  it('resolves leeway settings: unset or 0 means the default, negative means none', () => {
    expect(leewaySeconds(undefined, 150)).to.equal(150)
    expect(leewaySeconds('0s', 150)).to.equal(150)
    expect(leewaySeconds('-1s', 150)).to.equal(0)
    expect(leewaySeconds('30s', 150)).to.equal(30)
  })

  it('refuses a token with none of iat, nbf and exp', () => {
    expect(() => check({ sub: 'x' })).to.throw(InvalidBearerTokenError, 'no issue time (iat), not-before time (nbf) or expiration time (exp)')
  })

  it('accepts exp up to ClockSkewLeeway in the past and refuses it beyond', () => {
    check({ exp: NOW - 60 })
    expect(() => check({ exp: NOW - 61 })).to.throw(InvalidBearerTokenError, 'it has expired')
    expect(() => check({ exp: NOW - 1 }, { clockSkewLeeway: 0 })).to.throw(InvalidBearerTokenError, 'it has expired')
  })

  it('without exp, expires ExpirationLeeway after the later of iat and nbf', () => {
    check({ iat: NOW - 200 })
    expect(() => check({ iat: NOW - 211 })).to.throw(InvalidBearerTokenError, 'expired')
    check({ iat: NOW - 1000, nbf: NOW - 200 })
    expect(() => check({ iat: NOW - 100 }, { expirationLeeway: 30 })).to.throw(InvalidBearerTokenError, 'expired')
  })

  it('refuses nbf beyond ClockSkewLeeway in the future, and iat too', () => {
    check({ nbf: NOW + 60, exp: NOW + 600 })
    expect(() => check({ nbf: NOW + 61, exp: NOW + 600 })).to.throw(InvalidBearerTokenError, 'not valid yet')
    expect(() => check({ iat: NOW + 61, exp: NOW + 600 })).to.throw(InvalidBearerTokenError)
  })

  it('without nbf or iat, becomes valid NotBeforeLeeway before exp', () => {
    check({ exp: NOW + 150 + 60 })
    expect(() => check({ exp: NOW + 150 + 61 })).to.throw(InvalidBearerTokenError, 'not valid yet')
  })

  it('requires exp when asked (OIDC discovery)', () => {
    expect(() => check({ iat: NOW }, {}, true)).to.throw(InvalidBearerTokenError, 'no expiration time')
  })

  it('requires iss to equal the bound issuer when there is one', () => {
    check({ exp: NOW + 10, iss: 'https://a' }, { issuer: 'https://a' })
    check({ exp: NOW + 10, iss: 'https://anything' })
    const wrong = refusal(() => check({ exp: NOW + 10, iss: 'https://b' }, { issuer: 'https://a' }))
    // The caller sees its own claim, not the auth method's setting (that needs acl:read); the log sees both.
    expect(wrong.reason).to.equal('its issuer (iss) "https://b" is not the bound issuer')
    expect(wrong.logDetail).to.equal('its issuer (iss) "https://b" is not the bound issuer "https://a"')
    expect(() => check({ exp: NOW + 10 }, { issuer: 'https://a' })).to.throw(InvalidBearerTokenError, 'its issuer (iss) null')
  })

  it('requires one bound audience in aud, given as a string or a list', () => {
    check({ exp: NOW + 10, aud: 'x' }, { audiences: ['x', 'y'] })
    check({ exp: NOW + 10, aud: ['z', 'y'] }, { audiences: ['x', 'y'] })
    const wrong = refusal(() => check({ exp: NOW + 10, aud: ['z'] }, { audiences: ['x'] }))
    expect(wrong.reason).to.equal('its audience (aud) ["z"] is not accepted')
    expect(wrong.logDetail).to.equal('its audience (aud) ["z"] matches none of the bound audiences ["x"]')
    expect(refusal(() => check({ exp: NOW + 10 }, { audiences: ['x'] })).logDetail).to.include('matches none')
  })

  it('refuses an audience when none is bound, except for OIDC discovery', () => {
    check({ exp: NOW + 10 })
    const unbound = refusal(() => check({ exp: NOW + 10, aud: 'x' }))
    expect(unbound.reason).to.equal('its audience (aud) ["x"] is not accepted')
    expect(unbound.logDetail).to.include('binds no audiences')
    check({ exp: NOW + 10, aud: 'x' }, { strictAudience: false })
  })

  it('refuses time claims that are not numbers', () => {
    expect(() => check({ exp: 'tomorrow' })).to.throw(InvalidBearerTokenError, 'claim exp is not a number')
  })
})
