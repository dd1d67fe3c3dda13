/**
 * Evaluation must give go-bexpr's answers over plain JSON data: literals coerced to the type of the selected value,
 * membership over arrays, object keys and substrings, unanchored regular expressions, emptiness by length, and a
 * defined, never-throwing result when a selector reaches nothing. The worked examples from binding-rule selectors
 * are checked as callers will write them.
 */
import { expect } from 'chai'
import { compileFilter, evaluateFilter, FilterBudgetError, FilterSyntaxError, parseFilter } from '../../../src/filter/index.js'

function check(source: string, target: unknown): boolean {
  return evaluateFilter(parseFilter(source), target)
}

const service = {
  Kind: 'service-defaults',
  Name: 'web',
  Empty: '',
  Port: 8080,
  Weight: -1.5,
  Enabled: true,
  Disabled: false,
  Nothing: null,
  Tags: ['primary', 'v2', '8443', 'true'],
  Mixed: [1, true, 'x', null, { a: 1 }],
  NoTags: [],
  Meta: { env: 'prod', 'team name': 'core', '0': 'zero' },
  NoMeta: {},
  Upstreams: [
    { Name: 'db', Ports: [5432, 5433] },
    { Name: 'cache', Ports: [6379] },
  ],
  'a/b': { '~c': 'pointer' },
}

