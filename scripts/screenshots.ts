/**
 * `npm run screenshots [-- --out DIR]`: screenshots of the web UI's main pages for the README, written as
 * DIR/ui-*.png (default docs/). Not part of `npm test`: the pictures are for people, and change with every style edit.
 *
 * It starts a three-node cluster of real agents from dist/ (test/support/cluster.ts, loopback, free ports; `npm run
 * screenshots` builds first), writes sample data through the API (policies, roles, tokens, an auth method with a
 * binding rule, config entries), and drives Debian's Chromium (test/support/browser.ts) signed in with the management
 * token, or with a read-only token for the page that shows refused controls. Every process it started is stopped on
 * the way out, also after a failure or Ctrl-C. Exit codes: 0 written, 1 failure, 2 usage.
 */
import { generateKeyPairSync } from 'node:crypto'
import { mkdir } from 'node:fs/promises'
import { join, relative, resolve } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import type { AgentProcess } from '../test/support/agent.js'
import { chromiumPath, launchChromium, signIn, uiUrl } from '../test/support/browser.js'
import { TestCluster } from '../test/support/cluster.js'

const ROOT = resolve(import.meta.dirname, '..')
const VIEWPORT = { width: 1280, height: 860 }
/** How long any one wait of a page may take. */
const WAIT_MS = 15_000

const WEB_RULES = ['service "web" {', '  policy = "write"', '}', 'service_prefix "" {', '  policy = "read"', '}', 'node_prefix "" {', '  policy = "read"', '}', ''].join('\n')
const OPS_RULES = ['operator = "write"', 'acl = "read"', 'key_prefix "ops/" {', '  policy = "write"', '}', ''].join('\n')
const READ_ONLY_RULES = ['acl = "read"', 'service_prefix "" {', '  policy = "read"', '}', ''].join('\n')
/** Rules the agent refuses at line 5, column 12: the editor shows the line with a caret. */
const BAD_RULES = ['service "web" {', '  policy = "read"', '}', 'key_prefix "" {', '  policy = "writ"', '}', ''].join('\n')

function parseOut(argv: string[]): string {
  if (argv.length === 0) return join(ROOT, 'docs')
  if (argv.length === 2 && argv[0] === '--out' && argv[1] !== undefined) return resolve(argv[1])
  console.error('usage: npm run screenshots [-- --out DIR]')
  process.exit(2)
}

/** A request that must succeed; answers the body. */
async function must(agent: AgentProcess, method: string, path: string, body: unknown): Promise<any> {
  const answer = await agent.request(method, path, { body })
  if (answer.status !== 200) throw new Error(`${method} ${path}: ${answer.status} ${answer.text}`)
  return answer.body
}

interface Sample {
  webToken: string
  webPolicy: string
  readOnlySecret: string
}

/** Policies, roles, tokens, an auth method with a binding rule, and config entries: what an operator would have. */
async function writeSample(agent: AgentProcess): Promise<Sample> {
  const web = await must(agent, 'PUT', '/v1/acl/policy', { Name: 'web-deploy', Description: 'Deploys the web service; reads the catalog', Rules: WEB_RULES })
  const ops = await must(agent, 'PUT', '/v1/acl/policy', { Name: 'ops', Description: 'Operators: Raft and the ops/ keys', Rules: OPS_RULES })
  const readOnly = await must(agent, 'PUT', '/v1/acl/policy', { Name: 'acl-read', Description: 'Reads ACLs and services', Rules: READ_ONLY_RULES })
  const team = await must(agent, 'PUT', '/v1/acl/role', { Name: 'web-team', Description: 'The web team', Policies: [{ ID: web.ID }], ServiceIdentities: [{ ServiceName: 'web-canary' }] })
  const webToken = await must(agent, 'PUT', '/v1/acl/token', { Description: 'web frontend CI', Policies: [{ ID: web.ID }], Roles: [{ ID: team.ID }] })
  await must(agent, 'PUT', '/v1/acl/token', { Description: 'on-call operator', Policies: [{ ID: ops.ID }] })
  await must(agent, 'PUT', '/v1/acl/token', { Description: 'api sidecar', ServiceIdentities: [{ ServiceName: 'api' }], Local: true })
  await must(agent, 'PUT', '/v1/acl/token', { Description: 'templated: api', TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { Name: 'api' } }] })
  const reader = await must(agent, 'PUT', '/v1/acl/token', { Description: 'auditor (read-only)', Policies: [{ ID: readOnly.ID }] })
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  await must(agent, 'PUT', '/v1/acl/auth-method', {
    Name: 'ci-jwt',
    Type: 'jwt',
    Description: 'CI jobs log in with their job token',
    Config: { JWTValidationPubKeys: [publicKey.export({ type: 'spki', format: 'pem' }).toString()], BoundIssuer: 'https://ci.example', ClaimMappings: { project: 'project' } },
  })
  await must(agent, 'PUT', '/v1/acl/binding-rule', { AuthMethod: 'ci-jwt', Description: 'each project deploys its service', BindType: 'service', BindName: '${value.project}', Selector: 'value.project != ""' })
  for (const entry of [
    { Kind: 'proxy-defaults', Name: 'global', Config: { protocol: 'http' } },
    { Kind: 'service-defaults', Name: 'web', Protocol: 'http', MaxInboundConnections: 512 },
    { Kind: 'service-defaults', Name: 'api', Protocol: 'grpc' },
    { Kind: 'service-defaults', Name: 'billing', Protocol: 'http2' },
  ]) {
    if ((await must(agent, 'PUT', '/v1/config', entry)) !== true) throw new Error(`config entry ${entry.Kind}/${entry.Name} not written`)
  }
  return { webToken: webToken.AccessorID, webPolicy: web.ID, readOnlySecret: reader.SecretID }
}

