/**
 * STYLE.md's layering table as a test: the path of a file under src/ names its layer, and a layer may import only the
 * layers listed for it (the way microsoft/vscode's code-layering lint rule does it). Every file under src/ is parsed
 * with the TypeScript compiler, so comments and strings never count and every form of import does: static, type-only,
 * re-exports, dynamic `import()`, `import('x').T` in types, and `require`. The test also keeps npm packages in their
 * layer (`level` in raft/storage and state, `ws` in transport, koa in http, prom-client in metrics) and keeps the
 * deterministic layers (src/raft, src/state) free of clocks, timers and randomness. Each failure lists every
 * violation as file:line.
 */
import { expect } from 'chai'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import ts from 'typescript'

const ROOT = resolve(import.meta.dirname, '../..')
const SRC = join(ROOT, 'src')

/** STYLE.md "Layout": the layers each layer may import (its own layer is always allowed). */
const ALLOWED: Record<string, readonly string[] | 'everything'> = {
  lib: [],
  // The agent's metrics (prom-client): read from the other layers through plain functions the agent hands it.
  metrics: ['lib'],
  raft: ['lib'],
  'raft/storage': ['raft', 'lib'],
  transport: ['raft', 'lib'],
  state: ['lib'],
  filter: ['lib'],
  acl: ['lib', 'filter', 'state'],
  replica: ['raft', 'raft/storage', 'transport', 'state', 'lib'],
  rpc: ['replica', 'transport', 'state', 'api', 'lib'],
  controllers: ['rpc', 'acl', 'state', 'lib'],
  http: ['acl', 'state', 'rpc', 'filter', 'lib'],
  agent: 'everything',
  // The client stands apart from the server: its own wire types, nothing of state/ or http/.
  api: ['lib'],
  cli: ['agent', 'api', 'lib'],
}

/** npm packages that belong to one or two layers only. */
const PACKAGE_HOMES: Array<{ name: string; matches: (pkg: string) => boolean; layers: readonly string[] }> = [
  { name: 'level', matches: (pkg) => /^(level|classic-level|abstract-level|memory-level|browser-level)$/.test(pkg), layers: ['raft/storage', 'state'] },
  { name: 'ws', matches: (pkg) => pkg === 'ws', layers: ['transport'] },
  { name: 'koa', matches: (pkg) => pkg === 'koa' || pkg.startsWith('koa-') || pkg.startsWith('@koa/'), layers: ['http'] },
  { name: 'prom-client', matches: (pkg) => pkg === 'prom-client', layers: ['metrics'] },
]

/** Layers whose code must be deterministic: no clock, no timer, no randomness. */
const DETERMINISTIC = ['raft', 'raft/storage', 'state']

interface SourceFile {
  /** Path relative to the repository, with forward slashes. */
  path: string
  layer: string | undefined
  ast: ts.SourceFile
}

interface Import {
  file: SourceFile
  line: number
  specifier: string
}

function listTypeScript(directory: string): string[] {
  const files: string[] = []
  for (const item of readdirSync(directory, { withFileTypes: true })) {
    const full = join(directory, item.name)
    if (item.isDirectory()) files.push(...listTypeScript(full))
    else if (item.isFile() && /\.(ts|mts|cts|tsx)$/.test(item.name) && !item.name.endsWith('.d.ts')) files.push(full)
  }
  return files.sort()
}

/** The layer of a path under src/: its first folder, except raft/storage, which is a layer of its own. */
function layerOf(absolute: string): string | undefined {
  const parts = relative(SRC, absolute).split(sep)
  if (parts.length < 2 || parts[0] === '..') return undefined
  const layer = parts[0] === 'raft' && parts[1] === 'storage' && parts.length > 2 ? 'raft/storage' : parts[0]!
  return layer
}

function load(): SourceFile[] {
  return listTypeScript(SRC).map((full) => ({
    path: relative(ROOT, full).split(sep).join('/'),
    layer: layerOf(full),
    ast: ts.createSourceFile(full, readFileSync(full, 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS),
  }))
}

function lineOf(file: SourceFile, node: ts.Node): number {
  return file.ast.getLineAndCharacterOfPosition(node.getStart(file.ast)).line + 1
}

/** Every module specifier the file names, whatever the form of the import. */
function importsOf(file: SourceFile): Import[] {
  const found: Import[] = []
  const add = (node: ts.Node, literal: ts.Node | undefined): void => {
    if (literal !== undefined && ts.isStringLiteralLike(literal)) found.push({ file, line: lineOf(file, node), specifier: literal.text })
  }
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) add(node, node.moduleSpecifier)
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) add(node, node.moduleReference.expression)
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node, node.argument.literal)
    else if (ts.isCallExpression(node)) {
      const callee = node.expression
      const isDynamicImport = callee.kind === ts.SyntaxKind.ImportKeyword
      const isRequire = ts.isIdentifier(callee) && callee.text === 'require'
      if (isDynamicImport || isRequire) add(node, node.arguments[0])
    }
    ts.forEachChild(node, visit)
  }
  visit(file.ast)
  return found
}

