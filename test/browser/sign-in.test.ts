/**
 * Signing in to the web UI (issue 21, "Sign-in") in a real browser against a real dev agent: the form's one secret
 * field, the signed-in navigation, where the token lives (the tab's session storage, the X-Service-Token header, never
 * a URL), signing out, and a token deleted elsewhere sending the tab back to sign-in with the reason. Every request
 * the page makes is recorded, so the test sees what went over the wire and not only what the page shows.
 */
import { expect } from 'chai'
import type { Page, Request } from 'playwright-core'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { ok, unique } from '../support/api.js'
import { signIn, uiUrl, useBrowser, type BrowserGlobals } from '../support/browser.js'

/** The navigation's links, named after what they list (issue 21, "Navigation"). */
const SECTIONS = ['Tokens', 'Policies', 'Roles', 'Auth Methods', 'Binding Rules', 'Templated Policies', 'Config', 'Cluster']

/** Every request `page` makes from now on. */
function recordRequests(page: Page): Request[] {
  const requests: Request[] = []
  page.on('request', (request) => requests.push(request))
  return requests
}

/** What the tab keeps in its session storage, as key → value. */
async function sessionStorageOf(page: Page): Promise<Record<string, string>> {
  return page.evaluate(() => {
    const storage = (globalThis as unknown as BrowserGlobals).sessionStorage
    const entries: Record<string, string> = {}
    for (let i = 0; i < storage.length; i += 1) {
      const key = storage.key(i)
      if (key !== null) entries[key] = storage.getItem(key) ?? ''
    }
    return entries
  })
}

describe('web UI: sign-in', function () {
  this.timeout(60_000)
  const suite = useBrowser()
  let agent: AgentProcess

  before(async () => {
    agent = await startAgent()
  })

  after(async () => {
    await agent?.stop()
  })

  it('asks for the token in a password field and shows the navigation once signed in with the management token', async () => {
    const page = await suite.page()
    const requests = recordRequests(page)
    await page.goto(uiUrl(agent))
    const field = page.getByLabel('Token', { exact: true })
    // A password input, so the secret is never shown on screen or offered for autofill as plain text.
    expect(await field.getAttribute('type')).to.equal('password')
    await signIn(page, agent)
    const navigation = page.getByRole('navigation', { name: 'Main' })
    for (const name of SECTIONS) await navigation.getByRole('link', { name, exact: true }).waitFor()
    expect(await page.getByText(/^Signed in/).innerText()).to.match(/^Signed in/)
    expect(suite.uncaught(page)).to.deep.equal([])
    // The token travels in the header only: no URL the page asked for, and not its own address, holds it.
    const urls = [page.url(), ...requests.map((request) => request.url())]
    expect(urls.filter((url) => url.includes(agent.managementToken))).to.deep.equal([])
    const api = requests.filter((request) => new URL(request.url()).pathname.startsWith('/v1/acl/'))
    expect(api.length).to.be.greaterThan(0)
    // headers(), not allHeaders(): the latter waits for the answer, and the UI's blocking queries are still waiting.
    for (const request of api) expect(request.headers()['x-service-token'], request.url()).to.equal(agent.managementToken)
    expect(Object.values(await sessionStorageOf(page))).to.include(agent.managementToken)
  })

  it('refuses a secret that is no token and stays on the form with the reason', async () => {
    const page = await suite.page()
    await page.goto(uiUrl(agent))
    await page.getByLabel('Token', { exact: true }).fill('5d7c1f4e-9b2a-4c3d-8e6f-0a1b2c3d4e5f')
    await page.getByRole('button', { name: 'Sign in', exact: true }).click()
    const alert = page.getByRole('alert')
    await alert.waitFor()
    expect(await alert.innerText()).to.match(/Not signed in/)
    expect(await page.getByRole('button', { name: 'Sign out' }).count()).to.equal(0)
    expect(Object.values(await sessionStorageOf(page))).to.not.include('5d7c1f4e-9b2a-4c3d-8e6f-0a1b2c3d4e5f')
  })

  it('forgets the token on "Sign out", so a reload asks for it again', async () => {
    const page = await suite.page()
    await signIn(page, agent)
    await page.getByRole('button', { name: 'Sign out', exact: true }).click()
    await page.getByLabel('Token', { exact: true }).waitFor()
    expect(Object.values(await sessionStorageOf(page))).to.not.include(agent.managementToken)
    await page.reload()
    await page.getByRole('button', { name: 'Sign in', exact: true }).waitFor()
    expect(await page.getByRole('button', { name: 'Sign out' }).count()).to.equal(0)
  })

  it('keeps the sign-in to its own tab: another tab asks for a token', async () => {
    const first = await suite.page()
    await signIn(first, agent)
    // suite.page() is a new browser context: what a second window of another session would see.
    const second = await suite.page()
    await second.goto(uiUrl(agent))
    await second.getByRole('button', { name: 'Sign in', exact: true }).waitFor()
    expect(await sessionStorageOf(second)).to.deep.equal({})
  })

  it('sends the tab back to sign-in with the reason when its token is deleted elsewhere', async () => {
    const description = unique('browser-sign-in')
    const token = await ok(agent, 'PUT', '/v1/acl/token', { Description: description })
    const page = await suite.page()
    await signIn(page, agent, token.SecretID)
    await page.getByText(`Signed in as ${description}`).waitFor()
    await ok(agent, 'DELETE', `/v1/acl/token/${token.AccessorID}`)
    // No reload: the UI's blocking query on its own token wakes on the delete.
    const reason = page.getByRole('alert')
    await reason.waitFor()
    expect(await reason.innerText()).to.match(/no longer valid/i)
    await page.getByLabel('Token', { exact: true }).waitFor()
    expect(Object.values(await sessionStorageOf(page))).to.not.include(token.SecretID)
  })
})
