/**
 * Chromium for the browser tests (test/browser): playwright-core driving the Debian `chromium` package, never a browser
 * that playwright downloads, so the tests run on a fresh clone with nothing fetched but the npm packages (.ci/run
 * installs the Debian package when it is missing).
 *
 * A suite calls `useBrowser()` once at the top of its `describe`. Its `before` finds the browser and launches it
 * headless; where there is none, it prints one line naming the missing browser (once per run, however many suites
 * ask) and skips the suite, so a machine without Chromium shows pending tests, never passing ones. Each test opens
 * pages with `suite.page()`: every page lives in its own browser context (its own session storage, so its own
 * sign-in), closed after the test whatever its outcome; the browser is closed after the suite. What a page threw or
 * logged as an error is printed when its test fails, since a failed wait alone rarely says why.
 *
 * Agents come from test/support/agent.ts (or cluster.ts) on loopback ports; the root hook stops any a test left.
 */
import { accessSync, constants, readFileSync } from 'node:fs'
import { delimiter, join, resolve } from 'node:path'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import type { AgentProcess } from './agent.js'

/** Where Debian's `chromium` package puts the browser; PATH is searched when it is not there. */
export const DEBIAN_CHROMIUM = '/usr/bin/chromium'

/** How long any one page action or wait may take before the test fails (playwright's default is 30 s, the test's 60 s). */
export const ACTION_TIMEOUT_MS = 15_000

/** How long the browser may take to start: a cold start on a loaded CI machine takes a few seconds. */
const LAUNCH_TIMEOUT_MS = 30_000

/**
 * Flags beside headless: no GPU in a container; no QUIC, background networking, component updates, sync or first-run
 * work, so the browser opens no connection but the ones a test makes to its agent on 127.0.0.1.
 */
const CHROMIUM_ARGS = ['--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

/** The browser's executable: /usr/bin/chromium, else the first `chromium` on PATH (as `which` finds it); undefined when none. */
export function chromiumPath(): string | undefined {
  const candidates = [DEBIAN_CHROMIUM, ...(process.env.PATH ?? '').split(delimiter).filter((directory) => directory !== '').map((directory) => join(directory, 'chromium'))]
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // Not there or not executable: try the next place, as `which` does.
    }
  }
  return undefined
}

let missingAnnounced = false

/** The one line a run prints when there is no browser; every later suite skips without repeating it. */
function announceMissing(): void {
  if (missingAnnounced) return
  missingAnnounced = true
  console.log(`      chromium is missing: no ${DEBIAN_CHROMIUM} and no chromium on PATH (apt-get install chromium); skipping the browser tests`)
}

/**
 * Launches the browser headless. playwright's `launch` gives every browser a fresh user-data-dir of its own (a temporary
 * profile, /tmp/playwright_chromiumdev_profile-*, that it deletes on close), so no state survives from one suite or
 * run to the next. Chromium refuses to start as root with its sandbox on, hence `--no-sandbox` there: named here
 * rather than left to playwright's default (which today also turns the sandbox off), so a change of that default
 * cannot stop the tests from starting as root.
 */
export async function launchChromium(executablePath: string): Promise<Browser> {
  const asRoot = process.getuid?.() === 0
  return chromium.launch({
    executablePath,
    headless: true,
    timeout: LAUNCH_TIMEOUT_MS,
    args: [...(asRoot ? ['--no-sandbox'] : []), ...CHROMIUM_ARGS],
  })
}

export interface BrowserSuite {
  /** The suite's browser; only inside a test or a hook after the suite's `before`. */
  readonly browser: Browser
  /** A page in a new context of its own (own session storage), closed after the current test. */
  page(): Promise<Page>
  /**
   * What `page` threw and nothing caught, since it opened. Console errors are not counted: Chromium logs every 4xx
   * answer as one, and a UI that shows a 403 or a 409 to the user is doing its job; they are printed on failure only.
   */
  uncaught(page: Page): string[]
}

/** How a page's log marks what the page threw. */
const UNCAUGHT = 'uncaught: '