function isRelative(specifier: string): boolean {
  return specifier.startsWith('./') || specifier.startsWith('../') || specifier === '.' || specifier === '..'
}

/** The npm package a bare specifier names (`@scope/name` or `name`), or undefined for node builtins. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('node:')) return undefined
  const parts = specifier.split('/')
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
}

function layeringViolations(files: SourceFile[]): string[] {
  const violations: string[] = []
  for (const file of files) {
    if (file.layer === undefined || !(file.layer in ALLOWED)) {
      violations.push(`${file.path}:1 is in no layer of the table (${file.layer ?? 'directly in src/'}); add the layer to STYLE.md and to this test`)
      continue
    }
    const allowed = ALLOWED[file.layer]!
    for (const { line, specifier } of importsOf(file)) {
      if (!isRelative(specifier)) continue
      const target = resolve(ROOT, dirname(file.path), specifier)
      const targetLayer = layerOf(target)
      if (targetLayer === undefined) {
        violations.push(`${file.path}:${line} imports '${specifier}', outside the layers of src/`)
        continue
      }
      if (targetLayer === file.layer || allowed === 'everything' || allowed.includes(targetLayer)) continue
      violations.push(`${file.path}:${line} ${file.layer} imports ${targetLayer} ('${specifier}'); ${file.layer} may import only: ${allowed.join(', ') || 'nothing in src'}`)
    }
  }
  return violations
}

function packageViolations(files: SourceFile[]): string[] {
  const violations: string[] = []
  for (const file of files) {
    for (const { line, specifier } of importsOf(file)) {
      if (isRelative(specifier)) continue
      const pkg = packageOf(specifier)
      if (pkg === undefined) continue
      for (const home of PACKAGE_HOMES) {
        if (home.matches(pkg) && (file.layer === undefined || !home.layers.includes(file.layer))) {
          violations.push(`${file.path}:${line} imports '${specifier}', which belongs only in ${home.layers.join(' and ')}`)
        }
      }
    }
  }
  return violations
}

const RANDOM_CRYPTO = /^(random\w*|getRandomValues|generateKey\w*|generatePrime\w*)$/

/** Clock reads, timers and randomness in one file, found in the syntax tree (so never in comments or strings). */
function nondeterminismIn(file: SourceFile): string[] {
  const found: string[] = []
  const report = (node: ts.Node, what: string): void => {
    found.push(`${file.path}:${lineOf(file, node)} ${what}`)
  }
  const visit = (node: ts.Node): void => {
    if (ts.isPropertyAccessExpression(node)) {
      const owner = node.expression.getText(file.ast)
      const member = node.name.text
      if (owner === 'Date' && member === 'now') report(node, 'reads the clock (Date.now)')
      if (owner === 'performance' && member === 'now') report(node, 'reads the clock (performance.now)')
      if (owner === 'process' && (member === 'hrtime' || member === 'uptime')) report(node, `reads the clock (process.${member})`)
      if (owner === 'Math' && member === 'random') report(node, 'draws randomness (Math.random)')
      if (/(^|\.)(crypto|webcrypto)$/.test(owner) && RANDOM_CRYPTO.test(member)) report(node, `draws randomness (${owner}.${member})`)
      if (/^(globalThis|window|global)$/.test(owner) && /^(setTimeout|setInterval|setImmediate)$/.test(member)) report(node, `starts a timer (${member})`)
    }
    if (ts.isIdentifier(node) && /^(setTimeout|setInterval|setImmediate)$/.test(node.text)) {
      // Any use counts, called or passed along; a property name of another object (x.setTimeout) is caught above.
      const parent = node.parent
      const isMemberName = ts.isPropertyAccessExpression(parent) && parent.name === node
      if (!isMemberName) report(node, `starts a timer (${node.text})`)
    }
    if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'Date' && (node.arguments?.length ?? 0) === 0) {
      report(node, 'reads the clock (new Date())')
    }
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'Date') {
      report(node, 'reads the clock (Date())')
    }
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const from = node.moduleSpecifier.text
      const bindings = node.importClause?.namedBindings
      if (/^(node:)?(crypto|timers|timers\/promises|perf_hooks)$/.test(from) && bindings !== undefined && ts.isNamedImports(bindings)) {
        for (const element of bindings.elements) {
          const name = (element.propertyName ?? element.name).text
          if (from.endsWith('crypto') && RANDOM_CRYPTO.test(name)) report(element, `draws randomness ('${name}' from '${from}')`)
          if (from.includes('timers')) report(element, `starts a timer ('${name}' from '${from}')`)
          if (from.endsWith('perf_hooks') && name === 'performance') report(element, `reads the clock ('performance' from '${from}')`)
        }
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(file.ast)
  return found
}

