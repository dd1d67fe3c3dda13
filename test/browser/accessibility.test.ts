/**
 * Accessibility of the web UI (issue 21: "Keyboard and screen-reader usable ... axe-core finds no serious violation on
 * any page"), in a real browser against a real dev agent holding a little of everything, so that lists render as
 * tables and pages show their records rather than "there are none". axe-core (node_modules/axe-core, run in the page
 * through the DevTools protocol, the page's content security policy untouched) checks the sign-in page, each page the
 * navigation leads to, a record's page and a form showing an error; a violation of impact serious or critical fails
 * the test with its rule, its help and the elements it names. Lesser ones are printed, not failed.
 *
 * The keyboard half: signing in and moving on without a mouse (the field has the focus, Enter submits, the page's
 * heading takes the focus, Tab reaches the page's first control), and a delete's confirmation: it takes the focus,
 * is described by its question ("Delete X? This cannot be undone."), and Cancel gives the focus back to Delete.
 * (Refused controls staying in the Tab order: read-only.test.ts.)
 */
import { expect } from 'chai'
import type { Page } from 'playwright-core'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { ok, unique } from '../support/api.js'
import { axeViolations, signIn, uiUrl, useBrowser, type AxeViolation } from '../support/browser.js'

/** Impacts that fail a page (axe's scale: minor, moderate, serious, critical). */
const FAILING = new Set(['serious', 'critical'])

/** The navigation's pages, with the heading each shows. */
const SECTIONS: Array<[link: string, heading: string]> = [
  ['Tokens', 'Tokens'],
  ['Policies', 'Policies'],
  ['Roles', 'Roles'],
  ['Auth Methods', 'Auth Methods'],
  ['Binding Rules', 'Binding Rules'],
  ['Templated Policies', 'Templated Policies'],
  ['Config', 'Config'],
  ['Cluster', 'Cluster'],
]

/** One line per violation: rule, impact, help, and the elements it names. */
function listViolations(violations: AxeViolation[]): string {
  return violations.map((violation) => `${violation.id} (${violation.impact ?? 'no impact'}): ${violation.help} at ${violation.nodes.map((node) => JSON.stringify(node.target)).join(', ')}`).join('\n')
}

/** Runs axe on the page as shown; fails on serious or critical violations, prints the rest. */
async function expectAccessible(page: Page, what: string): Promise<void> {
  // Nothing still loading: axe must see the page as the user will, not its placeholder.
  await page.getByText(/^Loading /).waitFor({ state: 'detached' })
  const violations = await axeViolations(page)
  const failing = violations.filter((violation) => FAILING.has(violation.impact ?? ''))
  const minor = violations.filter((violation) => !FAILING.has(violation.impact ?? ''))
  if (minor.length > 0) console.log(`      axe on ${what}, not failing:\n${listViolations(minor).replace(/^/gm, '        ')}`)
  expect(failing, `axe on ${what}:\n${listViolations(failing)}`).to.deep.equal([])
}

