/**
 * The ACL pages of the web UI (issue 21, "ACL objects" and "Live") in a real browser against a real dev agent, signed
 * in with the management token: a policy created through the form, first with rules the agent refuses (its error
 * shown at the line and column it names, the cursor put there) and then with valid ones; a token created through the
 * form linking a policy, then found in the token list and on the policy's page; what a token may do (its effective
 * permissions, each with the policy and role that decided it), following the token when its links change elsewhere;
 * nothing stale shown under an error (a namespace filter the agent refuses leaves no list, a token deleted elsewhere
 * leaves no record and no Edit or Delete); a token created through the API showing up in the open list without a
 * reload; and how long the token list takes to become usable.
 *
 * What the page shows is checked against what the agent holds (read back through the API), so a page that renders
 * without saving, or saves something else, fails. Timings are printed, not asserted: they depend on the machine.
 */
import { expect } from 'chai'
import type { Page } from 'playwright-core'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { ok, unique } from '../support/api.js'
import { signIn, uiUrl, useBrowser, type BrowserGlobals } from '../support/browser.js'

/** A textarea as the page holds it (the project compiles without the DOM library). */
interface TextAreaState {
  focused: boolean
  selectionStart: number
  invalid: string | null
}

/** Rules whose fifth line names a level that does not exist; the agent says where (line 5, column 12). */
const INVALID_RULES = ['service "web" {', '  policy = "read"', '}', 'key_prefix "" {', '  policy = "bogus"', '}', ''].join('\n')
const VALID_RULES = INVALID_RULES.replace('"bogus"', '"write"')

/** The offset in `text` of a 1-based line and column, as an editor places its cursor. */
function offsetOf(text: string, line: number, column: number): number {
  return text.split('\n').slice(0, line - 1).reduce((sum, item) => sum + item.length + 1, 0) + column - 1
}

/** The row of the open list whose cells hold `text`. */
function rowWith(page: Page, text: string) {
  return page.getByRole('row').filter({ hasText: text })
}