function describeViolations(kind: string, violations: string[]): string {
  return `${violations.length} ${kind}:\n  ${violations.join('\n  ')}`
}

describe('layering (STYLE.md "Layout")', function () {
  const files = load()

  it('finds the source files and their layers', function () {
    // Guards the test itself: a wrong root would make every rule below pass vacuously.
    expect(files.length).to.be.greaterThan(20)
    const layers = new Set(files.map((file) => file.layer))
    for (const layer of ['lib', 'state', 'raft/storage', 'http', 'agent', 'api', 'cli']) expect(layers.has(layer), layer).to.equal(true)
    expect(files.flatMap(importsOf).length).to.be.greaterThan(50)
  })

  it('each layer imports only the layers the table allows it', function () {
    const violations = layeringViolations(files)
    expect(violations, describeViolations('layering violation(s)', violations)).to.deep.equal([])
  })

  it('npm packages stay in their layer: level in raft/storage and state, ws in transport, koa in http, prom-client in metrics', function () {
    const violations = packageViolations(files)
    expect(violations, describeViolations('package(s) outside their layer', violations)).to.deep.equal([])
  })

  it('src/raft and src/state never read the clock, start a timer or draw randomness', function () {
    const violations = files.filter((file) => file.layer !== undefined && DETERMINISTIC.includes(file.layer)).flatMap(nondeterminismIn)
    expect(violations, describeViolations('nondeterministic call(s) in a deterministic layer', violations)).to.deep.equal([])
  })

  describe('the checker itself', function () {
    /** Parses `text` as if it were the file at `path` under src/. */
    function fake(path: string, text: string): SourceFile {
      const full = join(SRC, path)
      return { path: `src/${path}`, layer: layerOf(full), ast: ts.createSourceFile(full, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS) }
    }

    it('maps paths to layers, with raft/storage apart from raft', function () {
      expect(layerOf(join(SRC, 'raft/storage/log-store.ts'))).to.equal('raft/storage')
      expect(layerOf(join(SRC, 'raft/log.ts'))).to.equal('raft')
      expect(layerOf(join(SRC, 'acl/rules/index.ts'))).to.equal('acl')
      expect(layerOf(join(SRC, 'index.ts'))).to.equal(undefined)
    })

    it('sees every import form and ignores comments and strings', function () {
      const file = fake(
        'state/x.ts',
        [
          "import { a } from '../lib/a.js'",
          "import type { B } from '../raft/b.js'",
          "export { c } from '../http/c.js'",
          "export * from '../acl/d.js'",
          "const e = await import('../rpc/e.js')",
          "type F = import('../replica/f.js').F",
          "import g = require('../agent/g.js')",
          "// import { h } from '../http/h.js'",
          "/* import { i } from '../http/i.js' */",
          "const s = \"import { j } from '../http/j.js'\"",
        ].join('\n'),
      )
      expect(importsOf(file).map((item) => `${item.line} ${item.specifier}`)).to.deep.equal([
        '1 ../lib/a.js',
        '2 ../raft/b.js',
        '3 ../http/c.js',
        '4 ../acl/d.js',
        '5 ../rpc/e.js',
        '6 ../replica/f.js',
        '7 ../agent/g.js',
      ])
      expect(layeringViolations([file]).map((line) => line.split(' ')[0])).to.deep.equal([
        'src/state/x.ts:2',
        'src/state/x.ts:3',
        'src/state/x.ts:4',
        'src/state/x.ts:5',
        'src/state/x.ts:6',
        'src/state/x.ts:7',
      ])
    })

    it('flags misplaced packages and allows them at home', function () {
      const away = fake('http/server.ts', "import { Level } from 'level'\nimport WebSocket from 'ws'\nimport Router from '@koa/router'")
      const home = fake('raft/storage/s.ts', "import { Level } from 'level'")
      expect(packageViolations([away, home]).map((line) => line.split(' ')[0])).to.deep.equal(['src/http/server.ts:1', 'src/http/server.ts:2'])
    })

    it('flags clocks, timers and randomness in code but not in comments or strings', function () {
      const file = fake(
        'state/y.ts',
        [
          '// Date.now() and Math.random() in a comment are fine',
          "const note = 'setTimeout(Date.now)'",
          'const a = Date.now()',
          'const b = Math.random()',
          'setTimeout(() => {}, 1)',
          "import { randomUUID } from 'node:crypto'",
          'const c = crypto.randomBytes(4)',
          'const d = new Date()',
          'const e = Date.parse("2024-01-01T00:00:00Z")',
          'const f = new Date(0)',
          "import { createHash } from 'node:crypto'",
        ].join('\n'),
      )
      expect(nondeterminismIn(file).map((line) => line.split(' ')[0])).to.deep.equal([
        'src/state/y.ts:3',
        'src/state/y.ts:4',
        'src/state/y.ts:5',
        'src/state/y.ts:6',
        'src/state/y.ts:7',
        'src/state/y.ts:8',
      ])
    })
  })
})
