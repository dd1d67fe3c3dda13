/**
 * Edge cases as readable scripts with golden output, after etcd-io/raft `interaction_test.go` and
 * `testdata/prevote.txt`: each line of a script is a command (`campaign a`, `tick c 25`, `process-ready a`,
 * `deliver b`, ...), and the test compares everything the commands print with the expected transcript. A change in
 * behaviour shows up as a readable diff of messages and states.
 *
 * Commands: campaign N | tick N [count] | propose N text | process-ready N (persist, print and queue messages) |
 * deliver N (step every queued message addressed to N) | drop N (discard queued messages to N) | status N (role, term,
 * leader, commit and last index; `no-vote` while its commit index is below its voteFromIndex) |
 * stabilize [N...] (process-ready and deliver among the given nodes, default all, until none has anything left; messages
 * to other nodes stay queued) | restart N (a crash and restart on its durable storage; messages queued to it are lost) |
 * wipe N [INDEX] (a crash and restart on an empty storage, with voteFromIndex INDEX, default unknown, as a rebuilt
 * server has until the leader answers its rejoin) | set-vote-from N INDEX | conf-change N addLearner|addVoter|removeServer
 * ID (prints the index or the refusal) | log N (its durable log as index/term type, and the configuration in force).
 */
import { expect } from 'chai'
import type { ConfChangeType } from '../../../src/raft/configuration.js'
import { decodeConfiguration } from '../../../src/raft/configuration.js'
import type { Message } from '../../../src/raft/messages.js'
import { VOTE_INDEX_UNKNOWN } from '../../../src/raft/storage/raft-storage.js'
import type { Configuration, Entry } from '../../../src/raft/types.js'
import { bytes, newNode, type TestNode } from './support.js'

function describeMessage(message: Message): string {
  const head = `${message.from}->${message.to} ${message.type} term=${message.term}`
  switch (message.type) {
    case 'requestVote':
      return `${head}${message.preVote ? ' pre' : ''} last=${message.lastLogIndex}/${message.lastLogTerm}`
    case 'requestVoteResponse':
      return `${head}${message.preVote ? ' pre' : ''} ${message.granted ? 'granted' : 'rejected'}`
    case 'appendEntries':
      return `${head} prev=${message.prevLogIndex}/${message.prevLogTerm} entries=[${message.entries.map((e) => `${e.index}/${e.term}`).join(' ')}] commit=${message.leaderCommit}`
    case 'appendEntriesResponse':
      return `${head} ${message.success ? 'ok' : 'reject'} index=${message.index}${message.success ? '' : ` hint=${message.conflictIndex}/${message.conflictTerm}`}${message.rebuilt === true ? ' rebuilt' : ''}`
    case 'heartbeatResponse':
      return `${head}${message.rebuilt === true ? ' rebuilt' : ''}`
    case 'heartbeat':
      return `${head} commit=${message.leaderCommit}`
    default:
      return head
  }
}

function describeConfiguration(configuration: Configuration): string {
  return `voters=${configuration.voters.join(',')}${configuration.learners.length > 0 ? ` learners=${configuration.learners.join(',')}` : ''}`
}

function describeEntry(entry: Entry): string {
  const head = `${entry.index}/${entry.term} ${entry.type}`
  return entry.type === 'configuration' ? `${head}(${describeConfiguration(decodeConfiguration(entry.data))})` : head
}

