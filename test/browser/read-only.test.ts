/**
 * A read-only token in the web UI (issue 21: "Controls the caller's token cannot use are disabled with the reason,
 * not errors after clicking"), in a real browser against a real dev agent. The token may read ACLs and services
 * (acl = "read", service_prefix "" read) and write nothing. Before anything is clicked, every control that would
 * write is a button marked aria-disabled whose accessible description gives the reason (the UI asks the agent with
 * POST /v1/internal/acl/authorize), its SecretIDs are hidden with the reason, and the pages still show what the token
 * may read. The refused buttons stay in the Tab order (a native `disabled` would drop them, and the reason with
 * them, for keyboard and screen-reader users), and clicking them, Enter or Space, does nothing. The management
 * token, on the same pages, gets the same controls with the verdict "allowed" (not merely enabled, which they also
 * are before any verdict), so the test tells a refusal from a page that disables everything.
 */
import { expect } from 'chai'
import type { Locator, Page } from 'playwright-core'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { ok, unique } from '../support/api.js'
import { signIn, uiUrl, useBrowser } from '../support/browser.js'

const READ_ONLY_RULES = 'acl = "read"\nservice_prefix "" { policy = "read" }\n'

/** The text of the elements a control's aria-describedby names: what a screen reader reads after its name. */
async function descriptionOf(page: Page, control: Locator): Promise<string> {
  const ids = (await control.getAttribute('aria-describedby')) ?? ''
  const texts = await Promise.all(ids.split(/\s+/).filter((id) => id !== '').map((id) => page.locator(`[id="${id}"]`).innerText()))
  return texts.join(' ')
}

/** What the page shows of a control: its aria-disabled, its native disabled, and whether it holds the focus. */
async function stateOf(control: Locator): Promise<{ ariaDisabled: string | null; disabled: boolean; focused: boolean }> {
  return control.evaluate((element) => {
    const button = element as unknown as { disabled?: boolean; getAttribute(name: string): string | null }
    const focused = (globalThis as unknown as { document: { activeElement: unknown } }).document.activeElement === element
    return { ariaDisabled: button.getAttribute('aria-disabled'), disabled: button.disabled === true, focused }
  })
}

/**
 * Waits until the control is refused (the verdict comes after the page): aria-disabled, not natively disabled, so it
 * can take the focus, with the reason as its description.
 */
async function expectRefused(page: Page, control: Locator, reason: RegExp): Promise<void> {
  await control.and(page.locator('[data-verdict="refused"]')).waitFor({ timeout: 10_000 })
  await control.focus()
  expect(await stateOf(control)).to.deep.equal({ ariaDisabled: 'true', disabled: false, focused: true })
  expect(await descriptionOf(page, control)).to.match(reason)
}

/** Clicks the refused control, then Enter and Space on it, and has `unchanged` check after each that nothing happened. */
async function expectInert(page: Page, control: Locator, unchanged: () => Promise<unknown>): Promise<void> {
  // force: playwright itself will not click what is aria-disabled; a user's mouse will.
  await control.click({ force: true })
  await page.waitForTimeout(200)
  await unchanged()
  for (const key of ['Enter', 'Space']) {
    await control.focus()
    await control.press(key)
    await page.waitForTimeout(200)
    await unchanged()
  }
}