/** Registers the suite's hooks (see the file's comment) and answers the handle its tests use. */
export function useBrowser(): BrowserSuite {
  let browser: Browser | undefined
  const contexts = new Set<BrowserContext>()
  const logs = new Map<Page, string[]>()

  before(async function () {
    const executablePath = chromiumPath()
    if (executablePath === undefined) {
      announceMissing()
      this.skip()
    }
    browser = await launchChromium(executablePath)
  })

  afterEach(async function () {
    if (this.currentTest?.state === 'failed') {
      for (const [page, lines] of logs) if (lines.length > 0) console.log(`      page ${page.url()} logged:\n${lines.map((line) => `        ${line}`).join('\n')}`)
    }
    const open = [...contexts]
    contexts.clear()
    logs.clear()
    await Promise.all(open.map((context) => context.close()))
  })

  after(async () => {
    const open = browser
    browser = undefined
    await open?.close()
  })

  return {
    get browser(): Browser {
      if (browser === undefined) throw new Error('the browser is not running: useBrowser() hands it out only inside the suite')
      return browser
    },
    async page(): Promise<Page> {
      const context = await this.browser.newContext()
      contexts.add(context)
      context.setDefaultTimeout(ACTION_TIMEOUT_MS)
      const page = await context.newPage()
      const lines: string[] = []
      logs.set(page, lines)
      page.on('pageerror', (error) => lines.push(`${UNCAUGHT}${error.message}`))
      page.on('console', (message) => {
        // The location names the resource, which Chromium's "Failed to load resource" text leaves out.
        if (message.type() === 'error') lines.push(`console.error: ${message.text()} (${message.location().url})`)
      })
      return page
    },
    uncaught(page: Page): string[] {
      return (logs.get(page) ?? []).filter((line) => line.startsWith(UNCAUGHT))
    },
  }
}

/** The address of the agent's web UI. */
export function uiUrl(agent: Pick<AgentProcess, 'url'>, path = ''): string {
  return `${agent.url}/ui/${path}`
}

/**
 * Signs in on the UI's sign-in form (a password field labelled `Token`, a `Sign in` button) and waits until the signed-in
 * app shows its navigation. `token` defaults to the agent's management token.
 */
export async function signIn(page: Page, agent: Pick<AgentProcess, 'url' | 'managementToken'>, token = agent.managementToken): Promise<void> {
  await page.goto(uiUrl(agent))
  await page.getByLabel('Token', { exact: true }).fill(token)
  await page.getByRole('button', { name: 'Sign in', exact: true }).click()
  await page.getByRole('button', { name: 'Sign out', exact: true }).waitFor()
}

/**
 * The few browser globals tests read inside `page.evaluate`, typed here because the project compiles without the DOM
 * library (adding it would type every Node file as if it ran in a browser). Use as `(globalThis as unknown as
 * BrowserGlobals)`.
 */
export interface BrowserGlobals {
  document: unknown
  navigator: { userAgent: string }
  sessionStorage: { getItem(key: string): string | null; setItem(key: string, value: string): void; length: number; key(index: number): string | null }
  location: { href: string; search: string; hash: string }
}

/** axe-core's browser build, read once. */
let axeSource: string | undefined

export interface AxeViolation {
  id: string
  impact: string | null
  help: string
  nodes: Array<{ target: unknown[]; failureSummary?: string }>
}

/**
 * Runs axe-core on the page as it is and answers its violations. The script goes in through the DevTools protocol
 * (`evaluate`), not a <script> tag: the UI's content security policy allows scripts from the agent only, and the test
 * must not loosen it to look.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  axeSource ??= readFileSync(resolve(import.meta.dirname, '../../node_modules/axe-core/axe.min.js'), 'utf8')
  await page.evaluate(axeSource)
  return page.evaluate(async () => {
    const scope = globalThis as unknown as BrowserGlobals & { axe: { run(context: unknown, options: unknown): Promise<{ violations: AxeViolation[] }> } }
    const results = await scope.axe.run(scope.document, { resultTypes: ['violations'] })
    return results.violations.map((violation) => ({
      id: violation.id,
      impact: violation.impact,
      help: violation.help,
      nodes: violation.nodes.map((node) => ({ target: node.target, ...(node.failureSummary === undefined ? {} : { failureSummary: node.failureSummary }) })),
    }))
  })
}
