/**
 * Issue 17's rule as a test: everything in this repository that calls the HTTP API from outside an agent goes through
 * the one client, src/api (the CLI, the cluster tool, the benchmarks, chaos, the test helpers). The files of cluster/,
 * scripts/, test/ and src/ (but src/api, which is that client, and src/http, the server) are parsed with the
 * TypeScript compiler, as test/unit/layering.test.ts parses src/, so comments and strings never count. A raw HTTP
 * client is a call of the global `fetch` (not a method or a local binding of that name), or `request` or `get` of
 * node:http or node:https, imported by name or called on the module. Servers and doubles of third-party services
 * import `createServer`, which is no client, so they need no entry; an entry here is a file that does call out, with
 * the reason, and an entry that no longer matches anything fails too, so the list cannot go stale. A failure lists
 * every raw call as file:line.
 */
import { expect } from 'chai'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative, resolve, sep } from 'node:path'
import ts from 'typescript'

const ROOT = resolve(import.meta.dirname, '../../..')
const SCANNED = ['cluster', 'scripts', 'test', 'src']
/** Not scanned: the client itself, and the server. */
const NOT_SCANNED = ['src/api/', 'src/http/']

/** Files (or folders, ending in /) that may call out over HTTP without src/api, each with the reason. */
const ALLOWED: Record<string, string> = {
  'src/controllers/link-controller.ts': "the cloud link calls the cloud's token and cluster endpoints, not warden's API",
  'src/acl/auth/': "auth methods fetch OIDC discovery, JWKS and AWS STS documents from identity providers, not warden's API",
  'test/unit/transport/listener.test.ts': "sends a plain HTTP request to the cluster port, which is not warden's API, to see it refused",
  'test/unit/cli/tls.test.ts': "tests generated certificates in TLS handshakes with a plain node:https server, not warden's API",
}

const HTTP_MODULES = /^(node:)?https?$/
const CLIENT_FUNCTIONS = new Set(['request', 'get'])

interface SourceFile {
  /** Path relative to the repository, with forward slashes. */
  path: string
  ast: ts.SourceFile
}

function listSources(directory: string): string[] {
  const files: string[] = []
  for (const item of readdirSync(directory, { withFileTypes: true })) {
    if (item.name.startsWith('.') || item.name === 'node_modules' || item.name === 'dist') continue
    const full = join(directory, item.name)
    if (item.isDirectory()) files.push(...listSources(full))
    else if (item.isFile() && /\.(ts|mts|cts|tsx|js|mjs|cjs)$/.test(item.name) && !item.name.endsWith('.d.ts')) files.push(full)
  }
  return files.sort()
}

function parse(path: string, text: string): SourceFile {
  const kind = /\.(m|c)?js$/.test(path) ? ts.ScriptKind.JS : ts.ScriptKind.TS
  return { path, ast: ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, kind) }
}

function load(): SourceFile[] {
  return SCANNED.flatMap((folder) => listSources(join(ROOT, folder)))
    .map((full) => relative(ROOT, full).split(sep).join('/'))
    .filter((path) => !NOT_SCANNED.some((prefix) => path.startsWith(prefix)))
    .map((path) => parse(path, readFileSync(join(ROOT, path), 'utf8')))
}

function lineOf(file: SourceFile, node: ts.Node): number {
  return file.ast.getLineAndCharacterOfPosition(node.getStart(file.ast)).line + 1
}

/** The names a binding pattern (or plain name) introduces. */
function boundNames(name: ts.BindingName): string[] {
  if (ts.isIdentifier(name)) return [name.text]
  return name.elements.flatMap((element) => (ts.isOmittedExpression(element) ? [] : boundNames(element.name)))
}

/** Whether `scope` itself declares `name`: a parameter, a variable, function or class of its own statements, or an import. */
function declares(scope: ts.Node, name: string): boolean {
  if (ts.isFunctionLike(scope) && scope.parameters.some((parameter) => boundNames(parameter.name).includes(name))) return true
  if (ts.isCatchClause(scope) && scope.variableDeclaration !== undefined && boundNames(scope.variableDeclaration.name).includes(name)) return true
  if ((ts.isForOfStatement(scope) || ts.isForInStatement(scope) || ts.isForStatement(scope)) && scope.initializer !== undefined && ts.isVariableDeclarationList(scope.initializer)) {
    if (scope.initializer.declarations.some((declaration) => boundNames(declaration.name).includes(name))) return true
  }
  if (!ts.isBlock(scope) && !ts.isSourceFile(scope) && !ts.isModuleBlock(scope)) return false
  return scope.statements.some((statement) => {
    if (ts.isVariableStatement(statement)) return statement.declarationList.declarations.some((declaration) => boundNames(declaration.name).includes(name))
    if (ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement)) return statement.name?.text === name
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause
      if (clause?.name?.text === name) return true
      const bindings = clause?.namedBindings
      if (bindings === undefined) return false
      return ts.isNamespaceImport(bindings) ? bindings.name.text === name : bindings.elements.some((element) => element.name.text === name)
    }
    return false
  })
}

/** Whether the identifier names a binding of the file rather than the global of that name. */
function isLocal(identifier: ts.Identifier): boolean {
  for (let scope: ts.Node | undefined = identifier.parent; scope !== undefined; scope = scope.parent) {
    if (declares(scope, identifier.text)) return true
  }
  return false
}

