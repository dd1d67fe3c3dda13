/**
 * src/replica/raft-replica.ts successorOf: the voter a leader hands over to when `operator raft transfer-leader` names
 * none. A voter whose answers do not count yet (it lost its data and answers `rebuilt`, so its vouchedIndex lags its
 * matchIndex) could not win the election TimeoutNow starts; handing over to it costs an election timeout.
 */
import { expect } from 'chai'
import type { ProgressStatus, RaftStatus } from '../../../src/raft/index.js'
import { successorOf } from '../../../src/replica/raft-replica.js'

function progress(fields: Partial<ProgressStatus>): ProgressStatus {
  return { matchIndex: 0, vouchedIndex: 0, nextIndex: 1, state: 'replicate', isLearner: false, pendingSnapshotIndex: 0, inflightCount: 0, lastResponseTick: 100, ...fields }
}

function leaderStatus(progressById: Record<string, ProgressStatus>, voters = ['n1', 'n2', 'n3'], learners: string[] = []): RaftStatus {
  return {
    id: 'n1',
    term: 3,
    votedFor: 'n1',
    role: 'leader',
    leader: 'n1',
    commitIndex: 40,
    lastApplied: 40,
    firstIndex: 1,
    lastIndex: 40,
    lastTerm: 3,
    tick: 100,
    configuration: { voters, learners },
    configurationIndex: 1,
    leadTransferee: null,
    // As the core reports it: the leader's own progress is not in the map.
    progress: progressById,
  } as RaftStatus
}

describe('successorOf (a leadership transfer without a target)', () => {
  it('picks the voter with the furthest log among those heard from, by name on a tie', () => {
    expect(successorOf(leaderStatus({ n2: progress({ matchIndex: 38, vouchedIndex: 38 }), n3: progress({ matchIndex: 40, vouchedIndex: 40 }) }), 'n1', 10)).to.equal('n3')
    expect(successorOf(leaderStatus({ n2: progress({ matchIndex: 40, vouchedIndex: 40 }), n3: progress({ matchIndex: 40, vouchedIndex: 40 }) }), 'n1', 10)).to.equal('n2')
  })

  it('passes over a voter not heard from within an election timeout', () => {
    const status = leaderStatus({ n2: progress({ matchIndex: 40, vouchedIndex: 40, lastResponseTick: 80 }), n3: progress({ matchIndex: 30, vouchedIndex: 30 }) })
    expect(successorOf(status, 'n1', 10)).to.equal('n3')
  })

  it('passes over a voter whose answers do not count (rebuilt), however far its log reaches', () => {
    // n2 lost its data and was restarted: it holds the whole log again, but its answers say `rebuilt` until it is
    // re-added, so it vouches for nothing past what it acknowledged before the wipe.
    const status = leaderStatus({ n2: progress({ matchIndex: 40, vouchedIndex: 12 }), n3: progress({ matchIndex: 39, vouchedIndex: 39 }) })
    expect(successorOf(status, 'n1', 10)).to.equal('n3')
  })

  it('never picks a learner or itself, and has none to pick in a cluster of one voter', () => {
    const status = leaderStatus({ n4: progress({ matchIndex: 40, vouchedIndex: 40, isLearner: true }) }, ['n1'], ['n4'])
    expect(successorOf(status, 'n1', 10)).to.equal(undefined)
  })
})