/** Waits until nothing on the page says it is loading (the lists, records and verdicts have come). */
async function settled(page: Page): Promise<void> {
  await page.getByText(/^Loading /).first().waitFor({ state: 'detached', timeout: WAIT_MS })
}

async function shoot(page: Page, out: string, name: string, options: { fullPage?: boolean } = {}): Promise<void> {
  await settled(page)
  // The heading keeps the focus after a navigation; its outline is for keyboard users, not for the pictures.
  await page.evaluate(() => (globalThis as unknown as { document: { activeElement: { blur?: () => void } | null } }).document.activeElement?.blur?.())
  const path = join(out, `ui-${name}.png`)
  await page.screenshot({ path, fullPage: options.fullPage ?? false })
  console.log(`wrote ${relative(process.cwd(), path)}`)
}

async function heading(page: Page, name: string | RegExp): Promise<void> {
  await page.getByRole('heading', { level: 1, name, ...(typeof name === 'string' ? { exact: true } : {}) }).waitFor({ timeout: WAIT_MS })
}

async function capture(browser: Browser, cluster: TestCluster, out: string): Promise<void> {
  const leader = await cluster.leader()
  const agent = cluster.node(leader)
  const sample = await writeSample(agent)
  const context = await browser.newContext({ viewport: VIEWPORT })
  context.setDefaultTimeout(WAIT_MS)
  const page = await context.newPage()

  await page.goto(uiUrl(agent))
  await page.getByLabel('Token', { exact: true }).waitFor()
  await shoot(page, out, 'sign-in')

  await signIn(page, agent)
  await heading(page, 'Tokens')
  await page.getByRole('table').waitFor()
  await shoot(page, out, 'tokens')

  await page.goto(uiUrl(agent, `tokens/${sample.webToken}`))
  await page.getByRole('table', { name: 'Permissions by resource' }).waitFor()
  await shoot(page, out, 'token', { fullPage: true })

  await page.goto(uiUrl(agent, `policies/${sample.webPolicy}`))
  await heading(page, 'Policy web-deploy')
  await shoot(page, out, 'policy')

  await page.goto(uiUrl(agent, 'policies/new'))
  await page.getByLabel('Name', { exact: true }).fill('kv-writer')
  await page.getByLabel('Rules', { exact: true }).fill(BAD_RULES)
  await page.getByRole('button', { name: 'Create', exact: true }).click()
  await page.getByLabel(/^Line \d+, column \d+$/).waitFor()
  await shoot(page, out, 'policy-error')

  await page.goto(uiUrl(agent, 'config/service-defaults/web'))
  const editor = page.getByLabel('Entry (JSON)', { exact: true })
  await editor.waitFor()
  await shoot(page, out, 'config')
  // Another editor saves first: this one's save then loses the cas race, and says so.
  await must(agent, 'PUT', '/v1/config', { Kind: 'service-defaults', Name: 'web', Protocol: 'http2', MaxInboundConnections: 512 })
  await editor.fill(JSON.stringify({ Kind: 'service-defaults', Name: 'web', Protocol: 'grpc', MaxInboundConnections: 1024 }, null, 2))
  await page.getByRole('button', { name: 'Save', exact: true }).click()
  await page.getByRole('button', { name: 'Reload the entry', exact: true }).waitFor()
  await shoot(page, out, 'config-conflict', { fullPage: true })

  await page.goto(uiUrl(agent, 'cluster'))
  await page.getByText(`Leader: ${leader} (`).waitFor()
  await shoot(page, out, 'cluster', { fullPage: true })
  await context.close()

  // The same token page for a token that may only read: the write controls are disabled with the reason.
  const reader = await browser.newContext({ viewport: VIEWPORT })
  reader.setDefaultTimeout(WAIT_MS)
  const readerPage = await reader.newPage()
  await signIn(readerPage, agent, sample.readOnlySecret)
  await readerPage.goto(uiUrl(agent, `tokens/${sample.webToken}`))
  await readerPage.getByRole('button', { name: 'Edit', exact: true, disabled: true }).waitFor()
  await shoot(readerPage, out, 'read-only')
  await reader.close()
}

async function main(): Promise<void> {
  const out = parseOut(process.argv.slice(2))
  const executablePath = chromiumPath()
  if (executablePath === undefined) {
    console.error('chromium is missing: no /usr/bin/chromium and no chromium on PATH (apt-get install chromium)')
    process.exit(1)
  }
  await mkdir(out, { recursive: true })
  let cluster: TestCluster | undefined
  let browser: Browser | undefined
  const stop = async (): Promise<void> => {
    const [openBrowser, openCluster] = [browser, cluster]
    browser = undefined
    cluster = undefined
    await openBrowser?.close()
    await openCluster?.stop()
  }
  process.once('SIGINT', () => {
    void stop().finally(() => process.exit(130))
  })
  try {
    cluster = await TestCluster.start()
    browser = await launchChromium(executablePath)
    await capture(browser, cluster, out)
  } finally {
    await stop()
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : String(error))
  process.exitCode = 1
})
