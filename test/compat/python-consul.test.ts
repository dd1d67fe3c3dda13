/**
 * An existing Consul client library, run by its own unmodified code against a real warden agent: Debian's
 * python3-consul2 (the `consul` package, at /usr/lib/python3/dist-packages/consul). The agent is started as the
 * black-box tests start it (`--dev`, loopback, free ports); the script test/compat/python_consul_check.py, run with
 * /usr/bin/python3, exercises through the library's classes every part of warden's API that this library version
 * covers (tokens, policies, roles, auth methods, binding rules, login/logout, replication status, config entries, a
 * blocking query on the X-Consul-Index it was given, and the status, catalog and operator reads), and prints what each
 * step returned. This file asserts on those values. The library sends only `X-Consul-Token` and reads only
 * `X-Consul-*` headers, so the test also proves the header aliases.
 *
 * Inputs go to the script on stdin (the management token never reaches a process list). The JWT for the login is
 * made here, signed with a key pair generated for the run, whose public half the script puts in the auth method.
 * Where /usr/bin/python3 cannot import the library, the suite prints one line and is skipped.
 */
import { expect } from 'chai'
import { spawn, spawnSync } from 'node:child_process'
import { resolve } from 'node:path'
import { exportSPKI, generateKeyPair, SignJWT } from 'jose'
import { startAgent, type AgentProcess } from '../support/agent.js'
import { UUID } from '../support/api.js'

const PYTHON = '/usr/bin/python3'
const SCRIPT = resolve(import.meta.dirname, 'python_consul_check.py')
const SCRIPT_TIMEOUT_MS = 90_000

/** The environment without what would redirect the library (CONSUL_HTTP_*) or the interpreter (PYTHON*). */
function scriptEnvironment(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('CONSUL_') && !name.startsWith('PYTHON')))
}

function libraryAvailable(): boolean {
  const probe = spawnSync(PYTHON, ['-c', 'import consul'], { env: scriptEnvironment(), stdio: 'ignore', timeout: 20_000 })
  return probe.status === 0
}

/** Runs the script with `input` on stdin; resolves with its parsed stdout, rejects with its stderr on failure. */
function runScript(input: Record<string, unknown>): Promise<any> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(PYTHON, [SCRIPT], { env: scriptEnvironment(), stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')))
    const timer = setTimeout(() => child.kill('SIGKILL'), SCRIPT_TIMEOUT_MS)
    child.once('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      if (code !== 0) return reject(new Error(`${SCRIPT} exited with ${code ?? signal}:\n${stderr}`))
      try {
        resolvePromise(JSON.parse(stdout))
      } catch (error) {
        reject(new Error(`${SCRIPT} printed what is not JSON (${(error as Error).message}):\n${stdout}\n${stderr}`))
      }
    })
    child.stdin.end(JSON.stringify(input))
  })
}

