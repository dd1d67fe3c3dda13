/**
 * Consul's flag syntax read through node's util.parseArgs (src/cli/argv.ts). Goal: every form Go's flag package
 * accepts on Consul's command line is accepted here with the same meaning, and its mistakes are refused with Go's
 * words (exit 1 and the usage come from command.ts). Method: parseFlags over literal argv arrays against a small
 * set of specs (a string, a repeatable string with an alias, a boolean), and describeFlags over specs with a hidden
 * flag; the expected values follow Go's flag package (flag.go: parseOne, boolFlag, strconv.ParseBool).
 */
import { expect } from 'chai'
import { describeFlags, parseFlags, UsageError, type FlagSpecs } from '../../../src/cli/argv.js'
import { thrown } from '../../support/thrown.js'

const SPECS: FlagSpecs = {
  description: { type: 'string', help: 'A description.' },
  'accessor-id': { type: 'string', help: 'The AccessorID.', aliases: ['id'] },
  'policy-name': { type: 'string', multiple: true, help: 'A policy name.' },
  local: { type: 'boolean', help: 'Local to this datacenter.' },
  stale: { type: 'boolean', help: 'Any server may answer.' },
}

const usage = (argv: string[]): string => thrown(() => parseFlags(argv, SPECS), UsageError).message