describe('filter evaluation', () => {
  describe('== and != on strings', () => {
    it('compares strings exactly and case-sensitively', () => {
      expect(check('Name == web', service)).to.equal(true)
      expect(check('Name == "web"', service)).to.equal(true)
      expect(check('Name == Web', service)).to.equal(false)
      expect(check('Name == we', service)).to.equal(false)
      expect(check('Kind == service-defaults', service)).to.equal(true)
    })

    it('negates == for !=', () => {
      expect(check('Name != web', service)).to.equal(false)
      expect(check('Name != db', service)).to.equal(true)
    })

    it('compares a number-looking literal to a string as text', () => {
      expect(check('Tags.2 == 8443', service)).to.equal(true)
      expect(check('Tags.2 == 8443.0', service)).to.equal(false)
    })

    it('compares the empty string only to an empty literal', () => {
      expect(check('Empty == ""', service)).to.equal(true)
      expect(check('Name == ""', service)).to.equal(false)
    })
  })

  describe('== and != on numbers', () => {
    it('parses the literal as a number', () => {
      expect(check('Port == 8080', service)).to.equal(true)
      expect(check('Port == 8080.0', service)).to.equal(true)
      expect(check('Port == "8080"', service)).to.equal(true)
      expect(check('Weight == -1.5', service)).to.equal(true)
      expect(check('Port == 8081', service)).to.equal(false)
    })

    it('never equals a non-numeric literal', () => {
      expect(check('Port == web', service)).to.equal(false)
      expect(check('Port == "0x1F90"', service)).to.equal(false)
      expect(check('Port == ""', service)).to.equal(false)
      expect(check('Port != web', service)).to.equal(true)
    })
  })

  describe('== and != on booleans and null', () => {
    it('equals a boolean only to the literal true or false', () => {
      expect(check('Enabled == true', service)).to.equal(true)
      expect(check('Enabled == false', service)).to.equal(false)
      expect(check('Disabled == false', service)).to.equal(true)
      expect(check('Enabled == "true"', service)).to.equal(true)
      expect(check('Enabled == 1', service)).to.equal(false)
      expect(check('Enabled == True', service)).to.equal(false)
      expect(check('Enabled != false', service)).to.equal(true)
    })

    it('equals null only to the literal text null', () => {
      expect(check('Nothing == null', service)).to.equal(true)
      expect(check('Nothing == "null"', service)).to.equal(true)
      expect(check('Nothing == ""', service)).to.equal(false)
      expect(check('Nothing != null', service)).to.equal(false)
    })

    it('never equals an object or an array', () => {
      expect(check('Meta == "[object Object]"', service)).to.equal(false)
      expect(check('NoTags == ""', service)).to.equal(false)
      expect(check('Tags == primary', service)).to.equal(false)
      expect(check('Meta != x', service)).to.equal(true)
    })
  })

  describe('in and contains', () => {
    it('finds an equal element in an array, in either spelling', () => {
      expect(check('primary in Tags', service)).to.equal(true)
      expect(check('Tags contains primary', service)).to.equal(true)
      expect(check('secondary in Tags', service)).to.equal(false)
      expect(check('prim in Tags', service)).to.equal(false)
      expect(check('secondary not in Tags', service)).to.equal(true)
      expect(check('Tags not contains primary', service)).to.equal(false)
    })

    it('coerces the literal to each element type', () => {
      expect(check('Mixed contains 1', service)).to.equal(true)
      expect(check('Mixed contains 1.0', service)).to.equal(true)
      expect(check('Mixed contains true', service)).to.equal(true)
      expect(check('Mixed contains x', service)).to.equal(true)
      expect(check('Mixed contains null', service)).to.equal(true)
      expect(check('Mixed contains a', service)).to.equal(false)
      expect(check('Upstreams.0.Ports contains 5433', service)).to.equal(true)
    })

    it('tests a key for presence in an object', () => {
      expect(check('env in Meta', service)).to.equal(true)
      expect(check('"team name" in Meta', service)).to.equal(true)
      expect(check('prod in Meta', service)).to.equal(false)
      expect(check('Meta not contains env', service)).to.equal(false)
    })

    it('looks only at own keys, not the prototype chain', () => {
      expect(check('constructor in Meta', service)).to.equal(false)
      expect(check('toString in NoMeta', service)).to.equal(false)
      // Inherited keys are absent keys of the map (a found function would be "not empty").
      expect(check('Meta.constructor is empty', service)).to.equal(true)
      expect(check('Meta.constructor is not empty', service)).to.equal(false)
      expect(check('Meta.__proto__ is not empty', service)).to.equal(false)
    })

    it('tests a substring in a string', () => {
      expect(check('Kind contains defaults', service)).to.equal(true)
      expect(check('"ice-def" in Kind', service)).to.equal(true)
      expect(check('Kind contains Service', service)).to.equal(false)
      expect(check('"" in Kind', service)).to.equal(true)
    })

    it('is false for numbers, booleans and null', () => {
      expect(check('Port contains 80', service)).to.equal(false)
      expect(check('Enabled contains true', service)).to.equal(false)
      expect(check('Nothing contains null', service)).to.equal(false)
      expect(check('Port not contains 80', service)).to.equal(true)
    })
  })

  describe('matches', () => {
    it('tests strings with an unanchored regular expression', () => {
      expect(check('Name matches "e"', service)).to.equal(true)
      expect(check('Name matches "^e"', service)).to.equal(false)
      expect(check('Kind matches `^service-[a-z]+$`', service)).to.equal(true)
      expect(check('Name not matches "^w"', service)).to.equal(false)
      expect(check('Name not matches "^x"', service)).to.equal(true)
    })

    it('gives the same answer on every call', () => {
      const predicate = compileFilter('Name matches "b"')
      expect([predicate(service), predicate(service), predicate(service)]).to.deep.equal([true, true, true])
    })

    it('is false for arrays, numbers, booleans, null and objects', () => {
      expect(check('Tags matches "primary"', service)).to.equal(false)
      expect(check('Port matches "80"', service)).to.equal(false)
      expect(check('Enabled matches "true"', service)).to.equal(false)
      expect(check('Nothing matches "null"', service)).to.equal(false)
      expect(check('Meta matches "env"', service)).to.equal(false)
      expect(check('Tags not matches "primary"', service)).to.equal(true)
    })

    it('matches non-ASCII characters in classes', () => {
      expect(check('x matches "^[a-zü]+$"', { x: 'zürich' })).to.equal(true)
      expect(check('x matches "^[a-zü]+$"', { x: 'zürich 1' })).to.equal(false)
    })

    it('answers patterns that would backtrack exponentially (the linear-time engine, as RE2)', () => {
      // Under a backtracking engine each of these takes longer than the test timeout, and blocks the server.
      expect(check('x matches "^(a+)+$"', { x: `${'a'.repeat(64)}b` })).to.equal(false)
      expect(check('x matches "^(?:.*){12}Z"', { x: 'x'.repeat(2000) })).to.equal(false)
      expect(check('x matches "^a*a*a*a*a*a*b$"', { x: 'a'.repeat(10_000) })).to.equal(false)
    })

    it('refuses backreferences and lookarounds at parse time, as RE2 does', () => {
      expect(() => compileFilter('x matches "(a)\\\\1"')).to.throw(FilterSyntaxError, /cannot run in linear time/)
      expect(() => compileFilter('x matches "a(?=b)"')).to.throw(FilterSyntaxError, /cannot run in linear time/)
      expect(() => compileFilter('x matches "a{0,200}x"')).to.throw(FilterSyntaxError, /large counted repetition/)
    })
  })

  describe('is empty and is not empty', () => {
    it('measures strings, arrays and objects by length', () => {
      expect(check('Empty is empty', service)).to.equal(true)
      expect(check('Name is empty', service)).to.equal(false)
      expect(check('NoTags is empty', service)).to.equal(true)
      expect(check('Tags is empty', service)).to.equal(false)
      expect(check('NoMeta is empty', service)).to.equal(true)
      expect(check('Meta is empty', service)).to.equal(false)
      expect(check('Meta is not empty', service)).to.equal(true)
    })

    it('calls null empty and numbers and booleans never empty', () => {
      expect(check('Nothing is empty', service)).to.equal(true)
      expect(check('Port is empty', service)).to.equal(false)
      expect(check('Disabled is empty', service)).to.equal(false)
      expect(check('Disabled is not empty', service)).to.equal(true)
      expect(check('x is empty', { x: 0 })).to.equal(false)
    })
  })

  describe('selectors', () => {
    it('walks nested objects and array indices in every spelling', () => {
      expect(check('Upstreams.1.Name == cache', service)).to.equal(true)
      expect(check('Upstreams[1].Name == cache', service)).to.equal(true)
      expect(check('Upstreams[0].Ports[1] == 5433', service)).to.equal(true)
      expect(check('Upstreams.0.Ports.0 == 5432', service)).to.equal(true)
      expect(check('Meta["team name"] == core', service)).to.equal(true)
      expect(check('Meta.env == prod', service)).to.equal(true)
    })

    it('reads a digit segment as a key on objects', () => {
      expect(check('Meta.0 == zero', service)).to.equal(true)
      expect(check('Meta[0] == zero', service)).to.equal(true)
    })

    it('reads a quoted key as an index on arrays', () => {
      expect(check('Tags["1"] == v2', service)).to.equal(true)
    })

    it('resolves JSON pointers, including ~1 and ~0 escapes', () => {
      expect(check('"/Upstreams/1/Name" == cache', service)).to.equal(true)
      expect(check('"/a~1b/~0c" == pointer', service)).to.equal(true)
      expect(check('db in "/Upstreams/0"', service)).to.equal(false)
      expect(check('Name in "/Upstreams/0"', service)).to.equal(true)
    })
  })

  describe('missing values', () => {
    const operators = (selector: string) => ({
      equal: check(`${selector} == x`, service),
      notEqual: check(`${selector} != x`, service),
      in: check(`x in ${selector}`, service),
      notIn: check(`x not in ${selector}`, service),
      contains: check(`${selector} contains x`, service),
      notContains: check(`${selector} not contains x`, service),
      matches: check(`${selector} matches ".*"`, service),
      notMatches: check(`${selector} not matches ".*"`, service),
      empty: check(`${selector} is empty`, service),
      notEmpty: check(`${selector} is not empty`, service),
    })

    const missing = [
      ['a top-level field the entry lacks', 'Absent'],
      ['an index past the end', 'Tags[9]'],
      ['a non-index segment on an array', 'Tags.first'],
      ['a walk into a string', 'Name.length'],
      ['a walk into a number', 'Port.0'],
      ['a walk through null', 'Nothing.x'],
      ['a walk through an absent field', 'Absent.x'],
    ] as const

    for (const [what, selector] of missing) {
      it(`matches with no operator, negated ones included, for ${what} (readings: no match, no error)`, () => {
        expect(operators(selector)).to.deep.equal({
          equal: false,
          notEqual: false,
          in: false,
          notIn: false,
          contains: false,
          notContains: false,
          matches: false,
          notMatches: false,
          empty: false,
          notEmpty: false,
        })
        // `not` negates the whole match, which did not hold.
        expect(check(`not ${selector} == x`, service)).to.equal(true)
      })
    }

    const absentKeys = [
      ['a key missing from a map that is there', 'Meta.none'],
      ['a key missing from an empty map', 'NoMeta.none'],
      ['a missing JSON pointer target in a map', '"/Meta/none"'],
    ] as const

    for (const [what, selector] of absentKeys) {
      it(`answers as go-bexpr's NotPresentDisposition for ${what}`, () => {
        expect(operators(selector)).to.deep.equal({
          equal: false,
          notEqual: true,
          in: false,
          notIn: true,
          contains: false,
          notContains: true,
          matches: false,
          notMatches: true,
          empty: true,
          notEmpty: false,
        })
      })
    }

    it('treats a key holding undefined as missing', () => {
      expect(check('x is empty', { x: undefined })).to.equal(false)
      expect(check('x != undefined', { x: undefined })).to.equal(false)
      expect(check('x is empty', { x: null })).to.equal(true)
    })

    it('never throws, whatever the target', () => {
      const predicate = compileFilter('a.b == 1 or x in a or a matches "." or a is empty')
      for (const target of [undefined, null, 0, 'a', true, [], {}, [[1]], { a: [1] }, { a: { b: '1' } }]) {
        expect(() => predicate(target)).not.to.throw()
      }
      expect(predicate({ a: { b: '2' } })).to.equal(false)
      expect(predicate({ a: { b: 1 } })).to.equal(true)
      expect(predicate(undefined)).to.equal(false)
      expect(predicate({ a: [] })).to.equal(true)
    })
  })

  describe('work budget', () => {
    it('charges a pattern by its length times the value it searches, and stops once the budget is spent', () => {
      const value = { Name: 'x'.repeat(1_000) }
      // (4 + 1) × 1000 units per call: two calls fit in 10,000, the third does not.
      const predicate = compileFilter('Name matches "abcd"', 10_000)
      expect(predicate(value)).to.equal(false)
      expect(predicate(value)).to.equal(false)
      expect(() => predicate(value)).to.throw(FilterBudgetError, /too much work/)
    })

    it('charges string membership by the length of the value, and nothing for other types', () => {
      const predicate = compileFilter('abc in Name or Port == 1', 2_500)
      expect(predicate({ Name: 'y'.repeat(1_000), Port: 1 })).to.equal(true)
      expect(predicate({ Name: 'y'.repeat(1_000), Port: 1 })).to.equal(true)
      expect(() => predicate({ Name: 'y'.repeat(1_000), Port: 1 })).to.throw(FilterBudgetError)
      // Numbers and absent fields cost nothing.
      const cheap = compileFilter('Port == 1 and Missing != x', 1)
      for (let n = 0; n < 100; n++) expect(cheap({ Port: 1 })).to.equal(false)
    })
  })

  describe('boolean combinations', () => {
    it('combines with and, or and not by their precedence', () => {
      expect(check('Name == web or Name == db and Port == 1', service)).to.equal(true)
      expect(check('(Name == web or Name == db) and Port == 1', service)).to.equal(false)
      expect(check('not Name == db and Port == 8080', service)).to.equal(true)
      expect(check('not (Name == web and Port == 8080)', service)).to.equal(false)
    })
  })

  describe('worked examples', () => {
    it('matches engineering in list.groups', () => {
      expect(check('engineering in list.groups', { list: { groups: ['engineering'] } })).to.equal(true)
      expect(check('engineering in list.groups', { list: { groups: ['sales'] } })).to.equal(false)
    })

    it('matches a service-account namespace and name selector', () => {
      const selector = compileFilter('serviceaccount.namespace == default and serviceaccount.name != web')
      expect(selector({ serviceaccount: { namespace: 'default', name: 'api' } })).to.equal(true)
      expect(selector({ serviceaccount: { namespace: 'default', name: 'web' } })).to.equal(false)
      expect(selector({ serviceaccount: { namespace: 'kube-system', name: 'api' } })).to.equal(false)
      expect(selector({})).to.equal(false)
    })
  })

  describe('compileFilter', () => {
    it('throws a FilterSyntaxError when compiling, not when called', () => {
      expect(() => compileFilter('Name ==')).to.throw(FilterSyntaxError, 'expected a value')
    })
  })
})