/** Every raw HTTP client call in one file, as `path:line what`. */
function rawClientsIn(file: SourceFile): string[] {
  const found: string[] = []
  const report = (node: ts.Node, what: string): void => {
    found.push(`${file.path}:${lineOf(file, node)} ${what}`)
  }
  // Default and namespace imports of node:http(s): their `.request(` and `.get(` are client calls.
  const modules = new Map<string, string>()
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier) && HTTP_MODULES.test(node.moduleSpecifier.text)) {
      const from = node.moduleSpecifier.text
      const clause = node.importClause
      if (clause?.name !== undefined) modules.set(clause.name.text, from)
      const bindings = clause?.namedBindings
      if (bindings !== undefined && ts.isNamespaceImport(bindings)) modules.set(bindings.name.text, from)
      if (bindings !== undefined && ts.isNamedImports(bindings)) {
        for (const element of bindings.elements) {
          const imported = (element.propertyName ?? element.name).text
          if (CLIENT_FUNCTIONS.has(imported)) report(element, `imports '${imported}' from '${from}'`)
        }
      }
    }
    if (ts.isCallExpression(node)) {
      const callee = node.expression
      if (ts.isIdentifier(callee) && callee.text === 'fetch' && !isLocal(callee)) report(node, 'calls fetch')
      if (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression)) {
        const owner = callee.expression.text
        const member = callee.name.text
        if (member === 'fetch' && /^(globalThis|global|window|self)$/.test(owner) && !isLocal(callee.expression)) report(node, `calls ${owner}.fetch`)
        const from = modules.get(owner)
        if (from !== undefined && CLIENT_FUNCTIONS.has(member)) report(node, `calls ${member} of '${from}'`)
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(file.ast)
  return found
}

/** The allowlist entry that covers a path, if any. */
function allowedBy(path: string): string | undefined {
  return Object.keys(ALLOWED).find((entry) => (entry.endsWith('/') ? path.startsWith(entry) : path === entry))
}

describe('one HTTP client (issue 17): no raw HTTP calls outside src/api', function () {
  const files = load()
  const findings = files.flatMap(rawClientsIn)

  it('finds the files of every scanned folder', function () {
    // Guards the test itself: a wrong root would make the rule below pass vacuously.
    for (const path of ['cluster/lib.ts', 'scripts/chaos/http.ts', 'scripts/bench/blocking-driver.ts', 'test/support/agent.ts', 'src/agent/agent.ts']) {
      expect(files.map((file) => file.path)).to.include(path)
    }
    expect(files.some((file) => file.path.startsWith('src/api/') || file.path.startsWith('src/http/'))).to.equal(false)
  })

  it('calls the HTTP API only through src/api: no fetch, no node:http request or get, outside the allowlist', function () {
    const violations = findings.filter((finding) => allowedBy(finding.split(':')[0]!) === undefined)
    expect(violations, `${violations.length} raw HTTP call(s); use src/api (or allowlist a file that calls another service, with the reason):\n  ${violations.join('\n  ')}`).to.deep.equal([])
  })

  it('allowlists only files that still call out', function () {
    const stale = Object.keys(ALLOWED).filter((entry) => !findings.some((finding) => allowedBy(finding.split(':')[0]!) === entry))
    expect(stale, `allowlist entries that match no raw HTTP call any more (remove them): ${stale.join(', ')}`).to.deep.equal([])
  })

  describe('the scanner itself', function () {
    it('sees fetch, globalThis.fetch, and request or get of node:http(s) in every import form', function () {
      const file = parse(
        'scripts/x.ts',
        [
          "const a = await fetch('http://127.0.0.1:8500/v1/acl/policies')",
          "const b = await globalThis.fetch('http://h/')",
          "import { request } from 'node:http'",
          "import { get as httpsGet, Agent } from 'https'",
          "import * as http from 'http'",
          "http.request({ host: 'h' })",
          "import https from 'node:https'",
          "https.get('https://h/')",
          'function f() { return fetch(url) }',
        ].join('\n'),
      )
      expect(rawClientsIn(file).map((line) => line.split(' ')[0])).to.deep.equal([
        'scripts/x.ts:1',
        'scripts/x.ts:2',
        'scripts/x.ts:3',
        'scripts/x.ts:4',
        'scripts/x.ts:6',
        'scripts/x.ts:8',
        'scripts/x.ts:9',
      ])
    })

    it('ignores comments, strings, methods and local bindings named fetch, and servers', function () {
      const file = parse(
        'test/y.ts',
        [
          "// await fetch('http://h/') in a comment is fine",
          "const note = \"fetch('http://h/')\"",
          "import { createServer, type IncomingMessage } from 'node:http'",
          'class Cache { fetch(key: string) { return key } }',
          "new Cache().fetch('k')",
          'this.documents.fetch(entry)',
          "function load(fetch: () => Promise<string>) { return fetch() }",
          'const run = (fetch: () => void) => { fetch() }',
          "import { request } from './api.js'",
          "request('GET', '/v1/acl/policies')",
          '{ const fetch = (): number => 1; fetch() }',
        ].join('\n'),
      )
      expect(rawClientsIn(file)).to.deep.equal([])
    })

    it('matches allowlist entries by file and by folder', function () {
      expect(allowedBy('src/acl/auth/http-client.ts')).to.equal('src/acl/auth/')
      expect(allowedBy('src/controllers/link-controller.ts')).to.equal('src/controllers/link-controller.ts')
      expect(allowedBy('src/controllers/link-controller-extra.ts')).to.equal(undefined)
      expect(allowedBy('src/rpc/join-client.ts')).to.equal(undefined)
      expect(allowedBy('src/acl/authorizer.ts')).to.equal(undefined)
    })
  })
})
