/**
 * The browser harness itself (test/support/browser.ts), before any page of the UI: Debian's Chromium starts headless
 * under playwright-core (as root too, where it needs --no-sandbox), reaches a real agent on loopback, and each page is
 * a context of its own, so one page's session storage (where the UI keeps its token) is never another's, and axe-core
 * runs inside the UI's content security policy and does report a violation (so a page it passes was really checked).
 * When these fail, every other browser test would fail for the same reason; here the reason is plain.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { axeViolations, uiUrl, useBrowser, type BrowserGlobals } from '../support/browser.js'

describe('browser harness', function () {
  this.timeout(60_000)
  const suite = useBrowser()
  let agent: AgentProcess

  before(async () => {
    agent = await startAgent()
  })

  after(async () => {
    await agent?.stop()
  })

  it('loads a page from an agent on loopback in headless Chromium', async () => {
    const page = await suite.page()
    const response = await page.goto(`${agent.url}/v1/status/leader`)
    expect(response?.status()).to.equal(200)
    // A dev agent leads itself: the body is its cluster address as a JSON string.
    expect(JSON.parse(await page.locator('body').innerText())).to.equal(agent.clusterAddress)
    expect(await page.evaluate(() => (globalThis as unknown as BrowserGlobals).navigator.userAgent)).to.match(/HeadlessChrome|Chrome/)
  })

  it('gives every page its own session storage', async () => {
    const first = await suite.page()
    const second = await suite.page()
    await first.goto(`${agent.url}/v1/status/leader`)
    await second.goto(`${agent.url}/v1/status/leader`)
    await first.evaluate(() => (globalThis as unknown as BrowserGlobals).sessionStorage.setItem('probe', 'first'))
    expect(await second.evaluate(() => (globalThis as unknown as BrowserGlobals).sessionStorage.getItem('probe'))).to.equal(null)
    expect(await first.evaluate(() => (globalThis as unknown as BrowserGlobals).sessionStorage.getItem('probe'))).to.equal('first')
  })

  it('runs axe-core under the UI\'s content security policy, and axe reports a button without a name', async () => {
    const page = await suite.page()
    const response = await page.goto(uiUrl(agent))
    expect(response?.headers()['content-security-policy']).to.match(/script-src 'self'/)
    await page.getByRole('button', { name: 'Sign in', exact: true }).waitFor()
    expect((await axeViolations(page)).filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')).to.deep.equal([])
    // A nameless button, added through the DOM (the policy forbids inline script, not DOM changes by the test).
    await page.evaluate(() => {
      const document = (globalThis as unknown as { document: { createElement(tag: string): object; body: { append(node: object): void } } }).document
      document.body.append(document.createElement('button'))
    })
    const violations = await axeViolations(page)
    expect(violations.map((violation) => violation.id)).to.include('button-name')
  })
})
