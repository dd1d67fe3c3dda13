/**
 * `warden snapshot restore FILE` as an operator runs it (the built binary, dist/cli/main.js) against a real agent:
 * a snapshot saved, writes after it, then the restore brings back exactly what was saved. A damaged or missing file
 * is refused before anything is sent; a token without acl:write gets the 403 and changes nothing. On a terminal
 * (the CLI run in this process with a terminal's io), progress lines on standard error.
 */
import { expect } from 'chai'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from '../../cluster/lib.js'
import { runCli } from '../../src/cli/dispatch.js'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { runWarden, type Ran } from './run.js'

function lines(text: string): string[] {
  return text.trimEnd().split('\n')
}

describe('command line: warden snapshot restore', function () {
  this.timeout(60_000)
  let agent: AgentProcess
  let dir: string
  let saved: string

  const warden = (args: string[], env: Record<string, string> = {}): Promise<Ran> =>
    runWarden(args, { cwd: dir, env: { WARDEN_HTTP_ADDR: agent.httpAddress, WARDEN_HTTP_TOKEN: agent.managementToken, ...env } })

  /** The names of the policies, sorted, and the index the list answered at. */
  const policies = async (): Promise<{ names: string[]; index: number }> => {
    const answer = await agent.request('GET', '/v1/acl/policies')
    expect(answer.status).to.equal(200)
    return { names: (answer.body as Array<{ Name: string }>).map((policy) => policy.Name).sort(), index: Number(answer.headers.get('x-service-index')) }
  }

  before(async function () {
    agent = await startAgent()
    dir = await mkdtemp(join(tmpdir(), 'warden-restore-'))
    for (let n = 0; n < 3; n++) expect((await agent.request('PUT', '/v1/acl/policy', { body: { Name: `saved-${n}`, Rules: '' } })).status).to.equal(200)
    saved = join(dir, 'backup.snap')
    const save = await warden(['snapshot', 'save', saved])
    expect(save.code, save.stderr).to.equal(0)
  })

  after(async function () {
    await agent?.stop()
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  it('refuses a damaged file before sending anything: exit 1, one line naming what is wrong with it', async function () {
    const whole = await readFile(saved)
    const truncated = join(dir, 'truncated.snap')
    await writeFile(truncated, whole.subarray(0, Math.floor(whole.length / 2)))
    const garbage = join(dir, 'garbage.snap')
    await writeFile(garbage, 'not a snapshot at all\n')
    // No agent at this address: had the command sent anything, it would say the connection was refused.
    const nowhere = { WARDEN_HTTP_ADDR: `127.0.0.1:${await freePort()}` }
    for (const file of [truncated, garbage]) {
      const ran = await warden(['snapshot', 'restore', file], nowhere)
      expect(ran.code, file).to.equal(1)
      expect(lines(ran.stderr), file).to.have.length(1)
      expect(ran.stderr, file).to.match(/^Error verifying snapshot file: /)
      expect(ran.stderr, file).not.to.include('refused')
      expect(ran.stdout, file).to.equal('')
    }
    const missing = await warden(['snapshot', 'restore', join(dir, 'no-such.snap')], nowhere)
    expect(missing.code).to.equal(1)
    expect(missing.stderr.trimEnd()).to.equal('Error opening snapshot file: ENOENT')
    const none = await warden(['snapshot', 'restore'])
    expect(none.code).to.equal(1)
    expect(lines(none.stderr)[0]).to.equal('Must specify exactly one positional argument: the file to restore the snapshot from')
  })

  it('a token without acl:write: exit 1 with the 403, and nothing changed', async function () {
    const created = await agent.request('PUT', '/v1/acl/token', { body: { Description: 'may not restore' } })
    expect(created.status).to.equal(200)
    const before = await policies()
    const ran = await warden(['snapshot', 'restore', saved], { WARDEN_HTTP_TOKEN: (created.body as { SecretID: string }).SecretID })
    expect(ran.code).to.equal(1)
    expect(lines(ran.stderr)).to.have.length(1)
    expect(ran.stderr).to.match(/^Error restoring snapshot: Unexpected response code: 403 \(permission_denied: /)
    expect(await policies()).to.deep.equal(before)
  })

  it('restores what was saved: a policy written since is gone, one deleted since is back, at an index past both', async function () {
    const original = await policies()
    expect((await agent.request('PUT', '/v1/acl/policy', { body: { Name: 'written-after', Rules: '' } })).status).to.equal(200)
    const doomed = ((await agent.request('GET', '/v1/acl/policy/name/saved-0')).body as { ID: string }).ID
    expect((await agent.request('DELETE', `/v1/acl/policy/${doomed}`)).status).to.equal(200)
    const changed = await policies()
    expect(changed.names).to.include('written-after').and.not.include('saved-0')

    const ran = await warden(['snapshot', 'restore', saved])
    expect(ran.code, ran.stderr).to.equal(0)
    expect(ran.stdout).to.equal('Restored snapshot\n')
    // Not a terminal: no progress line.
    expect(ran.stderr).to.equal('')

    const restored = await policies()
    expect(restored.names).to.deep.equal(original.names)
    // The restore is a write after the others: blocking queries wake, replication sees every record as changed.
    expect(restored.index).to.be.greaterThan(changed.index)
  })

  it('on a terminal, a progress line on standard error while verifying and while sending, each ended', async function () {
    let stdout = ''
    let stderr = ''
    const code = await runCli(['snapshot', 'restore', saved], {
      stdout: (text) => (stdout += text),
      stderr: (text) => (stderr += text),
      readStdin: async () => '',
      env: { WARDEN_HTTP_ADDR: agent.httpAddress, WARDEN_HTTP_TOKEN: agent.managementToken },
      isTty: true,
    })
    expect(code, stderr).to.equal(0)
    expect(stdout).to.equal('Restored snapshot\n')
    const shown = stderr.split('\n').filter((line) => line !== '')
    expect(shown).to.have.length(2)
    expect(shown[0]).to.match(/^(\rVerifying snapshot: \d+\.\d MiB)+$/)
    expect(shown[1]).to.match(/^(\rRestoring snapshot: \d+\.\d MiB)+$/)
    expect(stderr.endsWith('\n')).to.equal(true)
  })
})
