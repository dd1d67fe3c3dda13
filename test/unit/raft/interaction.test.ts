/**
 * Edge cases as readable scripts with golden output, after etcd-io/raft `interaction_test.go` and
 * `testdata/prevote.txt`: each line of a script is a command (`campaign a`, `tick c 25`, `process-ready a`,
 * `deliver b`, ...), and the test compares everything the commands print with the expected transcript. A change in
 * behaviour shows up as a readable diff of messages and states.
 *
 * Commands: campaign N | tick N [count] | propose N text | process-ready N (persist, print and queue messages) |
 * deliver N (step every queued message addressed to N) | drop N (discard queued messages to N) | status N.
 */
import { expect } from 'chai'
import type { Message } from '../../../src/raft/messages.js'
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
      return `${head} ${message.success ? 'ok' : 'reject'} index=${message.index}${message.success ? '' : ` hint=${message.conflictIndex}/${message.conflictTerm}`}`
    case 'heartbeat':
      return `${head} commit=${message.leaderCommit}`
    default:
      return head
  }
}

/** Runs a script against nodes a, b, c and returns the transcript. */
function runScript(script: string, options: Parameters<typeof newNode>[2]): string {
  const ids = ['a', 'b', 'c']
  const nodes = new Map<string, TestNode>(ids.map((id, i) => [id, newNode(id, ids, options, undefined, i + 1)]))
  let queued: Message[] = []
  const out: string[] = []
  const node = (id: string | undefined): TestNode => nodes.get(id ?? '') ?? expect.fail(`no node ${id}`)
  for (const line of script.trim().split('\n').map((text) => text.trim())) {
    if (line === '' || line.startsWith('#')) continue
    out.push(`> ${line}`)
    const [command, id, argument] = line.split(/\s+/)
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
      case 'process-ready': {
        const messages = node(id).drain()
        for (const message of messages) out.push(`  ${describeMessage(message)}`)
        queued.push(...messages)
        break
      }
      case 'deliver':
        for (const message of queued.filter((m) => m.to === id)) node(id).core.step(message)
        queued = queued.filter((m) => m.to !== id)
        break
      case 'drop':
        queued = queued.filter((m) => m.to !== id)
        break
      case 'status': {
        const status = node(id).status
        out.push(`  ${id}: ${status.role} term=${status.term} leader=${status.leader ?? '-'} commit=${status.commitIndex} last=${status.lastIndex}`)
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
})
