/**
 * A read-only token in the web UI (issue 21: "Controls the caller's token cannot use are disabled with the reason,
 * not errors after clicking"), in a real browser against a real dev agent. The token may read ACLs and services
 * (acl = "read", service_prefix "" read) and write nothing. Before anything is clicked, every control that would
 * write is a disabled button whose accessible description gives the reason (the UI asks the agent with
 * POST /v1/internal/acl/authorize), its SecretIDs are hidden with the reason, and the pages still show what the token
 * may read. The management token, on the same pages, gets the same controls enabled, so the test tells a refusal
 * from a page that disables everything.
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

/** Waits until the control is disabled (the verdict comes after the page), then answers its description. */
async function expectRefused(page: Page, control: Locator, reason: RegExp): Promise<void> {
  await control.waitFor()
  const deadline = Date.now() + 10_000
  while (!(await control.isDisabled())) {
    if (Date.now() > deadline) throw new Error(`${control} is still enabled after 10 s`)
    await page.waitForTimeout(50)
  }
  expect(await descriptionOf(page, control)).to.match(reason)
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

  it('sees every ACL write control disabled with the reason, and SecretIDs hidden, but the records listed', async () => {
    const page = await suite.page()
    await signIn(page, agent, readOnly.SecretID)
    // Tokens: listed (acl:read), but no "New token" link: a disabled button saying why.
    await page.getByRole('row').filter({ hasText: other.AccessorID }).waitFor()
    await expectRefused(page, page.getByRole('button', { name: 'New token', exact: true }), /lacks acl:write/)
    expect(await page.getByRole('link', { name: 'New token', exact: true }).count()).to.equal(0)

    await page.goto(uiUrl(agent, `tokens/${other.AccessorID}`))
    await page.getByRole('heading', { level: 1, name: `Token ${other.Description}`, exact: true }).waitFor()
    for (const name of ['Edit', 'Clone', 'Delete']) await expectRefused(page, page.getByRole('button', { name, exact: true }), /lacks acl:write/)
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

  it('sees a config entry it may read but not write with Save and Delete disabled, naming the permission', async () => {
    const page = await suite.page()
    await signIn(page, agent, readOnly.SecretID)
    await page.goto(uiUrl(agent, `config/service-defaults/${entryName}`))
    const editor = page.getByLabel('Entry (JSON)', { exact: true })
    await editor.waitFor()
    expect(JSON.parse(await editor.inputValue())).to.deep.include({ Name: entryName, Protocol: 'http' })
    await expectRefused(page, page.getByRole('button', { name: 'Save', exact: true }), new RegExp(`lacks service:write on "${entryName}"`))
    await expectRefused(page, page.getByRole('button', { name: 'Delete', exact: true }), new RegExp(`lacks service:write on "${entryName}"`))
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it('leaves the same controls enabled for the management token', async () => {
    const page = await suite.page()
    // The verdicts come after the page: look once the agent has answered the page's question (a full navigation
    // starts the UI afresh, so it asks again). `about` tells this page's question from one the last page left in flight.
    const authorized = (about: string): Promise<unknown> =>
      page.waitForResponse((response) => new URL(response.url()).pathname === '/v1/internal/acl/authorize' && response.status() === 200 && (response.request().postData() ?? '').includes(about))
    let answered = authorized('"acl"')
    await signIn(page, agent)
    await answered
    answered = authorized('"acl"')
    await page.goto(uiUrl(agent, `tokens/${other.AccessorID}`))
    await page.getByRole('heading', { level: 1, name: `Token ${other.Description}`, exact: true }).waitFor()
    await answered
    expect(await page.getByRole('link', { name: 'Edit', exact: true }).count()).to.equal(1)
    for (const name of ['Clone', 'Delete', 'Show SecretID']) expect(await page.getByRole('button', { name, exact: true }).isEnabled(), name).to.equal(true)
    answered = authorized(entryName)
    await page.goto(uiUrl(agent, `config/service-defaults/${entryName}`))
    await page.getByLabel('Entry (JSON)', { exact: true }).waitFor()
    await answered
    expect(await page.getByRole('button', { name: 'Save', exact: true }).isEnabled()).to.equal(true)
    expect(await page.getByRole('button', { name: 'Delete', exact: true }).isEnabled()).to.equal(true)
  })
})
