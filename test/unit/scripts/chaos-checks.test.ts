/**
 * The chaos runner's failover figure on a history as long as a ten-minute run makes (hundreds of thousands of
 * acknowledged writes): it must be computed without spreading the whole history into one call, which overflowed the
 * stack after a 600 s run, and must still find the first write acknowledged after each leader fault.
 */
import { expect } from 'chai'
import { failoverTimes } from '../../../scripts/chaos/checks.js'
import type { RecordedOperation } from '../../../scripts/chaos/history.js'
import type { NemesisEvent } from '../../../scripts/chaos/nemesis.js'

function write(id: number, start: number, end: number): RecordedOperation {
  return { id, client: id % 8, node: 'n1', kind: 'policy.update', key: 'policy:p', value: `v${id}`, start, end, outcome: 'ok' }
}

describe('chaos checks: failover times', () => {
  it('measures from each leader fault to the first write acknowledged after it, over 300,000 writes', () => {
    const history: RecordedOperation[] = []
    for (let id = 0; id < 300_000; id += 1) history.push(write(id, id, id + 5))
    // Writes sent after the fault at 1000 (done at 1010) end at 1015 at the earliest.
    const events: NemesisEvent[] = [{ at: 1_000, done: 1_010, action: 'kill', node: 'n1', wasLeader: true }]
    const report = failoverTimes(history, events)
    expect(report.faults).to.equal(1)
    expect(report.samplesMs).to.deep.equal([5])
    expect(report.withoutWrite).to.equal(0)
  })
})
