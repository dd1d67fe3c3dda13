/**
 * `npx tsx scripts/ui-timing.ts [--runs N] [--tokens N]`: how long the web UI takes to show a usable token list
 * (issue 21's budget: under 1 s from navigation on this machine), measured in Debian's Chromium against a dev agent
 * from dist/ (`npm run build` first) holding N tokens besides its own (default 100). Usable: the list is drawn with
 * every token in it.
 *
 * Each run is a new browser context (no cache, no session storage) and measures, in this order:
 * - `sign-in`: from the click on "Sign in" to the list, as the user waits after typing the token;
 * - `cold`: a navigation to /ui/tokens while signed in, with the browser's cache cleared first (the page, its script
 *   and style sheet fetched again);
 * - `warm`: the same navigation again, assets from the cache (they are immutable), as a reload or a shared link.
 * Navigations are timed inside the page, from its navigation start (`performance.now()` when the last row appears,
 * checked every animation frame), so playwright's own overhead is not counted; `sign-in` is timed from here.
 * Prints the median, the fastest and the slowest of each. Not part of npm test: a figure, not a check.
 */
import type { Page } from 'playwright-core'
import { startAgent, type AgentProcess } from '../test/support/agent.js'
import { chromiumPath, launchChromium, uiUrl } from '../test/support/browser.js'

interface Options {
  runs: number
  tokens: number
}

function parseOptions(argv: string[]): Options {
  const options: Options = { runs: 10, tokens: 100 }
  for (let i = 0; i < argv.length; i += 2) {
    const value = Number(argv[i + 1])
    if ((argv[i] === '--runs' || argv[i] === '--tokens') && Number.isInteger(value) && value >= (argv[i] === '--runs' ? 1 : 0)) options[argv[i] === '--runs' ? 'runs' : 'tokens'] = value
    else {
      console.error('usage: npx tsx scripts/ui-timing.ts [--runs N] [--tokens N]')
      process.exit(2)
    }
  }
  return options
}

/** Resolves when the page's token table has `rows` body rows, with the page's performance.now() at that frame. */
async function listShownAt(page: Page, rows: number): Promise<number> {
  const handle = await page.waitForFunction(
    (expected) => {
      const document = (globalThis as unknown as { document: { querySelectorAll(selector: string): { length: number } } }).document
      return document.querySelectorAll('main table tbody tr').length >= expected ? performance.now() : false
    },
    rows,
    { polling: 'raf', timeout: 30_000 },
  )
  return (await handle.jsonValue()) as number
}

function summary(name: string, values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b)
  const median = sorted.length % 2 === 1 ? sorted[(sorted.length - 1) / 2]! : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2
  return `${name.padEnd(8)} median ${median.toFixed(0).padStart(5)} ms   fastest ${sorted[0]!.toFixed(0).padStart(5)} ms   slowest ${sorted[sorted.length - 1]!.toFixed(0).padStart(5)} ms`
}

async function seed(agent: AgentProcess, count: number): Promise<number> {
  for (let i = 0; i < count; i += 1) {
    const answer = await agent.request('PUT', '/v1/acl/token', { body: { Description: `timing token ${i}` } })
    if (answer.status !== 200) throw new Error(`creating token ${i}: ${answer.status} ${answer.text}`)
  }
  const list = await agent.request('GET', '/v1/acl/tokens')
  return (list.body as unknown[]).length
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2))
  const executablePath = chromiumPath()
  if (executablePath === undefined) {
    console.error('chromium is missing: no /usr/bin/chromium and no chromium on PATH (apt-get install chromium)')
    process.exit(1)
  }
  const agent = await startAgent()
  const browser = await launchChromium(executablePath).catch(async (error: unknown) => {
    await agent.stop()
    throw error
  })
  const stop = async (): Promise<void> => {
    await browser.close()
    await agent.stop()
  }
  process.once('SIGINT', () => {
    void stop().finally(() => process.exit(130))
  })
  try {
    const rows = await seed(agent, options.tokens)
    const measured = { 'sign-in': [] as number[], cold: [] as number[], warm: [] as number[] }
    for (let run = 0; run < options.runs; run += 1) {
      const context = await browser.newContext()
      const page = await context.newPage()
      await page.goto(uiUrl(agent))
      await page.getByLabel('Token', { exact: true }).fill(agent.managementToken)
      const clickedAt = performance.now()
      await page.getByRole('button', { name: 'Sign in', exact: true }).click()
      await listShownAt(page, rows)
      measured['sign-in'].push(performance.now() - clickedAt)
      const devtools = await context.newCDPSession(page)
      await devtools.send('Network.clearBrowserCache')
      await page.goto(uiUrl(agent, 'tokens'))
      measured.cold.push(await listShownAt(page, rows))
      await page.goto(uiUrl(agent, 'tokens'))
      measured.warm.push(await listShownAt(page, rows))
      await context.close()
    }
    console.log(`time to a usable token list (${rows} tokens, ${options.runs} runs, Chromium ${browser.version()}):`)
    for (const [name, values] of Object.entries(measured)) console.log(`  ${summary(name, values)}`)
  } finally {
    await stop()
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : String(error))
  process.exitCode = 1
})