describe('web UI: accessibility', function () {
  this.timeout(60_000)
  const suite = useBrowser()
  let agent: AgentProcess
  let policyID: string
  let tokenID: string

  before(async () => {
    agent = await startAgent()
    const policy = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('a11y-web-read'), Description: 'read web', Rules: 'service "web" { policy = "read" }' })
    policyID = policy.ID
    const role = await ok(agent, 'PUT', '/v1/acl/role', { Name: unique('a11y-web-team'), Policies: [{ ID: policy.ID }] })
    tokenID = (await ok(agent, 'PUT', '/v1/acl/token', { Description: unique('a11y-token'), Policies: [{ ID: policy.ID }], Roles: [{ ID: role.ID }] })).AccessorID
    expect(await ok(agent, 'PUT', '/v1/config', { Kind: 'service-defaults', Name: unique('a11y-web'), Protocol: 'http' })).to.equal(true)
  })

  after(async () => {
    await agent?.stop()
  })

  it('finds no serious violation on the sign-in page, nor with a refusal shown', async () => {
    const page = await suite.page()
    await page.goto(uiUrl(agent))
    await page.getByLabel('Token', { exact: true }).waitFor()
    await expectAccessible(page, 'the sign-in page')
    await page.getByLabel('Token', { exact: true }).fill('not-a-token')
    await page.getByRole('button', { name: 'Sign in', exact: true }).click()
    await page.getByRole('alert').waitFor()
    await expectAccessible(page, 'the sign-in page with an error')
  })

  it('finds no serious violation on any page of the navigation', async () => {
    const page = await suite.page()
    await signIn(page, agent)
    for (const [link, heading] of SECTIONS) {
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: link, exact: true }).click()
      await page.getByRole('heading', { level: 1, name: heading, exact: true }).waitFor()
      await expectAccessible(page, `the ${link} page`)
    }
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it('finds no serious violation on a policy\'s and a token\'s page, and on a form showing the agent\'s error', async () => {
    const page = await suite.page()
    await signIn(page, agent)
    await page.goto(uiUrl(agent, `policies/${policyID}`))
    await page.getByRole('heading', { level: 1, name: /^Policy / }).waitFor()
    await expectAccessible(page, "a policy's page")
    await page.goto(uiUrl(agent, `tokens/${tokenID}`))
    await page.getByRole('table', { name: 'Permissions by resource' }).waitFor()
    await expectAccessible(page, "a token's page with what it may do")
    await page.goto(uiUrl(agent, 'policies/new'))
    await page.getByLabel('Name', { exact: true }).fill(unique('a11y-bad'))
    await page.getByLabel('Rules', { exact: true }).fill('service "web" {\n  policy = "bogus"\n}\n')
    await page.getByRole('button', { name: 'Create', exact: true }).click()
    await page.getByRole('alert').waitFor()
    await expectAccessible(page, 'the new policy form with a rules error')
  })

  it('is usable with the keyboard alone: sign in, land on the page heading, Tab to "New token", Enter opens it', async () => {
    const page = await suite.page()
    await page.goto(uiUrl(agent))
    await page.getByLabel('Token', { exact: true }).waitFor()
    // The field has the focus on arrival: typing goes into it, Enter submits the form.
    await page.keyboard.type(agent.managementToken)
    await page.keyboard.press('Enter')
    await page.getByRole('heading', { level: 1, name: 'Tokens', exact: true }).waitFor()
    // The new page's heading takes the focus, so a screen reader announces where the user is.
    expect(await focusedElement(page)).to.deep.equal({ tag: 'H1', text: 'Tokens' })
    await page.keyboard.press('Tab')
    expect(await focusedElement(page)).to.deep.equal({ tag: 'A', text: 'New token' })
    await page.keyboard.press('Enter')
    await page.getByRole('heading', { level: 1, name: 'New token', exact: true }).waitFor()
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it('announces what "Confirm delete" deletes, and Cancel gives the focus back to Delete', async () => {
    const page = await suite.page()
    await signIn(page, agent)
    await page.goto(uiUrl(agent, `tokens/${tokenID}`))
    const heading = page.getByRole('heading', { level: 1, name: /^Token / })
    await heading.waitFor()
    const name = (await heading.innerText()).replace(/^Token /, '')
    const remove = page.getByRole('button', { name: 'Delete', exact: true })
    await remove.focus()
    await page.keyboard.press('Enter')
    // The confirmation takes the focus, and its group is described by the question, read out with it.
    const group = page.getByRole('group', { name: 'Confirm delete' })
    await group.waitFor()
    expect(await focusedElement(page)).to.deep.equal({ tag: 'BUTTON', text: 'Confirm delete' })
    const ids = ((await group.getAttribute('aria-describedby')) ?? '').split(/\s+/).filter((id) => id !== '')
    expect(ids.length, 'the group has an aria-describedby').to.be.greaterThan(0)
    const described = await Promise.all(ids.map((id) => page.locator(`[id="${id}"]`).innerText()))
    expect(described.join(' ')).to.equal(`Delete token ${name}? This cannot be undone.`)
    // Cancel with the keyboard: the focus goes back to Delete, not to the page's body.
    await page.keyboard.press('Tab')
    expect(await focusedElement(page)).to.deep.equal({ tag: 'BUTTON', text: 'Cancel' })
    await page.keyboard.press('Enter')
    await group.waitFor({ state: 'detached' })
    expect(await focusedElement(page)).to.deep.equal({ tag: 'BUTTON', text: 'Delete' })
    expect((await ok(agent, 'GET', `/v1/acl/token/${tokenID}`)).AccessorID, 'nothing was deleted').to.equal(tokenID)
    expect(suite.uncaught(page)).to.deep.equal([])
  })
})

/** The focused element's tag and text. */
async function focusedElement(page: Page): Promise<{ tag: string; text: string | undefined } | null> {
  return page.evaluate(() => {
    const active = (globalThis as unknown as { document: { activeElement: { textContent: string | null; tagName: string } | null } }).document.activeElement
    return active === null ? null : { tag: active.tagName, text: active.textContent?.trim() }
  })
}
