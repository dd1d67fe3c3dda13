/**
 * Config entries in the web UI (issue 21, "Config entries") in a real browser against a real dev agent, signed in
 * with the management token: an entry reached through the navigation and edited as JSON, the agent's validation
 * message shown when it refuses the entry, and two editors (two tabs) of the same entry: the UI saves with `cas` at the
 * ModifyIndex it loaded, so the second save loses the race, says so, keeps its text, and saves once reloaded.
 *
 * Each outcome is checked against the entry the agent holds afterwards (read back through the API), so a page that
 * claims a save it did not make, or overwrites silently, fails.
 */
import { expect } from 'chai'
import type { Page } from 'playwright-core'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { ok, unique } from '../support/api.js'
import { signIn, uiUrl, useBrowser } from '../support/browser.js'

const KIND = 'service-defaults'

/** The editor's JSON, parsed. */
async function editorEntry(page: Page): Promise<Record<string, unknown>> {
  return JSON.parse(await page.getByLabel('Entry (JSON)', { exact: true }).inputValue()) as Record<string, unknown>
}

/** Replaces the editor's JSON with `entry`. */
async function setEditorEntry(page: Page, entry: Record<string, unknown>): Promise<void> {
  await page.getByLabel('Entry (JSON)', { exact: true }).fill(JSON.stringify(entry, null, 2))
}

describe('web UI: config entries', function () {
  this.timeout(60_000)
  const suite = useBrowser()
  let agent: AgentProcess

  before(async () => {
    agent = await startAgent()
  })

  after(async () => {
    await agent?.stop()
  })

  /** Writes a service-defaults entry through the API and answers its name. */
  async function seed(protocol: string): Promise<string> {
    const name = unique('browser-web')
    expect(await ok(agent, 'PUT', '/v1/config', { Kind: KIND, Name: name, Protocol: protocol })).to.equal(true)
    return name
  }

  /** Opens the editor of the entry through the navigation (Config, the kind, the entry). */
  async function openEditor(page: Page, name: string): Promise<void> {
    await signIn(page, agent)
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Config', exact: true }).click()
    await page.getByRole('link', { name: KIND, exact: true }).click()
    await page.getByRole('link', { name, exact: true }).click()
    await page.getByRole('heading', { level: 1, name: `Config: ${KIND} ${name}`, exact: true }).waitFor()
    await page.getByLabel('Entry (JSON)', { exact: true }).waitFor()
  }

  it('saves an edited entry, and shows the agent\'s message when it refuses one', async () => {
    const name = await seed('http')
    const page = await suite.page()
    await openEditor(page, name)
    expect(await editorEntry(page)).to.deep.include({ Kind: KIND, Name: name, Protocol: 'http' })

    await setEditorEntry(page, { Kind: KIND, Name: name, Protocol: 'bogus' })
    await page.getByRole('button', { name: 'Save', exact: true }).click()
    const alert = page.getByRole('alert').filter({ hasText: 'Not saved' })
    await alert.waitFor()
    expect(await alert.innerText()).to.match(/Protocol: must be one of tcp, http, http2, grpc/)
    expect((await ok(agent, 'GET', `/v1/config/${KIND}/${name}`)).Protocol, 'refused: unchanged').to.equal('http')

    await setEditorEntry(page, { Kind: KIND, Name: name, Protocol: 'grpc' })
    await page.getByRole('button', { name: 'Save', exact: true }).click()
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor()
    expect((await ok(agent, 'GET', `/v1/config/${KIND}/${name}`)).Protocol).to.equal('grpc')
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it('refuses the second of two editors\' saves (cas), keeps its text, and saves after a reload', async () => {
    const name = await seed('http')
    const first = await suite.page()
    const second = await suite.page()
    await openEditor(first, name)
    await openEditor(second, name)

    await setEditorEntry(first, { Kind: KIND, Name: name, Protocol: 'http2' })
    await first.getByRole('button', { name: 'Save', exact: true }).click()
    await first.getByRole('status').filter({ hasText: 'Saved.' }).waitFor()

    // The second tab still holds the entry at the index it loaded: its save must not overwrite the first one's.
    await setEditorEntry(second, { Kind: KIND, Name: name, Protocol: 'grpc' })
    await second.getByRole('button', { name: 'Save', exact: true }).click()
    const conflict = second.getByRole('alert').filter({ hasText: 'changed since you loaded it' })
    await conflict.waitFor()
    expect(await conflict.innerText()).to.include('Not saved')
    expect((await editorEntry(second)).Protocol, 'its text is kept').to.equal('grpc')
    expect((await ok(agent, 'GET', `/v1/config/${KIND}/${name}`)).Protocol, 'the first save stands').to.equal('http2')

    await conflict.getByRole('button', { name: 'Reload the entry', exact: true }).click()
    await expectEditorProtocol(second, 'http2')
    expect(await second.getByRole('alert').filter({ hasText: 'changed since you loaded it' }).count()).to.equal(0)
    await setEditorEntry(second, { Kind: KIND, Name: name, Protocol: 'grpc' })
    await second.getByRole('button', { name: 'Save', exact: true }).click()
    await second.getByRole('status').filter({ hasText: 'Saved.' }).waitFor()
    expect((await ok(agent, 'GET', `/v1/config/${KIND}/${name}`)).Protocol).to.equal('grpc')
    expect(suite.uncaught(first)).to.deep.equal([])
    expect(suite.uncaught(second)).to.deep.equal([])
  })

  it('lists the entries a filter expression selects', async () => {
    const http = await seed('http')
    const tcp = await seed('tcp')
    const page = await suite.page()
    await signIn(page, agent)
    await page.goto(uiUrl(agent, `config/${KIND}`))
    await page.getByRole('link', { name: tcp, exact: true }).waitFor()
    await page.getByLabel('Filter', { exact: true }).fill('Protocol == "tcp"')
    await page.getByRole('button', { name: 'Apply filter', exact: true }).click()
    await page.getByRole('table').filter({ hasText: 'matching the filter' }).waitFor()
    // The caption changes at once and the rows when the agent answers: wait for the rows.
    await page.getByRole('link', { name: http, exact: true }).waitFor({ state: 'detached' })
    expect(await page.getByRole('link', { name: tcp, exact: true }).count()).to.equal(1)
    expect(suite.uncaught(page)).to.deep.equal([])
  })
})

/** Waits until the editor holds the entry with `protocol` (a reload replaces the text once the answer comes). */
async function expectEditorProtocol(page: Page, protocol: string): Promise<void> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const entry = await editorEntry(page).catch(() => undefined)
    if (entry?.Protocol === protocol) return
    if (Date.now() > deadline) throw new Error(`the editor did not show Protocol ${protocol} in 10 s: ${JSON.stringify(entry)}`)
    await page.waitForTimeout(50)
  }
}
