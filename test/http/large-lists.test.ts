/**
 * Lists longer than PACED_SERIALIZE_ITEMS (coalesce.ts) are read, rendered and serialized a slice at a time, giving
 * the event loop turns in between (lib/pace.ts), and sent as chunks with their Content-Length. What a client sees must
 * not change: the same records as the one-string path (`?pretty`, indented by the app), the same headers, and blocking
 * queries on such a list still answered with all of it.
 */
import { expect } from 'chai'
import { PACED_SERIALIZE_ITEMS } from '../../src/http/coalesce.js'
import { startAgent, type AgentProcess, type ApiResponse } from '../support/agent.js'
import { ok, sleep, unique } from '../support/api.js'

describe('large lists: paced reads and chunked JSON', () => {
  let agent: AgentProcess
  const created = PACED_SERIALIZE_ITEMS + 50

  before(async function () {
    this.timeout(120_000)
    agent = await startAgent()
    let next = 0
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < created) {
          next += 1
          await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('bulk'), Rules: 'acl = "read"' })
        }
      }),
    )
  })
  after(async () => {
    await agent?.stop()
  })

  it('answers a list longer than the paced threshold whole, with its Content-Length, as the one-string path does', async () => {
    const chunked = await agent.request('GET', '/v1/acl/policies')
    expect(chunked.status, chunked.text.slice(0, 200)).to.equal(200)
    expect(chunked.body).to.be.an('array').with.length.greaterThan(PACED_SERIALIZE_ITEMS)
    expect(chunked.headers.get('Content-Length')).to.equal(String(Buffer.byteLength(chunked.text)))
    expect(chunked.headers.get('Content-Type')).to.match(/^application\/json/)
    expect(chunked.headers.get('X-Service-Index')).to.match(/^\d+$/)
    const pretty = await agent.request('GET', '/v1/acl/policies?pretty')
    expect(pretty.status).to.equal(200)
    expect(pretty.text).to.include('\n    ')
    expect(chunked.body).to.deep.equal(pretty.body)
    expect(chunked.text).to.equal(JSON.stringify(pretty.body))
  })

  it('a blocking query on such a list, woken by a write, answers the whole new list', async () => {
    const first = await agent.request('GET', '/v1/acl/policies')
    const index = Number(first.headers.get('X-Service-Index'))
    // As a Consul client does: ask again while the index has not moved (a run that began before the write applied
    // answers with the index it began at).
    const watch = async (): Promise<ApiResponse> => {
      for (let round = 0; ; round += 1) {
        const answer = await agent.request('GET', `/v1/acl/policies?index=${index}&wait=30s`)
        if (Number(answer.headers.get('X-Service-Index')) > index || round === 5) return answer
      }
    }
    const waiting = watch()
    await sleep(300)
    const added = await ok(agent, 'PUT', '/v1/acl/policy', { Name: unique('wake'), Rules: 'acl = "read"' })
    const woken = await waiting
    expect(woken.status).to.equal(200)
    expect(Number(woken.headers.get('X-Service-Index'))).to.be.greaterThan(index)
    expect(woken.body).to.have.length(first.body.length + 1)
    expect(woken.body.map((policy: { ID: string }) => policy.ID)).to.include(added.ID)
    expect(woken.headers.get('Content-Length')).to.equal(String(Buffer.byteLength(woken.text)))
  })
})