describe('web UI: a read-only token', function () {
  this.timeout(60_000)
  const suite = useBrowser()
  let agent: AgentProcess
  let readOnly: { SecretID: string; AccessorID: string; Description: string }
  let other: { AccessorID: string; Description: string }
  let policy: { ID: string; Name: string }
  let entryName: string

  before(async () => {
    agent = await startAgent()
    policy = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('read-only'), Rules: READ_ONLY_RULES })
    readOnly = await ok(agent, 'PUT', '/v1/acl/token', { Description: unique('reader'), Policies: [{ ID: policy.ID }] })
    other = await ok(agent, 'PUT', '/v1/acl/token', { Description: unique('someone-else'), Policies: [{ ID: policy.ID }] })
    entryName = unique('web')
    expect(await ok(agent, 'PUT', '/v1/config', { Kind: 'service-defaults', Name: entryName, Protocol: 'http' })).to.equal(true)
  })

  after(async () => {
    await agent?.stop()
  })

  it('sees every ACL write control refused with the reason, and SecretIDs hidden, but the records listed', async () => {
    const page = await suite.page()
    await signIn(page, agent, readOnly.SecretID)
    // Tokens: listed (acl:read), but no "New token" link: a refused button saying why.
    await page.getByRole('row').filter({ hasText: other.AccessorID }).waitFor()
    const newToken = page.getByRole('button', { name: 'New token', exact: true })
    await expectRefused(page, newToken, /lacks acl:write/)
    expect(await page.getByRole('link', { name: 'New token', exact: true }).count()).to.equal(0)
    await expectInert(page, newToken, async () => expect(page.url()).to.equal(uiUrl(agent, 'tokens')))
    // In the Tab order: from the page's heading, Tab reaches it (a disabled button would be skipped).
    await page.getByRole('heading', { level: 1, name: 'Tokens', exact: true }).focus()
    await page.keyboard.press('Tab')
    expect((await stateOf(newToken)).focused, 'Tab from the heading reaches the refused "New token"').to.equal(true)

    await page.goto(uiUrl(agent, `tokens/${other.AccessorID}`))
    await page.getByRole('heading', { level: 1, name: `Token ${other.Description}`, exact: true }).waitFor()
    for (const name of ['Edit', 'Clone', 'Delete']) await expectRefused(page, page.getByRole('button', { name, exact: true }), /lacks acl:write/)
    const tokenUrl = uiUrl(agent, `tokens/${other.AccessorID}`)
    await expectInert(page, page.getByRole('button', { name: 'Edit', exact: true }), async () => expect(page.url()).to.equal(tokenUrl))
    await expectInert(page, page.getByRole('button', { name: 'Clone', exact: true }), async () => expect(await page.getByRole('form', { name: 'Clone token' }).count()).to.equal(0))
    await expectInert(page, page.getByRole('button', { name: 'Delete', exact: true }), async () => expect(await page.getByRole('button', { name: 'Confirm delete', exact: true }).count()).to.equal(0))
    await page.getByText('hidden: reading a SecretID needs acl:write').waitFor()
    expect(await page.getByRole('button', { name: 'Show SecretID', exact: true }).count()).to.equal(0)

    await page.goto(uiUrl(agent, 'policies'))
    await page.getByRole('link', { name: policy.Name, exact: true }).waitFor()
    await expectRefused(page, page.getByRole('button', { name: 'New policy', exact: true }), /lacks acl:write/)
    await page.goto(uiUrl(agent, 'roles'))
    await page.getByRole('heading', { level: 1, name: 'Roles', exact: true }).waitFor()
    await expectRefused(page, page.getByRole('button', { name: 'New role', exact: true }), /lacks acl:write/)
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it('sees a config entry it may read but not write with Save and Delete refused, naming the permission', async () => {
    const page = await suite.page()
    await signIn(page, agent, readOnly.SecretID)
    // Every write the page sends: a refused Save or Delete must send none.
    const writes: string[] = []
    page.on('request', (request) => {
      if (request.method() !== 'GET' && new URL(request.url()).pathname.startsWith('/v1/config')) writes.push(`${request.method()} ${request.url()}`)
    })
    await page.goto(uiUrl(agent, `config/service-defaults/${entryName}`))
    const editor = page.getByLabel('Entry (JSON)', { exact: true })
    await editor.waitFor()
    expect(JSON.parse(await editor.inputValue())).to.deep.include({ Name: entryName, Protocol: 'http' })
    const save = page.getByRole('button', { name: 'Save', exact: true })
    const remove = page.getByRole('button', { name: 'Delete', exact: true })
    await expectRefused(page, save, new RegExp(`lacks service:write on "${entryName}"`))
    await expectRefused(page, remove, new RegExp(`lacks service:write on "${entryName}"`))
    await expectInert(page, save, async () => expect(writes).to.deep.equal([]))
    await expectInert(page, remove, async () => expect(await page.getByRole('button', { name: 'Confirm delete', exact: true }).count()).to.equal(0))
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it('sends nothing when Enter in a form field meets a refused Save', async () => {
    const page = await suite.page()
    await signIn(page, agent, readOnly.SecretID)
    const writes: string[] = []
    page.on('request', (request) => {
      if (request.method() !== 'GET' && new URL(request.url()).pathname.startsWith('/v1/acl/token')) writes.push(`${request.method()} ${request.url()}`)
    })
    await page.goto(uiUrl(agent, `tokens/${other.AccessorID}/edit`))
    const description = page.getByLabel('Description', { exact: true })
    await description.waitFor()
    await expectRefused(page, page.getByRole('button', { name: 'Save', exact: true }), /lacks acl:write/)
    // Enter in a text field is the browser's implicit submission: a click on the form's default button, Save.
    await description.fill(`${other.Description} renamed`)
    await description.press('Enter')
    await page.waitForTimeout(300)
    expect(writes).to.deep.equal([])
    expect(page.url()).to.equal(uiUrl(agent, `tokens/${other.AccessorID}/edit`))
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it('gives the management token the same controls, with the verdict "allowed"', async () => {
    const page = await suite.page()
    // Enabled alone proves nothing: every control is enabled before its verdict comes. Wait for the verdict itself.
    const allowed = async (control: Locator, name: string): Promise<void> => {
      await control.and(page.locator('[data-verdict="allowed"]')).waitFor({ timeout: 10_000 })
      expect(await control.getAttribute('aria-disabled'), name).to.equal(null)
      expect(await control.isEnabled(), name).to.equal(true)
    }
    await signIn(page, agent)
    await allowed(page.getByRole('link', { name: 'New token', exact: true }), 'New token')
    await page.goto(uiUrl(agent, `tokens/${other.AccessorID}`))
    await page.getByRole('heading', { level: 1, name: `Token ${other.Description}`, exact: true }).waitFor()
    await allowed(page.getByRole('link', { name: 'Edit', exact: true }), 'Edit')
    for (const name of ['Clone', 'Delete']) await allowed(page.getByRole('button', { name, exact: true }), name)
    expect(await page.getByRole('button', { name: 'Show SecretID', exact: true }).isEnabled()).to.equal(true)
    await page.goto(uiUrl(agent, `config/service-defaults/${entryName}`))
    await page.getByLabel('Entry (JSON)', { exact: true }).waitFor()
    for (const name of ['Save', 'Delete']) await allowed(page.getByRole('button', { name, exact: true }), name)
  })
})
