/**
 * The web UI's Cluster page (issue 21, "Cluster") in a real browser against a real three-node cluster
 * (test/support/cluster.ts: three `warden agent` processes on loopback, one Raft group). The page is opened on a node
 * that is not the leader, so that killing the leader (SIGKILL) leaves the page's own agent up: the page must name
 * the leader the nodes agree on, list the three servers, and after the kill name the new leader, in a later term,
 * without a reload (the page holds a blocking query open on its agent, woken by the change; it does not poll).
 * How long that took after the kill is printed, not asserted: it is mostly the election timeout.
 */
import { expect } from 'chai'
import type { Page } from 'playwright-core'
import { TestCluster } from '../support/cluster.js'
import { signIn, uiUrl, useBrowser } from '../support/browser.js'

/**
 * How long the new leader may take to appear: an election, then the answer to the page's blocking query on
 * /v1/operator/cluster, which wakes when the leader or a term changes (or, if it failed meanwhile, its retry: backing
 * off from 1 s, doubling, to 30 s at most).
 */
const NEW_LEADER_TIMEOUT_MS = 40_000

/** The "Leader: …" line of the Cluster page. */
function leaderLine(page: Page) {
  return page.getByText(/^Leader: /)
}

/** The term the "Leader: …, term N." line names. */
function termOf(line: string): number {
  const term = /\bterm (\d+)/.exec(line)?.[1]
  if (term === undefined) throw new Error(`no term in ${JSON.stringify(line)}`)
  return Number(term)
}

describe('web UI: cluster page', function () {
  this.timeout(90_000)
  const suite = useBrowser()
  let cluster: TestCluster | undefined

  before(async () => {
    cluster = await TestCluster.start()
  })

  after(async () => {
    await cluster?.stop()
  })

  it('names the leader and the servers, and after a leader kill the new leader, without a reload', async () => {
    const nodes = cluster!
    const leader = await nodes.leader()
    const watcher = nodes.node(nodes.followers(leader)[0]!)
    const page = await suite.page()
    await signIn(page, watcher)
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Cluster', exact: true }).click()
    await page.getByRole('heading', { level: 1, name: 'Cluster', exact: true }).waitFor()
    await leaderLine(page).filter({ hasText: `Leader: ${leader} (` }).waitFor()
    const servers = page.getByRole('table', { name: /Servers of this datacenter/ })
    for (const spec of nodes.specs) await servers.getByRole('row').filter({ hasText: spec.name }).first().waitFor()
    expect(await servers.getByRole('row').filter({ hasText: leader }).innerText()).to.include('leader')
    const termBefore = termOf(await leaderLine(page).innerText())
    // A reload would drop this: its survival proves the page updated itself.
    await page.evaluate(() => {
      ;(globalThis as unknown as { wardenTestMarker: string }).wardenTestMarker = 'no reload'
    })

    const killedAt = performance.now()
    await nodes.kill(leader)
    const next = await nodes.leader(NEW_LEADER_TIMEOUT_MS)
    const agreedAt = performance.now()
    expect(next).to.not.equal(leader)
    await leaderLine(page).filter({ hasText: `Leader: ${next} (` }).waitFor({ timeout: NEW_LEADER_TIMEOUT_MS })
    const shownAt = performance.now()
    // Raft §5.2: a new leader is elected in a later term, and the page says which.
    expect(termOf(await leaderLine(page).innerText())).to.be.greaterThan(termBefore)
    console.log(`      new leader ${next} shown ${(shownAt - killedAt).toFixed(0)} ms after ${leader} was killed (the nodes agreed after ${(agreedAt - killedAt).toFixed(0)} ms)`)
    expect(await page.evaluate(() => (globalThis as unknown as { wardenTestMarker?: string }).wardenTestMarker)).to.equal('no reload')
    expect(page.url()).to.equal(uiUrl(watcher, 'cluster'))
    expect(suite.uncaught(page)).to.deep.equal([])
  })
})
