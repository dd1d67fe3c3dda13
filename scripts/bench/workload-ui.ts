/**
 * The web UI (issue 21), in Debian's Chromium driven by playwright-core: the bundle's size as served (gzip), how long a
 * usable token list takes (from a cold navigation through the sign-in form, and from a navigation to /ui/tokens in a
 * signed-in tab), and how long a token created through the API takes to appear in an open list. The cluster holds
 * TOKENS tokens, so the list is not a trivial one. Skipped, with one note, where there is no Chromium.
 *
 * Usable: the table is drawn with the caller's own token in it, and "New token" is there to click (the browser tests
 * use the same definition, test/browser/acl.test.ts).
 */
import { readdir, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import type { Page } from 'playwright-core'
import { chromiumPath, launchChromium } from '../../test/support/browser.js'
import { sleep, type BenchContext } from './context.js'
import { percentile, pool } from './http-client.js'
import type { UiSummary } from './results.js'
import type { WardenCluster } from './warden.js'

const TOKENS = 1_000
const SAMPLES = 10
const UI_DIR = join(import.meta.dirname, '..', '..', 'dist', 'ui')
const WAIT_MS = 15_000

/** Files under the built UI, recursively. */
async function files(directory: string): Promise<string[]> {
  const found: string[] = []
  for (const entry of await readdir(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name)
    if (entry.isDirectory()) found.push(...(await files(path)))
    else found.push(path)
  }
  return found
}

function row(page: Page, text: string) {
  return page.getByRole('row').filter({ hasText: text })
}

export async function wardenUi(ctx: BenchContext, warden: WardenCluster): Promise<void> {
  const executablePath = chromiumPath()
  if (executablePath === undefined) {
    ctx.results.skipped.push('ui: chromium is missing (apt-get install chromium)')
    ctx.progress.note('ui: chromium is missing (apt-get install chromium); skipping')
    return
  }
  let rawBytes = 0
  let gzipBytes = 0
  for (const file of await files(UI_DIR)) {
    rawBytes += (await stat(file)).size
    gzipBytes += gzipSync(await readFile(file), { level: 9 }).length
  }

  ctx.progress.step(`ui: ${TOKENS} tokens, then ${SAMPLES} cold and ${SAMPLES} signed-in loads of the token list in Chromium`)
  await pool(TOKENS, 32, async (n) => {
    await warden.json(warden.leader, 'PUT', '/v1/acl/token', { Description: `ui bench ${n}` })
  })
  const self = await warden.json<{ AccessorID: string }>(warden.leader, 'GET', '/v1/acl/token/self')
  const origin = warden.origin(warden.leader)
  const browser = await launchChromium(executablePath)
  const cold: number[] = []
  const signedIn: number[] = []
  const live: number[] = []
  try {
    const usable = async (page: Page): Promise<void> => {
      await row(page, self.AccessorID).first().waitFor({ timeout: WAIT_MS })
      await page.getByRole('link', { name: 'New token', exact: true }).waitFor({ timeout: WAIT_MS })
    }
    for (let n = 0; n < SAMPLES; n++) {
      // A fresh context each time: nothing cached, no session.
      const context = await browser.newContext()
      try {
        const page = await context.newPage()
        const startedAt = performance.now()
        await page.goto(`${origin}/ui/`)
        await page.getByLabel('Token', { exact: true }).fill(warden.token)
        await page.getByRole('button', { name: 'Sign in', exact: true }).click()
        await usable(page)
        cold.push(performance.now() - startedAt)
        const againAt = performance.now()
        await page.goto(`${origin}/ui/tokens`)
        await usable(page)
        signedIn.push(performance.now() - againAt)
        // A token made through the API, seen in the open list without a reload (the list's blocking query).
        const description = `ui bench live ${n} ${Date.now()}`
        const created = await warden.json<{ AccessorID: string }>(warden.leader, 'PUT', '/v1/acl/token', { Description: description })
        const answeredAt = performance.now()
        await row(page, created.AccessorID).first().waitFor({ timeout: WAIT_MS })
        live.push(performance.now() - answeredAt)
      } finally {
        await context.close()
      }
      await sleep(100)
    }
  } finally {
    await browser.close()
  }
  const figures = (samples: number[]): { p50Ms: number; maxMs: number } => ({ p50Ms: Math.round(percentile(samples, 0.5)), maxMs: Math.round(Math.max(...samples)) })
  const summary: UiSummary = {
    tokens: TOKENS + 1,
    samples: SAMPLES,
    bundleBytes: rawBytes,
    bundleGzipBytes: gzipBytes,
    coldToUsable: figures(cold),
    signedInToUsable: figures(signedIn),
    liveUpdate: figures(live),
  }
  ctx.results.ui = summary
}