/** Runs a script against nodes a, b, c and returns the transcript. */
function runScript(script: string, options: Parameters<typeof newNode>[2]): string {
  const ids = ['a', 'b', 'c']
  const nodes = new Map<string, TestNode>(ids.map((id, i) => [id, newNode(id, ids, options, undefined, i + 1)]))
  let queued: Message[] = []
  const out: string[] = []
  const node = (id: string | undefined): TestNode => nodes.get(id ?? '') ?? expect.fail(`no node ${id}`)
  const processReady = (id: string): number => {
    const messages = node(id).drain()
    for (const message of messages) out.push(`  ${describeMessage(message)}`)
    queued.push(...messages)
    return messages.length
  }
  const deliver = (id: string): number => {
    const messages = queued.filter((m) => m.to === id)
    queued = queued.filter((m) => m.to !== id)
    for (const message of messages) node(id).core.step(message)
    return messages.length
  }
  const index = (text: string | undefined): number => {
    const value = Number(text)
    return Number.isInteger(value) && value >= 0 ? value : expect.fail(`not an index: ${text}`)
  }
  for (const line of script.trim().split('\n').map((text) => text.trim())) {
    if (line === '' || line.startsWith('#')) continue
    out.push(`> ${line}`)
    const [command, id, argument, ...rest] = line.split(/\s+/)
    switch (command) {
      case 'campaign':
        node(id).core.campaign()
        break
      case 'tick':
        node(id).tick(Number(argument ?? '1'))
        break
      case 'propose':
        node(id).core.propose([bytes(argument ?? '')])
        break
      case 'process-ready':
        processReady(id ?? '')
        break
      case 'deliver':
        deliver(id ?? '')
        break
      case 'drop':
        queued = queued.filter((m) => m.to !== id)
        break
      case 'status': {
        const status = node(id).status
        const vote = node(id).core.mayVote() ? '' : ' no-vote'
        out.push(`  ${id}: ${status.role} term=${status.term} leader=${status.leader ?? '-'} commit=${status.commitIndex} last=${status.lastIndex}${vote}`)
        break
      }
      case 'stabilize': {
        const among = [id, argument, ...rest].filter((name): name is string => name !== undefined)
        for (const name of among) node(name)
        const group = among.length > 0 ? among : ids
        for (let round = 0; ; round += 1) {
          if (round === 100) expect.fail('stabilize: still busy after 100 rounds')
          let busy = 0
          for (const name of group) busy += processReady(name)
          for (const name of group) busy += deliver(name)
          if (busy === 0) break
        }
        break
      }
      case 'restart':
        queued = queued.filter((m) => m.to !== id)
        node(id).restart()
        break
      case 'wipe': {
        const voteFromIndex = argument === undefined ? VOTE_INDEX_UNKNOWN : index(argument)
        queued = queued.filter((m) => m.to !== id)
        nodes.set(id ?? '', newNode(id ?? '', ids, { ...options, voteFromIndex }, undefined, ids.indexOf(id ?? '') + 101))
        break
      }
      case 'set-vote-from':
        node(id).core.setVoteFromIndex(index(argument))
        break
      case 'conf-change': {
        const result = node(id).core.proposeConfChange({ type: argument as ConfChangeType, nodeId: rest[0] ?? '' })
        out.push(result.ok ? `  index=${result.index} term=${result.term}` : `  refused: ${result.error}`)
        break
      }
      case 'log': {
        const { storage, status } = node(id)
        const entries = storage.entries(storage.firstIndex(), storage.lastIndex() + 1)
        out.push(`  ${id}: ${entries.length === 0 ? '(empty)' : entries.map(describeEntry).join(', ')}`)
        out.push(`  ${id}: configuration ${describeConfiguration(status.configuration)} at ${status.configurationIndex}`)
        break
      }
      default:
        expect.fail(`unknown command ${command}`)
    }
  }
  return out.join('\n')
}

