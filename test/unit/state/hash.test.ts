/**
 * The hand-written BLAKE2b-256 (src/state/hash.ts) against @noble/hashes' implementation, over every input length
 * from 0 to 400 bytes (empty, one block, exact multiples of the 128-byte block, and the lengths around them), plus
 * RFC 7693's own test vector for "abc" computed independently (b2sum -l 256).
 */
import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { blake2b } from '@noble/hashes/blake2.js'
import { blake2b256, blake2bBase64 } from '../../../src/state/hash.js'

describe('blake2b256', () => {
  it('matches an independent BLAKE2b-256 of "abc"', () => {
    expect(blake2b256(Buffer.from('abc')).toString('hex')).to.equal('bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319')
  })

  it('matches @noble/hashes for every length from 0 to 400 bytes', () => {
    for (let length = 0; length <= 400; length++) {
      const input = randomBytes(length)
      expect(blake2b256(input).toString('hex'), `length ${length}`).to.equal(Buffer.from(blake2b(input, { dkLen: 32 })).toString('hex'))
    }
  })

  it('matches for an input of several kilobytes and gives the same digest when called again', () => {
    const input = randomBytes(70_000)
    const expected = Buffer.from(blake2b(input, { dkLen: 32 })).toString('hex')
    expect(blake2b256(input).toString('hex')).to.equal(expected)
    expect(blake2b256(input).toString('hex')).to.equal(expected)
  })

  it('hashes the UTF-8 of the joined parts', () => {
    const parts = ['naïve', 'policy:1', '', '☃']
    expect(blake2bBase64(parts)).to.equal(Buffer.from(blake2b(Buffer.from(parts.join(''), 'utf8'), { dkLen: 32 })).toString('base64'))
  })
})
