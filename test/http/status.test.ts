/**
 * Status endpoints, and the agent's process contract: it prints where it listens, needs no token for status, answers
 * unknown paths and wrong methods with the one JSON error shape, and stops cleanly with exit code 0 on SIGTERM.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess } from '../support/agent.js'

describe('status endpoints and the agent process', () => {
  let agent: AgentProcess
  before(async () => {
    agent = await startAgent()
  })
  after(async () => {
    await agent.stop()
  })

  it('GET /v1/status/leader answers the leader cluster address as a JSON string, without a token', async () => {
    const response = await agent.request('GET', '/v1/status/leader', { token: null })
    expect(response.status).to.equal(200)
    expect(response.body).to.equal(agent.clusterAddress)
  })

  it('GET /v1/status/peers answers the members as a JSON array', async () => {
    const response = await agent.request('GET', '/v1/status/peers', { token: null })
    expect(response.status).to.equal(200)
    expect(response.body).to.deep.equal([agent.clusterAddress])
  })

  it('prints a UUID management token in --dev and writes it to <data-dir>/management-token', async () => {
    expect(agent.managementToken).to.match(/^[0-9a-f-]{36}$/)
    const { readFile, stat } = await import('node:fs/promises')
    const file = `${agent.dataDir}/management-token`
    expect((await readFile(file, 'utf8')).trim()).to.equal(agent.managementToken)
    expect((await stat(file)).mode & 0o777).to.equal(0o600)
  })

  it('never writes the management token into the log', () => {
    const logLines = agent.logs.filter((line) => line.startsWith('{'))
    expect(logLines.join('\n')).to.not.include(agent.managementToken)
  })

  it('answers an unknown path with a 404 in the JSON error shape', async () => {
    const response = await agent.request('GET', '/v1/no/such/thing')
    expect(response.status).to.equal(404)
    expect(response.body).to.include({ Code: 'not_found' })
    expect(response.body.Error).to.be.a('string')
  })

  it('answers a wrong method with a 405 and an Allow header', async () => {
    const response = await agent.request('POST', '/v1/acl/policies')
    expect(response.status).to.equal(405)
    expect(response.body.Code).to.equal('method_not_allowed')
    expect(response.headers.get('allow')).to.include('GET')
  })

  it('lists the Raft configuration for operator:read and refuses a token without it', async () => {
    const response = await agent.request('GET', '/v1/operator/raft/configuration')
    expect(response.status).to.equal(200)
    expect(response.body.Servers).to.deep.equal([{ ID: 'test-node', Node: 'test-node', Address: agent.clusterAddress, Leader: true, Voter: true }])
    expect(response.body.Index).to.be.a('number').above(0)
    const denied = await agent.request('GET', '/v1/operator/raft/configuration', { token: null })
    expect(denied.status).to.equal(403)
    expect(denied.body.Error).to.include('operator:read')
  })

  it('refuses to remove the only server, and needs operator:write to try', async () => {
    const denied = await agent.request('DELETE', '/v1/operator/raft/peer?id=test-node', { token: null })
    expect(denied.body.Error).to.include('operator:write')
    const refused = await agent.request('DELETE', '/v1/operator/raft/peer?id=test-node')
    expect(refused.status).to.equal(400)
    expect(refused.body.Field).to.equal('id')
  })

  it('answers waiting blocking queries when it stops, and stops with exit code 0', async () => {
    const other = await startAgent()
    const first = await other.request('GET', '/v1/acl/policies')
    const index = first.headers.get('x-service-index')
    const waiting = Array.from({ length: 20 }, () => other.request('GET', `/v1/acl/policies?index=${index}&wait=60s`))
    await new Promise((resolve) => setTimeout(resolve, 300))
    const started = Date.now()
    const stopped = other.stop()
    const answers = await Promise.all(waiting)
    expect(answers.every((answer) => answer.status === 200)).to.equal(true)
    expect(await stopped).to.equal(0)
    expect(Date.now() - started).to.be.below(30_000)
  })

  it('stops with exit code 0 on SIGTERM', async () => {
    const other = await startAgent()
    expect(await other.stop()).to.equal(0)
  })
})