describe('web UI: ACL pages', function () {
  this.timeout(60_000)
  const suite = useBrowser()
  let agent: AgentProcess

  before(async () => {
    agent = await startAgent()
  })

  after(async () => {
    await agent?.stop()
  })

  it('creates a policy: rules the agent refuses show its error at the line, valid rules are saved', async () => {
    const name = unique('browser-policy')
    const page = await suite.page()
    await signIn(page, agent)
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Policies', exact: true }).click()
    await page.getByRole('link', { name: 'New policy', exact: true }).click()
    await page.getByLabel('Name', { exact: true }).fill(name)
    const rules = page.getByLabel('Rules', { exact: true })
    await rules.fill(INVALID_RULES)
    await page.getByRole('button', { name: 'Create', exact: true }).click()

    // The agent's message, the excerpt of the line it names with a caret, and the cursor at that line and column.
    const alert = page.getByRole('alert')
    await alert.waitFor()
    expect(await alert.innerText()).to.match(/Not created: .*bogus/)
    const excerpt = page.getByLabel('Line 5, column 12', { exact: true })
    await excerpt.waitFor()
    expect(await excerpt.innerText()).to.include('5 |   policy = "bogus"')
    const state = await rules.evaluate((element): TextAreaState => {
      const area = element as unknown as { selectionStart: number; getAttribute(name: string): string | null }
      const focused = (globalThis as unknown as BrowserGlobals & { document: { activeElement: unknown } }).document.activeElement === element
      return { focused, selectionStart: area.selectionStart, invalid: area.getAttribute('aria-invalid') }
    })
    expect(state).to.deep.equal({ focused: true, selectionStart: offsetOf(INVALID_RULES, 5, 12), invalid: 'true' })
    const refused = await agent.request('GET', `/v1/acl/policy/name/${name}`)
    expect(refused.status, 'nothing was saved').to.equal(404)

    await rules.fill(VALID_RULES)
    await page.getByRole('button', { name: 'Create', exact: true }).click()
    await page.getByRole('heading', { level: 1, name: `Policy ${name}`, exact: true }).waitFor()
    expect(await page.getByLabel('Rules', { exact: true }).textContent()).to.equal(VALID_RULES)
    const saved = await ok(agent, 'GET', `/v1/acl/policy/name/${name}`)
    expect(saved.Rules).to.equal(VALID_RULES)
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it('creates a token linking a policy, lists it, and lists it on the policy page', async () => {
    const policy = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('browser-linked'), Rules: 'service_prefix "" { policy = "read" }' })
    const description = unique('browser-token')
    const page = await suite.page()
    await signIn(page, agent)
    await page.getByRole('link', { name: 'New token', exact: true }).click()
    await page.getByLabel('Description', { exact: true }).fill(description)
    await page.getByRole('checkbox', { name: policy.Name, exact: true }).check()
    await page.getByRole('button', { name: 'Create', exact: true }).click()
    await page.getByRole('heading', { level: 1, name: `Token ${description}`, exact: true }).waitFor()

    const created = ((await ok(agent, 'GET', '/v1/acl/tokens')) as Array<{ Description: string; AccessorID: string; Policies?: Array<{ ID: string }> }>).find((token) => token.Description === description)
    expect(created, 'the agent holds the token').to.not.equal(undefined)
    expect(created!.Policies?.map((link) => link.ID)).to.deep.equal([policy.ID])
    // The token's page hides its SecretID until asked.
    expect(await page.getByRole('button', { name: 'Show SecretID', exact: true }).count()).to.equal(1)

    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Tokens', exact: true }).click()
    const row = rowWith(page, created!.AccessorID)
    await row.getByRole('link', { name: description, exact: true }).waitFor()
    await row.getByRole('link', { name: policy.Name, exact: true }).click()
    await page.getByRole('heading', { level: 1, name: `Policy ${policy.Name}`, exact: true }).waitFor()
    await page.getByRole('link', { name: description, exact: true }).waitFor()
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it("lists on a policy's page the roles linking it, and on a role's page the tokens linking it", async () => {
    const policy = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('browser-listed'), Rules: 'acl = "read"' })
    const role = await ok(agent, 'PUT', '/v1/acl/role', { Name: unique('browser-role'), Policies: [{ ID: policy.ID }] })
    const page = await suite.page()
    await signIn(page, agent)
    await page.goto(uiUrl(agent, `roles/${role.ID}`))
    await page.getByRole('heading', { level: 2, name: 'Tokens linking it', exact: true }).waitFor()
    await page.getByText('No token links this role.', { exact: true }).waitFor()

    const description = unique('browser-role-token')
    await ok(agent, 'PUT', '/v1/acl/token', { Description: description, Roles: [{ ID: role.ID }] })
    await page.goto(uiUrl(agent, `policies/${policy.ID}`))
    await page.getByRole('link', { name: role.Name, exact: true }).click()
    await page.getByRole('heading', { level: 1, name: `Role ${role.Name}`, exact: true }).waitFor()
    await page.getByRole('link', { name: description, exact: true }).waitFor()
    expect(await page.getByText('No token links this role.', { exact: true }).count()).to.equal(0)
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it("shows on a token's page what it may do, and which policy or role decided it", async () => {
    const web = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('browser-web-write'), Rules: 'service "web" { policy = "write" }' })
    const keys = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('browser-app-keys'), Rules: 'key_prefix "app/" { policy = "read" }' })
    const role = await ok(agent, 'PUT', '/v1/acl/role', { Name: unique('browser-app-team'), Policies: [{ ID: keys.ID }] })
    const token = await ok(agent, 'PUT', '/v1/acl/token', { Description: unique('browser-may-do'), Policies: [{ ID: web.ID }], Roles: [{ ID: role.ID }] })
    const page = await suite.page()
    await signIn(page, agent)
    await page.goto(uiUrl(agent, `tokens/${token.AccessorID}`))
    const table = page.getByRole('table', { name: 'Permissions by resource' })
    await table.waitFor()
    // One row per rule: its resource as the row's header, then scope, level, what it allows, and its source.
    const serviceRow = table.getByRole('row').filter({ has: page.getByRole('rowheader', { name: 'service', exact: true }) }).filter({ hasText: '"web"' })
    expect(await serviceRow.getByRole('cell').allInnerTexts()).to.include('write')
    await serviceRow.getByRole('link', { name: web.Name, exact: true }).waitFor()
    const keyRow = table.getByRole('row').filter({ has: page.getByRole('rowheader', { name: 'key', exact: true }) }).filter({ hasText: 'app/' })
    expect(await keyRow.getByRole('cell').allInnerTexts()).to.include('read')
    // Reached through the role: the row names the policy and the role it came by.
    await keyRow.getByRole('link', { name: keys.Name, exact: true }).waitFor()
    await keyRow.getByRole('link', { name: role.Name, exact: true }).waitFor()
    // The page shows the agent's own account, not one of its making.
    const permissions = await ok(agent, 'GET', `/v1/acl/token/${token.AccessorID}/permissions`)
    expect(permissions.Resources.service.Rules.map((rule: { Segment?: string; Access: string }) => [rule.Segment, rule.Access])).to.deep.include(['web', 'write'])
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it("updates what a token may do when its links change elsewhere, while its page is open", async () => {
    const web = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('browser-web-only'), Rules: 'service "web" { policy = "write" }' })
    const keys = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('browser-keys-only'), Rules: 'key_prefix "app/" { policy = "read" }' })
    const description = unique('browser-relinked')
    const token = await ok(agent, 'PUT', '/v1/acl/token', { Description: description, Policies: [{ ID: web.ID }] })
    const page = await suite.page()
    await signIn(page, agent)
    await page.goto(uiUrl(agent, `tokens/${token.AccessorID}`))
    const table = page.getByRole('table', { name: 'Permissions by resource' })
    const rowOf = (resource: string, text: string) => table.getByRole('row').filter({ has: page.getByRole('rowheader', { name: resource, exact: true }) }).filter({ hasText: text })
    await rowOf('service', '"web"').getByRole('link', { name: web.Name, exact: true }).waitFor()
    await ok(agent, 'PUT', `/v1/acl/token/${token.AccessorID}`, { Description: description, Policies: [{ ID: keys.ID }] })
    // The token's page is live: its fields follow, and what it may do with them, without a reload.
    await rowOf('key', 'app/').getByRole('link', { name: keys.Name, exact: true }).waitFor()
    expect(await rowOf('service', '"web"').count()).to.equal(0)
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it('shows no list under the error when a namespace filter fails', async () => {
    const self = await ok(agent, 'GET', '/v1/acl/token/self')
    const page = await suite.page()
    await signIn(page, agent)
    await rowWith(page, self.AccessorID).waitFor()
    // A namespace the agent refuses (400): the list it answers is not the one shown before.
    await page.getByLabel('Namespace', { exact: true }).fill('not/a/namespace')
    await page.getByRole('status').filter({ hasText: 'Could not list the tokens' }).waitFor()
    expect(await page.getByRole('table').count(), 'the previous list is gone').to.equal(0)
    await page.getByLabel('Namespace', { exact: true }).fill('')
    await rowWith(page, self.AccessorID).waitFor()
    expect(await page.getByRole('status').filter({ hasText: 'Could not list the tokens' }).count()).to.equal(0)
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it("drops a token's record and its controls when the token is deleted elsewhere", async () => {
    const token = await ok(agent, 'PUT', '/v1/acl/token', { Description: unique('browser-doomed') })
    const page = await suite.page()
    await signIn(page, agent)
    await page.goto(uiUrl(agent, `tokens/${token.AccessorID}`))
    await page.getByRole('heading', { level: 1, name: `Token ${token.Description}`, exact: true }).waitFor()
    await page.getByRole('button', { name: 'Delete', exact: true }).waitFor()
    expect(await page.getByRole('term').count(), 'the record is shown').to.be.greaterThan(0)
    expect((await agent.request('DELETE', `/v1/acl/token/${token.AccessorID}`)).status).to.equal(200)
    await page.getByRole('status').filter({ hasText: 'Could not read the token' }).waitFor()
    expect(await page.getByRole('heading', { level: 1 }).innerText()).to.equal('Token')
    for (const name of ['Edit', 'Clone', 'Delete']) expect(await page.getByRole('button', { name, exact: true }).or(page.getByRole('link', { name, exact: true })).count(), name).to.equal(0)
    expect(await page.getByRole('term').count(), 'the record is gone').to.equal(0)
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it('shows a token created through the API in the open list without a reload', async () => {
    const page = await suite.page()
    await signIn(page, agent)
    await page.getByRole('heading', { level: 1, name: 'Tokens', exact: true }).waitFor()
    await page.getByRole('table').waitFor()
    // A reload would drop this: its survival proves the row came through the page's own blocking query.
    await page.evaluate(() => {
      ;(globalThis as unknown as { wardenTestMarker: string }).wardenTestMarker = 'no reload'
    })
    const description = unique('browser-live')
    const sentAt = performance.now()
    const token = await ok(agent, 'PUT', '/v1/acl/token', { Description: description })
    const answeredAt = performance.now()
    await rowWith(page, token.AccessorID).getByRole('link', { name: description, exact: true }).waitFor()
    const shownAt = performance.now()
    console.log(`      a token created through the API appeared in the open list ${(shownAt - answeredAt).toFixed(0)} ms after the write answered (${(shownAt - sentAt).toFixed(0)} ms after it was sent)`)
    expect(await page.evaluate(() => (globalThis as unknown as { wardenTestMarker?: string }).wardenTestMarker)).to.equal('no reload')
    expect(suite.uncaught(page)).to.deep.equal([])
  })

  it('renders a usable token list after sign-in and after a navigation, and prints how long each took', async () => {
    const self = await ok(agent, 'GET', '/v1/acl/token/self')
    const page = await suite.page()
    // Usable: the list is drawn with the caller's own token in it, and "New token" leads somewhere.
    const usable = async (): Promise<void> => {
      await rowWith(page, self.AccessorID).waitFor()
      await page.getByRole('link', { name: 'New token', exact: true }).waitFor()
    }
    const navigatedAt = performance.now()
    await page.goto(uiUrl(agent))
    await page.getByLabel('Token', { exact: true }).fill(agent.managementToken)
    const signInAt = performance.now()
    await page.getByRole('button', { name: 'Sign in', exact: true }).click()
    await usable()
    const signedInListAt = performance.now()
    // A second navigation in the signed-in tab (the token is in its session storage, the assets in its cache).
    const reloadAt = performance.now()
    await page.goto(uiUrl(agent, 'tokens'))
    await usable()
    const reloadedListAt = performance.now()
    console.log(
      `      usable token list: ${(signedInListAt - signInAt).toFixed(0)} ms from "Sign in" (${(signedInListAt - navigatedAt).toFixed(0)} ms from a cold navigation, typing included); ${(reloadedListAt - reloadAt).toFixed(0)} ms from a navigation to /ui/tokens when signed in`,
    )
    expect(await rowWith(page, self.AccessorID).count()).to.equal(1)
    expect(suite.uncaught(page)).to.deep.equal([])
  })
})