describe('raft: interaction scripts', function () {
  it('PreVote: a server cut off from the leader pre-campaigns without raising its term, and rejoins quietly (Thesis §9.6)', function () {
    const transcript = runScript(
      `
      # a wins the pre-election, then the election of term 1.
      campaign a
      process-ready a
      deliver b
      deliver c
      process-ready b
      process-ready c
      deliver a
      process-ready a
      deliver b
      deliver c
      process-ready b
      process-ready c
      deliver a
      # a appends its no-op of term 1; both followers store it; a commits it and says so.
      process-ready a
      deliver b
      deliver c
      process-ready b
      process-ready c
      deliver a
      process-ready a
      deliver b
      deliver c
      process-ready b
      process-ready c
      deliver a
      status a
      # c hears nothing for a long time (all its messages are lost) and pre-campaigns, keeping its term.
      tick c 25
      process-ready c
      drop a
      drop b
      status c
      # c's next pre-vote reaches b, which hears from its leader and ignores it (Thesis §4.2.3).
      tick c 20
      process-ready c
      deliver b
      process-ready b
      drop a
      status c
      # The leader's next heartbeat brings c back, in the same term: nothing was disrupted.
      tick a
      process-ready a
      drop b
      deliver c
      process-ready c
      deliver a
      process-ready a
      status c
      status a
      `,
      { preVote: true, checkQuorum: true },
    )
    expect(transcript).to.equal(
      `
> campaign a
> process-ready a
  a->b requestVote term=1 pre last=0/0
  a->c requestVote term=1 pre last=0/0
> deliver b
> deliver c
> process-ready b
  b->a requestVoteResponse term=1 pre granted
> process-ready c
  c->a requestVoteResponse term=1 pre granted
> deliver a
> process-ready a
  a->b requestVote term=1 last=0/0
  a->c requestVote term=1 last=0/0
> deliver b
> deliver c
> process-ready b
  b->a requestVoteResponse term=1 granted
> process-ready c
  c->a requestVoteResponse term=1 granted
> deliver a
> process-ready a
  a->b appendEntries term=1 prev=0/0 entries=[1/1] commit=0
  a->c appendEntries term=1 prev=0/0 entries=[1/1] commit=0
> deliver b
> deliver c
> process-ready b
  b->a appendEntriesResponse term=1 ok index=1
> process-ready c
  c->a appendEntriesResponse term=1 ok index=1
> deliver a
> process-ready a
  a->b appendEntries term=1 prev=1/1 entries=[] commit=1
  a->c appendEntries term=1 prev=1/1 entries=[] commit=1
> deliver b
> deliver c
> process-ready b
  b->a appendEntriesResponse term=1 ok index=1
> process-ready c
  c->a appendEntriesResponse term=1 ok index=1
> deliver a
> status a
  a: leader term=1 leader=a commit=1 last=1
> tick c 25
> process-ready c
  c->a requestVote term=2 pre last=1/1
  c->b requestVote term=2 pre last=1/1
> drop a
> drop b
> status c
  c: preCandidate term=1 leader=- commit=1 last=1
> tick c 20
> process-ready c
  c->a requestVote term=2 pre last=1/1
  c->b requestVote term=2 pre last=1/1
  c->a requestVote term=2 pre last=1/1
  c->b requestVote term=2 pre last=1/1
> deliver b
> process-ready b
> drop a
> status c
  c: preCandidate term=1 leader=- commit=1 last=1
> tick a
> process-ready a
  a->b heartbeat term=1 commit=1
  a->c heartbeat term=1 commit=1
> drop b
> deliver c
> process-ready c
  c->a heartbeatResponse term=1
> deliver a
> process-ready a
> status c
  c: follower term=1 leader=a commit=1 last=1
> status a
  a: leader term=1 leader=a commit=1 last=1`.trim(),
    )
  })
  it('a wiped voter rejoins: until its commit index reaches voteFromIndex it refuses votes, so a candidate lacking a committed entry cannot win through it (§5.4.1, Thesis §9.6)', function () {
    const transcript = runScript(
      `
      # a leads term 1; everyone holds and has committed its no-op.
      campaign a
      stabilize
      # c is cut off while a commits x at index 2 with b: a majority, without c.
      propose a x
      process-ready a
      drop c
      stabilize a b
      drop c
      status a
      # a crashes, and b is rebuilt with an empty data dir: it forgot x, its vote and its term. It does not know yet
      # where the leader will re-add it, so it neither votes nor campaigns.
      wipe b
      status b
      tick b 25
      process-ready b
      status b
      # c, which lacks x, times out and asks for pre-votes. Its log is more up-to-date than b's empty one (§5.4.1): only
      # voteFromIndex keeps b from granting, and making c leader without a committed entry. b refuses.
      tick c 25
      process-ready c
      drop a
      deliver b
      process-ready b
      deliver c
      process-ready c
      status c
      # a comes back: its log is the most up-to-date. c grants it a vote, b still does not; a and c are a majority.
      restart a
      campaign a
      process-ready a
      deliver b
      deliver c
      process-ready b
      process-ready c
      deliver a
      stabilize
      status a
      status b
      # b holds x again. Once the leader has told it where it was re-added (say 3) and its commit index is there, it
      # votes again.
      set-vote-from b 3
      status b
      log b
      `,
      { preVote: true, checkQuorum: true },
    )
    expect(transcript).to.equal(
      `
> campaign a
> stabilize
  a->b requestVote term=1 pre last=0/0
  a->c requestVote term=1 pre last=0/0
  b->a requestVoteResponse term=1 pre granted
  c->a requestVoteResponse term=1 pre granted
  a->b requestVote term=1 last=0/0
  a->c requestVote term=1 last=0/0
  b->a requestVoteResponse term=1 granted
  c->a requestVoteResponse term=1 granted
  a->b appendEntries term=1 prev=0/0 entries=[1/1] commit=0
  a->c appendEntries term=1 prev=0/0 entries=[1/1] commit=0
  b->a appendEntriesResponse term=1 ok index=1
  c->a appendEntriesResponse term=1 ok index=1
  a->b appendEntries term=1 prev=1/1 entries=[] commit=1
  a->c appendEntries term=1 prev=1/1 entries=[] commit=1
  b->a appendEntriesResponse term=1 ok index=1
  c->a appendEntriesResponse term=1 ok index=1
> propose a x
> process-ready a
  a->b appendEntries term=1 prev=1/1 entries=[2/1] commit=1
  a->c appendEntries term=1 prev=1/1 entries=[2/1] commit=1
> drop c
> stabilize a b
  b->a appendEntriesResponse term=1 ok index=2
  a->b appendEntries term=1 prev=2/1 entries=[] commit=2
  a->c appendEntries term=1 prev=2/1 entries=[] commit=2
  b->a appendEntriesResponse term=1 ok index=2
> drop c
> status a
  a: leader term=1 leader=a commit=2 last=2
> wipe b
> status b
  b: follower term=0 leader=- commit=0 last=0 no-vote
> tick b 25
> process-ready b
> status b
  b: follower term=0 leader=- commit=0 last=0 no-vote
> tick c 25
> process-ready c
  c->a requestVote term=2 pre last=1/1
  c->b requestVote term=2 pre last=1/1
> drop a
> deliver b
> process-ready b
  b->c requestVoteResponse term=0 pre rejected
> deliver c
> process-ready c
> status c
  c: preCandidate term=1 leader=- commit=1 last=1
> restart a
> campaign a
> process-ready a
  a->b requestVote term=2 pre last=2/1
  a->c requestVote term=2 pre last=2/1
> deliver b
> deliver c
> process-ready b
  b->a requestVoteResponse term=0 pre rejected
> process-ready c
  c->a requestVoteResponse term=2 pre granted
> deliver a
> stabilize
  a->b requestVote term=2 last=2/1
  a->c requestVote term=2 last=2/1
  b->a requestVoteResponse term=2 rejected
  c->a requestVoteResponse term=2 granted
  a->b appendEntries term=2 prev=2/1 entries=[3/2] commit=2
  a->c appendEntries term=2 prev=2/1 entries=[3/2] commit=2
  b->a appendEntriesResponse term=2 reject index=2 hint=0/0 rebuilt
  c->a appendEntriesResponse term=2 reject index=2 hint=1/1
  a->b appendEntries term=2 prev=0/0 entries=[1/1 2/1 3/2] commit=2
  a->c appendEntries term=2 prev=1/1 entries=[2/1 3/2] commit=2
  b->a appendEntriesResponse term=2 ok index=3 rebuilt
  c->a appendEntriesResponse term=2 ok index=3
  a->b appendEntries term=2 prev=3/2 entries=[] commit=3
  a->c appendEntries term=2 prev=3/2 entries=[] commit=3
  b->a appendEntriesResponse term=2 ok index=3 rebuilt
  c->a appendEntriesResponse term=2 ok index=3
> status a
  a: leader term=2 leader=a commit=3 last=3
> status b
  b: follower term=2 leader=a commit=3 last=3 no-vote
> set-vote-from b 3
> status b
  b: follower term=2 leader=a commit=3 last=3
> log b
  b: 1/1 noop, 2/1 command, 3/2 noop
  b: configuration voters=a,b,c at 0`.trim(),
    )
  })

  it('a membership change overwritten by a new leader: the entry at its index changes term, and the configuration it carried goes with it (§5.3, Thesis §4.1)', function () {
    const transcript = runScript(
      `
      # a leads term 1 with a committed no-op everywhere.
      campaign a
      stabilize
      # a proposes to remove c. The configuration is in force on a from the moment it is in its log (Thesis §4.1),
      # so a no longer sends to c; its AppendEntries to b is lost, and a crashes before the change commits.
      conf-change a removeServer c
      process-ready a
      drop b
      log a
      # b and c elect b in term 2 (a's change never reached them); b's no-op goes to index 2, where a's change was.
      campaign b
      stabilize b c
      drop a
      status b
      log b
      # a restarts from its log, still in the configuration without c, and hears from b: its entry 2 of term 1 conflicts
      # with b's entry 2 of term 2 and is replaced (§5.3), and the configuration it carried goes with it (Thesis §4.1).
      restart a
      status a
      tick b
      stabilize
      log a
      status a
      # The change was never committed: a leader proposes it again, and it goes to a new index.
      conf-change b removeServer c
      stabilize
      log a
      `,
      {},
    )
    expect(transcript).to.equal(
      `
> campaign a
> stabilize
  a->b requestVote term=1 last=0/0
  a->c requestVote term=1 last=0/0
  b->a requestVoteResponse term=1 granted
  c->a requestVoteResponse term=1 granted
  a->b appendEntries term=1 prev=0/0 entries=[1/1] commit=0
  a->c appendEntries term=1 prev=0/0 entries=[1/1] commit=0
  b->a appendEntriesResponse term=1 ok index=1
  c->a appendEntriesResponse term=1 ok index=1
  a->b appendEntries term=1 prev=1/1 entries=[] commit=1
  a->c appendEntries term=1 prev=1/1 entries=[] commit=1
  b->a appendEntriesResponse term=1 ok index=1
  c->a appendEntriesResponse term=1 ok index=1
> conf-change a removeServer c
  index=2 term=1
> process-ready a
  a->b appendEntries term=1 prev=1/1 entries=[2/1] commit=1
> drop b
> log a
  a: 1/1 noop, 2/1 configuration(voters=a,b)
  a: configuration voters=a,b at 2
> campaign b
> stabilize b c
  b->a requestVote term=2 last=1/1
  b->c requestVote term=2 last=1/1
  c->b requestVoteResponse term=2 granted
  b->a appendEntries term=2 prev=1/1 entries=[2/2] commit=1
  b->c appendEntries term=2 prev=1/1 entries=[2/2] commit=1
  c->b appendEntriesResponse term=2 ok index=2
  b->c appendEntries term=2 prev=2/2 entries=[] commit=2
  c->b appendEntriesResponse term=2 ok index=2
> drop a
> status b
  b: leader term=2 leader=b commit=2 last=2
> log b
  b: 1/1 noop, 2/2 noop
  b: configuration voters=a,b,c at 0
> restart a
> status a
  a: follower term=1 leader=- commit=1 last=2
> tick b
> stabilize
  b->a heartbeat term=2 commit=0
  b->c heartbeat term=2 commit=2
  a->b heartbeatResponse term=2
  c->b heartbeatResponse term=2
  b->a appendEntries term=2 prev=1/1 entries=[2/2] commit=2
  a->b appendEntriesResponse term=2 ok index=2
> log a
  a: 1/1 noop, 2/2 noop
  a: configuration voters=a,b,c at 0
> status a
  a: follower term=2 leader=b commit=2 last=2
> conf-change b removeServer c
  index=3 term=2
> stabilize
  b->a appendEntries term=2 prev=2/2 entries=[3/2] commit=2
  a->b appendEntriesResponse term=2 ok index=3
  b->a appendEntries term=2 prev=3/2 entries=[] commit=3
  a->b appendEntriesResponse term=2 ok index=3
> log a
  a: 1/1 noop, 2/2 noop, 3/2 configuration(voters=a,b)
  a: configuration voters=a,b at 3`.trim(),
    )
  })

  it('a voter that lost its data forgot a vote it gave: a stale leader must not commit with its acknowledgements, or the leader that vote elected overwrites a committed entry (§5.4, Figure 3)', function () {
    const transcript = runScript(
      `
      # b leads term 1; everyone holds its no-op.
      campaign b
      stabilize
      # a campaigns for term 2. c grants its vote and persists it, but a stops before it hears the answer (the grant
      # stays queued to it), and b never hears of term 2.
      campaign a
      process-ready a
      drop b
      deliver c
      process-ready c
      # c loses its data and restarts empty, waiting for the answer to its join: it forgot term 2 and its vote.
      wipe c
      # b, still leader of term 1, appends x and probes c (its heartbeat answer shows c lost its log). c takes x,
      # since term 1 is news to it, and says in its answers that it is rebuilt: b does not count them, and x stays
      # uncommitted although b and c both hold it.
      propose b x
      tick b
      stabilize b c
      status b
      # a wakes up: the vote c gave before it lost its data elects a in term 2, and a's no-op replaces x at index 2.
      # Had b counted c's acknowledgement, x would have been committed, and now lost.
      deliver a
      process-ready a
      stabilize
      status a
      log b
      `,
      {},
    )
    expect(transcript).to.equal(
      `
> campaign b
> stabilize
  b->a requestVote term=1 last=0/0
  b->c requestVote term=1 last=0/0
  a->b requestVoteResponse term=1 granted
  c->b requestVoteResponse term=1 granted
  b->a appendEntries term=1 prev=0/0 entries=[1/1] commit=0
  b->c appendEntries term=1 prev=0/0 entries=[1/1] commit=0
  a->b appendEntriesResponse term=1 ok index=1
  c->b appendEntriesResponse term=1 ok index=1
  b->a appendEntries term=1 prev=1/1 entries=[] commit=1
  b->c appendEntries term=1 prev=1/1 entries=[] commit=1
  a->b appendEntriesResponse term=1 ok index=1
  c->b appendEntriesResponse term=1 ok index=1
> campaign a
> process-ready a
  a->b requestVote term=2 last=1/1
  a->c requestVote term=2 last=1/1
> drop b
> deliver c
> process-ready c
  c->a requestVoteResponse term=2 granted
> wipe c
> propose b x
> tick b
> stabilize b c
  b->a heartbeat term=1 commit=1
  b->c heartbeat term=1 commit=1
  b->a appendEntries term=1 prev=1/1 entries=[2/1] commit=1
  b->c appendEntries term=1 prev=1/1 entries=[2/1] commit=1
  c->b heartbeatResponse term=1 rebuilt
  c->b appendEntriesResponse term=1 reject index=1 hint=0/0 rebuilt
  b->c appendEntries term=1 prev=0/0 entries=[1/1 2/1] commit=1
  c->b appendEntriesResponse term=1 ok index=2 rebuilt
> status b
  b: leader term=1 leader=b commit=1 last=2
> deliver a
> process-ready a
  a->b appendEntries term=2 prev=1/1 entries=[2/2] commit=1
  a->c appendEntries term=2 prev=1/1 entries=[2/2] commit=1
> stabilize
  b->a appendEntriesResponse term=2 ok index=2
  c->a appendEntriesResponse term=2 ok index=2 rebuilt
  a->b appendEntries term=2 prev=2/2 entries=[] commit=2
  a->c appendEntries term=2 prev=2/2 entries=[] commit=2
  b->a appendEntriesResponse term=2 ok index=2
  c->a appendEntriesResponse term=2 ok index=2 rebuilt
> status a
  a: leader term=2 leader=a commit=2 last=2
> log b
  b: 1/1 noop, 2/2 noop
  b: configuration voters=a,b,c at 0`.trim(),
    )
  })
})