describe('an unmodified Consul client library (python3-consul2) against warden', function () {
  this.timeout(120_000)
  let agent: AgentProcess | undefined
  /** What the script printed: one entry per step. */
  let results: any
  const suffix = `${process.pid}-${Date.now()}`

  before(async function () {
    if (!libraryAvailable()) {
      console.log(`      python3-consul2 is missing: ${PYTHON} cannot import consul (apt-get install python3-consul2); skipping`)
      this.skip()
    }
    agent = await startAgent()
    const { publicKey, privateKey } = await generateKeyPair('RS256')
    const now = Math.floor(Date.now() / 1000)
    const jwt = await new SignJWT({ sub: 'alice', aud: 'warden', iat: now, exp: now + 600 }).setProtectedHeader({ alg: 'RS256' }).sign(privateKey)
    const [host, port] = agent.httpAddress.split(':') as [string, string]
    results = await runScript({ host, port: Number(port), token: agent.managementToken, suffix, publicKey: await exportSPKI(publicKey), jwt })
  })
  after(async () => {
    await agent?.stop()
  })

  const named = (prefix: string): string => `${prefix}-${suffix}`

  it('status, catalog and operator reads: the leader, the peers, the datacenter, the Raft configuration', () => {
    expect(results.status).to.deep.equal({ leader: agent!.clusterAddress, peers: [agent!.clusterAddress] })
    expect(results.datacenters).to.deep.equal(['dc1'])
    expect(results.raft_configuration.Servers).to.deep.equal([{ ID: 'test-node', Node: 'test-node', Address: agent!.clusterAddress, Leader: true, Voter: true }])
  })

  it('tokens.self with the client\'s token (sent as X-Consul-Token) is the management token', () => {
    expect(results.self.SecretID).to.equal(agent!.managementToken)
    expect(results.self.AccessorID).to.match(UUID)
    expect(results.self.Policies.map((link: { Name: string }) => link.Name)).to.deep.equal(['global-management'])
  })

  it('policies: create, read by ID and by name, update, list', () => {
    const created = results.policy_create
    expect(created).to.include({ Name: named('py-policy'), Description: 'made by python-consul', Rules: 'service_prefix "" { policy = "read" }' })
    expect(created.ID).to.match(UUID)
    expect(results.policy_get).to.include({ ID: created.ID, Name: named('py-policy') })
    expect(results.policy_get_by_name).to.include({ ID: created.ID, Description: 'made by python-consul' })
    expect(results.policy_update).to.include({ ID: created.ID, Description: 'updated by python-consul', Rules: 'service_prefix "" { policy = "write" }' })
    expect(results.policy_update.ModifyIndex).to.be.above(created.ModifyIndex)
    expect(results.policy_list_names).to.include.members(['global-management', named('py-policy')])
  })

  it('roles: create, read by ID and by name, update, list', () => {
    const created = results.role_create
    expect(created).to.include({ Name: named('py-role'), Description: 'role from python' })
    expect(created.Policies).to.deep.equal([{ ID: results.policy_create.ID, Name: named('py-policy') }])
    expect(results.role_get).to.include({ ID: created.ID, Name: named('py-role') })
    expect(results.role_get_by_name).to.include({ ID: created.ID })
    expect(results.role_update).to.include({ ID: created.ID, Description: 'role updated' })
    expect(results.role_update.Policies).to.deep.equal([{ ID: results.policy_create.ID, Name: named('py-policy') }])
    expect(results.role_list_names).to.include(named('py-role'))
  })

  it('tokens: create, read, self, update, clone, list (whole and by policy), delete, and a read after the delete', () => {
    const created = results.token_create
    expect(created.AccessorID).to.match(UUID)
    expect(created.SecretID).to.match(UUID)
    expect(created.Description).to.equal('token from python')
    expect(created.Roles).to.deep.equal([{ ID: results.role_create.ID, Name: named('py-role') }])
    expect(results.token_get).to.include({ AccessorID: created.AccessorID, SecretID: created.SecretID })
    expect(results.token_self_as_itself).to.include({ AccessorID: created.AccessorID })
    expect(results.token_update).to.include({ AccessorID: created.AccessorID, Description: 'token updated' })
    expect(results.token_update.Policies).to.deep.equal([{ ID: results.policy_create.ID, Name: named('py-policy') }])
    const clone = results.token_clone
    expect(clone.AccessorID).to.match(UUID).and.not.equal(created.AccessorID)
    expect(clone.SecretID).to.not.equal(created.SecretID)
    expect(clone.Description).to.equal('cloned by python')
    expect(clone.Policies).to.deep.equal(results.token_update.Policies)
    expect(results.token_list_accessors).to.include.members([results.self.AccessorID, created.AccessorID, clone.AccessorID])
    expect(results.token_list_by_policy).to.deep.equal([created.AccessorID, clone.AccessorID].sort())
    expect(results.token_delete).to.equal(true)
    // The library's answer to a 404: [X-Consul-Index, None].
    expect(results.token_get_deleted).to.have.length(2)
    expect(Number(results.token_get_deleted[0])).to.be.above(0)
    expect(results.token_get_deleted[1]).to.equal(null)
  })

  it('auth methods: create, read, update, list', () => {
    expect(results.auth_method_create).to.include({ Name: named('py-jwt'), Type: 'jwt' })
    expect(results.auth_method_get).to.include({ Name: named('py-jwt'), Type: 'jwt' })
    expect(results.auth_method_get.Config.BoundAudiences).to.deep.equal(['warden'])
    expect(results.auth_method_update).to.include({ Name: named('py-jwt'), Description: 'updated by python' })
    expect(results.auth_method_list_names).to.include(named('py-jwt'))
  })

  it('binding rules: create, read, update, list', () => {
    const created = results.binding_rule_create
    expect(created.ID).to.match(UUID)
    expect(created).to.include({ AuthMethod: named('py-jwt'), BindType: 'service', BindName: 'svc-${value.name}', Selector: 'value.name == "nobody"' })
    expect(results.binding_rule_get).to.include({ ID: created.ID, Selector: 'value.name == "nobody"' })
    expect(results.binding_rule_update).to.include({ ID: created.ID, Description: 'any name', Selector: '' })
    expect(results.binding_rule_list_ids).to.include(created.ID)
  })

  it('login through the jwt method binds the rule, the token works, logout deletes it, and it is refused after', () => {
    const login = results.login
    expect(login.AuthMethod).to.equal(named('py-jwt'))
    expect(login.ServiceIdentities).to.deep.equal([{ ServiceName: 'svc-alice' }])
    expect(login.Description).to.include('python-consul')
    expect(results.login_self).to.include({ AccessorID: login.AccessorID })
    expect(results.token_list_by_authmethod).to.deep.equal([login.AccessorID])
    expect(results.logout).to.equal(true)
    expect(results.self_after_logout).to.match(/^ACLPermissionDenied: /).and.include('acl_not_found')
  })

  it('ACL replication status: a primary datacenter\'s, in Consul\'s fields', () => {
    expect(results.replication).to.deep.equal({
      Enabled: false,
      Running: false,
      SourceDatacenter: '',
      ReplicationType: '',
      ReplicatedIndex: 0,
      ReplicatedRoleIndex: 0,
      ReplicatedTokenIndex: 0,
      LastSuccess: '0001-01-01T00:00:00Z',
      LastError: '0001-01-01T00:00:00Z',
      LastErrorMessage: '',
    })
  })

  it('config entries: write, read, a compare-and-set refused then taken, list, delete, and a read after the delete', () => {
    expect(results.config_put).to.equal(true)
    expect(results.config_get).to.include({ Kind: 'service-defaults', Name: named('py-web'), Protocol: 'http' })
    expect(results.config_put_stale_cas).to.equal(false)
    expect(results.config_put_cas).to.equal(true)
    expect(results.config_after_cas).to.include({ Protocol: 'grpc' })
    expect(results.config_after_cas.ModifyIndex).to.be.above(results.config_get.ModifyIndex)
    expect(results.config_list_names).to.include(named('py-web'))
    expect(results.config_delete).to.equal(true)
    expect(results.config_get_deleted).to.have.length(2)
    expect(results.config_get_deleted[1]).to.equal(null)
  })

  it('a blocking query on the X-Consul-Index it was given waits out its wait, and is woken by a write with a higher index', () => {
    const waited = results.blocking_timeout
    expect(Number(waited.index)).to.be.above(0)
    expect(waited.returned_index).to.equal(waited.index)
    expect(waited.seconds).to.be.within(0.9, 5)
    const woken = results.blocking_woken
    expect(Number(woken.returned_index)).to.be.above(Number(woken.index))
    expect(woken.names).to.include(woken.expected_name)
    // Woken by the write half a second in, long before its 20 s wait.
    expect(woken.seconds).to.be.within(0.3, 10)
  })

  it('the deletes of what the run made all answer true', () => {
    expect(results.cleanup).to.deep.equal({ token: true, binding_rule: true, auth_method: true, role: true, policy: true })
  })
})
