/**
 * The client library's pure parts: addresses as Consul's -http-addr takes them, query strings, errors rebuilt from
 * the one error shape (and from bodies that are not it), and query metadata read from either header family.
 */
import { expect } from 'chai'
import { ApiError, errorFromAnswer, metaOf, parseAddress, withQuery } from '../../../src/api/index.js'

describe('api client: addresses, queries, errors, metadata', function () {
  it('reads HOST:PORT, http:// and https:// addresses, with the default ports of each', function () {
    expect(parseAddress('127.0.0.1:8600')).to.include({ secure: false, host: '127.0.0.1', port: 8600 })
    expect(parseAddress('http://localhost:9000/')).to.include({ secure: false, host: 'localhost', port: 9000 })
    expect(parseAddress('https://warden.example')).to.include({ secure: true, host: 'warden.example', port: 8501 })
    expect(parseAddress('localhost')).to.include({ secure: false, host: 'localhost', port: 8500 })
    expect(parseAddress('[::1]:8500')).to.include({ host: '::1', port: 8500 })
  })

  it('refuses an address with another scheme, a path, no host or a bad port, naming the rule', function () {
    expect(() => parseAddress('unix:///tmp/sock')).to.throw(/scheme must be http:\/\/ or https:\/\//)
    expect(() => parseAddress('http://h:1/v1')).to.throw(/without a path/)
    expect(() => parseAddress(':8500')).to.throw(/host is missing/)
    expect(() => parseAddress('h:99999')).to.throw(/port must be a number from 1 to 65535/)
    expect(() => parseAddress('h:abc')).to.throw(/port must be/)
  })

  it('builds query strings: flags bare, values encoded, absent values left out', function () {
    expect(withQuery('/v1/acl/tokens', { policy: 'a b', stale: true, role: undefined, cas: 0, consistent: false })).to.equal('/v1/acl/tokens?policy=a%20b&stale&cas=0')
    expect(withQuery('/v1/x?y=1', { z: 'é' })).to.equal('/v1/x?y=1&z=%C3%A9')
    expect(withQuery('/v1/x', {})).to.equal('/v1/x')
  })

  it('rebuilds an error from the error shape, keeping status, code and field', function () {
    const error = errorFromAnswer(400, { Error: 'Name: must be at most 128 characters', Code: 'invalid_input', Field: 'Name' }, '')
    expect(error).to.be.instanceOf(ApiError)
    expect(error).to.include({ status: 400, code: 'invalid_input', field: 'Name', message: 'Name: must be at most 128 characters' })
    expect(error.is('invalid_input')).to.equal(true)
  })

  it('turns an answer that is not the error shape into an ApiError with a code from its status', function () {
    const error = errorFromAnswer(502, undefined, '<html>Bad Gateway</html>\nmore')
    expect(error).to.include({ status: 502, code: 'internal', message: 'HTTP 502: <html>Bad Gateway</html>' })
    expect(errorFromAnswer(503, undefined, '')).to.include({ code: 'no_leader', message: 'HTTP 503' })
  })

  it('reads query metadata from X-Service-* headers, and from X-Consul-* when those are absent', function () {
    const service = metaOf({ 'x-service-index': '42', 'x-service-knownleader': 'true', 'x-service-lastcontact': '7', 'x-consul-index': '1' })
    expect(service).to.include({ index: 42, knownLeader: true, lastContactMs: 7, resultsFilteredByAcls: false })
    const consul = metaOf({ 'x-consul-index': '9', 'x-consul-results-filtered-by-acls': 'true', 'x-consul-effective-consistency': 'stale' })
    expect(consul).to.include({ index: 9, knownLeader: false, resultsFilteredByAcls: true, effectiveConsistency: 'stale' })
  })
})
