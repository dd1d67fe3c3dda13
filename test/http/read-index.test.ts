/**
 * X-Service-Index is never ahead of the body it comes with: a list answered with index N holds every record written
 * at N or before. Were the header read after the body (a write applied in between), a client blocking on N would never
 * see the record written at N until something else changed: a watch, or a secondary's replication, would miss it.
 *
 * Method: one agent process; lists read while policies are written concurrently, each answer checked.
 */
import { expect } from 'chai'
import { startAgent, type AgentProcess } from '../support/agent.js'

describe('read index and body agree', function () {
  this.timeout(60_000)
  let agent: AgentProcess

  before(async () => {
    agent = await startAgent()
  })

  after(async () => {
    await agent.stop()
  })

  it('a list never carries an index newer than its body: every record written at or before it is in it', async () => {
    const written = new Map<string, number>()
    let writing = true
    const writer = (async () => {
      for (let n = 0; n < 300; n += 1) {
        const created = await agent.request('PUT', '/v1/acl/policy', { body: { Name: `race-${n}`, Rules: '' } })
        written.set(created.body.ID, created.body.ModifyIndex)
      }
      writing = false
    })()
    const problems: string[] = []
    let reads = 0
    const readers = Array.from({ length: 8 }, async () => {
      while (writing) {
        const listed = await agent.request('GET', '/v1/acl/policies')
        reads += 1
        const index = Number(listed.headers.get('X-Service-Index'))
        const present = new Set((listed.body as Array<{ ID: string }>).map((policy) => policy.ID))
        for (const [id, modifyIndex] of written) if (modifyIndex <= index && !present.has(id)) problems.push(`index ${index} without the policy written at ${modifyIndex}`)
      }
    })
    await Promise.all([writer, ...readers])
    expect(reads).to.be.greaterThan(50)
    expect(problems.slice(0, 5)).to.deep.equal([])
  })
})
