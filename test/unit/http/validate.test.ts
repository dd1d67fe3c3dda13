/**
 * src/http/validate.ts validateBody: keys are matched to the schema's names without regard to case (the exact
 * spelling wins), null fields are dropped as Go drops them, and no key can reach an object's prototype.
 */
import { expect } from 'chai'
import { validateBody, type Schema } from '../../../src/http/validate.js'
import { InvalidInputError } from '../../../src/lib/errors.js'

const schema: Schema = {
  type: 'object',
  properties: {
    Name: { type: 'string' },
    Meta: { type: 'object', additionalProperties: { type: 'object', additionalProperties: { type: 'string' } } },
  },
  additionalProperties: false,
}

describe('validateBody', () => {
  it('matches keys without regard to case, and the exact spelling wins in either order', () => {
    expect(validateBody(schema, { name: 'a' })).to.deep.equal({ Name: 'a' })
    expect(validateBody(schema, { name: 'a', Name: 'b' })).to.deep.equal({ Name: 'b' })
    expect(validateBody(schema, { Name: 'b', NAME: 'a' })).to.deep.equal({ Name: 'b' })
  })

  it('drops null fields, at every depth', () => {
    expect(validateBody(schema, { Name: null, Meta: { x: { y: null, z: 'v' } } })).to.deep.equal({ Meta: { x: { z: 'v' } } })
  })

  it('takes a key named like an Object.prototype member by the schema of any other key', () => {
    // `toString` and `constructor` are plain keys of Meta: their values follow Meta's additionalProperties schema.
    const body = validateBody<{ Meta: Record<string, unknown> }>(schema, JSON.parse('{"Meta": {"toString": {"a": null, "b": "c"}, "constructor": {"d": "e"}}}'))
    expect(Object.hasOwn(body.Meta, 'toString') && Object.hasOwn(body.Meta, 'constructor')).to.equal(true)
    expect(body.Meta['toString']).to.deep.equal({ b: 'c' })
    expect(body.Meta['constructor']).to.deep.equal({ d: 'e' })
  })

  it('keeps a key __proto__ a field, refused as unknown, and never sets a prototype', () => {
    const input = JSON.parse('{"Name": "a", "__proto__": {"polluted": true}}')
    expect(() => validateBody(schema, input)).to.throw(InvalidInputError)
    const meta = validateBody<{ Meta: Record<string, unknown> }>(schema, JSON.parse('{"Meta": {"__proto__": {"polluted": "yes"}}}')).Meta
    expect(Object.getPrototypeOf(meta)).to.equal(Object.prototype)
    expect(Object.hasOwn(meta, '__proto__')).to.equal(true)
    expect(({} as Record<string, unknown>)['polluted']).to.equal(undefined)
  })
})