describe('cli argv: Consul-style flags for util.parseArgs', function () {
  describe('parseFlags', function () {
    it('takes a long flag with one dash or two', function () {
      expect(parseFlags(['-description', 'a'], SPECS).values).to.deep.equal({ description: 'a' })
      expect(parseFlags(['--description', 'a'], SPECS).values).to.deep.equal({ description: 'a' })
    })

    it('takes the value inline after = or as the next word, with one dash or two', function () {
      for (const argv of [['-description=web token'], ['--description=web token'], ['-description', 'web token'], ['--description', 'web token']]) {
        expect(parseFlags(argv, SPECS).values, argv.join(' ')).to.deep.equal({ description: 'web token' })
      }
    })

    it('keeps everything after the first = as the value, = signs and newlines included', function () {
      expect(parseFlags(['-description=a=b=c'], SPECS).values['description']).to.equal('a=b=c')
      expect(parseFlags(['-description=line one\nline two'], SPECS).values['description']).to.equal('line one\nline two')
    })

    it('reads an empty inline value as the empty string', function () {
      expect(parseFlags(['-description='], SPECS).values).to.deep.equal({ description: '' })
    })

    it('takes the next word as the value even when it starts with a dash, as Go does', function () {
      expect(parseFlags(['-description', '-x'], SPECS).values).to.deep.equal({ description: '-x' })
      expect(parseFlags(['-description', '--local'], SPECS).values).to.deep.equal({ description: '--local' })
      expect(parseFlags(['-description', '--'], SPECS)).to.deep.equal({ values: { description: '--' }, positionals: [] })
    })

    it('sets a boolean given bare or with a true spelling of strconv.ParseBool', function () {
      for (const argv of [['-local'], ['--local'], ['-local=true'], ['-local=1'], ['-local=t'], ['-local=T'], ['-local=TRUE'], ['-local=True']]) {
        expect(parseFlags(argv, SPECS).values, argv[0]).to.deep.equal({ local: true })
      }
    })

    it('leaves a boolean unset when given with a false spelling of strconv.ParseBool', function () {
      for (const argv of [['-local=false'], ['--local=false'], ['-local=0'], ['-local=f'], ['-local=F'], ['-local=FALSE'], ['-local=False']]) {
        expect(parseFlags(argv, SPECS).values, argv[0]).to.deep.equal({})
      }
    })

    it('lets the last occurrence of a boolean win, as Go does', function () {
      expect(parseFlags(['-local', '-local=false'], SPECS).values).to.deep.equal({})
      expect(parseFlags(['-local=false', '-local'], SPECS).values).to.deep.equal({ local: true })
      expect(parseFlags(['-stale', '-local', '-local=false'], SPECS).values).to.deep.equal({ stale: true })
    })

    it('does not take the next word as a boolean\'s value: `-local false` leaves "false" a positional, as Go does', function () {
      expect(parseFlags(['-local', 'false'], SPECS)).to.deep.equal({ values: { local: true }, positionals: ['false'] })
    })

    it('refuses a boolean value strconv.ParseBool refuses, with Go\'s message', function () {
      expect(usage(['-local=maybe'])).to.equal('invalid boolean value "maybe" for -local: parse error')
      expect(usage(['--local=yes'])).to.equal('invalid boolean value "yes" for -local: parse error')
    })

    it('keeps every value of a repeated flag, in the order given, whatever their forms', function () {
      const parsed = parseFlags(['-policy-name', 'a', '--policy-name=b', '-policy-name=c', '--policy-name', 'd'], SPECS)
      expect(parsed.values['policy-name']).to.deep.equal(['a', 'b', 'c', 'd'])
    })

    it('lets the last value of a repeated single-valued flag win, as Go does', function () {
      expect(parseFlags(['-description', 'a', '-description=b'], SPECS).values['description']).to.equal('b')
    })

    it('files an alias under its flag\'s name (token -id for -accessor-id)', function () {
      expect(parseFlags(['-id', '4be56c77'], SPECS).values).to.deep.equal({ 'accessor-id': '4be56c77' })
      expect(parseFlags(['--id=4be56c77'], SPECS).values).to.deep.equal({ 'accessor-id': '4be56c77' })
      expect(parseFlags(['-accessor-id', '4be56c77'], SPECS).values).to.deep.equal({ 'accessor-id': '4be56c77' })
    })

    it('refuses an unknown flag with Go\'s message, naming it as typed', function () {
      expect(usage(['-x'])).to.equal('flag provided but not defined: -x')
      expect(usage(['--bogus=1'])).to.equal('flag provided but not defined: -bogus')
      expect(usage(['-description', 'a', '-policy'])).to.equal('flag provided but not defined: -policy')
    })

    it('refuses a flag that needs a value at the end of argv with Go\'s message, naming it as typed', function () {
      expect(usage(['-description'])).to.equal('flag needs an argument: -description')
      expect(usage(['-local', '--id'])).to.equal('flag needs an argument: -id')
    })

    it('ends the flags at --: what follows is positional, even words that look like flags', function () {
      expect(parseFlags(['-local', '--', '-description', 'x', '-bogus'], SPECS)).to.deep.equal({
        values: { local: true },
        positionals: ['-description', 'x', '-bogus'],
      })
    })

    it('keeps words that are not flags as positionals, a lone - included (config write -)', function () {
      expect(parseFlags(['-'], SPECS)).to.deep.equal({ values: {}, positionals: ['-'] })
      expect(parseFlags(['web.json'], SPECS)).to.deep.equal({ values: {}, positionals: ['web.json'] })
      expect(parseFlags(['-local', '-', 'extra'], SPECS)).to.deep.equal({ values: { local: true }, positionals: ['-', 'extra'] })
    })

    it('reads flags after a positional too (more lenient than Go, which stops at the first positional)', function () {
      expect(parseFlags(['web.json', '-local'], SPECS)).to.deep.equal({ values: { local: true }, positionals: ['web.json'] })
    })

    it('turns anything parseArgs itself refuses into a UsageError', function () {
      expect(thrown(() => parseFlags(['---local'], SPECS), UsageError).message).to.match(/---local/)
    })
  })

  describe('describeFlags', function () {
    const specs: FlagSpecs = {
      zebra: { type: 'string', help: 'Last by name.' },
      alpha: { type: 'string', value: 'duration', help: 'First by name.' },
      'merge-things': { type: 'boolean', help: 'Deprecated.', hidden: true },
      middle: { type: 'boolean', help: 'A switch.' },
    }

    it('lists the flags that are not hidden, sorted by name, in Consul\'s layout (-name=<value>, help indented, blank line)', function () {
      expect(describeFlags(specs)).to.equal(
        ['  -alpha=<duration>', '     First by name.', '', '  -middle', '     A switch.', '', '  -zebra=<string>', '     Last by name.', ''].join('\n'),
      )
    })

    it('leaves hidden flags out', function () {
      expect(describeFlags(specs)).not.to.include('merge-things')
      expect(describeFlags({ gone: { type: 'boolean', help: 'x', hidden: true } })).to.equal('')
    })
  })
})
